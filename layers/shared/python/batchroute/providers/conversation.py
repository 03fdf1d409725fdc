"""An item's chat input in one normal form, for every vendor transform to start from.

Items come in two chat dialects (domain/routing/items.py): chat-completions (`messages`, with
`system` / `instructions` beside them) and the Responses API (`input`: a string or a list
of input items). `conversation(input)` turns either into a `Conversation`:

- `system`: the system and developer text, joined;
- `messages`: chat-completions messages (roles `user`, `assistant`, `tool`; no system
  role) whose content is a string or a list of `text` / `image_url` parts. An assistant's
  tool calls are `tool_calls: [{id, type: "function", function: {name, arguments}}]` (the
  Responses API's `function_call` items become them) and a tool's answer is a `tool`
  message with `tool_call_id` (from a `function_call_output` item). An assistant's `refusal`
  (as the SDK sends an answer back) is its text; `annotations` and null `audio` /
  `function_call` are left out, as every other key the preflight accepts and no vendor takes;
- `functions`: the function tools, whichever dialect declared them;
- `hosted_tools`: the hosted tools the item uses, by the service's own names
  (`web_search`, `python_execution`, `file_search`, ...: domain/catalog/catalog.py `HostedTool`),
  with the settings the item gave them; none under `tool_choice: none` (no tool may run, and
  routing needs none: domain/routing/items.py);
- `tool_choice`: `ToolChoice` (auto, none, required, one function, one hosted tool);
- `serial_tools`: at most one tool call an answer (`parallel_tool_calls: false` beside tools
  that may run; without any, or under `tool_choice: none`, it constrains nothing: False);
- `options`: the sampling options (temperature, top_p, seed; `stop` as a list);
- `response_format`: a structured-output request in chat-completions form.

The preflight (domain/routing/items.py `read_item`) accepts only what this form can say, so a
transform never meets an input it would have to drop. Pure: no I/O, no vendor names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

from batchroute.domain.routing.images import data_image_type
from batchroute.domain.routing.items import PENALTY_KEYS, SCHEMA_FORMAT_KEYS, hosted_tool_name

# Sampling options carried over to every vendor that has them (each transform maps names).
# OpenAI's penalties: 0, their default, changes nothing and is not carried (items send it unasked).
OPTIONS: Final = ("temperature", "top_p", "stop", "seed", *PENALTY_KEYS)

FUNCTION_TOOL_TYPE: Final = "function"
TEXT_PARTS: Final = frozenset({"text", "input_text", "output_text"})
IMAGE_PARTS: Final = frozenset({"image_url", "input_image"})
# JSON mode without a schema (`json_object`) said in words: Anthropic and Bedrock have no JSON
# mode, so it joins their system prompt; OpenAI refuses JSON mode unless a message says "json",
# so it joins the system prompt there when none does.
JSON_OBJECT_INSTRUCTION: Final = "Answer with one valid JSON object and nothing else."


@dataclass(frozen=True)
class FunctionTool:
    name: str
    description: str | None = None
    parameters: Mapping[str, Any] | None = None  # a JSON Schema
    strict: bool | None = None

    def chat(self) -> dict[str, Any]:
        """As Chat Completions declares it: `{type: function, function: {...}}`."""
        function: dict[str, Any] = {"name": self.name}
        if self.description is not None:
            function["description"] = self.description
        if self.parameters is not None:
            function["parameters"] = dict(self.parameters)
        if self.strict is not None:
            function["strict"] = self.strict
        return {"type": "function", "function": function}


@dataclass(frozen=True)
class HostedToolUse:
    name: str  # the service's hosted tool name (domain/catalog/catalog.py HostedTool)
    config: Mapping[str, Any] = field(default_factory=dict)  # the item's settings, `type` left out


@dataclass(frozen=True)
class ToolChoice:
    mode: Literal["auto", "none", "required", "function", "hosted"]
    name: str | None = None  # the function's name, or the hosted tool's service name

    def chat(self) -> str | dict[str, Any]:
        """As Chat Completions writes it (a hosted choice has no chat form: "required")."""
        if self.mode == "function":
            return {"type": "function", "function": {"name": self.name}}
        if self.mode == "hosted":
            return "required"
        return self.mode


@dataclass(frozen=True)
class Conversation:
    system: str | None
    messages: tuple[dict[str, Any], ...]  # chat-completions messages (no system role)
    options: dict[str, Any] = field(default_factory=dict)
    # A structured-output request as chat-completions writes it: {"type": "json_schema",
    # "json_schema": {...}} or {"type": "json_object"}; None for free text.
    response_format: dict[str, Any] | None = None
    functions: tuple[FunctionTool, ...] = ()
    hosted_tools: tuple[HostedToolUse, ...] = ()
    tool_choice: ToolChoice | None = None
    serial_tools: bool = False

    def chat_tools(self) -> list[dict[str, Any]]:
        """The function tools as Chat Completions declares them."""
        return [f.chat() for f in self.functions]

    @property
    def asks_json_object(self) -> bool:
        """JSON mode without a schema (`response_format: {type: json_object}`)."""
        return self.response_format is not None and self.response_format.get("type") == "json_object"

    def says_json(self, *, system: bool = True) -> bool:
        """Whether a message's text (or, with `system`, the system prompt) says "json", in any case."""
        texts = [self.system or "" if system else "", *(plain_text(m.get("content")) for m in self.messages)]
        return any("json" in text.lower() for text in texts)


