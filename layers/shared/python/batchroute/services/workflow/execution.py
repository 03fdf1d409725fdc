"""The workflow's RunLane step: one lane's chunks through its provider, with failover.

For each chunk of the lane not yet done, in order:

1. stop if the batch is terminal (canceled, expired, failed): the lane's items that never
   ran count as canceled (a half-done chunk keeps what it has);
2. read the input chunk, keep the lane's items (its model and stream, ordinals in its
   range, less the seqs the lane it took over from had answered);
3. count them pending -> running (once per chunk: `BatchProgress.start_chunk`);
4. run them through the provider with the lane runner (sync: `run_lane_items` at the
   provider's concurrency; vendor batch API: one `run_lane_batch_job` job per chunk, and
   items too few for a vendor job, such as a retry of one record under Bedrock's minimum,
   through the provider's sync adapter on the same lane at its quoted prices);
5. write `results/<lane_key>/<chunk>.<writer>.jsonl` sorted by seq, then count running ->
   completed / failed and add the completed items' usage to the lane, in ONE transaction
   conditioned on the chunk not being done yet (`BatchProgress.finish_chunk`).

Failover: when the lane runner says `unavailable`, the chunk's answered items are written,
and ONE transaction creates the next eligible lane of the quote (its rejected lanes with
code `outranked`, cheapest first, not used yet) for the lane's unfinished ordinals at the
ORIGINAL lane's unit prices, marks this lane failed with `failover_to`, and hands the
chunk's unanswered items back to pending. The new lane runs in the same invocation. With
no lane left, the lane records the error and fails its remaining items with it (and the
batch's `execution_summary.latest_error` says so).

Deadline rescue: at each poll of a running vendor job (and before each chunk of a sync lane
but its first), `DeadlineRescue.check`
(services/workflow/rescue.py) projects the lane's finish; when it misses the deadline less the
routing mode's margin and the batch's `rescue` setting pays for a faster eligible lane, the
chunk's answered items are written and ONE transaction hands the rest over as failover does
(the rescue lane at its own prices, and the items the money does not cover to a new record of
this lane, `then_lane`, run after it); then the vendor job is cancelled (best effort) and
`batch.rescue_started` is queued. docs/batches.md, "Deadline rescue".

A lane whose vendor account cannot serve (`insufficient_quota`: out of credit; waiting
does not clear it) is also marked unavailable in the lane live state, with every other lane
of its provider (the account is theirs too): routing leaves them until
`LaneLimits.unavailable_seconds` have passed, and the operator is told (an error log and the
`LanesMarkedUnavailable` metric, which raises an alarm).

Time budget: a new chunk starts only while the invocation has `chunk_margin_seconds`
left; inside a chunk a sync lane stops taking items at `stop_margin_seconds`, and a vendor
job is polled in this invocation for at most `batch_inline_wait_seconds`. Then the chunk's
results so far go to a partial file, the message is re-enqueued with the same task token,
and the step returns without answering; the next invocation carries on where this one
stopped. The task is answered when the lane (and any lane it failed over to) is done.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any, Literal, Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.batches.artifact_keys import partial_chunk_key, result_chunk_key
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.batches.states import TERMINAL
from batchroute.domain.catalog.catalog import Catalog, Lane
from batchroute.domain.catalog.pricing import UsageFields
from batchroute.domain.routing.items import BatchItem
from batchroute.domain.routing.lane_plan import (
    LaneFailError,
    LaneRecord,
    SubmittedJob,
    failover_record,
    handover_lanes,
    lane_chunk_done,
    lane_chunk_position,
    lane_chunks,
    lane_items,
    lane_offsets,
    plan_groups,
    result_writer_note,
    root_number,
)
from batchroute.domain.routing.policy import in_force
from batchroute.domain.workflow.results import ChunkTally, HandOver, LineError, ResultLine
from batchroute.errors import PermanentError
from batchroute.observability import logger
from batchroute.providers.base import (
    ItemError,
    JobStatus,
    ProviderResult,
    ProviderUnavailable,
    TransientProviderError,
)
from batchroute.providers.registry import ProviderNotConfigured, ProviderRegistry
from batchroute.providers.retry import RetryPolicy
from batchroute.services.batches.ports import BatchStore
from batchroute.services.catalog.lane_health import (
    ACCOUNT_DOWN_CODES,
    LaneAvailability,
    mark_account_down,
)
from batchroute.services.routing.ports import OrgPolicies
from batchroute.services.workflow.ports import BatchFiles, ProgressCounters
from batchroute.services.workflow.rescue import DeadlineRescue, RescuePlan
from batchroute.services.workflow.runner import (
    LaneOutcome,
    SyncRemainder,
    cancel_lane_job,
    collect_cancelled_job,
    run_lane_batch_job,
    run_lane_items,
)
from batchroute.services.workflow.submits import RememberedSubmits, job_left
from batchroute.services.workflow.time_budget import TimeBudget
from batchroute.workflow.queues import TaskSender
from batchroute.workflow.tasks import LaneOutput, WorkflowTask

FINAL_LANE_STATUSES = frozenset({"completed", "failed", "canceled"})

_NO_RESULT = ItemError("no_result", "the provider returned no result for this item")


class UnknownLane(PermanentError):
    pass


class Capacity(Protocol):
    """adapters/dynamo/lanes.py:LaneStateStore"""

    def consume_capacity(self, lane_id: str, items: int, *, at: str | None = None) -> bool: ...

    def exhaust_capacity(self, lane_id: str, *, at: str) -> bool: ...


@dataclass(frozen=True)
class LaneLimits:
    chunk_margin_seconds: float = 120.0  # start another chunk only with this much time left
    stop_margin_seconds: float = 45.0  # a sync lane stops taking items with this much left
    fallback_seconds: float = 300.0  # the budget without a Lambda context (router time-out)
    batch_inline_wait_seconds: float = 120.0  # poll a vendor job this long per invocation
    unavailable_seconds: float = 3600.0  # a lane marked unavailable stays out of routing this long
    # how long after a batch ended its lane waits for a vendor job the cancel stopped to end
    # (OpenAI takes up to 10 minutes to cancel); then the job is let go, its items canceled
    stopped_job_wait_seconds: float = 7200.0


def result_line(
    seq: int, customer_item_id: Any, result: ProviderResult, attempts: int, lane: LaneRecord
) -> ResultLine:
    """One line of a lane's result chunk (docs/batches.md)."""
    usage: UsageFields = result.usage.to_dict()
    error: LineError | None = None
    if result.error is not None:
        error = {
            "code": result.error.code,
            "message": result.error.message,
            "transient": result.error.transient,
        }
    return {
        "seq": seq,
        "customer_item_id": customer_item_id,
        "status": result.status,
        "output": result.output,
        "error": error,
        "raw": result.raw,
        "usage": usage,
        "model": lane.model,
        "provider": lane.provider,
        "lane_id": lane.lane_id,
        "attempts": attempts,
    }


