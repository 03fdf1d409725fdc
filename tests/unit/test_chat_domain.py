"""Chat rules without AWS: reading the body, ranking direct lanes, the hold, the objects,
and the simulated providers' failures before the first byte."""

from __future__ import annotations

import base64
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from batchroute.catalog import builtin_catalog
from batchroute.clock import FixedClock, isoformat
from batchroute.domain.batches.record import BatchRecord, batch_id_for, job_id_for
from batchroute.domain.catalog.catalog import LaneLive
from batchroute.domain.chat.objects import ServedBy, chat_job, chunk, job_status
from batchroute.domain.chat.requests import ChatRequest, parse_chat_request
from batchroute.domain.chat.routing import LaneRecord, blended_reliability, plan_direct
from batchroute.domain.routing.gates import RoutingGuards
from batchroute.errors import InvalidRequest
from batchroute.money import Money
from batchroute.providers.base import ProviderRequest, StreamStart, TransientProviderError
from batchroute.providers.simulated import SimulatedSyncProvider, SimulationConfig

CATALOG = builtin_catalog()
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
NOW = FixedClock().now()
LIVE = {
    lane.lane_id: LaneLive(lane.lane_id, 1000, isoformat(NOW - timedelta(seconds=10)))
    for lane in CATALOG.lanes
}
GUARDS = RoutingGuards()  # the launch guard keeps edge-us out


def _request(**fields: Any) -> ChatRequest:
    body = {"model": LLAMA, "messages": [{"role": "user", "content": "hi"}], **fields}
    return parse_chat_request(body, CATALOG)


def _plan(request: ChatRequest, observed: dict[str, LaneRecord] | None = None) -> list[str]:
    plan = plan_direct(request, CATALOG, live=LIVE, now=NOW, guards=GUARDS, observed=observed)
    return [lane.lane.provider for lane in plan.lanes]


# -- reading the body ------------------------------------------------------------------------------
def test_our_fields_are_not_passed_to_the_provider() -> None:
    request = _request(
        temperature=0.2,
        stream=True,
        stream_options={"include_usage": True},
        provider_preferences={"order": ["groq"]},
        privacy_tier="confidential",
        max_tokens=5,
    )
    assert request.provider_input == {
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.2,
        "max_tokens": 5,
    }
    assert request.stream and request.include_usage and request.max_tokens == 5
    assert request.privacy_tier == "confidential" and request.preferences.order == ("groq",)


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"model": "meta-llama/llama-3.1-8b-instruct"}, "model_not_found"),
        ({"stream": True, "batch": True}, "stream_not_supported_for_batch"),
        ({"stream": True, "batch": {"completion_window": "24h"}}, "stream_not_supported_for_batch"),
        ({"batch": {"completion_window": "1h"}}, "invalid_request"),
        ({"provider_preferences": {"only": ["nobody"]}}, "invalid_request"),
        ({"max_tokens": 0}, "invalid_request"),
        ({"n": 2}, "invalid_request"),
        ({"stream_options": {"include_usage": True}}, "invalid_request"),  # without stream, as OpenAI
        ({"stream": False, "stream_options": {"include_usage": False}}, "invalid_request"),
        ({"messages": "hi"}, "invalid_request"),
    ],
)
def test_invalid_bodies(fields: dict[str, Any], code: str) -> None:
    with pytest.raises(InvalidRequest) as raised:
        _request(**fields)
    assert raised.value.code == code


@pytest.mark.parametrize(
    ("fields", "limit"),
    [
        ({"max_tokens": 7}, 7),
        ({"max_completion_tokens": 8, "max_tokens": 7}, 8),
        ({"max_output_tokens": 3}, 3),  # the batch items' name: never dropped silently
        ({"max_output_tokens": 3, "max_tokens": 70}, 3),
        ({}, None),
    ],
)
def test_the_output_limit_goes_by_any_of_its_names(fields: dict[str, Any], limit: int | None) -> None:
    request = _request(**fields)
    assert request.max_tokens == limit
    if limit is not None:  # and the lane is asked for no more (nor is more held)
        lane = plan_direct(request, CATALOG, live=LIVE, now=NOW, guards=GUARDS).lanes[0]
        assert lane.max_output_tokens == limit


def test_a_model_with_the_wrong_case_gets_a_suggestion() -> None:
    with pytest.raises(InvalidRequest) as raised:
        _request(model=LLAMA.upper())
    assert (raised.value.details or {})["suggestion"] == LLAMA


