"""Runs one lane's items through its provider: the core of the workflow's RunLane step.

No S3 and no DynamoDB here: the caller reads the lane's input chunks, hands the items in
as `(seq, item)` pairs, and writes each result it is given through `on_result(seq, result,
attempts)` (results arrive in any order; the caller sorts them by seq per chunk).

Sync providers (`run_lane_items`): items run on `concurrency` threads, at most `window`
taken from the source at a time, so a 100,000-item lane holds a few dozen items in memory.
A transient error is retried with backoff (RetryPolicy) up to max_attempts, then the item
fails with the last error; a permanent error fails the item at once. ProviderUnavailable
stops the lane: items not yet answered are left without a result and `unavailable` is
set, and the caller fails them over to the next eligible lane at the quoted price. A lane
that fails wholesale (no item has succeeded and `wholesale_failure_threshold` items used
up their retries, or every attempted item did) counts as unavailable too: those items are
not reported, so they fail over instead of failing.

Vendor batch providers (`run_lane_batch_job`, `poll_lane_job`): the items go in one job;
the job is stored on the lane record (`on_job`) and polled until done, in this invocation
or a later one (`should_stop` lets a Lambda return `pending_job` and be invoked again).
Results with a transient error are resubmitted in a follow-up job (attempt + 1) until
max_attempts. Items more than one vendor job may hold (the provider's `BatchLimits`:
requests and estimated bytes) run as several jobs, one after the other. Items fewer than
one job must hold (the provider's `min_requests`: Bedrock's minimum records per job) are
not submitted: the lane's sync adapter answers them on the same lane (`SyncRemainder`),
or without one they alone fail over once the rest of the lane is done. A job the vendor
fails wholesale makes the lane unavailable, its error carrying the vendor's own errors.

The rule for the caller, both kinds: an item that got no `on_result` call has no result
yet. After `unavailable` it goes to the next lane; with no lane left the caller fails it
with `latest_error`. After `stopped` or with a `pending_job`, run the lane again later.
docs/providers.md has the long form.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from queue import SimpleQueue
from typing import Any, Final, Literal

from batchroute.clock import Clock, SystemClock, isoformat
from batchroute.domain.catalog.catalog import NO_BATCH_LIMITS, OPERATIONS, BatchLimits, Lane, Operation
from batchroute.domain.catalog.tokens import DEFAULT_OUTPUT_TOKENS
from batchroute.domain.routing.items import OUTPUT_LIMIT_KEYS, BatchItem
from batchroute.domain.routing.lane_plan import SubmittedJob, job_parts
from batchroute.domain.routing.prompt_cache import ChatInput, item_prefix
from batchroute.providers.base import (
    EXPIRED_CODE,
    ZERO_USAGE,
    BatchApiProvider,
    ItemError,
    JobStatus,
    PermanentProviderError,
    ProviderRequest,
    ProviderResult,
    ProviderUnavailable,
    SyncProvider,
    TransientProviderError,
    UnknownJob,
    Usage,
)
from batchroute.providers.retry import RetryPolicy

logger = logging.getLogger(__name__)

OnResult = Callable[[int, ProviderResult, int], None]
LoadItems = Callable[[Collection[int] | None], Iterable[tuple[int, BatchItem]]]

DEFAULT_WHOLESALE_FAILURE_THRESHOLD: Final = 25
_CUSTOM_ID_PREFIX: Final = "seq-"


@dataclass
class LaneOutcome:
    """What one run of a lane did. Counts and usage cover this run only: a lane run again
    (after `stopped`, or polling a `pending_job`) adds its own."""

    completed: int = 0
    failed: int = 0
    usage: Usage = ZERO_USAGE
    unavailable: bool = False  # fail the unanswered items over to the next lane
    stopped: bool = False  # should_stop() said so: run the unanswered items again later
    latest_error: ItemError | None = None
    pending_job: SubmittedJob | None = None  # a batch job still running: poll it later
    rescue: bool = False  # the running job will miss the deadline: hand the items over

    @property
    def finished(self) -> bool:
        """Every item of the lane has its result."""
        return not (self.unavailable or self.stopped or self.pending_job or self.rescue)

    def record(self, result: ProviderResult) -> None:
        if result.status == "completed":
            self.completed += 1
        else:
            self.failed += 1
            if not self.unavailable:  # once failing over, that is why: an answer in flight's
                self.latest_error = result.error  # own failure is its item's, not the lane's
        self.usage = self.usage + result.usage

    def fail_over(self, error: ItemError) -> None:
        self.unavailable = True
        self.latest_error = error

    def add(self, other: LaneOutcome) -> None:
        """Another run's answers counted in this one (a batch lane's sync remainder); its
        stop too, not its fail-over (the caller decides what that means)."""
        self.completed += other.completed
        self.failed += other.failed
        self.usage = self.usage + other.usage
        self.stopped = self.stopped or other.stopped
        if other.failed and not other.unavailable:
            self.latest_error = other.latest_error


# -- requests --------------------------------------------------------------------------------


def custom_id_for(seq: int) -> str:
    return f"{_CUSTOM_ID_PREFIX}{seq}"


def seq_of(custom_id: str) -> int | None:
    if not custom_id.startswith(_CUSTOM_ID_PREFIX):
        return None
    digits = custom_id[len(_CUSTOM_ID_PREFIX) :]
    return int(digits) if digits.isdecimal() else None


def build_request(
    seq: int, item: BatchItem, lane: Lane, *, attempt: int = 1, cache_prefixes: Collection[str] = ()
) -> ProviderRequest:
    """The provider request for one item on this lane; PermanentProviderError for an item
    no provider could answer (the API validates items, so this is a last line). An item
    whose prompt prefix is one of `cache_prefixes` (the lane's shared prefixes, cache-aware
    routing) asks its adapter to mark the prefix for the vendor's cache."""
    payload = item.get("input")
    if not isinstance(payload, Mapping):
        raise PermanentProviderError("the item has no input object", code="invalid_item")
    operation = item.get("operation", "responses")
    if operation not in OPERATIONS:
        raise PermanentProviderError(f"unknown operation {operation!r}", code="invalid_item")
    if operation not in lane.operations:
        raise PermanentProviderError(
            f"lane {lane.lane_id} does not serve operation {operation!r}", code="unsupported_operation"
        )
    op: Operation = operation
    return ProviderRequest(
        custom_id=custom_id_for(seq),
        customer_item_id=str(item.get("customer_item_id", "")),
        operation=op,
        model=lane.model,
        provider_model_id=lane.provider_model_id or lane.model,
        input=payload,
        max_output_tokens=_output_limit(item, payload, op, lane),
        attempt=attempt,
        sampling=lane.sampling_parameters,
        cache_prefix=_shared_prefix(payload, cache_prefixes),
    )


