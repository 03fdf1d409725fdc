"""A turn Anthropic paused (`stop_reason: "pause_turn"`: "we paused a long-running turn. You
may provide the response back as-is in a subsequent request to let the model continue",
the `anthropic` SDK's StopReason) is not an answer. The sync adapter continues it by sending
the paused content back as the final assistant turn (Anthropic's server tools guide), a few
rounds at most, the rounds making one answer; a paused turn nobody continued (a stream, a
Message Batches line, a sync turn still paused after the rounds) is a transient failure,
`turn_paused`, so the lane runner retries or fails the item over and nothing of it is billed
as completed. Over an in-memory transport (no sockets)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import pytest
from anthropic.types import Message

from batchroute.domain.catalog.catalog import Lane, LanePrice
from batchroute.providers import base
from batchroute.providers.anthropic import transform as t
from batchroute.providers.anthropic import vendor_http
from batchroute.providers.anthropic.client import AnthropicMessages
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute.providers.retry import RetryPolicy
from batchroute.services.workflow.runner import run_lane_items
from batchroute_tools.contracts.anthropic import request_violations

MODEL = "claude-sonnet-4-20250514"
SEARCH = [{"type": "web_search_20250305", "name": "web_search"}]


def searched(n: int) -> list[dict[str, Any]]:
    """A web search's two blocks, as a paused turn carries them."""
    tool_id = f"srvtoolu_0{n}"
    return [
        {"type": "server_tool_use", "id": tool_id, "name": "web_search", "input": {"query": f"q{n}"}},
        {
            "type": "web_search_tool_result",
            "tool_use_id": tool_id,
            "content": [
                {
                    "type": "web_search_result",
                    "url": f"https://e.example/{n}",
                    "title": "t",
                    "encrypted_content": "e",
                    "page_age": None,
                }
            ],
        },
    ]


def message(
    content: list[dict[str, Any]], stop: str, *, searches: int, tokens: tuple[int, int]
) -> dict[str, Any]:
    answer = {
        "id": f"msg_{stop}_{tokens[0]}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": tokens[0],
            "output_tokens": tokens[1],
            "cache_read_input_tokens": 0,
            "server_tool_use": {"web_search_requests": searches, "web_fetch_requests": 0},
        },
    }
    Message.model_validate(answer)  # the vendor's own type takes it
    return answer


PAUSED = message(searched(1), "pause_turn", searches=1, tokens=(5000, 300))
PAUSED_AGAIN = message(searched(2), "pause_turn", searches=1, tokens=(5600, 200))
ENDED = message([{"type": "text", "text": "The answer."}], "end_turn", searches=0, tokens=(6000, 40))


