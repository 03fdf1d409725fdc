from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from decimal import Decimal
from typing import Any

import pytest

from batchroute.adapters.dynamo.lane_records import job_from_item, job_item
from batchroute.clock import FixedClock
from batchroute.domain.catalog.catalog import Lane, LanePrice
from batchroute.domain.routing.lane_plan import SubmittedJob
from batchroute.providers.base import (
    EXPIRED_CODE,
    ItemError,
    JobStatus,
    ProviderRequest,
    ProviderResult,
    TransientProviderError,
    UnknownJob,
)
from batchroute.providers.retry import RetryPolicy
from batchroute.providers.simulated import (
    SimulatedBatchApiProvider,
    SimulationConfig,
    forget_simulated_jobs,
)
from batchroute.services.workflow.runner import (
    LaneOutcome,
    build_request,
    cancel_lane_job,
    collect_cancelled_job,
    poll_lane_job,
    run_lane_batch_job,
)

LANE = Lane(
    provider="openai",
    model="vendor-model",
    price=LanePrice(Decimal("1"), Decimal("2"), Decimal("0.5"), Decimal("1")),
    context_window=128_000,
    max_output_tokens=4096,
    operations=("responses",),
    provider_model_id="vendor-model-2026",
)
JOB_SECONDS = 600


def item(seq: int, content: str) -> dict[str, Any]:
    return {
        "customer_item_id": f"item-{seq}",
        "operation": "responses",
        "model": LANE.model,
        "input": {"messages": [{"role": "user", "content": f"{content} #{seq}"}]},
    }


class Lane20:
    """The caller's side: the lane's items (re-readable by seq) and the results written."""

    def __init__(self, count: int = 20, marked: dict[int, str] | None = None) -> None:
        marked = marked or {}
        self.items = {seq: item(seq, marked.get(seq, "hello")) for seq in range(count)}
        self.loads: list[Collection[int] | None] = []
        self.results: dict[int, tuple[ProviderResult, int]] = {}
        self.jobs: list[SubmittedJob | None] = []

    def load(self, seqs: Collection[int] | None) -> Iterator[tuple[int, dict[str, Any]]]:
        self.loads.append(seqs)
        for seq in sorted(self.items if seqs is None else seqs):
            yield seq, self.items[seq]

    def on_result(self, seq: int, result: ProviderResult, attempts: int) -> None:
        self.results[seq] = (result, attempts)

    def on_job(self, job: SubmittedJob | None) -> None:
        self.jobs.append(job)


@pytest.fixture(autouse=True)
def _fresh_jobs() -> Iterator[None]:
    forget_simulated_jobs()
    yield
    forget_simulated_jobs()


def vendor() -> tuple[SimulatedBatchApiProvider, FixedClock]:
    clock = FixedClock()
    return SimulatedBatchApiProvider(
        "openai", SimulationConfig(batch_seconds=JOB_SECONDS), clock=clock
    ), clock


def policy(max_attempts: int = 4) -> RetryPolicy:
    return RetryPolicy(max_attempts=max_attempts, random=lambda: 0.5, sleeper=lambda _s: None)


def run(lane: Lane20, provider: Any, clock: FixedClock, **kw: Any) -> LaneOutcome:
    def sleep(seconds: float) -> None:
        clock.advance(seconds=seconds)

    return run_lane_batch_job(
        lane.load,
        lane=LANE,
        provider=provider,
        retry=kw.pop("retry", None) or policy(),
        on_result=lane.on_result,
        on_job=lane.on_job,
        poll_interval_seconds=60,
        sleeper=sleep,
        clock=clock,
        **kw,
    )


def test_batch_lane_submits_polls_and_resubmits_transient_failures() -> None:
    # Given 20 items, one failing for good and one failing transiently once
    lane = Lane20(marked={3: "[simulate:fail]", 7: "[simulate:transient]"})
    provider, clock = vendor()
    # When the lane runs to the end, polling while the job is in progress
    outcome = run(lane, provider, clock)
    # Then every item has its result
    assert sorted(lane.results) == list(range(20))
    assert (outcome.completed, outcome.failed, outcome.finished) == (19, 1, True)
    assert lane.results[3][0].status == "failed" and lane.results[3][1] == 1
    # And the transient item came back from a follow-up job on attempt 2
    assert lane.results[7][0].status == "completed" and lane.results[7][1] == 2
    first, follow_up, cleared = lane.jobs
    assert first is not None and (first.attempt, first.item_count, first.seqs) == (1, 20, None)
    assert follow_up is not None and (follow_up.attempt, follow_up.seqs) == (2, (7,))
    assert cleared is None
    assert lane.loads == [None, (7,)]
    assert outcome.usage.prompt_tokens > 0 and outcome.pending_job is None


