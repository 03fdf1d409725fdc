from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from batchroute.clock import FixedClock
from batchroute.config import Settings
from batchroute.domain.catalog.catalog import Operation
from batchroute.providers.base import (
    PermanentProviderError,
    ProviderRequest,
    ProviderUnavailable,
    StreamDelta,
    StreamEnd,
    StreamStart,
    TransientProviderError,
    UnknownJob,
)
from batchroute.providers.simulated import (
    EMBEDDING_DIMENSIONS,
    SimulatedBatchApiProvider,
    SimulatedSyncProvider,
    SimulationConfig,
    forget_simulated_jobs,
    native_shape,
)


def request(
    content: str = "Summarize the quarterly report.",
    *,
    attempt: int = 1,
    seq: int = 0,
    model: str = "test-model",
    operation: Operation = "responses",
    max_output_tokens: int = 1024,
    payload: dict[str, Any] | None = None,
) -> ProviderRequest:
    return ProviderRequest(
        custom_id=f"seq-{seq}",
        customer_item_id=f"item-{seq}",
        operation=operation,
        model=model,
        provider_model_id=f"{model}-v1",
        input=payload if payload is not None else {"messages": [{"role": "user", "content": content}]},
        max_output_tokens=max_output_tokens,
        attempt=attempt,
    )


def sync(slug: str = "openai", **config: Any) -> SimulatedSyncProvider:
    return SimulatedSyncProvider(slug, SimulationConfig(**config), sleeper=_no_sleep, clock=FixedClock())


def _no_sleep(_seconds: float) -> None:
    return None


@pytest.fixture(autouse=True)
def _fresh_jobs() -> Iterator[None]:
    forget_simulated_jobs()
    yield
    forget_simulated_jobs()


# -- determinism and usage -------------------------------------------------------------------


def test_the_same_request_gets_the_same_answer() -> None:
    # Given two separate simulator instances of one provider
    first = sync().complete(request())
    second = sync().complete(request())
    # Then the answers match exactly, and name their provider and model
    assert first == second
    assert first.status == "completed" and first.error is None
    assert first.output is not None
    assert first.output["content"].startswith("Simulated answer from openai/test-model: ")
    assert first.output["type"] == "message" and first.output["role"] == "assistant"


def test_answers_depend_on_provider_model_and_content_but_not_the_attempt() -> None:
    base = sync().complete(request()).output
    assert sync("groq").complete(request()).output != base
    assert sync().complete(request(model="other-model")).output != base
    assert sync().complete(request("Something else.")).output != base
    assert sync().complete(request(attempt=3)).output == base


def test_usage_is_the_conservative_prompt_estimate_and_a_bounded_completion() -> None:
    # Given a one-message ASCII request of 30 bytes
    result = sync().complete(request("x" * 30))
    # Then prompt tokens are ceil(30 / 3) + 4 per message + 3
    assert result.usage.prompt_tokens == 10 + 4 + 3
    # And completion tokens lie in [16, 80) and count the words of the answer
    assert result.output is not None
    assert 16 <= result.usage.completion_tokens < 80
    assert result.usage.completion_tokens == len(result.output["content"].split(" "))
    assert result.output["finish_reason"] == "stop"


def test_completion_is_cut_at_max_output_tokens() -> None:
    result = sync().complete(request(max_output_tokens=5))
    assert result.usage.completion_tokens == 5
    assert result.output is not None
    assert result.output["finish_reason"] == "length"
    assert result.raw is not None and result.raw["choices"][0]["finish_reason"] == "length"


def test_completion_usage_can_be_fixed_by_configuration() -> None:
    result = sync(completion_tokens=40).complete(request())
    assert result.usage.completion_tokens == 40


# -- markers ---------------------------------------------------------------------------------


def test_fail_marker_fails_every_attempt_permanently() -> None:
    provider = sync()
    for attempt in (1, 2, 5):
        with pytest.raises(PermanentProviderError) as caught:
            provider.complete(request("please [simulate:fail] now", attempt=attempt))
        assert caught.value.code == "simulated_failure"
        assert caught.value.to_item_error().transient is False


