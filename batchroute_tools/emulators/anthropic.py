"""An emulator of Anthropic's API (docs/emulators.md): what the Anthropic adapter talks to in
local mode and in tests, so neither ever calls the vendor.

Routes (under the vendor's prefix, `/anthropic` by default):

    POST /v1/messages                        a `message`; with `stream: true` server-sent events
                                             message_start, content_block_start, ping,
                                             content_block_delta (text_delta)..., content_block_stop,
                                             message_delta, message_stop
    GET  /v1/models                          the models this vendor serves (one page)
    POST /v1/messages/batches                a `message_batch`, in_progress
    GET  /v1/messages/batches/{id}           in_progress for the configured time, then ended
    GET  /v1/messages/batches/{id}/results   JSON Lines: {custom_id, result: {type, ...}}
    POST /v1/messages/batches/{id}/cancel    canceling; ended on the next look: the requests
                                             processed by then with results, the rest canceled

Bodies follow Anthropic's API reference; tests parse every answer with the official SDK's
types (`anthropic.types`), so the emulator cannot drift from them. Every request is checked
as the API checks it, with the same contract the adapter's bodies are tested against
(batchroute_tools/contracts/anthropic.py: the SDK's request types, strictly, and the API's
rules): a violation is the API's 400 `invalid_request_error` naming it; a server tool without
its `anthropic-beta` too; an unknown model 404 `not_found_error`; no `anthropic-version`
header 400. A message batch is checked as the API checks it: its envelope when it is created
(1 to 100,000 requests, each `{custom_id, params}` with a unique custom_id of the pattern, no
unknown field: else 400; over 256 MB: 413 `request_too_large`), each request's `params` as
the batch runs, a violation (or a server tool without its beta, or an unknown model) being
that request's `errored` result (`invalid_request_error`; `not_found_error`) while the others
run: "Validation of the `params` object for each message request is performed
asynchronously, and validation errors are returned when processing of the entire batch has
ended" (Anthropic's batch-processing guide, "Test your batch requests with the Messages API",
https://docs.anthropic.com/en/docs/build-with-claude/batch-processing).

Server tools run deterministically, once each, before the answer's text (whole, streamed
or in a batch): `web_search_20250305` -> a `server_tool_use` block and a
`web_search_tool_result` with one result, counted in `usage.server_tool_use`;
`code_execution_20250522` -> a `server_tool_use` block and a `code_execution_tool_result`
(one line printed). `tool_choice` `none` runs none; `{type: tool, name}` only that one.
A request that runs web search with `[simulate:pause_turn]` in its first user text is a
paused turn (`pauses`): the search's two blocks, no text, `stop_reason` `pause_turn` (whole,
streamed or in a batch); the same request with that content sent back as its final
assistant turn continues it: the text alone, no second search.

A `tool_choice` that forces a call to a function the body declares (a custom tool: no
`type`, or `custom`), `{type: any}` (its first function) or `{type: tool, name}`, is answered
as the API answers it (`forced_call`): one `tool_use` block `{id: "toolu_...", name, input}`
(input valid under its `input_schema`) and no text, `stop_reason` `tool_use`, usage as for text; streamed, a
content_block_start with the block (input `{}`), a ping, one content_block_delta
`input_json_delta` (`partial_json` the input's JSON), content_block_stop, message_delta with
`stop_reason` `tool_use`. No server tool runs then. `auto`, `none` or no tool_choice: text.

What `cache_control` marks is written to and read from the prompt cache (cache.py), in
`cache_creation_input_tokens` / `cache_read_input_tokens`, whole, streamed and in batches.

Answers, usage and faults come from `behaviour.py`, answered the way Anthropic answers:

    fail                    400 invalid_request_error (a batch: an errored result)
    transient, 5xx          500 api_error (a batch: errored, api_error)
    rate_limited            429 rate_limit_error with retry-after (a batch: errored, overloaded_error)
    overloaded              529 overloaded_error (a batch: errored, overloaded_error)
    down                    the connection dropped unanswered (a batch holding one: its create;
                            an injected one: that request errored, api_error)
    reset                   the connection reset halfway through the answer
    timeout                 a stream whose first byte never comes
    expire                  (a batch) that request `expired`; the batch ends
    malformed               (a batch) that results line is not JSON, the first time

Errors have Anthropic's shape: `{"type": "error", "error": {"type", "message"}, "request_id"}`.

A message batch's requests and results are kept on disk (`spool.py`), not in memory: the
requests are written out when the batch is created and read line by line when it ends, its
results written line by line as they are made.
"""

