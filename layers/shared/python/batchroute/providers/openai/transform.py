"""OpenAI's wire format, both ways, as pure functions (no I/O): the request bodies of Chat
Completions, the Responses API, Embeddings and Batch API lines from a ProviderRequest, and
ProviderResults from OpenAI's answers, stream events and batch output lines
(docs/providers.md, OpenAI). Every body fits OpenAI's published OpenAPI document
(batchroute_tools/contracts/openai.py checks them).

Which API a `Route` speaks:
- OpenAI itself (`OPENAI_ROUTE`): a `responses` / `vision` item that uses a hosted tool (web
  search, file search, code interpreter: `uses_hosted_tools`) goes to the Responses API
  (`/v1/responses`, whole, streamed and in batch jobs), the only OpenAI API that runs them;
  every other item goes to Chat Completions (`/v1/chat/completions`, `max_completion_tokens`),
  which honours `stop` (the Responses API has none) and is what the service's own chat surface
  speaks. A batch job of OpenAI's may thus hold both (client.py splits it by endpoint).
  Embeddings go to `/v1/embeddings`.
- every OpenAI-compatible host (Together, Groq, Fireworks, DeepInfra, vLLM, llama.cpp's
  server, Ollama; `HOST_ROUTE`): Chat Completions with `max_tokens` (OpenAI's own Chat
  Completions takes `max_completion_tokens`: `token_field`). Hosts run no hosted tools.

What an API cannot say is refused (`Inexpressible`, a PermanentProviderError), never dropped:
a hosted tool on Chat Completions (a host's); `stop`, `seed` or a message `name` on the
Responses API (the preflight refuses them beside hosted tools, so this is a safety net).

Field map, Chat Completions (ours -> OpenAI): the messages (providers/conversation.py) ->
`messages` with the system text first; `max_output_tokens` -> `max_completion_tokens` /
`max_tokens`; temperature, top_p (when the model samples), stop, seed, penalties -> the same
names; function tools and tool_choice in chat form, `parallel_tool_calls: false` beside them
(`serial_tools`; true, the default, is not sent); a structured-output format ->
`response_format`.

Field map, Responses API: the system text -> `instructions`; messages -> `input` items (user
text and images as `input_text` / `input_image` parts, assistant text as a message, tool calls
as `function_call` items, tool answers as `function_call_output` items); `max_output_tokens`
-> `max_output_tokens` (at least 16, the API's minimum); temperature, top_p (when the model
samples); function tools flat, hosted tools from catalog/data/hosted_tools.toml with the
item's settings merged; tool_choice in Responses form; `parallel_tool_calls: false` beside
tools (`serial_tools`); a structured-output format ->
`text.format`; `store: false` (the service keeps no vendor-side state).

Embeddings: `input` (or `text`) -> `input`; `dimensions` when the item sets it. One input (a
string, or one array of token ids) is answered as `embedding`, several (an array of strings or
of token arrays) as `embeddings`, in input order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from batchroute.domain.routing.items import NOT_WITH_HOSTED_TOOLS
from batchroute.providers import base
from batchroute.providers.conversation import (
    JSON_OBJECT_INSTRUCTION,
    Conversation,
    ToolChoice,
    conversation,
    plain_text,
)
from batchroute.providers.hosted_tools import vendor_tool

TokenField = Literal["max_completion_tokens", "max_tokens"]
OPENAI_TOKEN_FIELD: Final[TokenField] = "max_completion_tokens"  # noqa: S105 - a field name
CHAT_PATH: Final = "/v1/chat/completions"
RESPONSES_PATH: Final = "/v1/responses"
EMBEDDINGS_PATH: Final = "/v1/embeddings"
# The Responses API's least `max_output_tokens` (its OpenAPI document: `minimum: 16`).
RESPONSES_MIN_OUTPUT_TOKENS: Final = 16
SAMPLING_OPTIONS: Final = ("temperature", "top_p")
# Hosted tool call output items of a Response -> the service's tool names (Usage.tool_uses):
# each item is a billed call, but Code Interpreter's, which count once per container named.
TOOL_CALL_ITEMS: Final[dict[str, str]] = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "python_execution",
}
# A batch line's custom_id is ours, plus this suffix when an embeddings item sent one input (a
# string, or one array of token ids): the answer's shape depends on it and the output line does
# not say.
SINGLE_SUFFIX: Final = "~single"

# Batch API status -> ours. finalizing and cancelling are still in progress.
JOB_STATES: Final[dict[str, base.JobState]] = {
    "validating": "validating",
    "in_progress": "in_progress",
    "finalizing": "in_progress",
    "cancelling": "in_progress",
    "completed": "completed",
    "failed": "failed",
    "expired": "expired",
    "cancelled": "cancelled",
}


# -- requests ------------------------------------------------------------------------------
class Inexpressible(base.PermanentProviderError):
    """The item asks for something the API it would go to cannot say (refused, not dropped)."""

    default_code = "unsupported_by_provider"


def _options(talk: Conversation, request: base.ProviderRequest) -> dict[str, Any]:
    if request.sampling:
        return dict(talk.options)
    return {k: v for k, v in talk.options.items() if k not in SAMPLING_OPTIONS}


def chat_body(
    request: base.ProviderRequest, *, token_field: TokenField = OPENAI_TOKEN_FIELD, stream: bool = False
) -> dict[str, Any]:
    talk = conversation(request.input)
    if talk.hosted_tools or (talk.tool_choice is not None and talk.tool_choice.mode == "hosted"):
        names = ", ".join(h.name for h in talk.hosted_tools) or str(
            talk.tool_choice.name if talk.tool_choice else ""
        )
        raise Inexpressible(f"Chat Completions runs no hosted tools ({names})")
    messages: list[dict[str, Any]] = []
    system = "\n\n".join(t for t in (talk.system, _json_word(talk)) if t)
    if system:
        messages.append({"role": "system", "content": system})
    messages.extend(_chat_message(m) for m in talk.messages)
    body: dict[str, Any] = {
        "model": request.provider_model_id,
        "messages": messages,
        **_options(talk, request),
    }
    if talk.functions:
        body["tools"] = talk.chat_tools()
        if talk.tool_choice is not None:
            body["tool_choice"] = talk.tool_choice.chat()
        if talk.serial_tools:
            body["parallel_tool_calls"] = False
    elif talk.tool_choice is not None and talk.tool_choice.mode in ("required", "function"):
        raise Inexpressible("tool_choice asks for a tool, and the item declares none")
    if request.max_output_tokens > 0:
        body[token_field] = request.max_output_tokens
    if talk.response_format is not None:
        body["response_format"] = talk.response_format
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _json_word(talk: Conversation, *, system: bool = True) -> str | None:
    """What JSON mode needs said: OpenAI refuses `json_object` unless the messages say "json"
    ("'messages' must contain the word 'json' in some form"); the instruction says it when no
    message does. The Responses API checks its `input` (`system=False`: not `instructions`)."""
    needed = talk.asks_json_object and not talk.says_json(system=system)
    return JSON_OBJECT_INSTRUCTION if needed else None


def _chat_message(message: dict[str, Any]) -> dict[str, Any]:
    """A normal-form message as Chat Completions takes it: tool calls without the extras
    other vendors carry on them (conversation.py keeps them for Gemini)."""
    if "tool_calls" not in message:
        return message
    calls = [{"id": c["id"], "type": "function", "function": c["function"]} for c in message["tool_calls"]]
    return {**message, "tool_calls": calls}


def responses_body(request: base.ProviderRequest, *, stream: bool = False) -> dict[str, Any]:
    """A Responses API request (module doc, "Field map, Responses API")."""
    talk = conversation(request.input)
    refused = [k for k in NOT_WITH_HOSTED_TOOLS if k in talk.options]
    if refused:
        raise Inexpressible(f"OpenAI's Responses API takes no {' or '.join(refused)}")
    said = _json_word(talk, system=False)
    developer = [{"role": "developer", "content": said}] if said else []
    body: dict[str, Any] = {"model": request.provider_model_id, "input": [*developer, *responses_input(talk)]}
    if talk.system:
        body["instructions"] = talk.system
    body.update(_options(talk, request))
    tools = responses_tools(talk)
    if tools:
        body["tools"] = tools
        if talk.tool_choice is not None:
            body["tool_choice"] = responses_tool_choice(talk.tool_choice)
        if talk.serial_tools:
            body["parallel_tool_calls"] = False
    elif talk.tool_choice is not None and talk.tool_choice.mode not in ("auto", "none"):
        raise Inexpressible("tool_choice asks for a tool, and the item declares none")
    if request.max_output_tokens > 0:
        body["max_output_tokens"] = max(request.max_output_tokens, RESPONSES_MIN_OUTPUT_TOKENS)
    if talk.response_format is not None:
        body["text"] = {"format": text_format(talk.response_format)}
    body["store"] = False
    if stream:
        body["stream"] = True
    return body


def responses_input(talk: Conversation) -> list[dict[str, Any]]:
    """The normal form's messages as Responses input items."""
    items: list[dict[str, Any]] = []
    for message in talk.messages:
        if "name" in message:
            raise Inexpressible("OpenAI's Responses API takes no message `name`")
        role = message.get("role")
        content = message.get("content")
        if role == "tool":
            output = content if isinstance(content, str) else plain_text(content)
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": str(message.get("tool_call_id")),
                    "output": output,
                }
            )
            continue
        if role == "assistant":
            text = plain_text(content)
            if text or not message.get("tool_calls"):
                items.append({"role": "assistant", "content": text})
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                items.append(
                    {
                        "type": "function_call",
                        "call_id": str(call.get("id")),
                        "name": str(function.get("name")),
                        "arguments": str(function.get("arguments")),
                    }
                )
            continue
        items.append({"role": "user", "content": _input_content(content)})
    return items


