"""Retention GC of batches that end terminal without Finalize (docs/retention.md), on moto
with the real handlers, the real state machine and an injected clock for the sweeps: the
expiry sweeper expiring a batch whose workflow died, and the failure path whose finalize
never gets through (an error that outlasts the step, or a permanent one it logs). Each
batch goes on the reclaim index when it turns terminal, and its bytes (the customer's
prompts, the lanes' result chunks) go once its workflow has had time to settle and the
org's window has passed; only the receipt stays."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.aws import client as aws_client
from batchroute.adapters.batch_artifacts import batch_prefix, receipt_key, results_key
from batchroute.clock import FixedClock, isoformat
from batchroute.config import Settings, get_settings
from batchroute.domain.batches.jsonl import CorruptArtifact
from batchroute.domain.batches.record import BatchRecord
from batchroute.errors import PermanentError
from batchroute.services.workflow.finalize import Finalizer
from batchroute.wiring import Wiring, wiring_for
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.batch_pipeline_support import (
    CreatedBatch,
    create_batch,
    drive,
    heartbeat_all_lanes,
    item,
    shorten,
    start,
)
from tests.integration.principals import new_org

GRACE = timedelta(hours=72)
# how long a workflow may still be on a terminal batch (retention_gc.WORKFLOW_SETTLE, docs/retention.md)
SETTLE = timedelta(days=4)
SECOND = timedelta(seconds=1)


@pytest.fixture
def settings(local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[Settings]:
    for name, value in {
        "SIMULATED_LATENCY_MS": "0",
        "SIMULATED_BATCH_POLL_SECONDS": "0",
        "PROVIDER_RETRY_BASE_SECONDS": "0",
        "LOCAL_OUTBOX_DIR": str(tmp_path),
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    identity_store.cache_clear()
    heartbeat_all_lanes()
    yield get_settings().model_copy(update={"retention_grace_hours": 72})
    get_settings.cache_clear()


def keys(stack: LocalStack, batch_id: str) -> list[str]:
    listed = aws_client("s3").list_objects_v2(
        Bucket=stack.buckets["artifacts"], Prefix=batch_prefix(batch_id)
    )
    return sorted(entry["Key"] for entry in listed.get("Contents", []))


def reclaim_entry(settings: Settings, batch_id: str) -> str | None:
    """The batch's entry on the reclaim index (`<review_at>#<batch_id>`), or None."""
    got = aws_client("dynamodb").get_item(
        TableName=settings.table_name("batches"),
        Key={"pk": {"S": f"BATCH#{batch_id}"}, "sk": {"S": "RECLAIM"}},
    )
    item = got.get("Item")
    return None if item is None else str(item["gsi2sk"]["S"])


def record(wiring: Wiring, batch_id: str) -> BatchRecord:
    batch = wiring.batch_records.get(batch_id)
    assert batch is not None
    return batch


def gc_at(settings: Settings, moment: datetime) -> list[str]:
    """One retention sweep at `moment` (the injected clock): the batches it reclaimed."""
    return wiring_for(settings, FixedClock(moment)).retention_gc.collect().reclaimed


def has_prompts_and_outputs(stack: LocalStack, batch_id: str) -> bool:
    stored = keys(stack, batch_id)
    return any("/input/" in key for key in stored) and any("/results/" in key for key in stored)


def assert_reclaimed_after_settling(settings: Settings, stack: LocalStack, batch_id: str) -> None:
    """The batch, terminal and never finalized, keeps its bytes until SETTLE + GRACE after
    its terminal transition, then loses all but its receipt."""
    wiring = wiring_for(settings, FixedClock(datetime.now(UTC)))
    ended = datetime.fromisoformat(record(wiring, batch_id).state_changed_at or "")
    # When retention sweeps run at the entry's time and a second before settle + grace
    assert gc_at(settings, ended + GRACE + SECOND) == []
    assert gc_at(settings, ended + SETTLE + GRACE - SECOND) == []
    # Then the prompts and the lanes' outputs are still there (a live workflow could finalize)
    assert has_prompts_and_outputs(stack, batch_id)
    # When one runs a second after
    assert gc_at(settings, ended + SETTLE + GRACE + SECOND) == [batch_id]
    # Then every object but the receipt is gone, the record says so, and the entry is dropped
    assert set(keys(stack, batch_id)) <= {receipt_key(batch_id)}
    assert record(wiring, batch_id).artifacts_reclaimed_at == isoformat(ended + SETTLE + GRACE + SECOND)
    assert reclaim_entry(settings, batch_id) is None


def six_items(org_id: str) -> CreatedBatch:
    return create_batch(org_id, [item(n) for n in range(6)], chunk_size=2)


def test_a_batch_the_sweeper_expires_after_its_workflow_died_is_reclaimed(
    settings: Settings, local_aws: LocalStack
) -> None:
    # Given a batch whose lanes ran, then whose settle worker never answered: Finalize and
    # HandleFailure time out and the execution fails with the batch still running
    org = new_org(credit_usd="5")
    created = six_items(org.org_id)
    shorten(local_aws, "Finalize", 1)
    shorten(local_aws, "HandleFailure", 1)
    status = drive(local_aws, start(local_aws, created.batch_id), unanswered=frozenset({"finalize", "fail"}))
    wiring = wiring_for(settings, FixedClock(datetime.now(UTC)))
    assert status == "FAILED" and record(wiring, created.batch_id).state == "running"
    assert has_prompts_and_outputs(local_aws, created.batch_id)
    # When the sweeper runs an hour past its SLA deadline
    swept = datetime.fromisoformat(created.record.deadline_at) + timedelta(hours=1)
    outcome = wiring_for(settings, FixedClock(swept)).sweeper.sweep()
    # Then it expires the batch and puts it on the reclaim index at the end of the grace window
    assert created.batch_id in outcome["expired"]
    assert record(wiring, created.batch_id).finalized_at is None
    assert reclaim_entry(settings, created.batch_id) == f"{isoformat(swept + GRACE)}#{created.batch_id}"
    # And retention reclaims its bytes once its workflow had time to settle and the window passed
    assert_reclaimed_after_settling(settings, local_aws, created.batch_id)