from __future__ import annotations

import json
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from batchroute_tools.contracts.anthropic import (
    CACHE_TTLS,
    message_violations,
    request_violations,
    required_betas,
    warm,
)
from batchroute_tools.emulators.behaviour import (
    DOWN_MARK,
    RETRY_AFTER_MS,
    Answer,
    Behaviour,
    Fault,
    Work,
    call_arguments,
    stop_sequences,
)
from batchroute_tools.emulators.cache import Breakpoint, PromptCache, anthropic_minimum, digest
from batchroute_tools.emulators.server import Handler, Reply, Request, Vendor, sse
from batchroute_tools.emulators.spool import Spool

Clock = Callable[[], float]  # seconds since the epoch

DEFAULT_MODELS: Final = ("claude-3-5-haiku-20241022", "claude-sonnet-4-20250514")
BATCH_EXPIRY_SECONDS: Final = 86_400
# "A Message Batch is limited to either 100,000 Message requests or 256 MB in size" (the
# guide's batch limitations; larger is the API's 413 request_too_large). In bytes as
# providers.toml counts them.
MAX_BATCH_BYTES: Final = 256_000_000
# What stands in for each request's params when a batch's envelope is checked (the params
# themselves are checked as the batch runs), and the key a stored request keeps why its
# params are invalid under.
_ENVELOPE_PARAMS: Final = {
    "model": DEFAULT_MODELS[0],
    "max_tokens": 1,
    "messages": [{"role": "user", "content": "x"}],
}
_INVALID: Final = "_invalid"
# In the first user text of a request that runs web search: the turn is paused once (docs/providers.md).
PAUSE_TRIGGER: Final = "[simulate:pause_turn]"
# Server tools the emulator runs (deterministically): Anthropic's tool name -> its tool types.
SERVER_TOOLS: Final[dict[str, str]] = {"web_search": "web_search_", "code_execution": "code_execution_"}
# The content types Anthropic answers with: a stream's, and a batch's results file's.
STREAM_CONTENT_TYPE: Final = "text/event-stream; charset=utf-8"
RESULTS_CONTENT_TYPE: Final = "application/binary"
_STREAM_RESET_AFTER: Final = 4  # message_start, content_block_start, ping, one delta: then the reset
# A fault met in a batch -> the error type of its `errored` result.
_BATCH_ERRORS: Final[dict[str, str]] = {
    "fail": "invalid_request_error",
    "transient": "api_error",
    "down": "api_error",
    "rate_limited": "overloaded_error",
    "overloaded": "overloaded_error",
}


def request_id() -> str:
    return f"req_{uuid.uuid4().hex[:24]}"


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id()}


def error_reply(status: int, kind: str, message: str, headers: Mapping[str, str] | None = None) -> Reply:
    body = error_body(kind, message)
    return Reply.json(status, body, {"request-id": body["request_id"], **(headers or {})})


def fault_reply(fault: Fault) -> Reply | None:
    """The HTTP answer of a fault, as Anthropic gives it; None for faults met later (a reset,
    a silent stream) or only in a batch."""
    if fault.kind == "down":
        return Reply.dropped()
    if fault.kind == "fail":
        return error_reply(400, "invalid_request_error", fault.message)
    if fault.kind in ("transient", "5xx"):
        return error_reply(500, "api_error", fault.message)
    if fault.kind == "rate_limited":
        retry_after = str(math.ceil(RETRY_AFTER_MS / 1000))  # Anthropic says whole seconds
        return error_reply(429, "rate_limit_error", fault.message, {"retry-after": retry_after})
    if fault.kind == "overloaded":
        return error_reply(529, "overloaded_error", fault.message)
    return None


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def cache_breakpoints(body: Mapping[str, Any], turns: tuple[Mapping[str, Any], ...]) -> list[Breakpoint]:
    """The prefixes a Messages body marks with `cache_control` (`turns`: its system prompt
    and messages, as `work` has them), each with its ttl: a marked system or message block
    ends its prefix there; the top-level `cache_control` marks the last block. A marked tool
    is part of every prefix's key (`tools_scope`) and counts no tokens of its own here, as
    the emulator's input tokens count none of the tools."""
    marks: list[Breakpoint] = []
    for index, turn in enumerate(turns):
        content = turn.get("content")
        blocks: list[Any] = content if isinstance(content, list) else []
        for cut, block in enumerate(blocks):
            control = block.get("cache_control") if isinstance(block, Mapping) else None
            if isinstance(control, Mapping):
                prefix = (*turns[:index], {**turn, "content": blocks[: cut + 1]})
                marks.append(Breakpoint(prefix, CACHE_TTLS[str(control.get("ttl", "5m"))]))
    control = body.get("cache_control")
    if isinstance(control, Mapping) and turns:
        marks.append(Breakpoint(turns, CACHE_TTLS[str(control.get("ttl", "5m"))]))
    return marks


