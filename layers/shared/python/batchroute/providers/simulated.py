"""Simulated providers for local mode and tests: both kinds, deterministic, no network.

Every answer is a pure function of (provider slug, model, operation, request input):
the same item gets the same text, vector and usage on every run and every attempt. Only
the markers look at the attempt. Markers, anywhere in the request input:

- `[simulate:fail]`: PermanentProviderError on every attempt (the item fails);
- `[simulate:transient]`: TransientProviderError on attempt 1, success from attempt 2;
- `[simulate:down]`: ProviderUnavailable (the whole lane is down: fail over);
  `[simulate:down:<slug>]` takes down only that provider, so failover succeeds.
- `[simulate:5xx:<slug>]`: a stream of that provider answers a server error before its
  first byte (TransientProviderError `provider_5xx`): the direct chat path fails over.
- `[simulate:timeout:<slug>]`: a stream of that provider sends no first byte: it waits the
  request's `first_byte_timeout_seconds` and gives up (TransientProviderError
  `first_byte_timeout`), as a real adapter's HTTP read time-out would. A stream whose
  configured time to first token exceeds that time-out gives up the same way.
- `[simulate:wrong:<slug>]`: that provider answers the fixed WRONG_ANSWER text instead of its
  usual one (a lane that answers wrongly: golden-set regression, docs/schedules.md).
- `[simulate:stuck_batch]`: a vendor batch job holding it never finishes: it reports
  `in_progress` with 40 % of its requests done (STUCK_DONE_PERCENT; the setting
  `simulated_stuck_batch_percent`) until it is cancelled
  (a late vendor: deadline rescue, docs/batches.md). A cancelled job keeps the results of
  the requests it had done (the first ones), as OpenAI leaves a cancelled batch's partial
  results in its output file.

A chat item whose tool_choice forces a function call (`required`: its first function, or one
named) is answered with that call, empty arguments (`{}`), finish_reason `tool_calls`; a
stream sends it as OpenAI streams a call (forced_function).

Usage: prompt tokens are the quote's conservative estimate of the input
(domain/routing/items.py); completion tokens are min(max_output_tokens, 16 + hash % 64), or the
configured fixed number. Embeddings are deterministic unit vectors of
EMBEDDING_DIMENSIONS floats. `raw` has the provider's native shape: OpenAI-like for OpenAI
and the open-weight hosts, an Anthropic message for Anthropic, a Gemini response for Google.

Latency uses an injected sleeper, and the vendor batch simulator an injected clock, so
unit tests never sleep. Simulated batch jobs live in this process's memory (the local
stack runs every function in one process); a restarted stack forgets them and `poll`
raises UnknownJob, on which the lane runner resubmits. docs/providers.md has the details.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from batchroute.clock import Clock, SystemClock
from batchroute.config import Settings
from batchroute.domain.catalog import tokens
from batchroute.domain.routing.items import read_item
from batchroute.providers import base
from batchroute.providers.conversation import conversation

MARKER_FAIL: Final = "[simulate:fail]"
MARKER_TRANSIENT: Final = "[simulate:transient]"
MARKER_DOWN: Final = "[simulate:down]"
MARKER_STUCK_BATCH: Final = "[simulate:stuck_batch]"
STUCK_DONE_PERCENT: Final = 40
_MARKER_DOWN_FOR: Final = re.compile(r"\[simulate:down:([A-Za-z0-9_.-]+)\]")
WRONG_ANSWER: Final = "Simulated wrong answer."  # [simulate:wrong:<slug>]
_MARKER_5XX_FOR: Final = re.compile(r"\[simulate:5xx:([A-Za-z0-9_.-]+)\]")
_MARKER_TIMEOUT_FOR: Final = re.compile(r"\[simulate:timeout:([A-Za-z0-9_.-]+)\]")

EMBEDDING_DIMENSIONS: Final = 16
COMPLETION_BASE_TOKENS: Final = 16
SIMULATED_CALL_TOKENS: Final = 8  # a forced function call's output tokens
COMPLETION_SPREAD_TOKENS: Final = 64
# Simulated jobs older than this are dropped from memory at the next submit.
_JOB_MEMORY: Final = timedelta(hours=48)

NativeShape = Literal["openai", "anthropic", "gemini"]

_WORDS: Final = (
    "the",
    "batch",
    "lane",
    "routes",
    "every",
    "item",
    "through",
    "a",
    "provider",
    "that",
    "answers",
    "quickly",
    "and",
    "the",
    "result",
    "arrives",
    "in",
    "order",
    "with",
    "usage",
    "counted",
    "so",
    "the",
    "settlement",
    "charges",
    "only",
    "what",
    "was",
    "used",
    "while",
    "cheaper",
    "lanes",
    "win",
    "when",
    "capacity",
    "allows",
    "and",
    "receipts",
    "explain",
    "each",
    "choice",
    "clearly",
    "for",
    "customers",
    "who",
    "read",
    "them",
    "carefully",
    "before",
    "trusting",
    "any",
    "simulated",
    "model",
    "output",
    "today",
)


def native_shape(slug: str) -> NativeShape:
    """The body shape a provider answers in: the vendors their own, the hosts OpenAI's."""
    if slug.startswith("anthropic"):
        return "anthropic"
    if slug.startswith(("google", "gemini", "vertex")):
        return "gemini"
    return "openai"