def _shared_prefix(payload: ChatInput, cache_prefixes: Collection[str]) -> bool:
    if not cache_prefixes:
        return False
    prefix = item_prefix(payload)
    return prefix is not None and prefix.key in cache_prefixes


def _output_limit(item: BatchItem, payload: Mapping[str, Any], operation: Operation, lane: Lane) -> int:
    if operation == "embeddings":
        return 0
    requested = DEFAULT_OUTPUT_TOKENS
    for source in (item, payload):
        value = next((source.get(k) for k in OUTPUT_LIMIT_KEYS if source.get(k) is not None), None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            requested = value
            break
    return min(requested, lane.max_output_tokens) if lane.max_output_tokens > 0 else requested


# -- sync providers ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Done:
    seq: int
    kind: Literal["result", "unavailable", "skipped"]
    result: ProviderResult | None = None
    attempts: int = 0
    exhausted: bool = False  # failed with a transient error after the last attempt
    error: ItemError | None = None


def run_lane_items(
    items: Iterable[tuple[int, BatchItem]],
    *,
    lane: Lane,
    provider: SyncProvider,
    retry: RetryPolicy,
    concurrency: int,
    on_result: OnResult,
    window: int | None = None,
    should_stop: Callable[[], bool] | None = None,
    wholesale_failure_threshold: int = DEFAULT_WHOLESALE_FAILURE_THRESHOLD,
    cache_prefixes: Collection[str] = (),
    first_attempt: int = 1,
    proven: bool = False,
) -> LaneOutcome:
    """Runs a sync lane's items; see the module docstring.

    `window` (default 2 x concurrency) bounds the items taken from `items` and not yet
    reported. `should_stop` is asked before each item is taken (e.g. the Lambda's time
    left); once it says yes no new attempt starts and the outcome is `stopped`.
    `on_result` is called on this thread only. A batch-API lane's remainder too small for a
    vendor job runs here too (`_BatchLaneRun`): its items carry their attempts on from
    `first_attempt`, and `proven` (the lane has answered items already) reports an item out
    of retries as failed at once instead of holding it for the wholesale-failure rule."""
    if concurrency < 1 or wholesale_failure_threshold < 1:
        raise ValueError("concurrency and wholesale_failure_threshold must be at least 1")
    outcome = LaneOutcome()
    halt = threading.Event()
    attempt_item = partial(
        _attempt_item,
        lane=lane,
        provider=provider,
        retry=retry,
        halt=halt,
        cache_prefixes=cache_prefixes,
        first_attempt=first_attempt,
    )
    # (held: items that used up their retries while the lane has not yet succeeded once)
    settle = _Settle(outcome, halt, [], on_result, wholesale_failure_threshold, proven=proven)
    window = max(window or 2 * concurrency, concurrency)
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"lane-{lane.provider}") as pool:
        _attempt_all(iter(items), pool, attempt_item, settle, window, should_stop)
    settle.finish()
    return outcome


