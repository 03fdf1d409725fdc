"""The Anthropic emulator refuses what the API refuses, and pauses a turn on request.

- A request without `x-api-key`: 401 `authentication_error` ("x-api-key header is
  required"), in the error envelope the `anthropic` SDK parses (ErrorResponse).
- `max_tokens` over the model's output limit: 400 `invalid_request_error` ("max_tokens:
  100000 > 8192, which is the maximum allowed number of output tokens for
  claude-3-5-haiku-20241022"); in a Message Batch that request's result is `errored`, the
  others run. The limits are the catalog's lanes' (contracts/anthropic.py `output_limit`),
  and the adapter never asks for more.
- `[simulate:pause_turn]` in a web search item: the turn is paused once (`stop_reason:
  pause_turn`, the SDK's Message type takes it) and continued when the paused content comes
  back as the final assistant turn; the adapter's sync call continues it into one answer,
  a stream or a batch line paused is a transient failure (`turn_paused`).

The batch clock is the test's own (no waiting)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from anthropic.types import Message
from anthropic.types.shared.error_response import ErrorResponse

from batchroute.catalog import builtin_catalog
from batchroute.catalog.environments import lane_output_limits
from batchroute.providers import base
from batchroute.providers.anthropic import make_batch, make_sync
from batchroute.providers.anthropic.client import AnthropicBatches, AnthropicMessages
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute_tools.contracts.anthropic import output_limit, request_violations
from batchroute_tools.emulators.anthropic import AnthropicEmulator
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.server import EmulatorServer, Reply, Request

HAIKU = "claude-3-5-haiku-20241022"
SONNET = "claude-sonnet-4-20250514"
LIMITS = lane_output_limits(builtin_catalog().lanes, "anthropic")  # as a deployment loads them
HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
BATCH_SECONDS = 5.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def emulator() -> Iterator[tuple[str, Clock, list[dict[str, Any]]]]:
    clock = Clock()
    emu = AnthropicEmulator(Behaviour(EmulatorConfig(batch_seconds=BATCH_SECONDS)), clock=clock)
    bodies: list[dict[str, Any]] = []
    dispatch = emu.vendor.dispatch

    def recording(request: Request) -> Reply:
        if request.path.endswith("/v1/messages"):
            bodies.append(json.loads(request.body))
        return dispatch(request)

    emu.vendor.dispatch = recording  # type: ignore[method-assign]
    server = EmulatorServer([emu.vendor]).start()
    try:
        yield server.base_url + "/anthropic", clock, bodies
    finally:
        server.stop()


@pytest.fixture
def base_url(emulator: tuple[str, Clock, list[dict[str, Any]]]) -> str:
    return emulator[0]


@pytest.fixture
def sent(emulator: tuple[str, Clock, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The Messages bodies the emulator receives during this test."""
    emulator[2].clear()
    return emulator[2]


@pytest.fixture
def sync(base_url: str) -> AnthropicMessages:
    return make_sync(
        ProviderEndpoint("anthropic", "anthropic", base_url=base_url, output_limits=LIMITS), "sk-ant-test"
    )


@pytest.fixture
def batches(base_url: str) -> AnthropicBatches:
    return make_batch(
        ProviderEndpoint("anthropic", "anthropic", base_url=base_url, output_limits=LIMITS), "sk-ant-test"
    )


def body(model: str = HAIKU, max_tokens: int = 64, text: str = "hi") -> dict[str, Any]:
    return {"model": model, "max_tokens": max_tokens, "messages": [{"role": "user", "content": text}]}


def ask(
    text: str, *, custom_id: str = "seq-0", max_output_tokens: int = 64, **payload: Any
) -> base.ProviderRequest:
    return base.ProviderRequest(
        custom_id=custom_id,
        customer_item_id=custom_id,
        operation="responses",
        model="claude-3-5-haiku",
        provider_model_id=HAIKU,
        input={"messages": [{"role": "user", "content": text}], **payload},
        max_output_tokens=max_output_tokens,
    )


def ended(batches: AnthropicBatches, job_id: str, clock: Clock) -> dict[str, base.ProviderResult]:
    clock.now += BATCH_SECONDS + 1
    assert batches.poll(job_id).state == "completed"
    return {r.custom_id: r for r in batches.results(job_id)}


# -- x-api-key ----------------------------------------------------------------------------------
def test_a_request_without_a_key_is_refused_401(base_url: str) -> None:
    # Given a call without x-api-key, on every route
    for method, path, sent in (("POST", "/v1/messages", body()), ("GET", "/v1/models", None)):
        answer = httpx.request(
            method, base_url + path, json=sent, headers={"anthropic-version": "2023-06-01"}
        )
        # Then the API's 401 authentication_error, in the envelope the SDK parses
        assert answer.status_code == 401
        error = ErrorResponse.model_validate(answer.json())
        assert error.error.type == "authentication_error"
        assert error.error.message == "x-api-key header is required"
    keyed = httpx.post(base_url + "/v1/messages", json=body(), headers=HEADERS)
    assert keyed.status_code == 200


def test_the_adapter_without_a_key_finds_the_lane_unavailable(base_url: str) -> None:
    keyless = make_sync(
        ProviderEndpoint("anthropic", "anthropic", base_url=base_url, output_limits=LIMITS), None
    )
    with pytest.raises(base.ProviderUnavailable) as raised:
        keyless.complete(ask("hi"))
    assert raised.value.code == "provider_auth_failed"


