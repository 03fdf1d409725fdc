"""Hypothesis strategies for batch items across everything the preflight accepts
(domain/routing/items.py `read_item`): both chat dialects (chat-completions `messages`, the
Responses API's `input` with function_call / function_call_output items), every message
role and content part, images by URL, function tools (uniquely named) and tool_choice in
both dialects, hosted tools, tool-call history with or without the tools declared,
structured output (`response_format` and `text.format`, with or without a description and
strict), stop lists, sampling options (temperature, top_p), output limits, and embeddings
inputs (a string, or one kind per list: strings, token ids or token arrays).

Items are built valid by construction; `accepted_items()` still keeps only what
`read_item` accepts, so a strategy that drifts wider than the preflight cannot make the
contract test fail for an item the service would have refused.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from batchroute.domain.routing.items import read_item

# Text without surrogates (JSON can carry them; no vendor wants them).
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=24).filter(
    str.strip
)
# A stop sequence: text, or whitespace alone (`"\n"`), which only lanes with whitespace_stop take.
STOPS = TEXT | st.text(st.sampled_from(" \n\t\r"), min_size=1, max_size=3)
NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,15}", fullmatch=True)
IMAGE_URLS = st.sampled_from(
    [
        "https://example.com/cat.png",
        "https://images.example.org/a/b.jpg?size=large",
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==",
        "data:image/jpeg;base64,/9j/4AAQSkZJRgABAQEASABIAAD/2wBDAP8=",
        # a PNG its URL calls a JPEG: the adapters send image/png (Anthropic, Bedrock check)
        "data:image/jpeg;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==",
        # Gemini cannot be sent these (no type told; a GIF): they need `any_image_type`
        "https://example.com/render?id=3",
        "https://example.com/a.gif",
    ]
)
HOSTED_TOOL_DECLARATIONS = st.sampled_from(
    [
        {"type": "web_search"},
        {"type": "web_search_preview"},
        {"type": "web_search_preview_2025_03_11"},
        {"type": "code_interpreter", "container": {"type": "auto"}},
        {"type": "code_interpreter"},
        {"type": "python_execution"},
        {"type": "file_search", "vector_store_ids": ["vs_abc123"]},
    ]
)
SCALARS = st.sampled_from(["string", "integer", "number", "boolean"])


@st.composite
def object_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """Small object schemas, as structured output and function parameters use them."""
    names = draw(st.lists(NAMES, min_size=1, max_size=3, unique=True))
    properties: dict[str, Any] = {}
    for name in names:
        kind = draw(st.sampled_from(["scalar", "enum", "array"]))
        if kind == "scalar":
            properties[name] = {"type": draw(SCALARS)}
        elif kind == "enum":
            properties[name] = {"type": "string", "enum": draw(st.lists(NAMES, min_size=1, max_size=3))}
        else:
            properties[name] = {"type": "array", "items": {"type": draw(SCALARS)}}
        if draw(st.booleans()):
            properties[name]["description"] = draw(TEXT)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if draw(st.booleans()):
        schema["required"] = names
        schema["additionalProperties"] = False
    return schema


@st.composite
def function_tools(draw: st.DrawFn, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name}
    if draw(st.booleans()):
        spec["description"] = draw(TEXT)
    if draw(st.booleans()):
        spec["parameters"] = draw(object_schemas())
    if draw(st.booleans()):
        spec["strict"] = draw(st.booleans())
    if draw(st.booleans()):
        return {"type": "function", "function": spec}  # chat-completions
    return {"type": "function", **spec}  # Responses API


def text_parts(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    return TEXT.map(lambda text: {"type": kind, "text": text})


@st.composite
def image_parts(draw: st.DrawFn) -> dict[str, Any]:
    url = draw(IMAGE_URLS)
    detail = draw(st.sampled_from([None, "auto", "low", "high"]))
    if draw(st.booleans()):
        image: dict[str, Any] = {"url": url}
        if detail:
            image["detail"] = detail
        return {"type": "image_url", "image_url": image}
    part: dict[str, Any] = {"type": "input_image", "image_url": url}
    if detail:
        part["detail"] = detail
    return part


@st.composite
def user_content(draw: st.DrawFn, images: bool) -> str | list[dict[str, Any]]:
    if not images and draw(st.booleans()):
        return draw(TEXT)
    kinds = st.sampled_from(["text", "input_text"])
    parts = [draw(text_parts(draw(kinds)))]
    if images:
        parts.append(draw(image_parts()))
    parts.extend(draw(st.lists(text_parts("text"), max_size=1)))
    return draw(st.permutations(parts))


def arguments() -> st.SearchStrategy[str]:
    return st.dictionaries(NAMES, st.integers(-5, 5) | TEXT, max_size=2).map(
        lambda args: json.dumps(args, ensure_ascii=False)
    )


@st.composite
def tool_rounds(draw: st.DrawFn, functions: list[str], responses_dialect: bool) -> list[dict[str, Any]]:
    """An assistant's calls of declared functions, then each call's answer."""
    calls = [
        (f"call_{draw(NAMES)}_{index}", draw(st.sampled_from(functions)), draw(arguments()))
        for index in range(draw(st.integers(1, 2)))
    ]
    if responses_dialect:
        turns: list[dict[str, Any]] = [
            {"type": "function_call", "call_id": ident, "name": name, "arguments": args}
            for ident, name, args in calls
        ]
        turns += [
            {"type": "function_call_output", "call_id": ident, "output": draw(TEXT)} for ident, _, _ in calls
        ]
        return turns
    assistant: dict[str, Any] = {
        **draw(sdk_echoes()),
        "role": "assistant",
        "content": draw(st.sampled_from([None, ""])) if draw(st.booleans()) else draw(TEXT),
        "tool_calls": [
            {"id": ident, "type": "function", "function": {"name": name, "arguments": args}}
            for ident, name, args in calls
        ],
    }
    if assistant["content"] is None or assistant["content"] == "":
        del assistant["content"]
        if draw(st.booleans()):
            assistant["content"] = None
    answers = [{"role": "tool", "tool_call_id": ident, "content": draw(TEXT)} for ident, _, _ in calls]
    return [assistant, *answers]


@st.composite
def sdk_echoes(draw: st.DrawFn) -> dict[str, Any]:
    """What the SDK sends back beside an assistant's answer (ChatCompletionMessage, model_dump()):
    a refusal, annotations, null audio and function_call."""
    keys = draw(st.sets(st.sampled_from(["refusal", "annotations", "audio", "function_call"])))
    echo: dict[str, Any] = dict.fromkeys(keys)
    if "refusal" in keys and draw(st.booleans()):
        echo["refusal"] = draw(TEXT)
    if "annotations" in keys and draw(st.booleans()):
        echo["annotations"] = [{"type": "url_citation", "url_citation": {"url": "https://example.com"}}]
    return echo


@st.composite
def conversations(draw: st.DrawFn, *, images: bool, functions: list[str], responses_dialect: bool) -> Any:
    """A user turn first; then maybe an assistant answer and another user turn; maybe a tool
    round (calls of `functions`, declared or not, and their answers); the last turn a user's
    or a tool's."""
    turns: list[dict[str, Any]] = []
    if draw(st.booleans()):
        role = draw(st.sampled_from(["system", "developer"]))
        turns.append({"role": role, "content": draw(TEXT)})
    first: dict[str, Any] = {"role": "user", "content": draw(user_content(images))}
    if responses_dialect and draw(st.booleans()):
        first["type"] = "message"
    turns.append(first)
    if draw(st.booleans()):
        if responses_dialect and draw(st.booleans()):
            turns.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": draw(TEXT)}],
                }
            )
        else:
            answer = {"role": "assistant", "content": draw(TEXT), **draw(sdk_echoes())}
            if draw(st.booleans()):  # a refused answer: no content, its refusal's text
                answer.update(content=draw(st.sampled_from([None, ""])), refusal=draw(TEXT))
            turns.append(answer)
        turns.append({"role": "user", "content": draw(TEXT)})
    if functions and draw(st.booleans()):
        turns.extend(draw(tool_rounds(functions, responses_dialect)))
    if responses_dialect and len(turns) == 1 and isinstance(first["content"], str) and draw(st.booleans()):
        return first["content"]  # a bare string is one user message
    return turns


