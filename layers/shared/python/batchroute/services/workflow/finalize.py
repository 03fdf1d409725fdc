"""The workflow's Finalize step: the final result and error artifacts, in input order.

Chunk by chunk, the input chunk is walked in seq order and merged with every lane's result
file of that chunk (a k-way merge by seq over streams: memory stays flat in the item
count). Every input item gets exactly one row in `results.jsonl`; an item without a result
(canceled, expired, never run) gets a failed row saying why. Failed rows also go to
`errors.jsonl`. The batch then records the artifacts, its final counts (set absolutely
from the rows, so they always add up) and what each lane delivered (`lane_tallies`, which
Settle charges). Rerunning rewrites the same artifacts: the step is idempotent. Last, the
batch goes on the retention GC's index, due at the end of the grace window
(docs/retention.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

from batchroute.adapters.batch_artifacts import BatchArtifacts, errors_key, results_key
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.clock import Clock, isoformat
from batchroute.domain.batch_record import ArtifactKeys, BatchRecord
from batchroute.domain.batch_results import MergeTally, merge_chunk, missing_row
from batchroute.domain.batch_states import TERMINAL
from batchroute.workflow.tasks import StepOutput

# Items that never ran count as canceled in a canceled or expired batch, as failed otherwise.
_UNRUN_AS_CANCELED = frozenset({"canceled", "expired"})


def missing_reason(batch: BatchRecord) -> tuple[str, str]:
    """The error code and message of an item that got no result."""
    state = batch.state
    if state == "canceled":
        return "canceled", "The batch was canceled before this item ran."
    if state == "expired":
        return "expired", "The batch passed its SLA deadline before this item ran."
    if state == "failed":
        latest = batch.latest_error
        return "batch_failed", f"The batch failed before this item ran: {latest or 'workflow error'}"[:1000]
    return "not_run", "The item got no result."


def final_counts(batch: BatchRecord, tally: MergeTally) -> dict[str, int]:
    unrun_canceled = batch.state in _UNRUN_AS_CANCELED
    return {
        "total": tally.rows,
        "pending": 0,
        "running": 0,
        "completed": tally.completed,
        "failed": tally.failed + (0 if unrun_canceled else tally.missing),
        "canceled": tally.missing if unrun_canceled else 0,
    }


def _tagged(lines: Iterable[dict[str, Any]], lane_key: str) -> Iterator[dict[str, Any]]:
    for line in lines:
        line["lane_key"] = lane_key
        yield line


class Finalizer:
    def __init__(
        self,
        *,
        records: BatchRecords,
        artifacts: BatchArtifacts,
        clock: Clock,
        retention_grace: timedelta = timedelta(hours=72),
    ) -> None:
        self.records = records
        self.artifacts = artifacts
        self.clock = clock
        self.retention_grace = retention_grace  # the earliest any tier lets the bytes go

    def finalize(self, batch: BatchRecord) -> StepOutput:
        batch_id = batch.batch_id
        moment = self.clock.now()
        now = isoformat(moment)
        if batch.state not in TERMINAL:
            self.records.transition(batch_id, "finalizing", at=now)
        current = self.records.get(batch_id) or batch
        lanes = self.records.lanes(batch_id)
        tally = MergeTally()
        code, message = missing_reason(current)

        def missing(seq: int, customer_item_id: Any) -> dict[str, Any]:
            return missing_row(seq, customer_item_id, code=code, message=message)

        results = self.artifacts.jsonl_writer(results_key(batch_id))
        errors = self.artifacts.jsonl_writer(errors_key(batch_id))
        try:
            for chunk in range(current.chunk_count):
                inputs = (
                    (int(line["seq"]), (line.get("item") or {}).get("customer_item_id"))
                    for line in self.artifacts.input_lines(batch_id, chunk)
                )
                sources = [
                    _tagged(
                        self.artifacts.result_lines(batch_id, str(lane["lane_key"]), chunk),
                        str(lane["lane_key"]),
                    )
                    for lane in sorted(lanes, key=lambda lane: str(lane["lane_key"]))
                    if chunk in {int(c) for c in lane.get("chunks_done") or []}
                ]
                for row in merge_chunk(inputs, sources, missing=missing, tally=tally):
                    results.write(row)
                    if row["status"] == "failed":
                        errors.write(row)
            results.close()
            errors.close()
        except BaseException:
            results.abort()
            errors.abort()
            raise
        artifacts = replace(
            current.artifacts or ArtifactKeys(),
            results_key=results_key(batch_id),
            errors_key=errors_key(batch_id),
            result_count=results.lines,
            error_count=errors.lines,
        )
        changes: dict[str, Any] = {
            "artifacts": artifacts.to_mapping(),
            "counts": final_counts(current, tally),
            "lane_tallies": {key: lane.to_dict() for key, lane in tally.lanes.items()},
            "finalized_at": now,
        }
        if current.state in TERMINAL and not current.completed_at:
            changes["completed_at"] = current.state_changed_at or now
        self.records.update(batch_id, changes)
        self.records.schedule_reclaim(batch_id, review_at=isoformat(moment + self.retention_grace))
        return {
            "step": "finalize",
            "batch_id": batch_id,
            "result_count": results.lines,
            "error_count": errors.lines,
        }