@dataclass(frozen=True)
class SimulationConfig:
    latency_seconds: float = 0.0
    ttft_seconds: float = 0.0
    inter_token_seconds: float = 0.0
    batch_seconds: float = 0.0  # how long a simulated batch job stays in_progress
    capacity: int = 0  # in-flight sync calls per provider; 0 = no cap
    completion_tokens: int = 0  # fixed completion usage; 0 = derived from the input hash
    providers_down: frozenset[str] = field(default_factory=frozenset)
    stuck_percent: int = STUCK_DONE_PERCENT  # of a [simulate:stuck_batch] job, done until cancelled

    @classmethod
    def from_settings(cls, settings: Settings) -> SimulationConfig:
        return cls(
            latency_seconds=settings.simulated_latency_ms / 1000,
            ttft_seconds=settings.simulated_ttft_ms / 1000,
            inter_token_seconds=settings.simulated_inter_token_ms / 1000,
            batch_seconds=settings.simulated_batch_poll_seconds,
            capacity=settings.simulated_capacity,
            completion_tokens=settings.simulated_completion_tokens,
            providers_down=frozenset(settings.simulated_providers_down),
            stuck_percent=settings.simulated_stuck_batch_percent,
        )


@dataclass(frozen=True)
class _Answer:
    output: dict[str, Any]
    raw: dict[str, Any]
    usage: base.Usage
    pieces: tuple[str, ...]  # the stream deltas; joined, the message content
    calls: tuple[base.ToolCallDelta, ...] = ()  # a forced function call's stream deltas

    def result(self, custom_id: str) -> base.ProviderResult:
        return base.ProviderResult(
            custom_id=custom_id, status="completed", output=self.output, raw=self.raw, usage=self.usage
        )