def test_a_queued_request_becomes_one_batch_item() -> None:
    request = _request(batch={"metadata": {"k": 1}}, max_tokens=9)
    assert request.queue is not None and request.queue.metadata == {"k": "1"}
    item = request.as_item()
    assert item["model"] == LLAMA and item["max_output_tokens"] == 9 and item["operation"] == "responses"


# -- ranking ---------------------------------------------------------------------------------------
def test_lanes_rank_by_direct_price_then_preferences_reorder_and_filter() -> None:
    assert _plan(_request())[:3] == ["edge-eu", "deepinfra", "groq"]  # 0.02/0.03, 0.03/0.05, 0.05/0.08
    assert _plan(_request(provider_preferences={"order": ["fireworks", "groq"]}))[:3] == [
        "fireworks",
        "groq",
        "edge-eu",
    ]
    assert _plan(_request(provider_preferences={"only": ["groq", "deepinfra"]})) == ["deepinfra", "groq"]
    assert _plan(_request(provider_preferences={"allow_fallbacks": False})) == ["edge-eu"]


def test_a_lane_whose_output_limit_is_below_max_tokens_is_tried_after_those_that_can_answer_in_full() -> None:
    # edge-eu is the cheapest per token but stops at 4,096 tokens; 6,000 are asked
    assert _plan(_request(max_tokens=6_000)) == ["deepinfra", "groq", "together", "fireworks", "edge-eu"]
    # asked within its limit, it is first again; named first by the caller, it is kept first
    assert _plan(_request(max_tokens=4_096))[0] == "edge-eu"
    assert _plan(_request(max_tokens=6_000, provider_preferences={"order": ["edge-eu"]}))[0] == "edge-eu"


def test_observed_failures_push_a_cheap_lane_down() -> None:
    flaky = {f"edge-eu/{LLAMA}": LaneRecord(successes=0, failures=60)}
    assert _plan(_request(), flaky)[0] == "deepinfra"
    assert blended_reliability(Decimal("0.97"), LaneRecord(0, 60)) < Decimal("0.3")
    assert blended_reliability(Decimal("0.97"), None) == Decimal("0.97")


def test_privacy_tier_and_stale_lanes_are_gates() -> None:
    confidential = _plan(_request(privacy_tier="confidential"))
    assert "deepinfra" not in confidential and "edge-eu" in confidential
    stale = {k: LaneLive(k, 1000, isoformat(NOW - timedelta(hours=1))) for k in LIVE}
    with pytest.raises(InvalidRequest) as raised:
        plan_direct(_request(), CATALOG, live=stale, now=NOW, guards=GUARDS)
    assert raised.value.code == "no_direct_lane"
    codes = {lane["code"] for lane in (raised.value.details or {})["rejected_lanes"]}
    assert codes == {"stale_heartbeat", "not_launched"}


def test_hold_is_prompt_plus_max_tokens_or_the_lane_limit_on_the_dearest_lane() -> None:
    asked = plan_direct(_request(max_tokens=100), CATALOG, live=LIVE, now=NOW, guards=GUARDS)
    fireworks = next(lane for lane in asked.lanes if lane.lane.provider == "fireworks")
    prompt = _request().facts.prompt_tokens
    assert fireworks.max_output_tokens == 100
    assert fireworks.hold == Money.usd_ceil(Decimal(prompt + 100) * Decimal("0.20") / 1_000_000)
    assert asked.hold == max(lane.hold for lane in asked.lanes)
    unbounded = plan_direct(_request(), CATALOG, live=LIVE, now=NOW, guards=GUARDS)
    edge = next(lane for lane in unbounded.lanes if lane.lane.provider == "edge-eu")
    assert edge.max_output_tokens == 4096  # the lane's own output limit
    assert edge.charge(1_000_000, 1_000_000) == Money.usd("0.05")  # direct prices 0.02 + 0.03