def _input_content(content: object) -> str | list[dict[str, Any]]:
    if not isinstance(content, list):
        return "" if content is None else str(content)
    parts: list[dict[str, Any]] = []
    for part in content:
        if part.get("type") == "image_url":
            image = part.get("image_url") or {}
            parts.append(
                {
                    "type": "input_image",
                    "image_url": str(image.get("url")),
                    "detail": image.get("detail") or "auto",
                }
            )
        else:
            parts.append({"type": "input_text", "text": str(part.get("text", ""))})
    return parts


def responses_tools(talk: Conversation) -> list[dict[str, Any]]:
    """Function tools flat, and hosted tools as hosted_tools.toml declares them for OpenAI
    with the item's settings merged over."""
    tools: list[dict[str, Any]] = []
    for function in talk.functions:
        tool: dict[str, Any] = {"type": "function", "name": function.name}
        if function.description is not None:
            tool["description"] = function.description
        tool["parameters"] = dict(function.parameters) if function.parameters is not None else None
        tool["strict"] = bool(function.strict)  # Chat Completions' default; the document wants it said
        tools.append(tool)
    for hosted in talk.hosted_tools:
        declared = vendor_tool("openai", hosted.name)
        if declared is None:
            raise Inexpressible(f"OpenAI runs no hosted tool {hosted.name!r}")
        tools.append({**declared, **hosted.config, "type": declared["type"]})
    return tools


