from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest

from batchroute.clock import FixedClock
from batchroute.domain.catalog.catalog import Lane, LanePrice
from batchroute.providers.base import (
    ItemError,
    PermanentProviderError,
    ProviderRequest,
    ProviderResult,
    ProviderUnavailable,
    StreamEvent,
    TransientProviderError,
    Usage,
)
from batchroute.providers.retry import RetryPolicy
from batchroute.providers.simulated import SimulatedSyncProvider, SimulationConfig
from batchroute.services.workflow.runner import (
    LaneOutcome,
    build_request,
    custom_id_for,
    run_lane_items,
    seq_of,
)

LANE = Lane(
    provider="host",
    model="open-model",
    price=LanePrice(Decimal("0.1"), Decimal("0.2"), Decimal("0.05"), Decimal("0.1")),
    context_window=128_000,
    max_output_tokens=2048,
    operations=("responses", "embeddings"),
    provider_model_id="open-model-instruct",
)


def item(seq: int, content: str = "hello") -> dict[str, Any]:
    return {
        "customer_item_id": f"item-{seq}",
        "operation": "responses",
        "model": LANE.model,
        "input": {"messages": [{"role": "user", "content": f"{content} #{seq}"}]},
    }


def items(count: int, marked: dict[int, str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    marked = marked or {}
    for seq in range(count):
        yield seq, item(seq, marked.get(seq, "hello"))


class Recorder:
    def __init__(self) -> None:
        self.results: dict[int, tuple[ProviderResult, int]] = {}
        self.threads: set[int] = set()

    def __call__(self, seq: int, result: ProviderResult, attempts: int) -> None:
        assert seq not in self.results, f"seq {seq} reported twice"
        self.results[seq] = (result, attempts)
        self.threads.add(threading.get_ident())


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, seconds: float) -> None:
        with self._lock:
            self.calls.append(seconds)


class Scripted:
    """A sync provider answering through a function of the request; counts calls."""

    slug = "host"

    def __init__(self, answer: Callable[[ProviderRequest], ProviderResult]) -> None:
        self.answer = answer
        self.calls: list[ProviderRequest] = []
        self._lock = threading.Lock()

    def complete(self, request: ProviderRequest) -> ProviderResult:
        with self._lock:
            self.calls.append(request)
        return self.answer(request)

    def stream(self, request: ProviderRequest) -> Iterator[StreamEvent]:
        raise NotImplementedError


def ok(request: ProviderRequest) -> ProviderResult:
    return ProviderResult(request.custom_id, "completed", {"type": "message"}, None, Usage(10, 5))


def simulator() -> SimulatedSyncProvider:
    return SimulatedSyncProvider("host", SimulationConfig(), sleeper=lambda _s: None, clock=FixedClock())


def policy(sleeps: Sleeps | None = None, max_attempts: int = 4) -> RetryPolicy:
    return RetryPolicy(max_attempts=max_attempts, random=lambda: 0.5, sleeper=sleeps or Sleeps())


def run(provider: Any, source: Any, recorder: Recorder, *, concurrency: int = 4, **kw: Any) -> LaneOutcome:
    retry = kw.pop("retry", None) or policy()
    return run_lane_items(
        source, lane=LANE, provider=provider, retry=retry, concurrency=concurrency, on_result=recorder, **kw
    )


def test_every_item_gets_one_result_and_usage_adds_up() -> None:
    # Given 50 plain items on a simulated lane
    recorder = Recorder()
    outcome = run(simulator(), items(50), recorder)
    # Then each has one completed result on the first attempt
    assert sorted(recorder.results) == list(range(50))
    assert all(r.status == "completed" and a == 1 for r, a in recorder.results.values())
    assert (outcome.completed, outcome.failed, outcome.unavailable, outcome.finished) == (50, 0, False, True)
    # And the outcome's usage is the sum of the items'
    assert outcome.usage == sum((r.usage for r, _ in recorder.results.values()), Usage())
    # And results were reported on the calling thread only
    assert recorder.threads == {threading.get_ident()}


def test_transient_error_is_retried_with_backoff_then_succeeds() -> None:
    sleeps = Sleeps()
    recorder = Recorder()
    outcome = run(simulator(), items(10, {3: "[simulate:transient]"}), recorder, retry=policy(sleeps))
    result, attempts = recorder.results[3]
    assert result.status == "completed" and attempts == 2
    assert outcome.completed == 10 and outcome.failed == 0
    assert sleeps.calls == [0.25]  # half of the first ceiling (0.5 s), by the injected random


def test_permanent_error_fails_the_item_at_once() -> None:
    sleeps = Sleeps()
    recorder = Recorder()
    outcome = run(simulator(), items(10, {4: "[simulate:fail]"}), recorder, retry=policy(sleeps))
    result, attempts = recorder.results[4]
    assert result.status == "failed" and attempts == 1
    assert result.error is not None and result.error.code == "simulated_failure"
    assert (outcome.completed, outcome.failed) == (9, 1)
    assert outcome.latest_error == result.error
    assert sleeps.calls == []


def test_transient_errors_fail_the_item_once_retries_are_spent() -> None:
    # Given a provider failing item 2 transiently on every attempt while the rest succeed
    def answer(request: ProviderRequest) -> ProviderResult:
        if request.custom_id == "seq-2":
            raise TransientProviderError("upstream 503", code="upstream_503")
        return ok(request)

    sleeps = Sleeps()
    provider = Scripted(answer)
    recorder = Recorder()
    outcome = run(provider, items(6), recorder, retry=policy(sleeps, max_attempts=3), concurrency=1)
    # Then the item fails with the last error after exactly max_attempts tries
    result, attempts = recorder.results[2]
    assert result.status == "failed" and attempts == 3
    assert result.error == ItemError("upstream_503", "upstream 503", transient=True)
    assert sum(1 for r in provider.calls if r.custom_id == "seq-2") == 3
    assert [r.attempt for r in provider.calls if r.custom_id == "seq-2"] == [1, 2, 3]
    assert sleeps.calls == [0.25, 0.5]  # full-jitter draws below the 0.5 s and 1 s ceilings
    assert (outcome.completed, outcome.failed, outcome.unavailable) == (5, 1, False)


def test_a_returned_transient_failure_is_retried_too() -> None:
    def answer(request: ProviderRequest) -> ProviderResult:
        if request.attempt == 1:
            return ProviderResult.failure(request.custom_id, ItemError("overloaded", "busy", transient=True))
        return ok(request)

    recorder = Recorder()
    run(Scripted(answer), items(3), recorder)
    assert all(r.status == "completed" and a == 2 for r, a in recorder.results.values())


def test_retry_after_sets_the_least_wait() -> None:
    def answer(request: ProviderRequest) -> ProviderResult:
        if request.attempt == 1:
            raise TransientProviderError("slow down", code="rate_limited", retry_after_seconds=7)
        return ok(request)

    sleeps = Sleeps()
    run(Scripted(answer), items(1), Recorder(), retry=policy(sleeps))
    assert sleeps.calls == [7]


def test_an_unexpected_adapter_exception_counts_as_transient() -> None:
    def answer(request: ProviderRequest) -> ProviderResult:
        if request.attempt == 1:
            raise ConnectionResetError("peer reset")
        return ok(request)

    recorder = Recorder()
    outcome = run(Scripted(answer), items(2), recorder)
    assert outcome.completed == 2 and all(a == 2 for _, a in recorder.results.values())


def test_unavailable_provider_stops_the_lane_for_failover() -> None:
    # Given 100 items, the sixth of which finds the provider down
    provider = Scripted(
        lambda r: (
            (_ for _ in ()).throw(ProviderUnavailable("connection refused"))
            if r.custom_id == "seq-5"
            else ok(r)
        )
    )
    recorder = Recorder()
    outcome = run(provider, items(100), recorder, concurrency=1, window=1)
    # Then the lane stops: flagged for failover, later items never attempted nor reported
    assert outcome.unavailable and not outcome.finished
    assert outcome.latest_error is not None and outcome.latest_error.code == "provider_unavailable"
    assert sorted(recorder.results) == [0, 1, 2, 3, 4]
    assert len(provider.calls) == 6


def test_an_answer_in_flight_when_the_lane_fails_over_keeps_the_failover_its_reason() -> None:
    # Given a lane failing over because its provider is down
    outcome = LaneOutcome()
    down = ItemError("provider_unreachable", "connection dropped", transient=True)
    outcome.fail_over(down)
    # When an answer that was in flight meanwhile comes back as the item's own 400
    refused = ItemError("provider_rejected", "simulated permanent failure", transient=False)
    outcome.record(ProviderResult.failure("custom-1", refused))
    # Then it counts, and the lane's reason (the receipt's latest_error, what the items left
    # without a lane fail with) is still the failover's, not that item's 400
    assert outcome.failed == 1
    assert outcome.latest_error == down


def test_down_marker_stops_a_simulated_lane() -> None:
    recorder = Recorder()
    outcome = run(simulator(), items(40, {0: "[simulate:down]"}), recorder, concurrency=2, window=2)
    assert outcome.unavailable
    assert 0 not in recorder.results
    assert len(recorder.results) <= 2


def test_a_lane_failing_wholesale_fails_over_instead_of_failing_items() -> None:
    # Given a provider that answers every call with a 503
    provider = Scripted(lambda r: (_ for _ in ()).throw(TransientProviderError("503")))
    recorder = Recorder()
    outcome = run(
        provider,
        items(1000),
        recorder,
        retry=policy(max_attempts=2),
        concurrency=2,
        window=4,
        wholesale_failure_threshold=5,
    )
    # Then no item is failed: the lane is unavailable and the items go to the next lane
    assert recorder.results == {}
    assert outcome.unavailable
    assert outcome.latest_error is not None and outcome.latest_error.code == "lane_failed"
    # And the lane stopped soon after the threshold
    assert len(provider.calls) <= (5 + 4) * 2


def test_a_small_lane_where_nothing_succeeds_fails_over() -> None:
    provider = Scripted(lambda r: (_ for _ in ()).throw(TransientProviderError("503")))
    recorder = Recorder()
    outcome = run(provider, items(2), recorder, retry=policy(max_attempts=2))
    assert outcome.unavailable and recorder.results == {}


def test_retry_exhaustion_is_an_item_failure_once_the_lane_has_worked() -> None:
    # Given the first items exhaust their retries, but a later one succeeds
    def answer(request: ProviderRequest) -> ProviderResult:
        if request.custom_id in ("seq-0", "seq-1"):
            raise TransientProviderError("503")
        return ok(request)

    recorder = Recorder()
    outcome = run(Scripted(answer), items(4), recorder, retry=policy(max_attempts=2), concurrency=1)
    # Then the held failures are reported as failed: the lane itself is up
    assert sorted(recorder.results) == [0, 1, 2, 3]
    assert recorder.results[0][0].status == "failed" and recorder.results[0][1] == 2
    assert (outcome.completed, outcome.failed, outcome.unavailable) == (2, 2, False)


def test_concurrency_is_used_and_never_exceeded() -> None:
    # Given a provider that records how many calls overlap, and lets groups of 4 meet
    barrier = threading.Barrier(4, timeout=10)
    lock = threading.Lock()
    in_flight = 0
    peak = 0

    def answer(request: ProviderRequest) -> ProviderResult:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        barrier.wait()  # breaks (test fails) unless 4 calls really run at once
        with lock:
            in_flight -= 1
        return ok(request)

    recorder = Recorder()
    outcome = run(Scripted(answer), items(40), recorder, concurrency=4, window=16)
    assert outcome.completed == 40
    assert peak == 4


def test_items_are_taken_in_a_bounded_window() -> None:
    # Given a 10,000-item source that counts what was taken from it
    taken = 0
    outstanding_peak = 0

    def source() -> Iterator[tuple[int, dict[str, Any]]]:
        nonlocal taken
        for seq, payload in items(10_000):
            taken += 1
            yield seq, payload

    recorder = Recorder()

    def on_result(seq: int, result: ProviderResult, attempts: int) -> None:
        nonlocal outstanding_peak
        recorder(seq, result, attempts)
        outstanding_peak = max(outstanding_peak, taken - len(recorder.results) + 1)

    outcome = run_lane_items(
        source(), lane=LANE, provider=Scripted(ok), retry=policy(), concurrency=8, on_result=on_result
    )
    # Then every item ran, but never more than 2 x concurrency were held at once
    assert outcome.completed == 10_000
    assert outstanding_peak <= 16


def test_should_stop_ends_the_run_with_unanswered_items_left() -> None:
    asked = 0

    def should_stop() -> bool:
        nonlocal asked
        asked += 1
        return asked > 10

    recorder = Recorder()
    outcome = run(Scripted(ok), items(100), recorder, concurrency=1, window=1, should_stop=should_stop)
    assert outcome.stopped and not outcome.unavailable and not outcome.finished
    assert sorted(recorder.results) == list(range(10))


def test_invalid_items_fail_without_a_provider_call() -> None:
    provider = Scripted(ok)
    recorder = Recorder()
    bad = {"customer_item_id": "x", "operation": "responses", "model": LANE.model}
    vision = {**item(1), "operation": "vision"}
    outcome = run(provider, iter([(0, bad), (1, vision), (2, item(2))]), recorder)
    assert recorder.results[0][0].error is not None
    assert recorder.results[0][0].error.code == "invalid_item" and recorder.results[0][1] == 0
    assert recorder.results[1][0].error is not None
    assert recorder.results[1][0].error.code == "unsupported_operation"
    assert (outcome.completed, outcome.failed) == (1, 2)
    assert [r.custom_id for r in provider.calls] == ["seq-2"]


def test_build_request_caps_output_at_the_lane_limit() -> None:
    request = build_request(7, {**item(7), "max_output_tokens": 100_000}, LANE)
    assert request.custom_id == "seq-7" and request.customer_item_id == "item-7"
    assert (request.model, request.provider_model_id) == ("open-model", "open-model-instruct")
    assert request.max_output_tokens == 2048
    body_limit = {**item(7), "input": {"messages": [], "max_tokens": 300}}
    assert build_request(7, body_limit, LANE).max_output_tokens == 300
    assert build_request(7, item(7), LANE).max_output_tokens == 1024  # the quote's default
    embedding = {**item(7), "operation": "embeddings", "input": {"input": "x"}}
    assert build_request(7, embedding, LANE).max_output_tokens == 0


def test_custom_ids_round_trip() -> None:
    assert seq_of(custom_id_for(123)) == 123
    assert seq_of("other") is None and seq_of("seq-x") is None


def test_on_result_errors_propagate() -> None:
    def broken(seq: int, result: ProviderResult, attempts: int) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        run_lane_items(
            items(50), lane=LANE, provider=Scripted(ok), retry=policy(), concurrency=2, on_result=broken
        )


def test_permanent_errors_raised_by_a_provider_are_item_failures() -> None:
    provider = Scripted(
        lambda r: (_ for _ in ()).throw(PermanentProviderError("bad request", code="http_400"))
    )
    recorder = Recorder()
    outcome = run(provider, items(3), recorder)
    assert outcome.failed == 3 and not outcome.unavailable
    assert {r.error.code for r, _ in recorder.results.values() if r.error} == {"http_400"}


def test_a_stopped_run_leaves_held_failures_for_the_next_run() -> None:
    provider = Scripted(lambda r: (_ for _ in ()).throw(TransientProviderError("503")))
    asked = 0

    def should_stop() -> bool:
        nonlocal asked
        asked += 1
        return asked > 2

    recorder = Recorder()
    outcome = run(
        provider,
        items(10),
        recorder,
        retry=policy(max_attempts=2),
        concurrency=1,
        window=1,
        should_stop=should_stop,
    )
    assert outcome.stopped and not outcome.unavailable and recorder.results == {}