def test_without_max_tokens_a_lane_is_asked_for_no_more_than_its_window_leaves_beside_the_prompt() -> None:
    # Given a Qwen 2.5 prompt of ~25k tokens (a 32,768-token window) and no max_tokens
    body = {
        "model": "Qwen/Qwen2.5-72B-Instruct",
        "messages": [{"role": "user", "content": "word " * 15_000}],
    }
    request = parse_chat_request(body, CATALOG)
    plan = plan_direct(request, CATALOG, live=LIVE, now=NOW, guards=GUARDS)
    prompt = request.facts.prompt_tokens
    assert plan.lanes and any(lane.lane.max_output_tokens + prompt > 32_768 for lane in plan.lanes)
    for lane in plan.lanes:
        # Then each lane is sent what fits: its own limit, or the room its window leaves
        room = lane.lane.context_window - prompt
        assert lane.max_output_tokens == min(lane.lane.max_output_tokens, room) > 0, lane.lane_id
        assert prompt + lane.max_output_tokens <= lane.lane.context_window
        # And the hold covers what it was sent
        output = Decimal(lane.max_output_tokens) * lane.lane.price.output_per_mtok
        assert lane.hold >= Money.usd_ceil(output / 10**6)


def test_the_hold_covers_input_billed_as_cache_writes_above_the_input_price() -> None:
    body = {"model": "claude-sonnet-4", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10}
    plan = plan_direct(parse_chat_request(body, CATALOG), CATALOG, live=LIVE, now=NOW, guards=GUARDS)
    lane = next(lane for lane in plan.lanes if lane.lane.provider == "anthropic")
    prompt = parse_chat_request(body, CATALOG).facts.prompt_tokens
    # cache writes at 3.75 per million, above the 3.00 input price
    assert lane.hold == Money.usd_ceil((Decimal(prompt) * Decimal("3.75") + 10 * Decimal(15)) / 1_000_000)
    assert lane.charge(prompt, 10, cache_write_input_tokens=prompt) <= lane.hold


# -- objects ---------------------------------------------------------------------------------------
def test_job_ids_share_the_batch_suffix_and_statuses_map() -> None:
    batch_id = "batch_01jabcdefghjkmnpqrstvwxyz0"
    assert batch_id_for(job_id_for(batch_id)) == batch_id
    assert batch_id_for("batch_01jabcdefghjkmnpqrstvwxyz0") is None
    assert job_status("priced", None) == "queued"
    assert job_status("running", None) == "in_progress"
    assert job_status("completed", "completed") == "completed"
    assert job_status("completed", "failed") == "failed"
    assert job_status("canceled", None) == "cancelled"
    assert job_status("canceled", "canceled") == "cancelled"
    # a cancel (or a failure) that came after the item ran: the item was charged, the job is
    # its answer (it read `cancelled` with no result)
    assert job_status("canceled", "completed") == "completed"
    assert job_status("failed", "completed") == "completed"
    assert job_status("expired", "failed") == "failed"
    job = chat_job(
        BatchRecord(batch_id=batch_id, org_id="org_1", state="expired", created_at="2026-01-01T00:00:00.000Z")
    )
    assert job["status"] == "failed" and job["error"] and job["created"] == 1767225600


def test_usage_rides_only_on_the_last_chunk() -> None:
    common = ServedBy(completion="c", created=1, model="m", provider="p")
    assert "usage" not in chunk(common, delta={"content": "x"})
    assert chunk(common, delta={"content": "x"}, include_usage=True)["usage"] is None
    last = chunk(common, usage={"prompt_tokens": 1}, include_usage=True)
    assert last["choices"] == [] and last["usage"] == {"prompt_tokens": 1}


# -- simulated failures before the first byte ------------------------------------------------------
def _stream_request(text: str, timeout: float | None = 5.0) -> ProviderRequest:
    return ProviderRequest(
        custom_id="chat",
        customer_item_id="chat",
        operation="responses",
        model=LLAMA,
        provider_model_id=LLAMA,
        input={"messages": [{"role": "user", "content": text}]},
        max_output_tokens=8,
        first_byte_timeout_seconds=timeout,
    )


def test_simulated_5xx_and_timeout_fail_before_the_first_byte() -> None:
    slept: list[float] = []
    provider = SimulatedSyncProvider("groq", SimulationConfig(ttft_seconds=0.2), sleeper=slept.append)
    with pytest.raises(TransientProviderError) as five:
        next(provider.stream(_stream_request("[simulate:5xx:groq]")))
    assert five.value.code == "provider_5xx"
    with pytest.raises(TransientProviderError) as late:
        next(provider.stream(_stream_request("[simulate:timeout:groq]", timeout=3.0)))
    assert late.value.code == "first_byte_timeout" and slept[-1] == 3.0
    # another provider is unaffected, and a configured TTFT above the time-out also gives up
    other = SimulatedSyncProvider("edge-eu", SimulationConfig(ttft_seconds=0.2), sleeper=slept.append)
    assert isinstance(next(other.stream(_stream_request("[simulate:5xx:groq]"))), StreamStart)
    with pytest.raises(TransientProviderError):
        next(other.stream(_stream_request("hi", timeout=0.1)))