def responses_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if choice.mode == "function":
        return {"type": "function", "name": choice.name}
    if choice.mode == "hosted":
        declared = vendor_tool("openai", str(choice.name))
        if declared is None:
            raise Inexpressible(f"OpenAI runs no hosted tool {choice.name!r}")
        # ToolChoiceTypes knows no `web_search` (only the preview): name it as allowed instead.
        return {"type": "allowed_tools", "mode": "required", "tools": [{"type": declared["type"]}]}
    return choice.mode


def text_format(response_format: Mapping[str, Any]) -> dict[str, Any]:
    """A chat `response_format` as the Responses API's `text.format`."""
    if response_format.get("type") == "json_schema":
        spec = _mapping(response_format.get("json_schema"))
        return {
            "type": "json_schema",
            **{k: spec[k] for k in ("name", "schema", "strict", "description") if k in spec},
        }
    return {"type": str(response_format.get("type"))}


def embeddings_body(request: base.ProviderRequest) -> dict[str, Any]:
    value = request.input.get("input", request.input.get("text"))
    body: dict[str, Any] = {"model": request.provider_model_id, "input": value}
    dimensions = request.input.get("dimensions")
    if isinstance(dimensions, int) and not isinstance(dimensions, bool):
        body["dimensions"] = dimensions
    return body


