"""The workflow's Finalize step: the final result and error artifacts, in input order.

Chunk by chunk, the input chunk is walked in seq order and merged with every lane's result
file of that chunk (a k-way merge by seq over streams: memory stays flat in the item
count). Every input item gets exactly one row in `results.jsonl`; an item without a result
(canceled, expired, never run) gets a failed row saying why. Failed rows also go to
`errors.jsonl`. The batch then records the artifacts, its final counts (set absolutely
from the rows, so they always add up) and what each lane delivered (`lane_tallies`, which
Settle charges). Last, the batch goes on the retention GC's index, due at the end of the
grace window (docs/retention.md).

Chunked (issue 18): no invocation's work grows with the batch. The artifacts are S3
multipart uploads that outlive one invocation; a *slice* merges input chunks until it holds
`slice_bytes` of result rows (one multipart part, >= 5 MiB as S3 requires of every part but
the last) and the step's cursor item (`BATCH#<id>`/`CURSOR#finalize`: next chunk, part
ETags, the tally so far, each chunk's byte offset in results.jsonl) advances with a
conditional write, so a slice is committed once however often its message is delivered.
Error rows that do not yet fill a part are carried to the next slice in a `tmp/` object
named after the chunk it starts at. `finalize` returns None when the invocation's time
budget runs low: the caller re-enqueues the same task and the next invocation resumes at the
cursor. Part numbers and carry keys follow from the cursor, so a repeated slice re-sends the
same parts with the same bytes. The offsets go to `results.index.json`, which lets a results
page start at its cursor with a ranged GET instead of reading the file from the top.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from batchroute.clock import Clock, isoformat
from batchroute.domain.batches.artifact_keys import INPUT_CHUNK_ROWS as CHUNK_ROWS
from batchroute.domain.batches.artifact_keys import (
    JSONL,
    READ_AHEAD_CHUNKS,
    errors_key,
    jsonl_line,
    results_index_key,
    results_key,
)
from batchroute.domain.batches.record import (
    ArtifactKeys,
    BatchChanges,
    BatchRecord,
    item_counts,
    missing_reason,
)
from batchroute.domain.batches.states import TERMINAL
from batchroute.domain.routing.items import InputLine
from batchroute.domain.routing.lane_plan import LaneRecord, lane_chunk_done
from batchroute.domain.routing.rescue import handed_over_rows
from batchroute.domain.workflow.finalize_cursor import FinalizeCursor, UploadPart
from batchroute.domain.workflow.results import ArtifactRow, MergeTally, ResultLine, merge_chunk, missing_row
from batchroute.errors import PermanentError
from batchroute.observability import logger
from batchroute.services.batches.ports import BatchStore
from batchroute.services.workflow.ports import BatchFiles
from batchroute.services.workflow.time_budget import TimeBudget
from batchroute.workflow.tasks import FinalizeOutput

CURSOR = "finalize"
SLICE_BYTES = 8 * 1024 * 1024  # one results part per slice; S3 parts are >= 5 MiB but the last
MIN_PART_BYTES = 5 * 1024 * 1024

# Items that never ran count as canceled in a canceled or expired batch, as failed otherwise.
_UNRUN_AS_CANCELED = frozenset({"canceled", "expired"})


def unrun_canceled(batch: BatchRecord) -> bool:
    """Whether the batch's items that never ran count as canceled (else as failed)."""
    return batch.state in _UNRUN_AS_CANCELED


def counts_of(tally: MergeTally, *, unrun_canceled: bool) -> dict[str, int]:
    """The final counts from the rows; items that never ran count as canceled or failed."""
    return item_counts(
        tally.rows,
        completed=tally.completed,
        failed=tally.failed + (0 if unrun_canceled else tally.missing),
        canceled=tally.missing if unrun_canceled else 0,
    )


def _tagged(lines: Iterable[ResultLine], lane_key: str) -> Iterator[ResultLine]:
    for line in lines:
        line["lane_key"] = lane_key
        yield line


def _on_time(
    lines: Iterable[ResultLine],
    lane_key: str,
    chunk: int,
    handed: Mapping[str, tuple[int, frozenset[int]]],
    tally: MergeTally,
) -> Iterator[ResultLine]:
    """A lane's rows of a chunk, less those that came after it handed the chunk's items over
    (a late vendor result: its successor's answer is the item's; counted in the lane's tally
    as `late` and logged, never delivered or charged)."""
    at = handed.get(lane_key)
    if at is None or at[0] != chunk:
        yield from lines
        return
    for line in lines:
        if int(line["seq"]) in at[1]:
            yield line
            continue
        tally.add_late(lane_key, 1)  # counted as read: the merge may stop before the file ends
        logger.warning(
            "late result ignored", extra={"lane_key": lane_key, "chunk": chunk, "seq": line["seq"]}
        )


@dataclass(eq=False)
class _CustomerItemIds:
    """An input chunk's `customer_item_id`s by seq, read (the chunk parsed) on first use."""

    lines: Callable[[], Iterable[InputLine]]
    _ids: dict[int, Any] | None = field(default=None, init=False)

    def of(self, seq: int) -> Any:
        if self._ids is None:
            self._ids = {
                int(line["seq"]): (line.get("item") or {}).get("customer_item_id") for line in self.lines()
            }
        return self._ids.get(seq)


