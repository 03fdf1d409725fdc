"""A batch create refused or failed before its transaction commits leaves none of its items in
the artifacts bucket: the input chunks it wrote while pricing are deleted (no batch record or
reclaim entry would ever lead retention to them; docs/batches.md "Lifecycle")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.aws import client as aws_client
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.clock import FixedClock
from batchroute.config import get_settings
from batchroute.domain.batches.record import FundingMoved
from batchroute.domain.billing.retention import ORPHAN_AFTER
from batchroute.services.batches.create import BatchService
from batchroute.services.workflow.retention_gc import ReclaimReport
from batchroute.wiring import wiring_for
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.batch_pipeline_support import heartbeat_all_lanes
from tests.integration.principals import TestOrg, new_org
from tests.integration.test_batches_api import _key_unseen_before_commit
from tests.integration.test_quotes import _item

PROMPT = "MY-CONFIDENTIAL-PROMPT"
ONE_CHUNK_AND_ONE = 1001  # input chunks hold 1,000 items: chunk 0 is closed before item 1,000


@pytest.fixture
def client(local_aws: LocalStack) -> TestClient:
    identity_store.cache_clear()
    heartbeat_all_lanes()
    return TestClient(create_app(), raise_server_exceptions=False)


def _items(count: int) -> list[dict[str, Any]]:
    return [_item(n, text=PROMPT) for n in range(count)]


def _create(client: TestClient, org: TestOrg, body: dict[str, Any], key: str = "key-00000001") -> Any:
    return client.post("/v1/batches", json=body, headers={**org.key_headers(), "Idempotency-Key": key})


def _stored(local_aws: LocalStack, prefix: str = "batches/") -> list[str]:
    """Every key under `prefix` in the artifacts bucket."""
    listed = aws_client("s3").list_objects_v2(Bucket=local_aws.buckets["artifacts"], Prefix=prefix)
    return sorted(entry["Key"] for entry in listed.get("Contents", []))


def _error_code(response: Any) -> str:
    return str(response.json()["error"]["code"])


def test_a_create_refused_for_credits_leaves_no_input_chunk(
    client: TestClient, local_aws: LocalStack
) -> None:
    # Given an org with no credit
    broke = new_org(credit_usd="0")
    # When it creates a batch of two chunks / Then 402, and none of its items is stored
    refused = _create(client, broke, {"items": _items(ONE_CHUNK_AND_ONE)})
    assert refused.status_code == 402 and _error_code(refused) == "insufficient_credits"
    assert _stored(local_aws) == []


def test_a_create_over_a_hard_spending_limit_leaves_no_input_chunk(
    client: TestClient, local_aws: LocalStack
) -> None:
    # Given a funded org whose hard daily limit is far below one batch's estimate
    org = new_org(credit_usd="10")
    controls = {
        "limit_enabled": True,
        "limit_period": "daily",
        "limit_amount": 0.000001,
        "limit_mode": "hard",
    }
    assert client.put("/v1/billing/controls", json=controls, headers=org.session_headers()).status_code == 200
    # When it creates a batch / Then 402, and none of its items is stored
    refused = _create(client, org, {"items": _items(3)})
    assert refused.status_code == 402 and _error_code(refused) == "insufficient_credits"
    assert _stored(local_aws) == []


def test_a_preflight_failure_after_a_closed_chunk_leaves_no_input_chunk(
    client: TestClient, local_aws: LocalStack
) -> None:
    # Given a body whose first 1,001 items are valid and whose last is not an object
    org = new_org(credit_usd="100")
    body = {"items": [*_items(ONE_CHUNK_AND_ONE), None]}
    # When it is created / Then 400 and, as docs/limits.md says, no input chunk is kept
    refused = _create(client, org, body)
    assert refused.status_code == 400 and _error_code(refused) == "batch_preflight_failed"
    assert _stored(local_aws) == []


def test_a_create_whose_items_differ_from_its_quote_leaves_no_input_chunk(
    client: TestClient, local_aws: LocalStack
) -> None:
    # Given a quote of 1,001 items
    org = new_org(credit_usd="100")
    items = _items(ONE_CHUNK_AND_ONE)
    quote = client.post("/v1/quotes/model", json={"items": items}, headers=org.key_headers())
    assert quote.status_code == 200, quote.text
    # When a create names it with the last item changed (found only once every item is written)
    changed = [*items[:-1], _item(ONE_CHUNK_AND_ONE, text=PROMPT)]
    refused = _create(client, org, {"quote_id": quote.json()["quote_id"], "items": changed})
    # Then 409 quote_mismatch, and none of its items is stored
    assert refused.status_code == 409 and _error_code(refused) == "quote_mismatch"
    assert _stored(local_aws) == []


def test_a_create_refused_as_funding_contended_leaves_no_input_chunk(
    client: TestClient, local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a wallet that moves under every funding attempt
    org = new_org(credit_usd="10")

    def moved(self: BatchRecords, *args: Any, **kwargs: Any) -> None:
        raise FundingMoved("the wallet moved")

    monkeypatch.setattr(BatchRecords, "create", moved)
    # When a batch is created / Then 503 funding_contended, and none of its items is stored
    refused = _create(client, org, {"items": _items(3)})
    assert refused.status_code == 503 and _error_code(refused) == "funding_contended"
    assert _stored(local_aws) == []


def test_a_create_that_loses_its_key_to_a_concurrent_request_leaves_only_that_batch(
    client: TestClient, local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a batch created under a key
    org = new_org(credit_usd="10")
    body = {"items": _items(3)}
    first = _create(client, org, body, key="raced-key-01")
    assert first.status_code == 202, first.text
    first_id = first.json()["batch"]["id"]
    # When the same request races it (the key unseen until the create transaction finds it)
    _key_unseen_before_commit(monkeypatch, reads=2)
    second = _create(client, org, body, key="raced-key-01")
    # Then the first answer is replayed, and only the first batch's chunk is stored
    assert second.status_code == 202 and second.content == first.content
    assert _stored(local_aws) == [f"batches/{first_id}/input/00000.jsonl"]


def test_queued_chat_refused_for_credits_leaves_no_input_chunk(
    client: TestClient, local_aws: LocalStack
) -> None:
    # Given an org with no credit
    broke = new_org(credit_usd="0")
    # When it queues a chat job / Then 402, and its prompt is not stored
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": PROMPT}], "batch": True}
    refused = client.post("/v1/chat/completions", json=body, headers=broke.key_headers())
    assert refused.status_code == 402, refused.text
    assert _stored(local_aws) == []


def test_a_transaction_that_commits_but_answers_an_error_keeps_its_chunks(
    client: TestClient, local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a create transaction that commits and then fails (its answer lost on the way)
    org = new_org(credit_usd="10")
    real = BatchRecords.create

    def committed_then_failed(self: BatchRecords, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        raise RuntimeError("the connection dropped after the commit")

    monkeypatch.setattr(BatchRecords, "create", committed_then_failed)
    # When a batch is created / Then the call fails, but the batch that committed keeps its items
    failed = _create(client, org, {"items": _items(3)})
    assert failed.status_code == 500
    monkeypatch.undo()
    listed = client.get("/v1/batches", headers=org.key_headers()).json()["data"]
    assert len(listed) == 1
    assert _stored(local_aws) == [f"batches/{listed[0]['id']}/input/00000.jsonl"]


def test_the_chunks_of_a_create_that_died_before_its_transaction_are_reclaimed(
    client: TestClient, local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a create whose function is killed after writing its chunks, before its
    # transaction (a time-out: no handler of its own runs, nothing is deleted)
    org = new_org(credit_usd="10")

    def killed(self: BatchRecords, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Task timed out after 29.00 seconds")

    monkeypatch.setattr(BatchRecords, "create", killed)
    monkeypatch.setattr(BatchService, "_discard_input", lambda self, batch_id, priced: None)
    assert _create(client, org, {"items": _items(3)}).status_code == 500
    monkeypatch.undo()
    left = _stored(local_aws)
    assert len(left) == 1 and left[0].endswith("/input/00000.jsonl")
    # When retention sweeps an hour later (before then the chunks may be a live create's)
    now = datetime.now(UTC)
    assert _sweep(now + ORPHAN_AFTER - timedelta(minutes=1)).objects_deleted == 0
    assert _stored(local_aws) == left
    swept = _sweep(now + ORPHAN_AFTER + timedelta(minutes=1))
    # Then the chunks no batch owns are deleted, and nothing else is left to sweep
    assert swept.objects_deleted == 1 and _stored(local_aws) == []
    assert _sweep(now + ORPHAN_AFTER + timedelta(minutes=2)).objects_deleted == 0


def test_a_committed_create_leaves_no_orphan_entry_for_retention(
    client: TestClient, local_aws: LocalStack
) -> None:
    # Given a batch created whole
    org = new_org(credit_usd="10")
    created = _create(client, org, {"items": _items(3)})
    assert created.status_code == 202, created.text
    batch_id = created.json()["batch"]["id"]
    # When retention sweeps after the orphans' hour / Then its chunks stay (its transaction
    # deleted the entry put before them)
    assert _sweep(datetime.now(UTC) + ORPHAN_AFTER + timedelta(minutes=1)).objects_deleted == 0
    assert _stored(local_aws) == [f"batches/{batch_id}/input/00000.jsonl"]


def _sweep(moment: datetime) -> ReclaimReport:
    return wiring_for(get_settings(), FixedClock(moment)).retention_gc.collect()
