"""The lane runner and vendor semantics: one job stays within the vendor's published batch
limits (several jobs, one after the other, when a chunk is bigger), a job the vendor fails
wholesale carries the vendor's errors, a lane out of quota fails over without retrying,
and requests say whether the model takes sampling parameters."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from batchroute.adapters.dynamo.lane_records import job_from_item, job_item
from batchroute.clock import FixedClock
from batchroute.domain.catalog.catalog import BatchLimits
from batchroute.domain.routing.lane_plan import (
    embedding_inputs,
    estimated_request_bytes,
    job_parts,
)
from batchroute.providers.base import (
    ItemError,
    JobStatus,
    ProviderRequest,
    ProviderResult,
    ProviderUnavailable,
)
from batchroute.providers.http import error_for_status
from batchroute.services.workflow.runner import (
    build_request,
    job_failure,
    run_lane_batch_job,
    run_lane_items,
)
from tests.unit.test_lane_runner import LANE as SYNC_LANE
from tests.unit.test_lane_runner import Recorder, Scripted
from tests.unit.test_lane_runner import policy as sync_policy
from tests.unit.test_lane_runner_batch import LANE, FakeVendor, Lane20, item, policy


def _run(lane: Lane20, vendor: Any, **kw: Any) -> Any:
    return run_lane_batch_job(
        lane.load,
        lane=LANE,
        provider=vendor,
        retry=policy(),
        on_result=lane.on_result,
        on_job=lane.on_job,
        poll_interval_seconds=1,
        sleeper=lambda _s: None,
        clock=FixedClock(),
        **kw,
    )


# -- job_parts (pure) ---------------------------------------------------------------------------


def test_job_parts_keep_order_and_every_part_under_the_request_limit() -> None:
    pairs = [(seq, item(seq, "x")) for seq in range(10)]
    parts = job_parts(pairs, BatchLimits(max_requests=4))
    assert [[seq for seq, _ in part] for part in parts] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_job_parts_keep_every_part_under_the_byte_limit() -> None:
    # Given items whose estimated requests are about 1/3 of the byte limit each
    pairs = [(seq, item(seq, "y" * 3000)) for seq in range(7)]
    size = estimated_request_bytes(pairs[0][1])
    limits = BatchLimits(max_bytes=3 * size + size // 2)
    # When they are split
    parts = job_parts(pairs, limits)
    # Then each part holds three of them, and none is over the limit
    assert [len(part) for part in parts] == [3, 3, 1]
    assert all(sum(estimated_request_bytes(i) for _, i in part) <= 3 * size + size // 2 for part in parts)


def test_the_byte_estimate_is_never_below_the_serialized_item() -> None:
    # Non-ASCII text takes the most room escaped; the estimate covers a vendor line of it
    one = item(1, "héllo wörld ✓ " * 200)
    line = json.dumps({"custom_id": "seq-1", "body": one["input"]}).encode()
    assert estimated_request_bytes(one) > len(line)


def test_an_item_over_the_byte_limit_is_a_part_of_its_own_and_no_limit_is_one_part() -> None:
    pairs = [(0, item(0, "a")), (1, item(1, "b" * 10_000)), (2, item(2, "c"))]
    parts = job_parts(pairs, BatchLimits(max_bytes=5_000))
    assert [[seq for seq, _ in part] for part in parts] == [[0], [1], [2]]
    assert job_parts(pairs, BatchLimits()) == [pairs]
    assert job_parts([], BatchLimits(max_requests=1)) == []


def _embedding(seq: int, value: Any) -> dict[str, Any]:
    return {"operation": "embeddings", "model": "e", "input": {"input": value}}


def test_embedding_inputs_count_each_entry_of_a_list() -> None:
    assert embedding_inputs(_embedding(0, "one text")) == 1
    assert embedding_inputs(_embedding(0, [1, 2, 3])) == 1  # one token array
    assert embedding_inputs(_embedding(0, ["a", "b", "c"])) == 3
    assert embedding_inputs(_embedding(0, [[1, 2], [3]])) == 2
    assert embedding_inputs({"operation": "embeddings", "input": {"text": ["a", "b"]}}) == 2
    assert embedding_inputs(item(0, "chat")) == 0


def test_job_parts_keep_every_part_under_the_embedding_input_limit() -> None:
    # Given embedding items of 3, 3, 1 and 4 inputs, and a vendor taking 6 inputs per job
    pairs = [(n, _embedding(n, ["x"] * k)) for n, k in enumerate([3, 3, 1, 4])]
    # When they are split / Then no part is over 6 inputs
    parts = job_parts(pairs, BatchLimits(max_embedding_inputs=6))
    assert [[seq for seq, _ in part] for part in parts] == [[0, 1], [2, 3]]


# -- a chunk bigger than one job -----------------------------------------------------------------


def test_a_chunk_bigger_than_a_job_runs_as_several_jobs_within_the_limits() -> None:
    # Given 20 items and a vendor taking 8 requests per job
    lane = Lane20()
    vendor = FakeVendor()
    # When the lane runs
    outcome = _run(lane, vendor, limits=BatchLimits(max_requests=8))
    # Then three jobs ran, none over the limit, and every item has its result
    assert [len(batch) for batch in vendor.submitted] == [8, 8, 4]
    assert outcome.finished and outcome.completed == 20
    assert sorted(lane.results) == list(range(20))
    jobs = [job for job in lane.jobs if job is not None]
    assert [job.seqs for job in jobs] == [tuple(range(8)), tuple(range(8, 16)), tuple(range(16, 20))]
    assert [job.more for job in jobs] == [True, True, False]
    assert lane.jobs[-1] is None


def test_a_later_invocation_resumes_a_stored_part_and_runs_the_rest() -> None:
    # Given the first of three parts submitted, stored, and the invocation ended
    lane = Lane20()
    vendor = FakeVendor()
    vendor.state = "in_progress"
    first = _run(lane, vendor, limits=BatchLimits(max_requests=8), should_stop=lambda: True)
    assert first.pending_job is not None and first.pending_job.more
    stored = job_from_item(job_item(first.pending_job))
    assert stored == first.pending_job
    # When the job finished and a later invocation resumes it
    vendor.state = "completed"
    outcome = _run(lane, vendor, limits=BatchLimits(max_requests=8), job=stored)
    # Then the remaining parts ran as their own jobs
    assert outcome.finished and sorted(lane.results) == list(range(20))
    assert [len(batch) for batch in vendor.submitted] == [8, 8, 4]


def test_one_job_within_the_limits_keeps_listing_no_seqs() -> None:
    lane = Lane20()
    outcome = _run(lane, FakeVendor(), limits=BatchLimits(max_requests=50_000, max_bytes=200_000_000))
    first = lane.jobs[0]
    assert outcome.finished and first is not None and first.seqs is None and not first.more


# -- a job the vendor failed wholesale -----------------------------------------------------------


class FailingVendor(FakeVendor):
    def __init__(self, errors: tuple[ItemError, ...]) -> None:
        super().__init__(state="failed")
        self.errors = errors

    def poll(self, job_id: str) -> JobStatus:
        return JobStatus(state="failed", errors=self.errors)


def test_a_failed_job_s_vendor_errors_become_the_lane_s_error() -> None:
    # Given a vendor that failed the job, saying why
    errors = (
        ItemError("invalid_request", "line 3: model not found"),
        ItemError("token_limit_exceeded", "enqueued token limit reached"),
    )
    lane = Lane20()
    # When the lane runs
    outcome = _run(lane, FailingVendor(errors))
    # Then the lane fails over, and the error its items get (with no lane left) says why
    assert outcome.unavailable and lane.results == {}
    assert outcome.latest_error is not None
    assert outcome.latest_error.code == "batch_job_failed"
    assert "line 3: model not found" in outcome.latest_error.message
    assert "token_limit_exceeded: enqueued token limit reached" in outcome.latest_error.message


def test_job_failure_without_vendor_errors_names_the_state_and_long_lists_are_cut() -> None:
    assert job_failure("anthropic", JobStatus("cancelled")).message == "the anthropic batch job cancelled"
    many = tuple(ItemError("invalid_request", f"line {n}") for n in range(12))
    message = job_failure("openai", JobStatus("failed", errors=many)).message
    assert "line 4" in message and "line 5" not in message and "(and 7 more)" in message


# -- out of quota ----------------------------------------------------------------------------------


def test_a_sync_lane_out_of_quota_fails_over_at_once_without_retrying() -> None:
    quota = error_for_status(
        429,
        {"retry-after": "1"},
        json.dumps({"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}),
        vendor="openai",
    )
    assert isinstance(quota, ProviderUnavailable)

    def refuse(request: ProviderRequest) -> ProviderResult:
        raise quota

    provider = Scripted(refuse)
    recorder = Recorder()
    outcome = run_lane_items(
        [(0, item(0, "hi"))],
        lane=SYNC_LANE,
        provider=provider,
        retry=sync_policy(),
        concurrency=1,
        on_result=recorder,
    )
    assert outcome.unavailable and recorder.results == {}
    assert len(provider.calls) == 1
    assert outcome.latest_error is not None and outcome.latest_error.code == "insufficient_quota"


def test_a_batch_lane_out_of_quota_at_submit_fails_over_with_that_code() -> None:
    class OutOfQuota(FakeVendor):
        def submit(self, requests: Iterable[ProviderRequest], *, key: str | None = None) -> str:
            self.submitted.append(list(requests))
            raise ProviderUnavailable("openai answered 429: quota", code="insufficient_quota")

    vendor = OutOfQuota()
    outcome = _run(Lane20(), vendor)
    assert outcome.unavailable and len(vendor.submitted) == 1
    assert outcome.latest_error is not None and outcome.latest_error.code == "insufficient_quota"


# -- sampling parameters ---------------------------------------------------------------------------


def test_requests_say_whether_the_model_takes_sampling_parameters() -> None:
    assert build_request(0, item(0, "hi"), LANE).sampling is True
    refusing = replace(LANE, sampling_parameters=False)
    assert build_request(0, item(0, "hi"), refusing).sampling is False
