"""The provider interface: one request and result shape for both kinds of real provider.

- SyncProvider: called once per item (public hosts, edge nodes, and the direct chat path
  of every provider). `complete()` answers one request; `stream()` yields StreamEvents.
- BatchApiProvider: a vendor batch API. `submit()` uploads many requests as one job,
  `poll()` reports its progress (for minutes or hours), `results()` downloads the answers.

Failures of one request raise TransientProviderError (retry it) or PermanentProviderError
(the item fails); ProviderUnavailable means the whole lane is down (fail over to the next
lane). Batch results report per-item failures as ProviderResult(status="failed") instead,
with `error.transient` telling the lane runner whether to resubmit.

Normalized output (`ProviderResult.output`, the result row's `output`), one shape per kind:
- responses / vision: {"type": "message", "role": "assistant", "content": "<text>",
  "finish_reason": "stop" | "length" | "tool_calls" | "content_filter"}, plus when the model
  called functions "tool_calls" (chat-completions form: [{id, type: function, function:
  {name, arguments}}]) and when it refused "refusal" (its text)
- embeddings: {"type": "embedding", "dimensions": n, "embedding": [floats]} for a string
  input; a list input gives "embeddings": [[floats], ...] instead of "embedding".
`raw` is the provider-native body (an OpenAI chat.completion, an Anthropic message, ...).
docs/providers.md is the long form.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, Protocol, runtime_checkable

from batchroute.domain.catalog.catalog import Operation
from batchroute.domain.catalog.pricing import CacheTokens, TokenUsage, ToolUses, UsageFields
from batchroute.errors import PermanentError, TransientError

ResultStatus = Literal["completed", "failed"]
FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]
JobState = Literal["validating", "in_progress", "completed", "failed", "expired", "cancelled"]
TERMINAL_JOB_STATES: frozenset[JobState] = frozenset({"completed", "failed", "expired", "cancelled"})
# Seconds an adapter waits to open a connection (every endpoint's `Timeouts.connect` unless its
# environment says otherwise); with a request's read time-out, how long one call can take.
CONNECT_SECONDS: Final = 5.0


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """One item as a provider sees it.

    `custom_id` is unique within a lane run (the lane runner uses `seq-<n>`) and comes back
    on the result, so batch results map to their items; `customer_item_id` is the caller's
    own id, which need not be unique. `attempt` is 1-based."""

    custom_id: str
    customer_item_id: str
    operation: Operation
    model: str  # catalog model id
    provider_model_id: str  # the provider's own name for the model
    input: Mapping[str, Any]
    max_output_tokens: int
    attempt: int = 1
    # The direct chat path's wait for the first byte: an adapter gives up after it
    # (TransientProviderError `first_byte_timeout`), so the next lane can be tried.
    first_byte_timeout_seconds: float | None = None
    # Whether the model takes sampling parameters (temperature, top_p): catalog data per
    # model; a transform leaves them out for a model that refuses them.
    sampling: bool = True
    # Cache-aware routing: the item's prompt prefix is shared by others of its lane, so an
    # adapter whose vendor caches only what a request marks (Anthropic, Bedrock) marks it.
    cache_prefix: bool = False

    def next_attempt(self) -> ProviderRequest:
        return replace(self, attempt=self.attempt + 1)


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens as the vendor billed them. `prompt_tokens` is ALL input tokens; of those,
    `cached_input_tokens` were read from the vendor's prompt cache and
    `cache_write_input_tokens` were written to it (each billed at its own price,
    docs/ledger.md); the rest (`fresh_input_tokens`) are plain input."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Hosted tool calls the vendor bills, by the service's tool name: {"web_search": 2}.
    tool_uses: tuple[tuple[str, int], ...] = ()
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0

    @property
    def fresh_input_tokens(self) -> int:
        return max(0, self.prompt_tokens - self.cached_input_tokens - self.cache_write_input_tokens)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            ToolUses.of((*self.tool_uses, *other.tool_uses)).calls,
            self.cached_input_tokens + other.cached_input_tokens,
            self.cache_write_input_tokens + other.cache_write_input_tokens,
        )

    def to_dict(self) -> UsageFields:
        """The result row's usage; the cache counts only when the vendor reported any, so an
        answer without them keeps its old shape."""
        return self.tokens.to_fields()

    @property
    def tokens(self) -> TokenUsage:
        return TokenUsage(self.prompt_tokens, self.completion_tokens, self.cache, ToolUses.of(self.tool_uses))

    @property
    def cache(self) -> CacheTokens:
        """Of the input, what the vendor read from / wrote to its prompt cache."""
        return CacheTokens(self.cached_input_tokens, self.cache_write_input_tokens)


ZERO_USAGE = Usage()


@dataclass(frozen=True, slots=True)
class ItemError:
    code: str
    message: str
    transient: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "transient": self.transient}

    def describe(self) -> str:
        return f"{self.code}: {self.message}"


@dataclass(frozen=True, slots=True)
class ProviderResult:
    custom_id: str
    status: ResultStatus
    output: dict[str, Any] | None = None
    raw: dict[str, Any] | None = None
    usage: Usage = ZERO_USAGE
    error: ItemError | None = None

    @classmethod
    def failure(
        cls, custom_id: str, error: ItemError, *, raw: dict[str, Any] | None = None
    ) -> ProviderResult:
        return cls(custom_id=custom_id, status="failed", raw=raw, error=error)

    @property
    def transient_failure(self) -> bool:
        return self.status == "failed" and self.error is not None and self.error.transient

    def to_dict(self) -> dict[str, Any]:
        """The result-chunk fields this result fills (docs/batches.md)."""
        return {
            "status": self.status,
            "output": self.output,
            "error": self.error.to_dict() if self.error else None,
            "raw": self.raw,
            "usage": self.usage.to_dict(),
        }


# -- streaming ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamStart:
    """The first byte arrived: from here on there is no failover."""

    kind: Literal["start"] = "start"


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of a function call the model makes, as OpenAI streams one
    (ChatCompletionMessageToolCallChunk): `index` names the call within the answer; only the
    call's first fragment carries its `id` and function `name`; `arguments` is the next piece
    of its JSON arguments ("" for none), the pieces joined in order being the whole."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The chunk's `delta.tool_calls[]` entry, in OpenAI's shape."""
        function: dict[str, Any] = {"arguments": self.arguments}
        if self.name is not None:
            function = {"name": self.name, **function}
        entry: dict[str, Any] = {"index": self.index}
        if self.id is not None:
            entry.update(id=self.id, type="function")
        entry["function"] = function
        return entry


