"""Lane progress in the batches table, exactly once per chunk.

A lane record (`BATCH#<id>` / `LANE#<lane_key>`) runs its chunks in the order of its list
(`chunk_ranges`) and keeps its progress as two watermarks in that order, `chunks_started_n`
and `chunks_done_n` (`domain/routing/lane_plan.py` reads them): the record's size does not grow with
the batch, and every chunk rewrites it twice, billed by its whole size. Starting the chunk at
position i (counts pending -> running) is conditioned on `chunks_started_n = i` and
`chunks_done_n = i` (the chunk before it finished) and sets the first to i + 1; finishing
it (running -> completed / failed / canceled, or back to pending when its items go to a
failover lane) is conditioned on `chunks_done_n = i` and sets both to i + 1 (a chunk with
no item is finished without being started). Each is ONE transaction of the
lane record with the count moves on the batch item: a repeated message (or an invocation
that crashed after writing) can never move the counts twice, and a duplicate runner that is
behind gets False. Counts move by `SET x = x + :d`, per finished chunk, never per item.
Records written before the watermarks (lists `chunks_started` / `chunks_done`) are moved on
by the same conditions: a missing watermark counts as the length of its list.
"""

from __future__ import annotations

from typing import Any

from batchroute.adapters.dynamo.batch_records import batch_key, lane_values
from batchroute.adapters.dynamo.codec import update_request
from batchroute.adapters.dynamo.lane_records import job_item, lane_from_item
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.adapters.dynamo.writes import (
    put_new,
    transact_unless_refused,
)
from batchroute.domain.routing.lane_plan import LaneRecord, SubmittedJob
from batchroute.domain.workflow.results import ChunkTally, HandOver

COUNT_KEYS = ("pending", "running", "completed", "failed", "canceled")


def lane_item_key(batch_id: str, lane_key: str) -> dict[str, Any]:
    return {"pk": {"S": f"BATCH#{batch_id}"}, "sk": {"S": f"LANE#{lane_key}"}}


def _at_position(watermark: str, legacy_list: str) -> str:
    """The condition "the lane is at position `:position` of its chunks" on one watermark."""
    return (
        f"({watermark} = :position OR (attribute_not_exists({watermark}) "
        f"AND size({legacy_list}) = :position))"
    )


_DONE_AT = _at_position("chunks_done_n", "chunks_done")
_STARTED_AT = _at_position("chunks_started_n", "chunks_started")


def _counts_update(table: str, batch_id: str, deltas: dict[str, int]) -> dict[str, Any] | None:
    moves = {key: delta for key, delta in deltas.items() if delta}
    if not moves:
        return None
    names = {"#counts": "counts"}
    values: dict[str, object] = {":zero": 0}
    sets = []
    for i, (key, delta) in enumerate(moves.items()):
        names[f"#c{i}"] = key
        values[f":c{i}"] = delta
        sets.append(f"#counts.#c{i} = if_not_exists(#counts.#c{i}, :zero) + :c{i}")
    return {
        "Update": update_request(
            table,
            batch_key(batch_id),
            "SET " + ", ".join(sets),
            condition="attribute_exists(pk)",
            names=names,
            values=values,
        )
    }


def _usage_adds(tally: ChunkTally) -> str:
    """`SET` clauses adding the usage of a finished chunk's completed items (`usage.to_tally()`:
    the tokens and, when any, the cache split and the hosted tool calls, so the live lane view
    shows them; names `_usage_names`, values `_tally_values`) to the lane's `usage` map: each
    key by a name placeholder (a tool's key holds a dot)."""
    return ", ".join(
        f"#usage.#u{i} = if_not_exists(#usage.#u{i}, :zero) + :u{i}"
        for i in range(len(tally.usage.to_tally()))
    )


def _usage_names(tally: ChunkTally) -> dict[str, str]:
    return {"#usage": "usage", **{f"#u{i}": name for i, name in enumerate(tally.usage.to_tally())}}


def _tally_values(tally: ChunkTally) -> dict[str, object]:
    """The lane record's additions for a finished chunk (and the result file it counted)."""
    usage = {f":u{i}": count for i, count in enumerate(tally.usage.to_tally().values())}
    written = {":writer": [tally.result_writer], ":no_writers": []} if tally.result_writer else {}
    return {
        ":completed": tally.completed,
        ":failed": tally.failed,
        ":handed": tally.handed_over,
        **usage,
        **written,
    }


def _writer_note(tally: ChunkTally) -> str:
    """The `SET` clause noting the result file the chunk's counts are of (`_tally_values`)."""
    if not tally.result_writer:
        return ""
    return ", result_writers = list_append(if_not_exists(result_writers, :no_writers), :writer)"