class Simulator:
    """The deterministic core both simulated provider kinds share."""

    def __init__(self, slug: str, config: SimulationConfig, *, clock: Clock | None = None) -> None:
        self.slug = slug
        self.shape = native_shape(slug)
        self.config = config
        self.clock = clock or SystemClock()

    # -- markers ----------------------------------------------------------------------

    def check_down(self, request: base.ProviderRequest, text: str | None = None) -> None:
        text = _canonical(request.input) if text is None else text
        if self.slug in self.config.providers_down:
            raise base.ProviderUnavailable(
                f"simulated provider {self.slug} is down (SIMULATED_PROVIDERS_DOWN)"
            )
        if MARKER_DOWN in text or self.slug in _MARKER_DOWN_FOR.findall(text):
            raise base.ProviderUnavailable(f"simulated provider {self.slug} is down ([simulate:down])")

    def check_item(self, request: base.ProviderRequest, text: str | None = None) -> None:
        text = _canonical(request.input) if text is None else text
        if MARKER_FAIL in text:
            raise base.PermanentProviderError(
                "simulated permanent failure ([simulate:fail])", code="simulated_failure"
            )
        if MARKER_TRANSIENT in text and request.attempt <= 1:
            raise base.TransientProviderError(
                "simulated transient failure ([simulate:transient]); the retry succeeds",
                code="simulated_transient",
            )

    # -- answers ----------------------------------------------------------------------

    def answer(self, request: base.ProviderRequest, text: str | None = None) -> _Answer:
        text = _canonical(request.input) if text is None else text
        digest = hashlib.sha256(
            "\n".join((self.slug, request.model, request.operation, text)).encode("utf-8", "surrogatepass")
        ).digest()
        prompt = estimate_prompt_tokens(request)
        if request.operation == "embeddings":
            return self._embedding(request, prompt)
        forced = forced_function(request)
        if forced is not None:
            return self._call(request, digest, prompt, forced)
        return self._message(request, digest, prompt, wrong=f"[simulate:wrong:{self.slug}]" in text)

    def _call(self, request: base.ProviderRequest, digest: bytes, prompt: int, name: str) -> _Answer:
        """A forced function call (tool_choice `required` or naming a function): the
        simulated model calls it with empty arguments, streamed as OpenAI streams a call
        (id and name first, then the arguments)."""
        ident = f"call_sim{digest[:8].hex()}"
        calls = (base.ToolCallDelta(0, ident, name), base.ToolCallDelta(0, arguments="{}"))
        tool_calls = base.joined_tool_calls(calls)
        usage = base.Usage(
            prompt_tokens=prompt,
            completion_tokens=min(SIMULATED_CALL_TOKENS, max(1, request.max_output_tokens)),
        )
        output = {
            "type": "message",
            "role": "assistant",
            "content": "",
            "finish_reason": "tool_calls",
            "tool_calls": tool_calls,
        }
        raw = self._raw_message(request, digest, "", "tool_calls", usage, tool_calls)
        return _Answer(output=output, raw=raw, usage=usage, pieces=(), calls=calls)

    def _message(
        self, request: base.ProviderRequest, digest: bytes, prompt: int, *, wrong: bool = False
    ) -> _Answer:
        natural = self.config.completion_tokens or (
            COMPLETION_BASE_TOKENS + int.from_bytes(digest[:8], "big") % COMPLETION_SPREAD_TOKENS
        )
        limit = max(1, request.max_output_tokens)
        completion = min(limit, natural)
        finish: base.FinishReason = "length" if natural > limit else "stop"
        prefix = ["Simulated", "answer", "from", f"{self.slug}/{request.model}:"]
        body_count = max(0, natural - len(prefix))
        body_bytes = hashlib.shake_256(digest).digest(body_count)
        body = [_WORDS[b % len(_WORDS)] for b in body_bytes]
        if body:
            body[0] = body[0].capitalize()
            body[-1] += "."
        words = (prefix + body)[:completion]
        if wrong:  # a lane made to answer wrongly: golden-set regression tests (docs/schedules.md)
            words = WRONG_ANSWER.split(" ")[:completion]
        pieces = tuple(word if i == 0 else f" {word}" for i, word in enumerate(words))
        content = "".join(pieces)
        usage = base.Usage(prompt_tokens=prompt, completion_tokens=len(pieces))
        output = {"type": "message", "role": "assistant", "content": content, "finish_reason": finish}
        raw = self._raw_message(request, digest, content, finish, usage)
        return _Answer(output=output, raw=raw, usage=usage, pieces=pieces)

    def _embedding(self, request: base.ProviderRequest, prompt: int) -> _Answer:
        value = request.input.get("input")
        # One input: a string, or a flat array of token ids (as OpenAI reads it); an array of
        # strings or of token arrays is one input each.
        single = not isinstance(value, list) or (
            bool(value) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        )
        texts = [value] if single else list(value)  # type: ignore[arg-type]
        vectors = [self._vector(request.model, _canonical(t) if not isinstance(t, str) else t) for t in texts]
        output: dict[str, Any] = {"type": "embedding", "dimensions": EMBEDDING_DIMENSIONS}
        if single:
            output["embedding"] = vectors[0]
        else:
            output["embeddings"] = vectors
        usage = base.Usage(prompt_tokens=prompt, completion_tokens=0)
        return _Answer(
            output=output, raw=self._raw_embedding(request, vectors, usage), usage=usage, pieces=()
        )

    def _vector(self, model: str, text: str) -> list[float]:
        seed = "\n".join((self.slug, model, text)).encode("utf-8", "surrogatepass")
        raw = hashlib.shake_256(seed).digest(2 * EMBEDDING_DIMENSIONS)
        values = [int.from_bytes(raw[i : i + 2], "big") / 32767.5 - 1.0 for i in range(0, len(raw), 2)]
        norm = math.sqrt(sum(v * v for v in values)) or 1.0
        return [round(v / norm, 6) for v in values]

    # -- native bodies ------------------------------------------------------------------

    def _raw_message(
        self,
        request: base.ProviderRequest,
        digest: bytes,
        content: str,
        finish: base.FinishReason,
        usage: base.Usage,
        calls: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        ident = digest[:12].hex()
        calls = calls or []
        if self.shape == "anthropic":
            uses = [
                {"type": "tool_use", "id": c["id"], "name": c["function"]["name"], "input": {}} for c in calls
            ]
            return {
                "id": f"msg_sim{ident}",
                "type": "message",
                "role": "assistant",
                "model": request.provider_model_id,
                "content": uses or [{"type": "text", "text": content}],
                "stop_reason": "max_tokens" if finish == "length" else "tool_use" if calls else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens},
            }
        if self.shape == "gemini":
            return _raw_gemini(request, ident, content, finish, usage, calls)
        return {
            "id": f"chatcmpl-sim{ident}",
            "object": "chat.completion",
            "created": int(self.clock.now().timestamp()),
            "model": request.provider_model_id,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content or None, "tool_calls": calls}
                    if calls
                    else {"role": "assistant", "content": content},
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            },
        }

    def _raw_embedding(
        self, request: base.ProviderRequest, vectors: list[list[float]], usage: base.Usage
    ) -> dict[str, Any]:
        if self.shape == "gemini":
            if len(vectors) == 1 and not isinstance(request.input.get("input"), list):
                return {"embedding": {"values": vectors[0]}}
            return {"embeddings": [{"values": v} for v in vectors]}
        # OpenAI's shape; Anthropic has no embeddings API of its own.
        return {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
            "model": request.provider_model_id,
            "usage": {"prompt_tokens": usage.prompt_tokens, "total_tokens": usage.prompt_tokens},
        }


