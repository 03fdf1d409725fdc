"""Direct chat takes the caller's API key from the process's copy (up to 60 s old) and confirms
it in the hold's transaction: one AWS call before the provider, and a revoked key still spends
nothing, reads nothing and gets its 401 (services/accounts/authentication.py, docs/chat.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.app_secret import app_secret
from batchroute.adapters.aws import client as aws_client
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.clock import FixedClock, isoformat
from batchroute.config import get_settings
from batchroute.domain.accounts.credentials import keyed_hash
from batchroute.money import Money
from batchroute.services.accounts.authentication import KEY_COPY_SECONDS
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from functions.api.deps import get_clock
from tests.integration.principals import TestOrg, new_org
from tests.integration.test_chat_fast_path import stack as stack  # the fixture
from tests.integration.test_chat_holds import LLAMA

BODY = {"model": LLAMA, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def client(stack: LocalStack, clock: FixedClock) -> Iterator[TestClient]:
    settings = get_settings().model_copy(update={"simulated_ttft_ms": 0, "simulated_inter_token_ms": 0})
    app = create_app(settings)
    app.dependency_overrides[get_clock] = lambda: clock
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture
def calls() -> Iterator[list[str]]:
    seen: list[str] = []

    def count(event_name: str, **_: Any) -> None:
        seen.append(event_name.split(".")[-1])

    events = aws_client("dynamodb").meta.events
    events.register("before-call.dynamodb", count)
    yield seen
    events.unregister("before-call.dynamodb", count)


def _revoke(key: str, clock: FixedClock) -> None:
    stored = identity_store().key_by_hash(keyed_hash(app_secret(), key))
    assert stored is not None
    assert identity_store().revoke_key(stored, isoformat(clock.now()))


def _nothing_held(org: TestOrg) -> None:
    ledger = LedgerStore(get_settings().table_name("ledger"))
    assert ledger.state(org.org_id).reserved == Money.zero()
    assert ledger.violations(org.org_id) == []


def test_a_key_revoked_after_its_copy_was_taken_gets_401_and_holds_nothing(
    client: TestClient, clock: FixedClock, calls: list[str]
) -> None:
    # Given a key whose copy this process took on a first request
    org = new_org(credit_usd="1")
    key = org.api_key()
    headers = {"Authorization": f"Bearer {key}"}
    assert client.post("/v1/chat/completions", json=BODY, headers=headers).status_code == 200
    balance = LedgerStore(get_settings().table_name("ledger")).state(org.org_id).balance
    # When the key is revoked elsewhere, within the copy's age
    _revoke(key, clock)
    clock.advance(seconds=5)
    calls.clear()
    answer = client.post("/v1/chat/completions", json=BODY, headers=headers)
    # Then 401 api_key_revoked, as a fresh read answers: the hold's check refused the copy
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"]["code"] == "api_key_revoked"
    assert calls[:2] == ["TransactWriteItems", "GetItem"]
    # And nothing was held or charged
    _nothing_held(org)
    assert LedgerStore(get_settings().table_name("ledger")).state(org.org_id).balance == balance
    # And the copy is gone: the next request reads the key first
    calls.clear()
    again = client.post("/v1/chat/completions", json=BODY, headers=headers)
    assert again.status_code == 401 and calls == ["GetItem"]


@pytest.mark.parametrize(
    ("body", "status_if_valid"),
    [
        ({"model": LLAMA, "messages": "not a list"}, 400),
        ({**BODY, "batch": True}, 202),
    ],
    ids=["invalid_body", "queued"],
)
def test_a_revoked_key_from_the_copy_gets_401_not_another_answer(
    client: TestClient, clock: FixedClock, body: dict[str, Any], status_if_valid: int
) -> None:
    # Given a copied key, and the answer the same body gets with a valid key
    org = new_org(credit_usd="1")
    key = org.api_key()
    headers = {"Authorization": f"Bearer {key}"}
    assert client.post("/v1/chat/completions", json=BODY, headers=headers).status_code == 200
    assert client.post("/v1/chat/completions", json=body, headers=org.key_headers()).status_code == (
        status_if_valid
    )
    # When the copied key is revoked and sends that body
    _revoke(key, clock)
    answer = client.post("/v1/chat/completions", json=body, headers=headers)
    # Then the key's 401 comes first: no validation answer, no queued job
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"]["code"] == "api_key_revoked"


def test_the_copy_is_read_again_once_it_is_a_minute_old(
    client: TestClient, clock: FixedClock, calls: list[str]
) -> None:
    # Given a key copied on a first request
    org = new_org(credit_usd="1")
    headers = org.key_headers()
    assert client.post("/v1/chat/completions", json=BODY, headers=headers).status_code == 200
    # When the next request comes within the minute, and another after it
    clock.advance(seconds=KEY_COPY_SECONDS - 1)
    calls.clear()
    assert client.post("/v1/chat/completions", json=BODY, headers=headers).status_code == 200
    within = list(calls)
    clock.advance(seconds=2)
    calls.clear()
    assert client.post("/v1/chat/completions", json=BODY, headers=headers).status_code == 200
    # Then the first used the copy (the transaction first), the second read the key first
    assert within[0] == "TransactWriteItems"
    assert calls[0] == "GetItem" and "TransactWriteItems" in calls
    _nothing_held(org)