def conversation(payload: Mapping[str, Any]) -> Conversation:
    """The normal form of a `responses` / `vision` item's input."""
    system_parts: list[str] = []
    for key in ("system", "instructions"):
        value = payload.get(key)
        if isinstance(value, str) and value:
            system_parts.append(value)
    turns: list[dict[str, Any]] = []
    raw = payload.get("messages")
    if raw is None:
        raw = payload.get("input")
    if isinstance(raw, str):
        raw = [{"role": "user", "content": raw}]
    for turn in raw if isinstance(raw, list) else []:
        if not isinstance(turn, Mapping):
            continue
        kind = turn.get("type")
        if kind == "function_call":
            _add_call(turns, turn)
            continue
        if kind == "function_call_output":
            output = turn.get("output")
            turns.append(
                {
                    "role": "tool",
                    "tool_call_id": str(turn.get("call_id") or ""),
                    "content": output if isinstance(output, str) else _text_of(_content(output)),
                }
            )
            continue
        role = str(turn.get("role") or "user")
        content = _content(turn.get("content"))
        if role in ("system", "developer"):
            system_parts.append(_text_of(content))
            continue
        turns.append(_chat_message(turn, role, content))
    functions, hosted = _tools(payload.get("tools"))
    choice = _tool_choice(payload.get("tool_choice"))
    if choice is not None and choice.mode == "none":
        hosted = ()  # none of them may run: no vendor is sent one (routing needs none either)
    options = {key: payload[key] for key in OPTIONS if payload.get(key) is not None}
    for penalty in PENALTY_KEYS:
        if options.get(penalty) == 0:
            del options[penalty]
    if isinstance(options.get("stop"), str):
        options["stop"] = [options["stop"]]
    return Conversation(
        system="\n\n".join(p for p in system_parts if p) or None,
        messages=tuple(turns),
        options=options,
        response_format=_response_format(payload),
        functions=functions,
        hosted_tools=hosted,
        tool_choice=choice,
        serial_tools=payload.get("parallel_tool_calls") is False
        and bool(functions or hosted)
        and (choice is None or choice.mode != "none"),
    )


def _chat_message(turn: Mapping[str, Any], role: str, content: str | list[dict[str, Any]]) -> dict[str, Any]:
    """A user, assistant or tool turn in chat-completions form."""
    refusal = turn.get("refusal")
    if role == "assistant" and isinstance(refusal, str) and refusal.strip():
        # No vendor takes a prior refusal as such (OpenAI's own `refusal` beside): what the
        # model said is the turn's text, after its content if it has some.
        content = _with_text(content, refusal)
    message: dict[str, Any] = {"role": role, "content": content}
    if role == "tool":
        message["tool_call_id"] = str(turn.get("tool_call_id") or "")
        message["content"] = content if isinstance(content, str) else _text_of(content)
    if role == "assistant" and isinstance(turn.get("tool_calls"), list):
        message["tool_calls"] = [_chat_call(c) for c in turn["tool_calls"] if isinstance(c, Mapping)]
        if not content:
            message["content"] = None
    if isinstance(turn.get("name"), str) and role in ("user", "assistant"):
        message["name"] = turn["name"]
    return message


_Part = TypeVar("_Part")


def add_turn(turns: list[tuple[str, list[_Part]]], role: str, parts: list[_Part]) -> None:
    """Append a (role, parts) turn, merged into the last one when it has the same role: the
    vendors that want user and assistant turns to alternate (Anthropic, Bedrock). A turn with
    no parts adds nothing."""
    if not parts:
        return
    if turns and turns[-1][0] == role:
        turns[-1][1].extend(parts)
    else:
        turns.append((role, parts))


