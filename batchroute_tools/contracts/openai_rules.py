"""OpenAI's rules beyond its OpenAPI document: what the API refuses in a body the document's
schemas accept (docs/emulators.md, "OpenAI: what the schemas do not say").

The document describes each of these in prose only; the API answers them with 400
`invalid_request_error`:

- JSON mode (`response_format` / `text.format` of type `json_object`) needs the word "json"
  in the messages ("'messages' must contain the word 'json' in some form"; the Responses API
  reads its `input`, not `instructions`);
- a `strict` schema (Structured Outputs, a strict function) is the supported subset: every
  object sets `additionalProperties: false` and lists every property in `required` ("Invalid
  schema for response_format 'x': In context=(), 'additionalProperties' is required to be
  supplied and to be false"); a Responses API function is strict unless it says otherwise;
- a function name matches `^[a-zA-Z0-9_-]{1,64}$`, a message's name `^[a-zA-Z0-9_-]+$` ("Invalid
  'messages[1].name': string does not match pattern");
- a `tool` message answers a call of an earlier assistant message;
- `tool_choice` names a function the body declares;
- `top_logprobs` needs `logprobs: true`;
- Chat Completions' `parallel_tool_calls` needs `tools` ("'parallel_tool_calls' is only
  allowed when 'tools' are specified");
- an embeddings `input` holds no empty string.

`rule_violations(operation, body)` is [] for a body that keeps them, else each as a
`Violation` (`param` in OpenAI's spelling); `contracts/openai.py` checks them after the
schemas, so the emulator refuses and the adapters' contract tests catch the same bodies.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

FUNCTION_NAME: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MESSAGE_NAME: Final = re.compile(r"^[a-zA-Z0-9_-]+$")
_SUBSCHEMA_MAPS: Final = ("properties", "$defs", "definitions")
_SUBSCHEMA_LISTS: Final = ("anyOf", "oneOf", "allOf", "prefixItems")


@dataclass(frozen=True)
class Violation:
    param: str  # where, as OpenAI writes it: `messages[0].content`; "" for the body itself
    reason: str
    # What kind of violation, as OpenAI's error `code` says it: unknown_parameter,
    # missing_required_parameter, invalid_type or invalid_value.
    code: str = "invalid_value"

    def __str__(self) -> str:
        return f"{self.param or '(body)'}: {self.reason}"


def rule_violations(operation: str, body: Any) -> list[Violation]:
    """What OpenAI refuses in `body` beyond its document's schemas (module doc)."""
    check = _RULES.get(operation)
    if check is None or not isinstance(body, Mapping):
        return []
    return list(check(body))


# -- Chat Completions --------------------------------------------------------------------------
def _chat(body: Mapping[str, Any]) -> Iterator[Violation]:
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    fmt = body.get("response_format")
    if _kind(fmt) == "json_object" and not any(_says_json(m.get("content")) for m in messages):
        yield Violation(
            "messages",
            "'messages' must contain the word 'json' in some form, to use 'response_format' of "
            "type 'json_object'.",
        )
    if _kind(fmt) == "json_schema":
        spec = _mapping(_mapping(fmt).get("json_schema"))
        if spec.get("strict") is True:
            yield from _strict(spec.get("schema"), "response_format", f"response_format '{spec.get('name')}'")
    functions = []
    for index, tool in enumerate(body.get("tools") or []):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        functions.append(function.get("name"))
        where = f"tools[{index}].function"
        yield from _name(function.get("name"), f"{where}.name")
        if function.get("strict") is True:
            yield from _strict(function.get("parameters"), where, f"function '{function.get('name')}'")
    yield from _tool_answers(messages)
    for index, message in enumerate(messages):
        name = message.get("name")
        if name is not None and not (isinstance(name, str) and MESSAGE_NAME.fullmatch(name)):
            yield Violation(
                f"messages[{index}].name",
                f"Invalid 'messages[{index}].name': string does not match pattern. Expected a string "
                "that matches the pattern '^[a-zA-Z0-9_-]+$'.",
            )
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        yield from _declared(choice["function"].get("name"), functions)
    if body.get("top_logprobs") is not None and body.get("logprobs") is not True:
        yield Violation("top_logprobs", "Invalid value for 'top_logprobs': 'logprobs' must be set to true.")
    if "parallel_tool_calls" in body and not body.get("tools"):
        yield Violation(
            "parallel_tool_calls",
            "Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed when "
            "'tools' are specified.",
        )


