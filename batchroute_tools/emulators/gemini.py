"""An emulator of Google's Gemini API (the Generative Language API, v1beta), the catalog's
`google` provider (docs/emulators.md).

Routes (under the vendor's prefix, `/google` by default; `<m>` is a model id):

- `POST /v1beta/models/<m>:generateContent`: a GenerateContentResponse;
- `POST /v1beta/models/<m>:streamGenerateContent?alt=sse`: server-sent events, each a
  GenerateContentResponse chunk with one piece of the text; the last carries the
  finishReason and the final usageMetadata, and the stream ends by closing (no [DONE]);
- `POST /v1beta/models/<m>:embedContent` ({embedding}), `:batchEmbedContents` ({embeddings},
  at most 100 requests);
- `GET /v1beta/models`, `GET /v1beta/models/<m>`: the models this emulator serves;
- batch mode: `POST /v1beta/models/<m>:batchGenerateContent` (inlined requests, each with a
  `metadata.key`), `GET /v1beta/batches/<id>` (the batch's long-running operation: metadata
  state BATCH_STATE_*, batchStats, and once done the inlined responses in `metadata.output`
  and `response`), `POST /v1beta/batches/<id>:cancel`, `DELETE /v1beta/batches/<id>`, and
  `GET /v1beta/batches` (a ListOperationsResponse: `operations`, each the operation `GET
  /v1beta/batches/<id>` answers, and `nextPageToken` while more follow). Google documents no
  order for it (the emulator lists by resource name, random ids: no order the adapter could
  lean on) and `pageSize` only as "the standard list page size", so it pages as Google's
  AIP-158 has a list page: none or 0 is the default (10), more than the maximum (100) is
  coerced down to it (both figures files.list's, the same API's documented ones), a negative
  one is 400 INVALID_ARGUMENT (its message ours), a value that is no int32 Google's 400
  "Invalid value at 'page_size' (TYPE_INT32)", both with a google.rpc.BadRequest naming
  `page_size`; `pageToken` is opaque (one it did not give: 400 INVALID_ARGUMENT, modelled).

Every call needs a key (`x-goog-api-key`, or `?key=`): without one, 403 PERMISSION_DENIED.
Errors have Google's shape, `{"error": {"code", "message", "status"}}`. Every request body is
checked against the contract the adapter's bodies are checked against
(batchroute_tools/contracts/gemini.py `request_violations`: the google-genai SDK's request
types and the API's own rules): a body Google would refuse (an unknown field, a sixth stop
sequence, an OpenAI-style `{"type": ...}` tool, a call turn without its answers...) gets
Google's 400 INVALID_ARGUMENT, every violation in the message and as a google.rpc.BadRequest's
`fieldViolations`. JSON answers are `application/json; charset=UTF-8`, and leave out what
Google's proto JSON leaves out (a candidate's `index` 0, zero batch counts, `done` before the
batch is done).

Built-in tools run deterministically: a request declaring `googleSearch` is answered
grounded (the candidate's `groundingMetadata`: the search query, one web source, its support
of the text), one declaring `codeExecution` with an `executableCode` part and its
`codeExecutionResult` before the text (in a stream: the code in the first chunk, the
grounding with the finish reason in the last). A request that forces a function call
(`toolConfig.functionCallingConfig.mode` `ANY`: the first of its `allowedFunctionNames` it
declares, or its first declared function) is answered with that call (`forced_call`), as
Gemini answers: the candidate's one part `{functionCall: {name, args}}` (args valid under
its parameters; no `id`: the Gemini API leaves it out), finishReason STOP, usage as for
text; streamed, one chunk holding it all. `AUTO`, `NONE`, `VALIDATED` or no toolConfig:
text. A batch cancel ends the batch BATCH_STATE_CANCELLED at once: Gemini's batch states
have no cancelling one (the SDK's JOB_STATE_CANCELLING is Vertex AI's).

Implicit caching (cache.py): a prompt prefix seen within the cache lifetime is reported in
`usageMetadata.cachedContentTokenCount` (Gemini 2.5 and newer).

Answers, usage and faults come from `behaviour.py`, written the way Google answers:

    fault          HTTP answer                                 in a batch job
    fail           400 INVALID_ARGUMENT                        error {code: 3}
    transient/5xx  500 INTERNAL                                error {code: 13}
    rate_limited   429 RESOURCE_EXHAUSTED, google.rpc.RetryInfo error {code: 8}
                   retryDelay 0.2s (Google's way) + retry-after: 1
    overloaded     503 UNAVAILABLE "The model is overloaded"   error {code: 14}
    down           the connection is dropped                   its create dropped (injected:
                                                               error {code: 14})
    reset          a stream is reset after its second event    answered
    timeout        a stream sends no first byte                answered
    expire         -                                           the job ends BATCH_STATE_EXPIRED
                                                               with the other responses
    malformed      -                                           left out the first time

Batch results are inlined JSON, with no line to break: a `malformed` request's response is
left out of the job's answers the first time (the job still succeeds), as a lost result
would be; the adapter reports no result for it and the lane resubmits it.

Tests parse every answer with the official google-genai SDK (driven against this server),
so the emulator cannot drift from its types. A batch job is pending at its creation, then
running for the configured batch seconds (by the injected clock), then done.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final

from batchroute_tools.contracts.gemini import request_violations, warm
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
from batchroute_tools.emulators.cache import PromptCache, gemini_rule
from batchroute_tools.emulators.server import Handler, Reply, Request, Vendor, sse

Clock = Callable[[], float]  # seconds since the epoch

GEMINI_MODELS: Final = (
    "gemini-2.0-flash-001",
    "gemini-1.5-flash-002",
    "gemini-2.5-flash",
    "gemini-2.5-pro",
    "text-embedding-004",
    "gemini-embedding-001",
)
MAX_EMBED_BATCH: Final = 100
# `GET /v1beta/batches`: Google documents no page size figures for it ("The standard list page
# size"); these are files.list's, documented for the same API ("If unspecified, defaults to 10.
# Maximum `pageSize` is 100.").
LIST_PAGE_SIZE_DEFAULT: Final = 10
LIST_PAGE_SIZE_MAX: Final = 100
_MODEL: Final = r"(?P<model>[A-Za-z0-9._-]+)"
_BATCH: Final = r"(?P<batch>[A-Za-z0-9_-]+)"
_TYPES: Final = "type.googleapis.com/google.ai.generativelanguage.v1beta."
JSON_TYPE: Final = "application/json; charset=UTF-8"  # as Google labels its JSON
# Fault -> (google.rpc.Code, its name) of a failed inlined batch response.
_BATCH_ERRORS: Final[dict[str, tuple[int, str]]] = {
    "fail": (3, "INVALID_ARGUMENT"),
    "transient": (13, "INTERNAL"),
    "5xx": (13, "INTERNAL"),
    "rate_limited": (8, "RESOURCE_EXHAUSTED"),
    "overloaded": (14, "UNAVAILABLE"),
    "down": (14, "UNAVAILABLE"),
}


def reply(status: int, body: Any, headers: Mapping[str, str] | None = None) -> Reply:
    """A JSON answer, labelled as Google labels it."""
    return Reply.json(status, body, {"content-type": JSON_TYPE, **(headers or {})})


def error_reply(code: int, message: str, status: str, *, headers: Mapping[str, str] | None = None) -> Reply:
    return reply(code, {"error": {"code": code, "message": message, "status": status}}, headers)


def invalid_reply(violations: list[str]) -> Reply:
    """Google's 400 for a request it refuses: INVALID_ARGUMENT, the violations in the message
    and as a google.rpc.BadRequest's fieldViolations."""
    fields = [
        {"field": found.split(": ", 1)[0], "description": found.split(": ", 1)[-1]} for found in violations
    ]
    return bad_request("Invalid JSON payload received. " + "\n".join(f"* {v}" for v in violations), fields)