# -- max_tokens over the model's output limit ------------------------------------------------------
def test_the_contract_takes_each_models_output_limit_from_the_catalog() -> None:
    assert output_limit(HAIKU) == 8_192 and output_limit(SONNET) == 64_000
    assert {output_limit(m) for m in LIMITS.values()} == {None}  # keyed by the vendor's model id
    assert output_limit("claude-unknown") is None
    assert request_violations("messages", body(HAIKU, 8_192)) == []
    assert request_violations("messages", body(HAIKU, 100_000)) == [
        "$.max_tokens: 100000 > 8192, which is the maximum allowed number of output tokens for "
        "claude-3-5-haiku-20241022"
    ]
    assert request_violations("messages", body(SONNET, 64_000)) == []
    assert request_violations("messages", body(SONNET, 64_001)) != []


def test_max_tokens_over_the_models_limit_is_refused_400(base_url: str) -> None:
    answer = httpx.post(base_url + "/v1/messages", json=body(HAIKU, 100_000), headers=HEADERS)
    assert answer.status_code == 400
    error = ErrorResponse.model_validate(answer.json())
    assert error.error.type == "invalid_request_error"
    assert (
        "max_tokens: 100000 > 8192, which is the maximum allowed number of output tokens for "
        "claude-3-5-haiku-20241022" in error.error.message
    )
    streamed = httpx.post(
        base_url + "/v1/messages", json={**body(HAIKU, 100_000), "stream": True}, headers=HEADERS
    )
    assert streamed.status_code == 400


def test_in_a_batch_such_a_request_comes_back_errored(
    batches: AnthropicBatches, base_url: str, emulator: tuple[str, Clock, list[dict[str, Any]]]
) -> None:
    # Given a batch whose first request asks for more output than the model gives
    requests = [{"custom_id": "big", "params": body(HAIKU, 100_000)}, {"custom_id": "ok", "params": body()}]
    created = httpx.post(base_url + "/v1/messages/batches", json={"requests": requests}, headers=HEADERS)
    assert created.status_code == 200
    emulator[1].now += BATCH_SECONDS + 1
    results = httpx.get(base_url + f"/v1/messages/batches/{created.json()['id']}/results", headers=HEADERS)
    lines = {line["custom_id"]: line["result"] for line in map(json.loads, results.text.splitlines())}
    # Then that request is errored, as the API validates params while the batch runs; the other ran
    assert lines["big"]["type"] == "errored"
    assert lines["big"]["error"]["error"]["type"] == "invalid_request_error"
    assert (
        "8192, which is the maximum allowed number of output tokens"
        in lines["big"]["error"]["error"]["message"]
    )
    assert lines["ok"]["type"] == "succeeded"


def test_the_adapter_never_asks_for_more_than_the_lane_gives(
    sync: AnthropicMessages, batches: AnthropicBatches, sent: list[dict[str, Any]]
) -> None:
    request = ask("Tell me a long story", max_output_tokens=100_000)
    assert sync.complete(request).status == "completed"
    assert sent[-1]["max_tokens"] == 8_192
    events = list(sync.stream(request))
    assert isinstance(events[-1], base.StreamEnd) and sent[-1]["max_tokens"] == 8_192
    assert batches.batch_body([request])["requests"][0]["params"]["max_tokens"] == 8_192
    assert request_violations("messages.batches", batches.batch_body([request])) == []


# -- a paused turn --------------------------------------------------------------------------------
SEARCH = {"tools": [{"type": "web_search"}]}
PAUSE = "What is new today? [simulate:pause_turn]"


def test_the_emulator_pauses_a_search_turn_and_continues_it(base_url: str) -> None:
    tools = [{"type": "web_search_20250305", "name": "web_search"}]
    asked = {**body(max_tokens=2048, text=PAUSE), "tools": tools}
    paused = httpx.post(base_url + "/v1/messages", json=asked, headers=HEADERS).json()
    message = Message.model_validate(paused)
    assert message.stop_reason == "pause_turn"
    assert [b.type for b in message.content] == ["server_tool_use", "web_search_tool_result"]
    continued = {
        **asked,
        "messages": [*asked["messages"], {"role": "assistant", "content": paused["content"]}],
    }
    assert request_violations("messages", continued) == []
    answer = Message.model_validate(
        httpx.post(base_url + "/v1/messages", json=continued, headers=HEADERS).json()
    )
    assert answer.stop_reason == "end_turn" and [b.type for b in answer.content] == ["text"]
    assert answer.usage.server_tool_use is None  # the paused round searched, this one did not


def test_the_adapter_continues_a_paused_turn_into_one_answer(
    sync: AnthropicMessages, sent: list[dict[str, Any]]
) -> None:
    result = sync.complete(ask(PAUSE, max_output_tokens=2048, **SEARCH))
    assert len(sent) == 2 and sent[1]["messages"][-1]["role"] == "assistant"
    assert result.status == "completed" and result.output is not None
    assert (
        result.output["content"].startswith("Simulated answer") and result.output["finish_reason"] == "stop"
    )
    assert result.usage.tool_uses == (("web_search", 1),)
    assert result.raw is not None
    assert [b["type"] for b in result.raw["content"]] == ["server_tool_use", "web_search_tool_result", "text"]


def test_a_paused_stream_or_batch_line_is_a_transient_failure(
    sync: AnthropicMessages, batches: AnthropicBatches, emulator: tuple[str, Clock, list[dict[str, Any]]]
) -> None:
    with pytest.raises(base.TransientProviderError) as raised:
        list(sync.stream(ask(PAUSE, **SEARCH)))
    assert raised.value.code == "turn_paused"
    job = batches.submit([ask(PAUSE, custom_id="seq-0", **SEARCH), ask("Plain", custom_id="seq-1")])
    results = ended(batches, job, emulator[1])
    assert results["seq-0"].transient_failure and results["seq-0"].error is not None
    assert results["seq-0"].error.code == "turn_paused"
    assert results["seq-1"].status == "completed"