def _attempt_all(
    source: Iterator[tuple[int, BatchItem]],
    pool: ThreadPoolExecutor,
    attempt_item: Callable[[int, BatchItem], _Done],
    settle: _Settle,
    window: int,
    should_stop: Callable[[], bool] | None,
) -> None:
    """Takes items from `source` into `pool` while fewer than `window` are in flight, and
    settles each as it finishes, until the source is empty or the lane halts."""
    halt = settle.halt
    exhausted = False
    # Each attempt's future is put here as it finishes: taking the next is O(1), where
    # `concurrent.futures.wait` over the whole window locks and unlocks every future in it.
    finished: SimpleQueue[Future[_Done]] = SimpleQueue()
    in_flight = 0
    try:
        while True:
            while not exhausted and not halt.is_set() and in_flight < window:
                if should_stop is not None and should_stop():
                    settle.outcome.stopped = True
                    halt.set()
                    break
                try:
                    seq, item = next(source)
                except StopIteration:
                    exhausted = True
                    break
                pool.submit(attempt_item, seq, item).add_done_callback(finished.put)
                in_flight += 1
            if not in_flight:
                break
            future = finished.get()
            in_flight -= 1
            settle(future.result())
    except BaseException:
        halt.set()
        raise


def _attempt_item(
    seq: int,
    item: BatchItem,
    *,
    lane: Lane,
    provider: SyncProvider,
    retry: RetryPolicy,
    halt: threading.Event,
    cache_prefixes: Collection[str] = (),
    first_attempt: int = 1,
) -> _Done:
    """One item to its answer: retried while transient and retries remain; `skipped` once
    the lane halts, `unavailable` when the provider is."""
    try:
        request = build_request(seq, item, lane, attempt=first_attempt, cache_prefixes=cache_prefixes)
    except PermanentProviderError as exc:
        return _Done(seq, "result", ProviderResult.failure(custom_id_for(seq), exc.to_item_error()), 0)
    while True:
        if halt.is_set():
            return _Done(seq, "skipped")
        retry_after: float | None = None
        try:
            result = provider.complete(request)
        except ProviderUnavailable as exc:
            return _Done(seq, "unavailable", error=exc.to_item_error())
        except PermanentProviderError as exc:
            failure = ProviderResult.failure(request.custom_id, exc.to_item_error())
            return _Done(seq, "result", failure, request.attempt)
        except TransientProviderError as exc:
            error = exc.to_item_error()
            retry_after = exc.retry_after_seconds
        except Exception as exc:  # an adapter bug or an unmapped client error: retry it
            logger.warning("provider %s raised %s", provider.slug, type(exc).__name__, exc_info=True)
            error = ItemError("provider_error", f"{type(exc).__name__}: {exc}"[:500], transient=True)
        else:
            if not result.transient_failure:
                return _Done(seq, "result", result, request.attempt)
            error = result.error or ItemError("provider_error", "transient failure", transient=True)
        if not retry.can_retry(request.attempt):
            failure = ProviderResult.failure(request.custom_id, error)
            return _Done(seq, "result", failure, request.attempt, exhausted=True)
        retry.wait(request.attempt, retry_after=retry_after)
        request = request.next_attempt()