def bad_request(message: str, fields: list[dict[str, str]]) -> Reply:
    """400 INVALID_ARGUMENT with the fields at fault as a google.rpc.BadRequest's fieldViolations."""
    error = {
        "code": 400,
        "message": message,
        "status": "INVALID_ARGUMENT",
        "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": fields}],
    }
    return reply(400, {"error": error})


def fault_reply(fault: Fault | None) -> Reply | None:
    """The HTTP answer of a fault, as Google gives it, before any answer; None for no fault and
    for faults met later (a stream's reset)."""
    if fault is None:
        return None
    if fault.kind == "timeout":
        return Reply(200, {"content-type": "text/event-stream"}, delay_headers=3600.0)
    if fault.kind == "down":
        return Reply.dropped()
    if fault.kind == "fail":
        return error_reply(400, fault.message, "INVALID_ARGUMENT")
    if fault.kind in ("transient", "5xx"):
        return error_reply(500, fault.message, "INTERNAL")
    if fault.kind == "rate_limited":
        retry = {
            "@type": "type.googleapis.com/google.rpc.RetryInfo",
            "retryDelay": f"{RETRY_AFTER_MS / 1000}s",
        }
        body = {
            "error": {
                "code": 429,
                "message": fault.message,
                "status": "RESOURCE_EXHAUSTED",
                "details": [retry],
            }
        }
        return reply(429, body, {"retry-after": "1"})
    if fault.kind == "overloaded":
        return error_reply(503, f"The model is overloaded. {fault.message}", "UNAVAILABLE")
    return None