def _raw_gemini(
    request: base.ProviderRequest,
    ident: str,
    content: str,
    finish: base.FinishReason,
    usage: base.Usage,
    calls: list[dict[str, Any]],
) -> dict[str, Any]:
    """A simulated GenerateContentResponse: the text, or the function calls."""
    parts: list[dict[str, Any]] = [
        {"functionCall": {"name": c["function"]["name"], "args": {}}} for c in calls
    ]
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": parts or [{"text": content}]},
                "finishReason": "MAX_TOKENS" if finish == "length" else "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": usage.prompt_tokens,
            "candidatesTokenCount": usage.completion_tokens,
            "totalTokenCount": usage.prompt_tokens + usage.completion_tokens,
        },
        "modelVersion": request.provider_model_id,
        "responseId": f"sim{ident}",
    }


def forced_function(request: base.ProviderRequest) -> str | None:
    """The function a chat request makes the model call: the one its tool_choice names, or
    with `required` the first it declares; None otherwise (the simulated model answers text)."""
    if request.operation == "embeddings" or not request.input.get("tools"):
        return None
    talk = conversation(request.input)
    choice = talk.tool_choice
    names = [f.name for f in talk.functions]
    if choice is None or not names:
        return None
    if choice.mode == "required":
        return names[0]
    return choice.name if choice.mode == "function" and choice.name in names else None


# -- the synchronous kind ------------------------------------------------------------------