def is_single_embedding(request: base.ProviderRequest) -> bool:
    """Whether the item embeds one input, answered as one `embedding`: a string, or a flat
    array of token ids (OpenAI's "array of integers that will be turned into an embedding");
    an array of strings or of token arrays is one input each, answered as `embeddings`."""
    value = request.input.get("input", request.input.get("text"))
    if not isinstance(value, list):
        return True
    return bool(value) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def uses_hosted_tools(request: base.ProviderRequest) -> bool:
    """Whether the item offers a hosted tool, as the normal form reads its `tools`
    (conversation.py); an item without tools is answered without reading it."""
    return bool(request.input.get("tools")) and bool(conversation(request.input).hosted_tools)


@dataclass(frozen=True)
class Route:
    """Which OpenAI API an adapter sends each operation to (module doc). `responses_api`:
    items with hosted tools go to the Responses API (OpenAI itself); every other chat item,
    and every item of a route without it, to Chat Completions. `least_top_p`: the smallest
    `top_p` the hosts take: vLLM (the edge pools, an operator's pool) refuses 0 ("top_p must
    be in (0, 1]"), so 0, the top token only, is sent as the least nucleus that still holds
    only the top token. `message_names`: a message's `name` is sent (OpenAI); a host is sent
    none (Groq refuses one, the others document none): refused, never dropped."""

    responses_api: bool
    token_field: TokenField
    least_top_p: float = 0.0
    message_names: bool = True

    def path(self, request: base.ProviderRequest) -> str:
        if request.operation == "embeddings":
            return EMBEDDINGS_PATH
        return RESPONSES_PATH if self.responses_api and uses_hosted_tools(request) else CHAT_PATH

    def operation(self, request: base.ProviderRequest) -> str:
        """The contract's name of the call (batchroute_tools/contracts/openai.py)."""
        return {EMBEDDINGS_PATH: "embeddings", RESPONSES_PATH: "responses", CHAT_PATH: "chat.completions"}[
            self.path(request)
        ]

    def body(self, request: base.ProviderRequest, *, stream: bool = False) -> dict[str, Any]:
        path = self.path(request)
        if path == EMBEDDINGS_PATH:
            return embeddings_body(request)
        if path == RESPONSES_PATH:
            return responses_body(request, stream=stream)
        body = chat_body(request, token_field=self.token_field, stream=stream)
        if not self.message_names and any("name" in m for m in body["messages"]):
            raise Inexpressible("this host takes no message `name` (routing sends none here: message_names)")
        if body.get("top_p") == 0 and self.least_top_p:
            body["top_p"] = self.least_top_p
        return body

    def batch_line(self, request: base.ProviderRequest) -> dict[str, Any]:
        suffix = SINGLE_SUFFIX if request.operation == "embeddings" and is_single_embedding(request) else ""
        return {
            "custom_id": request.custom_id + suffix,
            "method": "POST",
            "url": self.path(request),
            "body": self.body(request),
        }


