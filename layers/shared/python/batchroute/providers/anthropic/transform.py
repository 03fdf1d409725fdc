"""Anthropic's wire format, both ways, as pure functions (no I/O): Messages API request bodies
and Message Batches request lines from a ProviderRequest, and ProviderResults from Anthropic's
`message`, its stream events and its batch results lines (docs/providers.md, Anthropic).

Written against the Messages API of `anthropic-version: 2023-06-01`. The split follows
LiteLLM's: this module only translates, `client.py` does the HTTP; a change of the vendor's
format is a change here, tested by replaying recorded answers (tests/fixtures/vendors/).

Field map, ours (an item's input in its normal form, providers/conversation.py) -> Anthropic.
What Anthropic cannot take is refused with PermanentProviderError `unsupported_parameter`
(or `invalid_item` where no vendor would take it), never dropped:

    provider_model_id                     -> model
    max_output_tokens (0: the lane's)     -> max_tokens (the API requires it)
    system / instructions / system turns  -> system (one string)
    user, assistant turns                 -> messages[{role, content}], consecutive same-role
                                             turns merged into one, tool results first; the
                                             first turn must be a user's (else refused); a
                                             final assistant turn loses trailing whitespace
    tool turn {tool_call_id, content}     -> a user turn's {type: tool_result, tool_use_id, content}
    assistant tool_calls                  -> {type: tool_use, id, name, input: the parsed arguments}
                                             (a call without its result in the next turn, or
                                             a result without its call: invalid_item)
    message `name`                        -> refused (Anthropic has no participant names)
    text part                             -> {type: text, text} (whitespace-only parts dropped)
    image_url part, a data: URL           -> {type: image, source: {type: base64, media_type, data}}
                                             (JPEG, PNG, GIF, WebP; other types refused)
    image_url part, any other URL         -> {type: image, source: {type: url, url}}
    image detail                          -> nothing: Anthropic sizes every image itself
    temperature (0..1), top_p             -> temperature, top_p, when the model takes sampling
                                             (ProviderRequest.sampling); a temperature over 1
                                             (OpenAI's range ends at 2) is sent as 1, the
                                             most varied Anthropic samples
    stop (a string or a list)             -> stop_sequences (whitespace-only ones refused)
    seed                                  -> refused (Anthropic has none)
    tools [{type: function, function}]    -> tools [{name, description, input_schema, strict}]
                                             (an input schema that is not an object: refused)
    hosted tools (web_search,             -> server tools, as catalog/data/hosted_tools.toml
      python_execution)                      declares them (web_search_20250305,
                                             code_execution_20250522), with web search's
                                             filters.allowed_domains -> allowed_domains,
                                             user_location, max_uses, allowed_domains,
                                             blocked_domains; any other setting refused
    tool_choice auto | required | none    -> {type: auto} | {type: any} | {type: none}
                                             (auto / none without tools: left out)
    tool_choice {function: {name}}        -> {type: tool, name} (a declared function only)
    tool_choice a hosted tool             -> {type: tool, name: its server tool's name}
    parallel_tool_calls false (tools)     -> tool_choice.disable_parallel_tool_use: true (the
                                             choice given, else {type: auto})
    a json_schema output format           -> output_config.format {type: json_schema, schema}
    a json_object output format           -> an instruction joining the system prompt (Anthropic
                                             takes a schema or nothing)
    operation embeddings                  -> refused: unsupported_operation
                                             (Anthropic has no embeddings API)

Anthropic -> ours (the normalized output, providers/base.py):

    content text blocks (joined)          -> output.content (server tool blocks,
                                             server_tool_use and *_tool_result, add no text)
    content tool_use blocks               -> output.tool_calls [{id, type: function,
                                             function: {name, arguments: JSON text}}]
    stop_reason max_tokens, or
      model_context_window_exceeded       -> finish_reason length; tool_use -> tool_calls;
                                             refusal -> content_filter; any other -> stop;
                                             pause_turn: no answer, a transient failure
                                             `turn_paused` (the sync client continues the turn
                                             first: continued_body, joined_message)
    a stream's tool_use content_block_start
      and input_json_delta fragments      -> StreamDelta.tool_calls (index: the call's place
                                             among the answer's tool_use blocks)
    usage.input_tokens (+ cache reads
      and writes, when any)               -> usage.prompt_tokens
    usage.cache_read_input_tokens         -> usage.cached_input_tokens
    usage.cache_creation_input_tokens     -> usage.cache_write_input_tokens
    usage.output_tokens                   -> usage.completion_tokens
    usage.server_tool_use                 -> usage.tool_uses by the service's tool name
      .web_search_requests                   (web_search); code execution, which the usage
                                             does not count, by its server_tool_use blocks
    the message itself                    -> raw
    an error's type                       -> ERROR_TYPES: our code, and whether it is transient
    a non-2xx answer                      -> status_error: providers/http.py's mapping, an
                                             account out of credit (402, billing_error, "credit
                                             balance is too low") ProviderUnavailable

Message Batches: a request line is {custom_id, params: the Messages body}; a batch's
processing_status in_progress / canceling -> in_progress, ended -> completed (expired when
every request expired, cancelled when every request was canceled); a results line's
succeeded -> a completed result, errored -> a failed one (transient by ERROR_TYPES), expired
and canceled -> transient failures, so the lane runner resubmits them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from batchroute.domain.routing.items import PENALTY_KEYS
from batchroute.providers import base
from batchroute.providers.conversation import (
    JSON_OBJECT_INSTRUCTION,
    Conversation,
    HostedToolUse,
    ToolChoice,
    add_turn,
    conversation,
    data_url_parts,
)
from batchroute.providers.hosted_tools import runnable, vendor_tool
from batchroute.providers.http import error_for_status, vendor_error_codes, vendor_message

MESSAGES_PATH: Final = "/v1/messages"
BATCHES_PATH: Final = "/v1/messages/batches"
# Our code for an account that cannot serve until a human acts (providers/http.py's, as
# OpenAI's 429 insufficient_quota gives it): the lane runner marks the provider's lanes down.
ACCOUNT_DOWN: Final = "insufficient_quota"
# What a 400 `invalid_request_error` says when the account has no credit left.
NO_CREDIT: Final = "credit balance is too low"
# A server-tool turn the API paused (the web search or code execution loop ran long): the
# answer is not whole. The turn is continued by sending the paused content back
# (`continued_body`), at most this many times per item.
PAUSED: Final = "pause_turn"
MAX_CONTINUATIONS: Final = 3

# Anthropic's error types (an error body's, a stream's `error` event's, an errored batch
# result's `error.type`) -> (our code, transient). Unknown types are permanent.
ERROR_TYPES: Final[dict[str, tuple[str, bool]]] = {
    "invalid_request_error": ("provider_rejected", False),
    "authentication_error": ("provider_auth_failed", False),
    "permission_error": ("provider_auth_failed", False),
    # The account is out of credit: waiting does not clear it, the lane fails over (as a
    # 402 or a 400 "credit balance is too low" does, `status_error`).
    "billing_error": (ACCOUNT_DOWN, True),
    "not_found_error": ("not_found", False),
    "request_too_large": ("provider_rejected", False),
    "rate_limit_error": ("rate_limited", True),
    "api_error": ("provider_5xx", True),
    "timeout_error": ("provider_timeout", True),
    "overloaded_error": ("overloaded", True),
}
_LENGTH_STOPS: Final = frozenset({"max_tokens", "model_context_window_exceeded"})
ADAPTER: Final = "anthropic"  # this adapter's rows of catalog/data/hosted_tools.toml
MAX_TEMPERATURE: Final = 1.0
IMAGE_MEDIA_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
USER_LOCATION_FIELDS: Final = frozenset({"type", "city", "region", "country", "timezone"})
_TOOL_CHOICES: Final[dict[str, str]] = {"auto": "auto", "required": "any", "any": "any", "none": "none"}
# Prompt caching: what marks a breakpoint (at most four per request; the adapter adds one only
# to a body that carries none).
EPHEMERAL: Final = {"type": "ephemeral"}


# -- requests ------------------------------------------------------------------------------
def messages_body(
    request: base.ProviderRequest, *, default_max_tokens: int, stream: bool = False
) -> dict[str, Any]:
    """The Messages API body of a `responses` / `vision` request. `default_max_tokens` (the
    lane's output limit) stands in when the request sets none: Anthropic requires one.
    What Anthropic cannot take is refused (PermanentProviderError), never dropped."""
    if request.operation == "embeddings":
        raise base.PermanentProviderError("Anthropic has no embeddings API", code="unsupported_operation")
    talk = conversation(request.input)
    _refuse_unsayable(talk)
    messages = merged_turns(talk.messages)
    if not messages:
        raise base.PermanentProviderError("the item has no user or assistant message", code="invalid_item")
    limit = request.max_output_tokens if request.max_output_tokens > 0 else default_max_tokens
    body: dict[str, Any] = {"model": request.provider_model_id, "max_tokens": limit, "messages": messages}
    # JSON mode without a schema has no Anthropic form: its instruction joins the system prompt
    json_object = JSON_OBJECT_INSTRUCTION if talk.asks_json_object else None
    system = "\n\n".join(t for t in (talk.system, json_object) if t)
    if system:
        body["system"] = system
    if request.sampling:
        body.update(sampling(talk.options))
    stops = stop_sequences(talk.options.get("stop"))
    if stops:
        body["stop_sequences"] = stops
    tools = [tool(f.chat()) for f in talk.functions] + [server_tool(h) for h in talk.hosted_tools]
    _unique_names(tools)
    if tools:
        body["tools"] = tools
    if talk.tool_choice is not None:
        choice = _choice(talk.tool_choice, tools)
        if choice is not None:
            body["tool_choice"] = choice
    if talk.serial_tools and tools:  # serial_tools: a choice other than none (conversation.py)
        body["tool_choice"] = {**body.get("tool_choice", {"type": "auto"}), "disable_parallel_tool_use": True}
    if talk.response_format is not None and not json_object:
        body["output_config"] = {"format": output_format(talk.response_format)}
    if request.cache_prefix:
        mark_cached_prefix(body)
    if stream:
        body["stream"] = True
    return body


def mark_cached_prefix(body: dict[str, Any]) -> None:
    """`cache_control` on the last block of the item's shared prefix (cache-aware routing,
    docs/routing.md): the last message before the final user turn, else the system prompt,
    else the last tool. Never where the body carries breakpoints of its own, never past
    MAX_CACHE_BREAKPOINTS."""
    if _breakpoints(body):
        return
    messages: list[dict[str, Any]] = body["messages"]
    last_user = max((at for at, m in enumerate(messages) if _asks(m)), default=0)
    if last_user > 0:
        turn = messages[last_user - 1]
        blocks = content_blocks(turn["content"]) if isinstance(turn["content"], str) else turn["content"]
        if blocks:
            blocks[-1] = {**blocks[-1], "cache_control": dict(EPHEMERAL)}
            turn["content"] = blocks
            return
    system = body.get("system")
    if isinstance(system, str) and system:
        body["system"] = [{"type": "text", "text": system, "cache_control": dict(EPHEMERAL)}]
    elif body.get("tools"):
        body["tools"][-1] = {**body["tools"][-1], "cache_control": dict(EPHEMERAL)}


def _asks(message: Mapping[str, Any]) -> bool:
    """A user turn that asks something (not only tool results)."""
    content = message.get("content")
    if message.get("role") != "user":
        return False
    return not isinstance(content, list) or any(b.get("type") != "tool_result" for b in content)


def _breakpoints(body: Mapping[str, Any]) -> int:
    blocks = [*(body.get("tools") or [])]
    system = body.get("system")
    if isinstance(system, list):
        blocks.extend(system)
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            blocks.extend(content)
    return sum(1 for block in blocks if isinstance(block, Mapping) and "cache_control" in block)


def _refuse_unsayable(talk: Conversation) -> None:
    """What the normal form can say and Anthropic cannot: refused, with the reason."""
    for option in ("seed", *PENALTY_KEYS):
        if option in talk.options:
            raise base.PermanentProviderError(
                f"Anthropic has no {option}: an item that sets one cannot run on an Anthropic lane",
                code="unsupported_parameter",
            )
    for message in talk.messages:
        if "name" in message:
            raise base.PermanentProviderError(
                "Anthropic's messages carry no participant name (`name`)", code="unsupported_parameter"
            )


def sampling(options: Mapping[str, Any]) -> dict[str, Any]:
    """temperature and top_p: Anthropic's range is 0 to 1 for both. The preflight takes
    OpenAI's temperatures up to 2; one over 1 is translated to 1, Anthropic's most varied
    sampling (docs/providers.md, Anthropic)."""
    given = {name: options[name] for name in ("temperature", "top_p") if name in options}
    temperature = given.get("temperature")
    if isinstance(temperature, int | float) and temperature > MAX_TEMPERATURE:
        given["temperature"] = MAX_TEMPERATURE
    return given


def batch_request(request: base.ProviderRequest, *, default_max_tokens: int) -> dict[str, Any]:
    """One entry of a Message Batch's `requests`."""
    return {
        "custom_id": request.custom_id,
        "params": messages_body(request, default_max_tokens=default_max_tokens),
    }