def test_transient_marker_fails_the_first_attempt_only() -> None:
    provider = sync()
    with pytest.raises(TransientProviderError) as caught:
        provider.complete(request("[simulate:transient] hello", attempt=1))
    assert caught.value.to_item_error().transient is True
    retried = provider.complete(request("[simulate:transient] hello", attempt=2))
    assert retried.status == "completed"


def test_markers_count_anywhere_in_the_messages() -> None:
    payload = {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "x [simulate:fail]"}]},
        ]
    }
    with pytest.raises(PermanentProviderError):
        sync().complete(request(payload=payload))


def test_down_marker_takes_the_lane_down() -> None:
    with pytest.raises(ProviderUnavailable) as caught:
        sync().complete(request("[simulate:down]"))
    assert caught.value.code == "provider_unavailable"


def test_down_marker_for_one_provider_leaves_the_others_up() -> None:
    text = "hello [simulate:down:groq]"
    with pytest.raises(ProviderUnavailable):
        sync("groq").complete(request(text))
    assert sync("together").complete(request(text)).status == "completed"


def test_configured_down_providers_are_unavailable() -> None:
    with pytest.raises(ProviderUnavailable, match="groq"):
        sync("groq", providers_down=frozenset({"groq"})).complete(request())
    assert sync("openai", providers_down=frozenset({"groq"})).complete(request()).status == "completed"


# -- embeddings ------------------------------------------------------------------------------


def embedding_request(value: object) -> ProviderRequest:
    return request(operation="embeddings", payload={"input": value}, max_output_tokens=0)


def test_embeddings_are_deterministic_unit_vectors() -> None:
    result = sync().complete(embedding_request("a sentence to embed"))
    assert result.output is not None
    vector = result.output["embedding"]
    assert result.output["type"] == "embedding"
    assert result.output["dimensions"] == EMBEDDING_DIMENSIONS == len(vector)
    assert math.sqrt(sum(v * v for v in vector)) == pytest.approx(1.0, abs=1e-5)
    assert sync().complete(embedding_request("a sentence to embed")).output == result.output
    other = sync().complete(embedding_request("another sentence")).output
    assert other is not None and other["embedding"] != vector
    assert result.usage.completion_tokens == 0 and result.usage.prompt_tokens > 0


def test_a_list_input_gets_one_vector_each() -> None:
    result = sync().complete(embedding_request(["one", "two", "three"]))
    assert result.output is not None
    assert "embedding" not in result.output
    assert len(result.output["embeddings"]) == 3
    single = sync().complete(embedding_request("two")).output
    assert single is not None and result.output["embeddings"][1] == single["embedding"]
    assert result.raw is not None and [d["index"] for d in result.raw["data"]] == [0, 1, 2]


def test_a_flat_token_array_is_one_input_and_token_arrays_one_each() -> None:
    # OpenAI: "The array of integers that will be turned into an embedding" (one input)
    flat = sync().complete(embedding_request([1212, 318, 257])).output
    assert flat is not None and "embeddings" not in flat and len(flat["embedding"]) == EMBEDDING_DIMENSIONS
    arrays = sync().complete(embedding_request([[1212, 318, 257], [5]])).output
    assert arrays is not None and len(arrays["embeddings"]) == 2
    assert arrays["embeddings"][0] == flat["embedding"]


def test_gemini_embeddings_use_the_gemini_shape() -> None:
    raw = sync("google").complete(embedding_request("x")).raw
    assert raw is not None and len(raw["embedding"]["values"]) == EMBEDDING_DIMENSIONS


# -- native raw shapes -------------------------------------------------------------------------


def test_openai_and_public_hosts_answer_in_the_chat_completion_shape() -> None:
    for slug in ("openai", "groq", "edge-eu"):
        result = sync(slug).complete(request())
        raw = result.raw
        assert raw is not None and result.output is not None
        assert raw["object"] == "chat.completion"
        assert raw["model"] == "test-model-v1"
        assert raw["choices"][0]["message"] == {"role": "assistant", "content": result.output["content"]}
        assert raw["usage"]["prompt_tokens"] == result.usage.prompt_tokens
        assert raw["usage"]["total_tokens"] == result.usage.prompt_tokens + result.usage.completion_tokens
        assert isinstance(raw["created"], int)