def _hand_over_update(
    table_name: str, key: dict[str, Any], values: dict[str, Any], tally: ChunkTally
) -> dict[str, Any]:
    """The failing lane's side of a hand-over: its chunk done, `failed`, pointing at its successor."""
    return {
        "Update": update_request(
            table_name,
            key,
            "SET chunks_done_n = :next, chunks_started_n = :next, "
            "#status = :failed_status, failover_to = :to, latest_error = :error, "
            "finished_at = :at, updated_at = :at, running_items = :zero, "
            "completed = if_not_exists(completed, :zero) + :completed, "
            "failed = if_not_exists(failed, :zero) + :failed, "
            "handed_over = if_not_exists(handed_over, :zero) + :handed, "
            f"{_usage_adds(tally)}{_writer_note(tally)} REMOVE job, job_chunk, partial_chunk, submitting",
            condition=f"attribute_exists(pk) AND {_DONE_AT} AND #status IN (:pending, :running)",
            names={"#status": "status", **_usage_names(tally)},
            values=values,
        )
    }


class BatchProgress(DynamoStore):
    def get_lane(self, batch_id: str, lane_key: str) -> LaneRecord | None:
        return self.read_at(lane_item_key(batch_id, lane_key), lane_from_item)

    def put_lane(self, batch_id: str, lane: LaneRecord) -> bool:
        """Create a lane record once; False when it existed (the first one stays)."""
        return self.insert_once(lane_values(batch_id, lane))

    def _update_lane(
        self,
        batch_id: str,
        lane_key: str,
        expression: str,
        *,
        condition: str = "attribute_exists(pk)",
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
    ) -> bool:
        return self.update_where(
            lane_item_key(batch_id, lane_key), expression, condition=condition, names=names, values=values
        )

    # -- lane status ---------------------------------------------------------------------------
    def lane_running(self, batch_id: str, lane_key: str, *, at: str) -> bool:
        """A run of the lane begins (one more attempt); False when the lane already ended.
        The first run moves it `pending -> running`: see `lane_first_run`."""
        return self._update_lane(
            batch_id,
            lane_key,
            "SET #status = :running, started_at = if_not_exists(started_at, :at), "
            "attempts = if_not_exists(attempts, :zero) + :one, updated_at = :at",
            condition="attribute_exists(pk) AND #status IN (:pending, :running)",
            names={"#status": "status"},
            values={":running": "running", ":pending": "pending", ":at": at, ":zero": 0, ":one": 1},
        )

    def lane_first_run(self, batch_id: str, lane_key: str, *, at: str) -> bool:
        """True exactly once: for the run that moves the lane out of `pending`."""
        return self._update_lane(
            batch_id,
            lane_key,
            "SET #status = :running, started_at = :at, updated_at = :at",
            condition="attribute_exists(pk) AND #status = :pending",
            names={"#status": "status"},
            values={":running": "running", ":pending": "pending", ":at": at},
        )

    def lane_finished(
        self, batch_id: str, lane_key: str, status: str, *, at: str, latest_error: str | None = None
    ) -> bool:
        """The lane ends `completed` or `failed` (a failover ends it in `hand_over`)."""
        sets = ["#status = :status", "finished_at = :at", "updated_at = :at", "running_items = :zero"]
        values: dict[str, Any] = {
            ":status": status,
            ":at": at,
            ":zero": 0,
            ":pending": "pending",
            ":running": "running",
        }
        if latest_error is not None:
            sets.append("latest_error = :error")
            values[":error"] = latest_error
        return self._update_lane(
            batch_id,
            lane_key,
            "SET " + ", ".join(sets) + " REMOVE job, job_chunk, partial_chunk, submitting",
            condition="attribute_exists(pk) AND #status IN (:pending, :running)",
            names={"#status": "status"},
            values=values,
        )

    def set_job(self, batch_id: str, lane_key: str, job: SubmittedJob | None, *, chunk: int) -> None:
        """The vendor batch job running for `chunk` (None: no job running); either way no
        submit is left in flight (`submitting`)."""
        if job is None:
            self._update_lane(batch_id, lane_key, "REMOVE job, job_chunk, submitting")
        else:
            self._update_lane(
                batch_id,
                lane_key,
                "SET job = :job, job_chunk = :chunk REMOVE submitting",
                values={":job": job_item(job), ":chunk": chunk},
            )

    def note_submitting(self, batch_id: str, lane_key: str, mark: str, expect: str | None = None) -> bool:
        """A vendor job submit about to begin (services/workflow/submits.py), until its job is
        stored (`set_job`); with `expect`, only over that note (False: it is gone, its job
        stored since, or another's note over it)."""
        if expect is None:
            return self._update_lane(batch_id, lane_key, "SET submitting = :mark", values={":mark": mark})
        return self._update_lane(
            batch_id,
            lane_key,
            "SET submitting = :mark",
            condition="attribute_exists(pk) AND submitting = :left",
            values={":mark": mark, ":left": expect},
        )

    def set_partial(self, batch_id: str, lane_key: str, chunk: int) -> None:
        """`chunk` has some results saved as a partial file (the lane left it half done)."""
        self._update_lane(batch_id, lane_key, "SET partial_chunk = :chunk", values={":chunk": chunk})

    # -- chunks, exactly once ------------------------------------------------------------------
    def start_chunk(self, batch_id: str, lane_key: str, position: int, *, items: int) -> bool:
        """Counts `items` pending -> running and notes the lane's chunk at `position` (of
        its list) as started; False (and no change) when it was started before."""
        lane = {
            "Update": update_request(
                self.table_name,
                lane_item_key(batch_id, lane_key),
                "SET chunks_started_n = :next, running_items = :items",
                condition=f"attribute_exists(pk) AND {_STARTED_AT} AND {_DONE_AT}",
                values={":position": position, ":next": position + 1, ":items": items},
            )
        }
        return self._transact(
            lane, _counts_update(self.table_name, batch_id, {"pending": -items, "running": items})
        )

    def finish_chunk(self, batch_id: str, lane_key: str, tally: ChunkTally, *, at: str) -> bool:
        """The chunk's items leave `running` as `tally` says; the lane adds them and the usage
        of its completed items. False (and no change) when the chunk was finished before."""
        position = tally.position
        lane = {
            "Update": update_request(
                self.table_name,
                lane_item_key(batch_id, lane_key),
                "SET chunks_done_n = :next, chunks_started_n = :next, "
                "running_items = :zero, updated_at = :at, "
                "completed = if_not_exists(completed, :zero) + :completed, "
                "failed = if_not_exists(failed, :zero) + :failed, "
                "canceled = if_not_exists(canceled, :zero) + :canceled, "
                "handed_over = if_not_exists(handed_over, :zero) + :handed, "
                f"{_usage_adds(tally)}{_writer_note(tally)} REMOVE partial_chunk",
                condition=f"attribute_exists(pk) AND {_DONE_AT}",
                names=_usage_names(tally),
                values={
                    ":position": position,
                    ":next": position + 1,
                    ":zero": 0,
                    ":at": at,
                    ":canceled": tally.canceled,
                    **_tally_values(tally),
                },
            )
        }
        return self._transact(lane, _counts_update(self.table_name, batch_id, tally.count_moves()))

    def cancel_rest(
        self, batch_id: str, lane_key: str, *, pending: int, running: int, at: str, reason: str
    ) -> bool:
        """The batch ended (canceled, expired, failed): the lane's items that never ran
        count as canceled and the lane ends `canceled`. Exactly once (the lane's status)."""
        lane = {
            "Update": update_request(
                self.table_name,
                lane_item_key(batch_id, lane_key),
                "SET #status = :canceled, "
                "canceled = if_not_exists(canceled, :zero) + :n, running_items = :zero, "
                "finished_at = :at, updated_at = :at, latest_error = :reason "
                "REMOVE job, job_chunk, partial_chunk, submitting",
                condition="attribute_exists(pk) AND #status IN (:pending, :running)",
                names={"#status": "status"},
                values={
                    ":canceled": "canceled",
                    ":pending": "pending",
                    ":running": "running",
                    ":zero": 0,
                    ":n": pending + running,
                    ":at": at,
                    ":reason": reason,
                },
            )
        }
        moves = {"pending": -pending, "running": -running, "canceled": pending + running}
        return self._transact(lane, _counts_update(self.table_name, batch_id, moves))

    def set_fail_error(self, batch_id: str, lane_key: str, *, code: str, message: str, summary: str) -> None:
        """No lane is left to take over: the lane fails its remaining items with this error
        (kept from the first time, so a repeated run fails them the same way)."""
        self._update_lane(
            batch_id,
            lane_key,
            "SET fail_error = if_not_exists(fail_error, :error), latest_error = :summary",
            values={":error": {"code": code, "message": message}, ":summary": summary},
        )

    def hand_over(self, batch_id: str, move: HandOver) -> bool:
        """Failover in ONE transaction: the successor lane record is created, this lane
        finishes its chunk with what it answered and ends `failed` (`move.error`) pointing at
        the successor, and the chunk's unanswered items go back to pending for the successor.
        False (and no change) when the lane had ended or finished the chunk already. A
        deadline rescue that takes only some items creates `move.rest` (the old lane's own)
        in the same write."""
        tally = move.tally.rest_handed_over()
        position = tally.position
        successors = [move.successor] if move.rest is None else [move.successor, move.rest]
        puts = [put_new(self.table_name, lane_values(batch_id, record)) for record in successors]
        values = {
            ":position": position,
            ":next": position + 1,
            ":failed_status": "failed",
            ":pending": "pending",
            ":running": "running",
            ":to": move.successor.lane_key,
            ":error": move.error,
            ":at": move.at,
            ":zero": 0,
            **_tally_values(tally),
        }
        key = lane_item_key(batch_id, move.lane_key)
        lane = _hand_over_update(self.table_name, key, values, tally)
        counts = _counts_update(self.table_name, batch_id, tally.count_moves())
        items_ = [lane, *puts] if counts is None else [lane, *puts, counts]
        return transact_unless_refused(self.dynamodb, items_, *range(len(puts) + 1))

    def _transact(self, lane: dict[str, Any], counts: dict[str, Any] | None) -> bool:
        items = [lane] if counts is None else [lane, counts]
        return transact_unless_refused(self.dynamodb, items, 0, or_unnamed=True)