OPENAI_ROUTE: Final = Route(responses_api=True, token_field=OPENAI_TOKEN_FIELD)
HOST_ROUTE: Final = Route(
    responses_api=False,
    token_field="max_tokens",  # noqa: S106 - a field name
    least_top_p=1e-9,
    message_names=False,
)


# -- answers -------------------------------------------------------------------------------
FINISH_REASONS: Final[dict[object, base.FinishReason]] = {
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",  # the deprecated single-function form
    "content_filter": "content_filter",
}


def finish_reason(value: object) -> base.FinishReason:
    return FINISH_REASONS.get(value, "stop")


def chat_usage(usage: object) -> base.Usage:
    """A chat completion's usage: `prompt_tokens` counts all input, of which
    `prompt_tokens_details.cached_tokens` came from the prompt cache (compatible hosts that
    report no details bill it all as fresh input)."""
    if not isinstance(usage, Mapping):
        return base.Usage()
    details = _mapping(usage.get("prompt_tokens_details"))
    return base.Usage(
        int(usage.get("prompt_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
        cached_input_tokens=int(details.get("cached_tokens") or 0),
    )


def chat_result(custom_id: str, body: Mapping[str, Any]) -> base.ProviderResult:
    """A `chat.completion` as our normalized message."""
    choices = body.get("choices") or []
    choice = _mapping(choices[0] if choices else None)
    message = _mapping(choice.get("message"))
    output: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "content": message.get("content") or "",
        "finish_reason": finish_reason(choice.get("finish_reason")),
    }
    if message.get("tool_calls"):
        output["tool_calls"] = message["tool_calls"]
    if message.get("refusal"):
        output["refusal"] = message["refusal"]
    return base.ProviderResult(
        custom_id, "completed", output=output, raw=dict(body), usage=chat_usage(body.get("usage"))
    )


def response_result(custom_id: str, body: Mapping[str, Any]) -> base.ProviderResult:
    """A Responses API `response` as our normalized message: the output text joined, function
    calls as chat tool calls, hosted tool calls counted (Usage.tool_uses)."""
    if body.get("status") == "failed":
        error = _mapping(body.get("error"))
        code, transient = _line_error(
            500 if error.get("code") == "server_error" else 400, str(error.get("code") or "")
        )
        message = str(error.get("message") or "the response failed")[:300]
        return base.ProviderResult.failure(
            custom_id, base.ItemError(code, message, transient), raw=dict(body)
        )
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[dict[str, Any]] = []
    tools: dict[str, int] = {}
    containers: set[str] = set()
    for item in body.get("output") or []:
        item = _mapping(item)
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                part = _mapping(part)
                if part.get("type") == "output_text":
                    texts.append(str(part.get("text") or ""))
                elif part.get("type") == "refusal":
                    refusals.append(str(part.get("refusal") or ""))
        elif kind == "function_call":
            calls.append(
                {
                    "id": str(item.get("call_id") or ""),
                    "type": "function",
                    "function": {
                        "name": str(item.get("name") or ""),
                        "arguments": str(item.get("arguments") or ""),
                    },
                }
            )
        elif kind == "code_interpreter_call" and item.get("container_id"):
            containers.add(str(item["container_id"]))
        elif isinstance(kind, str) and kind in TOOL_CALL_ITEMS:
            tools[TOOL_CALL_ITEMS[kind]] = tools.get(TOOL_CALL_ITEMS[kind], 0) + 1
    if containers:  # Code Interpreter is billed by the container, however many calls ran in it
        tools["python_execution"] = tools.get("python_execution", 0) + len(containers)
    output: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "content": "".join(texts),
        "finish_reason": _incomplete_finish(body) or ("tool_calls" if calls else "stop"),
    }
    if calls:
        output["tool_calls"] = calls
    if refusals:
        output["refusal"] = "".join(refusals)
    counted = response_usage(body.get("usage"), tools)
    return base.ProviderResult(custom_id, "completed", output=output, raw=dict(body), usage=counted)