@dataclass
class _Settle:
    """What each finished item means for the lane: reported, held while the lane has not
    yet succeeded once (until too many fail it wholesale), or a fail-over."""

    outcome: LaneOutcome
    halt: threading.Event
    held: list[_Done]
    on_result: OnResult
    threshold: int
    proven: bool = False  # the lane answered items before this run: nothing is held

    def report(self, done: _Done) -> None:
        assert done.result is not None
        self.on_result(done.seq, done.result, done.attempts)
        self.outcome.record(done.result)

    def __call__(self, done: _Done) -> None:
        if done.kind == "skipped":
            return
        if done.kind == "unavailable":
            if not self.outcome.unavailable:
                self.outcome.fail_over(
                    done.error or ItemError("provider_unavailable", "provider unavailable", True)
                )
            self.halt.set()
            return
        assert done.result is not None
        if self.outcome.unavailable:
            # Answers that were in flight still count; items out of retries fail over instead.
            if not done.exhausted:
                self.report(done)
            return
        if done.exhausted and self.outcome.completed == 0 and not self.proven:
            self.held.append(done)
            self.outcome.latest_error = done.result.error
            if len(self.held) >= self.threshold:
                _fail_wholesale(self.outcome, self.held)
                self.halt.set()
            return
        self.report(done)
        if done.result.status == "completed":
            while self.held:
                self.report(self.held.pop(0))

    def finish(self) -> None:
        """After the last item: what is still held is reported, or fails the lane."""
        if self.held and not self.outcome.unavailable and not self.outcome.stopped:
            # (A stopped run leaves held items unreported: the next run tries them again.)
            if self.outcome.completed == 0:
                _fail_wholesale(self.outcome, self.held)
            else:
                for done in self.held:
                    self.report(done)
        if self.outcome.unavailable:
            self.outcome.stopped = False


def _fail_wholesale(outcome: LaneOutcome, held: list[_Done]) -> None:
    last = held[-1].result.error if held[-1].result else None
    message = f"the lane failed wholesale: {len(held)} items used up their retries, none succeeded"
    if last is not None:
        message += f" (last: {last.describe()})"
    outcome.fail_over(ItemError("lane_failed", message, transient=True))
    held.clear()


# -- vendor batch providers ----------------------------------------------------------------------


@dataclass
class JobPoll:
    """One look at a job. `running`: poll again later; `done`: every result reported,
    except `retry_seqs` (transient failures to resubmit with attempt + 1); `lost`: the
    provider forgot the job (resubmit it); `unavailable`: the vendor failed the job."""

    state: Literal["running", "done", "lost", "unavailable"]
    status: JobStatus | None = None
    retry_seqs: list[int] = field(default_factory=list)


