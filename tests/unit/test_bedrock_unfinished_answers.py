"""Bedrock answers that are not whole, and a lane whose model id AWS refuses on demand: pure,
no sockets (the runtime client is a stand-in answering as boto3 hands answers over).

Converse's stopReason `malformed_model_output` / `malformed_tool_use` (botocore's
bedrock-runtime StopReason) says the service could not parse what the model produced: a
transient failure `model_output_malformed` (the item is tried again, or fails over), never a
finished answer stored and billed. AWS's ValidationException "Invocation of model ID ... with
on-demand throughput isn't supported. Retry your request with the ID or ARN of an inference
profile that contains this model." says the lane's model id is wrong for its region: the lane
is unavailable (`inference_profile_required`) and its items fail over, none fails for good."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

import pytest

from batchroute.domain.catalog.catalog import Lane, LanePrice
from batchroute.providers.base import (
    PermanentProviderError,
    ProviderRequest,
    ProviderUnavailable,
    StreamDelta,
    StreamEnd,
    StreamStart,
    TransientProviderError,
    Usage,
)
from batchroute.providers.bedrock import transform
from batchroute.providers.bedrock.client import BedrockConverse
from batchroute.providers.http import Timeouts
from batchroute.providers.retry import RetryPolicy
from batchroute.services.workflow.runner import run_lane_items

MALFORMED = ("malformed_model_output", "malformed_tool_use")
MODEL = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
USAGE = {"inputTokens": 900, "outputTokens": 120, "totalTokens": 1020}
ON_DEMAND = (
    "Invocation of model ID anthropic.claude-3-5-haiku-20241022-v1:0 with on-demand throughput "
    "isn{q}t supported. Retry your request with the ID or ARN of an inference profile that "
    "contains this model."
)
LANE = Lane(
    provider="bedrock",
    model="claude-3-5-haiku",
    price=LanePrice(Decimal("0.8"), Decimal("4"), Decimal("0.08"), Decimal("1")),
    context_window=200_000,
    max_output_tokens=8192,
    operations=("responses",),
    provider_model_id=MODEL,
)


def converse_answer(stop: str) -> dict[str, Any]:
    """A Converse answer whose tool call the service could not parse (as with `stop`)."""
    content = [{"text": '{"city": '}] if stop != "end_turn" else [{"text": "Sunny."}]
    return {
        "ResponseMetadata": {"HTTPStatusCode": 200},
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": dict(USAGE),
        "metrics": {"latencyMs": 12},
    }


def stream_events(stop: str) -> list[dict[str, Any]]:
    """A ConverseStream whose tool call's input stops half-written, ending with `stop`."""
    use = {"toolUseId": "tooluse_1", "name": "get_weather"}
    return [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Checking."}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"contentBlockStart": {"contentBlockIndex": 1, "start": {"toolUse": use}}},
        {"contentBlockDelta": {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"city": '}}}},
        {"contentBlockStop": {"contentBlockIndex": 1}},
        {"messageStop": {"stopReason": stop}},
        {"metadata": {"usage": dict(USAGE), "metrics": {"latencyMs": 40}}},
    ]


class EventStream:
    """boto3's EventStream, as far as the adapter reads it."""

    def __init__(self, events: Sequence[Mapping[str, Any]]) -> None:
        self.events = list(events)
        self.closed = False

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        return iter(self.events)

    def close(self) -> None:
        self.closed = True


class Runtime:
    """A bedrock-runtime client answering each call with the next of `answers` (a Converse
    answer, or a ConverseStream's events); an exception in `answers` is raised instead."""

    def __init__(self, answers: Sequence[Any]) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def _next(self, kwargs: dict[str, Any]) -> Any:
        with self._lock:
            self.calls.append(kwargs)
            answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def converse(self, **kwargs: Any) -> dict[str, Any]:
        answer: dict[str, Any] = self._next(kwargs)
        return answer

    def converse_stream(self, **kwargs: Any) -> dict[str, Any]:
        return {"stream": EventStream(self._next(kwargs))}


class Clients:
    """BedrockClients, as far as BedrockConverse reads them."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self.timeouts = Timeouts()

    def runtime(self, read_timeout: float | None = None) -> Runtime:
        return self._runtime


def converse(*answers: Any) -> tuple[BedrockConverse, Runtime]:
    runtime = Runtime(answers)
    return BedrockConverse("bedrock", Clients(runtime)), runtime  # type: ignore[arg-type]


def request(custom_id: str = "seq-0") -> ProviderRequest:
    return ProviderRequest(
        custom_id=custom_id,
        customer_item_id="item-1",
        operation="responses",
        model=LANE.model,
        provider_model_id=MODEL,
        input={"messages": [{"role": "user", "content": "Weather in Oslo?"}]},
        max_output_tokens=256,
    )


# -- malformed_model_output / malformed_tool_use -----------------------------------------------
@pytest.mark.parametrize("stop", MALFORMED)
def test_converse_answer_the_service_could_not_parse_is_a_transient_failure(stop: str) -> None:
    # Given a Converse answer whose stopReason says Bedrock could not parse the model's output
    result = transform.converse_result("seq-1", converse_answer(stop))
    # Then it is a transient failure (the item is tried again), not a completed answer
    assert (result.status, result.transient_failure) == ("failed", True)
    assert result.error is not None and result.error.code == "model_output_malformed"
    assert stop in result.error.message
    # And nothing of it is stored as the answer or billed; the vendor's answer is kept as raw
    assert result.output is None and result.usage == Usage()
    assert result.raw is not None and result.raw["stopReason"] == stop


@pytest.mark.parametrize("stop", MALFORMED)
def test_sync_call_returns_the_transient_failure(stop: str) -> None:
    # Given Bedrock answers Converse with a malformed stop reason
    sync, runtime = converse(converse_answer(stop))
    # Then complete() returns a transient failure, which the lane runner retries
    result = sync.complete(request())
    assert result.transient_failure and result.error is not None
    assert result.error.code == "model_output_malformed"
    assert len(runtime.calls) == 1


@pytest.mark.parametrize("stop", MALFORMED)
def test_stream_accumulator_result_is_a_transient_failure(stop: str) -> None:
    # Given a ConverseStream that ends with a malformed stop reason
    acc = transform.StreamAccumulator("seq-0")
    for event in stream_events(stop):
        acc.add(event)
    # Then the stream did end, but its result is a transient failure, not an answer
    assert acc.finished
    result = acc.result()
    assert (result.status, result.transient_failure) == ("failed", True)
    assert result.error is not None and result.error.code == "model_output_malformed"
    assert result.raw is not None and result.raw["stopReason"] == stop


@pytest.mark.parametrize("stop", MALFORMED)
def test_streamed_call_ends_in_a_transient_error_not_an_answer(stop: str) -> None:
    # Given Bedrock streams an answer that ends with a malformed stop reason
    sync, runtime = converse(stream_events(stop))
    events = sync.stream(request())
    # Then the stream starts and its deltas arrive as they come
    assert isinstance(next(events), StreamStart)
    seen = [next(events), next(events)]
    assert all(isinstance(event, StreamDelta) for event in seen)
    # But it ends in a transient error (the caller's retry), never in a StreamEnd answer
    rest: list[Any] = []
    with pytest.raises(TransientProviderError) as raised:
        rest.extend(events)
    assert not any(isinstance(event, StreamEnd) for event in rest)
    assert raised.value.code == "model_output_malformed"
    assert len(runtime.calls) == 1


def test_stream_that_stops_normally_still_ends_with_its_answer() -> None:
    # Given a stream that ends with end_turn after the same events
    sync, _ = converse(stream_events("end_turn"))
    # Then its last event is the whole answer
    last = list(sync.stream(request()))[-1]
    assert isinstance(last, StreamEnd) and last.result.status == "completed"
    assert last.result.output is not None and last.result.output["finish_reason"] == "stop"


@pytest.mark.parametrize("stop", MALFORMED)
def test_lane_runner_retries_the_item_and_stores_the_whole_answer(stop: str) -> None:
    # Given a Bedrock lane whose first answer to the item is malformed, its second whole
    sync, runtime = converse(converse_answer(stop), converse_answer("end_turn"))
    results: dict[int, tuple[Any, int]] = {}
    item = {
        "customer_item_id": "item-0",
        "operation": "responses",
        "model": LANE.model,
        "input": {"messages": [{"role": "user", "content": "Weather in Oslo?"}]},
    }
    retry = RetryPolicy(max_attempts=3, random=lambda: 0.5, sleeper=lambda _s: None)
    outcome = run_lane_items(
        iter([(0, item)]),
        lane=LANE,
        provider=sync,
        retry=retry,
        concurrency=1,
        on_result=lambda seq, result, attempts: results.__setitem__(seq, (result, attempts)),
    )
    # Then the item was tried again and only the whole answer is stored (and billed)
    result, attempts = results[0]
    assert (result.status, attempts, len(runtime.calls)) == ("completed", 2, 2)
    assert result.output["content"] == "Sunny."
    assert (outcome.completed, outcome.failed, outcome.usage.prompt_tokens) == (1, 0, 900)


# -- a model id the region serves on demand only through an inference profile -------------------
@pytest.mark.parametrize("apostrophe", ["\u2019", "'"])
def test_on_demand_refusal_makes_the_lane_unavailable(apostrophe: str) -> None:
    # Given AWS's refusal of a bare model id it serves only through an inference profile
    message = ON_DEMAND.format(q=apostrophe)
    error = transform.aws_error("ValidationException", message, vendor="bedrock", status=400)
    # Then the lane is unavailable (misconfigured: its items fail over), no item fails for good
    assert isinstance(error, ProviderUnavailable)
    assert error.code == "inference_profile_required"
    assert "inference profile" in error.message


def test_other_validation_exceptions_still_fail_the_item() -> None:
    # Given any other ValidationException
    error = transform.aws_error(
        "ValidationException", "messages.0.content: must not be empty", vendor="bedrock", status=400
    )
    # Then the item alone fails, as before
    assert isinstance(error, PermanentProviderError)
    assert error.code == "provider_rejected"


def test_lane_runner_fails_the_lane_over_on_the_on_demand_refusal() -> None:
    # Given a lane whose every Converse call AWS refuses for want of an inference profile
    refusal = transform.aws_error("ValidationException", ON_DEMAND.format(q="\u2019"), vendor="bedrock")
    sync, runtime = converse(*[refusal] * 5)
    results: dict[int, Any] = {}
    item = {
        "customer_item_id": "item-0",
        "operation": "responses",
        "model": LANE.model,
        "input": {"messages": [{"role": "user", "content": "Hi"}]},
    }
    retry = RetryPolicy(max_attempts=3, random=lambda: 0.5, sleeper=lambda _s: None)
    outcome = run_lane_items(
        iter([(seq, item) for seq in range(5)]),
        lane=LANE,
        provider=sync,
        retry=retry,
        concurrency=1,
        on_result=lambda seq, result, attempts: results.__setitem__(seq, result),
    )
    # Then the lane fails over with the refusal's code and no item got a (failed) result
    assert outcome.unavailable and not results
    assert outcome.latest_error is not None
    assert outcome.latest_error.code == "inference_profile_required"
    assert len(runtime.calls) == 1