def _incomplete_finish(body: Mapping[str, Any]) -> base.FinishReason | None:
    """The finish reason an `incomplete` Response names: `length` when cut at
    `max_output_tokens`, `content_filter` when the vendor's filter stopped it."""
    if body.get("status") != "incomplete":
        return None
    reason = _mapping(body.get("incomplete_details")).get("reason")
    if reason == "max_output_tokens":
        return "length"
    return "content_filter" if reason == "content_filter" else None


def response_usage(usage: object, tools: Mapping[str, int]) -> base.Usage:
    """A Response's usage: `input_tokens` counts all input, of which `input_tokens_details`
    names the cache reads (`cached_tokens`) and writes (`cache_write_tokens`)."""
    given = _mapping(usage)
    details = _mapping(given.get("input_tokens_details"))
    return base.Usage(
        int(given.get("input_tokens") or 0),
        int(given.get("output_tokens") or 0),
        tuple(sorted(tools.items())),
        cached_input_tokens=int(details.get("cached_tokens") or 0),
        cache_write_input_tokens=int(details.get("cache_write_tokens") or 0),
    )


@dataclass
class ResponseStream:
    """What a Responses API stream has said so far: `add(event)` takes one event and gives the
    text it adds; the stream ends with `response.completed` / `response.incomplete` (then
    `result` is the whole answer, parsed from the response the event carries); a
    `response.failed` or `error` event raises (transient for the vendor's server errors)."""

    custom_id: str
    result: base.ProviderResult | None = None
    calls: dict[int, int] = field(default_factory=dict)  # output_index -> tool call index
    fresh: list[base.ToolCallDelta] = field(default_factory=list)  # since the last delta()
    refusal: str = ""  # since the last delta()

    def add(self, event: Mapping[str, Any]) -> str:
        kind = event.get("type")
        if kind == "response.output_text.delta":
            return str(event.get("delta") or "")
        if kind == "response.refusal.delta":
            self.refusal += str(event.get("delta") or "")
        elif kind == "response.output_item.added":
            item = _mapping(event.get("item"))
            if item.get("type") == "function_call":
                index = self.calls.setdefault(int(event.get("output_index") or 0), len(self.calls))
                self.fresh.append(
                    base.ToolCallDelta(
                        index,
                        str(item.get("call_id") or ""),
                        str(item.get("name") or ""),
                        str(item.get("arguments") or ""),
                    )
                )
        elif kind == "response.function_call_arguments.delta":
            known = self.calls.get(int(event.get("output_index") or 0))
            if known is not None:
                self.fresh.append(base.ToolCallDelta(known, arguments=str(event.get("delta") or "")))
        if kind in ("response.completed", "response.incomplete"):
            self.result = response_result(self.custom_id, _mapping(event.get("response")))
        elif kind == "response.failed":
            raise _stream_error(_mapping(_mapping(event.get("response")).get("error")))
        elif kind == "error":
            raise _stream_error(event)
        return ""

    def delta(self, text: str) -> base.StreamDelta | None:
        """What the last event adds to the answer (None for nothing)."""
        refusal, self.refusal = self.refusal, ""
        return base.stream_delta(text, self.fresh, refusal)


def _stream_error(error: Mapping[str, Any]) -> base.PermanentProviderError | base.TransientProviderError:
    vendor_code = str(error.get("code") or "")
    message = f"openai failed the response: {str(error.get('message') or vendor_code)[:300]}"
    code, transient = _line_error(500 if vendor_code in ("server_error", "") else 400, vendor_code)
    return (
        base.TransientProviderError(message, code=code)
        if transient
        else base.PermanentProviderError(message, code=code)
    )