def merged_turns(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions turns as Anthropic messages: tool results become user turns, and
    consecutive turns of one role become one turn (the API wants the roles to alternate),
    tool results first in theirs. A turn of a single text block is sent as a plain string;
    a final assistant turn (a prefill) loses its trailing whitespace, which the API refuses.
    A conversation the API cannot take (opening with the assistant, a tool call without its
    result or a result without its call) is refused."""
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for message in messages:
        add_turn(turns, *_turn(message))
    if turns and turns[0][0] != "user":
        raise base.PermanentProviderError(
            "Anthropic wants the conversation to open with a user turn, not the assistant's",
            code="unsupported_parameter",
        )
    for position, (role, blocks) in enumerate(turns):
        if role == "user":
            blocks.sort(key=lambda b: b["type"] != "tool_result")  # stable: results first
        asked = _ids(turns[position - 1][1], "tool_use", "id") if position else set()
        answered = _ids(blocks, "tool_result", "tool_use_id")
        following = turns[position + 1][1] if position + 1 < len(turns) else None
        unanswered = _ids(blocks, "tool_use", "id") - _ids(following or [], "tool_result", "tool_use_id")
        if answered - asked or (following is not None and unanswered):
            raise base.PermanentProviderError(
                "every tool call needs its result in the next turn, and every result a call in the "
                f"turn before: {', '.join(sorted((answered - asked) | unanswered))}",
                code="invalid_item",
            )
    if turns and turns[-1][0] == "assistant":
        _trim_end(turns[-1][1])
    return [{"role": role, "content": _compact(blocks)} for role, blocks in turns if blocks]


def _ids(blocks: list[dict[str, Any]], kind: str, key: str) -> set[str]:
    return {str(b[key]) for b in blocks if b["type"] == kind}


def _trim_end(blocks: list[dict[str, Any]]) -> None:
    """The final assistant turn's last text loses its trailing whitespace (an image after it
    or not); a text left empty goes, and the text before it is the last one."""
    for index in reversed([i for i, block in enumerate(blocks) if block["type"] == "text"]):
        text = str(blocks[index]["text"]).rstrip()
        if text:
            blocks[index] = {**blocks[index], "text": text}
            return
        del blocks[index]


def _turn(message: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    content = message.get("content")
    if message.get("role") == "tool":
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": str(message.get("tool_call_id") or ""),
        }
        inner = content_blocks(content)
        if inner:
            result["content"] = _compact(inner)
        return "user", [result]
    blocks = content_blocks(content)
    if message.get("role") != "assistant":
        return "user", blocks
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        blocks.append(tool_use(_mapping(call)))
    return "assistant", blocks


def content_blocks(content: object) -> list[dict[str, Any]]:
    """A normal-form content (a string, or `text` / `image_url` parts) as Anthropic blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if part.get("type") == "text":
            blocks.extend(content_blocks(str(part.get("text", ""))))
        elif part.get("type") == "image_url":
            blocks.append(image_block(str(part["image_url"]["url"])))
    return blocks


