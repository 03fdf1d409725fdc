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
    POST /v1/messages/batches/{id}/cancel    canceling; ended on the next look, every request canceled

Bodies follow Anthropic's API reference; tests parse every answer with the official SDK's
types (`anthropic.types`), so the emulator cannot drift from them. Requests are checked as
the API checks them: the `anthropic-version` header; model, max_tokens and messages
required; roles user and assistant, alternating, the first a user's; known fields only.

Answers, usage and faults come from `behaviour.py`, answered the way Anthropic answers:

    fail                    400 invalid_request_error (a batch: an errored result)
    transient, 5xx          500 api_error (a batch: errored, api_error)
    rate_limited            429 rate_limit_error with retry-after (a batch: errored, overloaded_error)
    overloaded              529 overloaded_error (a batch: errored, overloaded_error)
    down                    the connection dropped unanswered (a batch: errored, api_error)
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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from batchroute_tools.emulators.behaviour import RETRY_AFTER_MS, Answer, Behaviour, Fault, Work
from batchroute_tools.emulators.server import Handler, Reply, Request, Vendor, sse
from batchroute_tools.emulators.spool import Spool

Clock = Callable[[], float]  # seconds since the epoch

DEFAULT_MODELS: Final = ("claude-3-5-haiku-20241022", "claude-sonnet-4-20250514")
BATCH_EXPIRY_SECONDS: Final = 86_400
# The request fields the Messages API (anthropic-version 2023-06-01) accepts; any other is
# refused, as the API refuses it ("Extra inputs are not permitted").
MESSAGE_FIELDS: Final = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "metadata",
        "stop_sequences",
        "stream",
        "temperature",
        "top_p",
        "top_k",
        "tools",
        "tool_choice",
        "thinking",
        "output_config",
        "service_tier",
        "container",
        "cache_control",
        "inference_geo",
    }
)
BLOCK_TYPES: Final = frozenset(
    {"text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking", "search_result"}
)
IMAGE_MEDIA_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_STREAM_RESET_AFTER: Final = 4  # message_start, content_block_start, ping, one delta: then the reset
# A fault met in a batch -> the error type of its `errored` result.
_BATCH_ERRORS: Final[dict[str, str]] = {
    "fail": "invalid_request_error",
    "transient": "api_error",
    "down": "api_error",
    "rate_limited": "overloaded_error",
    "overloaded": "overloaded_error",
}


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": f"req_{uuid.uuid4().hex[:24]}",
    }


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
        self._lock = threading.Lock()
        self._batches: dict[str, _Batch] = {}
        self.spool = Spool(provider)
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
        """Every route: a provider listed as down drops the connection; a request without
        `anthropic-version` is refused, as the API refuses it."""

        def checked(request: Request) -> Reply:
            if self.provider in self.behaviour.config.providers_down:
                return Reply.dropped()
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
        return Work(
            self.provider,
            str(body.get("model")),
            "chat",
            messages=tuple(turns),
            max_tokens=int(body.get("max_tokens") or 1),
            stream=bool(body.get("stream")),
        )

    def messages(self, request: Request) -> Reply:
        try:
            body = request.json()
        except ValueError:
            return error_reply(400, "invalid_request_error", "the body is not valid JSON")
        refusal = self._refusal(body)
        if refusal is not None:
            return refusal
        work = self.work(body)
        fault = self.behaviour.fault(work)
        if fault is not None and fault.kind == "timeout":
            return Reply(200, {"content-type": "text/event-stream"}, delay_headers=3600.0)
        if fault is not None and (refused := fault_reply(fault)) is not None:
            return refused
        answer = self.behaviour.answer(work)
        reset = fault is not None and fault.kind == "reset"
        if work.stream:
            return Reply.stream(
                self._events(work, answer), reset_after=_STREAM_RESET_AFTER if reset else None
            )
        time.sleep(self.behaviour.config.latency_seconds)
        if reset:  # the answer begins, then the connection breaks
            whole = json.dumps(self.message(work, answer)).encode()
            pieces = [(0.0, whole[: len(whole) // 2]), (0.0, whole[len(whole) // 2 :])]
            return Reply.stream(pieces, content_type="application/json", reset_after=1)
        return Reply.json(200, self.message(work, answer))

    def _refusal(self, body: object) -> Reply | None:
        problem = invalid_params(body)
        if problem is not None:
            return error_reply(400, "invalid_request_error", problem)
        model = str(body.get("model")) if isinstance(body, dict) else ""
        if self.models and model not in self.models:
            return error_reply(404, "not_found_error", f"model: {model}")
        return None

    def message(self, work: Work, answer: Answer, *, tier: str = "standard") -> dict[str, Any]:
        return {
            "id": f"msg_{answer.ident}",
            "type": "message",
            "role": "assistant",
            "model": work.model,
            "content": [{"type": "text", "text": answer.content}],
            "stop_reason": "max_tokens" if answer.finish == "length" else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": answer.prompt_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": answer.completion_tokens,
                "service_tier": tier,
            },
        }

    def _events(self, work: Work, answer: Answer) -> Iterator[tuple[float, bytes]]:
        config = self.behaviour.config
        whole = self.message(work, answer)
        start = {**whole, "content": [], "stop_reason": None, "usage": {**whole["usage"], "output_tokens": 1}}
        yield config.ttft_seconds, sse("message_start", {"type": "message_start", "message": start})
        block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
        yield 0.0, sse("content_block_start", block)
        yield 0.0, sse("ping", {"type": "ping"})
        for piece in answer.pieces:
            delta = {"type": "text_delta", "text": piece}
            yield (
                config.inter_token_seconds,
                sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            )
        yield 0.0, sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        finish = {"stop_reason": whole["stop_reason"], "stop_sequence": None}
        usage = {"output_tokens": answer.completion_tokens}
        yield 0.0, sse("message_delta", {"type": "message_delta", "delta": finish, "usage": usage})
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
        try:
            body = request.json()
        except ValueError:
            return error_reply(400, "invalid_request_error", "the body is not valid JSON")
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            return error_reply(400, "invalid_request_error", "requests: Field required (a non-empty list)")
        seen: set[str] = set()
        for index, entry in enumerate(requests):
            custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
            if not isinstance(custom_id, str) or not _valid_custom_id(custom_id) or custom_id in seen:
                message = f"requests.{index}.custom_id: 1 to 64 of [a-zA-Z0-9_-], unique in the batch"
                return error_reply(400, "invalid_request_error", message)
            if not isinstance(entry.get("params"), dict):
                return error_reply(400, "invalid_request_error", f"requests.{index}.params: Field required")
            seen.add(custom_id)
        host = request.headers.get("host", "127.0.0.1")
        batch_id = f"msgbatch_{uuid.uuid4().hex[:24]}"
        stored = self.spool.path(f"{batch_id}-requests")
        with stored.open("wb") as out:
            for entry in requests:
                out.write(json.dumps(entry).encode() + b"\n")
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
        return Reply.raw(200, Spool.read(batch.results) if batch.results else b"", "application/x-jsonl")

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
        """Run the batch as far as the clock says: a cancel ends it at the next look (every
        request canceled); otherwise it ends once `batch_seconds` have passed."""
        with self._lock:
            if batch.ended_at is not None:
                return
            now = self.clock()
            canceled = batch.cancel_initiated_at is not None
            if not canceled and now - batch.created_at < self.behaviour.config.batch_seconds:
                return
            batch.counts = _counts()
            results = self.spool.path(f"{batch.id}-results")
            with results.open("wb") as out:
                for raw in Spool.lines(batch.requests):
                    entry = json.loads(raw)
                    if canceled:
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
        problem = invalid_params(params, in_batch=True)
        if problem is None and self.models and params.get("model") not in self.models:
            problem = f"model: {params.get('model')}"
        if problem is not None:
            return custom_id, _errored("invalid_request_error", problem), False
        work = self.work(params)
        fault = self.behaviour.fault(work, in_batch=True)
        if fault is not None and fault.kind == "expire":
            return custom_id, {"type": "expired"}, False
        if fault is not None and fault.kind in _BATCH_ERRORS:
            return custom_id, _errored(_BATCH_ERRORS[fault.kind], fault.message), False
        message = self.message(work, self.behaviour.answer(work), tier="batch")
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


def invalid_params(body: object, *, in_batch: bool = False) -> str | None:
    """Why the Messages API would refuse this body (a 400's message), or None."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    extra = sorted(set(body) - MESSAGE_FIELDS)
    if extra:
        return f"{extra[0]}: Extra inputs are not permitted"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    limit = body.get("max_tokens")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        return "max_tokens: Field required (an integer of at least 1)"
    if in_batch and body.get("stream"):
        return "stream: a batch request cannot stream"
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        problem = _blocks_problem(system, "system")
        if problem is not None:
            return problem
    stops = body.get("stop_sequences")
    if stops is not None and not (isinstance(stops, list) and all(isinstance(s, str) for s in stops)):
        return "stop_sequences: Input should be a list of strings"
    return _messages_problem(body.get("messages")) or _tools_problem(body)


def _messages_problem(messages: object) -> str | None:
    if not isinstance(messages, list) or not messages:
        return "messages: Field required (a non-empty list)"
    previous = None
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            return f"messages.{index}.role: Input should be 'user' or 'assistant'"
        if index == 0 and role != "user":
            return 'messages: first message must use the "user" role'
        if role == previous:
            return (
                f'messages: roles must alternate between "user" and "assistant", found two "{role}" in a row'
            )
        previous = role
        content = message.get("content")
        if isinstance(content, str):
            final_assistant = role == "assistant" and index == len(messages) - 1
            if not content.strip() and not final_assistant:
                return f"messages.{index}: all messages must have non-empty content"
            continue
        problem = _blocks_problem(content, f"messages.{index}.content")
        if problem is not None:
            return problem
    return None


def _blocks_problem(blocks: object, where: str) -> str | None:
    if not isinstance(blocks, list) or not blocks:
        return f"{where}: Input should be a string or a non-empty list of content blocks"
    for index, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in BLOCK_TYPES:
            return f"{where}.{index}.type: Input tag {kind!r} does not match any of the expected tags"
        if kind == "text" and not (isinstance(block.get("text"), str) and block["text"].strip()):
            return f"{where}.{index}: text content blocks must contain non-whitespace text"
        if kind == "image":
            problem = _image_problem(block.get("source"))
            if problem is not None:
                return f"{where}.{index}.source: {problem}"
        if kind == "tool_use" and not (isinstance(block.get("input"), dict) and block.get("id")):
            return f"{where}.{index}: a tool_use block needs an id, a name and an input object"
        if kind == "tool_result" and not block.get("tool_use_id"):
            return f"{where}.{index}.tool_use_id: Field required"
    return None


def _image_problem(source: object) -> str | None:
    if not isinstance(source, dict):
        return "Field required"
    if source.get("type") == "base64":
        if source.get("media_type") not in IMAGE_MEDIA_TYPES:
            return "media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
        return None if isinstance(source.get("data"), str) and source["data"] else "data: Field required"
    if source.get("type") == "url":
        return None if isinstance(source.get("url"), str) and source["url"] else "url: Field required"
    return f"type: Input tag {source.get('type')!r} does not match 'base64', 'url' or 'file'"


def _tools_problem(body: Mapping[str, Any]) -> str | None:
    tools = body.get("tools")
    if tools is not None:
        for index, tool in enumerate(tools if isinstance(tools, list) else [None]):
            schema = tool.get("input_schema") if isinstance(tool, dict) else None
            if not isinstance(tool, dict) or not tool.get("name") or not isinstance(schema, dict):
                return f"tools.{index}: a tool needs a name and an input_schema"
            if schema.get("type") != "object":
                return f"tools.{index}.input_schema.type: Input should be 'object'"
    choice = body.get("tool_choice")
    if choice is not None:
        kind = choice.get("type") if isinstance(choice, dict) else None
        if kind not in ("auto", "any", "tool", "none") or (kind == "tool" and not choice.get("name")):
            return "tool_choice: Input should be {type: auto | any | none} or {type: tool, name}"
    return None


def _valid_custom_id(custom_id: str) -> bool:
    return 1 <= len(custom_id) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-") for c in custom_id)


def _counts(processing: int = 0) -> dict[str, int]:
    return {"processing": processing, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}


def _errored(kind: str, message: str) -> dict[str, Any]:
    return {"type": "errored", "error": error_body(kind, message)}


def _time_or_none(seconds: float | None) -> str | None:
    return rfc3339(seconds) if seconds is not None else None