def embeddings_result(custom_id: str, body: Mapping[str, Any], *, single: bool) -> base.ProviderResult:
    """An embeddings `list` as our normalized embedding(s), in input order."""
    data = sorted(
        (d for d in body.get("data") or [] if isinstance(d, Mapping)), key=lambda d: int(d.get("index") or 0)
    )
    vectors = [list(d.get("embedding") or []) for d in data]
    output: dict[str, Any] = {"type": "embedding", "dimensions": len(vectors[0]) if vectors else 0}
    if single and len(vectors) == 1:
        output["embedding"] = vectors[0]
    else:
        output["embeddings"] = vectors
    usage = _mapping(body.get("usage"))
    return base.ProviderResult(
        custom_id,
        "completed",
        output=output,
        raw=dict(body),
        usage=base.Usage(int(usage.get("prompt_tokens") or 0), 0),
    )


@dataclass
class StreamAccumulator:
    """What a chat stream has said so far: text deltas, the finish reason, the final usage
    (the last chunk, with `stream_options.include_usage`), and enough to rebuild the
    `chat.completion` the vendor would have answered (`raw`)."""

    custom_id: str
    pieces: list[str] = field(default_factory=list)
    finish: base.FinishReason = "stop"
    usage: base.Usage = field(default_factory=base.Usage)
    ident: str = ""
    model: str = ""
    created: int = 0
    fragments: list[base.ToolCallDelta] = field(default_factory=list)  # every tool-call delta
    fresh: list[base.ToolCallDelta] = field(default_factory=list)  # those since the last delta()
    refusals: list[str] = field(default_factory=list)
    refusal: str = ""  # since the last delta()

    def add(self, chunk: Mapping[str, Any]) -> str:
        """Take one `chat.completion.chunk`; the text it adds ("" for none). Its tool-call
        fragments and refusal text wait for `delta()`."""
        self.ident = str(chunk.get("id") or self.ident)
        self.model = str(chunk.get("model") or self.model)
        self.created = int(chunk.get("created") or self.created)
        given = chunk.get("usage")
        if not isinstance(given, Mapping):  # Groq also reports it in `x_groq.usage` (final chunk)
            given = _mapping(chunk.get("x_groq")).get("usage")
        if isinstance(given, Mapping):
            self.usage = chat_usage(given)
        text = ""
        for choice in chunk.get("choices") or []:
            delta = _mapping(choice.get("delta") if isinstance(choice, Mapping) else None)
            if isinstance(delta.get("content"), str):
                text += delta["content"]
            if isinstance(delta.get("refusal"), str) and delta["refusal"]:
                self.refusal += delta["refusal"]
                self.refusals.append(delta["refusal"])
            for call in delta.get("tool_calls") or []:
                self._tool_call(_mapping(call))
            if isinstance(choice, Mapping) and choice.get("finish_reason"):
                self.finish = finish_reason(choice["finish_reason"])
        if text:
            self.pieces.append(text)
        return text

    def _tool_call(self, call: Mapping[str, Any]) -> None:
        """One `delta.tool_calls[]` entry (ChatCompletionMessageToolCallChunk)."""
        function = _mapping(call.get("function"))
        name = function.get("name")
        fragment = base.ToolCallDelta(
            int(call.get("index") or 0),
            str(call["id"]) if call.get("id") else None,
            str(name) if name else None,
            str(function.get("arguments") or ""),
        )
        self.fragments.append(fragment)
        self.fresh.append(fragment)

    def delta(self, text: str) -> base.StreamDelta | None:
        """What the last chunk adds to the answer (None for nothing)."""
        refusal, self.refusal = self.refusal, ""
        return base.stream_delta(text, self.fresh, refusal)

    def result(self) -> base.ProviderResult:
        content = "".join(self.pieces)
        calls = base.joined_tool_calls(self.fragments)
        refusal = "".join(self.refusals)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": content if content or not (calls or refusal) else None,
            "refusal": refusal or None,
        }
        if calls:
            message["tool_calls"] = calls
        usage: dict[str, Any] = {
            "prompt_tokens": self.usage.prompt_tokens,
            "completion_tokens": self.usage.completion_tokens,
            "total_tokens": self.usage.prompt_tokens + self.usage.completion_tokens,
        }
        if self.usage.cached_input_tokens:
            usage["prompt_tokens_details"] = {"cached_tokens": self.usage.cached_input_tokens}
        raw = {
            "id": self.ident,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
            "usage": usage,
        }
        output: dict[str, Any] = {
            "type": "message",
            "role": "assistant",
            "content": content,
            "finish_reason": self.finish,
        }
        if calls:
            output["tool_calls"] = calls
        if refusal:
            output["refusal"] = refusal
        return base.ProviderResult(self.custom_id, "completed", output=output, raw=raw, usage=self.usage)