def test_poll_once_style_returns_the_running_job_and_resumes_later() -> None:
    # Given a Lambda that submits and exits instead of waiting
    lane = Lane20()
    provider, clock = vendor()
    first = run(lane, provider, clock, should_stop=lambda: True)
    # Then nothing is reported yet and the job is handed back to be stored
    assert first.pending_job is not None and not first.finished
    assert lane.results == {}
    stored = job_item(first.pending_job)
    # When a later invocation resumes the stored job before and after it finished
    again = run(lane, provider, clock, job=job_from_item(stored), should_stop=lambda: True)
    assert again.pending_job == first.pending_job and lane.results == {}
    clock.advance(seconds=JOB_SECONDS)
    last = run(lane, provider, clock, job=job_from_item(stored), should_stop=lambda: True)
    # Then the results arrive without a second submit
    assert last.finished and last.completed == 20
    assert sorted(lane.results) == list(range(20))
    assert lane.loads == [None]


def test_a_job_forgotten_by_the_provider_is_resubmitted() -> None:
    lane = Lane20()
    provider, clock = vendor()
    pending = run(lane, provider, clock, should_stop=lambda: True).pending_job
    assert pending is not None
    forget_simulated_jobs()  # the local stack restarted
    outcome = run(lane, provider, clock, job=pending)
    assert outcome.finished and outcome.completed == 20
    resubmitted = lane.jobs[1]
    assert (
        resubmitted is not None and resubmitted.lost_resubmits == 1 and resubmitted.job_id != pending.job_id
    )


def test_a_down_lane_fails_over_at_submit() -> None:
    lane = Lane20(marked={5: "[simulate:down]"})
    provider, clock = vendor()
    outcome = run(lane, provider, clock)
    assert outcome.unavailable and lane.results == {} and lane.jobs == []
    assert outcome.latest_error is not None and outcome.latest_error.code == "provider_unavailable"


def test_transient_items_fail_when_the_last_attempt_is_spent() -> None:
    lane = Lane20(marked={2: "[simulate:transient]"})
    provider, clock = vendor()
    outcome = run(lane, provider, clock, retry=policy(max_attempts=1))
    result, attempts = lane.results[2]
    assert result.transient_failure and attempts == 1
    assert (outcome.completed, outcome.failed) == (19, 1)


def test_invalid_items_fail_at_submit() -> None:
    lane = Lane20(count=3)
    lane.items[1] = {"customer_item_id": "x", "operation": "responses"}
    provider, clock = vendor()
    outcome = run(lane, provider, clock)
    assert lane.results[1][0].error is not None and lane.results[1][0].error.code == "invalid_item"
    assert (outcome.completed, outcome.failed) == (2, 1)


class FakeVendor:
    """A scripted batch API: a job's state and results are set by the test."""

    slug = "openai"

    def __init__(self, state: str = "completed", submit_failures: int = 0, min_requests: int = 1) -> None:
        self.state = state
        self.submit_failures = submit_failures
        self.min_requests = min_requests
        self.submitted: list[list[ProviderRequest]] = []
        self.keys: list[str | None] = []
        self.results_for: dict[str, list[ProviderResult]] = {}
        self.cancelled: list[str] = []

    def submit(self, requests: Iterable[ProviderRequest], *, key: str | None = None) -> str:
        self.keys.append(key)
        if self.submit_failures:
            self.submit_failures -= 1
            raise TransientProviderError("429 on upload", code="rate_limited")
        batch = list(requests)
        self.submitted.append(batch)
        job_id = f"job-{len(self.submitted)}"
        self.results_for[job_id] = [
            ProviderResult(r.custom_id, "completed", {"type": "message"}) for r in batch
        ]
        return job_id

    def poll(self, job_id: str) -> JobStatus:
        return JobStatus(state=self.state, total=len(self.results_for[job_id]))  # type: ignore[arg-type]

    def results(self, job_id: str) -> Iterator[ProviderResult]:
        return iter(self.results_for[job_id])

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)