def poll_lane_job(
    job: SubmittedJob,
    *,
    provider: BatchApiProvider,
    retry: RetryPolicy,
    on_result: OnResult,
    outcome: LaneOutcome,
    load_items: LoadItems,
) -> JobPoll:
    """Polls a job once; a finished job's results are reported now (a transient failure
    with attempts left goes to `retry_seqs` instead). After a crash mid-way the same results
    are reported again: the caller's writes are keyed by seq, so a repeat overwrites."""
    try:
        status = provider.poll(job.job_id)
    except UnknownJob:
        return JobPoll("lost")
    except (TransientProviderError, ProviderUnavailable) as exc:
        logger.info("polling %s job %s failed (%s); will poll again", provider.slug, job.job_id, exc.code)
        return JobPoll("running")
    if not status.terminal:
        return JobPoll("running", status)
    if status.state in ("failed", "cancelled"):
        outcome.fail_over(job_failure(provider.slug, status))
        return JobPoll("unavailable", status)

    poll = JobPoll("done", status)
    can_retry = retry.can_retry(job.attempt)
    received: set[int] = set()
    for result in provider.results(job.job_id):
        seq = seq_of(result.custom_id)
        if seq is None or seq in received:
            continue
        received.add(seq)
        if result.transient_failure and can_retry:
            poll.retry_seqs.append(seq)
        else:
            on_result(seq, result, job.attempt)
            outcome.record(result)
    if len(received) < job.item_count or status.state == "expired":
        expected = job.seqs if job.seqs is not None else [seq for seq, _ in load_items(None)]
        missing = [seq for seq in expected if seq not in received]
        error = ItemError(EXPIRED_CODE, f"the {provider.slug} batch job ended without this item", True)
        for seq in missing:
            if can_retry:
                poll.retry_seqs.append(seq)
            else:
                failure = ProviderResult.failure(custom_id_for(seq), error)
                on_result(seq, failure, job.attempt)
                outcome.record(failure)
    poll.retry_seqs.sort()
    return poll


_JOB_ERRORS_SHOWN: Final = 5


def job_failure(slug: str, status: JobStatus) -> ItemError:
    """Why a job the vendor failed (or cancelled) wholesale failed, as the error its items
    carry (when no lane is left to fail over to) and the lane's `latest_error`: the vendor's
    own errors (`JobStatus.errors`, e.g. OpenAI's `errors.data`), else the bare state."""
    message = f"the {slug} batch job {status.state}"
    if status.errors:
        shown = "; ".join(error.describe() for error in status.errors[:_JOB_ERRORS_SHOWN])
        more = len(status.errors) - _JOB_ERRORS_SHOWN
        message += f": {shown}" + (f" (and {more} more)" if more > 0 else "")
    return ItemError("batch_job_failed", message[:1000], transient=True)


def run_lane_batch_job(
    load_items: LoadItems,
    *,
    lane: Lane,
    provider: BatchApiProvider,
    retry: RetryPolicy,
    on_result: OnResult,
    job: SubmittedJob | None = None,
    on_job: Callable[[SubmittedJob | None], None] | None = None,
    poll_interval_seconds: float = 30.0,
    sleeper: Callable[[float], None] = time.sleep,
    should_stop: Callable[[], bool] | None = None,
    clock: Clock | None = None,
    limits: BatchLimits = NO_BATCH_LIMITS,
    rescue_due: Callable[[JobStatus | None], bool] | None = None,
    cache_prefixes: Collection[str] = (),
    sync: SyncRemainder | None = None,
) -> LaneOutcome:
    """Runs a batch-API lane: submits its items as one job (or resumes `job`), polls until
    it is done, reports results, resubmits transient failures, and returns. Items more than
    one job of the vendor may hold (`limits`: requests and estimated bytes) run as several
    jobs, one after the other, each listing its seqs. Items fewer than one job must hold
    (`provider.min_requests`) run through `sync` (the lane's own sync adapter) instead, or
    without one fail over alone once the rest is done (SyncRemainder).

    `load_items(None)` yields every item of the lane, `load_items(seqs)` only those (the
    caller re-reads its input chunks). `on_job` is told each newly submitted job (store it
    on the lane record) and None once the lane is done. While a job runs, `should_stop()`
    returning True ends this invocation with `pending_job` set: invoke again with
    `job=pending_job` later. `should_stop=lambda: True` is the one-poll-per-invocation
    style; the default polls here every `poll_interval_seconds`. `rescue_due(status)` is
    asked at each poll of a running job (deadline rescue): True ends the run with `rescue`
    set and the job as `pending_job` (the caller hands the items over and cancels it)."""
    run = _BatchLaneRun(
        load_items, lane, provider, retry, on_result, on_job, clock, limits, cache_prefixes, sync
    )
    polling = _Polling(poll_interval_seconds, sleeper, should_stop, rescue_due)
    outcome = run.outcome
    try:
        current = job if job is not None else run.submit_next_part()
        while current is not None and not outcome.stopped:
            poll = poll_lane_job(
                current,
                provider=provider,
                retry=retry,
                on_result=run.report,
                outcome=outcome,
                load_items=load_items,
            )
            if poll.state == "running":
                if polling.ends_run(outcome, current, poll.status):
                    return outcome
                continue
            if poll.state == "unavailable" or run.gave_up(current, poll):
                return outcome
            current = run.next_job(current, poll)
    except ProviderUnavailable as exc:
        outcome.fail_over(exc.to_item_error())
        return outcome
    return run.finish()