def _tool_answers(messages: list[Mapping[str, Any]]) -> Iterator[Violation]:
    called: set[str] = set()
    for index, message in enumerate(messages):
        for call in message.get("tool_calls") or []:
            if isinstance(call, Mapping):
                called.add(str(call.get("id")))
        if message.get("role") == "tool" and message.get("tool_call_id") not in called:
            yield Violation(
                f"messages.[{index}].role",
                "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
            )


# -- the Responses API -------------------------------------------------------------------------
def _responses(body: Mapping[str, Any]) -> Iterator[Violation]:
    fmt = _mapping(body.get("text")).get("format")
    if _kind(fmt) == "json_object" and not _input_says_json(body.get("input")):
        yield Violation(
            "input",
            "Response input messages must contain the word 'json' in some form to use 'text.format' "
            "of type 'json_object'.",
        )
    strict = _mapping(fmt)
    if _kind(fmt) == "json_schema" and strict.get("strict") is True:
        yield from _strict(strict.get("schema"), "text.format", f"response_format '{strict.get('name')}'")
    functions = []
    for index, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            continue
        functions.append(tool.get("name"))
        yield from _name(tool.get("name"), f"tools[{index}].name")
        if tool.get("strict") is not False:  # a Responses API function is strict by default
            yield from _strict(tool.get("parameters"), f"tools[{index}]", f"function '{tool.get('name')}'")
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        yield from _declared(choice.get("name"), functions)


def _input_says_json(given: object) -> bool:
    if isinstance(given, str):
        return "json" in given.lower()
    items = given if isinstance(given, list) else []
    return any(isinstance(item, Mapping) and _says_json(item.get("content")) for item in items)


# -- embeddings --------------------------------------------------------------------------------
def _embeddings(body: Mapping[str, Any]) -> Iterator[Violation]:
    given = body.get("input")
    texts = given if isinstance(given, list) else [given]
    if any(text == "" for text in texts):
        yield Violation("input", "'$.input' is invalid: an input cannot be an empty string.")


# -- shared ------------------------------------------------------------------------------------
def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _kind(fmt: object) -> object:
    return fmt.get("type") if isinstance(fmt, Mapping) else None


def _says_json(content: object) -> bool:
    if isinstance(content, str):
        return "json" in content.lower()
    parts = content if isinstance(content, list) else []
    return any(isinstance(p, Mapping) and "json" in str(p.get("text", "")).lower() for p in parts)


def _name(name: object, param: str) -> Iterator[Violation]:
    if not isinstance(name, str) or not FUNCTION_NAME.match(name):
        yield Violation(
            param,
            "Invalid 'name': string does not match pattern. Expected a string that matches the "
            "pattern '^[a-zA-Z0-9_-]+$' (at most 64 characters).",
        )


def _declared(name: object, functions: list[object]) -> Iterator[Violation]:
    if name not in functions:
        yield Violation(
            "tool_choice", f"Invalid value for 'tool_choice': no function named '{name}' in 'tools'."
        )


def _strict(schema: object, param: str, subject: str) -> Iterator[Violation]:
    """The first place `schema` leaves Structured Outputs' supported subset, as OpenAI says it."""
    for context, node in _objects(schema, ()):
        properties = _mapping(node.get("properties"))
        problem = None
        if node.get("additionalProperties") is not False:
            problem = "'additionalProperties' is required to be supplied and to be false"
        else:
            given = node.get("required")
            required = given if isinstance(given, list) else []
            missing = [key for key in properties if key not in required]
            if missing:
                problem = (
                    "'required' is required to be supplied and to be an array including every key "
                    f"in properties. Missing '{missing[0]}'"
                )
        if problem is not None:
            yield Violation(param, f"Invalid schema for {subject}: In context={context!r}, {problem}.")
            return


def _objects(node: object, context: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Mapping[str, Any]]]:
    """Every object schema in `node`, with where it stands (OpenAI's `context`)."""
    if not isinstance(node, Mapping):
        return
    if node.get("type") == "object" or "properties" in node:
        yield context, node
    for keyword in _SUBSCHEMA_MAPS:
        children = node.get(keyword)
        for key, child in children.items() if isinstance(children, Mapping) else ():
            yield from _objects(child, (*context, keyword, str(key)))
    for keyword in _SUBSCHEMA_LISTS:
        children = node.get(keyword)
        for index, child in enumerate(children if isinstance(children, list) else []):
            yield from _objects(child, (*context, keyword, str(index)))
    if isinstance(node.get("items"), Mapping):
        yield from _objects(node["items"], (*context, "items"))


_RULES: Final[dict[str, Callable[[Mapping[str, Any]], Iterator[Violation]]]] = {
    "chat.completions": _chat,
    "responses": _responses,
    "embeddings": _embeddings,
}