def tools_scope(body: Mapping[str, Any]) -> str:
    """The tools' share of the cache key: they come first in Anthropic's prefix order."""
    tools = body.get("tools")
    return digest("tools", tuple(tools) if isinstance(tools, list) else ()).hex()


@dataclass
class _Batch:
    id: str
    created_at: float
    requests: Path  # its requests, one JSON line each, on disk (removed when it ends)
    base_url: str  # where its results_url points (the host the caller reached)
    cancel_initiated_at: float | None = None
    ended_at: float | None = None
    results: Path | None = None  # its JSON Lines results, on disk, once it has ended
    counts: dict[str, int] = field(default_factory=dict)


class AnthropicEmulator:
    """Anthropic's API as one `server.Vendor` (`.vendor`), under `prefix`, answering as
    `provider`; batch jobs and their times by the injected clock."""

    def __init__(
        self,
        behaviour: Behaviour,
        *,
        provider: str = "anthropic",
        prefix: str = "/anthropic",
        models: tuple[str, ...] = DEFAULT_MODELS,
        clock: Clock = time.time,
    ) -> None:
        self.behaviour = behaviour
        self.provider = provider
        self.prefix = prefix
        self.models = models
        self.clock = clock
        self.cache = PromptCache(clock)
        self._lock = threading.Lock()
        self._batches: dict[str, _Batch] = {}
        self.spool = Spool(provider)
        threading.Thread(target=warm, name="anthropic-contract-warm", daemon=True).start()
        self.vendor = Vendor(prefix, on_stop=[self.spool.close])
        batch = r"/v1/messages/batches/(?P<batch_id>[\w-]+)"
        for method, pattern, handler in (
            ("POST", "/v1/messages", self.messages),
            ("GET", "/v1/models", self.list_models),
            ("POST", "/v1/messages/batches", self.create_batch),
            ("GET", batch, self._existing(self.get_batch)),
            ("GET", batch + "/results", self._existing(self.batch_results)),
            ("POST", batch + "/cancel", self._existing(self.cancel_batch)),
        ):
            self.vendor.route(method, pattern)(self._checked(handler))

    def _checked(self, handler: Handler) -> Handler:
        """Every route: a provider listed as down drops the connection; a request without a
        key (401 authentication_error) or without `anthropic-version` (400) is refused, as
        the API refuses it. Any key is taken, as `x-api-key` (the adapter's) or as
        `Authorization: Bearer` (the `anthropic` SDK 2.14's)."""

        def checked(request: Request) -> Reply:
            if self.provider in self.behaviour.config.providers_down:
                return Reply.dropped()
            bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not request.headers.get("x-api-key") and not bearer:
                return error_reply(401, "authentication_error", "x-api-key header is required")
            if not request.headers.get("anthropic-version"):
                return error_reply(400, "invalid_request_error", "anthropic-version: header is required")
            return handler(request)

        return checked

    # -- messages -----------------------------------------------------------------------
    def work(self, body: Mapping[str, Any]) -> Work:
        """The request as `behaviour.py` sees it: the system prompt is a message too, so its
        markers count and the prompt tokens are the quote's estimate of the item."""
        system = body.get("system")
        turns: list[Mapping[str, Any]] = [{"role": "system", "content": system}] if system else []
        turns.extend(m for m in body.get("messages") or [] if isinstance(m, Mapping))
        config = body.get("output_config")
        fmt = config.get("format") if isinstance(config, Mapping) else None
        schema = fmt.get("schema") if isinstance(fmt, Mapping) else None
        return Work(
            self.provider,
            str(body.get("model")),
            "chat",
            messages=tuple(turns),
            max_tokens=int(body.get("max_tokens") or 1),
            stream=bool(body.get("stream")),
            stops=stop_sequences(body.get("stop_sequences")),
            answer_schema=schema if isinstance(schema, Mapping) else None,  # structured outputs
        )

    def answer(self, body: Mapping[str, Any], work: Work) -> Answer:
        """Behaviour's answer, with what the body's cache breakpoints read from and wrote to
        the prompt cache (cache.py): prefixes of at least the model's minimum, for their ttl."""
        answer = self.behaviour.answer(work)
        marks = cache_breakpoints(body, work.messages)
        if not marks:
            return answer
        scope = f"{self.provider}\n{work.model}\n{tools_scope(body)}"
        use = self.cache.marked(scope, marks, anthropic_minimum(work.model))
        return replace(answer, cache_read_tokens=use.read, cache_write_tokens=use.written)

    def messages(self, request: Request) -> Reply:
        try:
            body = request.json()
        except ValueError:
            return error_reply(400, "invalid_request_error", "the body is not valid JSON")
        refusal = self._refusal("messages", body, request)
        if refusal is not None:
            return refusal
        work = self.work(body)
        fault = self.behaviour.fault(work)
        if fault is not None and fault.kind == "timeout":
            return Reply(200, {"content-type": "text/event-stream"}, delay_headers=3600.0)
        if fault is not None and (refused := fault_reply(fault)) is not None:
            return refused
        answer = self.answer(body, work)
        tools = server_tools(body)
        reset = fault is not None and fault.kind == "reset"
        if work.stream:
            if (call := forced_call(body, answer)) is not None:
                return Reply.stream(
                    self._call_events(work, answer, call),
                    content_type=STREAM_CONTENT_TYPE,
                    headers={"request-id": request_id()},
                    reset_after=_STREAM_RESET_AFTER if reset else None,
                )
            return Reply.stream(
                self._events(work, answer, tools),
                content_type=STREAM_CONTENT_TYPE,
                headers={"request-id": request_id()},
                reset_after=_STREAM_RESET_AFTER if reset else None,
            )
        self.behaviour.think()
        if reset:  # the answer begins, then the connection breaks
            whole = json.dumps(self.message(work, answer, tools=tools, body=body)).encode()
            pieces = [(0.0, whole[: len(whole) // 2]), (0.0, whole[len(whole) // 2 :])]
            return Reply.stream(pieces, content_type="application/json", reset_after=1)
        message = self.message(work, answer, tools=tools, body=body)
        return Reply.json(200, message, {"request-id": request_id()})

    def _refusal(self, operation: str, body: Any, request: Request) -> Reply | None:
        """The API's 400 for a Messages body its contract refuses (contracts/anthropic.py),
        or for a server tool used without its beta; its 404 for a model it does not serve."""
        problems = request_violations(operation, body)
        if problems:
            return error_reply(400, "invalid_request_error", "; ".join(problems[:5]))
        missing = _missing_betas(body, request)
        if missing:
            return error_reply(400, "invalid_request_error", missing)
        model = str(body.get("model"))
        if self.models and model not in self.models:
            return error_reply(404, "not_found_error", f"model: {model}")
        return None

    @staticmethod
    def _batch_refusal(body: Any, request: Request) -> tuple[Reply | None, dict[int, str]]:
        """The API's 400 for a batch whose envelope it refuses (checked at creation), else
        None and, by request index, why a request's params are invalid (each one's
        `errored` result once the batch runs: the API validates params asynchronously)."""
        entries = body.get("requests") if isinstance(body, dict) else None
        listed: list[Any] = entries if isinstance(entries, list) else []
        params = {
            index: entry["params"]
            for index, entry in enumerate(listed)
            if isinstance(entry, dict) and isinstance(entry.get("params"), dict)
        }
        envelope = body
        if params:
            stand_in = [{**e, "params": _ENVELOPE_PARAMS} if i in params else e for i, e in enumerate(listed)]
            envelope = {**body, "requests": stand_in}
        problems = request_violations("messages.batches", envelope)
        if problems:
            return error_reply(400, "invalid_request_error", "; ".join(problems[:5])), {}
        invalid: dict[int, str] = {}
        for index, given in params.items():
            found = message_violations(given, "params", in_batch=True)
            if not found and (missing := _missing_betas(given, request)):
                found = [missing]
            if found:
                invalid[index] = "; ".join(found[:5])
        return None, invalid

    def message(
        self,
        work: Work,
        answer: Answer,
        *,
        tier: str = "standard",
        tools: tuple[str, ...] = (),
        body: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The `message` of an answer; `tools`: the server tools it runs first (each once,
        in order, deterministically), their blocks before the answer's text; `body`: the
        request, whose forced function call (`forced_call`) is then the whole answer."""
        call = forced_call(body, answer) if body is not None else None
        usage: dict[str, Any] = {
            "input_tokens": answer.prompt_tokens - answer.cache_read_tokens - answer.cache_write_tokens,
            "cache_creation_input_tokens": answer.cache_write_tokens,
            "cache_read_input_tokens": answer.cache_read_tokens,
            "output_tokens": answer.completion_tokens,
            "service_tier": tier,
        }
        if call is not None:
            return {
                "id": f"msg_{answer.ident}",
                "type": "message",
                "role": "assistant",
                "model": work.model,
                "content": [call],
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": usage,
            }
        paused = pauses(work, tools)
        if not paused and PAUSE_TRIGGER in _first_user_text(work):
            tools = tuple(t for t in tools if t != "web_search")  # the paused turn searched
        if "web_search" in tools:
            usage["server_tool_use"] = {"web_search_requests": 1, "web_fetch_requests": 0}
        text = [] if paused else [{"type": "text", "text": answer.content}]
        met = None if paused else answer.stop_sequence
        stop = (
            "pause_turn"
            if paused
            else "stop_sequence"
            if met
            else "max_tokens"
            if answer.finish == "length"
            else "end_turn"
        )
        return {
            "id": f"msg_{answer.ident}",
            "type": "message",
            "role": "assistant",
            "model": work.model,
            "content": [*server_tool_blocks(work, answer, tools), *text],
            "stop_reason": stop,
            "stop_sequence": met,
            "usage": usage,
        }

    def _events(
        self, work: Work, answer: Answer, tools: tuple[str, ...] = ()
    ) -> Iterator[tuple[float, bytes]]:
        """The stream of `message(work, answer, tools=tools)`: a server tool call's input
        comes as one input_json_delta, a tool result whole in its content_block_start, the
        text as text_deltas."""
        config = self.behaviour.config
        whole = self.message(work, answer, tools=tools)
        start = {**whole, "content": [], "stop_reason": None, "usage": {**whole["usage"], "output_tokens": 1}}
        start["usage"].pop("server_tool_use", None)
        yield config.ttft_seconds, sse("message_start", {"type": "message_start", "message": start})
        paused = whole["stop_reason"] == "pause_turn"
        used = whole["content"] if paused else whole["content"][:-1]  # all but the text
        for index, block in enumerate(used):
            opened = {**block, "input": {}} if block["type"] == "server_tool_use" else block
            start_event = {"type": "content_block_start", "index": index, "content_block": opened}
            yield 0.0, sse("content_block_start", start_event)
            if block["type"] == "server_tool_use":
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                event = {"type": "content_block_delta", "index": index, "delta": delta}
                yield 0.0, sse("content_block_delta", event)
            yield 0.0, sse("content_block_stop", {"type": "content_block_stop", "index": index})
        if not paused:
            yield from self._text_events(len(used), answer)
        finish = {"stop_reason": whole["stop_reason"], "stop_sequence": whole["stop_sequence"]}
        usage = {"output_tokens": answer.completion_tokens}
        if "server_tool_use" in whole["usage"]:
            usage["server_tool_use"] = whole["usage"]["server_tool_use"]
        yield 0.0, sse("message_delta", {"type": "message_delta", "delta": finish, "usage": usage})
        yield 0.0, sse("message_stop", {"type": "message_stop"})

    def _text_events(self, text_at: int, answer: Answer) -> Iterator[tuple[float, bytes]]:
        """The answer's text block, streamed as text_deltas."""
        text_block = {"type": "text", "text": ""}
        opening = {"type": "content_block_start", "index": text_at, "content_block": text_block}
        yield 0.0, sse("content_block_start", opening)
        yield 0.0, sse("ping", {"type": "ping"})
        for piece in answer.pieces:
            delta = {"type": "text_delta", "text": piece}
            event = {"type": "content_block_delta", "index": text_at, "delta": delta}
            yield self.behaviour.config.inter_token_seconds, sse("content_block_delta", event)
        yield 0.0, sse("content_block_stop", {"type": "content_block_stop", "index": text_at})

    def _call_events(self, work: Work, answer: Answer, call: dict[str, Any]) -> Iterator[tuple[float, bytes]]:
        """The stream of a forced call, as the API streams a `tool_use` block: the block
        opened with input `{}`, its input as an input_json_delta, stop_reason `tool_use`."""
        config = self.behaviour.config
        counted = self.message(work, answer)["usage"]
        start: dict[str, Any] = {
            "id": f"msg_{answer.ident}",
            "type": "message",
            "role": "assistant",
            "model": work.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**counted, "output_tokens": 1},
        }
        yield config.ttft_seconds, sse("message_start", {"type": "message_start", "message": start})
        opening = {"type": "content_block_start", "index": 0, "content_block": {**call, "input": {}}}
        yield 0.0, sse("content_block_start", opening)
        yield 0.0, sse("ping", {"type": "ping"})
        delta = {"type": "input_json_delta", "partial_json": json.dumps(call["input"])}
        event = {"type": "content_block_delta", "index": 0, "delta": delta}
        yield config.inter_token_seconds, sse("content_block_delta", event)
        yield 0.0, sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        finish = {"stop_reason": "tool_use", "stop_sequence": None}
        usage = {"output_tokens": answer.completion_tokens}
        ended = {"type": "message_delta", "delta": finish, "usage": usage}
        yield 0.0, sse("message_delta", ended)
        yield 0.0, sse("message_stop", {"type": "message_stop"})

    def list_models(self, request: Request) -> Reply:
        created = rfc3339(self.clock())
        data = [
            {
                "type": "model",
                "id": model,
                "display_name": display_name(model),
                "created_at": created,
                "lifecycle": "active",
            }
            for model in self.models
        ]
        return Reply.json(
            200,
            {
                "data": data,
                "has_more": False,
                "first_id": self.models[0] if self.models else None,
                "last_id": self.models[-1] if self.models else None,
            },
        )

    # -- message batches ----------------------------------------------------------------
    def create_batch(self, request: Request) -> Reply:
        if len(request.body) > MAX_BATCH_BYTES:
            message = f"a message batch is at most {MAX_BATCH_BYTES} bytes; this one is {len(request.body)}"
            return error_reply(413, "request_too_large", message)
        try:
            body = request.json()
        except ValueError:
            return error_reply(400, "invalid_request_error", "the body is not valid JSON")
        refusal, invalid = self._batch_refusal(body, request)
        if refusal is not None:
            return refusal
        requests = body["requests"]
        valid = (entry for index, entry in enumerate(requests) if index not in invalid)
        if DOWN_MARK in request.body and any(self.behaviour.down(self.work(e["params"])) for e in valid):
            return Reply.dropped()  # the provider is down: the batch is never made
        host = request.headers.get("host", "127.0.0.1")
        batch_id = f"msgbatch_{uuid.uuid4().hex[:24]}"
        stored = self.spool.path(f"{batch_id}-requests")
        with stored.open("wb") as out:
            for index, entry in enumerate(requests):
                kept = {**entry, _INVALID: invalid[index]} if index in invalid else entry
                out.write(json.dumps(kept).encode() + b"\n")
        batch = _Batch(batch_id, self.clock(), stored, f"http://{host}")
        batch.counts = _counts(processing=len(requests))
        with self._lock:
            self._batches[batch.id] = batch
        return Reply.json(200, self._batch_object(batch))

    def get_batch(self, batch: _Batch) -> Reply:
        return Reply.json(200, self._batch_object(batch))

    def cancel_batch(self, batch: _Batch) -> Reply:
        with self._lock:
            if batch.ended_at is None and batch.cancel_initiated_at is None:
                batch.cancel_initiated_at = self.clock()
        return Reply.json(200, self._batch_object(batch))

    def batch_results(self, batch: _Batch) -> Reply:
        if batch.ended_at is None:
            message = f"message batch {batch.id} is still processing: its results are not ready"
            return error_reply(400, "invalid_request_error", message)
        return Reply.raw(200, Spool.read(batch.results) if batch.results else b"", RESULTS_CONTENT_TYPE)

    def _existing(self, handler: Callable[[_Batch], Reply]) -> Handler:
        """A route about one batch: 404 for an id never created, else the batch, advanced
        to now, for the handler."""

        def found(request: Request) -> Reply:
            batch = self._batches.get(request.params["batch_id"])
            if batch is None:
                return error_reply(
                    404, "not_found_error", f"message batch {request.params['batch_id']} not found"
                )
            self._advance(batch)
            return handler(batch)

        return found

    def _advance(self, batch: _Batch) -> None:
        """Run the batch as far as the clock says: a cancel ends it at the next look, the
        requests it had processed by then (its share of `batch_seconds` elapsed, in order)
        with their results and the rest `canceled`, as Anthropic ends a canceled batch;
        otherwise it ends once `batch_seconds` have passed."""
        with self._lock:
            if batch.ended_at is not None:
                return
            now = self.clock()
            seconds = self.behaviour.config.batch_seconds
            canceled = batch.cancel_initiated_at is not None
            if not canceled and now - batch.created_at < seconds:
                return
            total = sum(batch.counts.values())
            processed = total
            if batch.cancel_initiated_at is not None and seconds:
                share = min(1.0, (batch.cancel_initiated_at - batch.created_at) / seconds)
                processed = int(total * share)
            batch.counts = _counts()
            results = self.spool.path(f"{batch.id}-results")
            with results.open("wb") as out:
                for index, raw in enumerate(Spool.lines(batch.requests)):
                    entry = json.loads(raw)
                    if index >= processed:
                        custom_id, result, malformed = str(entry["custom_id"]), {"type": "canceled"}, False
                    else:
                        custom_id, result, malformed = self._result(entry)
                    batch.counts[str(result["type"])] += 1
                    line = json.dumps({"custom_id": custom_id, "result": result}).encode()
                    out.write((line[: len(line) // 2] if malformed else line) + b"\n")  # cut: not JSON
            Spool.remove(batch.requests)
            batch.results = results
            batch.ended_at = now

    def _result(self, entry: Mapping[str, Any]) -> tuple[str, dict[str, Any], bool]:
        """One request's (custom_id, result, whether its line comes out malformed); the result
        is {type: succeeded, message} | {type: errored, error} | {type: expired}."""
        custom_id, params = str(entry["custom_id"]), entry["params"]
        if entry.get(_INVALID):  # its params, validated as the batch ran
            return custom_id, _errored("invalid_request_error", str(entry[_INVALID])), False
        if self.models and params.get("model") not in self.models:
            return custom_id, _errored("not_found_error", f"model: {params.get('model')}"), False
        work = self.work(params)
        fault = self.behaviour.fault(work, in_batch=True)
        if fault is not None and fault.kind == "expire":
            return custom_id, {"type": "expired"}, False
        if fault is not None and fault.kind in _BATCH_ERRORS:
            return custom_id, _errored(_BATCH_ERRORS[fault.kind], fault.message), False
        answer = self.answer(params, work)
        message = self.message(work, answer, tier="batch", tools=server_tools(params), body=params)
        malformed = fault is not None and fault.kind == "malformed"
        return custom_id, {"type": "succeeded", "message": message}, malformed

    def _batch_object(self, batch: _Batch) -> dict[str, Any]:
        if batch.ended_at is not None:
            status = "ended"
        else:
            status = "in_progress" if batch.cancel_initiated_at is None else "canceling"
        results_url = f"{batch.base_url}{self.prefix}/v1/messages/batches/{batch.id}/results"
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": dict(batch.counts),
            "ended_at": _time_or_none(batch.ended_at),
            "created_at": rfc3339(batch.created_at),
            "expires_at": rfc3339(batch.created_at + BATCH_EXPIRY_SECONDS),
            "archived_at": None,
            "cancel_initiated_at": _time_or_none(batch.cancel_initiated_at),
            "results_url": results_url if batch.ended_at is not None else None,
        }


def display_name(model: str) -> str:
    """`claude-3-5-haiku-20241022` -> `Claude 3.5 Haiku`: the date dropped, versions dotted."""
    words: list[str] = []
    for part in model.split("-"):
        if part.isdigit() and len(part) == 8:
            continue
        if part.isdigit() and words and words[-1][-1].isdigit():
            words[-1] += "." + part
        else:
            words.append(part.capitalize())
    return " ".join(words)


def server_tools(body: Mapping[str, Any]) -> tuple[str, ...]:
    """The server tools a Messages body declares that the emulator runs (none when the
    body's tool_choice is `none`, only the chosen one when it names one)."""
    choice = body.get("tool_choice")
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    if kind == "none":
        return ()
    declared = [
        name
        for t in body.get("tools") or []
        if isinstance(t, Mapping)
        and (name := str(t.get("name"))) in SERVER_TOOLS
        and str(t.get("type", "")).startswith(SERVER_TOOLS[name])
    ]
    if kind == "tool" and isinstance(choice, Mapping):
        return tuple(n for n in declared if n == choice.get("name"))
    return tuple(declared)


def pauses(work: Work, tools: tuple[str, ...]) -> bool:
    """Whether this answer is a paused turn (`[simulate:pause_turn]` in the first user text
    of a request that runs web search): the search's blocks and no text, stop_reason
    `pause_turn`. A request whose final assistant turn carries a web search result (the
    paused content sent back, as the API asks) continues it: text, and no search again."""
    if "web_search" not in tools or PAUSE_TRIGGER not in _first_user_text(work):
        return False
    last = work.messages[-1] if work.messages else {}
    content = last.get("content")
    blocks = content if last.get("role") == "assistant" and isinstance(content, list) else []
    return not any(isinstance(b, Mapping) and b.get("type") == "web_search_tool_result" for b in blocks)


def forced_call(body: Mapping[str, Any], answer: Answer) -> dict[str, Any] | None:
    """The `tool_use` block of the function call a Messages body forces: `tool_choice`
    `{type: any}` calls its first function (a custom tool: no `type`, or `custom`; server
    tools run at the vendor), `{type: tool, name}` that function, with input valid under its
    `input_schema`; None otherwise (`auto`, `none`, no tool_choice, or a server tool named:
    text, as before)."""
    choice = body.get("tool_choice")
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    schemas = {
        str(t.get("name")): t.get("input_schema")
        for t in body.get("tools") or []
        if isinstance(t, Mapping) and t.get("type", "custom") in ("custom", None)
    }
    names = list(schemas)
    name: str | None = None
    if kind == "any" and names:
        name = names[0]
    elif kind == "tool" and isinstance(choice, Mapping) and choice.get("name") in names:
        name = str(choice.get("name"))
    if name is None:
        return None
    return {
        "type": "tool_use",
        "id": f"toolu_{answer.ident[:24]}",
        "name": name,
        "input": call_arguments(schemas[name]),
    }


def server_tool_blocks(work: Work, answer: Answer, tools: tuple[str, ...]) -> list[dict[str, Any]]:
    """Each server tool's call and result blocks, as Anthropic's answer carries them:
    `server_tool_use`, then `web_search_tool_result` (one result) or
    `code_execution_tool_result` (a run that printed one line)."""
    asked = _first_user_text(work)[:80] or "the question"
    blocks: list[dict[str, Any]] = []
    for number, name in enumerate(tools):
        tool_id = f"srvtoolu_{answer.ident[:16]}{number:02d}"
        if name == "web_search":
            call = {"query": asked}
            result: dict[str, Any] = {
                "type": "web_search_tool_result",
                "tool_use_id": tool_id,
                "content": [
                    {
                        "type": "web_search_result",
                        "url": f"https://search.example/{answer.ident[:12]}",
                        "title": f"Simulated result for {asked}",
                        "encrypted_content": f"enc_{answer.ident}",
                        "page_age": "January 1, 2026",
                    }
                ],
            }
        else:
            call = {"code": f"print({len(asked)})"}
            result = {
                "type": "code_execution_tool_result",
                "tool_use_id": tool_id,
                "content": {
                    "type": "code_execution_result",
                    "stdout": f"{len(asked)}\n",
                    "stderr": "",
                    "return_code": 0,
                    "content": [],
                },
            }
        blocks += [{"type": "server_tool_use", "id": tool_id, "name": name, "input": call}, result]
    return blocks


def _first_user_text(work: Work) -> str:
    for message in work.messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        for block in content if isinstance(content, list) else []:
            if isinstance(block, Mapping) and block.get("type") == "text":
                return str(block.get("text"))
    return ""


def _missing_betas(params: Mapping[str, Any], request: Request) -> str | None:
    """Why the API refuses these params without more `anthropic-beta` values (their server
    tools'), or None."""
    given = {b.strip() for b in request.headers.get("anthropic-beta", "").split(",") if b.strip()}
    missing = sorted(required_betas(params) - given)
    return f"this request's tools need the anthropic-beta header: {', '.join(missing)}" if missing else None


def _counts(processing: int = 0) -> dict[str, int]:
    return {"processing": processing, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}


def _errored(kind: str, message: str) -> dict[str, Any]:
    return {"type": "errored", "error": error_body(kind, message)}


def _time_or_none(seconds: float | None) -> str | None:
    return rfc3339(seconds) if seconds is not None else None
