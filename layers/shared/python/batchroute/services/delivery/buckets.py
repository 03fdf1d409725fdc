"""Bucket delivery: a finished batch's result, error and receipt artifacts pushed to each of
the org's enabled delivery targets, retried on a schedule, redelivered on request
(domain/delivery/buckets.py for the states and schedule, docs/delivery-targets.md).

- `deliver_batch(batch)` (the workflow's Deliver step): makes the batch's delivery once,
  snapshotting the enabled targets, and makes the first attempt at once;
- `enqueue_due()` (the sweeper, every minute): puts a `deliver_bucket` message on the
  deliver queue for each delivery whose retry is due, and records as failed any attempt
  whose worker stopped (its lease ran out);
- `run_due(batch_id)` (the deliver worker, on that message): makes the attempt owed now;
- `redeliver(batch)` (`POST /v1/batches/{id}/redeliver`): a new round to the targets
  enabled now, queued at once;
- `view(batch)`: the `delivery` of the batch's detailed view.

An attempt pushes only to the targets not delivered yet; each artifact streams from our
bucket into theirs (multipart when large). Every attempt is claimed by a conditional write
first, so repeated messages never push the same attempt twice. Retention's reclaim mark is
read afresh before each target, and an artifact the batch names whose object is gone fails
the target (`results_expired` once reclaimed), never skipped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import datetime, timedelta
from typing import BinaryIO, Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.batches.record import ArtifactKeys, BatchRecord
from batchroute.domain.batches.states import TERMINAL
from batchroute.domain.chat.objects import DIRECT_SOURCE
from batchroute.domain.delivery.buckets import (
    INTERRUPTED,
    LEASE_SECONDS,
    DeliveryError,
    DeliveryRecord,
    DeliveryView,
    TargetDelivery,
    new_round,
    pending_view,
)
from batchroute.domain.delivery.targets import BucketRefused, DeliveryTarget, batch_object_keys
from batchroute.errors import Conflict, Gone
from batchroute.observability import logger
from batchroute.services.delivery.targets import Bucket
from batchroute.workflow.queues import TaskSender
from batchroute.workflow.tasks import StepName, unwaited_task

STEP: StepName = "deliver_bucket"  # the deliver worker's message for a retry or a redeliver
JSONL = "application/jsonl"
RECLAIMED = "retention reclaimed the batch's result bytes"


class DeliveryStore(Protocol):
    def get(self, batch_id: str) -> DeliveryRecord | None: ...

    def start_round(self, record: DeliveryRecord, *, replacing: DeliveryRecord | None) -> bool: ...

    def claim(self, batch_id: str, *, attempt: int, now_iso: str, lease_until_iso: str) -> bool: ...

    def complete(
        self, record: DeliveryRecord, *, attempt: int, lease_expired_before: str | None = None
    ) -> bool: ...

    def due(self, now_iso: str, limit: int = 100) -> list[str]: ...

    def mark_enqueued(self, batch_id: str, *, next_attempt_at: str, recheck_at: str) -> bool: ...


class Targets(Protocol):
    """services/delivery/targets.py:DeliveryTargets"""

    def enabled(self, org_id: str) -> list[DeliveryTarget]: ...

    def find(self, org_id: str, target_id: str) -> DeliveryTarget | None: ...

    def open(self, target: DeliveryTarget) -> Bucket: ...


class Batches(Protocol):
    """services/batches/ports.py:BatchReader's one method, declared here too: the batches
    context sits above delivery (batches -> billing -> delivery), so delivery cannot import it."""

    def get(self, batch_id: str) -> BatchRecord | None: ...


class ArtifactStreams(Protocol):
    """adapters/customer_buckets.py:ArtifactSource: a batch artifact opened as a stream."""

    def open(self, key: str) -> BinaryIO | None: ...


@dataclass
class DueReport:
    queued: list[str] = field(default_factory=list)
    attempted: list[str] = field(default_factory=list)  # made in place (no queue wired)
    recovered: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[str]]:
        return {"queued": self.queued, "attempted": self.attempted, "recovered": self.recovered}


@dataclass(eq=False)
class BucketDelivery:
    records: DeliveryStore
    targets: Targets
    batches: Batches
    artifacts: ArtifactStreams
    clock: Clock
    _: KW_ONLY
    queue: TaskSender | None = None
    lease_seconds: int = LEASE_SECONDS

    # -- the Deliver step ----------------------------------------------------------------
    def deliver_batch(self, batch: BatchRecord, *, now: datetime | None = None) -> DeliveryRecord | None:
        """Make the batch's delivery (once) and its first attempt. None when the batch is not
        terminal or the org has no enabled target. Idempotent: a repeat finds the delivery and
        pushes nothing unless its attempt is still owed."""
        now = now or self.clock.now()
        if batch.state not in TERMINAL:
            return None
        at = isoformat(now)
        record = self.records.get(batch.batch_id)
        if record is None:
            enabled = self.targets.enabled(batch.org_id)
            if not enabled:
                return None
            record = DeliveryRecord(
                batch_id=batch.batch_id,
                org_id=batch.org_id,
                state="pending",
                targets=_snapshot(enabled),
                created_at=at,
                updated_at=at,
                next_attempt_at=at,
            )
            if not self.records.start_round(record, replacing=None):
                record = self.records.get(batch.batch_id)  # a concurrent step made it
                if record is None:
                    return None
        if record.state == "pending" and record.due(at):
            return self._attempt(record, batch, now) or self.records.get(batch.batch_id)
        return record

    # -- retries ----------------------------------------------------------------------------
    def run_due(self, batch_id: str, *, now: datetime | None = None) -> DeliveryRecord | None:
        """The attempt owed now (a retry or a redeliver), if any; else the delivery as it is."""
        now = now or self.clock.now()
        at = isoformat(now)
        record = self.records.get(batch_id)
        if record is not None and record.lease_expired(at):
            self._recover(record, now)
            record = self.records.get(batch_id)
        if record is None or not record.due(at):
            return record
        batch = self.batches.get(batch_id)
        if batch is None:
            return record
        return self._attempt(record, batch, now) or self.records.get(batch_id)

    def enqueue_due(self, *, now: datetime | None = None, limit: int = 50) -> DueReport:
        """Queue every attempt due at `now` for the deliver worker (or make it here when no
        queue is wired), and record attempts whose worker stopped as failed."""
        now = now or self.clock.now()
        at = isoformat(now)
        report = DueReport()
        for batch_id in self.records.due(at, limit):
            try:
                record = self.records.get(batch_id)
                if record is not None and record.lease_expired(at):
                    if self._recover(record, now):
                        report.recovered.append(batch_id)
                    record = self.records.get(batch_id)
                if record is None or not record.due(at) or record.next_attempt_at is None:
                    continue
                if self.queue is None:
                    self.run_due(batch_id, now=now)
                    report.attempted.append(batch_id)
                    continue
                self.queue.send(task_message(batch_id))
                recheck = isoformat(now + timedelta(seconds=self.lease_seconds))
                self.records.mark_enqueued(
                    batch_id, next_attempt_at=record.next_attempt_at, recheck_at=recheck
                )
                report.queued.append(batch_id)
            except Exception:
                # One broken delivery must not stop the sweep; it stays due.
                logger.exception("bucket delivery retry could not be queued", extra={"batch_id": batch_id})
        return report

    # -- redeliver ---------------------------------------------------------------------------
    def redeliver(self, batch: BatchRecord) -> DeliveryRecord:
        """A new round to the targets enabled now, queued at once. 409 unless the batch has
        ended and its delivery failed (or it never had one)."""
        record = self.records.get(batch.batch_id)
        _check_redeliverable(batch, record)
        enabled = self.targets.enabled(batch.org_id)
        if not enabled:
            raise Conflict(
                "The organization has no enabled delivery target; register one with "
                "POST /v1/delivery-targets.",
                code="no_delivery_target",
            )
        now = self.clock.now()
        at = isoformat(now)
        fresh = DeliveryRecord(
            batch_id=batch.batch_id,
            org_id=batch.org_id,
            state="pending",
            targets=new_round(_snapshot(enabled)),
            created_at=record.created_at if record else at,
            updated_at=at,
            attempts=record.attempts if record else 0,
            round_start=record.attempts if record else 0,
            redeliveries=(record.redeliveries if record else 0) + 1,
            next_attempt_at=at,
            last_attempt_at=record.last_attempt_at if record else None,
        )
        if not self.records.start_round(fresh, replacing=record):
            raise Conflict(
                "A delivery of this batch is already queued or running.",
                code="delivery_in_progress",
                details={"delivery_state": "delivering"},
            )
        if self.queue is not None:
            try:
                self.queue.send(task_message(batch.batch_id))
            except Exception:
                # Still due in the index: the next sweep queues it.
                logger.exception("redelivery could not be queued", extra={"batch_id": batch.batch_id})
        logger.info("bucket redelivery queued", extra={"batch_id": batch.batch_id, "org_id": batch.org_id})
        return fresh

    # -- the read model ------------------------------------------------------------------
    def view(self, batch: BatchRecord) -> DeliveryView | None:
        """The batch's delivery; before its Deliver step, `pending` to the targets enabled
        now; null when there is none and none is coming."""
        record = self.records.get(batch.batch_id)
        if record is not None:
            return record.to_api()
        if batch.source == DIRECT_SOURCE or _delivery_step_ran(batch):
            return None
        enabled = self.targets.enabled(batch.org_id)
        return pending_view(_snapshot(enabled)) if enabled else None

    # -- attempts ------------------------------------------------------------------------
    def _attempt(self, record: DeliveryRecord, batch: BatchRecord, now: datetime) -> DeliveryRecord | None:
        """Claim the next attempt, push, record. None when another worker holds it."""
        attempt = record.attempts + 1
        at = isoformat(now)
        lease_until = isoformat(now + timedelta(seconds=self.lease_seconds))
        if not self.records.claim(batch.batch_id, attempt=attempt, now_iso=at, lease_until_iso=lease_until):
            return None
        targets = tuple(t if t.state == "delivered" else self._push(batch, t, now) for t in record.targets)
        done = replace(record, last_attempt_at=at).after_attempt(targets, attempts=attempt, now=now)
        recorded = self.records.complete(done, attempt=attempt)
        log = logger.info if done.state == "delivered" else logger.warning
        log(
            "bucket delivery attempt recorded",
            extra={
                "batch_id": batch.batch_id,
                "org_id": batch.org_id,
                "attempt": attempt,
                "state": done.state,
                "error_code": done.last_error.code if done.last_error else None,
                "recorded": recorded,
            },
        )
        return done if recorded else self.records.get(batch.batch_id)

    def _push(self, batch: BatchRecord, share: TargetDelivery, now: datetime) -> TargetDelivery:
        """Every artifact of the batch into one target; the target's new share."""
        target = self.targets.find(batch.org_id, share.target_id)
        if target is None or not target.enabled:
            return _failed(share, "target_unavailable", "the delivery target was removed or disabled")
        if self._reclaimed(batch):
            return _failed(share, "results_expired", RECLAIMED)
        artifacts = batch.artifacts or ArtifactKeys()
        if not artifacts.results_key:
            # Finalize wrote nothing (it failed for good): nothing to deliver, and never
            # `delivered` with no objects.
            return _failed(share, "artifacts_missing", "the batch has no result artifacts to deliver")
        keys = batch_object_keys(target, batch.batch_id)
        sources = (
            ("results", artifacts.results_key, JSONL),
            ("errors", artifacts.errors_key, JSONL),
            ("receipt", artifacts.receipt_key, "application/json"),
        )
        written: list[str] = []
        sent = 0
        try:
            bucket = self.targets.open(target)
            for name, source_key, content_type in sources:
                if not source_key:
                    continue  # an artifact the batch does not have (no receipt before Settle)
                stream = self.artifacts.open(source_key)
                if stream is None:  # named by the batch, gone from our bucket
                    return self._missing(batch, share, name, written, sent)
                counted = CountingReader(stream)
                try:
                    bucket.upload(keys[name], counted, content_type=content_type)
                finally:
                    stream.close()
                written.append(keys[name])
                sent += counted.count
        except BucketRefused as refused:
            return _failed(share, refused.code, refused.message)
        except Exception:
            logger.exception(
                "bucket delivery failed unexpectedly",
                extra={"batch_id": batch.batch_id, "target_id": share.target_id},
            )
            return _failed(share, "internal_error", "an internal error interrupted the upload")
        return replace(
            share,
            name=target.name,
            bucket=target.bucket,
            prefix=target.prefix,
            state="delivered",
            last_error=None,
            delivered_at=isoformat(now),
            objects=tuple(written),
            bytes_delivered=sent,
        )

    def _reclaimed(self, batch: BatchRecord) -> bool:
        """Retention reclaimed the batch's bytes: its mark as stored now (the batch an attempt
        was given may have been read before the mark)."""
        if batch.artifacts_reclaimed_at:
            return True
        current = self.batches.get(batch.batch_id)
        return current is not None and bool(current.artifacts_reclaimed_at)

    def _missing(
        self, batch: BatchRecord, share: TargetDelivery, name: str, written: list[str], sent: int
    ) -> TargetDelivery:
        """The share failed on an artifact the batch names whose object is gone: reclaimed by
        retention since the attempt began (it marks the batch before deleting, so the mark is
        there now), else removed by something else. Never skipped: the target does not have
        every artifact. The objects this attempt already wrote stay in the target's bucket
        (the service never deletes there) and the share lists them."""
        if self._reclaimed(batch):
            failed = _failed(share, "results_expired", RECLAIMED)
        else:
            failed = _failed(
                share, "artifacts_missing", f"the batch's {name} artifact is missing from storage"
            )
        return replace(failed, objects=tuple(written), bytes_delivered=sent)

    def _recover(self, record: DeliveryRecord, now: datetime) -> bool:
        """An attempt whose lease ran out: record it failed (interrupted) and schedule."""
        at = isoformat(now)
        targets = tuple(
            t if t.state == "delivered" else _failed(t, "interrupted", INTERRUPTED) for t in record.targets
        )
        done = record.after_attempt(targets, attempts=record.attempts, now=now)
        return self.records.complete(done, attempt=record.attempts, lease_expired_before=at)