@st.composite
def output_formats(draw: st.DrawFn, responses_dialect: bool) -> dict[str, Any]:
    kind = draw(st.sampled_from(["json_object", "json_schema"]))
    if kind == "json_object":
        fmt: dict[str, Any] = {"type": "json_object"}
        return {"text": {"format": fmt}} if responses_dialect else {"response_format": fmt}
    spec: dict[str, Any] = {"name": draw(NAMES), "schema": draw(object_schemas())}
    if draw(st.booleans()):
        spec["description"] = draw(TEXT)
    if draw(st.booleans()):
        spec["strict"] = draw(st.booleans() | st.none())
    if responses_dialect:
        return {"text": {"format": {"type": "json_schema", **spec}}}
    return {"response_format": {"type": "json_schema", "json_schema": spec}}


@st.composite
def chat_inputs(draw: st.DrawFn, *, images: bool) -> dict[str, Any]:
    responses_dialect = draw(st.booleans())
    # Tools and images narrow the lanes an item can go to: each in about a third of the
    # items, so the plain ones reach every lane of their model too.
    # Function names are unique: Anthropic, Bedrock and Gemini refuse one declared twice.
    functions = draw(st.lists(NAMES, max_size=2, unique=True)) if draw(st.integers(0, 2)) == 0 else []
    tools: list[dict[str, Any]] = [draw(function_tools(name)) for name in functions]
    hosted = draw(st.lists(HOSTED_TOOL_DECLARATIONS, max_size=2)) if draw(st.integers(0, 2)) == 0 else []
    tools += hosted
    # A conversation may hold calls of functions the item no longer declares (its history):
    # it still needs a lane with tool calling.
    called = functions or (
        draw(st.lists(NAMES, min_size=1, max_size=2, unique=True)) if draw(st.booleans()) else []
    )
    body: dict[str, Any] = {}
    talk = draw(conversations(images=images, functions=called, responses_dialect=responses_dialect))
    body["input" if responses_dialect else "messages"] = talk
    if draw(st.booleans()):
        body[draw(st.sampled_from(["system", "instructions"]))] = draw(TEXT)
    if tools:
        body["tools"] = draw(st.permutations(tools))
        choices: list[Any] = ["auto", "none", "required"]
        for name in functions:
            choices.append({"type": "function", "function": {"name": name}})
            choices.append({"type": "function", "name": name})
        choices += [{"type": h["type"]} for h in hosted]
        if draw(st.booleans()):
            body["tool_choice"] = draw(st.sampled_from(choices))
    if draw(st.booleans()):  # with tools or without (then it constrains nothing and is not sent)
        body["parallel_tool_calls"] = draw(st.booleans())
    if draw(st.booleans()):
        body.update(draw(output_formats(responses_dialect)))
    if not hosted and draw(st.booleans()):  # the Responses API (hosted tools) has no stop
        body["stop"] = draw(STOPS | st.lists(STOPS, min_size=1, max_size=4))
    speakers = [t for t in talk if isinstance(t, dict) and t.get("role") in ("user", "assistant")]
    if not hosted and speakers and draw(st.booleans()):  # nor a message name (OpenAI's pattern)
        draw(st.sampled_from(speakers))["name"] = draw(st.from_regex(r"[a-zA-Z0-9_-]{1,64}", fullmatch=True))
    if not hosted and draw(st.booleans()):  # nor a seed; a seed is Gemini's int32 at most
        body["seed"] = draw(st.integers(-(2**31), 2**31 - 1))
    if not hosted and draw(st.booleans()):  # nor OpenAI's penalties (0, the default, is nothing)
        penalty = draw(st.sampled_from(["frequency_penalty", "presence_penalty"]))
        body[penalty] = draw(st.just(0) | st.floats(-2, 2) | st.integers(-2, 2))
    if draw(st.booleans()):
        body["temperature"] = draw(st.floats(0, 2) | st.integers(0, 2))
    if draw(st.booleans()):
        body["top_p"] = draw(st.floats(0, 1))
    if draw(st.booleans()):
        limit = draw(st.sampled_from(["max_output_tokens", "max_completion_tokens", "max_tokens"]))
        body[limit] = draw(st.integers(16, 4096))
    return body