# -- batch jobs ----------------------------------------------------------------------------
def job_status(batch: Mapping[str, Any]) -> base.JobStatus:
    """A `batch` as our job status; a failed batch's `errors.data` as its errors (the input
    file's line each names, when it does)."""
    counts = _mapping(batch.get("request_counts"))
    errors = tuple(
        base.ItemError(
            code="provider_rejected",
            message=_batch_error_message(_mapping(e))[:300],
            transient=False,
        )
        for e in _mapping(batch.get("errors")).get("data") or []
    )
    return base.JobStatus(
        state=JOB_STATES.get(str(batch.get("status")), "in_progress"),
        total=int(counts.get("total") or 0),
        completed_count=int(counts.get("completed") or 0),
        failed_count=int(counts.get("failed") or 0),
        errors=errors if batch.get("status") == "failed" else (),
    )


def _batch_error_message(error: Mapping[str, Any]) -> str:
    message = str(error.get("message") or "the batch failed")
    where = [f"line {error['line']}"] if error.get("line") is not None else []
    where += [f"param {error['param']}"] if error.get("param") else []
    code = f" ({error['code']})" if error.get("code") else ""
    return f"{message}{code}" + (f" [{', '.join(where)}]" if where else "")


def batch_line_result(line: Mapping[str, Any]) -> base.ProviderResult | None:
    """One line of a batch output or error file as a result; None when it names no request."""
    custom_id = line.get("custom_id")
    if not isinstance(custom_id, str):
        return None
    single = custom_id.endswith(SINGLE_SUFFIX)
    ours = custom_id.removesuffix(SINGLE_SUFFIX)
    response = _mapping(line.get("response"))
    status = int(response.get("status_code") or 0)
    body = _mapping(response.get("body"))
    if 200 <= status < 300 and body:
        if body.get("object") == "list":
            return embeddings_result(ours, body, single=single)
        if body.get("object") == "response":
            return response_result(ours, body)
        return chat_result(ours, body)
    source = _mapping(body.get("error")) or _mapping(line.get("error"))
    vendor_code = str(source.get("code") or source.get("type") or "")
    message = str(source.get("message") or f"the batch line failed with status {status}")[:300]
    code, transient = _line_error(status, vendor_code)
    # the vendor's code adds to the message unless it is already there, or is our code too
    named = vendor_code and vendor_code != code and vendor_code not in message
    detail = f"{message} ({vendor_code})" if named else message
    error = base.ItemError(code=code, message=detail[:300], transient=transient)
    return base.ProviderResult.failure(ours, error, raw=dict(body) if body else None)


def _line_error(status: int, vendor_code: str) -> tuple[str, bool]:
    """Our code for a failed batch line, and whether a resubmission may succeed: the same
    codes a synchronous call's HTTP answer maps to (providers/http.py)."""
    if status == 429 or vendor_code == "rate_limit_exceeded":
        return "rate_limited", True
    if vendor_code == "batch_expired":
        return base.EXPIRED_CODE, True
    if status >= 500 or vendor_code == "server_error":
        return "provider_5xx", True
    return "provider_rejected", False


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
