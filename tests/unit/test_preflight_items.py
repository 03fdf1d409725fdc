"""Reading one item: what the lane must offer (inferred tools and capabilities), and the
model group's bounds on capped output."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from batchroute.domain.routing.items import ItemFacts, ModelGroup, read_item
from tests.unit.catalog_fixtures import group_of, item


def facts_of(raw: dict[str, Any]) -> ItemFacts:
    facts, problems = read_item(raw)
    assert facts is not None, problems
    return facts


def chat_input(**extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "hi"}], **extra}


@pytest.mark.parametrize(
    ("tool", "hosted"),
    [
        ({"type": "web_search"}, "web_search"),
        ({"type": "web_search_preview"}, "web_search"),
        ({"type": "web_search_preview_2025_03_11"}, "web_search"),
        ({"type": "code_interpreter", "container": {"type": "auto"}}, "python_execution"),
        ({"type": "file_search", "vector_store_ids": ["vs_1"]}, "file_search"),
        ({"type": "retrieval"}, "retrieval"),
        ({"type": "time"}, "time"),
    ],
)
def test_hosted_tools_declared_in_the_input_are_inferred(tool: dict[str, Any], hosted: str) -> None:
    facts = facts_of(item(0, input=chat_input(tools=[tool])))
    assert facts.tools == frozenset({hosted})
    assert facts.capabilities == frozenset()


def test_tool_choice_names_a_declared_tool() -> None:
    facts = facts_of(
        item(0, input=chat_input(tools=[{"type": "web_search"}], tool_choice={"type": "web_search"}))
    )
    assert facts.tools == frozenset({"web_search"})
    _, problems = read_item(item(0, input=chat_input(tool_choice={"type": "web_search"})))
    assert [(p.code, p.field) for p in problems] == [("invalid_field", "input.tool_choice")]


def test_declared_and_inferred_tools_are_merged() -> None:
    raw = item(0, required_tools=["calculator"], input=chat_input(tools=[{"type": "web_search"}]))
    assert facts_of(raw).tools == frozenset({"calculator", "web_search"})


def test_function_tools_need_tool_calling_not_a_hosted_tool() -> None:
    function = {"type": "function", "function": {"name": "calculator", "parameters": {}}}
    facts = facts_of(item(0, input=chat_input(tools=[function])))
    assert (facts.tools, facts.capabilities) == (frozenset(), frozenset({"tool_calling"}))


@pytest.mark.parametrize(
    "function",
    [
        {"type": "function", "function": {"name": "f", "parameters": {}, "strict": True}},
        {
            "type": "function",
            "name": "f",
            "parameters": {"type": "object", "additionalProperties": False},
            "strict": True,
        },
    ],
)
def test_a_strict_function_also_needs_a_lane_that_holds_output_to_a_schema(function: dict[str, Any]) -> None:
    # Given a function the caller wants held to its parameters' schema (OpenAI's strict mode,
    # which the openai SDK's pydantic_function_tool turns on), then only a lane that holds output
    # to a JSON Schema may run it: Claude's models refuse `strict` (400) and others drop it
    facts = facts_of(item(0, input=chat_input(tools=[function])))
    assert facts.capabilities == frozenset({"tool_calling", "json_schema"})
    lax = (
        {**function, "strict": False}
        if "name" in function
        else {"type": "function", "function": {"name": "f"}}
    )
    assert facts_of(item(0, input=chat_input(tools=[lax]))).capabilities == frozenset({"tool_calling"})


def test_images_need_vision_except_on_the_vision_operation_itself() -> None:
    part = {"type": "input_image", "image_url": "https://example.com/a.png"}
    body = {"messages": [{"role": "user", "content": [{"type": "input_text", "text": "what?"}, part]}]}
    assert facts_of(item(0, input=body)).capabilities == frozenset({"vision"})
    assert facts_of(item(0, operation="vision", input=body)).capabilities == frozenset()


@pytest.mark.parametrize(
    ("url", "needs"),
    [
        ("https://example.com/a.png", False),
        ("https://example.com/a.JPEG?size=2", False),
        ("data:image/webp;base64,UklGRg==", False),
        ("https://example.com/render?id=3", True),  # no type told: Gemini cannot be sent it
        ("https://example.com/a.gif", True),  # a type Gemini does not take
        ("data:image/gif;base64,R0lGODlh", True),
    ],
)
def test_an_image_gemini_cannot_take_needs_any_image_type_on_both_operations(url: str, needs: bool) -> None:
    part = {"type": "input_image", "image_url": url}
    other = {"type": "image_url", "image_url": {"url": "https://example.com/b.png"}}
    body = {"messages": [{"role": "user", "content": [other, part]}]}
    expected = {"any_image_type"} if needs else set()
    assert facts_of(item(0, input=body)).capabilities == frozenset({"vision", *expected})
    assert facts_of(item(0, operation="vision", input=body)).capabilities == frozenset(expected)


def test_dimensions_need_embedding_dimensions_and_are_kept() -> None:
    embed = {"customer_item_id": "e", "operation": "embeddings", "model": "m"}
    facts = facts_of({**embed, "input": {"input": "x", "dimensions": 256}})
    assert (facts.capabilities, facts.dimensions) == (frozenset({"embedding_dimensions"}), 256)
    facts = facts_of({**embed, "input": {"input": "x"}})
    assert (facts.capabilities, facts.dimensions) == (frozenset(), 0)


def test_responses_api_message_lists_and_tool_outputs_are_read() -> None:
    body = {
        "input": [
            {"role": "user", "content": "look this up"},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "42"},
        ]
    }
    facts = facts_of(item(0, input=body))
    assert facts.prompt_tokens > 0


def test_an_item_problem_list_is_complete() -> None:
    facts, problems = read_item({"operation": "nope", "input": [], "required_tools": [1]})
    assert facts is None
    assert [(p.code, p.field) for p in problems] == [
        ("missing_field", "customer_item_id"),
        ("missing_field", "model"),
        ("invalid_field", "operation"),
        ("invalid_field", "input"),
        ("invalid_field", "required_tools[0]"),
    ]


def test_a_group_bounds_output_capped_by_a_lane() -> None:
    # Given items asking 100 and 5,000 output tokens
    group = group_of([item(0, max_output_tokens=100), item(1, max_output_tokens=5_000)])
    # Then on a lane producing at most 10,000 the requests stand
    assert group.output_tokens_on(10_000) == 5_100
    # And on a lane producing at most 1,000 the estimate is bounded by count x cap
    assert group.output_tokens_on(1_000) == 2_000  # exact would be 1,100: never under
    assert group.output_tokens_on(50) == 100  # exact


def test_a_group_context_need_is_exact_when_no_item_exceeds_the_cap() -> None:
    group = group_of([item(0, text="x" * 3_000, max_output_tokens=10), item(1, max_output_tokens=900)])
    big_prompt = group.max_prompt_tokens
    assert group.context_tokens_on(1_000) == max(big_prompt + 10, group.max_item_tokens)
    assert group.context_tokens_on(5) == big_prompt + 5


def test_an_empty_group_has_no_demand() -> None:
    group = ModelGroup(model="m", first_index=0)
    assert (group.output_tokens_on(100), group.context_tokens_on(100), group.item_count) == (0, 0, 0)


def test_a_stop_of_whitespace_alone_needs_lanes_that_take_one() -> None:
    # A stop sequence of whitespace alone: OpenAI, Gemini, Bedrock and the hosts take it,
    # Anthropic refuses it, so the item needs `whitespace_stop`; one with visible text does not
    assert "whitespace_stop" in facts_of(item(0, input=chat_input(stop="\n"))).capabilities
    assert "whitespace_stop" in facts_of(item(0, input=chat_input(stop=["END", " \t"]))).capabilities
    assert "whitespace_stop" not in facts_of(item(0, input=chat_input(stop=[" END\n"]))).capabilities


def test_a_penalty_other_than_zero_needs_lanes_that_take_one() -> None:
    # OpenAI and the hosts that document them take OpenAI's penalties; 0, the default, is nothing
    assert "penalties" in facts_of(item(0, input=chat_input(frequency_penalty=0.5))).capabilities
    assert "penalties" in facts_of(item(0, input=chat_input(presence_penalty=-2))).capabilities
    idle = facts_of(item(0, input=chat_input(frequency_penalty=0, presence_penalty=0.0)))
    assert "penalties" not in idle.capabilities


def test_a_seed_needs_lanes_that_take_one() -> None:
    # OpenAI, Gemini and the hosts take a seed, Anthropic and Bedrock have none
    assert "seed" in facts_of(item(0, input=chat_input(seed=0))).capabilities
    assert "seed" not in facts_of(item(0, input=chat_input(temperature=0))).capabilities


def test_a_message_name_needs_lanes_that_take_one() -> None:
    # OpenAI's Chat Completions and Groq take who of several participants speaks; null is none
    named = {
        "messages": [{"role": "user", "content": "hi", "name": "ann"}, {"role": "assistant", "content": "x"}]
    }
    assert "message_names" in facts_of(item(0, input=named)).capabilities
    spoken = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "x", "name": "bot_1"},
        ]
    }
    assert "message_names" in facts_of(item(0, input=spoken)).capabilities
    unnamed = {"messages": [{"role": "user", "content": "hi", "name": None}]}
    assert "message_names" not in facts_of(item(0, input=unnamed)).capabilities


def test_parallel_tool_calls_false_beside_tools_needs_lanes_that_take_it() -> None:
    # OpenAI, Anthropic and Groq can be told to make one tool call at most; Gemini cannot
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    serial = facts_of(item(0, input=chat_input(tools=tools, parallel_tool_calls=False)))
    assert "serial_tool_calls" in serial.capabilities
    hosted = facts_of(item(0, input=chat_input(tools=[{"type": "web_search"}], parallel_tool_calls=False)))
    assert "serial_tool_calls" in hosted.capabilities
    # Without tools, under tool_choice none, or true (the default), it constrains nothing
    for idle in (
        chat_input(parallel_tool_calls=False),
        chat_input(tools=tools, tool_choice="none", parallel_tool_calls=False),
        chat_input(tools=tools, parallel_tool_calls=True),
    ):
        assert "serial_tool_calls" not in facts_of(item(0, input=idle)).capabilities


# -- what every lane's vendor can be sent (issue 26): refused here, never dropped later -------------
def problems_of(input_: dict[str, Any], *, operation: str = "responses") -> list[tuple[str, str]]:
    facts, problems = read_item(item(0, operation=operation, input=input_))
    assert (facts is None) == bool(problems)
    return [(p.code, p.field) for p in problems]


WEATHER_FLAT = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
WEATHER_CHAT = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


@pytest.mark.parametrize(
    "accepted",
    [
        chat_input(stop=["a", "b", "c", "d"], temperature=2, top_p=0.5),
        chat_input(stop="END"),
        chat_input(stop=["\n", "\n\n"]),  # whitespace alone: on lanes with whitespace_stop (below)
        chat_input(seed=7),  # on lanes with seed (below)
        chat_input(seed=-(2**31)),
        chat_input(tools=[WEATHER_FLAT], tool_choice={"type": "function", "name": "get_weather"}),
        chat_input(
            tools=[WEATHER_CHAT], tool_choice={"type": "function", "function": {"name": "get_weather"}}
        ),
        chat_input(tools=[WEATHER_CHAT], tool_choice="required"),
        chat_input(tools=[{"type": "web_search_preview"}], tool_choice={"type": "web_search_preview"}),
        chat_input(user="u-1", n=1, stream=False, store=False, metadata={"k": "v"}, model="x"),
        chat_input(store=None, metadata=None),
        chat_input(store=True, metadata={f"k{i}": "v" * 512 for i in range(16)}),
        # OpenAI's defaults, as clients send them unasked
        chat_input(logprobs=False, presence_penalty=0, frequency_penalty=0.0),
        {
            "input": [
                {"role": "user", "content": "Weather in Paris?"},
                {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Sunny."}],
                },
            ],
            "tools": [WEATHER_FLAT],
        },
        {
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": "Weather?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            ],
            "tools": [WEATHER_CHAT],
        },
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what?"},
                        {"type": "image_url", "image_url": {"url": "https://e.com/a.png", "detail": "low"}},
                        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
                    ],
                }
            ]
        },
    ],
)
def test_what_every_vendor_can_be_sent_is_accepted(accepted: dict[str, Any]) -> None:
    assert problems_of(accepted) == []


@pytest.mark.parametrize(
    ("refused", "expected"),
    [
        # OpenAI takes at most 4 stop sequences (and Bedrock's Converse too)
        (chat_input(stop=["a", "b", "c", "d", "e"]), ("invalid_field", "input.stop")),
        (chat_input(temperature=2.5), ("invalid_field", "input.temperature")),
        (chat_input(top_p=-0.1), ("invalid_field", "input.top_p")),
        # a key no lane can honour is refused, not dropped
        (chat_input(logit_bias={"1": 5}), ("unsupported_parameter", "input.logit_bias")),
        # a penalty outside OpenAI's -2 to 2, or beside hosted tools (the Responses API has none)
        (chat_input(frequency_penalty=2.5), ("invalid_field", "input.frequency_penalty")),
        (chat_input(presence_penalty="1"), ("invalid_field", "input.presence_penalty")),
        (
            chat_input(presence_penalty=1, tools=[{"type": "web_search"}]),
            ("unsupported_parameter", "input.presence_penalty"),
        ),
        (chat_input(logprobs=True), ("unsupported_parameter", "input.logprobs")),
        (chat_input(logprobs=0), ("unsupported_parameter", "input.logprobs")),
        (chat_input(n=2), ("unsupported_parameter", "input.n")),
        # parallel_tool_calls is OpenAI's boolean (not null, not 0)
        (chat_input(parallel_tool_calls=None), ("invalid_field", "input.parallel_tool_calls")),
        (chat_input(parallel_tool_calls=0), ("invalid_field", "input.parallel_tool_calls")),
        # a seed wider than Gemini's 32 bits, or beside hosted tools (the Responses API has none)
        (chat_input(seed=2**31), ("invalid_field", "input.seed")),
        (chat_input(seed=True), ("invalid_field", "input.seed")),
        (chat_input(seed=7, tools=[{"type": "web_search"}]), ("unsupported_parameter", "input.seed")),
        # a message name is OpenAI's pattern, a user's or an assistant's only, and not beside
        # hosted tools (neither Anthropic, Bedrock nor OpenAI's Responses API takes one)
        (
            {"messages": [{"role": "user", "content": "x", "name": "Ann Lee"}]},
            ("invalid_field", "input.messages[0].name"),
        ),
        (
            {"messages": [{"role": "user", "content": "x", "name": 7}]},
            ("invalid_field", "input.messages[0].name"),
        ),
        (
            {
                "messages": [
                    {"role": "developer", "content": "x", "name": "ann"},
                    {"role": "user", "content": "y"},
                ]
            },
            ("unsupported_parameter", "input.messages[0].name"),
        ),
        (
            {
                "messages": [{"role": "user", "content": "x", "name": "ann"}],
                "tools": [{"type": "web_search"}],
            },
            ("unsupported_parameter", "input.messages"),
        ),
        # the Responses API, which runs OpenAI's hosted tools, has no stop sequences
        (chat_input(stop="END", tools=[{"type": "web_search"}]), ("unsupported_parameter", "input.stop")),
        (chat_input(stream=True), ("unsupported_parameter", "input.stream")),
        # custom (free-form) tools and unknown tool settings
        (chat_input(tools=[{"type": "custom", "name": "x"}]), ("tool_not_supported", "input.tools[0].type")),
        (
            chat_input(tools=[{"type": "web_search", "search_context_size": "high"}]),
            ("unsupported_parameter", "input.tools[0].search_context_size"),
        ),
        (chat_input(tools=[{"type": "file_search"}]), ("missing_field", "input.tools[0].vector_store_ids")),
        (
            chat_input(tools=[{"type": "function", "function": {"name": "bad name!"}}]),
            ("invalid_field", "input.tools[0]"),
        ),
        (chat_input(tools=[{**WEATHER_FLAT, "extra": 1}]), ("invalid_field", "input.tools[0]")),
        # tool_choice must name a declared function
        (
            chat_input(tools=[WEATHER_FLAT], tool_choice={"type": "function", "name": "other"}),
            ("invalid_field", "input.tool_choice"),
        ),
        (
            chat_input(tools=[WEATHER_FLAT], tool_choice={"type": "allowed_tools"}),
            ("unsupported_parameter", "input.tool_choice"),
        ),
        (chat_input(tool_choice="required"), ("invalid_field", "input.tool_choice")),
        (
            chat_input(tools=[WEATHER_FLAT], tool_choice={"type": "web_search"}),
            ("invalid_field", "input.tool_choice"),
        ),
        # a function named as a vendor names its hosted tool, beside that hosted tool
        (
            chat_input(tools=[{"type": "web_search"}, {**WEATHER_FLAT, "name": "web_search"}]),
            ("invalid_field", "input.tools"),
        ),
        # no vendor takes an empty stop; every vendor wants the user first, each tool call answered next
        (chat_input(stop=["ok", ""]), ("invalid_field", "input.stop")),
        ({"messages": [{"role": "assistant", "content": "Hi"}]}, ("invalid_field", "input.messages")),
        (
            {
                "input": [
                    {"role": "user", "content": "x"},
                    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                    {"role": "user", "content": "y"},
                ]
            },
            ("invalid_field", "input.input[2]"),
        ),
        (
            {
                "input": [
                    {"role": "user", "content": "x"},
                    {"type": "function_call_output", "call_id": "c9", "output": "1"},
                ]
            },
            ("invalid_field", "input.input[1]"),
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                        ],
                    },
                ]
            },
            ("invalid_field", "input.messages"),
        ),
        # Responses items the vendors do not all take
        (
            {"input": [{"type": "reasoning", "summary": []}]},
            ("unsupported_parameter", "input.input[0].type"),
        ),
        ({"input": [{"type": "function_call", "name": "f"}]}, ("invalid_field", "input.input[0]")),
        # Anthropic, Gemini and Bedrock take a call's arguments as an object
        (
            {"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "[1]"}]},
            ("invalid_field", "input.input[0]"),
        ),
        # content parts
        (
            {"messages": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
            ("unsupported_parameter", "input.messages[0].content[0].type"),
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]},
            ("invalid_field", "input.messages[0].content[0]"),
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}]}
                ]
            },
            ("invalid_field", "input.messages[0].content[0]"),
        ),
        ({"messages": [{"role": "function", "content": "x"}]}, ("invalid_field", "input.messages[0].role")),
        (
            {"messages": [{"role": "user", "content": "x", "audio": {}}]},
            ("unsupported_parameter", "input.messages[0].audio"),
        ),
        (
            {"messages": [{"role": "tool", "content": "x"}]},
            ("missing_field", "input.messages[0].tool_call_id"),
        ),
        ({"messages": [{"role": "user", "content": None}]}, ("invalid_field", "input.messages[0].content")),
        # Gemini and Anthropic refuse blank text; Gemini a function name led by a digit
        ({"messages": [{"role": "user", "content": " "}]}, ("invalid_field", "input.messages[0].content")),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]},
            ("invalid_field", "input.messages[0].content[0].text"),
        ),
        (chat_input(tools=[{**WEATHER_FLAT, "name": "2fast"}]), ("invalid_field", "input.tools[0]")),
        ({"messages": [{"role": "system", "content": "Be brief."}]}, ("invalid_field", "input.messages")),
        (
            chat_input(
                response_format={"type": "json_schema", "json_schema": {"schema": {"type": "object"}}}
            ),
            ("json_schema_invalid", "input.response_format.json_schema.name"),
        ),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]}]},
            ("invalid_field", "input.messages[0].tool_calls[0]"),
        ),
        ({"messages": [{"role": "user", "content": "x"}], "input": "y"}, ("invalid_field", "input.input")),
        # each found by holding the published item schema to this reader (test_body_schemas.py)
        ({"messages": "hi"}, ("invalid_field", "input.messages")),  # only Responses' input is text
        (chat_input(text="json"), ("invalid_field", "input.text")),  # was dropped unread
        (chat_input(n=True), ("unsupported_parameter", "input.n")),  # true == 1 in Python only
        (chat_input(stream=0), ("unsupported_parameter", "input.stream")),
        (chat_input(max_output_tokens=5, max_tokens="many"), ("invalid_field", "input.max_tokens")),
        # accepted and not sent, but only with a value of OpenAI's type (was any value)
        (chat_input(store="yes"), ("invalid_field", "input.store")),
        (chat_input(user=123), ("invalid_field", "input.user")),
        (chat_input(model=["gpt-4o-mini"]), ("invalid_field", "input.model")),
        (chat_input(metadata=5), ("invalid_field", "input.metadata")),
        (chat_input(metadata={"a": {"b": 1}}), ("invalid_field", "input.metadata")),
        (chat_input(metadata={"n": 1}), ("invalid_field", "input.metadata")),
        (chat_input(metadata={"k" * 65: "v"}), ("invalid_field", "input.metadata")),
        (chat_input(metadata={"k": "v" * 513}), ("invalid_field", "input.metadata")),
        (chat_input(metadata={f"k{i}": "v" for i in range(17)}), ("invalid_field", "input.metadata")),
    ],
)
def test_what_some_vendor_would_refuse_or_lose_is_refused_at_preflight(
    refused: dict[str, Any], expected: tuple[str, str]
) -> None:
    assert expected in problems_of(refused)


@pytest.mark.parametrize(
    "data",
    [
        "iVBO\n Rw0KGgo=",  # a line break and a space (MIME-wrapped)
        "====",  # padding alone
        "abc",  # cut short of a whole group, unpadded
        "iVBORw0KGgo=A",  # data after the padding
    ],
)
def test_an_image_whose_data_is_not_padded_base64_is_refused_for_every_lane(data: str) -> None:
    # Anthropic refuses it ("invalid base64 data"), Gemini's adapter cannot decode it: one
    # answer for every lane, here, rather than a failure on some and a pass on others
    part = {"type": "input_image", "image_url": f"data:image/png;base64,{data}"}
    body = {"messages": [{"role": "user", "content": [{"type": "input_text", "text": "what?"}, part]}]}
    assert problems_of(body) == [("invalid_field", "input.messages[0].content[1]")]


PNG_BYTES = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
JPEG_BYTES = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01"
WEBP_BYTES = b"RIFF\x24\x00\x00\x00WEBPVP8 "


@pytest.mark.parametrize(
    ("named", "data", "refused"),
    [
        ("webp", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3", "is not a JPEG, PNG, GIF or WebP image"),
        ("png", b"plain text, not an image", "is not a JPEG, PNG, GIF or WebP image"),
        # an image of another type than its URL names goes (the adapters send its own type)
        ("png", JPEG_BYTES, None),
        ("jpeg", PNG_BYTES, None),
        ("gif", WEBP_BYTES, None),
        ("png", PNG_BYTES, None),
        ("jpeg", JPEG_BYTES, None),
        ("webp", WEBP_BYTES, None),
    ],
)
def test_an_image_whose_data_is_no_image_is_refused(named: str, data: bytes, refused: str | None) -> None:
    # no vendor takes it; one of another image type than named, every lane takes as its own type
    url = f"data:image/{named};base64,{base64.b64encode(data).decode()}"
    part = {"type": "image_url", "image_url": {"url": url}}
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "what?"}, part]}]}
    facts, problems = read_item(item(0, input=body))
    if refused is None:
        assert not problems and facts is not None
    else:
        assert [(p.code, p.field) for p in problems] == [("invalid_field", "input.messages[0].content[1]")]
        assert refused in problems[0].message


@pytest.mark.parametrize(
    ("input_", "expected"),
    [
        ({"input": ""}, ("invalid_field", "input.input")),
        ({"input": ["a", ""]}, ("invalid_field", "input.input")),
        ({"input": ["a"] * 2049}, ("invalid_field", "input.input")),
        ({"input": "a", "dimensions": 0}, ("invalid_field", "input.dimensions")),
        ({"input": "a", "encoding_format": "base64"}, ("unsupported_parameter", "input.encoding_format")),
        ({"input": "a", "truncate": True}, ("unsupported_parameter", "input.truncate")),
        ({"input": "a", "text": "b"}, ("invalid_field", "input.text")),
    ],
)
def test_embeddings_inputs_every_vendor_takes(input_: dict[str, Any], expected: tuple[str, str]) -> None:
    assert expected in problems_of(input_, operation="embeddings")
    assert problems_of({"input": [[1, 2], [3]], "dimensions": 8}, operation="embeddings") == []
    assert problems_of({"input": None, "text": "b"}, operation="embeddings") == []  # null: left out


# -- found by the vendor-contract review: accepted here, refused by a vendor ------------------------
def issues_of(input_: dict[str, Any], *, operation: str = "responses") -> list[tuple[str, str, str]]:
    facts, problems = read_item(item(0, operation=operation, input=input_))
    assert (facts is None) == bool(problems)
    return [(p.category, p.code, p.field) for p in problems]


OUT_SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string"}},
    "required": ["label"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "fmt",
    [
        {"response_format": {"type": "json_object"}},
        {"response_format": {"type": "text"}},
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "out",
                    "description": "A label.",
                    "schema": OUT_SCHEMA,
                    "strict": True,
                },
            }
        },
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "out", "schema": OUT_SCHEMA, "strict": None},
            }
        },
        {
            "text": {
                "format": {
                    "type": "json_schema",
                    "name": "out",
                    "description": "d",
                    "schema": OUT_SCHEMA,
                    "strict": False,
                }
            }
        },
    ],
)
def test_a_structured_output_format_with_openais_keys_is_accepted(fmt: dict[str, Any]) -> None:
    assert issues_of(chat_input(**fmt)) == []


LOOSE = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({**LOOSE, "required": ["a", "b"]}, "schema.additionalProperties must be false"),
        ({**LOOSE, "required": ["a"], "additionalProperties": False}, "schema.required must list every"),
        (  # a nested object too
            {
                "type": "object",
                "properties": {"inner": {"type": "object", "properties": {"x": {"type": "integer"}}}},
                "required": ["inner"],
                "additionalProperties": False,
            },
            "schema.properties.inner.additionalProperties must be false",
        ),
    ],
)
def test_a_strict_schema_outside_the_subset_strict_decoding_takes_is_refused(
    schema: dict[str, Any], reason: str
) -> None:
    # OpenAI refuses such a request (400 "Invalid schema for response_format ..."): so the item
    # is refused here, where it is named, not failed for good on a lane
    as_format = {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "o", "schema": schema, "strict": True},
        }
    }
    assert issues_of(chat_input(**as_format)) == [
        ("json_schema", "json_schema_invalid", "input.response_format.json_schema.schema")
    ]
    problems = read_item(item(0, input=chat_input(**as_format)))[1]
    assert reason in problems[0].message
    function = {"type": "function", "function": {"name": "f", "parameters": schema, "strict": True}}
    assert issues_of(chat_input(tools=[function])) != []
    # not strict: the same schemas are taken as they are
    loose = {"response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": schema}}}
    assert issues_of(chat_input(**loose)) == []
    assert issues_of(chat_input(tools=[{**function, "function": {"name": "f", "parameters": schema}}])) == []


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        # OpenAI's ResponseFormatJsonObject and ResponseFormatText declare only `type`
        (
            {"response_format": {"type": "json_object", "strict": True}},
            ("jsonl_shape", "unsupported_parameter", "input.response_format.strict"),
        ),
        (
            {"response_format": {"type": "text", "schema": OUT_SCHEMA}},
            ("jsonl_shape", "unsupported_parameter", "input.response_format.schema"),
        ),
        # ResponseFormatJsonSchema: {type, json_schema: {name, description?, schema?, strict?}}
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "out", "schema": OUT_SCHEMA},
                    "strict": True,
                }
            },
            ("jsonl_shape", "unsupported_parameter", "input.response_format.strict"),
        ),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "out", "schema": OUT_SCHEMA, "additionalProperties": False},
                }
            },
            (
                "jsonl_shape",
                "unsupported_parameter",
                "input.response_format.json_schema.additionalProperties",
            ),
        ),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "out", "schema": OUT_SCHEMA, "strict": "yes"},
                }
            },
            ("json_schema", "json_schema_invalid", "input.response_format.json_schema.strict"),
        ),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "out", "schema": OUT_SCHEMA, "description": 3},
                }
            },
            ("json_schema", "json_schema_invalid", "input.response_format.json_schema.description"),
        ),
        # the Responses API's text.format, the same keys written flat
        (
            {"text": {"format": {"type": "json_schema", "name": "out", "schema": OUT_SCHEMA, "strict": 1}}},
            ("json_schema", "json_schema_invalid", "input.text.format.strict"),
        ),
        (
            {
                "text": {
                    "format": {"type": "json_schema", "name": "out", "schema": OUT_SCHEMA, "json_schema": {}}
                }
            },
            ("jsonl_shape", "unsupported_parameter", "input.text.format.json_schema"),
        ),
        (
            {"text": {"format": {"type": "json_object", "name": "out"}}},
            ("jsonl_shape", "unsupported_parameter", "input.text.format.name"),
        ),
    ],
)
def test_a_structured_output_format_takes_only_openais_keys_and_types(
    fmt: dict[str, Any], expected: tuple[str, str, str]
) -> None:
    assert issues_of(chat_input(**fmt)) == [expected]


@pytest.mark.parametrize(
    "tools",
    [
        [WEATHER_FLAT, {**WEATHER_FLAT, "description": "again"}],
        [WEATHER_CHAT, WEATHER_FLAT],  # the same name in either dialect
    ],
)
def test_a_function_name_is_declared_once(tools: list[dict[str, Any]]) -> None:
    # Anthropic, Bedrock and Gemini refuse a tool name declared twice
    assert issues_of(chat_input(tools=tools)) == [("jsonl_shape", "invalid_field", "input.tools[1]")]
    assert issues_of(chat_input(tools=[WEATHER_FLAT, {**WEATHER_FLAT, "name": "get_time"}])) == []


@pytest.mark.parametrize(
    "mixed",
    [["hello", 5], ["hello", [1, 2]], [5, [1, 2]], [[1, 2], "hello"], [[1], 5], ["hello", 5, [1, 2]]],
)
def test_an_embeddings_list_holds_one_kind_of_input(mixed: list[Any]) -> None:
    # CreateEmbeddingRequest.input: a string, [string], [integer] or [[integer]]
    assert issues_of({"input": mixed}, operation="embeddings") == [
        ("jsonl_shape", "invalid_field", "input.input")
    ]
    for one_kind in (["hello", "world"], [5, 6], [[1, 2], [3]]):
        assert issues_of({"input": one_kind}, operation="embeddings") == []
    ids, arrays = ({"input": [5, 6, 7]}, {"input": [[5, 6], [7]]})  # one token per id either way
    assert facts_of(item(0, operation="embeddings", input=ids)).prompt_tokens == (
        facts_of(item(0, operation="embeddings", input=arrays)).prompt_tokens
    )


TOOL_HISTORY = [
    {
        "messages": [
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ]
    },
    {
        "input": [
            {"role": "user", "content": "Weather?"},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ]
    },
]


@pytest.mark.parametrize("history", TOOL_HISTORY)
def test_tool_call_history_needs_tool_calling_even_with_no_tools_declared(history: dict[str, Any]) -> None:
    # Bedrock's Llama batch prompt (a lane without tool_calling) has no place for tool turns
    assert facts_of(item(0, input=history)).capabilities == frozenset({"tool_calling"})
    assert facts_of(item(0, input={**history, "tools": [WEATHER_FLAT]})).capabilities == frozenset(
        {"tool_calling"}
    )
    # turns that are not plain {role, content} but hold no tool call need nothing
    plain = {
        "input": [
            {"type": "message", "role": "user", "content": "Hi"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello"}]},
            {"type": "message", "role": "user", "content": "Weather?"},
        ]
    }
    assert facts_of(item(0, input=plain)).capabilities == frozenset()


# -- an answer sent back as the SDK has it (ChatCompletionMessage): docs/routing.md, "Item input"
_USER = {"role": "user", "content": "hi"}


def _after_answer(answer: dict[str, Any]) -> dict[str, Any]:
    return item(0, input={"messages": [_USER, {"role": "assistant", **answer}, _USER]})


@pytest.mark.parametrize(
    "answer",
    [
        {"content": "Hello", "refusal": None},
        {"content": "Hello", "refusal": None, "annotations": None, "audio": None, "function_call": None},
        {
            "content": "Hello",
            "annotations": [{"type": "url_citation", "url_citation": {"url": "https://a.b"}}],
        },
        {"content": None, "refusal": "I can't help with that."},
        {"content": "", "refusal": "I can't help with that."},
        {"content": "Partly", "refusal": "I can't help with the rest."},
    ],
)
def test_a_batch_item_takes_an_answer_as_the_sdk_sends_it_back(answer: dict[str, Any]) -> None:
    facts, problems = read_item(_after_answer(answer))
    assert not problems and facts is not None


@pytest.mark.parametrize(
    ("answer", "field", "message"),
    [
        ({"content": None, "refusal": None}, "content", "content must be some text"),
        ({"content": None, "refusal": " "}, "content", "content must be some text"),
        ({"content": "Hi", "refusal": 3}, "refusal", "refusal must be some text or null."),
        ({"content": "Hi", "annotations": {}}, "annotations", "annotations must be a list or null."),
        ({"content": "Hi", "audio": {"id": "audio_1"}}, "audio", "audio must be null"),
        ({"content": "Hi", "function_call": {"name": "f", "arguments": "{}"}}, "function_call", "tool_calls"),
        ({"content": "Hi", "name": "the bot"}, "name", "name must be 1-64 letters, digits, _ or -"),
        (
            {"content": "Hi", "tool_call_id": "c1"},
            "tool_call_id",
            "An assistant message does not take 'tool_call_id'.",
        ),
    ],
)
def test_what_no_vendor_can_be_sent_beside_an_answer_is_refused(
    answer: dict[str, Any], field: str, message: str
) -> None:
    _, problems = read_item(_after_answer(answer))
    assert [p.field for p in problems] == [f"input.messages[1].{field}"]
    assert message in problems[0].message


def test_the_article_fits_the_role() -> None:
    _, problems = read_item(
        item(0, input={"messages": [{"role": "system", "content": "x", "name": "ann"}, _USER]})
    )
    assert problems[0].message == "A system message does not take 'name'."