@dataclass(frozen=True)
class HostedTools:
    """The built-in tools a request declares, run deterministically: Google Search grounds
    the answer (groundingMetadata: the query, one web source, the support of the answer's
    text), code execution runs one snippet (an executableCode part, then its
    codeExecutionResult)."""

    grounding: bool = False
    code: bool = False
    query: str = ""

    @classmethod
    def of(cls, body: Mapping[str, Any], work: Work) -> HostedTools:
        tools = [_mapping(t) for t in body.get("tools") or []]
        users = [m for m in work.messages if m.get("role") == "user"]
        last: Mapping[str, Any] = users[-1] if users else {}
        content = last.get("content")
        text = (
            content
            if isinstance(content, str)
            else " ".join(str(p.get("text", "")) for p in content or [] if isinstance(p, Mapping))
        )
        return cls(
            grounding=any("googleSearch" in t for t in tools),
            code=any("codeExecution" in t for t in tools),
            query=" ".join(text.split()[:8]) or "search",
        )

    def code_parts(self) -> list[dict[str, Any]]:
        if not self.code:
            return []
        return [
            {"executableCode": {"language": "PYTHON", "code": f"print(len({self.query!r}))"}},
            {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": f"{len(self.query)}\n"}},
        ]

    def grounding_metadata(self, text: str) -> dict[str, Any]:
        slug = "-".join(self.query.lower().split()[:4]) or "search"
        return {
            "searchEntryPoint": {"renderedContent": f'<div class="container">{self.query}</div>'},
            "groundingChunks": [
                {"web": {"uri": f"https://example.com/search/{slug}", "title": "example.com"}}
            ],
            "groundingSupports": [
                {
                    "segment": {"endIndex": len(text.encode()), "text": text},
                    "groundingChunkIndices": [0],
                    "confidenceScores": [0.9],
                }
            ],
            "webSearchQueries": [self.query],
        }


@dataclass
class _Job:
    name: str  # batches/<id>
    model: str  # models/<id>
    display_name: str
    created_at: float
    requests: list[dict[str, Any]]  # the inlined requests as sent: {request, metadata}
    finished: str | None = None  # SUCCEEDED | EXPIRED | CANCELLED
    ended_at: float | None = None
    responses: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {"done": 0, "ok": 0, "failed": 0})


