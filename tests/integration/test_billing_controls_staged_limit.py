"""A hard spending limit set in two steps through the API (staged while the limit is off,
then `{limit_enabled: true}`) refuses a batch over it (docs/billing-controls.md)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.batch_pipeline_support import heartbeat_all_lanes
from tests.integration.principals import new_org
from tests.integration.test_quotes import _item


@pytest.fixture
def client(local_aws: LocalStack) -> TestClient:
    identity_store.cache_clear()
    heartbeat_all_lanes()
    return TestClient(create_app(), raise_server_exceptions=False)


def test_a_hard_limit_staged_then_turned_on_refuses_a_batch_over_it(client: TestClient) -> None:
    org = new_org(credit_usd="10")
    session = org.session_headers("owner")
    # Given a hard monthly limit of a micro-dollar staged while the limit is off
    staged = client.put(
        "/v1/billing/controls",
        json={"limit_mode": "hard", "limit_period": "monthly", "limit_amount": 0.000001},
        headers=session,
    )
    assert staged.status_code == 200, staged.text
    assert staged.json()["controls"]["limit_enabled"] is False
    # When the limit is turned on without naming its mode
    enabled = client.put("/v1/billing/controls", json={"limit_enabled": True}, headers=session)
    assert enabled.status_code == 200, enabled.text
    # Then it is on, and hard
    assert enabled.json()["controls"]["limit_enabled"] is True
    assert enabled.json()["controls"]["limit_mode"] == "hard"
    # And a batch over it is refused with the limit's 402
    created = client.post(
        "/v1/batches",
        json={"items": [_item(0)]},
        headers={**org.key_headers(), "Idempotency-Key": "staged-hard-0001"},
    )
    assert created.status_code == 402, created.text
    assert created.json()["error"]["details"]["limit"] == "0.000001"