@st.composite
def embedding_inputs(draw: st.DrawFn) -> dict[str, Any]:
    # One kind per list (OpenAI's CreateEmbeddingRequest.input): a list mixing them is refused.
    value = draw(
        TEXT
        | st.lists(TEXT, min_size=1, max_size=3)
        | st.lists(st.integers(0, 50_000), min_size=1, max_size=4)
        | st.lists(st.lists(st.integers(0, 50_000), min_size=1, max_size=4), min_size=1, max_size=2)
    )
    body: dict[str, Any] = {draw(st.sampled_from(["input", "text"])): value}
    if draw(st.booleans()):
        body["dimensions"] = draw(st.integers(1, 1536))
    return body


@st.composite
def raw_items(draw: st.DrawFn, models: dict[str, list[str]]) -> dict[str, Any]:
    """An item for one of `models` (operation -> catalog model ids)."""
    operation = draw(st.sampled_from(sorted(op for op, ids in models.items() if ids)))
    if operation == "embeddings":
        payload = draw(embedding_inputs())
    else:
        payload = draw(chat_inputs(images=operation == "vision" or draw(st.integers(0, 2)) == 0))
    item: dict[str, Any] = {
        "customer_item_id": draw(NAMES),
        "operation": operation,
        "model": draw(st.sampled_from(models[operation])),
        "input": payload,
    }
    if operation != "embeddings" and draw(st.booleans()):
        item["max_output_tokens"] = draw(st.integers(1, 2048))
    return item


def accepted_items(models: dict[str, list[str]]) -> st.SearchStrategy[dict[str, Any]]:
    return raw_items(models).filter(lambda raw: read_item(raw)[0] is not None)