@dataclass(eq=False)
class CountingReader:
    """A read-only stream that counts the bytes read through it."""

    stream: BinaryIO
    count: int = field(default=0, init=False)

    def read(self, size: int = -1, /) -> bytes:
        data = self.stream.read(size)
        self.count += len(data)
        return data


def task_message(batch_id: str) -> str:
    """The deliver worker's message for an owed attempt (no task token: no workflow waits)."""
    return unwaited_task(STEP, batch_id)


def _snapshot(targets: Iterable[DeliveryTarget]) -> tuple[TargetDelivery, ...]:
    return tuple(TargetDelivery(t.target_id, t.name, t.bucket, t.prefix) for t in targets)


def _failed(share: TargetDelivery, code: str, message: str) -> TargetDelivery:
    return replace(share, state="failed", last_error=DeliveryError(code, message, share.target_id))


def _delivery_step_ran(batch: BatchRecord) -> bool:
    """The workflow's Deliver step (the last, after Finalize and Settle) has begun: the
    batch's artifacts are complete. A cancelled or expired batch is terminal long before."""
    return "deliver" in batch.workflow_steps


def _check_redeliverable(batch: BatchRecord, record: DeliveryRecord | None) -> None:
    """409 (410 once reclaimed) unless the batch has ended, its workflow has reached its
    Deliver step (its artifacts are complete), its bytes are kept and its delivery failed (or
    it never had one)."""
    if batch.source == DIRECT_SOURCE:
        raise Conflict(
            "A direct chat request has no artifacts to deliver: its answer was the response.",
            code="nothing_to_deliver",
        )
    if batch.state not in TERMINAL:
        raise Conflict(
            "The batch has not finished; it is delivered when it ends.",
            code="batch_not_finished",
            details={"state": batch.state},
        )
    if not _delivery_step_ran(batch):
        raise Conflict(
            "The batch has ended but its artifacts are still being assembled; they are delivered "
            "when they are.",
            code="batch_not_finished",
            details={"state": batch.state},
        )
    if batch.artifacts_reclaimed_at:
        raise Gone(
            "This batch's result bytes were reclaimed by retention; there is nothing to deliver.",
            code="results_expired",
            details={"reclaimed_at": batch.artifacts_reclaimed_at},
        )
    if record is not None and record.state == "delivered":
        raise Conflict(
            "The batch's artifacts are already delivered.",
            code="already_delivered",
            details={"delivery_state": record.state, "delivered_at": record.delivered_at},
        )
    if record is not None and record.state in ("pending", "delivering"):
        raise Conflict(
            "A delivery of this batch is already queued or running.",
            code="delivery_in_progress",
            details={"delivery_state": record.state},
        )