class GeminiEmulator:
    def __init__(
        self,
        behaviour: Behaviour,
        *,
        provider: str = "google",
        prefix: str = "/google",
        models: tuple[str, ...] = GEMINI_MODELS,
        clock: Clock = time.time,
    ) -> None:
        self.behaviour = behaviour
        self.provider = provider
        self.models = models  # () serves any model name
        self.clock = clock
        self.cache = PromptCache(clock)
        self._lock = threading.Lock()
        self._jobs: dict[str, _Job] = {}
        self.vendor = Vendor(prefix)
        routes: list[tuple[str, str, Handler]] = [
            ("POST", rf"/v1beta/models/{_MODEL}:generateContent", self.generate),
            ("POST", rf"/v1beta/models/{_MODEL}:streamGenerateContent", self.generate),
            ("POST", rf"/v1beta/models/{_MODEL}:embedContent", self.embed),
            ("POST", rf"/v1beta/models/{_MODEL}:batchEmbedContents", self.embed),
            ("GET", r"/v1beta/models", self.list_models),
            ("GET", rf"/v1beta/models/{_MODEL}", self.get_model),
            ("POST", rf"/v1beta/models/{_MODEL}:batchGenerateContent", self.create_batch),
            ("GET", r"/v1beta/batches", self.list_batches),
            ("GET", rf"/v1beta/batches/{_BATCH}", self.get_batch),
            ("POST", rf"/v1beta/batches/{_BATCH}:cancel", self.cancel_batch),
            ("DELETE", rf"/v1beta/batches/{_BATCH}", self.delete_batch),
        ]
        for method, pattern, handler in routes:
            self.vendor.route(method, pattern)(self._keyed(handler))
        threading.Thread(target=warm, name="gemini-contract-warm", daemon=True).start()

    def _keyed(self, handler: Handler) -> Handler:
        def checked(request: Request) -> Reply:
            if not (request.headers.get("x-goog-api-key") or request.query.get("key")):
                return error_reply(
                    403,
                    "Method doesn't allow unregistered callers (callers without established identity)."
                    " Please use API Key or other form of API consumer identity to call this API.",
                    "PERMISSION_DENIED",
                )
            if self.provider in self.behaviour.config.providers_down:
                return Reply.dropped()
            model = request.params.get("model")
            if model is not None and self.models and model not in self.models:
                return error_reply(
                    404,
                    f"models/{model} is not found for API version v1beta, or is not supported."
                    " Call ListModels to see the list of available models and their supported methods.",
                    "NOT_FOUND",
                )
            return handler(request)

        return checked

    # -- generateContent ----------------------------------------------------------------
    def work(self, model: str, body: Mapping[str, Any], *, stream: bool = False) -> Work:
        """What behaviour.py answers: the request's turns as chat messages (the system
        instruction first) and its output limit."""
        messages: list[dict[str, Any]] = []
        system = _mapping(body.get("systemInstruction"))
        if system:
            messages.append({"role": "system", "content": _message_content(system.get("parts"))})
        for content in body.get("contents") or []:
            role = "assistant" if content.get("role") == "model" else "user"
            messages.append({"role": role, "content": _message_content(content.get("parts"))})
        config = _mapping(body.get("generationConfig"))
        schema = _mapping(config.get("responseJsonSchema") or config.get("responseSchema"))
        json_out = config.get("responseMimeType") == "application/json"
        return Work(
            self.provider,
            model,
            "chat",
            messages=tuple(messages),
            max_tokens=int(config.get("maxOutputTokens") or 8192),
            stream=stream,
            stops=stop_sequences(config.get("stopSequences")),
            answer_schema=schema if json_out else None,  # JSON out: the schema, or any object
        )

    def generate(self, request: Request) -> Reply:
        stream = request.path.endswith(":streamGenerateContent")
        if stream and request.query.get("alt") != "sse":
            return error_reply(
                400, "this emulator streams server-sent events only: add alt=sse", "INVALID_ARGUMENT"
            )
        body = _json(request)
        violations = request_violations("generateContent", body)
        if violations:
            return invalid_reply(violations)
        work = self.work(request.params["model"], body, stream=stream)
        fault = self.behaviour.fault(work)
        refusal = fault_reply(fault)
        if refusal is not None:
            return refusal
        answer = self.answer(work)
        tools = HostedTools.of(body, work)
        call = forced_call(body)
        if not stream:
            self.behaviour.think()
            return reply(200, self.response(work, answer, tools, call))
        reset = 2 if fault is not None and fault.kind == "reset" else None
        if call is not None:  # Gemini streams a function call whole, in one chunk
            whole = self.response(work, answer, tools, call)
            return Reply.stream([(self.behaviour.config.ttft_seconds, sse(None, whole))])
        return Reply.stream(self._chunks(work, answer, tools), reset_after=reset)

    def answer(self, work: Work) -> Answer:
        """Behaviour's answer, its cached prompt tokens those Gemini's implicit caching would
        report (cache.py): none for a model without it."""
        answer = self.behaviour.answer(work)
        rule = gemini_rule(work.model)
        if rule is None:
            return answer
        scope = f"{self.provider}\n{work.model}"
        return replace(answer, cache_read_tokens=self.cache.automatic(scope, work.messages, rule))

    @staticmethod
    def response(
        work: Work,
        answer: Answer,
        tools: HostedTools | None = None,
        call: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A GenerateContentResponse: the code execution's parts before the answer's text,
        the search grounding's metadata on the candidate (zero values left out, as Google's
        proto JSON leaves them out: no candidate `index` 0); `call`: a forced function call
        (`forced_call`), the candidate's only part, finishReason STOP."""
        ran = tools or HostedTools()
        candidate: dict[str, Any] = {
            "content": {"parts": [*ran.code_parts(), {"text": answer.content}], "role": "model"},
            "finishReason": _finish(answer),
        }
        if call is not None:
            candidate = {"content": {"parts": [call], "role": "model"}, "finishReason": "STOP"}
        elif ran.grounding:
            candidate["groundingMetadata"] = ran.grounding_metadata(answer.content)
        return {
            "candidates": [candidate],
            "usageMetadata": _usage(answer),
            "modelVersion": work.model,
            "responseId": answer.ident,
        }

    def _chunks(self, work: Work, answer: Answer, tools: HostedTools) -> Iterator[tuple[float, bytes]]:
        """The stream: the code execution's parts in the first chunk, the grounding metadata
        with the finish reason in the last."""
        config = self.behaviour.config
        last = len(answer.pieces) - 1
        for i, piece in enumerate(answer.pieces):
            parts = [*(tools.code_parts() if i == 0 else []), {"text": piece}]
            candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
            usage = {"promptTokenCount": answer.prompt_tokens, "totalTokenCount": answer.prompt_tokens}
            if i == last:
                candidate["finishReason"] = _finish(answer)
                if tools.grounding:
                    candidate["groundingMetadata"] = tools.grounding_metadata(answer.content)
                usage = _usage(answer)
            chunk = {
                "candidates": [candidate],
                "usageMetadata": usage,
                "modelVersion": work.model,
                "responseId": answer.ident,
            }
            yield (config.ttft_seconds if i == 0 else config.inter_token_seconds), sse(None, chunk)

    # -- embeddings ---------------------------------------------------------------------
    def embed(self, request: Request) -> Reply:
        body = _json(request)
        model = request.params["model"]
        single = request.path.endswith(":embedContent")
        violations = request_violations("embedContent" if single else "batchEmbedContents", body)
        entries = [body] if single else _mapping(body).get("requests")
        if not violations and not single:
            violations = [
                f"requests[{i}].model: the model in the request must be models/{model}, as the URL says"
                for i, entry in enumerate(entries or [])
                if entry.get("model") != f"models/{model}"
            ]
        if violations:
            return invalid_reply(violations)
        texts = tuple(_message_content(e["content"]["parts"]) for e in entries or [])
        work = Work(self.provider, model, "embeddings", inputs=tuple(str(t) for t in texts))
        refusal = fault_reply(self.behaviour.fault(work))
        if refusal is not None:
            return refusal
        self.behaviour.think()
        answer = self.behaviour.answer(work)
        vectors = [
            {"values": list(vector[: _int(entry.get("outputDimensionality")) or None])}
            for entry, vector in zip(entries or [], answer.vectors, strict=True)
        ]
        return reply(200, {"embedding": vectors[0]} if single else {"embeddings": vectors})

    # -- models -------------------------------------------------------------------------
    def list_models(self, request: Request) -> Reply:
        return reply(200, {"models": [_model_object(m) for m in self.models]})

    def get_model(self, request: Request) -> Reply:
        return reply(200, _model_object(request.params["model"]))

    # -- batch mode ---------------------------------------------------------------------
    def create_batch(self, request: Request) -> Reply:
        body = _json(request)
        violations = request_violations("batchGenerateContent", body)
        if violations:
            return invalid_reply(violations)
        batch = _mapping(body.get("batch"))
        source = _mapping(batch.get("inputConfig"))
        if "fileName" in source:
            return error_reply(400, "this emulator takes inlined requests only", "INVALID_ARGUMENT")
        entries = _mapping(source.get("requests")).get("requests") or []
        model = str(request.params["model"])
        asked = (self.work(model, _mapping(_mapping(e).get("request"))) for e in entries)
        if DOWN_MARK in request.body and any(self.behaviour.down(work) for work in asked):
            return Reply.dropped()  # the provider is down: the batch is never made
        job = _Job(
            f"batches/{uuid.uuid4().hex[:20]}",
            f"models/{request.params['model']}",
            str(batch.get("displayName") or ""),
            self.clock(),
            [dict(e) for e in entries],
        )
        with self._lock:
            self._jobs[job.name] = job
        return reply(200, self._operation(job))

    def get_batch(self, request: Request) -> Reply:
        job = self._job(request)
        return _no_batch(request) if job is None else reply(200, self._operation(job))

    def list_batches(self, request: Request) -> Reply:
        """A ListOperationsResponse page of the batches, by resource name (module docstring)."""
        raw = request.query.get("pageSize", "0")
        size = int(raw) if re.fullmatch(r"-?\d{1,10}", raw) and -(2**31) <= int(raw) < 2**31 else None
        if size is None:
            message = f"Invalid value at 'page_size' (TYPE_INT32), \"{raw}\""
            return bad_request(message, [{"field": "page_size", "description": message}])
        if size < 0:
            message = "page_size must not be negative"
            return bad_request(message, [{"field": "page_size", "description": message}])
        after = _page_token_name(request.query.get("pageToken", ""))
        if after is None:
            return error_reply(400, "Invalid page token.", "INVALID_ARGUMENT")
        with self._lock:
            following = [self._jobs[name] for name in sorted(self._jobs) if name > after]
        page = following[: min(size or LIST_PAGE_SIZE_DEFAULT, LIST_PAGE_SIZE_MAX)]
        for job in page:
            self._advance(job)
        body: dict[str, Any] = {"operations": [self._operation(job) for job in page]}
        if len(following) > len(page):  # Google leaves the token out on the last page
            body["nextPageToken"] = base64.urlsafe_b64encode(page[-1].name.encode()).decode()
        return reply(200, body)

    def cancel_batch(self, request: Request) -> Reply:
        job = self._job(request)
        if job is None:
            return _no_batch(request)
        with self._lock:
            if job.finished not in (None, "CANCELLED"):
                return error_reply(400, f"{job.name} has already finished", "FAILED_PRECONDITION")
            if job.finished is None:
                job.finished, job.ended_at = "CANCELLED", self.clock()
        return reply(200, {})

    def delete_batch(self, request: Request) -> Reply:
        with self._lock:
            job = self._jobs.pop(f"batches/{request.params['batch']}", None)
        return _no_batch(request) if job is None else reply(200, {})

    def _job(self, request: Request) -> _Job | None:
        """The batch a request names, run as far as the clock says; None for an unknown one."""
        job = self._jobs.get(f"batches/{request.params['batch']}")
        if job is not None:
            self._advance(job)
        return job

    def _advance(self, job: _Job) -> None:
        """Run the job as far as the clock says: done once `batch_seconds` have passed."""
        with self._lock:
            if job.finished is not None:
                return
            elapsed = self.clock() - job.created_at
            total = len(job.requests)
            duration = self.behaviour.config.batch_seconds
            if elapsed < duration:
                job.counts["done"] = int(total * elapsed / duration)
                return
            expired, ok, failed = False, 0, 0
            for entry in job.requests:
                row = self._run(job, entry)
                if row is None:
                    expired = True
                    continue
                failed += "error" in row
                ok += "error" not in row  # a left-out (malformed) one too: the loss is in the answer
                if row:
                    job.responses.append(row)
            job.counts = {"done": ok + failed, "ok": ok, "failed": failed}
            job.finished, job.ended_at = ("EXPIRED" if expired else "SUCCEEDED"), self.clock()

    def _run(self, job: _Job, entry: Mapping[str, Any]) -> dict[str, Any] | None:
        """One inlined response; {} when it is left out (malformed), None when the job
        expires before it."""
        metadata = _mapping(entry.get("metadata"))
        work = self.work(job.model.removeprefix("models/"), _mapping(entry.get("request")))
        fault = self.behaviour.fault(work, in_batch=True)
        kind = fault.kind if fault is not None else None
        if kind == "expire":
            return None
        if kind == "malformed":
            return {}
        if fault is not None and fault.kind in _BATCH_ERRORS:
            code, _ = _BATCH_ERRORS[fault.kind]
            return {"error": {"code": code, "message": fault.message}, "metadata": dict(metadata)}
        request = _mapping(entry.get("request"))
        answer = self.answer(work)
        response = self.response(work, answer, HostedTools.of(request, work), forced_call(request))
        return {"response": response, "metadata": dict(metadata)}

    def _operation(self, job: _Job) -> dict[str, Any]:
        """The batch's long-running operation, as create and get answer it."""
        now = self.clock()
        total = len(job.requests)
        state = job.finished or ("RUNNING" if now > job.created_at else "PENDING")
        ok = job.counts["ok"] if job.finished else job.counts["done"]
        metadata: dict[str, Any] = {
            "@type": _TYPES + "GenerateContentBatch",
            "model": job.model,
            "displayName": job.display_name,
            "createTime": _timestamp(job.created_at),
            "updateTime": _timestamp(job.ended_at or now),
            "batchStats": _counts(
                requestCount=total,
                successfulRequestCount=ok,
                failedRequestCount=job.counts["failed"],
                pendingRequestCount=max(0, total - ok - job.counts["failed"]),
            ),
            "state": f"BATCH_STATE_{state}",
            "name": job.name,
        }
        operation: dict[str, Any] = {"name": job.name, "metadata": metadata}
        if job.finished is not None:  # Google leaves `done` out until it is true
            operation["done"] = True
        if job.ended_at is not None:
            metadata["endTime"] = _timestamp(job.ended_at)
        if job.finished in ("SUCCEEDED", "EXPIRED"):
            output = {"inlinedResponses": {"inlinedResponses": job.responses}}
            metadata["output"] = output
            operation["response"] = {"@type": _TYPES + "GenerateContentBatchOutput", **output}
        return operation