def failed_line(seq: int, customer_item_id: Any, error: ItemError, lane: LaneRecord) -> ResultLine:
    return result_line(seq, customer_item_id, ProviderResult.failure(f"seq-{seq}", error), 0, lane)


def lane_failure_message(lane: LaneRecord, error: ItemError) -> str:
    return f"lane {lane.lane_id} unavailable: {error.describe()}"[:1000]


@dataclass
class _Chunk:
    """One chunk of one lane while it runs."""

    number: int
    position: int  # its index in the lane's chunks: the watermarks count in that order
    first_ordinal: int
    kept: list[tuple[int, BatchItem]]
    results: dict[int, ResultLine] = field(default_factory=dict)
    has_partial: bool = False  # a partial file exists: delete it once the chunk is done

    @property
    def size(self) -> int:
        return len(self.kept)

    def customer_id(self, seq: int) -> Any:
        return self._ids.get(seq)

    def __post_init__(self) -> None:
        self._ids = {seq: item.get("customer_item_id") for seq, item in self.kept}

    def todo(self) -> list[tuple[int, BatchItem]]:
        return [(seq, item) for seq, item in self.kept if seq not in self.results]

    def tally(self, *, canceled: int = 0, writer: str | None = None) -> ChunkTally:
        """The chunk's items, its answered ones (completed, failed) and the usage of the
        completed; with `writer`, the note of the result file they are of."""
        note = result_writer_note(self.number, writer) if writer is not None else None
        tally = ChunkTally(position=self.position, items=self.size, canceled=canceled, result_writer=note)
        for line in self.results.values():
            tally.add(line)
        return tally

    def sorted_lines(self) -> list[ResultLine]:
        return [self.results[seq] for seq in sorted(self.results)]


@dataclass
class _ChunkEnd:
    kind: Literal["done", "continue", "unavailable", "rescue"]
    delay_seconds: int = 0
    error: ItemError | None = None
    chunk: _Chunk | None = None
    rescue: RescuePlan | None = None
    job: SubmittedJob | None = None  # the vendor job a rescue leaves behind


@dataclass
class _Invocation:
    budget: TimeBudget
    chunks_run: int = 0
    batch: BatchRecord | None = None  # (deadline rescue reads its deadline, plan and money)
    rescue: RescuePlan | None = None  # the rescue a poll found due