@dataclass(frozen=True)
class SyncRemainder:
    """A batch-API lane's way to answer items too few for one vendor job (fewer than the
    provider's `min_requests`, e.g. Bedrock's minimum records per job: a retry of a few
    transient failures, an expired job's unfinished records, a lane's last small part):
    `provider`, the lane provider's sync adapter, runs them on the same lane through
    `run_lane_items` (the same retry policy, `concurrency` at once, asking `should_stop`
    before each item), reported as the lane's answers at its quoted prices. `provider` None
    (no sync adapter): those items alone fail over, once the rest of the lane is done."""

    provider: SyncProvider | None
    concurrency: int = 1
    should_stop: Callable[[], bool] | None = None


@dataclass(frozen=True)
class _Polling:
    """How a run waits for a running job (run_lane_batch_job's arguments of that name)."""

    interval: float
    sleeper: Callable[[float], None]
    should_stop: Callable[[], bool] | None
    rescue_due: Callable[[JobStatus | None], bool] | None

    def ends_run(self, outcome: LaneOutcome, current: SubmittedJob, status: JobStatus | None) -> bool:
        """True when the run ends here, the job still running (`pending_job`; with `rescue`
        when a rescue is due); otherwise waits one interval and says False."""
        if self.rescue_due is not None and self.rescue_due(status):
            outcome.pending_job, outcome.rescue = current, True
            return True
        if self.should_stop is not None and self.should_stop():
            outcome.pending_job = current
            return True
        self.sleeper(self.interval)
        return False


