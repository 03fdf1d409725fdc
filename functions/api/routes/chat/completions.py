"""Chat completions: direct (JSON or a server-sent event stream) and queued (a chat job).

Everything before the first byte runs in one worker thread (`DirectChat.open`): plan, hold,
provider first byte with failover. Only then is the answer started, with the serving
provider in `x-service-provider` (and `provider` in the body). A stream's provider events
are read by one thread of their own (`_Pump`), which hands each delta to the event loop as
it arrives, so the provider is never kept waiting on the loop and each delta is sent at
once. The hold is settled once the answer is complete and before its last body message
(a stream's [DONE] or error event, a non-streamed body): on AWS the invocation ends with
the response's last byte and the environment is frozen, so nothing may be left for after
it. A stream the client leaves is settled by its response object, shielded from the
cancellation the disconnect brings, after closing the upstream call. docs/chat.md is the
long form.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from collections.abc import AsyncIterator, Callable
from typing import Annotated, TypeVar, cast

import anyio
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from batchroute.catalog import builtin_catalog
from batchroute.config import get_settings
from batchroute.domain.accounts.access import Principal, authorize, may
from batchroute.domain.chat.objects import (
    DONE_EVENT,
    ChatJobView,
    DeltaView,
    ServedBy,
    ToolCallChunkView,
    UsageView,
    chat_completion,
    chunk,
    sse,
    tool_call_chunks,
    usage_object,
)
from batchroute.domain.chat.requests import ChatRequest, parse_chat_request
from batchroute.errors import InvalidRequest, Unavailable
from batchroute.observability import logger
from batchroute.providers.base import PermanentProviderError, ProviderError, StreamDelta, StreamEnd
from batchroute.services.accounts.authentication import Authenticator, KeyUnconfirmed
from batchroute.services.chat.direct import DirectCall
from batchroute.wiring import Wiring, wiring_for
from functions.api.auth import current_principal, require
from functions.api.deps import WiringDep, get_clock
from functions.api.envelope import errors_doc
from functions.api.middleware import json_body
from functions.api.openapi import documented_as, schema_ref
from functions.api.schemas.chat.completions import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatJob,
)

router = APIRouter(tags=["chat"])
T = TypeVar("T")

PROVIDER_HEADER = "x-service-provider"
LANE_HEADER = "x-service-lane"
BATCH_HEADER = "x-service-batch-id"
PRESET_HEADER = "x-service-preset"  # the preset version a direct request was expanded from
# The provider failed after its first byte: a non-streamed answer's 503 (nothing charged), a
# stream's last event (what was generated charged).
PROVIDER_FAILED = "provider_failed"
# The provider refused the request (a permanent error: its content filter, say), before its
# first byte or after: 400 (nothing charged), or a stream's last event.
PROVIDER_REJECTED = "provider_rejected"


_ERRORS = errors_doc(
    {
        400: (
            "Invalid body (`invalid_request`, `model_not_found`), `stream_not_supported_for_batch`, "
            "`no_direct_lane`, or the provider refused the request (`provider_rejected`)"
        ),
        401: "Missing or invalid credentials",
        402: "`insufficient_funds`: the balance does not cover the hold",
        403: "`spending_limit_reached` under a hard limit, or a role that may not create work",
        404: "No such chat job (`chat_job_not_found`)",
        503: (
            "`provider_unavailable`: no lane answered; `provider_failed`: the provider failed after "
            "its first byte. Nothing was charged either way"
        ),
    }
)


Reader = Annotated[Principal, Depends(require("batches:read"))]


def _provided(request: Request, dependency: Callable[[], T]) -> T:
    """A dependency's value honouring the app's overrides (create_app(settings), test clocks)."""
    provider: Callable[[], T] = request.app.dependency_overrides.get(dependency, dependency)
    return provider()


class _Caller:
    """Who asks, as `require("batches:create")` finds it but for the rate limit (counted by
    the route: in the hold's transaction for a direct request, on its own otherwise). A bearer
    key may come from the process's copy (services/accounts/authentication.py): then
    `key_hash` is set, the direct hold confirms it, and any other answer `confirm()`s it first
    (a revoked key gets its 401, never a 400 or a queued job)."""

    def __init__(self, request: Request, authenticator: Authenticator) -> None:
        request.state.rate_limit_checked = True  # counted below, not by current_principal
        self.authenticator = authenticator
        scheme, _, value = (request.headers.get("authorization") or "").partition(" ")
        self.key = value.strip() if scheme.lower() == "bearer" else ""
        self.key_hash: str | None = None
        if self.key:
            self.principal, self.key_hash = self.authenticator.from_api_key_copy(self.key)
            request.state.principal = self.principal
        else:
            self.principal = current_principal(request, self.authenticator)
        if self.key_hash is not None and not may(self.principal, "batches:create"):
            self.confirm()
        authorize(self.principal, "batches:create")

    def confirm(self) -> None:
        """Read the key now (401 when revoked or gone); nothing left to confirm after."""
        if self.key_hash is not None:
            self.authenticator.forget(self.key_hash)
            self.principal = self.authenticator.from_api_key(self.key)
            self.key_hash = None


def _open(wiring: Wiring, caller: _Caller, chat: ChatRequest) -> DirectCall:
    """The direct call, its hold confirming a key taken from the process's copy. A refused
    confirmation reads the key (its 401); any other refusal confirms it before answering."""
    try:
        return wiring.direct_chat.open(caller.principal, chat, key_hash=caller.key_hash)
    except KeyUnconfirmed:
        caller.confirm()  # raises the key's 401; were it valid after all, hold as usual
        return wiring.direct_chat.open(caller.principal, chat)
    except Exception:
        caller.confirm()
        raise


def _queue(wiring: Wiring, principal: Principal, chat: ChatRequest, key: str | None) -> ChatJobView:
    wiring.rate_limiter.check_caller(principal)
    return wiring.chat_jobs.queue(principal, chat, key)


# The body is read by the route itself (below), so it is documented by reference.
_CHAT_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": schema_ref(ChatCompletionRequest, "validation")}},
    },
    "parameters": [
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": False,
            "schema": {"type": "string", "minLength": 8, "maxLength": 128},
            "description": "Queued requests only: a retry with the same key and body answers the "
            "job the first one queued (another body: 409); direct requests ignore it",
        }
    ],
}
_EVENT_STREAM = {
    "schema": {
        "type": "string",
        "description": "Server-sent events: `data: <chat.completion.chunk>` per event (x-event-data), "
        "the last `data: [DONE]`",
    },
    "x-event-data": schema_ref(ChatCompletionChunk),
}


@router.post(
    "/v1/chat/completions",
    responses={
        200: {
            "model": ChatCompletion,
            "description": "Direct: the `chat.completion` (JSON), or with `stream: true` a "
            "`text/event-stream` of `chat.completion.chunk` events ending with `data: [DONE]`",
            "content": {"text/event-stream": _EVENT_STREAM},
        },
        202: {"model": ChatJob, "description": "Queued (`batch`): the chat job, `queued`"},
        **_ERRORS,
    },
    summary="A chat completion: direct (optionally streamed) or queued as a one-item batch",
    openapi_extra=_CHAT_BODY,
)
async def create_chat_completion(request: Request) -> Response:
    # The hot path takes no FastAPI dependencies: with the app's dependency overrides (the
    # settings) FastAPI rebuilds every dependency's signature on every request, and each sync
    # dependency is a trip through the thread pool. Here: one trip for the caller (the key from
    # the process's copy, or its lookup once a minute; the role), one for everything up to the
    # provider's first byte (the hold's transaction counts the rate limit and confirms a copied
    # key: one AWS call before the provider, docs/chat.md).
    wiring = wiring_for(_provided(request, get_settings), _provided(request, get_clock))
    caller = await run_in_threadpool(_Caller, request, wiring.authenticator)
    principal = caller.principal
    try:
        body = await json_body(request)
        if isinstance(body, dict) and body.get("preset") is not None:  # docs/presets.md
            body = await run_in_threadpool(wiring.presets.expander(principal.org_id).chat, body)
        chat = parse_chat_request(body, builtin_catalog())
    except Exception:
        await run_in_threadpool(caller.confirm)  # a revoked key: 401, not this error
        await run_in_threadpool(wiring.rate_limiter.check_caller, principal)  # counted all the same
        raise
    if chat.queue is not None:
        await run_in_threadpool(caller.confirm)
        key = request.headers.get("Idempotency-Key")
        job = await run_in_threadpool(_queue, wiring, principal, chat, key)
        return JSONResponse(job, status_code=202)
    call = await run_in_threadpool(_open, wiring, caller, chat)
    headers = {PROVIDER_HEADER: call.provider, LANE_HEADER: call.lane.lane_id, BATCH_HEADER: call.batch_id}
    if chat.preset_version:
        headers[PRESET_HEADER] = chat.preset_version
    if chat.stream:
        stream = _Stream(call)
        stream.start()  # the first delta is read while the answer starts
        return ChatEventStream(_events(stream), stream, headers=headers)
    try:
        await run_in_threadpool(_drain, call)
    finally:  # settled before the body is sent (on AWS nothing runs after its last byte)
        with anyio.CancelScope(shield=True):
            await run_in_threadpool(call.finish)
    usage = call.usage_so_far()
    completion = chat_completion(
        ServedBy(call.completion_id, call.created, chat.model, call.provider),
        content=call.content,
        finish_reason=call.finish_reason,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cached_tokens=usage.cached_input_tokens,
        tool_calls=call.tool_calls,
        refusal=call.refusal,
    )
    return JSONResponse(completion, headers=headers)


@router.get(
    "/v1/chat/completions/{job_id}",
    response_model=documented_as(ChatJob),
    responses={**_ERRORS, **errors_doc({410: "The result was reclaimed by retention (`results_expired`)"})},
    summary="A queued chat job: `result` is the chat.completion once completed, `error` once failed",
)
def get_chat_job(job_id: str, principal: Reader, wiring: WiringDep) -> ChatJobView:
    return wiring.chat_jobs.get(principal, job_id)


def _drain(call: DirectCall) -> None:
    """Reads the whole answer. A provider that fails after its first byte ends the request in
    503 `provider_failed`, its hold released: no part of the answer reached the client, so
    nothing is charged, and a retry (the SDK's own) is a new request, held and settled alone.
    A refusal (a permanent error: Gemini's content filter) is 400 `provider_rejected`, as
    before the first byte: retrying it would be refused again."""
    try:
        while call.next_event() is not None:
            pass
    except PermanentProviderError as exc:
        logger.info(
            "provider refused after its first byte",
            extra={"batch_id": call.batch_id, "lane": call.lane.lane_id, "code": exc.code},
        )
        call.abandon(f"{PROVIDER_REJECTED}: {exc.code}")
        raise InvalidRequest(
            f"{call.provider} refused the request: {exc.message}",
            code=PROVIDER_REJECTED,
            details={"provider": call.provider, "provider_code": exc.code},
        ) from exc
    except ProviderError as exc:
        logger.warning(
            "provider failed after its first byte",
            extra={"batch_id": call.batch_id, "lane": call.lane.lane_id, "code": exc.code},
        )
        call.abandon(f"provider_failed: {exc.code}")
        raise Unavailable(
            f"The provider {call.provider} failed while answering ({exc.code}); nothing was charged. "
            "Retry shortly.",
            code=PROVIDER_FAILED,
            details={"provider": call.provider, "provider_code": exc.code},
            retry_after_seconds=1,
        ) from exc


def _stream_error(call: DirectCall, exc: Exception) -> bytes:
    """The SSE event that ends a stream that failed midway, in the error envelope's shape
    (`data: {"error": {code, message, details}}`, no [DONE]): the SDK raises it as an
    `APIError` with this code and message, as it does OpenAI's own."""
    if isinstance(exc, PermanentProviderError):
        error = {
            "code": PROVIDER_REJECTED,
            "message": f"{call.provider} refused the request: {exc.message}",
            "details": {"provider": call.provider, "provider_code": exc.code},
        }
    elif isinstance(exc, ProviderError):
        error = {
            "code": PROVIDER_FAILED,
            "message": f"The provider {call.provider} failed while answering ({exc.code}); "
            "what was generated so far is charged.",
            "details": {"provider": call.provider, "provider_code": exc.code},
        }
    else:
        error = {"code": "internal_error", "message": "An unexpected error occurred; it has been logged."}
    return b"data: " + json.dumps({"error": error}, separators=(",", ":")).encode() + b"\n\n"


class _Pump:
    """Reads the provider's events in a thread of its own and hands each to the event loop
    as soon as it arrives. The provider keeps its own pace (the loop never stands between
    two of its deltas) and a delta costs one wake-up of the loop, not a round trip through
    the thread pool. `stop()` asks it to stop after the event it is waiting for; `join()`
    waits for that (the call may then be closed: a generator cannot be closed while it runs)."""

    def __init__(self, call: DirectCall) -> None:
        self._call = call
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[StreamDelta | StreamEnd | BaseException | None] = asyncio.Queue()
        self._stop = threading.Event()
        # The request's log keys (its correlation id) go with the work into the thread.
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._run,), name="chat-stream", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                item = self._call.next_event()
                self._hand_over(item)
                if item is None or isinstance(item, StreamEnd):
                    return
        except BaseException as exc:  # handed to the loop, which raises it in the answer
            self._hand_over(exc)

    def _hand_over(self, item: StreamDelta | StreamEnd | BaseException | None) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the loop is gone: nobody is reading any more
            self._stop.set()

    async def next(self) -> StreamDelta | StreamEnd | None:
        item = await self._queue.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def stop(self) -> None:
        self._stop.set()

    def join(self) -> None:
        self._stop.set()
        self._thread.join()


class _Stream:
    """One streamed answer: its call, its pump once started, how it ended."""

    def __init__(self, call: DirectCall) -> None:
        self.call = call
        self.pump: _Pump | None = None
        self.error: str | None = "client_disconnected"

    def start(self) -> _Pump:
        self.pump = _Pump(self.call)
        return self.pump

    def finish(self) -> None:
        """Stop reading the provider, then close it if it is still going and settle, once."""
        if self.pump is not None:
            self.pump.join()
        call = self.call
        call.finish(error=self.error if not call.finished else None)

    async def settle(self, refused: PermanentProviderError | None = None) -> None:
        """Settle before the answer's last event (on AWS nothing runs after the last byte),
        shielded from a disconnect meanwhile. A refusal before any output (Gemini's blocked
        prompt) releases the hold whole, as a refusal before the first byte does. A failed
        settlement is logged: the answer stands, and the sweeper settles the hold."""
        with anyio.CancelScope(shield=True):
            try:
                if refused is not None and not self.call.completion_tokens:
                    await anyio.to_thread.run_sync(self.call.abandon, f"{PROVIDER_REJECTED}: {refused.code}")
                await anyio.to_thread.run_sync(self.finish)
            except Exception:
                logger.exception("settling a chat stream failed", extra={"batch_id": self.call.batch_id})


async def _events(stream: _Stream) -> AsyncIterator[bytes]:
    """The SSE body: a role chunk at once (the provider's first byte has arrived), one chunk
    per delta as it comes, the finish chunk, the usage chunk (include_usage), [DONE]."""
    call = stream.call
    request = call.request
    include_usage = request.include_usage
    served = ServedBy(call.completion_id, call.created, request.model, call.provider)

    def event(
        delta: DeltaView | None = None, finish_reason: str | None = None, usage: UsageView | None = None
    ) -> bytes:
        return sse(
            chunk(served, delta=delta, finish_reason=finish_reason, usage=usage, include_usage=include_usage)
        )

    pump = stream.pump or stream.start()
    try:
        yield event(delta={"role": "assistant", "content": ""})
        streamed_calls = streamed_refusal = False
        while True:
            item = await pump.next()
            if isinstance(item, StreamDelta):
                delta = _delta(item)
                streamed_calls = streamed_calls or bool(item.tool_calls)
                streamed_refusal = streamed_refusal or bool(item.refusal)
                if delta:
                    yield event(delta=delta)
            elif isinstance(item, StreamEnd) or item is None:
                break
        # An adapter that learns of calls (or a refusal) only at the end: sent whole, once.
        calls = [] if streamed_calls else call.tool_calls
        refusal = None if streamed_refusal else call.refusal
        if calls or refusal:
            rest: DeltaView = {"tool_calls": tool_call_chunks(calls)} if calls else {}
            if refusal:
                rest["refusal"] = refusal
            yield event(delta=rest)
        yield event(delta={}, finish_reason=call.finish_reason)
        if include_usage:
            usage = call.usage_so_far()
            yield event(
                usage=usage_object(usage.prompt_tokens, usage.completion_tokens, usage.cached_input_tokens)
            )
        stream.error = None
        await stream.settle()
        yield DONE_EVENT
    except Exception as exc:  # one error event ends the answer (no [DONE]); what was generated is charged
        if isinstance(exc, ProviderError):
            extra = {"batch_id": call.batch_id, "lane": call.lane.lane_id, "code": exc.code}
            logger.warning("provider failed mid-stream", extra=extra)
        else:
            logger.exception("chat stream failed", extra={"batch_id": call.batch_id})
        stream.error = "stream_failed"
        await stream.settle(exc if isinstance(exc, PermanentProviderError) else None)
        yield _stream_error(call, exc)
    finally:
        pump.stop()  # a stream the client left is settled by its response (ChatEventStream)


def _delta(item: StreamDelta) -> DeltaView:
    """A provider delta as a chunk's `delta` (empty when it adds nothing)."""
    delta: DeltaView = {}
    if item.text:
        delta["content"] = item.text
    if item.tool_calls:
        delta["tool_calls"] = [cast(ToolCallChunkView, fragment.to_dict()) for fragment in item.tool_calls]
    if item.refusal:
        delta["refusal"] = item.refusal
    return delta


class ChatEventStream(StreamingResponse):
    """An SSE answer that, however it ends, closes its body generator, stops and closes the
    upstream call if still going, and settles the hold if its body has not (a client that
    went away; an answer that ended settled it before its last event: `_Stream.settle`)."""

    def __init__(self, body: AsyncIterator[bytes], stream: _Stream, *, headers: dict[str, str]) -> None:
        super().__init__(
            body,
            media_type="text/event-stream",
            headers={**headers, "cache-control": "no-cache", "x-accel-buffering": "no"},
        )
        self._body = body
        self._stream = stream

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                aclose = getattr(self._body, "aclose", None)
                try:
                    if aclose is not None:
                        await aclose()
                finally:
                    await anyio.to_thread.run_sync(self._stream.finish)
