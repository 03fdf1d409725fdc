"""What other contexts read of a batch, declared once: its record and its stored bytes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from batchroute.domain.batches.record import (
    BatchChanges,
    BatchRecord,
    IdempotencyRecord,
    PlanChanges,
    WorkOrderRef,
)
from batchroute.domain.batches.states import BatchState
from batchroute.domain.routing.lane_plan import LaneRecord
from batchroute.domain.workflow.finalize_cursor import CursorChanges, FinalizeCursor
from batchroute.transactions import TransactItem


class BatchReader(Protocol):
    """adapters/dynamo/batch_records.py:BatchRecords: one batch by id."""

    def get(self, batch_id: str) -> BatchRecord | None: ...


class BatchTransitions(Protocol):
    """adapters/dynamo/batch_records.py:BatchRecords: a batch moved to `target`, only from a
    state that may go there (domain/batches/states.py); False when it was not."""

    def transition(
        self, batch_id: str, target: BatchState, *, at: str, extra: BatchChanges | None = None
    ) -> bool: ...


class Artifacts(Protocol):
    """adapters/s3_objects.py:S3Objects over the artifacts bucket: a stored object's size
    and its bytes in chunks."""

    def size(self, key: str) -> int | None: ...

    def chunks(self, key: str) -> Iterator[bytes]: ...


class ObjectWriter(Protocol):
    """adapters/s3_objects.py:ObjectWriter: one object written in parts."""

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


class SignedDownloads(Protocol):
    """adapters/s3_objects.py:S3Objects: an object served by storage to whoever holds a URL."""

    def presigned_get(self, key: str, *, expires_in: int, filename: str, content_type: str) -> str: ...


class ObjectStore(Artifacts, Protocol):
    """adapters/s3_objects.py:S3Objects: a bucket's objects, streamed both ways."""

    def chunks(
        self, key: str, *, chunk_bytes: int = ..., start: int = 0, missing_ok: bool = False
    ) -> Iterator[bytes]: ...

    def writer(self, key: str, *, content_type: str) -> ObjectWriter: ...

    def delete(self, key: str) -> None: ...


class BatchStore(BatchReader, BatchTransitions, Protocol):
    """adapters/dynamo/batch_records.py:BatchRecords: the batch records table."""

    def state(self, batch_id: str) -> str | None: ...

    def schedule_reclaim(self, batch_id: str, *, review_at: str) -> bool: ...

    def create(
        self,
        batch: BatchRecord,
        *,
        reservation: Sequence[TransactItem],
        extra_items: Sequence[TransactItem] = ...,
        limit_checks: Sequence[TransactItem] = ...,
        idempotency: IdempotencyRecord | None = None,
    ) -> None: ...

    def idempotency_record(self, org_id: str, key: str) -> IdempotencyRecord | None: ...

    def list_for_org(
        self, org_id: str, *, limit: int, start_after: str | None, states: frozenset[str] | None
    ) -> tuple[list[BatchRecord], str | None]: ...

    def count_for_org(self, org_id: str) -> int: ...

    def update(self, batch_id: str, changes: BatchChanges) -> bool: ...

    def update_seeing_work_order(self, batch_id: str, changes: BatchChanges) -> WorkOrderRef | None: ...

    def update_plan(self, batch_id: str, changes: PlanChanges) -> None: ...

    # The one step with a cursor is Finalize (`step` "finalize"), hence its types.
    def cursor(self, batch_id: str, step: str) -> FinalizeCursor | None: ...

    def start_cursor(self, batch_id: str, step: str, cursor: FinalizeCursor) -> bool: ...

    def advance_cursor(self, batch_id: str, step: str, *, position: int, changes: CursorChanges) -> bool: ...

    def put_lane(self, batch_id: str, lane: LaneRecord) -> None: ...

    def lanes(self, batch_id: str) -> list[LaneRecord]: ...