@dataclass
class _BatchLaneRun:
    """One invocation's jobs of a batch-API lane: what it submitted, what was answered."""

    load_items: LoadItems
    lane: Lane
    provider: BatchApiProvider
    retry: RetryPolicy
    on_result: OnResult
    on_job: Callable[[SubmittedJob | None], None] | None
    clock: Clock | None
    limits: BatchLimits
    cache_prefixes: Collection[str] = ()
    sync: SyncRemainder | None = None
    outcome: LaneOutcome = field(default_factory=LaneOutcome)
    reported: set[int] = field(default_factory=set)
    # Too few for a job and nothing to answer them synchronously: they fail over at the end.
    deferred: set[int] = field(default_factory=set)
    deferred_error: ItemError | None = None

    def note(self, job: SubmittedJob | None) -> None:
        if self.on_job is not None:
            self.on_job(job)

    def report(self, seq: int, result: ProviderResult, attempts: int) -> None:
        self.reported.add(seq)
        self.on_result(seq, result, attempts)

    def finish(self) -> LaneOutcome:
        """After the lane's last job: the lane is done, but for the items that wait to fail
        over (`deferred`). A sync remainder that stopped leaves the stored job as it is: the
        next invocation polls it again (its results are reported again, the same) and goes
        on from there."""
        if self.outcome.stopped:
            return self.outcome
        self.note(None)
        if self.deferred:
            assert self.deferred_error is not None
            self.outcome.fail_over(self.deferred_error)
        return self.outcome

    def submit(
        self,
        items: Iterable[tuple[int, BatchItem]],
        *,
        attempt: int,
        seqs: tuple[int, ...] | None,
        lost: int = 0,
        more: bool = False,
    ) -> SubmittedJob | None:
        """Submits the items as one job; None when none was submitted: no item was valid
        (those are reported failed), or they were too few for a job (`_too_few`). A transient
        submit error is retried with backoff; a lane that still refuses the job raises
        ProviderUnavailable."""
        valid, requests = self._requests(items, attempt)
        if not requests:
            return None
        if len(requests) < self.provider.min_requests:
            self._too_few(valid, attempt)
            return None
        submitted = SubmittedJob(
            job_id=self._send(requests),
            attempt=attempt,
            item_count=len(requests),
            submitted_at=isoformat((self.clock or SystemClock()).now()),
            seqs=seqs,
            lost_resubmits=lost,
            more=more,
        )
        self.note(submitted)
        return submitted

    def _requests(
        self, items: Iterable[tuple[int, BatchItem]], attempt: int
    ) -> tuple[list[tuple[int, BatchItem]], list[ProviderRequest]]:
        """The items' requests (and the items they were built from); an item no request can
        be built for is reported failed."""
        valid: list[tuple[int, BatchItem]] = []
        requests: list[ProviderRequest] = []
        for seq, item in items:
            try:
                requests.append(
                    build_request(seq, item, self.lane, attempt=attempt, cache_prefixes=self.cache_prefixes)
                )
            except PermanentProviderError as exc:
                failure = ProviderResult.failure(custom_id_for(seq), exc.to_item_error())
                self.report(seq, failure, 0)
                self.outcome.record(failure)
            else:
                valid.append((seq, item))
        return valid, requests

    def _too_few(self, items: list[tuple[int, BatchItem]], attempt: int) -> None:
        """Items fewer than one vendor job must hold: answered through the sync adapter
        (SyncRemainder), on this attempt and after; what it leaves unanswered (none, it is
        down) waits to fail over alone. A stopped sync run stops the lane's run."""
        sync = self.sync
        if sync is None or sync.provider is None:
            minimum = self.provider.min_requests
            message = f"{self.provider.slug} runs batch jobs of at least {minimum} requests, not {len(items)}"
            self._defer([seq for seq, _ in items], ItemError("batch_too_small", message, transient=True))
            return
        ran = run_lane_items(
            items,
            lane=self.lane,
            provider=sync.provider,
            retry=self.retry,
            concurrency=sync.concurrency,
            on_result=self.report,
            should_stop=sync.should_stop,
            cache_prefixes=self.cache_prefixes,
            first_attempt=attempt,
            proven=self.outcome.completed > 0,
        )
        self.outcome.add(ran)
        left = [seq for seq, _ in items if seq not in self.reported]
        if left and not ran.stopped:
            unanswered = ItemError("provider_unavailable", f"{sync.provider.slug} answered no result", True)
            self._defer(left, ran.latest_error if ran.unavailable and ran.latest_error else unanswered)

    def _defer(self, seqs: list[int], error: ItemError) -> None:
        self.deferred.update(seqs)
        self.deferred_error = error
        logger.warning(
            "batch lane items fail over alone",
            extra={"lane_id": self.lane.lane_id, "items": len(seqs), "error": error.code},
        )

    def _send(self, requests: list[ProviderRequest]) -> str:
        """The job's id at the vendor, once it accepted the job. One key names the job for
        every try: a submit whose answer was lost (a time-out after the vendor made the job)
        is tried again with it, so an adapter with an idempotency token gets the first job
        back rather than a second, billed one (BatchApiProvider.submit)."""
        key = uuid.uuid4().hex
        tries = 1
        while True:
            try:
                return self.provider.submit(requests, key=key)
            except TransientProviderError as exc:
                if not self.retry.can_retry(tries):
                    raise ProviderUnavailable(f"the batch job was not accepted: {exc.message}") from exc
                self.retry.wait(tries, retry_after=exc.retry_after_seconds)
                tries += 1
            except PermanentProviderError as exc:
                raise ProviderUnavailable(f"the batch job was refused: {exc.message}", code=exc.code) from exc

    def submit_next_part(self) -> SubmittedJob | None:
        """The first job-sized part of the items not answered yet (None: all answered, or
        waiting to fail over, or a sync remainder stopped)."""
        while not self.outcome.stopped:
            done = self.reported | self.deferred
            parts = job_parts(((s, i) for s, i in self.load_items(None) if s not in done), self.limits)
            if not parts:
                return None
            more = len(parts) > 1
            seqs = None if not (more or done) else tuple(seq for seq, _ in parts[0])
            submitted = self.submit(parts[0], attempt=1, seqs=seqs, more=more)
            if submitted is not None:
                return submitted  # (else its items failed validation or ran synchronously: next part)
        return None

    def gave_up(self, current: SubmittedJob, poll: JobPoll) -> bool:
        """The vendor lost the job once too often: the lane fails over."""
        if poll.state != "lost" or current.lost_resubmits + 1 < self.retry.max_attempts:
            return False
        self.outcome.fail_over(
            ItemError("batch_job_lost", f"{self.provider.slug} keeps losing the job", True)
        )
        return True

    def next_job(self, current: SubmittedJob, poll: JobPoll) -> SubmittedJob | None:
        """After a poll that ended `current`: its items again (lost), its transient failures
        again, then the next part; None when the lane is done (or a sync remainder stopped).
        A resubmission that makes no job (its items answered synchronously, or all refused)
        goes on with the next part."""
        following: SubmittedJob | None = None
        if poll.state == "lost":
            following = self.submit(
                self.load_items(current.seqs),
                attempt=current.attempt,
                seqs=current.seqs,
                lost=current.lost_resubmits + 1,
                more=current.more,
            )
        elif poll.retry_seqs:
            seqs = tuple(poll.retry_seqs)
            following = self.submit(
                self.load_items(seqs), attempt=current.attempt + 1, seqs=seqs, more=current.more
            )
        if following is not None or self.outcome.stopped or not current.more:
            return following
        return self.submit_next_part()


