"""A batch-API lane whose vendor needs a least number of requests per job (Bedrock's minimum
records per batch inference job, the provider's `min_requests`): the items too few for a job
(a retry of one transient record, an expired job's few unfinished ones, a lane's last small
part) run through the lane's sync adapter on the same lane (SyncRemainder), so the lane is
never failed over for them; with no sync adapter those items alone fail over once the rest
is done. And one key names a job for every try of its submit (idempotent retries)."""

from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any, cast

from batchroute.clock import FixedClock
from batchroute.domain.catalog.catalog import BatchLimits
from batchroute.domain.routing.lane_plan import SubmittedJob
from batchroute.providers.base import ItemError, ProviderRequest, ProviderResult, TransientProviderError
from batchroute.providers.registry import ProviderNotConfigured
from batchroute.services.workflow.execution import LaneExecutor, LaneLimits, _Invocation
from batchroute.services.workflow.runner import LaneOutcome, SyncRemainder, run_lane_batch_job
from batchroute.services.workflow.time_budget import TimeBudget
from tests.unit.test_lane_runner import Scripted, ok
from tests.unit.test_lane_runner_batch import LANE, FakeVendor, Lane20, policy

BUSY = ItemError("provider_5xx", "a 500 on this record", transient=True)


class Flaky(FakeVendor):
    """A vendor of at least `min_requests` per job whose jobs answer the seqs in `flaky`
    with a transient error on their first attempt."""

    def __init__(self, flaky: Iterable[int] = (), **kw: Any) -> None:
        super().__init__(**kw)
        self.flaky = {f"seq-{seq}" for seq in flaky}

    def submit(self, requests: Iterable[ProviderRequest], *, key: str | None = None) -> str:
        listed = list(requests)
        assert len(listed) >= self.min_requests, "the runner submitted a job below the vendor's minimum"
        job_id = super().submit(listed, key=key)
        self.results_for[job_id] = [
            ProviderResult.failure(r.custom_id, BUSY)
            if r.custom_id in self.flaky and r.attempt == 1
            else ok(r)
            for r in listed
        ]
        return job_id


def run(lane: Lane20, vendor: FakeVendor, sync: SyncRemainder | None, **kw: Any) -> LaneOutcome:
    return run_lane_batch_job(
        lane.load,
        lane=LANE,
        provider=vendor,
        retry=kw.pop("retry", None) or policy(max_attempts=3),
        on_result=lane.on_result,
        on_job=lane.on_job,
        poll_interval_seconds=1,
        sleeper=lambda _s: None,
        clock=FixedClock(),
        sync=sync,
        **kw,
    )


def test_one_transient_record_of_a_big_job_is_answered_synchronously_on_attempt_2() -> None:
    # Given a vendor of at least 100 requests per job, and a 150-item lane whose seq 7 fails
    # transiently in the job
    lane, vendor, converse = Lane20(count=150), Flaky({7}, min_requests=100), Scripted(ok)
    # When the lane runs with its sync adapter
    outcome = run(lane, vendor, SyncRemainder(converse, concurrency=4))
    # Then one job ran, seq 7 alone went through the sync adapter on attempt 2, and the lane
    # finished with every item answered
    assert [len(job) for job in vendor.submitted] == [150]
    assert [(r.custom_id, r.attempt) for r in converse.calls] == [("seq-7", 2)]
    assert outcome.finished and not outcome.unavailable
    assert sorted(lane.results) == list(range(150)) and outcome.completed == 150
    result, attempts = lane.results[7]
    assert result.status == "completed" and attempts == 2
    assert lane.jobs[-1] is None  # the lane is done: its job cleared


def test_a_lane_smaller_than_the_vendor_minimum_runs_synchronously() -> None:
    lane, vendor, converse = Lane20(count=50), Flaky(min_requests=100), Scripted(ok)
    outcome = run(lane, vendor, SyncRemainder(converse, concurrency=4))
    assert vendor.submitted == [] and len(converse.calls) == 50
    assert outcome.finished and (outcome.completed, outcome.failed) == (50, 0)
    assert {attempts for _, attempts in lane.results.values()} == {1}


def test_a_small_last_part_runs_synchronously_and_a_retry_goes_on_to_the_next_part() -> None:
    # Given 230 items, jobs of 100 to 100 requests, and seq 7 of the first job transient:
    # its retry makes no job (it runs synchronously), and the parts after it still run
    lane, vendor, converse = Lane20(count=230), Flaky({7}, min_requests=100), Scripted(ok)
    outcome = run(lane, vendor, SyncRemainder(converse, concurrency=4), limits=BatchLimits(max_requests=100))
    assert [len(job) for job in vendor.submitted] == [100, 100]
    assert [r.custom_id for r in converse.calls][:1] == ["seq-7"]
    assert sorted(int(r.custom_id[4:]) for r in converse.calls[1:]) == list(range(200, 230))
    assert outcome.finished and outcome.completed == 230