def test_anthropic_answers_in_the_messages_shape() -> None:
    result = sync("anthropic").complete(request())
    raw = result.raw
    assert raw is not None and result.output is not None
    assert raw["type"] == "message" and raw["id"].startswith("msg_")
    assert raw["content"] == [{"type": "text", "text": result.output["content"]}]
    assert raw["stop_reason"] == "end_turn"
    assert raw["usage"] == {
        "input_tokens": result.usage.prompt_tokens,
        "output_tokens": result.usage.completion_tokens,
    }


def test_google_answers_in_the_gemini_shape() -> None:
    result = sync("google").complete(request())
    raw = result.raw
    assert raw is not None and result.output is not None
    assert raw["candidates"][0]["content"]["parts"] == [{"text": result.output["content"]}]
    assert raw["candidates"][0]["finishReason"] == "STOP"
    assert raw["usageMetadata"]["candidatesTokenCount"] == result.usage.completion_tokens


def test_native_shape_by_slug() -> None:
    assert [native_shape(s) for s in ("openai", "anthropic", "google", "together")] == [
        "openai",
        "anthropic",
        "gemini",
        "openai",
    ]


# -- latency and capacity ----------------------------------------------------------------------


def test_latency_goes_through_the_injected_sleeper() -> None:
    slept: list[float] = []
    provider = SimulatedSyncProvider("openai", SimulationConfig(latency_seconds=0.05), sleeper=slept.append)
    provider.complete(request())
    assert slept == [0.05]


def test_capacity_turns_excess_calls_into_rate_limits() -> None:
    # Given capacity 1 and a stream holding the only slot
    provider = sync(capacity=1)
    stream = provider.stream(request())
    assert isinstance(next(stream), StreamStart)
    # When another call arrives, it is throttled: transient, with a Retry-After
    with pytest.raises(TransientProviderError) as caught:
        provider.complete(request())
    assert caught.value.code == "rate_limited" and caught.value.retry_after_seconds
    # And once the stream is done, the slot is free again
    list(stream)
    assert provider.complete(request()).status == "completed"


def test_settings_feed_the_simulation_config() -> None:
    settings = Settings(
        simulated_latency_ms=20,
        simulated_ttft_ms=300,
        simulated_inter_token_ms=10,
        simulated_batch_poll_seconds=2,
        simulated_capacity=3,
        simulated_completion_tokens=7,
        simulated_providers_down=["groq"],
    )
    assert SimulationConfig.from_settings(settings) == SimulationConfig(
        latency_seconds=0.02,
        ttft_seconds=0.3,
        inter_token_seconds=0.01,
        batch_seconds=2,
        capacity=3,
        completion_tokens=7,
        providers_down=frozenset({"groq"}),
    )


# -- streaming -----------------------------------------------------------------------------------


def test_stream_yields_start_deltas_and_usage_at_the_end() -> None:
    # Given a provider with a time to first token and an inter-token delay
    slept: list[float] = []
    provider = SimulatedSyncProvider(
        "openai",
        SimulationConfig(ttft_seconds=0.2, inter_token_seconds=0.01),
        sleeper=slept.append,
        clock=FixedClock(),
    )
    # When a request is streamed
    events = list(provider.stream(request()))
    # Then the first event marks the first byte and the last carries the whole result
    assert isinstance(events[0], StreamStart)
    end = events[-1]
    assert isinstance(end, StreamEnd)
    deltas = [e.text for e in events[1:-1] if isinstance(e, StreamDelta)]
    assert len(deltas) == len(events) - 2 == end.usage.completion_tokens
    assert end.result.output is not None
    assert "".join(deltas) == end.result.output["content"]
    # And the stream ends with the same answer a plain call gives
    assert end.result == sync().complete(request())
    # And the waits were the TTFT once, then one inter-token delay between deltas
    assert slept == [0.2] + [0.01] * (len(deltas) - 1)