@dataclass(frozen=True, slots=True)
class StreamDelta:
    """A piece of the answer: `text` of its content, `tool_calls` fragments of the function
    calls it makes (ToolCallDelta), `refusal` text when the model refuses. `usage`: what the
    vendor has reported so far, on the deltas after it said so (Anthropic's `message_start`
    gives the input and its prompt-cache split), so a stream that dies mid-way is charged as
    billed (docs/chat.md); None when it said nothing."""

    text: str
    kind: Literal["delta"] = "delta"
    usage: Usage | None = None
    tool_calls: tuple[ToolCallDelta, ...] = ()
    refusal: str = ""

    @property
    def says_something(self) -> bool:
        return bool(self.text or self.tool_calls or self.refusal)


def stream_delta(
    text: str, calls: list[ToolCallDelta] | None = None, refusal: str = "", usage: Usage | None = None
) -> StreamDelta | None:
    """The delta one vendor event adds, or None when it adds nothing (an adapter yields only
    the deltas that say something); empties `calls`, which the accumulator gathered."""
    taken = tuple(calls or ())
    if calls:
        calls.clear()
    delta = StreamDelta(text, usage=usage, tool_calls=taken, refusal=refusal)
    return delta if delta.says_something else None


def joined_tool_calls(fragments: Iterable[ToolCallDelta]) -> list[dict[str, Any]]:
    """The whole calls a stream's tool-call fragments add up to, by index, in the normalized
    output's form ([{id, type: function, function: {name, arguments}}])."""
    calls: dict[int, dict[str, Any]] = {}
    for fragment in fragments:
        call = calls.setdefault(
            fragment.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if fragment.id:
            call["id"] = fragment.id
        if fragment.name:
            call["function"]["name"] = fragment.name
        call["function"]["arguments"] += fragment.arguments
    return [calls[i] for i in sorted(calls)]


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """The last event: the whole result (output = the joined deltas, raw, usage)."""

    result: ProviderResult
    kind: Literal["end"] = "end"

    @classmethod
    def of(cls, result: ProviderResult) -> StreamEnd:
        """The end of a stream whose answer is `result`; a failed one (a malformed answer, a
        refusal the last chunk carries) is raised instead, so no stream ends as an answer
        that is not one (direct chat would send and charge it as completed)."""
        if result.status == "failed":
            error = result.error or ItemError("provider_bad_response", "the stream ended without an answer")
            kind = TransientProviderError if error.transient else PermanentProviderError
            raise kind(error.message, code=error.code)
        return cls(result)

    @property
    def usage(self) -> Usage:
        return self.result.usage


StreamEvent = StreamStart | StreamDelta | StreamEnd


# -- vendor batch jobs -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobStatus:
    state: JobState
    total: int = 0
    completed_count: int = 0
    failed_count: int = 0
    # Why the vendor failed the whole job (e.g. OpenAI's `errors.data`): every item of a
    # failed job carries them, and so does the receipt.
    errors: tuple[ItemError, ...] = ()

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_JOB_STATES


# -- errors ------------------------------------------------------------------------------


class ProviderError(Exception):
    """Base of the provider failures; carries the error a result row shows."""

    default_code = "provider_error"
    transient = False

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code

    def to_item_error(self) -> ItemError:
        return ItemError(code=self.code, message=self.message, transient=self.transient)


class TransientProviderError(ProviderError, TransientError):
    """Throttling, a 5xx or a time-out on one request: retry it with backoff.

    `retry_after_seconds` (from a Retry-After header) is the least the next try waits."""

    default_code = "provider_transient_error"
    transient = True

    def __init__(
        self, message: str, *, code: str | None = None, retry_after_seconds: float | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.retry_after_seconds = retry_after_seconds


class PermanentProviderError(ProviderError, PermanentError):
    """The provider refused this request for good (a 400, a content policy): the item fails."""

    default_code = "provider_rejected"


class ProviderUnavailable(ProviderError, TransientError):
    """The whole lane is down (connection refused, 5xx before the first byte, a job the
    vendor failed wholesale): the caller fails over to the next eligible lane."""

    default_code = "provider_unavailable"
    transient = True


class UnknownJob(ProviderError):
    """The provider does not know this batch job id (a simulated job of a restarted local
    stack): the lane runner resubmits the job's items."""

    default_code = "unknown_job"


# -- the two protocols ---------------------------------------------------------------------


@runtime_checkable
class SyncProvider(Protocol):
    slug: str

    def complete(self, request: ProviderRequest) -> ProviderResult:
        """One answer. Raises TransientProviderError, PermanentProviderError or
        ProviderUnavailable; may also return a failed result (a transient one is retried)."""
        ...

    def stream(self, request: ProviderRequest) -> Iterator[StreamEvent]:
        """StreamStart, then StreamDeltas, then one StreamEnd. Anything raised before
        StreamStart was yielded (by this call or by the first `next()`) happened before the
        first byte: a ProviderUnavailable there is eligible for failover."""
        ...


@dataclass(frozen=True)
class SubmitTry:
    """One try of a keyed batch submission (SubmitTries.trying)."""

    retried: bool  # the key was tried before, and that try was not answered
    # The earliest moment (Unix seconds) the lost try could have made its job, when known (a
    # dead invocation's note); None: the adapter's own look-back window
    since: int | None = None

    def made_before(self, look_up: Callable[[int | None], str | None]) -> str | None:
        """The job a lost earlier try made, by `look_up(since)` (OpenAI, Gemini: their vendors
        have no idempotency token), on a retry only. None (make the job) on a first try, or
        when the vendor refused the look-up itself (a key allowed to create batches but not
        to list them), since a look-up must never fail a submit that creating would serve. A
        transient error propagates: the submit is tried again, and looks again."""
        if not self.retried:
            return None
        try:
            return look_up(self.since)
        except TransientProviderError:
            raise
        except ProviderError:
            return None


@dataclass
class SubmitTries:
    """The keys of a batch adapter's submissions tried and not yet answered: a key tried
    again is a retry, whose first try may have made its job. A try answered, or failed for
    good, forgets its key; one that failed transiently keeps it (the lane runner tries again
    with the same key). A key whose retries ran out is never answered, so only the newest
    MAX_UNANSWERED_KEYS are kept: a warm function's memory stays bounded, and a retry comes
    seconds after its try, long before its key could be the oldest."""

    _unanswered: dict[str, int | None] = field(default_factory=dict)  # key -> since; oldest first

    def assume_tried(self, key: str, *, since: int | None = None) -> None:
        """`key` was tried, perhaps elsewhere, without an answer: by an invocation that died
        between the vendor making its job and storing it, which began at `since`
        (services/workflow/submits.py)."""
        self._unanswered.pop(key, None)
        self._unanswered[key] = since
        while len(self._unanswered) > MAX_UNANSWERED_KEYS:
            del self._unanswered[next(iter(self._unanswered))]

    @contextmanager
    def trying(self, key: str | None) -> Iterator[SubmitTry]:
        retried = bool(key) and key in self._unanswered
        attempt = SubmitTry(retried=retried, since=self._unanswered.get(key) if key else None)
        if key:
            self.assume_tried(key, since=attempt.since)
        try:
            yield attempt
        except TransientProviderError:
            raise
        except BaseException:
            self._unanswered.pop(key or "", None)
            raise
        self._unanswered.pop(key or "", None)


# The item error code of a request a vendor's batch job ended (its window ran out) before it
# ran, whichever vendor: OpenAI's own `batch_expired` error row, an Anthropic `expired`
# result, a job that ended without the item (Gemini, Bedrock). Transient: it is resubmitted.
EXPIRED_CODE: Final = "batch_expired"
MAX_UNANSWERED_KEYS: Final = 1024
# How far our clock and a vendor's may disagree: a look-up back to a noted moment reads this
# much further back.
CLOCK_SKEW_SECONDS: Final = 300


@runtime_checkable
class LooksUpLostJobs(Protocol):
    """A batch adapter whose vendor has no idempotency token but keeps our key on the job, so
    a submission tried before can be looked for instead of made again (OpenAI, Gemini)."""

    def assume_tried(self, key: str, *, since: int | None = None) -> None:
        """Treat `key` as tried before without an answer, that try begun at `since` (Unix
        seconds): its next submit first looks for the job that try made, among those made
        since then (an invocation that died between the vendor making the job and storing
        it: services/workflow/submits.py)."""
        ...


@runtime_checkable
class FindsKeyedJobs(Protocol):
    """A batch adapter that can name the job a keyed submission made without making one
    (OpenAI and Gemini by the key they keep on the job, Bedrock by the job name it makes of
    the key, the simulator by its id): a batch
    canceled after an invocation died between the vendor making its job and storing it still
    has that job stopped and what it finished kept (services/workflow/execution.py)."""

    def job_made(self, key: str, *, since: int) -> str | None:
        """The id of the job submission `key` made, begun at `since` (Unix seconds, our
        clock), still running or done; None when there is none."""
        ...


@runtime_checkable
class BatchApiProvider(Protocol):
    slug: str

    @property
    def min_requests(self) -> int:
        """The fewest requests one job of the vendor may hold (1 for most; Bedrock's minimum
        records per job): the lane runner answers a smaller remainder through the lane's
        sync adapter instead of submitting it (docs/providers.md, Batch-API lanes)."""
        ...

    def submit(self, requests: Iterable[ProviderRequest], *, key: str | None = None) -> str:
        """Uploads the requests as one job and returns its id. Raises ProviderUnavailable
        (lane down) or TransientProviderError (try the submit again).

        `key` names this one submission: the lane runner passes the same key when it tries
        the submit again (after a time-out the vendor may have made the job), so an adapter
        whose vendor has an idempotency token (Bedrock's clientRequestToken) sends it and
        gets the first job back instead of a second, billed one. None: a fresh submission."""
        ...

    def poll(self, job_id: str) -> JobStatus:
        """The job's progress. Raises UnknownJob for an id the provider does not know."""
        ...

    def results(self, job_id: str) -> Iterator[ProviderResult]:
        """One result per request of a terminal job (an expired job: the finished ones),
        in any order, matched to requests by `custom_id`."""
        ...

    def cancel(self, job_id: str) -> None: ...
