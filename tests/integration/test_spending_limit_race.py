"""A hard spending limit holds when submits arrive at once (batch create, native and compat,
and queued chat): period spend + in-flight + estimate <= limit is a condition of the write
itself, so requests that all read the same spend cannot all be accepted.

Every thread is made to read the wallet before any of them writes (a barrier on the first
read), which is the interleaving that beat the limit when the check was a read before the
write; transactions are serializable as on DynamoDB (`serializable_transactions`)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.config import get_settings
from batchroute.domain.billing.ledger import WalletState
from batchroute.money import Money
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.batch_pipeline_support import heartbeat_all_lanes
from tests.integration.principals import TestOrg, new_org
from tests.integration.test_quotes import _item

HARD_DAILY_6 = {"limit_enabled": True, "limit_period": "daily", "limit_amount": 6, "limit_mode": "hard"}
SONNET = "claude-sonnet-4"
LLAMA = "meta-llama/Llama-3.3-70B-Instruct"


@pytest.fixture
def client(local_aws: LocalStack, serializable_transactions: None) -> TestClient:
    identity_store.cache_clear()
    heartbeat_all_lanes()
    return TestClient(create_app(), raise_server_exceptions=False)


@pytest.fixture
def limited_org(client: TestClient) -> TestOrg:
    org = new_org(credit_usd="100")
    saved = client.put("/v1/billing/controls", json=HARD_DAILY_6, headers=org.session_headers())
    assert saved.status_code == 200, saved.text
    return org


class FirstReads:
    """Holds each thread's first wallet read until every thread has read: the race window."""

    def __init__(self) -> None:
        self.barrier: threading.Barrier | None = None
        self.seen: set[int] = set()

    def arm(self, parties: int) -> None:
        self.barrier, self.seen = threading.Barrier(parties), set()

    def wait(self) -> None:
        if self.barrier is None or threading.get_ident() in self.seen:
            return
        self.seen.add(threading.get_ident())
        with contextlib.suppress(threading.BrokenBarrierError):
            self.barrier.wait(timeout=10)


@pytest.fixture
def first_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[FirstReads]:
    reads = FirstReads()
    original = LedgerStore.state

    def state(self: LedgerStore, org_id: str) -> WalletState:
        read = original(self, org_id)
        reads.wait()
        return read

    monkeypatch.setattr(LedgerStore, "state", state)
    yield reads
    if reads.barrier is not None:
        reads.barrier.abort()


def _at_once(parties: int, reads: FirstReads, send: Callable[[int], Any]) -> list[Any]:
    reads.arm(parties)
    answers: list[Any] = [None] * parties

    def run(n: int) -> None:
        answers[n] = send(n)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(parties)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return answers


def _ledger() -> LedgerStore:
    return LedgerStore(get_settings().table_name("ledger"))


def _sonnet_items(n: int) -> list[dict[str, Any]]:
    return [{**_item(i, model=SONNET), "max_output_tokens": 64000} for i in range(n * 10, n * 10 + 10)]


def test_concurrent_batch_creates_cannot_beat_a_hard_limit(
    client: TestClient, limited_org: TestOrg, first_reads: FirstReads
) -> None:
    # Given a $6 hard daily limit and a batch estimated at about $5
    headers = limited_org.key_headers()
    quote = client.post("/v1/quotes/model", json={"items": _sonnet_items(0)}, headers=headers)
    estimate = Decimal(quote.json()["pricing_estimate"]["total"]["amount"])
    assert Decimal(3) < estimate <= Decimal(6), estimate

    # When eight are submitted at once, each with its own Idempotency-Key
    def send(n: int) -> Any:
        return client.post(
            "/v1/batches",
            json={"items": _sonnet_items(n)},
            headers={**headers, "Idempotency-Key": f"race-batch-{n:04d}"},
        )

    answers = _at_once(8, first_reads, send)

    # Then exactly one is accepted; the others are 402 with the limit's figures
    codes = sorted(a.status_code for a in answers)
    assert codes == [202] + [402] * 7, [a.text for a in answers]
    for refused in (a for a in answers if a.status_code == 402):
        error = refused.json()["error"]
        assert error["code"] == "insufficient_credits"
        assert Decimal(error["details"]["limit"]) == 6 and error["details"]["period"] == "daily"
        assert Decimal(error["details"]["projected"]) > Decimal(6)
        assert Decimal(error["details"]["spent"]) == Decimal(0)
    state = _ledger().state(limited_org.org_id)
    assert state.reserved <= Money.usd("6")
    assert _ledger().violations(limited_org.org_id) == []


def test_concurrent_compat_batches_cannot_beat_a_hard_limit(
    client: TestClient, limited_org: TestOrg, first_reads: FirstReads
) -> None:
    # Given one uploaded vendor-format file of ten large requests per thread
    headers = limited_org.key_headers()
    file_ids = []
    for n in range(6):
        rows = "\n".join(
            json.dumps(
                {
                    "custom_id": f"r{i}",
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {
                        "model": SONNET,
                        "max_tokens": 64000,
                        "messages": [{"role": "user", "content": f"Summarize {n}."}],
                    },
                }
            )
            for i in range(10)
        )
        uploaded = client.post(
            "/v1/compat/v1/files",
            files={"file": ("requests.jsonl", rows.encode(), "application/jsonl")},
            data={"purpose": "batch"},
            headers=headers,
        )
        assert uploaded.status_code == 200, uploaded.text
        file_ids.append(uploaded.json()["id"])

    # When six batches are created at once
    def send(n: int) -> Any:
        return client.post(
            "/v1/compat/v1/batches",
            json={
                "input_file_id": file_ids[n],
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
            },
            headers=headers,
        )

    answers = _at_once(6, first_reads, send)

    # Then at most the limit's worth is accepted and reserved
    accepted = [a for a in answers if a.status_code == 200]
    assert len(accepted) == 1, [a.text for a in answers]
    assert _ledger().state(limited_org.org_id).reserved <= Money.usd("6")


def test_concurrent_queued_chat_cannot_beat_a_hard_limit(
    client: TestClient, limited_org: TestOrg, first_reads: FirstReads
) -> None:
    headers = limited_org.key_headers()
    body = {
        "model": SONNET,
        "max_tokens": 64000,
        "messages": [{"role": "user", "content": "Write the report."}],
        "batch": True,
    }
    # Given the estimate of one queued request
    first = client.post("/v1/chat/completions", json=body, headers=headers)
    assert first.status_code == 202, first.text
    one = _ledger().state(limited_org.org_id).reserved
    assert Money.usd("0.2") < one < Money.usd("1")
    room = (Money.usd("6").micros - one.micros) // one.micros

    # When twenty more arrive at once
    answers = _at_once(
        20, first_reads, lambda n: client.post("/v1/chat/completions", json=body, headers=headers)
    )

    # Then only what fits under the limit is held; the rest are 403 spending_limit_reached
    accepted = [a for a in answers if a.status_code == 202]
    refused = [a for a in answers if a.status_code == 403]
    assert len(accepted) == room and len(refused) == 20 - room, [a.text for a in answers]
    assert {a.json()["error"]["code"] for a in refused} == {"spending_limit_reached"}
    assert _ledger().state(limited_org.org_id).reserved <= Money.usd("6")
    assert _ledger().violations(limited_org.org_id) == []