def plain_text(content: str | list[dict[str, Any]] | None) -> str:
    """The text of a message's content (image parts left out)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in content if part.get("type") == "text")


def _with_text(content: str | list[dict[str, Any]], text: str) -> str | list[dict[str, Any]]:
    if isinstance(content, list):
        return [*content, {"type": "text", "text": text}] if content else text
    return f"{content}\n\n{text}" if content.strip() else text


def _text_of(content: str | list[dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return " ".join(p.get("text", "") for p in content if "text" in p)


def _add_call(turns: list[dict[str, Any]], item: Mapping[str, Any]) -> None:
    """A Responses `function_call` item as a chat tool call; consecutive calls share one
    assistant message, as Chat Completions writes parallel calls."""
    call = {
        "id": str(item.get("call_id") or item.get("id") or ""),
        "type": "function",
        "function": {"name": str(item.get("name") or ""), "arguments": _arguments(item.get("arguments"))},
    }
    last = turns[-1] if turns else None
    if last is not None and last.get("role") == "assistant" and "tool_calls" in last:
        last["tool_calls"].append(call)
        return
    turns.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _chat_call(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function")
    function = function if isinstance(function, Mapping) else {}
    return {
        **call,  # vendor extras ride along (Gemini's thought signature); each transform picks
        "id": str(call.get("id") or ""),
        "type": "function",
        "function": {
            "name": str(function.get("name") or ""),
            "arguments": _arguments(function.get("arguments")),
        },
    }


def _arguments(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value if value is not None else {}, separators=(",", ":"))


def _tools(value: object) -> tuple[tuple[FunctionTool, ...], tuple[HostedToolUse, ...]]:
    functions: list[FunctionTool] = []
    hosted: list[HostedToolUse] = []
    for tool in value if isinstance(value, list) else []:
        if not isinstance(tool, Mapping):
            continue
        kind = str(tool.get("type") or "")
        if kind == FUNCTION_TOOL_TYPE:
            nested = tool.get("function")
            spec = nested if isinstance(nested, Mapping) else tool  # chat nests, Responses is flat
            parameters = spec.get("parameters")
            strict = spec.get("strict")
            description = spec.get("description")
            functions.append(
                FunctionTool(
                    name=str(spec.get("name") or ""),
                    description=description if isinstance(description, str) else None,
                    parameters=parameters if isinstance(parameters, Mapping) else None,
                    strict=strict if isinstance(strict, bool) else None,
                )
            )
            continue
        name = hosted_tool_name(kind)
        if name is not None and all(h.name != name for h in hosted):
            hosted.append(HostedToolUse(name, {k: v for k, v in tool.items() if k != "type"}))
    return tuple(functions), tuple(hosted)


def _tool_choice(value: object) -> ToolChoice | None:
    if value in ("auto", "none", "required"):
        return ToolChoice(value)
    if not isinstance(value, Mapping):
        return None
    kind = str(value.get("type") or "")
    if kind in ("auto", "none", "required"):
        return ToolChoice(kind)  # type: ignore[arg-type]
    if kind == FUNCTION_TOOL_TYPE:
        nested = value.get("function")
        spec = nested if isinstance(nested, Mapping) else value
        return ToolChoice("function", str(spec.get("name") or ""))
    name = hosted_tool_name(kind)
    return ToolChoice("hosted", name) if name is not None else None


def _content(value: object) -> str | list[dict[str, Any]]:
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return "" if value is None else str(value)
    parts: list[dict[str, Any]] = []
    for part in value:
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
            continue
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in TEXT_PARTS:
            parts.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind == "refusal":
            parts.append({"type": "text", "text": str(part.get("refusal", ""))})
        elif kind in IMAGE_PARTS:
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            detail = image.get("detail") if isinstance(image, Mapping) else part.get("detail")
            parts.append(
                {
                    "type": "image_url",
                    "image_url": {"url": str(url), **({"detail": detail} if detail else {})},
                }
            )
    return parts


def _response_format(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The structured-output request, rebuilt from the keys OpenAI's contract declares (the
    preflight refuses any other: domain/routing/items.py); a null is a key left out."""
    given = payload.get("response_format")
    if isinstance(given, Mapping) and given.get("type") == "json_schema":
        return {"type": "json_schema", "json_schema": _schema_format(given.get("json_schema"))}
    if isinstance(given, Mapping) and given.get("type") == "json_object":
        return {"type": "json_object"}
    text = payload.get("text")  # the Responses API's `text.format`
    fmt = text.get("format") if isinstance(text, Mapping) else None
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        return {"type": "json_schema", "json_schema": _schema_format(fmt)}
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_object":
        return {"type": "json_object"}
    return None


def _schema_format(spec: object) -> dict[str, Any]:
    if not isinstance(spec, Mapping):
        return {}
    return {key: spec[key] for key in SCHEMA_FORMAT_KEYS if spec.get(key) is not None}


def data_url_parts(url: str) -> tuple[str, str] | None:
    """(media type, base64 data) of a `data:` image URL; None for any other URL. The media type
    is the one the bytes are when they tell (a PNG its URL calls image/jpeg is image/png:
    Anthropic and Bedrock refuse an image whose bytes are not its named type), else the URL's."""
    if not url.startswith("data:") or ";base64," not in url:
        return None
    head, data = url[5:].split(";base64,", 1)
    return (data_image_type(url) or head or "image/png"), data