def forced_call(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The `functionCall` part of the call a generateContent body forces
    (`toolConfig.functionCallingConfig.mode` ANY): the first of its `allowedFunctionNames`
    that it declares, else its first declared function, with args valid under its parameters;
    None otherwise."""
    config = _mapping(_mapping(body.get("toolConfig")).get("functionCallingConfig"))
    if config.get("mode") != "ANY":
        return None
    schemas = {
        str(_mapping(d).get("name")): _mapping(d).get("parameters") or _mapping(d).get("parametersJsonSchema")
        for t in body.get("tools") or []
        for d in _mapping(t).get("functionDeclarations") or []
    }
    allowed = [n for n in config.get("allowedFunctionNames") or [] if n in schemas]
    names = allowed or list(schemas)
    return {"functionCall": {"name": names[0], "args": call_arguments(schemas[names[0]])}} if names else None


def _message_content(parts: object) -> str | list[dict[str, Any]]:
    """Gemini parts as a chat-completions content (what behaviour.py reads): the text, or
    text and image parts; function calls and responses count as their JSON text."""
    listed = [_mapping(p) for p in parts] if isinstance(parts, list) else []
    if all(isinstance(p.get("text"), str) for p in listed):
        return "".join(str(p["text"]) for p in listed)
    content: list[dict[str, Any]] = []
    for part in listed:
        if isinstance(part.get("text"), str):
            content.append({"type": "text", "text": part["text"]})
        elif "inlineData" in part or "fileData" in part:
            content.append({"type": "image_url", "image_url": {"url": "(image)"}})
        else:
            content.append({"type": "text", "text": json.dumps(part, sort_keys=True)})
    return content


def _model_object(model: str) -> dict[str, Any]:
    embedding = "embedding" in model
    found: dict[str, Any] = {
        "name": f"models/{model}",
        "version": "001",
        "displayName": model,
        "description": f"Emulated {model}",
        "inputTokenLimit": 2048 if embedding else 1_048_576,
        "outputTokenLimit": 1 if embedding else 8192,
        "supportedGenerationMethods": (
            ["embedContent", "batchEmbedContents"]
            if embedding
            else ["generateContent", "countTokens", "batchGenerateContent"]
        ),
    }
    if not embedding:
        found.update({"temperature": 1.0, "topP": 0.95, "topK": 40, "maxTemperature": 2.0})
    return found


def _counts(**counts: int) -> dict[str, str]:
    """BatchStats: int64 counts as JSON strings, the zero ones left out (proto JSON)."""
    return {name: str(count) for name, count in counts.items() if count}


def _finish(answer: Answer) -> str:
    return "MAX_TOKENS" if answer.finish == "length" else "STOP"


def _usage(answer: Answer) -> dict[str, int]:
    """Proto JSON leaves a zero count out: `cachedContentTokenCount` only on a cache hit."""
    cached = {"cachedContentTokenCount": answer.cache_read_tokens} if answer.cache_read_tokens else {}
    return {
        "promptTokenCount": answer.prompt_tokens,
        **cached,
        "candidatesTokenCount": answer.completion_tokens,
        "totalTokenCount": answer.prompt_tokens + answer.completion_tokens,
    }


def _no_batch(request: Request) -> Reply:
    return error_reply(404, f"Batch batches/{request.params['batch']} not found.", "NOT_FOUND")


def _page_token_name(token: str) -> str | None:
    """The batch a `nextPageToken` this emulator gave lists after ("" before every one); None
    for a token it did not give."""
    if not token:
        return ""
    try:
        name = base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    return name if re.fullmatch(rf"batches/{_BATCH}", name) else None


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _json(request: Request) -> Any:
    try:
        return request.json()
    except ValueError:
        return None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
