"""Batch holds no workflow will settle (services/workflow/stranded.py), on moto with the real
handlers, the real state machine and an injected clock for the sweeps: a batch whose
workflow ended without Settle or HandleFailure getting through keeps its customer's credit
reserved until the sweeper sends its `fail` step, which the settle worker runs as
HandleFailure would: each finished item charged once, the rest released."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.clock import FixedClock
from batchroute.config import Settings, get_settings
from batchroute.domain.billing.ledger import Reservation
from batchroute.services.workflow.retention_gc import WORKFLOW_SETTLE
from batchroute.wiring import wiring_for
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from tests.integration.batch_pipeline_support import (
    CreatedBatch,
    create_batch,
    drive,
    item,
    pollers,
    quiet_simulation,
    shorten,
    start,
)
from tests.integration.principals import TestOrg, new_org

SECOND = timedelta(seconds=1)


@pytest.fixture
def settings(local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Settings]:
    quiet_simulation(monkeypatch, tmp_path)
    yield get_settings()
    get_settings.cache_clear()


def sweep(settings: Settings, moment: datetime) -> list[str]:
    """One whole sweep at `moment` (the injected clock): the batches whose `fail` step it sent."""
    outcome = wiring_for(settings, FixedClock(moment)).sweeper.sweep()
    assert "failed_steps" not in outcome, outcome
    return outcome["stranded_batches_resent"]


def hold(settings: Settings, created: CreatedBatch) -> Reservation:
    found = LedgerStore(settings.table_name("ledger")).reservation(created.org_id, f"res_{created.batch_id}")
    assert found is not None
    return found


def settle_queue_run(stack: LocalStack) -> int:
    """The settle worker runs what its queue holds, to the end: the messages it received."""
    worker = next(p for p in pollers(stack) if p.queue.key == "settle")
    received = 0
    while got := worker.poll_once().received:
        received += got
    return received


def a_dead_workflow(stack: LocalStack, org: TestOrg) -> CreatedBatch:
    """A batch whose lanes ran, then whose settle worker never answered: Finalize and
    HandleFailure time out, the execution ends FAILED, the batch still running."""
    created = create_batch(org.org_id, [item(n) for n in range(6)], chunk_size=2)
    shorten(stack, "Finalize", 1)
    shorten(stack, "HandleFailure", 1)
    status = drive(stack, start(stack, created.batch_id), unanswered=frozenset({"finalize", "fail"}))
    assert status == "FAILED"
    return created


def test_a_hold_its_dead_workflow_left_pending_is_settled_once_by_the_sweeper(
    settings: Settings, local_aws: LocalStack
) -> None:
    # Given a batch whose workflow died, expired by the sweeper an hour past its SLA deadline
    created = a_dead_workflow(local_aws, new_org(credit_usd="5"))
    expired_at = datetime.fromisoformat(created.record.deadline_at) + timedelta(hours=1)
    assert sweep(settings, expired_at) == []
    assert hold(settings, created).pending
    # When sweeps run until a second before no workflow can be on it any more
    assert sweep(settings, expired_at + WORKFLOW_SETTLE - SECOND) == []
    # Then nothing is sent; a second after, its `fail` step is sent, once in the hour
    due = expired_at + WORKFLOW_SETTLE + SECOND
    assert sweep(settings, due) == [created.batch_id]
    assert sweep(settings, due + timedelta(minutes=1)) == []
    # When the settle worker runs it
    assert settle_queue_run(local_aws) >= 1
    # Then the batch stays expired and is settled: its completed items charged, the rest
    # released (reserved = charged + released), the hold no longer pending
    batch = wiring_for(settings, FixedClock(due)).batch_records.get(created.batch_id)
    assert batch is not None and batch.state == "expired" and batch.settled_at is not None
    settled = hold(settings, created)
    assert settled.status != "pending"
    assert settled.amount == settled.charged + settled.released + settled.absorbed
    assert settled.charged.micros > 0 and settled.released.micros > 0
    # And a later sweep finds nothing to send, and the ledger holds one charge
    assert sweep(settings, due + timedelta(hours=2)) == []
    entries = LedgerStore(settings.table_name("ledger")).entries(created.org_id, limit=None)
    kinds = [e["entry_type"] for e in entries if e.get("reservation_id") == settled.reservation_id]
    assert kinds.count("charge") == 1, kinds


def test_a_batch_canceled_after_its_workflow_died_has_its_hold_released(
    settings: Settings, local_aws: LocalStack
) -> None:
    # Given a batch whose workflow died, then canceled by its customer (no workflow settles it)
    org = new_org(credit_usd="5")
    created = a_dead_workflow(local_aws, org)
    with TestClient(create_app(settings)) as client:
        answer = client.post(f"/v1/batches/{created.batch_id}/cancel", headers=org.key_headers(), json={})
    assert answer.status_code == 200, answer.text
    batch = wiring_for(settings, FixedClock(datetime.now(UTC))).batch_records.get(created.batch_id)
    assert batch is not None and batch.state == "canceled" and batch.state_changed_at is not None
    assert hold(settings, created).pending
    # When the sweeper runs once no workflow can be on it, and the settle worker runs its step
    due = datetime.fromisoformat(created.record.deadline_at) + WORKFLOW_SETTLE + SECOND
    assert sweep(settings, due) == [created.batch_id]
    settle_queue_run(local_aws)
    # Then it stays canceled and its hold is resolved, nothing over the reservation
    batch = wiring_for(settings, FixedClock(due)).batch_records.get(created.batch_id)
    assert batch is not None and batch.state == "canceled" and batch.settled_at is not None
    settled = hold(settings, created)
    assert settled.status != "pending"
    assert settled.amount == settled.charged + settled.released + settled.absorbed