class Vendor:
    """An in-memory Anthropic answering the calls in order (the last answer again once the
    list is used up), keeping each call's body."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return httpx.Response(200, json=answer)

    def sync(self) -> AnthropicMessages:
        endpoint = ProviderEndpoint(slug="anthropic", adapter="anthropic")
        http = vendor_http(endpoint, "sk-ant-test", transport=httpx.MockTransport(self))
        return AnthropicMessages("anthropic", http)


def request(payload: dict[str, Any] | None = None) -> base.ProviderRequest:
    given = payload or {
        "messages": [{"role": "user", "content": "What happened today?"}],
        "tools": [{"type": "web_search"}],
    }
    return base.ProviderRequest(
        custom_id="seq-0",
        customer_item_id="item-0",
        operation="responses",
        model="claude-sonnet-4",
        provider_model_id=MODEL,
        input=given,
        max_output_tokens=256,
    )


def test_a_paused_turn_is_continued_with_its_content_sent_back_as_is() -> None:
    # Given a vendor that pauses the turn once, then ends it
    vendor = Vendor(PAUSED, ENDED)
    result = vendor.sync().complete(request())
    # Then the second call is the same body with the paused content as the final assistant turn
    first, second = vendor.bodies
    assert second["messages"] == [*first["messages"], {"role": "assistant", "content": PAUSED["content"]}]
    assert {k: v for k, v in second.items() if k != "messages"} == {
        k: v for k, v in first.items() if k != "messages"
    }
    assert request_violations("messages", second) == []  # a body the API takes
    # And the answer is whole: the last round's text, every round's blocks and usage added up
    assert result.status == "completed" and result.output is not None
    assert result.output["content"] == "The answer." and result.output["finish_reason"] == "stop"
    assert result.usage == base.Usage(5000 + 6000, 300 + 40, (("web_search", 1),))
    assert result.raw is not None
    assert result.raw["content"] == [*PAUSED["content"], *ENDED["content"]]
    assert result.raw["stop_reason"] == "end_turn"


def test_each_continuation_carries_every_paused_round_so_far() -> None:
    vendor = Vendor(PAUSED, PAUSED_AGAIN, ENDED)
    result = vendor.sync().complete(request())
    assert len(vendor.bodies) == 3
    assert vendor.bodies[2]["messages"][-1] == {
        "role": "assistant",
        "content": [*PAUSED["content"], *PAUSED_AGAIN["content"]],
    }
    assert result.status == "completed"
    assert result.usage.tool_uses == (("web_search", 2),)  # billed once per round that searched
    assert result.usage.prompt_tokens == 5000 + 5600 + 6000


def test_a_prefilled_turn_is_continued_after_its_prefill() -> None:
    asked = {
        "messages": [{"role": "user", "content": "Search it"}, {"role": "assistant", "content": "Sure:"}],
        "tools": [{"type": "web_search"}],
    }
    vendor = Vendor(PAUSED, ENDED)
    vendor.sync().complete(request(asked))
    last = vendor.bodies[1]["messages"][-1]
    assert last == {"role": "assistant", "content": [{"type": "text", "text": "Sure:"}, *PAUSED["content"]]}
    assert len(vendor.bodies[1]["messages"]) == 2


def test_a_code_execution_turn_is_continued_in_its_container() -> None:
    paused = {**PAUSED, "container": {"id": "container_011", "expires_at": "2026-12-01T00:00:00Z"}}
    vendor = Vendor(paused, ENDED)
    vendor.sync().complete(request())
    assert vendor.bodies[1]["container"] == "container_011"
    assert "container" not in vendor.bodies[0]


def test_a_turn_still_paused_after_the_rounds_is_a_transient_failure_not_an_answer() -> None:
    vendor = Vendor(PAUSED)  # pauses every time
    result = vendor.sync().complete(request())
    assert len(vendor.bodies) == 1 + t.MAX_CONTINUATIONS
    assert result.status == "failed" and result.transient_failure
    assert result.error is not None and result.error.code == "turn_paused"
    assert result.output is None and result.usage == base.ZERO_USAGE  # nothing billed as an answer


def test_a_paused_message_or_batch_line_is_a_transient_failure() -> None:
    assert t.message_result("seq-0", PAUSED).transient_failure
    line = t.batch_line_result({"custom_id": "seq-0", "result": {"type": "succeeded", "message": PAUSED}})
    assert line is not None and line.transient_failure
    assert line.error is not None and line.error.code == "turn_paused"
    assert line.output is None


def test_a_paused_stream_is_interrupted_not_ended() -> None:
    start = {**PAUSED, "content": [], "stop_reason": None}
    events = [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": searched(1)[1]}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "pause_turn", "stop_sequence": None},
                "usage": {"output_tokens": 300},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    text = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=text.encode())

    http = vendor_http(
        ProviderEndpoint(slug="anthropic", adapter="anthropic"), "k", transport=httpx.MockTransport(answer)
    )
    stream = AnthropicMessages("anthropic", http).stream(request())
    seen: list[base.StreamEvent] = []
    with pytest.raises(base.TransientProviderError) as raised:
        seen.extend(stream)
    assert raised.value.code == "turn_paused"
    assert not any(isinstance(event, base.StreamEnd) for event in seen)


def test_the_lane_runner_never_records_a_paused_turn_as_completed() -> None:
    # Given a sync lane whose vendor pauses every turn
    vendor = Vendor(PAUSED)
    lane = Lane(
        provider="anthropic",
        model="claude-sonnet-4",
        price=LanePrice(Decimal("3"), Decimal("15"), Decimal("0.3"), Decimal("3.75")),
        context_window=200_000,
        max_output_tokens=64_000,
        operations=("responses",),
        provider_model_id=MODEL,
    )
    results: dict[int, base.ProviderResult] = {}
    item = {
        "customer_item_id": "i0",
        "operation": "responses",
        "model": "claude-sonnet-4",
        "input": {"messages": [{"role": "user", "content": "news?"}], "tools": [{"type": "web_search"}]},
    }
    outcome = run_lane_items(
        [(0, item)],
        lane=lane,
        provider=vendor.sync(),
        retry=RetryPolicy(max_attempts=2, sleeper=lambda s: None),
        concurrency=1,
        on_result=lambda seq, r, a: results.__setitem__(seq, r),
    )
    # Then the item is tried again, and never reported completed: the lane fails over
    assert len(vendor.bodies) == 2 * (1 + t.MAX_CONTINUATIONS)
    assert outcome.completed == 0
    assert all(r.status != "completed" for r in results.values())
    assert outcome.unavailable