def collect_cancelled_job(job: SubmittedJob, *, provider: BatchApiProvider, on_result: OnResult) -> bool:
    """A running job the batch's cancel stopped (the caller asked the vendor to cancel it):
    polled once. True once it ended, what it finished before it stopped reported (`on_result`,
    completed answers only: work in flight at the cancel is delivered and charged, the rest
    of its items count as canceled); False while the vendor is still stopping it. A job the
    vendor no longer knows, or whose results cannot be read, ended with nothing to report."""
    try:
        status = provider.poll(job.job_id)
    except UnknownJob:
        return True
    except (TransientProviderError, ProviderUnavailable):
        return False
    if not status.terminal:
        return False
    try:
        for result in provider.results(job.job_id):
            seq = seq_of(result.custom_id)
            if seq is not None and result.status == "completed":
                on_result(seq, result, job.attempt)
    except (TransientProviderError, ProviderUnavailable):
        return False  # read again at the next poll (the answers are keyed by seq)
    except (UnknownJob, PermanentProviderError) as exc:
        logger.warning("the cancelled %s job's results could not be read (%s)", provider.slug, exc)
    return True


def cancel_lane_job(job: SubmittedJob, *, provider: BatchApiProvider) -> None:
    """Best-effort cancel of a running job (batch cancel); a forgotten job is fine."""
    try:
        provider.cancel(job.job_id)
    except UnknownJob:
        return