class SimulatedSyncProvider:
    """A provider called per item: `complete()` and `stream()`."""

    def __init__(
        self,
        slug: str,
        config: SimulationConfig,
        *,
        sleeper: Callable[[float], None] = time.sleep,
        clock: Clock | None = None,
    ) -> None:
        self.slug = slug
        self.simulator = Simulator(slug, config, clock=clock)
        self.config = config
        self.sleeper = sleeper
        self._lock = threading.Lock()
        self._in_flight = 0

    def complete(self, request: base.ProviderRequest) -> base.ProviderResult:
        text = _canonical(request.input)
        self.simulator.check_down(request, text)
        self._acquire()
        try:
            self._sleep(self.config.latency_seconds)
            self.simulator.check_item(request, text)
            return self.simulator.answer(request, text).result(request.custom_id)
        finally:
            self._release()

    def stream(self, request: base.ProviderRequest) -> Iterator[base.StreamEvent]:
        text = _canonical(request.input)
        self.simulator.check_down(request, text)
        if request.operation == "embeddings":
            raise base.PermanentProviderError("embeddings cannot be streamed", code="stream_not_supported")
        self.simulator.check_item(request, text)
        answer = self.simulator.answer(request, text)
        return self._events(request, answer, text)

    def _events(
        self, request: base.ProviderRequest, answer: _Answer, text: str
    ) -> Iterator[base.StreamEvent]:
        self._acquire()
        try:
            timeout = request.first_byte_timeout_seconds
            if self.slug in _MARKER_5XX_FOR.findall(text):
                self._sleep(self.config.ttft_seconds)
                raise base.TransientProviderError(
                    f"simulated provider {self.slug} answered 503 ([simulate:5xx])", code="provider_5xx"
                )
            never = self.slug in _MARKER_TIMEOUT_FOR.findall(text)
            if timeout is not None and (never or self.config.ttft_seconds > timeout):
                self._sleep(timeout)
                raise base.TransientProviderError(
                    f"simulated provider {self.slug} sent no first byte within {timeout} s",
                    code="first_byte_timeout",
                )
            self._sleep(self.config.ttft_seconds)
            yield base.StreamStart()
            for i, piece in enumerate(answer.pieces):
                if i:
                    self._sleep(self.config.inter_token_seconds)
                yield base.StreamDelta(piece)
            for call in answer.calls:
                yield base.StreamDelta("", tool_calls=(call,))
            yield base.StreamEnd.of(answer.result(request.custom_id))
        finally:
            self._release()

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.sleeper(seconds)

    def _acquire(self) -> None:
        with self._lock:
            if self.config.capacity and self._in_flight >= self.config.capacity:
                raise base.TransientProviderError(
                    f"simulated provider {self.slug} is at capacity ({self.config.capacity} in flight)",
                    code="rate_limited",
                    retry_after_seconds=max(self.config.latency_seconds, 0.05),
                )
            self._in_flight += 1

    def _release(self) -> None:
        with self._lock:
            self._in_flight -= 1


# -- the vendor batch kind -----------------------------------------------------------------


@dataclass
class _Job:
    slug: str
    requests: tuple[base.ProviderRequest, ...]
    submitted_at: datetime
    cancelled: bool = False
    finished_before_cancel: int = 0  # the requests done when it was cancelled: its results
    failed_count: int | None = None  # counted once, when the job first reports completed
    stuck: bool = False  # [simulate:stuck_batch]: in_progress at STUCK_DONE_PERCENT until cancelled


_JOBS: dict[str, _Job] = {}
_JOBS_LOCK = threading.Lock()


def forget_simulated_jobs() -> None:
    """Drops every simulated batch job, as a restarted local stack would."""
    with _JOBS_LOCK:
        _JOBS.clear()