def test_functions_beside_a_hosted_tool_go_to_no_gemini_lane_which_would_refuse_the_mix() -> None:
    # Gemini 2.x refuses function declarations beside a built-in tool (400 "Tool use with function
    # calling is unsupported by the model"); OpenAI and Anthropic take both
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    tools = [{"type": "web_search"}, weather]
    for model, served in (("gemini-2.0-flash", False), ("gpt-4o-mini", True), ("claude-sonnet-4", True)):
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "tools": tools}
        request = parse_chat_request(body, CATALOG)
        assert "functions_with_hosted_tools" in request.facts.capabilities
        if served:
            assert plan_direct(request, CATALOG, live=LIVE, now=NOW, guards=GUARDS).lanes, model
            continue
        with pytest.raises(InvalidRequest) as refused:
            plan_direct(request, CATALOG, live=LIVE, now=NOW, guards=GUARDS)
        rejected = (refused.value.details or {})["rejected_lanes"]
        assert {lane["code"] for lane in rejected} == {"capability_missing"}, rejected
    # Either alone still goes to Gemini
    for alone in ([{"type": "web_search"}], [weather]):
        body = {"model": "gemini-2.0-flash", "messages": [{"role": "user", "content": "hi"}], "tools": alone}
        assert plan_direct(
            parse_chat_request(body, CATALOG), CATALOG, live=LIVE, now=NOW, guards=GUARDS
        ).lanes


def test_an_image_larger_than_a_vendor_takes_goes_to_no_lane_of_it() -> None:
    # Anthropic takes images of at most 5 MB of base64 (providers.toml max_image_bytes: 3.75 MB
    # decoded); a data: URL tells its size (an http(s) image's is the host's to tell)
    def asking(size: int) -> ChatRequest:
        data = base64.b64encode(b"\xff\xd8\xff\xe0" + b"\x00" * (size - 4)).decode()
        image = {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{data}"}}
        body = {
            "model": "claude-sonnet-4",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "What is it?"}, image]}],
            "max_tokens": 8,
        }
        return parse_chat_request(body, CATALOG)

    assert plan_direct(asking(3_932_160), CATALOG, live=LIVE, now=NOW, guards=GUARDS).lanes
    with pytest.raises(InvalidRequest) as refused:
        plan_direct(asking(3_932_161), CATALOG, live=LIVE, now=NOW, guards=GUARDS)
    rejected = (refused.value.details or {})["rejected_lanes"]
    assert rejected == [
        {
            "lane_id": "anthropic/claude-sonnet-4",
            "code": "context_window_exceeded",
            "message": (
                "The largest image is 3,932,161 bytes; the lane takes at most 3,932,160 bytes an image."
            ),
            "details": {"needed_image_bytes": 3_932_161, "image_bytes_limit": 3_932_160},
        }
    ]


def test_an_item_with_more_images_than_a_vendor_takes_a_request_goes_to_no_lane_of_it() -> None:
    # Anthropic takes at most 100 images a request (providers.toml max_images_per_request)
    def asking(count: int) -> ChatRequest:
        image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
        content = [{"type": "text", "text": "What are these?"}, *([image] * count)]
        body = {
            "model": "claude-sonnet-4",
            "messages": [{"role": "user", "content": content}],
            "max_tokens": 8,
        }
        return parse_chat_request(body, CATALOG)

    assert plan_direct(asking(100), CATALOG, live=LIVE, now=NOW, guards=GUARDS).lanes
    with pytest.raises(InvalidRequest) as refused:
        plan_direct(asking(101), CATALOG, live=LIVE, now=NOW, guards=GUARDS)
    rejected = (refused.value.details or {})["rejected_lanes"]
    # (the refusal says what to change, as a quote's receipt does)
    assert rejected == [
        {
            "lane_id": "anthropic/claude-sonnet-4",
            "code": "context_window_exceeded",
            "message": "The largest item holds 101 images; the lane takes at most 100 a request.",
            "details": {"needed_images": 101, "image_limit": 100},
        }
    ]
