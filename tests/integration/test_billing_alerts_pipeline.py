"""Billing alerts raised by the money path itself, on moto with the real handlers: the batch
create reservation (through the API), the workflow's settlement, and a settlement that
completes even when the billing watch cannot record anything (docs/billing-alerts.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.billing_events import BillingEvents
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.config import get_settings
from batchroute.money import Money
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from tests.integration.batch_pipeline_support import create_batch, item, run_until_done, run_workflow
from tests.integration.billing_alerts_support import set_monthly_limit
from tests.integration.principals import TestOrg
from tests.integration.test_batch_pipeline import org  # noqa: F401 (the fixture; `stack` is conftest.py's)
from tests.integration.test_billing_alerts import set_controls
from tests.integration.test_quotes import _item


def kinds(org_id: str) -> list[str]:
    return [e["type"] for e in reversed(BillingEvents(get_settings().table_name("controls")).events(org_id))]


def test_the_settlement_raises_the_limit_and_balance_alerts_the_reservation_none(
    stack: LocalStack,
    org: TestOrg,  # noqa: F811
    tmp_path: Path,
) -> None:
    # Given $10 of credit, a soft monthly limit of a micro-dollar and a low-balance level of $10
    set_monthly_limit(org.org_id, "0.000001", "soft", low_balance_amount=Money.usd("10"))
    client = TestClient(create_app(), raise_server_exceptions=False)
    headers = org.key_headers()
    items = [_item(0), _item(1)]
    quote = client.post("/v1/quotes/model", json={"items": items}, headers=headers).json()
    # When a batch is created through the API (its reservation counts toward the limit)
    created = client.post(
        "/v1/batches",
        json={"quote_id": quote["quote_id"], "items": items},
        headers={**headers, "Idempotency-Key": "alerts-0001"},
    )
    assert created.status_code == 202, created.text
    # Then nothing is reported yet: an in-flight estimate is not spend (the limit is reached
    # when a settlement charges it), and the balance has not moved, so no low balance either
    assert kinds(org.org_id) == []
    # When the workflow runs and settles the batch
    batch_id = created.json()["batch"]["id"]
    arn = stack.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{batch_id}"
    assert run_until_done(stack, arn, budget_seconds=60)["status"] == "SUCCEEDED"
    # Then the charge reached the soft limit and took the balance under $10: one of each
    assert kinds(org.org_id) == ["billing.limit_reached", "billing.low_balance"]
    events = BillingEvents(get_settings().table_name("controls")).events(org.org_id)
    reached = next(e["details"] for e in events if e["type"] == "billing.limit_reached")
    assert Money.usd(reached["spent"]) > Money.zero() and reached["in_flight"] == "0.00"
    low = next(e["details"] for e in events if e["type"] == "billing.low_balance")
    balance = LedgerStore(get_settings().table_name("ledger")).state(org.org_id).balance
    assert Money.usd(low["balance"]) == balance < Money.usd("10")
    # And both were mailed to the owner (email alerts are on by default)
    subjects = sorted(
        line
        for p in (tmp_path / "outbox").glob("*.eml")
        for line in p.read_text().splitlines()
        if line.startswith("Subject:")
    )
    assert subjects == ["Subject: Low credit balance", "Subject: Spending limit reached"]


def test_a_failing_watch_never_fails_a_settlement(
    stack: LocalStack,
    org: TestOrg,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given alerts that would fire, and an events store that fails on every write and read
    set_controls(org.org_id, low_balance_amount=Money.usd("10"))

    calls: list[str] = []

    def down(*args: Any, **kwargs: Any) -> Any:
        calls.append("down")
        raise RuntimeError("controls table unavailable")

    monkeypatch.setattr(BillingEvents, "record_once", down)
    monkeypatch.setattr(BillingEvents, "low_balance_state", down)
    # When a batch runs through the workflow
    created = create_batch(org.org_id, [item(0)])
    assert run_workflow(stack, created.batch_id)["status"] == "SUCCEEDED"
    # Then it completed and was charged exactly as without alerts
    batch = BatchRecords(get_settings().table_name("batches")).get(created.batch_id)
    assert batch is not None and batch.state == "completed" and batch.settled_at
    state = LedgerStore(get_settings().table_name("ledger")).state(org.org_id)
    assert state.reserved == Money.zero() and state.balance < Money.usd("10")
    # And the watch did look (and fail), after the settlement
    assert calls
