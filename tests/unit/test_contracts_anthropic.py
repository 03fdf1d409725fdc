"""The Anthropic contract (batchroute_tools/contracts/anthropic.py) refuses what the API refuses
and takes what it takes, and every body the Anthropic adapter builds, over varied inputs of
the space the preflight accepts, passes it (or the adapter refuses the item, with a code)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from batchroute.providers import base
from batchroute.providers.anthropic import BETAS
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute_tools.contracts.anthropic import (
    message_violations,
    outgoing,
    request_violations,
    required_betas,
)

MODEL = "claude-sonnet-4-20250514"
GOOD: dict[str, Any] = {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "Hi"}]}
ENDPOINT = ProviderEndpoint("anthropic", "anthropic", base_url="http://127.0.0.1:9/anthropic")


def with_messages(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**GOOD, "messages": list(messages), **extra}


def test_a_good_body_has_no_violations_and_an_unknown_operation_is_an_error() -> None:
    assert request_violations("messages", GOOD) == []
    assert request_violations("messages", {**GOOD, "stream": True}) == []
    assert (
        request_violations("messages.batches", {"requests": [{"custom_id": "a-1_B", "params": GOOD}]}) == []
    )
    with pytest.raises(ValueError, match=r"messages\.batches"):
        request_violations("chat.completions", GOOD)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ([], "$: should be a JSON object"),
        ({**GOOD, "max_tokens": "16"}, "$.max_tokens: Input should be a valid integer"),
        ({**GOOD, "max_tokens": 0}, "$.max_tokens: should be at least 1"),
        ({**GOOD, "seed": 1}, "$.seed: unknown field"),
        ({**GOOD, "workspace_id": "w"}, "$.workspace_id: unknown field (the SDK sends it as a header)"),
        ({**GOOD, "stream": "yes"}, "$.stream: Input should be False"),
        ({**GOOD, "temperature": 1.2}, "$.temperature: should be between 0 and 1"),
        ({**GOOD, "top_p": True}, "$.top_p: should be a number"),
        ({**GOOD, "top_k": 2.5}, "$.top_k: should be an integer"),
        ({**GOOD, "stop_sequences": ["\n"]}, "$.stop_sequences[0]: each stop sequence must contain"),
        ({**GOOD, "system": [{"type": "text", "text": " "}]}, "$.system[0]: text content blocks must"),
        (
            with_messages({"role": "user", "content": [{"type": "text", "text": "x", "extra": 1}]}),
            "$.messages[0].content[0].extra: unknown field",
        ),
        (
            with_messages({"role": "user", "content": [{"type": "text", "text": 5}]}),
            "$.messages[0].content[0].text: Input should be a valid string",
        ),
        (
            with_messages({"role": "user", "content": [{"type": "input_text", "text": "x"}]}),
            "$.messages[0].content[0]: is none of the",
        ),
        (with_messages({"role": "developer", "content": "x"}), "(role 'developer')"),
        (with_messages({"role": "user", "content": ""}), "$.messages[0]: all messages must have non-empty"),
        (
            with_messages({"role": "assistant", "content": "Hi"}, {"role": "user", "content": "x"}),
            '$.messages[0]: the first message must use the "user" role',
        ),
        (
            with_messages({"role": "user", "content": "x"}, {"role": "assistant", "content": "So "}),
            "$.messages[1]: final assistant content cannot end with trailing whitespace",
        ),
        (
            {**GOOD, "tools": [{"name": "f", "input_schema": {"type": "array"}}]},
            "input_schema.type: should be",
        ),
        (
            {**GOOD, "tools": [{"name": "f g", "input_schema": {"type": "object"}}]},
            "$.tools[0].name: should match",
        ),
        (
            {**GOOD, "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 0}]},
            "$.tools[0].max_uses: should be at least 1",
        ),
        (
            {
                **GOOD,
                "tools": [{"name": "g", "input_schema": {"type": "object"}}],
                "tool_choice": {"type": "tool", "name": "f"},
            },
            "$.tool_choice.name: 'f' names no tool",
        ),
        (
            {**GOOD, "tool_choice": {"type": "any"}},
            "$.tool_choice: tool_choice may only be specified while providing tools",
        ),
        (
            with_messages(
                {"role": "user", "content": "Weather?"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "call:1", "name": "f", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "call:1", "content": "sunny"}],
                },
                tools=[{"name": "f", "input_schema": {"type": "object"}}],
            ),
            "$.messages.1.content.0.tool_use.id: String should match pattern",
        ),
        (
            {**GOOD, "max_tokens": 4000, "thinking": {"type": "enabled", "budget_tokens": 512}},
            "$.thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
        ),
        (
            {**GOOD, "max_tokens": 2000, "thinking": {"type": "enabled", "budget_tokens": 2000}},
            "$: `max_tokens` must be greater than `thinking.budget_tokens`",
        ),
    ],
)
def test_what_the_api_refuses(body: Any, expected: str) -> None:
    assert any(expected in line for line in request_violations("messages", body)), request_violations(
        "messages", body
    )


def test_tool_calls_and_results_must_pair_up_across_merged_turns() -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}
    tools = [{"name": "f", "input_schema": {"type": "object"}}]
    paired = with_messages(
        {"role": "user", "content": "Go"},
        {"role": "user", "content": "now"},  # consecutive turns of a role: the API merges them
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result, {"type": "text", "text": "and?"}]},
        tools=tools,
    )
    assert request_violations("messages", paired) == []
    unanswered = with_messages(
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": "no result"},
        tools=tools,
    )
    assert "tool_use ids were found without tool_result blocks" in " ".join(
        request_violations("messages", unanswered)
    )
    late = with_messages(
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "text", "text": "first"}, result]},
        tools=tools,
    )
    assert "tool_result blocks must come first" in " ".join(request_violations("messages", late))


def test_batches_custom_ids_and_params() -> None:
    entry = {"custom_id": "seq-1", "params": GOOD}
    found = request_violations(
        "messages.batches",
        {
            "requests": [
                entry,
                entry,
                {"custom_id": "x" * 65, "params": GOOD},
                {"custom_id": "ok", "params": {**GOOD, "stream": True}, "extra": 1},
                {"custom_id": "ok2"},
            ],
            "user_profile_id": "u",
        },
    )
    assert found == [
        "$.user_profile_id: unknown field",
        "$.requests[1].custom_id: 'seq-1' is not unique in the batch",
        "$.requests[2].custom_id: should be 1 to 64 characters of a-z, A-Z, 0-9, _ and -",
        "$.requests[3].extra: unknown field",
        "$.requests[3].params.stream: Input should be False",
        "$.requests[4].params: field required",
    ]
    assert request_violations("messages.batches", {"requests": []}) == ["$.requests: 1 to 100000 requests"]
    assert message_violations({**GOOD, "stream": True}, "$.x", in_batch=True) == [
        "$.x.stream: Input should be False"
    ]


def test_server_tools_and_their_betas() -> None:
    tools = [
        {"type": "web_search_20250305", "name": "web_search", "allowed_domains": ["a.org"]},
        {"type": "code_execution_20250522", "name": "code_execution"},
    ]
    assert request_violations("messages", {**GOOD, "tools": tools}) == []
    assert required_betas({**GOOD, "tools": tools}) == {"code-execution-2025-05-22"}
    assert required_betas({**GOOD, "tools": tools[:1]}) == set()
    assert required_betas({**GOOD, "tools": tools}) <= set(BETAS)  # the adapter sends what they need
    both = [{**tools[0], "blocked_domains": ["b.org"]}]
    assert request_violations("messages", {**GOOD, "tools": both}) == [
        "$.tools[0]: allowed_domains or blocked_domains, not both"
    ]


def ask(
    payload: dict[str, Any], *, max_output_tokens: int = 0, sampling: bool = True
) -> base.ProviderRequest:
    return base.ProviderRequest(
        "seq-0",
        "item-0",
        "responses",
        "claude-sonnet-4",
        MODEL,
        payload,
        max_output_tokens,
        sampling=sampling,
    )


def test_outgoing_is_every_body_the_adapter_sends() -> None:
    sent = outgoing(ask({"input": "Hi"}), ENDPOINT, lane_max_output_tokens=321)
    assert [operation for operation, _ in sent] == ["messages", "messages", "messages.batches"]
    whole, streamed, batch = (body for _, body in sent)
    assert whole == {"model": MODEL, "max_tokens": 321, "messages": [{"role": "user", "content": "Hi"}]}
    assert streamed == {**whole, "stream": True}
    assert batch == {"requests": [{"custom_id": "seq-0", "params": whole}]}
    with pytest.raises(base.PermanentProviderError) as refused:
        outgoing(ask({"input": "Hi", "seed": 3}), ENDPOINT, lane_max_output_tokens=321)
    assert refused.value.code == "unsupported_parameter"


# -- the adapter over varied inputs ------------------------------------------------------------
TEXT = st.text(min_size=0, max_size=12)
IMAGE = st.sampled_from(
    [
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}},
        {"type": "input_image", "image_url": "data:image/gif;base64,R0lGOD=="},
        {"type": "input_image", "image_url": "data:image/tiff;base64,SUkq"},
    ]
)
PART = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, TEXT),
    st.builds(lambda t: {"type": "input_text", "text": t}, TEXT),
    st.builds(lambda t: {"type": "refusal", "refusal": t}, TEXT),
    IMAGE,
)
CONTENT = st.one_of(TEXT, st.lists(PART, max_size=3))
FUNCTION = st.sampled_from(
    [
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
        {"type": "function", "name": "lookup", "description": "Look", "strict": True},
        {"type": "function", "function": {"name": "web_search"}},
        {"type": "function", "function": {"name": "listing", "parameters": {"type": "array"}}},
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
    ]
)
HOSTED = st.sampled_from(
    [
        {"type": "web_search"},
        {"type": "web_search_preview_2025_03_11", "search_context_size": "low"},
        {"type": "web_search", "filters": {"allowed_domains": ["example.com"]}},
        {"type": "web_search", "user_location": {"type": "approximate", "city": "Lyon", "timezone": None}},
        {"type": "web_search", "max_uses": 3, "blocked_domains": ["example.org"]},
        {"type": "web_search", "max_uses": 0, "allowed_domains": ["a.org"], "blocked_domains": ["b.org"]},
        {"type": "web_search", "user_location": {"type": "approximate", "city": 75}},
        {"type": "code_interpreter", "container": {"type": "auto"}},
        {"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["file_1"]}},
        {"type": "file_search", "vector_store_ids": ["vs_1"]},
    ]
)
CHOICE = st.sampled_from(
    [
        None,
        None,
        "auto",
        "none",
        "required",
        {"type": "function", "function": {"name": "get_weather"}},
        {"type": "function", "name": "lookup"},
        {"type": "web_search_preview"},
        {"type": "code_interpreter"},
    ]
)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    if draw(st.booleans()):
        turns.append({"role": draw(st.sampled_from(["system", "developer"])), "content": draw(CONTENT)})
    turns.append({"role": "user", "content": draw(st.one_of(st.just("Hello"), CONTENT))})
    for number in range(draw(st.integers(0, 4))):
        role = draw(st.sampled_from(["system", "developer", "user", "user", "assistant", "call"]))
        if role == "call":  # a tool call, answered (or not) by its result
            call_id = f"call_{number}"
            arguments = draw(st.sampled_from(['{"q": 1}', "{}", '{"a": [1]}', "[1]"]))
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": "get_weather", "arguments": arguments},
            }
            turns.append(
                {
                    "role": "assistant",
                    "content": draw(st.sampled_from([None, "", "Checking."])),
                    "tool_calls": [call],
                }
            )
            if draw(st.booleans()):
                turns.append({"role": "tool", "tool_call_id": call_id, "content": draw(TEXT)})
            continue
        turns.append({"role": role, "content": draw(CONTENT)})
    return turns


@st.composite
def items(draw: st.DrawFn) -> dict[str, Any]:
    payload: dict[str, Any] = {"messages": draw(conversations())}
    tools = draw(st.lists(st.one_of(FUNCTION, HOSTED), max_size=3, unique_by=lambda t: str(t)))
    if tools:
        payload["tools"] = tools
    choice = draw(CHOICE)
    if choice is not None:
        payload["tool_choice"] = choice
    for key, values, odds in (
        ("temperature", st.floats(0, 2), 2),
        ("top_p", st.floats(0, 1), 1),
        ("seed", st.integers(0, 2**31), 10),  # Anthropic refuses it: rarely, so the rest is tried
        ("stop", st.one_of(TEXT, st.lists(TEXT, max_size=4)), 1),
        (
            "response_format",
            st.sampled_from(
                [
                    {"type": "json_object"},
                    {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
                ]
            ),
            2,
        ),
    ):
        if draw(st.integers(0, odds)) == odds:  # about one in `odds` + 1
            payload[key] = draw(values)
    return payload


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=items(), sampling=st.booleans(), limit=st.integers(0, 64))
@example(  # found by the explore profile: a prefill whose last text, trailing a space, precedes an image
    payload={
        "messages": [
            {"role": "user", "content": "Hello"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "0 "},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                ],
            },
        ]
    },
    sampling=False,
    limit=0,
)
def test_every_body_the_adapter_builds_fits_the_contract(
    payload: dict[str, Any], sampling: bool, limit: int
) -> None:
    refused: base.PermanentProviderError | None = None
    try:
        sent = outgoing(
            ask(payload, max_output_tokens=limit, sampling=sampling), ENDPOINT, lane_max_output_tokens=64_000
        )
    except base.PermanentProviderError as exc:
        refused, sent = exc, []
    if refused is not None:  # the adapter sends nothing, and the item fails with a code
        assert refused.code in ("unsupported_parameter", "invalid_item"), refused
        assert refused.message
    for operation, body in sent:
        assert request_violations(operation, body) == [], (payload, body)


def _cached(*controls: Any, top: Any = None) -> dict[str, Any]:
    """A body whose system blocks carry `controls`, and `top` as the top-level cache_control."""
    system = [{"type": "text", "text": f"part {i}", "cache_control": c} for i, c in enumerate(controls)]
    return {**GOOD, "system": system, **({"cache_control": top} if top is not None else {})}


def test_cache_breakpoints_as_the_api_takes_and_refuses_them() -> None:
    ephemeral, hour = {"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}
    assert request_violations("messages", _cached(hour, ephemeral, {"type": "ephemeral", "ttl": "5m"})) == []
    assert request_violations("messages", _cached(ephemeral, top=ephemeral)) == []
    assert (
        "type: Input should be 'ephemeral'" in request_violations("messages", _cached({"type": "forever"}))[0]
    )
    assert "ttl" in request_violations("messages", _cached({"type": "ephemeral", "ttl": "2h"}))[0]
    five = request_violations("messages", _cached(*[ephemeral] * 4, top=ephemeral))
    assert five == ["A maximum of 4 blocks with cache_control may be provided. Found 5."]
    assert "must come before" in request_violations("messages", _cached(ephemeral, hour))[0]


def test_more_than_a_hundred_images_in_a_request_are_refused() -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}

    def with_images(count: int) -> dict[str, Any]:
        content = [{"type": "text", "text": "What are these?"}, *([image] * count)]
        return {**GOOD, "messages": [{"role": "user", "content": content}]}

    assert request_violations("messages", with_images(100)) == []
    assert request_violations("messages", with_images(101)) == [
        "$.messages: too many images (101); at most 100 images a request"
    ]


def _image(media_type: str, data: bytes) -> dict[str, Any]:
    import base64

    source = {"type": "base64", "media_type": media_type, "data": base64.b64encode(data).decode()}
    return {
        "role": "user",
        "content": [{"type": "text", "text": "What is it?"}, {"type": "image", "source": source}],
    }


def test_an_image_must_be_its_media_type_and_at_most_5_mb_of_base64() -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
    jpeg = b"\xff\xd8\xff\xe0" + b"\x00" * 32
    where = "$.messages.0.content.1.image.source.base64"
    assert message_violations(with_messages(_image("image/png", png))) == []
    assert message_violations(with_messages(_image("image/png", jpeg))) == [
        f"{where}.data: Image does not match the provided media type image/png"
    ]
    # 5 MB of base64 is 3.75 MB of image: the API measures the base64
    fits = jpeg + b"\x00" * (3 * 1024 * 1024 * 5 // 4 - len(jpeg))
    assert message_violations(with_messages(_image("image/jpeg", fits))) == []
    big = fits + b"\x00"
    encoded = len(base64.b64encode(big))
    assert message_violations(with_messages(_image("image/jpeg", big))) == [
        f"{where}: image exceeds 5 MB maximum: {encoded} bytes > 5242880 bytes"
    ]