def carry_key(batch_id: str, chunk: int) -> str:
    """Error rows carried into the slice that starts at `chunk` (expired by the `tmp/` rule)."""
    return f"tmp/batches/{batch_id}/finalize/errors-from-{chunk:05d}.jsonl"


class ArtifactsReclaimed(PermanentError):
    """Retention GC reclaimed the batch's bytes (docs/retention.md): a finalize that comes
    after (a message redriven long after its workflow died) has no input left to merge."""


@dataclass(eq=False, kw_only=True)
class Finalizer:
    records: BatchStore
    artifacts: BatchFiles
    clock: Clock
    retention_grace: timedelta = timedelta(hours=72)  # the earliest any tier lets the bytes go
    slice_bytes: int = SLICE_BYTES
    min_part_bytes: int = MIN_PART_BYTES
    # None: the settle function's time-out (60 s), as without a Lambda context.
    budget: Callable[[], TimeBudget] | None = None
    margin_seconds: float = 30.0

    def _budget(self) -> TimeBudget:
        return self.budget() if self.budget is not None else TimeBudget(60.0)

    @property
    def objects(self) -> Any:
        return self.artifacts.objects

    def finalize(self, batch: BatchRecord) -> FinalizeOutput | None:
        """Merge slices while the invocation has time; the step's output once the artifacts
        are complete, None when the work continues in another invocation."""
        batch_id = batch.batch_id
        if batch.artifacts_reclaimed_at is not None:
            raise ArtifactsReclaimed(
                f"batch {batch_id}'s bytes were reclaimed at {batch.artifacts_reclaimed_at}"
            )
        budget = self._budget()
        cursor = self._stored(batch_id) or self._start(batch)
        sliced = False
        while cursor.state != "done":
            position = cursor.position
            if position >= cursor.chunk_count:
                self._complete(batch_id, cursor)
                self.records.advance_cursor(batch_id, CURSOR, position=position, changes={"state": "done"})
                cursor = replace(cursor, state="done")
                break
            if sliced and budget.remaining() < self.margin_seconds:
                return None
            advanced = self._slice(batch_id, cursor)
            sliced = True
            if self.records.advance_cursor(
                batch_id, CURSOR, position=position, changes=advanced.slice_changes()
            ):
                cursor = advanced
            else:  # another delivery of this message committed the slice first
                cursor = self._stored(batch_id) or cursor
        return self._record(batch, cursor)

    def _stored(self, batch_id: str) -> FinalizeCursor | None:
        return self.records.cursor(batch_id, CURSOR)

    def _start(self, batch: BatchRecord) -> FinalizeCursor:
        batch_id = batch.batch_id
        if batch.state not in TERMINAL:
            now = isoformat(self.clock.now())
            self.records.transition(batch_id, "finalizing", at=now, extra={"finalizing_at": now})
        current = self.records.get(batch_id) or batch
        code, message = missing_reason(current)
        cursor = FinalizeCursor(
            chunk_count=current.chunk_count,
            missing_code=code,
            missing_message=message,
            unrun_canceled=unrun_canceled(current),
            results_upload=self.objects.start_multipart(results_key(batch_id), content_type=JSONL),
            errors_upload=self.objects.start_multipart(errors_key(batch_id), content_type=JSONL),
        )
        if self.records.start_cursor(batch_id, CURSOR, cursor):
            return cursor
        # Another delivery started first: drop this one's uploads and follow its cursor.
        self.objects.abort_multipart(results_key(batch_id), cursor.results_upload)
        self.objects.abort_multipart(errors_key(batch_id), cursor.errors_upload)
        existing = self._stored(batch_id)
        assert existing is not None
        return existing

    def _slice(self, batch_id: str, cursor: FinalizeCursor) -> FinalizeCursor:
        """Merge chunks from the cursor until one results part is full; send the parts. The
        cursor as this slice leaves it."""
        position, chunk_count = cursor.position, cursor.chunk_count
        tally = MergeTally.from_dict(cursor.tally.to_dict())  # this slice's own copy
        code, message = cursor.missing_code, cursor.missing_message
        lanes = sorted(self.records.lanes(batch_id), key=lambda lane: lane.lane_key)

        def missing(seq: int, customer_item_id: Any) -> ArtifactRow:
            return missing_row(seq, customer_item_id, code=code, message=message)

        results = bytearray()
        errors = bytearray()
        if cursor.carry:
            errors += b"".join(self.objects.chunks(cursor.carry))
        offsets: list[int] = []
        base = cursor.results_bytes
        lines = errors_lines = 0
        chunk = position
        while chunk < chunk_count and len(results) < self.slice_bytes:
            offsets.append(base + len(results))
            # This chunk's files (if not already on their way) and the next one's are read in
            # the background: the reads overlap this chunk's merge.
            for ahead in range(chunk, min(chunk + READ_AHEAD_CHUNKS, chunk_count)):
                self.artifacts.read_ahead(
                    batch_id, ahead, [lane for lane in lanes if lane_chunk_done(lane, ahead)]
                )
            for row in self._merged(batch_id, chunk, lanes, missing, tally):
                line = jsonl_line(row)
                results += line
                lines += 1
                if row["status"] == "failed":
                    errors += line
                    errors_lines += 1
            chunk += 1
        last = chunk >= chunk_count
        results_parts = cursor.results_parts
        if results:
            results_parts += (
                self._part(results_key(batch_id), cursor.results_upload, results_parts, results),
            )
        errors_parts = cursor.errors_parts
        carry: str | None = None
        if errors and (last or len(errors) >= self.min_part_bytes):
            errors_parts += (self._part(errors_key(batch_id), cursor.errors_upload, errors_parts, errors),)
        elif errors:
            carry = carry_key(batch_id, chunk)
            self.objects.put(carry, bytes(errors), content_type=JSONL)
        return replace(
            cursor,
            position=chunk,
            tally=tally,
            results_parts=results_parts,
            errors_parts=errors_parts,
            results_bytes=base + len(results),
            results_lines=cursor.results_lines + lines,
            errors_lines=cursor.errors_lines + errors_lines,
            carry=carry,
            offsets=cursor.offsets + tuple(offsets),
        )

    def _merged(
        self,
        batch_id: str,
        chunk: int,
        lanes: list[LaneRecord],
        missing: Callable[[int, Any], ArtifactRow],
        tally: MergeTally,
    ) -> Iterator[ArtifactRow]:
        """The rows of `chunk` in input order: each item's answer from the lanes that
        finished the chunk, or `missing`. The input's seqs are read off the lines' heads; its
        items are parsed (for their `customer_item_id`) only if one of them has no answer."""
        ids = _CustomerItemIds(lambda: self.artifacts.input_lines(batch_id, chunk))
        handed = handed_over_rows(lanes)
        sources = [
            _tagged(
                _on_time(
                    self.artifacts.result_lines(batch_id, lane, chunk),
                    lane.lane_key,
                    chunk,
                    handed,
                    tally,
                ),
                lane.lane_key,
            )
            for lane in lanes
            if lane_chunk_done(lane, chunk)
        ]
        return merge_chunk(
            self.artifacts.input_seqs(batch_id, chunk),
            sources,
            missing=lambda seq: missing(seq, ids.of(seq)),
            tally=tally,
        )

    def _part(self, key: str, upload_id: str, parts: tuple[UploadPart, ...], body: bytearray) -> UploadPart:
        number = len(parts) + 1
        return UploadPart(number, str(self.objects.upload_part(key, upload_id, number, bytes(body))))

    def _complete(self, batch_id: str, cursor: FinalizeCursor) -> None:
        for key, upload, parts in (
            (results_key(batch_id), cursor.results_upload, cursor.results_parts),
            (errors_key(batch_id), cursor.errors_upload, cursor.errors_parts),
        ):
            self._complete_one(key, upload, parts)
        index = {"rows_per_chunk": CHUNK_ROWS, "offsets": list(cursor.offsets)}
        self.objects.put(
            results_index_key(batch_id), json.dumps(index).encode(), content_type="application/json"
        )

    def _complete_one(self, key: str, upload_id: str, parts: tuple[UploadPart, ...]) -> None:
        if not parts:  # nothing to write: an empty object
            self.objects.abort_multipart(key, upload_id)
            self.objects.put(key, b"", content_type=JSONL)
            return
        try:
            self.objects.complete_multipart(key, upload_id, [part.to_s3() for part in parts])
        except Exception as exc:
            code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code")
            if code != "NoSuchUpload" or self.objects.size(key) is None:
                raise  # an upload completed by an earlier delivery is done

    def _record(self, batch: BatchRecord, cursor: FinalizeCursor) -> FinalizeOutput:
        """The finished artifacts on the batch (idempotent: a repeat writes the same values)."""
        batch_id = batch.batch_id
        moment = self.clock.now()
        now = isoformat(moment)
        current = self.records.get(batch_id) or batch
        tally = cursor.tally
        result_count, error_count = cursor.results_lines, cursor.errors_lines
        artifacts = replace(
            current.artifacts or ArtifactKeys(),
            results_key=results_key(batch_id),
            errors_key=errors_key(batch_id),
            result_count=result_count,
            error_count=error_count,
        )
        changes: BatchChanges = {
            "artifacts": artifacts.to_mapping(),
            "counts": counts_of(tally, unrun_canceled=cursor.unrun_canceled),
            "lane_tallies": {key: lane.to_dict() for key, lane in tally.lanes.items()},
            "finalized_at": current.finalized_at or now,
        }
        if current.state in TERMINAL and not current.completed_at:
            changes["completed_at"] = current.state_changed_at or now
        self.records.update(batch_id, changes)
        self.records.schedule_reclaim(batch_id, review_at=isoformat(moment + self.retention_grace))
        return {
            "step": "finalize",
            "batch_id": batch_id,
            "result_count": result_count,
            "error_count": error_count,
        }