@dataclass(eq=False, kw_only=True)
class LaneExecutor:
    records: BatchStore
    progress: ProgressCounters
    artifacts: BatchFiles
    registry: ProviderRegistry
    retry: RetryPolicy
    catalog: Catalog
    clock: Clock
    continuations: TaskSender | None
    # The org's route policy as it stands: a failover never leaves it (docs/routing-policy.md)
    policies: OrgPolicies
    capacity: Capacity  # a lane's items come off its provider's capacity today
    rescue: DeadlineRescue  # a lane that would miss the batch's deadline is rescued (docs/batches.md)
    availability: LaneAvailability  # where a provider account that cannot serve marks its lanes
    limits: LaneLimits = field(default_factory=LaneLimits)
    sleeper: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    budget: Callable[[], TimeBudget] | None = None  # None: the lane limits' fallback seconds

    def _budget(self) -> TimeBudget:
        return self.budget() if self.budget is not None else TimeBudget(self.limits.fallback_seconds)

    def _now(self) -> str:
        return isoformat(self.clock.now())

    # -- the step --------------------------------------------------------------------------------
    def run(self, task: WorkflowTask, batch: BatchRecord) -> LaneOutput | None:
        """Run the lane of `task.lane` (and the lanes it fails over to) until done; None when
        the work continues in a re-enqueued message (the task is answered later)."""
        batch_id = task.batch_id
        root_key = task.lane_key()
        lane = self.progress.get_lane(batch_id, root_key) if root_key else None
        if lane is None:
            raise UnknownLane(f"batch {batch_id} has no lane {root_key!r}")
        self.records.transition(batch_id, "running", at=self._now())
        invocation = _Invocation(self._budget(), batch=batch)
        while True:
            lane = self._follow_failover(batch_id, lane)
            if lane.status in FINAL_LANE_STATUSES:
                break
            now = self._now()
            if self.progress.lane_first_run(batch_id, lane.lane_key, at=now):
                self._take_capacity(lane)
            self.progress.lane_running(batch_id, lane.lane_key, at=now)
            if lane.started_at is None:  # the record's start is now this run's: rescue judges by it
                lane = replace(lane, started_at=now)
            end = self._run_chunks(batch, lane, invocation)
            if end.kind == "continue":
                self._continue(task, end.delay_seconds)
                return None
            if end.kind == "unavailable":
                assert end.chunk is not None and end.error is not None
                if end.error.code in ACCOUNT_DOWN_CODES:
                    self._mark_provider_unavailable(lane.provider, end.error)
                self._fail_over(batch, lane, end.chunk, end.error)
            if end.kind == "rescue":
                self._rescue(batch, lane, end)
            lane = self._reload(batch_id, lane)
        return self._answer(batch_id, root_key)

    def _take_capacity(self, lane: LaneRecord) -> None:
        """The lane's items come off its provider's remaining capacity today, once, when it
        first runs. A lane short of capacity still runs (routing saw room when it was quoted),
        and takes what is left: its capacity is 0, so later quotes see it full."""
        items = lane.item_count
        if items <= 0:
            return
        at = self._now()
        if not self.capacity.consume_capacity(lane.lane_id, items, at=at):
            self.capacity.exhaust_capacity(lane.lane_id, at=at)
            logger.warning(
                "lane capacity ran out since the quote; running anyway, capacity now 0",
                extra={"lane_id": lane.lane_id, "items": items},
            )

    def _reload(self, batch_id: str, lane: LaneRecord) -> LaneRecord:
        fresh = self.progress.get_lane(batch_id, lane.lane_key)
        if fresh is None:
            raise UnknownLane(f"lane {lane.lane_key} of batch {batch_id} disappeared")
        return fresh

    def _follow_failover(self, batch_id: str, lane: LaneRecord) -> LaneRecord:
        seen = {lane.lane_key}
        while next_key := _next_in_chain(lane):
            found = self.progress.get_lane(batch_id, next_key)
            if found is None or found.lane_key in seen:
                raise UnknownLane(f"lane {lane.lane_key} fails over to a missing lane")
            seen.add(found.lane_key)
            lane = found
        return lane

    def _answer(self, batch_id: str, root_key: str) -> LaneOutput:
        """The lane's outcome, its failover lanes included."""
        totals = {"completed": 0, "failed": 0, "canceled": 0}
        key: str | None = root_key
        seen: set[str] = set()
        while key and key not in seen:
            seen.add(key)
            lane = self.progress.get_lane(batch_id, key)
            if lane is None:
                break
            totals["completed"] += lane.completed
            totals["failed"] += lane.failed
            totals["canceled"] += lane.canceled
            key = lane.failover_to or lane.then_lane
        return {
            "lane_key": root_key,
            "completed": totals["completed"],
            "failed": totals["failed"],
            "canceled": totals["canceled"],
        }

    def _continue(self, task: WorkflowTask, delay_seconds: int) -> None:
        if self.continuations is None:
            raise PermanentError("this worker cannot re-enqueue a lane (no lanes queue configured)")
        self.continuations.send(json.dumps(task.model_dump(mode="json")), delay_seconds=delay_seconds)
        logger.info(
            "lane continues in a new message",
            extra={"lane_key": task.lane_key() or None, "delay_seconds": delay_seconds},
        )

    # -- chunks ----------------------------------------------------------------------------------
    def _run_chunks(self, batch: BatchRecord, lane: LaneRecord, invocation: _Invocation) -> _ChunkEnd:
        batch_id = batch.batch_id
        offsets = lane_offsets(batch.chunk_models or [], lane)
        done = lane.chunks_done_n  # the lane runs its chunks in order
        fail_with = _item_error(lane.fail_error)
        for position, number in enumerate(lane_chunks(lane)):
            if position < done:
                continue
            out_of_time = invocation.budget.remaining() < self.limits.chunk_margin_seconds
            if fail_with is None and invocation.chunks_run > 0 and out_of_time:
                return _ChunkEnd("continue")
            state = self.records.state(batch_id)
            if state in TERMINAL:
                if not self._collect_stopped_job(batch_id, lane, number, position, offsets[number]):
                    return _ChunkEnd("continue", delay_seconds=int(self.registry.batch_poll_interval_seconds))
                self._cancel_rest(batch, self._reload(batch_id, lane), str(state))
                return _ChunkEnd("done")
            if fail_with is None and (rescue := self._rescue_between(lane, number, position, invocation)):
                return _ChunkEnd("rescue", chunk=_Chunk(number, position, offsets[number], []), rescue=rescue)
            chunk = self._load_chunk(batch_id, lane, number, position, offsets[number])
            end = self._run_chunk(batch_id, lane, chunk, invocation, fail_with=fail_with)
            invocation.chunks_run += 1
            if end.kind != "done":
                return end
        status = "failed" if fail_with is not None else "completed"
        self.progress.lane_finished(
            batch_id,
            lane.lane_key,
            status,
            at=self._now(),
            latest_error=lane_failure_message(lane, fail_with) if fail_with else None,
        )
        return _ChunkEnd("done")

    def _load_chunk(
        self, batch_id: str, lane: LaneRecord, number: int, position: int, first_ordinal: int
    ) -> _Chunk:
        kept = list(
            lane_items(
                self.artifacts.input_lines(batch_id, number, model=lane.model),
                model=lane.model,
                first_ordinal=first_ordinal,
                start=lane.ordinal_start,
                end=lane.ordinal_end,
                exclude=frozenset(lane.exclude_seqs),
                prefixes=lane.prefixes,
            )
        )
        chunk = _Chunk(number, position, first_ordinal, kept)
        if lane.partial_chunk == number:
            chunk.has_partial = True
            wanted = {seq for seq, _ in kept}
            for line in self.artifacts.partial_lines(batch_id, lane.lane_key, number):
                if int(line["seq"]) in wanted:
                    chunk.results[int(line["seq"])] = line
        return chunk

    def _run_chunk(
        self,
        batch_id: str,
        lane: LaneRecord,
        chunk: _Chunk,
        invocation: _Invocation,
        *,
        fail_with: ItemError | None,
    ) -> _ChunkEnd:
        lane_key = lane.lane_key
        if chunk.size:
            self.progress.start_chunk(batch_id, lane_key, chunk.position, items=chunk.size)
        todo = chunk.todo()
        if todo and fail_with is not None:
            for seq, _ in todo:
                chunk.results[seq] = failed_line(seq, chunk.customer_id(seq), fail_with, lane)
        elif todo:
            outcome = self._call_provider(batch_id, lane, chunk, todo, invocation)
            if outcome.rescue and invocation.rescue is not None:
                return _ChunkEnd("rescue", chunk=chunk, rescue=invocation.rescue, job=outcome.pending_job)
            if outcome.unavailable:
                return _ChunkEnd(
                    "unavailable",
                    error=outcome.latest_error
                    or ItemError("provider_unavailable", "provider unavailable", True),
                    chunk=chunk,
                )
            if not outcome.finished:
                self._save_partial(batch_id, lane_key, chunk)
                delay = 0
                if outcome.pending_job is not None:
                    delay = int(self.registry.batch_poll_interval_seconds)
                return _ChunkEnd("continue", delay_seconds=delay)
            for seq, _ in chunk.todo():  # a finished run answered every item; never leave one out
                chunk.results[seq] = failed_line(seq, chunk.customer_id(seq), _NO_RESULT, lane)
        self._finish_chunk(batch_id, lane, chunk)
        return _ChunkEnd("done")

    def _finish_chunk(self, batch_id: str, lane: LaneRecord, chunk: _Chunk, *, canceled: int = 0) -> None:
        lane_key = lane.lane_key
        if self._finished_elsewhere(batch_id, lane_key, chunk):
            return
        writer = self._write_results(batch_id, lane_key, chunk)
        tally = chunk.tally(canceled=canceled, writer=writer)
        if not self.progress.finish_chunk(batch_id, lane_key, tally, at=self._now()):
            self._drop_unnoted(batch_id, lane_key, chunk, writer)
        self._drop_partial(batch_id, lane_key, chunk)

    def _finished_elsewhere(self, batch_id: str, lane_key: str, chunk: _Chunk) -> bool:
        """Another worker running this lane at once (a message delivered twice) finished, or
        handed over, the chunk first, its result file written before: it stands, and this
        one's answers (perhaps failures from a job the other had already read) are not written.
        (Read just before writing: the two can still cross within that moment, and then each
        writes a file of its own, and only the one the finishing write notes is read.)"""
        fresh = self.progress.get_lane(batch_id, lane_key)
        if fresh is None or not lane_chunk_done(fresh, chunk.number):
            return False
        logger.info("chunk finished by another worker", extra={"batch_id": batch_id, "lane": lane_key})
        self._drop_partial(batch_id, lane_key, chunk)
        return True

    def _write_results(self, batch_id: str, lane_key: str, chunk: _Chunk) -> str | None:
        """The chunk's answered items to a result file of this worker's own; its writer, or
        None when the chunk answered nothing.
        Another worker running the lane at once (a message delivered twice) writes its own:
        only the file the chunk's finishing write notes is ever read, so the answers read are
        always the ones counted, whichever worker's they are."""
        if not chunk.results:
            return None
        writer = secrets.token_hex(6)
        self.artifacts.write_lines(
            result_chunk_key(batch_id, lane_key, chunk.number, writer), chunk.sorted_lines()
        )
        return writer

    def _drop_unnoted(self, batch_id: str, lane_key: str, chunk: _Chunk, writer: str | None) -> None:
        """This worker's result file of a chunk another finished first: never read, deleted."""
        if writer is not None:
            logger.info("chunk finished by another worker", extra={"batch_id": batch_id, "lane": lane_key})
            self.artifacts.delete(result_chunk_key(batch_id, lane_key, chunk.number, writer))

    def _drop_partial(self, batch_id: str, lane_key: str, chunk: _Chunk) -> None:
        """The partial file of a chunk now written whole."""
        if chunk.has_partial:
            self.artifacts.delete(partial_chunk_key(batch_id, lane_key, chunk.number))

    def _keep_job(self, batch_id: str, lane_key: str, chunk: _Chunk, submitted: SubmittedJob | None) -> None:
        """The lane runner's `on_job`: a vendor job stored on the lane record while it runs."""
        if submitted is None:
            # The lane's jobs are done: their answers kept as the partial file before the job
            # is let go, so an invocation that dies before the chunk's results are written
            # (or a clear that fails, which would leave a spent job to resume) finds every
            # answer kept and asks no vendor again.
            try:
                if chunk.results:
                    self._save_partial(batch_id, lane_key, chunk)
            finally:  # kept or not, the job is let go: a rerun buys what was not kept
                self.progress.set_job(batch_id, lane_key, None, chunk=chunk.number)
            return
        if chunk.results or chunk.has_partial:
            # Results reported so far first: a crash after this leaves the job and the results
            # that came before it consistent. (With none yet there is nothing to keep: an
            # empty partial file would be a PUT and a DELETE for nothing.)
            self._save_partial(batch_id, lane_key, chunk)
        self.progress.set_job(batch_id, lane_key, submitted, chunk=chunk.number)

    def _save_partial(self, batch_id: str, lane_key: str, chunk: _Chunk) -> None:
        chunk.has_partial = True
        self.artifacts.write_lines(partial_chunk_key(batch_id, lane_key, chunk.number), chunk.sorted_lines())
        self.progress.set_partial(batch_id, lane_key, chunk.number)

    # -- the provider ----------------------------------------------------------------------------
    def _catalog_lane(self, model: str, lane_id: object) -> Lane | None:
        return next(
            (c for c in self.catalog.lanes_for(model) if c.lane_id == lane_id),
            None,
        )

    def _call_provider(
        self,
        batch_id: str,
        lane: LaneRecord,
        chunk: _Chunk,
        todo: list[tuple[int, BatchItem]],
        invocation: _Invocation,
    ) -> LaneOutcome:
        catalog_lane = self._catalog_lane(lane.model, lane.lane_id)
        if catalog_lane is None:
            outcome = LaneOutcome()
            outcome.fail_over(ItemError("lane_unknown", f"{lane.lane_id} is not in the catalog", True))
            return outcome
        slug = lane.provider

        def on_result(seq: int, result: ProviderResult, attempts: int) -> None:
            chunk.results[seq] = result_line(seq, chunk.customer_id(seq), result, attempts, lane)

        if self.registry.execution_mode(slug) != "batch_api":
            return run_lane_items(
                todo,
                lane=catalog_lane,
                provider=self.registry.sync(slug),
                retry=self.retry,
                concurrency=self.registry.provider(slug).max_concurrency,
                on_result=on_result,
                should_stop=lambda: invocation.budget.remaining() < self.limits.stop_margin_seconds,
                cache_prefixes=frozenset(lane.cache_prefixes),
            )
        return self._run_batch_job(batch_id, lane, chunk, todo, catalog_lane, on_result, invocation)

    def _run_batch_job(
        self,
        batch_id: str,
        lane: LaneRecord,
        chunk: _Chunk,
        todo: list[tuple[int, BatchItem]],
        catalog_lane: Lane,
        on_result: Callable[[int, ProviderResult, int], None],
        invocation: _Invocation,
    ) -> LaneOutcome:
        """One vendor job per chunk, stored on the lane record while it runs."""
        lane_key = lane.lane_key
        slug = lane.provider
        job = lane.job if lane.job_chunk == chunk.number else None

        def load_items(seqs: Collection[int] | None) -> Iterable[tuple[int, BatchItem]]:
            if seqs is None:
                return todo
            wanted = set(seqs)
            return [(seq, item) for seq, item in todo if seq in wanted]

        on_job = partial(self._keep_job, batch_id, lane_key, chunk)

        waiting_since = self.monotonic()

        def should_stop() -> bool:
            waited = self.monotonic() - waiting_since
            return (
                waited >= self.limits.batch_inline_wait_seconds
                or invocation.budget.remaining() < self.limits.chunk_margin_seconds
            )

        return run_lane_batch_job(
            load_items,
            lane=catalog_lane,
            provider=self._remembered(batch_id, lane, chunk),
            retry=self.retry,
            on_result=on_result,
            job=job,
            on_job=on_job,
            poll_interval_seconds=self.registry.batch_poll_interval_seconds,
            sleeper=self.sleeper,
            should_stop=should_stop,
            clock=self.clock,
            limits=self.registry.provider(slug).batch_limits,
            rescue_due=lambda status: self._rescue_due(lane, chunk, status, invocation),
            cache_prefixes=frozenset(lane.cache_prefixes),
            sync=self._sync_remainder(slug, invocation),
        )

    def _remembered(self, batch_id: str, lane: LaneRecord, chunk: _Chunk) -> RememberedSubmits:
        """The lane's batch adapter, its submits noted on the lane record until their job is
        stored, taking the key of one an invocation that died left (services/workflow/submits.py)."""
        return RememberedSubmits(
            self.registry.batch_api(lane.provider),
            chunk=chunk.number,
            note=partial(self.progress.note_submitting, batch_id, lane.lane_key),
            clock=self.clock,
            left=lane.submitting,
        )

    def _sync_remainder(self, slug: str, invocation: _Invocation) -> SyncRemainder:
        """How a batch-API lane answers items too few for a vendor job (Bedrock's minimum
        records): through its provider's sync adapter, at the provider's concurrency, stopping
        as a sync lane does; with no sync adapter here those items fail over alone."""
        try:
            sync = self.registry.sync(slug)
        except ProviderNotConfigured:
            return SyncRemainder(None)
        return SyncRemainder(
            sync,
            concurrency=self.registry.provider(slug).max_concurrency,
            should_stop=lambda: invocation.budget.remaining() < self.limits.stop_margin_seconds,
        )

    def _rescue_between(
        self, lane: LaneRecord, number: int, position: int, invocation: _Invocation
    ) -> RescuePlan | None:
        """Between the chunks of a sync lane (before one it has not started): the rescue due
        now, if any. Handing over there moves no count (none of the chunk's items ran)."""
        starting = position > 0 and lane.partial_chunk != number and lane.chunks_started_n == position
        if invocation.batch is None or not starting:
            return None
        if self.registry.execution_mode(lane.provider) == "batch_api":
            return None  # checked at each poll of its job instead
        if not self.rescue.worth_checking(invocation.batch, lane):
            return None
        fresh = self._reload(invocation.batch.batch_id, lane)
        if fresh.chunks_started_n != position:
            return None
        invocation.rescue = self.rescue.check(invocation.batch, fresh, position, None, sync=True)
        return invocation.rescue

    def _rescue_due(
        self, lane: LaneRecord, chunk: _Chunk, status: JobStatus | None, invocation: _Invocation
    ) -> bool:
        """Asked at each poll of a running vendor job: will the lane miss the deadline, and
        is there a lane (and the money) to rescue it? (services/workflow/rescue.py)"""
        if invocation.batch is None:
            return False
        if not self.rescue.worth_checking(invocation.batch, lane):
            return False
        fresh = self._reload(invocation.batch.batch_id, lane)  # its counts as they stand
        invocation.rescue = self.rescue.check(invocation.batch, fresh, chunk.position, status)
        return invocation.rescue is not None

    # -- failover --------------------------------------------------------------------------------
    def _fail_over(self, batch: BatchRecord, lane: LaneRecord, chunk: _Chunk, error: ItemError) -> None:
        batch_id = batch.batch_id
        lane_key = lane.lane_key
        if self.records.state(batch_id) in TERMINAL:
            # The batch ended meanwhile (a cancel stopped the vendor job this lane was polling):
            # nothing hands over; the lane's next turn collects what the job finished and
            # cancels the rest (`_collect_stopped_job`).
            return
        message = lane_failure_message(lane, error)
        used = {other.lane_id for other in self.records.lanes(batch_id)}
        policy = in_force(self.policies.current(batch.org_id))
        candidates = [
            candidate
            for candidate, _ in handover_lanes(
                plan_groups(batch.plan), lane.model, used, self.catalog, policy
            )
        ]
        if not candidates:
            # No lane left: this lane fails the rest of its items with the error.
            logger.warning("lane unavailable and no failover lane left", extra={"lane_key": lane_key})
            self.progress.set_fail_error(
                batch_id, lane_key, code=error.code, message=error.message, summary=message
            )
            self.records.update(batch_id, {"execution_summary": {"latest_error": message}})
            for seq, _ in chunk.todo():
                chunk.results[seq] = failed_line(seq, chunk.customer_id(seq), error, lane)
            self._finish_chunk(batch_id, lane, chunk)
            return
        successor = failover_record(
            lane,
            candidates[0],
            chunk=chunk.number,
            chunk_first_ordinal=chunk.first_ordinal,
            answered=chunk.results.keys(),
            root_number=root_number(lane_key),
            at=self._now(),
        )
        handed = self._hand_over(batch_id, lane, chunk, successor, message)
        logger.warning(
            "lane failed over",
            extra={"lane_key": lane_key, "to": successor.lane_key, "written": handed, "error": error.code},
        )

    def _hand_over(
        self,
        batch_id: str,
        lane: LaneRecord,
        chunk: _Chunk,
        successor: LaneRecord,
        message: str,
        rest: LaneRecord | None = None,
    ) -> bool:
        """The chunk's answered items written, then ONE transaction moves the rest on; False
        when another invocation moved the lane on first."""
        if self._finished_elsewhere(batch_id, lane.lane_key, chunk):
            return False
        writer = self._write_results(batch_id, lane.lane_key, chunk)
        handed = self.progress.hand_over(
            batch_id,
            HandOver(lane.lane_key, successor, chunk.tally(writer=writer), message, self._now(), rest),
        )
        if not handed:
            self._drop_unnoted(batch_id, lane.lane_key, chunk, writer)
        self._drop_partial(batch_id, lane.lane_key, chunk)
        return handed

    # -- deadline rescue -------------------------------------------------------------------------
    def _rescue(self, batch: BatchRecord, lane: LaneRecord, end: _ChunkEnd) -> None:
        """Hand the lane's unfinished items to the rescue lane (and the rest to a new record
        of this lane) exactly as failover does, then cancel the vendor job (best effort)."""
        chunk, plan = end.chunk, end.rescue
        assert chunk is not None and plan is not None
        made = self.rescue.records_for(
            batch,
            lane,
            plan.decision,
            chunk=chunk.number,
            first_ordinal=chunk.first_ordinal,
            answered=chunk.results.keys(),
        )
        if not self._hand_over(batch.batch_id, lane, chunk, made.rescue, plan.message, made.rest):
            return  # another invocation moved the lane on first
        self._cancel_job(lane, end.job)
        self.rescue.started(batch, lane, made, plan)

    def _mark_provider_unavailable(self, provider: str, error: ItemError) -> None:
        mark_account_down(
            self.catalog,
            self.availability,
            provider,
            error,
            now=self.clock.now(),
            seconds=self.limits.unavailable_seconds,
        )

    # -- cancel / expiry -------------------------------------------------------------------------
    def _cancel_job(self, lane: LaneRecord, job: SubmittedJob | None) -> None:
        """Best-effort cancel of the lane's vendor job: its results are not needed any more."""
        if job is None:
            return
        try:
            cancel_lane_job(job, provider=self.registry.batch_api(lane.provider))
        except Exception:
            logger.warning(
                "could not cancel the vendor job", extra={"lane_key": lane.lane_key}, exc_info=True
            )

    def _collect_stopped_job(
        self, batch_id: str, lane: LaneRecord, number: int, position: int, first_ordinal: int
    ) -> bool:
        """The batch ended while the lane's vendor job ran this chunk: the job is cancelled
        at the vendor, then polled (False: still stopping, poll again later) until it ended;
        what it finished before it stopped is kept as the chunk's answers (work in flight at
        the cancel is delivered and charged, as a sync lane's started chunk is: docs/batches.md,
        "Cancel, to the end"), and the job is let go. True at once without a job. A job only
        a submit note names (its invocation died before storing it) is looked up first."""
        job = lane.job if lane.job_chunk == number else None
        if job is None:
            try:
                job = self._job_left(lane, number)
            except (TransientProviderError, ProviderUnavailable):
                return self._stopped_too_long(batch_id)  # looked up again at the next turn
            if job is None:
                return True
            # stored (the note cleared) before it is cancelled: a cancel the vendor takes turns
            # to finish is polled from the lane record, as a stored job's; a look-up would no
            # longer find it (a cancelling job is of no use to a submit)
            self.progress.set_job(batch_id, lane.lane_key, job, chunk=number)
        self._cancel_job(lane, job)
        chunk = self._load_chunk(batch_id, lane, number, position, first_ordinal)

        def keep(seq: int, result: ProviderResult, attempts: int) -> None:
            chunk.results[seq] = result_line(seq, chunk.customer_id(seq), result, attempts, lane)

        provider = self.registry.batch_api(lane.provider)
        if not collect_cancelled_job(job, provider=provider, on_result=keep):
            if not self._stopped_too_long(batch_id):
                return False
            logger.warning("a stopped vendor job never ended: let go", extra={"lane_key": lane.lane_key})
        self._keep_job(batch_id, lane.lane_key, chunk, None)  # the answers kept, the job let go
        return True

    def _job_left(self, lane: LaneRecord, number: int) -> SubmittedJob | None:
        if lane.submitting is None or self.registry.execution_mode(lane.provider) != "batch_api":
            return None  # (a sync lane notes no submit)
        found = job_left(self.registry.batch_api(lane.provider), lane.submitting, number)
        if found is None:
            return None
        logger.warning("a vendor job only a submit note named is stopped", extra={"lane_key": lane.lane_key})
        return SubmittedJob(job_id=found, attempt=1, item_count=0, submitted_at=self._now())

    def _stopped_too_long(self, batch_id: str) -> bool:
        """Whether the batch ended longer than `stopped_job_wait_seconds` ago (a cancel a
        vendor never finishes must not keep the batch from its settlement)."""
        batch = self.records.get(batch_id)
        if batch is None or not batch.completed_at:
            return False
        waited = self.clock.now() - datetime.fromisoformat(batch.completed_at)
        return waited.total_seconds() > self.limits.stopped_job_wait_seconds

    def _cancel_rest(self, batch: BatchRecord, lane: LaneRecord, state: str) -> None:
        """The batch ended while this lane had work left: a half-done chunk keeps its results
        (the rest of it is canceled), the items never started count as canceled, a running
        vendor job is cancelled (best effort)."""
        batch_id = batch.batch_id
        lane_key = lane.lane_key
        lane = self._reload(batch_id, lane)  # the progress this invocation made included
        self._cancel_job(lane, lane.job)
        partial = lane.partial_chunk
        position = lane_chunk_position(lane, partial) if partial is not None else None
        if partial is not None and position is not None and not lane_chunk_done(lane, partial):
            offsets = lane_offsets(batch.chunk_models or [], lane)
            chunk = self._load_chunk(batch_id, lane, partial, position, offsets[partial])
            self._finish_chunk(batch_id, lane, chunk, canceled=chunk.size - len(chunk.results))
            lane = self._reload(batch_id, lane)
        accounted = lane.completed + lane.failed + lane.canceled + lane.handed_over
        rest = max(0, lane.item_count - accounted)
        running = min(rest, lane.running_items)
        self.progress.cancel_rest(
            batch_id,
            lane_key,
            pending=rest - running,
            running=running,
            at=self._now(),
            reason=f"the batch was {state}",
        )


def _next_in_chain(lane: LaneRecord) -> str | None:
    """The lane that carries on after this one: its successor, or once it is done, the rest
    of a deadline rescue (kept on the old lane)."""
    if lane.failover_to:
        return lane.failover_to
    return lane.then_lane if lane.status in FINAL_LANE_STATUSES else None


def _item_error(value: LaneFailError | None) -> ItemError | None:
    if value is None or not value.code:
        return None
    return ItemError(value.code, value.message, transient=False)