def test_a_job_the_vendor_fails_makes_the_lane_unavailable() -> None:
    lane = Lane20()
    outcome = run(lane, FakeVendor(state="failed"), FixedClock())
    assert outcome.unavailable and lane.results == {}
    assert outcome.latest_error is not None and outcome.latest_error.code == "batch_job_failed"


def _expiring(keeps: Callable[[str, ProviderResult], bool], *, then_completes: bool) -> FakeVendor:
    """A vendor whose first job (every job, unless `then_completes`) expires holding only the
    results `keeps(job_id, result)` keeps."""
    fake = FakeVendor()
    fake.state = "expired"
    original_submit = fake.submit

    def submit(requests: Iterable[ProviderRequest], *, key: str | None = None) -> str:
        job_id = original_submit(requests, key=key)
        if job_id == "job-1" or not then_completes:
            fake.results_for[job_id] = [r for r in fake.results_for[job_id] if keeps(job_id, r)]
        else:
            fake.state = "completed"
        return job_id

    fake.submit = submit  # type: ignore[method-assign]
    return fake


def test_items_an_expired_job_left_undone_go_into_a_follow_up_job() -> None:
    # Given a vendor whose first job expires with only the even items done
    lane = Lane20(count=6)
    fake = _expiring(lambda _job, r: int(r.custom_id[4:]) % 2 == 0, then_completes=True)
    outcome = run(lane, fake, FixedClock())
    # Then the odd items were resubmitted on attempt 2 and every item completed
    assert [r.custom_id for r in fake.submitted[1]] == ["seq-1", "seq-3", "seq-5"]
    assert {r.attempt for r in fake.submitted[1]} == {2}
    assert outcome.completed == 6 and outcome.finished
    assert {a for _, a in lane.results.values()} == {1, 2}


def test_an_item_every_expired_job_leaves_undone_fails_with_the_one_expiry_code() -> None:
    # Given a vendor (Gemini, Bedrock: no row for it) whose jobs always expire without item 1
    lane = Lane20(count=2)
    run(
        lane,
        _expiring(lambda _job, r: r.custom_id != "seq-1", then_completes=False),
        FixedClock(),
        retry=policy(2),
    )
    # Then it fails with the code OpenAI's and Anthropic's expired requests give too
    failed, _ = lane.results[1]
    assert failed.error is not None and (failed.error.code, failed.error.transient) == (EXPIRED_CODE, True)
    assert EXPIRED_CODE == "batch_expired"


def test_submit_retries_transient_errors_then_gives_up_as_unavailable() -> None:
    lane = Lane20(count=2)
    assert run(lane, FakeVendor(submit_failures=2), FixedClock()).completed == 2
    lane = Lane20(count=2)
    outcome = run(lane, FakeVendor(submit_failures=99), FixedClock(), retry=policy(max_attempts=3))
    assert outcome.unavailable and lane.results == {}


def test_poll_lane_job_reports_a_finished_job_once() -> None:
    lane = Lane20(count=3)
    fake = FakeVendor()
    job_id = fake.submit(
        [
            ProviderRequest(f"seq-{n}", f"item-{n}", "responses", "m", "m", {"messages": []}, 10)
            for n in range(3)
        ]
    )
    fake.results_for[job_id][1] = ProviderResult.failure("seq-1", ItemError("overloaded", "busy", True))
    fake.results_for[job_id].append(fake.results_for[job_id][0])  # a duplicate line is ignored
    job = SubmittedJob(job_id=job_id, attempt=1, item_count=3, submitted_at="2026-01-01T00:00:00.000Z")
    outcome = LaneOutcome()
    poll = poll_lane_job(
        job, provider=fake, retry=policy(), on_result=lane.on_result, outcome=outcome, load_items=lane.load
    )
    assert poll.state == "done" and poll.retry_seqs == [1]
    assert sorted(lane.results) == [0, 2] and outcome.completed == 2