def test_stream_fails_before_the_first_byte() -> None:
    provider = sync()
    with pytest.raises(ProviderUnavailable):
        list(provider.stream(request("[simulate:down]")))
    with pytest.raises(TransientProviderError):
        list(provider.stream(request("[simulate:transient]")))
    with pytest.raises(PermanentProviderError):
        list(provider.stream(request("[simulate:fail]")))
    events = list(provider.stream(request("[simulate:transient]", attempt=2)))
    assert isinstance(events[0], StreamStart)


def test_embeddings_cannot_be_streamed() -> None:
    with pytest.raises(PermanentProviderError) as caught:
        sync().stream(embedding_request("x"))
    assert caught.value.code == "stream_not_supported"


# -- the vendor batch kind -------------------------------------------------------------------------


def batch_provider(
    slug: str = "openai", seconds: float = 60, **config: Any
) -> tuple[SimulatedBatchApiProvider, FixedClock]:
    clock = FixedClock()
    return SimulatedBatchApiProvider(
        slug, SimulationConfig(batch_seconds=seconds, **config), clock=clock
    ), clock


def test_batch_job_runs_for_the_configured_time_then_completes() -> None:
    # Given a submitted job of four requests, one failing and one transient
    provider, clock = batch_provider()
    requests = [
        request("a", seq=0),
        request("b [simulate:fail]", seq=1),
        request("c [simulate:transient]", seq=2),
        request("d", seq=3),
    ]
    job_id = provider.submit(requests)
    # Then it is in progress until the configured time has passed
    assert provider.poll(job_id).state == "in_progress"
    clock.advance(seconds=30)
    halfway = provider.poll(job_id)
    assert (halfway.state, halfway.total, halfway.completed_count) == ("in_progress", 4, 2)
    with pytest.raises(TransientProviderError):
        list(provider.results(job_id))
    clock.advance(seconds=30)
    done = provider.poll(job_id)
    assert (done.state, done.completed_count, done.failed_count) == ("completed", 2, 2)
    assert done.terminal
    # And the results report each request by custom_id, failures with their kind
    results = {r.custom_id: r for r in provider.results(job_id)}
    assert results["seq-0"].status == "completed"
    plain = sync().complete(requests[0])
    assert (results["seq-0"].output, results["seq-0"].usage) == (plain.output, plain.usage)
    assert results["seq-1"].error is not None and not results["seq-1"].error.transient
    assert results["seq-2"].transient_failure
    assert results["seq-3"].status == "completed"


def test_batch_results_succeed_for_retried_transient_items() -> None:
    provider, _clock = batch_provider(seconds=0)
    job_id = provider.submit([request("c [simulate:transient]", attempt=2)])
    assert [r.status for r in provider.results(job_id)] == ["completed"]


def test_batch_submit_refuses_a_down_lane() -> None:
    provider, _clock = batch_provider()
    with pytest.raises(ProviderUnavailable):
        provider.submit([request("a"), request("[simulate:down]", seq=1)])
    down, _clock = batch_provider(providers_down=frozenset({"openai"}))
    with pytest.raises(ProviderUnavailable):
        down.submit([request("a")])


def test_batch_submit_validates_the_job() -> None:
    provider, _clock = batch_provider()
    with pytest.raises(PermanentProviderError):
        provider.submit([])
    with pytest.raises(PermanentProviderError):
        provider.submit([request("a"), request("b")])  # both seq-0


def test_unknown_and_forgotten_jobs() -> None:
    provider, _clock = batch_provider()
    with pytest.raises(UnknownJob):
        provider.poll("simbatch_nope")
    job_id = provider.submit([request("a")])
    other, _ = batch_provider("anthropic")
    with pytest.raises(UnknownJob):
        other.poll(job_id)
    forget_simulated_jobs()  # a restarted local stack
    with pytest.raises(UnknownJob):
        provider.poll(job_id)


def test_cancel_stops_a_running_job() -> None:
    provider, clock = batch_provider()
    job_id = provider.submit([request("a")])
    provider.cancel(job_id)
    clock.advance(seconds=120)
    assert provider.poll(job_id).state == "cancelled"
    assert list(provider.results(job_id)) == []