def image_block(url: str) -> dict[str, Any]:
    """An image part as an image block: a `data:` URL inline (base64), any other URL by
    reference. An image part's `detail` has no Anthropic form: Anthropic sizes every image
    itself (docs/providers.md, Anthropic)."""
    inline = data_url_parts(url)
    if inline is None:
        return {"type": "image", "source": {"type": "url", "url": url}}
    media_type, data = inline
    if media_type not in IMAGE_MEDIA_TYPES:
        raise base.PermanentProviderError(
            f"Anthropic takes JPEG, PNG, GIF and WebP images, not {media_type}", code="unsupported_parameter"
        )
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def _compact(blocks: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if len(blocks) == 1 and blocks[0]["type"] == "text":
        return str(blocks[0]["text"])
    return blocks


def tool_use(call: Mapping[str, Any]) -> dict[str, Any]:
    """An assistant's chat-completions tool call as a `tool_use` block."""
    function = _mapping(call.get("function"))
    arguments = function.get("arguments") or "{}"
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise base.PermanentProviderError(
            f"the arguments of tool call {call.get('id')!r} are not a JSON object", code="invalid_item"
        )
    return {
        "type": "tool_use",
        "id": str(call.get("id") or ""),
        "name": str(function.get("name")),
        "input": parsed,
    }


def tool(definition: object) -> dict[str, Any]:
    """A function tool (chat-completions `{type, function: {...}}` or the Responses API's flat
    form) as Anthropic's `{name, description, input_schema}`; any other tool is refused."""
    given = _mapping(definition)
    function = _mapping(given.get("function")) or given
    if given.get("type") != "function" or not function.get("name"):
        raise base.PermanentProviderError(
            f"Anthropic takes function tools only, not {given.get('type')!r}", code="unsupported_parameter"
        )
    schema = function.get("parameters")
    if isinstance(schema, Mapping) and schema.get("type", "object") != "object":
        raise base.PermanentProviderError(
            f"Anthropic's tools take an object as input; {function['name']!r} declares "
            f"{schema.get('type')!r}",
            code="unsupported_parameter",
        )
    mapped: dict[str, Any] = {
        "name": str(function["name"]),
        "input_schema": {"type": "object", **(schema if isinstance(schema, Mapping) else {"properties": {}})},
    }
    if function.get("description"):
        mapped["description"] = str(function["description"])
    if function.get("strict") is True:  # false is Anthropic's default: nothing to say
        mapped["strict"] = True
    return mapped


def server_tool(hosted: HostedToolUse) -> dict[str, Any]:
    """A hosted tool as Anthropic's server tool (catalog/data/hosted_tools.toml), with the
    item's settings translated; a setting Anthropic has no place for is refused."""
    declared = vendor_tool(ADAPTER, hosted.name)
    if declared is None:
        raise base.PermanentProviderError(
            f"Anthropic runs no {hosted.name} tool", code="unsupported_parameter"
        )
    config = dict(hosted.config)
    if hosted.name == "web_search":
        declared.update(_web_search_settings(config))
    elif hosted.name == "python_execution":
        _code_execution_settings(config)
    elif config:
        raise base.PermanentProviderError(
            f"Anthropic's {hosted.name} takes no settings ({', '.join(sorted(config))})",
            code="unsupported_parameter",
        )
    return declared


def _web_search_settings(config: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's web search settings as Anthropic's: `filters.allowed_domains` ->
    `allowed_domains`, `user_location` (approximate) as it is; Anthropic's own `max_uses`,
    `allowed_domains`, `blocked_domains` as they are."""
    settings: dict[str, Any] = {}
    filters = config.pop("filters", None)
    if filters is not None:
        extra = sorted(set(_mapping(filters)) - {"allowed_domains"})
        if not isinstance(filters, Mapping) or extra:
            raise _unsettable("web_search", f"filters {extra or filters!r}")
        if filters.get("allowed_domains") is not None:
            settings["allowed_domains"] = list(filters["allowed_domains"])
    for key in ("allowed_domains", "blocked_domains", "max_uses"):
        if config.get(key) is not None:
            settings[key] = config.pop(key)
        config.pop(key, None)
    for key in ("allowed_domains", "blocked_domains"):
        domains = settings.get(key)
        if domains is not None and not (
            isinstance(domains, list) and all(isinstance(d, str) for d in domains)
        ):
            raise _unsettable("web_search", f"{key} {domains!r} (a list of domains)")
    if "allowed_domains" in settings and "blocked_domains" in settings:
        raise _unsettable("web_search", "allowed_domains with blocked_domains (one or the other)")
    uses = settings.get("max_uses")
    if uses is not None and (isinstance(uses, bool) or not isinstance(uses, int) or uses < 1):
        raise _unsettable("web_search", f"max_uses {uses!r} (a whole number of at least 1)")
    location = config.pop("user_location", None)
    if location is not None:
        location = {k: v for k, v in _mapping(location).items() if v is not None}
        extra = sorted(set(location) - USER_LOCATION_FIELDS)
        strings = all(isinstance(v, str) for v in location.values())
        if location.get("type", "approximate") != "approximate" or extra or not strings:
            raise _unsettable("web_search", f"user_location {extra or location!r}")
        settings["user_location"] = {"type": "approximate", **location}
    if config:
        raise _unsettable("web_search", ", ".join(sorted(config)))
    return settings


def _code_execution_settings(config: dict[str, Any]) -> None:
    """OpenAI's code interpreter runs in a `container`: `{type: auto}` is what Anthropic's
    code execution does anyway; files, a memory limit or a named container it cannot take."""
    container = config.pop("container", None)
    if container is not None and dict(_mapping(container)) != {"type": "auto"}:
        raise _unsettable("python_execution", f"container {container!r}")
    if config:
        raise _unsettable("python_execution", ", ".join(sorted(config)))


def _unsettable(tool_name: str, what: str) -> base.PermanentProviderError:
    return base.PermanentProviderError(
        f"Anthropic's {tool_name} tool has no such setting: {what}", code="unsupported_parameter"
    )


def _unique_names(tools: list[dict[str, Any]]) -> None:
    names = [t["name"] for t in tools]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise base.PermanentProviderError(
            f"Anthropic wants unique tool names; {', '.join(twice)} is declared twice (a function "
            "may not share a server tool's name)",
            code="unsupported_parameter",
        )


def _choice(choice: ToolChoice, tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The item's tool_choice as Anthropic's; a hosted tool is chosen by its server tool's
    name. Without tools, `auto` and `none` say nothing and are left out."""
    if not tools:
        if choice.mode in ("auto", "none"):
            return None
        raise base.PermanentProviderError(
            f"tool_choice {choice.mode!r} without any tool", code="invalid_item"
        )
    if choice.mode == "hosted":
        declared = vendor_tool(ADAPTER, str(choice.name))
        name = str(declared["name"]) if declared else None
        if name is None or all(t["name"] != name for t in tools):
            raise base.PermanentProviderError(
                f"tool_choice names the hosted tool {choice.name!r}, which the item does not declare",
                code="invalid_item",
            )
        return {"type": "tool", "name": name}
    mapped = tool_choice(choice.chat())
    if mapped["type"] == "tool" and all(t["name"] != mapped["name"] for t in tools):
        raise base.PermanentProviderError(
            f"tool_choice names the function {mapped['name']!r}, which the item does not declare",
            code="invalid_item",
        )
    return mapped


def tool_choice(choice: object) -> dict[str, Any]:
    if isinstance(choice, str) and choice in _TOOL_CHOICES:
        return {"type": _TOOL_CHOICES[choice]}
    given = _mapping(choice)
    name = _mapping(given.get("function")).get("name") or given.get("name")
    if given.get("type") == "function" and name:
        return {"type": "tool", "name": str(name)}
    raise base.PermanentProviderError(
        f"tool_choice {choice!r} has no Anthropic form", code="unsupported_parameter"
    )


def stop_sequences(stop: object) -> list[str]:
    """The item's stop strings; Anthropic refuses one without non-whitespace text."""
    values = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    stops = [str(v) for v in values]
    if any(not v.strip() for v in stops):
        raise base.PermanentProviderError(
            "Anthropic's stop sequences must contain non-whitespace text", code="unsupported_parameter"
        )
    return stops


def output_format(response_format: Mapping[str, Any]) -> dict[str, Any]:
    """A structured-output request: Anthropic's structured outputs take a JSON schema
    (`output_config.format`); free-form JSON without a schema has no equivalent."""
    schema = _mapping(response_format.get("json_schema")).get("schema")
    if response_format.get("type") != "json_schema" or not isinstance(schema, Mapping):
        raise base.PermanentProviderError(
            "Anthropic takes structured output as a JSON schema only (json_schema with a schema)",
            code="unsupported_parameter",
        )
    return {"type": "json_schema", "schema": dict(schema)}


# -- answers -------------------------------------------------------------------------------
def finish_reason(stop_reason: object) -> base.FinishReason:
    if stop_reason in _LENGTH_STOPS:
        return "length"
    if stop_reason == "tool_use":
        return "tool_calls"
    return "content_filter" if stop_reason == "refusal" else "stop"


def message_usage(usage: object, content: Iterable[Mapping[str, Any]] = ()) -> base.Usage:
    """Anthropic counts cached input apart from `input_tokens`; all of it was input. Server
    tool calls: as `usage.server_tool_use` bills them (`web_search_requests`), else (code
    execution, billed by container time) as the message's `server_tool_use` blocks count."""
    given = _mapping(usage)
    read = int(given.get("cache_read_input_tokens") or 0)
    written = int(given.get("cache_creation_input_tokens") or 0)
    return base.Usage(
        int(given.get("input_tokens") or 0) + read + written,
        int(given.get("output_tokens") or 0),
        tool_uses(given, content),
        cached_input_tokens=read,
        cache_write_input_tokens=written,
    )


def tool_uses(usage: Mapping[str, Any], content: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, int], ...]:
    """The service's hosted tool name -> how many times the message used it."""
    services = _services()
    counts: dict[str, int] = {}
    billed = _mapping(usage.get("server_tool_use"))
    for key, value in billed.items():
        server = key.removesuffix("_requests")
        if key.endswith("_requests") and server in services:
            counts[services[server]] = int(value or 0)
    for block in content:
        name = str(block.get("name"))
        if block.get("type") == "server_tool_use" and name in services and f"{name}_requests" not in billed:
            counts[services[name]] = counts.get(services[name], 0) + 1
    return tuple(sorted((name, n) for name, n in counts.items() if n > 0))


def _services() -> dict[str, str]:
    """Anthropic's server tool name -> the service's hosted tool name (the hosted tools table)."""
    found: dict[str, str] = {}
    for service in runnable(ADAPTER):
        declared = vendor_tool(ADAPTER, service)
        if declared is not None:
            found[str(declared["name"])] = service
    return found


def message_result(custom_id: str, message: Mapping[str, Any]) -> base.ProviderResult:
    """A `message` as our normalized message; a paused one (stop_reason `pause_turn`) is not
    an answer: a transient failure, `turn_paused`."""
    if message.get("stop_reason") == PAUSED:
        return base.ProviderResult.failure(custom_id, paused_error(), raw=dict(message))
    blocks = [b for b in message.get("content") or [] if isinstance(b, Mapping)]
    output: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "content": "".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text"),
        "finish_reason": finish_reason(message.get("stop_reason")),
    }
    calls = [
        {
            "id": str(b.get("id")),
            "type": "function",
            "function": {"name": str(b.get("name")), "arguments": json.dumps(b.get("input") or {})},
        }
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    if calls:
        output["tool_calls"] = calls
    usage = message_usage(message.get("usage"), blocks)
    return base.ProviderResult(custom_id, "completed", output=output, raw=dict(message), usage=usage)


def paused_error() -> base.ItemError:
    """Why a paused turn is no answer: its server tool loop stopped before the model wrote
    one. Transient: the lane runner tries the item again (or fails it over), and a paused
    turn is never stored, nor billed, as a completed answer."""
    return base.ItemError(
        "turn_paused",
        "Anthropic paused the turn before it ended (stop_reason pause_turn): the answer is incomplete",
        transient=True,
    )


def continued_body(body: Mapping[str, Any], paused: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The body that continues a paused turn, as Anthropic's server tools guide says: the
    same request, its final assistant turn carrying the content of every paused round so
    far, as the API gave it (after the request's own prefill, if it had one); and the code
    execution container the turn ran in, when the API named one."""
    rounds = list(paused)
    blocks = [dict(b) for m in rounds for b in m.get("content") or [] if isinstance(b, Mapping)]
    messages = [dict(m) for m in body["messages"]]
    if messages and messages[-1].get("role") == "assistant":
        given = messages[-1].get("content")
        begun = [{"type": "text", "text": given}] if isinstance(given, str) and given else given or []
        messages[-1] = {**messages[-1], "content": [*begun, *blocks]}
    else:
        messages.append({"role": "assistant", "content": blocks})
    continued = {**body, "messages": messages}
    container = _mapping(rounds[-1].get("container")).get("id") if rounds else None
    if isinstance(container, str) and container:
        continued["container"] = container
    return continued


def joined_message(rounds: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """A turn answered over several rounds (a paused turn and its continuations) as one
    message: the last round's, with every round's content blocks in order and their usage
    added up (each round's input and output tokens and server tool uses were billed)."""
    if len(rounds) == 1:
        return rounds[0]
    content = [b for m in rounds for b in m.get("content") or []]
    usage = summed_usage([_mapping(m.get("usage")) for m in rounds])
    return {**rounds[-1], "content": content, "usage": usage}


def summed_usage(usages: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Usage objects added up: counts summed (nested ones, `server_tool_use` and
    `cache_creation`, too), anything else (`service_tier`) as the last one said."""
    total: dict[str, Any] = {}
    for usage in usages:
        for key, value in usage.items():
            if isinstance(value, int) and not isinstance(value, bool):
                total[key] = int(total.get(key) or 0) + value
            elif isinstance(value, Mapping):
                total[key] = summed_usage([_mapping(total.get(key)), value])
            elif value is not None or key not in total:
                total[key] = value
    return total


def item_error(body: Mapping[str, Any]) -> base.ItemError:
    """Our error for an Anthropic error body, `{type: error, error: {type, message}}`."""
    error = _mapping(body.get("error"))
    kind = str(error.get("type") or "api_error")
    code, transient = ERROR_TYPES.get(kind, (kind, False))
    return base.ItemError(code, f"{kind}: {str(error.get('message') or 'no message')[:300]}", transient)


def stream_error(event: Mapping[str, Any]) -> base.ProviderError:
    """What a stream's `error` event raises: an `overloaded_error` is transient, as over HTTP."""
    error = item_error(event)
    message = f"Anthropic broke off the stream: {error.message}"
    if error.code == ACCOUNT_DOWN:
        return base.ProviderUnavailable(message, code=error.code)
    if error.transient:
        return base.TransientProviderError(message, code=error.code)
    return base.PermanentProviderError(message, code=error.code)


@dataclass
class StreamAccumulator:
    """What a Messages stream has said so far, event by event, and the `message` it adds up
    to. The events, in the order the API sends them: `message_start` (the message with empty
    content, usage.input_tokens), per content block `content_block_start`,
    `content_block_delta`s (`text_delta`, or a tool's `input_json_delta`), `content_block_stop`;
    then `message_delta` (stop_reason, usage.output_tokens so far) and `message_stop`. `ping`
    may come anywhere; an `error` event (`overloaded_error` under load) ends the stream."""

    custom_id: str
    message: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    tool_json: dict[int, list[str]] = field(default_factory=dict)
    done: bool = False
    calls: dict[int, int] = field(default_factory=dict)  # tool_use block index -> tool call index
    fresh: list[base.ToolCallDelta] = field(default_factory=list)  # since the last delta()

    def add(self, event: Mapping[str, Any]) -> str:
        """Take one event's data; the text it adds ("" for none). An `error` event raises."""
        kind = event.get("type")
        index = int(event.get("index") or 0)
        if kind == "message_start":
            self.message = {k: v for k, v in _mapping(event.get("message")).items() if k != "content"}
            self.usage = dict(_mapping(self.message.get("usage")))
        elif kind == "content_block_start":
            block = dict(_mapping(event.get("content_block")))
            self.blocks[index] = block
            if block.get("type") in ("tool_use", "server_tool_use"):
                self.tool_json[index] = []
            if block.get("type") == "tool_use":  # a function call: streamed as OpenAI's
                self.calls[index] = len(self.calls)
                self.fresh.append(
                    base.ToolCallDelta(
                        self.calls[index], str(block.get("id") or ""), str(block.get("name") or "")
                    )
                )
            return str(block.get("text") or "") if block.get("type") == "text" else ""
        elif kind == "content_block_delta":
            return self._delta(index, _mapping(event.get("delta")))
        elif kind == "content_block_stop" and index in self.tool_json:
            text = "".join(self.tool_json.pop(index))
            if index in self.calls and not text:  # no input_json_delta: the input as given
                given_input = self.blocks[index].get("input") or {}
                self.fresh.append(base.ToolCallDelta(self.calls[index], arguments=json.dumps(given_input)))
            given = json_object(text) if text else self.blocks[index].get("input")
            self.blocks[index]["input"] = given or {}  # a tool's input is an object, maybe empty
        elif kind == "message_delta":
            delta = _mapping(event.get("delta"))
            self.message.update({k: delta[k] for k in ("stop_reason", "stop_sequence") if k in delta})
            self.usage.update({k: v for k, v in _mapping(event.get("usage")).items() if v is not None})
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            raise stream_error(event)
        return ""

    def _delta(self, index: int, delta: Mapping[str, Any]) -> str:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        if delta.get("type") == "text_delta":
            text = str(delta.get("text") or "")
            block["text"] = str(block.get("text") or "") + text
            return text
        if delta.get("type") == "input_json_delta":
            piece = str(delta.get("partial_json") or "")
            self.tool_json.setdefault(index, []).append(piece)
            if index in self.calls and piece:
                self.fresh.append(base.ToolCallDelta(self.calls[index], arguments=piece))
        return ""  # thinking, signature and citation deltas add no answer text

    def delta(self, text: str) -> base.StreamDelta | None:
        """What the last event adds to the answer (None for nothing)."""
        return base.stream_delta(text, self.fresh, usage=self.usage_so_far())

    def usage_so_far(self) -> base.Usage | None:
        """The usage `message_start` and the `message_delta`s reported so far (the input and
        its prompt-cache split come first); None before any."""
        return message_usage(self.usage) if self.usage else None

    def result(self) -> base.ProviderResult:
        body = {
            **self.message,
            "content": [self.blocks[i] for i in sorted(self.blocks)],
            "usage": dict(self.usage),
        }
        return message_result(self.custom_id, body)


def json_object(text: str) -> dict[str, Any] | None:
    """A JSON object's text parsed (a tool's input, a results line); None for anything else."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def event_data(data: str) -> dict[str, Any]:
    """One stream event's JSON data; an event that is not JSON is a broken answer."""
    try:
        parsed = json.loads(data)
    except ValueError as exc:
        raise base.TransientProviderError(
            "Anthropic sent a stream event that is not JSON", code="provider_bad_response"
        ) from exc
    return parsed if isinstance(parsed, dict) else {}


# -- batch jobs ----------------------------------------------------------------------------
def job_status(batch: Mapping[str, Any]) -> base.JobStatus:
    """A `message_batch` as our JobStatus. While processing, every request counts as
    `processing`; the outcome counts are filled in when the batch ends."""
    counts = {k: int(v or 0) for k, v in _mapping(batch.get("request_counts")).items()}
    total = sum(counts.get(k, 0) for k in ("processing", "succeeded", "errored", "canceled", "expired"))
    done = counts.get("succeeded", 0)
    failed = counts.get("errored", 0) + counts.get("canceled", 0) + counts.get("expired", 0)
    if batch.get("processing_status") != "ended":
        return base.JobStatus("in_progress", total, done, failed)  # canceling too: not ended yet
    state: base.JobState = "completed"
    if total and counts.get("expired", 0) == total:
        state = "expired"
    elif total and counts.get("canceled", 0) == total:
        state = "cancelled"
    return base.JobStatus(state, total, done, failed)


def batch_line_result(line: Mapping[str, Any]) -> base.ProviderResult | None:
    """One results line (`{custom_id, result: {type, ...}}`) as a result; None when it names
    no request."""
    custom_id = line.get("custom_id")
    if not isinstance(custom_id, str):
        return None
    result = _mapping(line.get("result"))
    kind = result.get("type")
    if kind == "succeeded":
        return message_result(custom_id, _mapping(result.get("message")))
    if kind in ("expired", "canceled"):
        message = f"Anthropic {kind} this request before processing it"
        # an expired request is the one code every vendor's window ending gives (EXPIRED_CODE)
        code = base.EXPIRED_CODE if kind == "expired" else f"batch_request_{kind}"
        return base.ProviderResult.failure(custom_id, base.ItemError(code, message, transient=True))
    body = _mapping(result.get("error"))  # errored: an error body, as an HTTP answer's
    return base.ProviderResult.failure(custom_id, item_error(body), raw=dict(body) if body else None)


# -- errors --------------------------------------------------------------------------------
def status_error(
    status: int, headers: Mapping[str, str], body: bytes | str | None, *, vendor: str
) -> base.ProviderError:
    """A non-2xx answer as a provider error: the shared mapping (providers/http.py), except
    an account out of credit: a 402 (the SDK's PaymentRequiredError), a 4xx of type
    `billing_error`, or a 400 saying "Your credit balance is too low". Waiting does not clear
    it, so the lane is unavailable (ProviderUnavailable `insufficient_quota`, as OpenAI's
    429 insufficient_quota): the items fail over and the provider's lanes are marked down."""
    said = vendor_message(body)
    no_credit = status == 402 or (400 <= status < 500 and "billing_error" in vendor_error_codes(body))
    if no_credit or (status == 400 and NO_CREDIT in said.lower()):
        return base.ProviderUnavailable(f"{vendor} answered {status}: {said}", code=ACCOUNT_DOWN)
    return error_for_status(status, headers, body, vendor=vendor)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
