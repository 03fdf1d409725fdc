"""The workflow's Intake step: read, check and chunk a batch's input file (issue 18).

`POST /v1/batches` over an `input_file_id` prices and reserves without writing the items
(from the quote's snapshot, or an internal quote over a streamed preflight) and records
what Intake must find: the file, the item count and the items digest (`BatchRecord.intake`).
Here the file is streamed once more through the same item-reading path as quotes and create
(`QuoteService.read_items`: `Preflight.add_item` for every item, so whatever a preflight
applies to an item applies here too), each item goes to its input chunk as it is read
(`InputChunkWriter`: memory flat in the item count), and the count and digest must match.

A file that fails (preflight errors, items that differ from the ones priced, a file gone)
ends the batch `failed`: the batch keeps the preflight's answer (`intake.error`), gets no
chunks (`chunk_count` 0), and the step fails permanently, so the workflow's HandleFailure
finalizes it (no rows) and settles it (nothing charged: the whole reservation is released).
A batch whose items create wrote (inline items, compat) has nothing to take in: a no-op.
Repeated messages rewrite the same chunks; once done the step answers without reading.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.batches.preflight import Preflight
from batchroute.domain.batches.record import BatchChanges, BatchIntake, BatchRecord, IntakeError
from batchroute.domain.routing.gates import RoutingFields
from batchroute.errors import Conflict, Forbidden, Gone, InvalidRequest, NotFound, PermanentError
from batchroute.services.batches.input_chunks import InputChunkWriter
from batchroute.services.batches.ports import BatchStore, ObjectStore
from batchroute.workflow.tasks import IntakeOutput


class ItemReader(Protocol):
    """services/batches/quotes.py:QuoteService"""

    def read_items(
        self, options: RoutingFields, items: Any, *, on_item: Any = None
    ) -> tuple[Preflight, int, str]: ...

    def file_items(self, org_id: str, options: RoutingFields, file_id: str) -> Any: ...


class IntakeFailed(PermanentError):
    pass


@dataclass(eq=False, kw_only=True)
class Intake:
    records: BatchStore
    reader: ItemReader
    artifacts: ObjectStore
    clock: Clock

    def run(self, batch: BatchRecord) -> IntakeOutput:
        intake = batch.intake
        if intake is None or intake.done:
            return _output(batch.batch_id, batch.item_count, batch.chunk_count)
        if intake.error is not None:
            raise IntakeFailed(intake.error.message or "the input file failed intake")
        writer = InputChunkWriter(self.artifacts, batch.batch_id)
        try:
            error = self._read(batch, intake, writer)
            if error is None:
                writer.close()
        except BaseException:
            writer.abort()
            raise
        if error is not None:
            writer.abort()
            self._fail(batch, intake, error)
        self.records.update_plan(
            batch.batch_id,
            {
                "chunk_models": writer.chunk_models_for(batch.plan),
                "intake": replace(intake, done=True),
            },
        )
        done: BatchChanges = {"chunk_count": writer.chunk_count}
        if writer.presets:  # the preset versions its items used (docs/presets.md)
            done["presets"] = list(writer.presets)
        self.records.update(batch.batch_id, done)
        return _output(batch.batch_id, writer.count, writer.chunk_count)

    def _read(self, batch: BatchRecord, intake: BatchIntake, writer: InputChunkWriter) -> IntakeError | None:
        """Stream the file into chunks; the error that fails the batch, or None."""
        try:
            options = intake.options
            items = self.reader.file_items(batch.org_id, options, intake.file_id)  # presets applied
            preflight, count, digest = self.reader.read_items(
                options, items, on_item=lambda item, _line: writer.add(item)
            )
        except (InvalidRequest, NotFound, Gone, Conflict, Forbidden) as exc:  # gone, empty, wrong type
            return IntakeError(exc.code, exc.message, exc.details or {})
        result = preflight.result()
        if not result.ok:
            return IntakeError(
                "batch_preflight_failed",
                "The input file failed the preflight.",
                {"preflight": result.to_api()},
            )
        if count != intake.item_count or digest != intake.digest:
            return IntakeError(
                "quote_mismatch",
                "The input file's items differ from the ones priced at create.",
                {"item_count": count, "priced_item_count": intake.item_count},
            )
        return None

    def _fail(self, batch: BatchRecord, intake: BatchIntake, error: IntakeError) -> None:
        now = isoformat(self.clock.now())
        self.records.update_plan(batch.batch_id, {"intake": replace(intake, error=error)})
        self.records.update(batch.batch_id, {"chunk_count": 0})
        self.records.transition(
            batch.batch_id,
            "failed",
            at=now,
            extra={
                "execution_summary": {"latest_error": f"intake: {error.code}: {error.message}"[:1000]},
                "completed_at": now,
            },
        )
        raise IntakeFailed(f"{error.code}: {error.message}")


def _output(batch_id: str, item_count: int, chunk_count: int) -> IntakeOutput:
    return {"step": "intake", "batch_id": batch_id, "item_count": item_count, "chunk_count": chunk_count}