def test_without_a_sync_adapter_only_the_items_too_few_for_a_job_fail_over() -> None:
    # Given the 150-item lane with seq 7 transient, and no sync adapter
    lane, vendor = Lane20(count=150), Flaky({7}, min_requests=100)
    outcome = run(lane, vendor, SyncRemainder(None))
    # Then the job's other items are answered, and seq 7 alone is left to fail over
    assert sorted(lane.results) == [seq for seq in range(150) if seq != 7]
    assert outcome.unavailable and outcome.latest_error is not None
    assert outcome.latest_error.code == "batch_too_small"
    assert lane.jobs[-1] is None
    # And a lane of several parts runs every part big enough before failing over the rest
    lane, vendor = Lane20(count=250), Flaky(min_requests=100)
    outcome = run(lane, vendor, None, limits=BatchLimits(max_requests=100))
    assert [len(job) for job in vendor.submitted] == [100, 100]
    assert sorted(lane.results) == list(range(200)) and outcome.unavailable


def test_an_item_out_of_retries_in_the_sync_remainder_fails_with_its_own_error() -> None:
    def busy(request: ProviderRequest) -> ProviderResult:
        raise TransientProviderError("still busy", code="provider_5xx")

    lane, vendor, converse = Lane20(count=150), Flaky({7}, min_requests=100), Scripted(busy)
    outcome = run(lane, vendor, SyncRemainder(converse))
    # attempts 2 and 3 through the sync adapter, then the item fails (the lane is not failed over)
    assert [r.attempt for r in converse.calls] == [2, 3]
    result, attempts = lane.results[7]
    assert result.error is not None and result.error.code == "provider_5xx" and attempts == 3
    assert outcome.finished and (outcome.completed, outcome.failed) == (149, 1)


def test_a_stopped_sync_remainder_keeps_the_job_and_the_next_invocation_finishes() -> None:
    # Given a sync remainder told to stop (the Lambda's time is nearly up)
    lane, vendor, converse = Lane20(count=150), Flaky({7}, min_requests=100), Scripted(ok)
    first = run(lane, vendor, SyncRemainder(converse, should_stop=lambda: True))
    # Then the run stops with seq 7 unanswered and the finished job still stored
    assert first.stopped and not first.finished and 7 not in lane.results
    stored = lane.jobs[-1]
    assert isinstance(stored, SubmittedJob)
    # And the next invocation polls that job again and answers seq 7
    outcome = run(lane, vendor, SyncRemainder(converse), job=stored)
    assert outcome.finished and lane.results[7][1] == 2
    assert len(vendor.submitted) == 1 and lane.jobs[-1] is None


def test_every_try_of_one_job_s_submit_sends_the_same_key() -> None:
    lane, vendor = Lane20(count=3), FakeVendor(submit_failures=2)
    assert run(lane, vendor, None).finished
    assert len(vendor.keys) == 3 and len(set(vendor.keys)) == 1 and vendor.keys[0]
    # (another job gets a key of its own)
    other = FakeVendor()
    run(Lane20(count=3), other, None)
    assert other.keys[0] not in vendor.keys


def test_a_transient_submit_error_is_not_a_second_job_at_an_idempotent_vendor() -> None:
    # Given a vendor that made the job but whose answer was lost (a read time-out)
    class LostAnswer(FakeVendor):
        def submit(self, requests: Iterable[ProviderRequest], *, key: str | None = None) -> str:
            listed = list(requests)
            job_id = f"job-{key}"
            if job_id not in self.results_for:
                self.submitted.append(listed)
                self.results_for[job_id] = [ok(r) for r in listed]
                raise TransientProviderError("read time-out", code="provider_timeout")
            return job_id

    lane, vendor = Lane20(count=4), LostAnswer()
    outcome = run(lane, vendor, None)
    assert outcome.finished and outcome.completed == 4 and len(vendor.submitted) == 1


class Registry:
    """What the lane step asks of the provider registry for a batch lane's remainder."""

    def __init__(self, sync: Scripted | None) -> None:
        self._sync = sync

    def sync(self, slug: str) -> Scripted:
        if self._sync is None:
            raise ProviderNotConfigured(f"no sync adapter for {slug}")
        return self._sync

    def provider(self, slug: str) -> SimpleNamespace:
        return SimpleNamespace(slug=slug, max_concurrency=8)


def test_the_lane_step_answers_a_batch_lane_s_remainder_through_its_sync_adapter() -> None:
    converse = Scripted(ok)
    limits = LaneLimits(stop_margin_seconds=45.0)
    fields: dict[str, Any] = dict.fromkeys(
        (
            "records",
            "progress",
            "artifacts",
            "catalog",
            "continuations",
            "policies",
            "capacity",
            "rescue",
            "availability",
        )
    )
    executor = LaneExecutor(
        registry=cast(Any, Registry(converse)), retry=policy(), clock=FixedClock(), limits=limits, **fields
    )
    now = [0.0]
    invocation = _Invocation(TimeBudget(100.0, monotonic=lambda: now[0]))
    remainder = executor._sync_remainder("bedrock", invocation)
    assert remainder.provider is converse and remainder.concurrency == 8
    assert remainder.should_stop is not None and not remainder.should_stop()
    now[0] = 60.0  # 40 s left: under the stop margin, as a sync lane stops
    assert remainder.should_stop()
    executor.registry = cast(Any, Registry(None))
    assert executor._sync_remainder("bedrock", invocation).provider is None