def test_submitted_job_round_trips_through_a_lane_record() -> None:
    job = SubmittedJob("job-1", 2, 3, "2026-01-01T00:00:00.000Z", seqs=(4, 9, 12), lost_resubmits=1)
    # DynamoDB hands numbers back as Decimal
    stored = {k: ([Decimal(s) for s in v] if k == "seqs" else v) for k, v in job_item(job).items()}
    stored["attempt"] = Decimal(2)
    assert job_from_item(stored) == job


def test_cancel_lane_job_tolerates_forgotten_jobs() -> None:
    provider, _clock = vendor()
    cancel_lane_job(SubmittedJob("simbatch_gone", 1, 1, "2026-01-01T00:00:00.000Z"), provider=provider)
    fake = FakeVendor()
    cancel_lane_job(SubmittedJob("job-9", 1, 1, "2026-01-01T00:00:00.000Z"), provider=fake)
    assert fake.cancelled == ["job-9"]


def test_a_cancelled_job_is_collected_once_it_stopped_with_what_it_finished() -> None:
    # Given a stuck job (8 of its 20 requests done) that a batch cancel stops
    lane = Lane20(marked={0: "[simulate:stuck_batch]"})
    provider, _ = vendor()
    job_id = provider.submit(build_request(seq, lane.items[seq], LANE) for seq in sorted(lane.items))
    job = SubmittedJob(job_id, 1, 20, "2026-01-01T00:00:00.000Z")
    reported: dict[int, str] = {}

    def keep(seq: int, result: ProviderResult, _attempts: int) -> None:
        reported[seq] = result.status

    # While the vendor has not stopped a job, nothing is collected: poll again later
    stopping = FakeVendor(state="in_progress")
    slow = stopping.submit([build_request(0, lane.items[0], LANE)])
    assert not collect_cancelled_job(SubmittedJob(slow, 1, 1, "t"), provider=stopping, on_result=keep)
    assert reported == {}
    # When it stopped, the requests it had done are reported (completed only)
    cancel_lane_job(job, provider=provider)
    assert collect_cancelled_job(job, provider=provider, on_result=keep)
    assert reported == dict.fromkeys(range(8), "completed")
    # And a job the vendor no longer knows has ended, with nothing more to report
    reported.clear()
    assert collect_cancelled_job(job, provider=provider, on_result=keep) and reported == {}


def test_a_simulated_vendor_forgets_a_job_once_its_results_are_downloaded() -> None:
    # Given a finished job whose results were read in full
    provider, clock = vendor()
    job_id = provider.submit(build_request(n, item(n, "hi"), LANE) for n in range(3))
    clock.advance(seconds=JOB_SECONDS)
    partly = provider.results(job_id)
    next(partly)
    # Then a partial read keeps it (a crash mid-download can read again) ...
    assert provider.poll(job_id).state == "completed"
    assert len(list(provider.results(job_id))) == 3
    # ... and a full read drops it: the simulator's memory does not grow with items run
    with pytest.raises(UnknownJob):
        provider.poll(job_id)


def test_a_running_job_due_for_a_deadline_rescue_ends_the_run_with_the_job_left_to_cancel() -> None:
    # Given a stuck job (it stays at 40 %) and a rescue check that says yes on its second poll
    lane = Lane20(marked={0: "[simulate:stuck_batch]"})
    provider, clock = vendor()
    seen: list[tuple[str, int]] = []

    def rescue_due(status: Any) -> bool:
        seen.append((status.state, status.completed_count))
        return len(seen) == 2

    outcome = run(lane, provider, clock, rescue_due=rescue_due)
    # Then the run ended at that poll: nothing reported, the job handed back, the lane not done
    assert seen == [("in_progress", 8), ("in_progress", 8)]
    assert outcome.rescue and outcome.pending_job is not None and not outcome.finished
    assert lane.results == {} and not outcome.unavailable
    # And the job is still the vendor's until the caller cancels it
    assert provider.poll(outcome.pending_job.job_id).state == "in_progress"
    cancel_lane_job(outcome.pending_job, provider=provider)
    assert provider.poll(outcome.pending_job.job_id).state == "cancelled"