def test_a_batch_failed_whose_finalize_keeps_raising_is_reclaimed(
    settings: Settings, local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a batch whose Finalize raises every time (an outage that outlasts the step): the
    # failure path marks it failed, its own finalize raises too, and HandleFailure times out
    org = new_org(credit_usd="5")
    created = six_items(org.org_id)
    shorten(local_aws, "Finalize", 2)
    shorten(local_aws, "HandleFailure", 3)

    def outage(self: Finalizer, batch: BatchRecord) -> None:
        raise RuntimeError("S3 InternalError")

    monkeypatch.setattr(Finalizer, "finalize", outage)
    status = drive(local_aws, start(local_aws, created.batch_id))
    # Then the batch is failed, never finalized, and on the reclaim index all the same
    wiring = wiring_for(settings, FixedClock(datetime.now(UTC)))
    batch = record(wiring, created.batch_id)
    assert status == "FAILED" and batch.state == "failed" and batch.finalized_at is None
    assert reclaim_entry(settings, created.batch_id) is not None
    # And retention reclaims its bytes once its workflow had time to settle and the window passed
    assert_reclaimed_after_settling(settings, local_aws, created.batch_id)


def test_a_batch_failed_whose_finalize_error_is_permanent_is_reclaimed_but_its_receipt(
    settings: Settings, local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a batch whose Finalize finds a corrupt artifact: the failure path logs the same
    # error (`finalize_error`), settles the batch and ends the workflow on its failure path
    org = new_org(credit_usd="5")
    created = six_items(org.org_id)

    def corrupt(self: Finalizer, batch: BatchRecord) -> None:
        raise CorruptArtifact("a lane result chunk: line 3 is not a JSON object")

    monkeypatch.setattr(Finalizer, "finalize", corrupt)
    status = drive(local_aws, start(local_aws, created.batch_id))
    wiring = wiring_for(settings, FixedClock(datetime.now(UTC)))
    batch = record(wiring, created.batch_id)
    assert status == "FAILED" and batch.state == "failed" and batch.settled_at is not None
    assert batch.finalized_at is None and receipt_key(created.batch_id) in keys(local_aws, created.batch_id)
    # Then it is on the reclaim index, and retention takes all its bytes but the receipt in time
    assert reclaim_entry(settings, created.batch_id) is not None
    assert_reclaimed_after_settling(settings, local_aws, created.batch_id)
    assert keys(local_aws, created.batch_id) == [receipt_key(created.batch_id)]


def test_a_finalize_after_the_bytes_were_reclaimed_writes_nothing(
    settings: Settings, local_aws: LocalStack
) -> None:
    # Given an expired batch that never reached Finalize, whose bytes retention reclaimed
    org = new_org(credit_usd="5")
    created = six_items(org.org_id)
    swept = datetime.fromisoformat(created.record.deadline_at) + timedelta(hours=1)
    assert created.batch_id in wiring_for(settings, FixedClock(swept)).sweeper.sweep()["expired"]
    assert gc_at(settings, swept + SETTLE + GRACE + SECOND) == [created.batch_id]
    # When a late finalize message for it is handled (redriven long after its workflow died)
    wiring = wiring_for(settings, FixedClock(swept + SETTLE + GRACE + 2 * SECOND))
    with pytest.raises(PermanentError):
        wiring.pipeline.finalizer.finalize(record(wiring, created.batch_id))
    # Then it refuses: no results.jsonl of missing rows is written, and nothing is rescheduled
    assert results_key(created.batch_id) not in keys(local_aws, created.batch_id)
    assert record(wiring, created.batch_id).finalized_at is None
    assert reclaim_entry(settings, created.batch_id) is None


def test_a_batch_canceled_after_its_workflow_died_is_reclaimed(
    settings: Settings, local_aws: LocalStack
) -> None:
    # Given a batch whose workflow died with the batch still running (its settle worker down)
    org = new_org(credit_usd="5")
    created = six_items(org.org_id)
    shorten(local_aws, "Finalize", 1)
    shorten(local_aws, "HandleFailure", 1)
    status = drive(local_aws, start(local_aws, created.batch_id), unanswered=frozenset({"finalize", "fail"}))
    assert status == "FAILED" and has_prompts_and_outputs(local_aws, created.batch_id)
    # When the customer cancels it (no workflow is left to finalize it)
    with TestClient(create_app(settings)) as client:
        answer = client.post(f"/v1/batches/{created.batch_id}/cancel", headers=org.key_headers(), json={})
    assert answer.status_code == 200, answer.text
    # Then it is on the reclaim index, and retention reclaims its bytes once its window passed
    assert reclaim_entry(settings, created.batch_id) is not None
    assert_reclaimed_after_settling(settings, local_aws, created.batch_id)