class SimulatedBatchApiProvider:
    """A vendor batch API: a job is in_progress for `batch_seconds` after submit (by the
    injected clock), then completed with one result per request."""

    def __init__(self, slug: str, config: SimulationConfig, *, clock: Clock | None = None) -> None:
        self.slug = slug
        self.config = config
        self.clock = clock or SystemClock()
        self.simulator = Simulator(slug, config, clock=self.clock)

    min_requests = 1

    def submit(self, requests: Iterable[base.ProviderRequest], *, key: str | None = None) -> str:
        """A job in_progress from now; the same `key` again answers the job it made (an
        idempotent retry, as Bedrock's clientRequestToken does), while it is remembered."""
        batch = tuple(requests)
        if not batch:
            raise base.PermanentProviderError("a batch job needs at least one request", code="empty_batch")
        if len({r.custom_id for r in batch}) != len(batch):
            raise base.PermanentProviderError(
                "custom_id values must be unique within a job", code="duplicate_id"
            )
        for request in batch:
            self.simulator.check_down(request)
        now = self.clock.now()
        job_id = f"simbatch_{key or uuid.uuid4().hex}"
        with _JOBS_LOCK:
            if key and job_id in _JOBS and _JOBS[job_id].slug == self.slug:
                return job_id
            for stale in [k for k, job in _JOBS.items() if now - job.submitted_at > _JOB_MEMORY]:
                del _JOBS[stale]
            stuck = any(MARKER_STUCK_BATCH in _canonical(r.input) for r in batch)
            _JOBS[job_id] = _Job(slug=self.slug, requests=batch, submitted_at=now, stuck=stuck)
        return job_id

    def job_made(self, key: str, *, since: int) -> str | None:
        """FindsKeyedJobs: the job `key` made (its id is the key's), while it is remembered."""
        job_id = f"simbatch_{key}"
        with _JOBS_LOCK:
            job = _JOBS.get(job_id)
        return job_id if job is not None and job.slug == self.slug else None

    def poll(self, job_id: str) -> base.JobStatus:
        job = self._job(job_id)
        total = len(job.requests)
        if job.cancelled:
            return base.JobStatus(state="cancelled", total=total, completed_count=job.finished_before_cancel)
        if job.stuck:
            return base.JobStatus(
                state="in_progress", total=total, completed_count=total * self.config.stuck_percent // 100
            )
        elapsed = (self.clock.now() - job.submitted_at).total_seconds()
        if elapsed < self.config.batch_seconds:
            done = int(total * elapsed / self.config.batch_seconds) if self.config.batch_seconds else total
            return base.JobStatus(state="in_progress", total=total, completed_count=done)
        if job.failed_count is None:
            job.failed_count = sum(1 for r in job.requests if self._fails(r))
        failed = job.failed_count
        return base.JobStatus(
            state="completed", total=total, completed_count=total - failed, failed_count=failed
        )

    def results(self, job_id: str) -> Iterator[base.ProviderResult]:
        job = self._job(job_id)
        state = self.poll(job_id).state
        if state == "cancelled":  # what it finished before, as a vendor leaves partial results
            return self._download(job_id, replace(job, requests=job.requests[: job.finished_before_cancel]))
        if state != "completed":
            raise base.TransientProviderError(f"batch job {job_id} is still {state}", code="job_not_finished")
        return self._download(job_id, job)

    def _download(self, job_id: str, job: _Job) -> Iterator[base.ProviderResult]:
        """The results, then the job is forgotten: a simulator holding every job's requests
        for `_JOB_MEMORY` grew with the items run (~1.5 KB each). A caller that crashed before
        keeping them finds the job `lost` and resubmits it (the answers are deterministic)."""
        for request in job.requests:
            yield self._result(request)
        with _JOBS_LOCK:
            _JOBS.pop(job_id, None)

    def cancel(self, job_id: str) -> None:
        job = self._job(job_id)
        status = self.poll(job_id)
        if status.state != "completed" and not job.cancelled:
            job.cancelled, job.finished_before_cancel = True, status.completed_count

    def _job(self, job_id: str) -> _Job:
        with _JOBS_LOCK:
            job = _JOBS.get(job_id)
        if job is None or job.slug != self.slug:
            raise base.UnknownJob(f"{self.slug} has no batch job {job_id}")
        return job

    def _fails(self, request: base.ProviderRequest) -> bool:
        try:
            self.simulator.check_item(request)
        except base.ProviderError:
            return True
        return False

    def _result(self, request: base.ProviderRequest) -> base.ProviderResult:
        text = _canonical(request.input)
        try:
            self.simulator.check_item(request, text)
        except base.ProviderError as exc:
            return base.ProviderResult.failure(request.custom_id, exc.to_item_error())
        return self.simulator.answer(request, text).result(request.custom_id)


# -- helpers -------------------------------------------------------------------------------


def estimate_prompt_tokens(request: base.ProviderRequest) -> int:
    """The quote's conservative estimate of the request input (domain/routing/items.py): what the
    simulated providers report as prompt usage."""
    facts, _problems = read_item(
        {
            "customer_item_id": request.customer_item_id or request.custom_id or "item",
            "operation": request.operation,
            "model": request.model,
            "input": dict(request.input),
        }
    )
    if facts is not None:
        return facts.prompt_tokens
    messages = request.input.get("messages")
    count = len(messages) if isinstance(messages, list) else 0
    return tokens.prompt_tokens(text_bytes=tokens.value_bytes(dict(request.input)), messages=count, images=0)


def _canonical(value: Mapping[str, Any] | object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
