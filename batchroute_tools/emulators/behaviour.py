"""What every vendor emulator answers, whatever its wire format: deterministic text, usage and
vectors, and the faults the markers ask for (docs/emulators.md).

A vendor emulator parses its vendor's request into `Work` (the provider slug, the model as
the vendor names it, the messages or embedding inputs, the output limit), asks `Behaviour`
for a `Fault` or an `Answer`, and writes that in its vendor's format. The answer is a pure
function of (provider, model, operation, messages): the same request gets the same text on
every run. Prompt tokens are the quote's conservative estimate of the messages
(domain/catalog/tokens.py), so a local batch settles at about its estimate.

Markers, anywhere in a message (the same as the in-process simulator's, plus vendor faults):

- `[simulate:fail]`: refused for good (a 400 / a failed batch line) on every attempt;
- `[simulate:transient]`: a 500 (a transient batch-line error) the first time, then answered;
- `[simulate:down]`, `[simulate:down:<provider>]`, or SIMULATED_PROVIDERS_DOWN: the host drops
  the connection without answering (the lane is down: fail over);
- `[simulate:5xx:<provider>]`: that provider's stream answers 500 before its first byte;
- `[simulate:timeout:<provider>]`: that provider's stream sends no first byte;
- `[simulate:429]`: a 429 with `retry-after-ms` the first time, then answered;
- `[simulate:overloaded]`: the vendor's "overloaded" (Anthropic 529, others 503) the first time;
- `[simulate:reset]`: the connection is reset in the middle of the answer the first time;
- `[simulate:expire]`: a batch job holding it expires (the other lines finish);
- `[simulate:malformed]`: its line of a batch results file is not JSON the first time;
- `[simulate:wrong:<provider>]`: that provider answers the fixed text WRONG_ANSWER
  ("Simulated wrong answer.") instead of its usual one, on every attempt: a lane that
  answers wrongly, for golden-set regression runs (docs/schedules.md).

"The first time" is per emulator process and per (provider, fault, request content), so a
retry of the same request succeeds, as with a real vendor's passing fault.

Injected faults (tests, docs/reliability.md): `inject(provider, kind, times)` makes the next
`times` requests to `provider`, whatever they hold, meet `kind` (a 429 storm, a run of 5xx,
resets). `answered` counts every fault answered, by kind.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from batchroute.config import Settings
from batchroute.domain.catalog import tokens

FaultKind = Literal[
    "fail",
    "transient",
    "down",
    "5xx",
    "timeout",
    "rate_limited",
    "overloaded",
    "reset",
    "expire",
    "malformed",
]
Finish = Literal["stop", "length", "tool_calls"]  # tool_calls: a forced call (openai.py)

EMBEDDING_DIMENSIONS: Final = 16
COMPLETION_BASE_TOKENS: Final = 16
COMPLETION_SPREAD_TOKENS: Final = 64
WRONG_ANSWER: Final = "Simulated wrong answer."  # [simulate:wrong:<provider>]
RETRY_AFTER_MS: Final = 200  # what a simulated 429 asks the caller to wait
_SEEN_LIMIT: Final = 200_000  # first-time faults remembered per process

# What every down marker starts with (`[simulate:down]`, `[simulate:down:<provider>]`): a batch
# create holding none of it has no request `down` would find down, and is not read request by
# request for one.
DOWN_MARK: Final = b"[simulate:down"
_FOR_PROVIDER: Final = re.compile(r"\[simulate:(down|5xx|timeout):([A-Za-z0-9_.-]+)\]")
_ONCE: Final[dict[str, FaultKind]] = {
    "[simulate:transient]": "transient",
    "[simulate:429]": "rate_limited",
    "[simulate:overloaded]": "overloaded",
    "[simulate:reset]": "reset",
    "[simulate:malformed]": "malformed",
}
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
)


@dataclass(frozen=True)
class EmulatorConfig:
    latency_seconds: float = 0.0  # a non-streamed answer
    ttft_seconds: float = 0.0  # a stream's first byte
    inter_token_seconds: float = 0.0  # between stream deltas
    batch_seconds: float = 0.0  # how long a batch job stays in progress
    completion_tokens: int = 0  # fixed completion usage; 0 = derived from the request
    providers_down: frozenset[str] = field(default_factory=frozenset)
    stuck_percent: int = 40  # of a [simulate:stuck_batch] job's requests, done until cancelled

    @classmethod
    def from_settings(cls, settings: Settings) -> EmulatorConfig:
        return cls(
            latency_seconds=settings.simulated_latency_ms / 1000,
            ttft_seconds=settings.simulated_ttft_ms / 1000,
            inter_token_seconds=settings.simulated_inter_token_ms / 1000,
            batch_seconds=settings.simulated_batch_poll_seconds,
            completion_tokens=settings.simulated_completion_tokens,
            providers_down=frozenset(settings.simulated_providers_down),
            stuck_percent=settings.simulated_stuck_batch_percent,
        )


@dataclass(frozen=True)
class Work:
    """One request as every emulator sees it, whatever the vendor's format."""

    provider: str  # the provider slug the emulator answers as
    model: str  # the model as the vendor names it
    operation: Literal["chat", "embeddings"]
    messages: tuple[Mapping[str, Any], ...] = ()  # chat: {role, content} in OpenAI's form
    inputs: tuple[str, ...] = ()  # embeddings
    # embeddings given as token ids: their count, one token an id, as the vendor counts them
    # (None: text inputs, counted by `embedding_tokens`)
    given_tokens: int | None = None
    max_tokens: int = 4096
    stream: bool = False
    dimensions: int | None = None  # embeddings: the floats a vector has (None: EMBEDDING_DIMENSIONS)
    stops: tuple[str, ...] = ()  # chat: the stop sequences the request gives (the vendor's own key)
    # chat asking for structured output: the JSON Schema the answer keeps to ({}: any JSON
    # object, JSON mode); None: free text
    answer_schema: Mapping[str, Any] | None = None

    @property
    def input_tokens(self) -> int:
        """embeddings: the tokens of the inputs, summed (the answer's `usage`)."""
        return embedding_tokens(self.inputs) if self.given_tokens is None else self.given_tokens

    @property
    def text(self) -> str:
        """Everything the markers may hide in, canonically."""
        body = self.messages if self.operation == "chat" else self.inputs
        return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    message: str


@dataclass(frozen=True)
class Answer:
    pieces: tuple[str, ...]  # chat: the stream deltas; joined, the content
    finish: Finish
    prompt_tokens: int
    completion_tokens: int
    vectors: tuple[tuple[float, ...], ...] = ()  # embeddings, one per input
    ident: str = ""  # a stable id for the answer (hex)
    cache_read_tokens: int = 0  # of prompt_tokens, read from the vendor's prompt cache (cache.py)
    cache_write_tokens: int = 0  # of prompt_tokens, written to it
    stop_sequence: str | None = None  # the stop sequence the answer was cut at (finish `stop`)

    @property
    def content(self) -> str:
        return "".join(self.pieces)


def stop_sequences(value: object) -> tuple[str, ...]:
    """A request's stop sequences as the vendors give them: one string or a list of them."""
    listed = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return tuple(s for s in listed if isinstance(s, str) and s)


def cut_at_stop(answer: Answer, stops: tuple[str, ...]) -> Answer:
    """The answer as a stop sequence leaves it, as every vendor does: cut before the first
    stop sequence it contains (the sequence itself left out), finish `stop`, its tokens
    those it kept, `stop_sequence` the one it met."""
    content = answer.content
    found = [(content.find(s), s) for s in stops if s in content]
    if not found:
        return answer
    cut, met = min(found)
    pieces: list[str] = []
    left = cut
    for piece in answer.pieces:
        if left <= 0:
            break
        pieces.append(piece[:left])
        left -= len(piece)
    return replace(
        answer, pieces=tuple(pieces), finish="stop", completion_tokens=len(pieces), stop_sequence=met
    )


class Behaviour:
    """The deterministic core the vendor emulators share (thread-safe)."""

    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str, str], None] = {}
        self._injected: dict[str, list[FaultKind]] = {}
        self.answered: Counter[FaultKind] = Counter()

    def think(self) -> None:
        """Waits the configured latency of a non-streamed answer (at 0, not even a yield of
        the thread: the pipeline bench runs a million calls at 0)."""
        if self.config.latency_seconds > 0:
            time.sleep(self.config.latency_seconds)

    # -- faults -------------------------------------------------------------------------
    def inject(self, provider: str, kind: FaultKind, times: int) -> None:
        """The next `times` requests to `provider` meet `kind`, whatever they hold."""
        with self._lock:
            self._injected.setdefault(provider, []).extend([kind] * times)

    def fault(self, work: Work, *, in_batch: bool = False) -> Fault | None:
        """The fault this request meets, if any (first-time faults are remembered)."""
        found = self._injected_fault(work) or self._marked_fault(work, in_batch=in_batch)
        if found is not None:
            with self._lock:
                self.answered[found.kind] += 1
        return found

    def down(self, work: Work) -> bool:
        """Whether this request finds its provider down (marked, or configured): a vendor's
        batch create that holds one is dropped, as the provider's every request is, so the
        lane fails over as a sync lane does (nothing is remembered or counted)."""
        text = work.text
        return (
            work.provider in self.config.providers_down
            or "[simulate:down]" in text
            or ("down", work.provider) in _FOR_PROVIDER.findall(text)
        )

    def _injected_fault(self, work: Work) -> Fault | None:
        with self._lock:
            queued = self._injected.get(work.provider)
            if not queued:
                return None
            kind = queued.pop(0)
        return Fault(kind, f"injected {kind.replace('_', ' ')} of {work.provider}; later requests succeed")

    def _marked_fault(self, work: Work, *, in_batch: bool) -> Fault | None:
        text = work.text
        provider_faults = {kind for kind, slug in _FOR_PROVIDER.findall(text) if slug == work.provider}
        if self.down(work):
            return Fault("down", f"simulated provider {work.provider} is down")
        if "[simulate:fail]" in text:
            return Fault("fail", "simulated permanent failure ([simulate:fail])")
        if work.stream and "5xx" in provider_faults:
            return Fault("5xx", f"simulated server error of {work.provider} before the first byte")
        if work.stream and "timeout" in provider_faults:
            return Fault("timeout", f"simulated silence of {work.provider} before the first byte")
        if in_batch and "[simulate:expire]" in text:
            return Fault("expire", "simulated expiry of the batch job holding this request")
        for marker, kind in _ONCE.items():
            if marker in text and self._first_time(work, kind):
                return Fault(kind, f"simulated {kind.replace('_', ' ')} ({marker}); a retry succeeds")
        return None

    def _first_time(self, work: Work, kind: str) -> bool:
        key = (work.provider, kind, hashlib.sha256(work.text.encode("utf-8", "surrogatepass")).hexdigest())
        with self._lock:
            if key in self._seen:
                return False
            if len(self._seen) >= _SEEN_LIMIT:
                self._seen.pop(next(iter(self._seen)))
            self._seen[key] = None
            return True

    # -- answers ------------------------------------------------------------------------
    def answer(self, work: Work) -> Answer:
        digest = hashlib.sha256(
            "\n".join((work.provider, work.model, work.operation, work.text)).encode("utf-8", "surrogatepass")
        ).digest()
        if work.operation == "embeddings":
            vectors = tuple(self.vector(work, text) for text in work.inputs)
            return Answer((), "stop", work.input_tokens, 0, vectors, digest[:12].hex())
        natural = self.config.completion_tokens or (
            COMPLETION_BASE_TOKENS + int.from_bytes(digest[:8], "big") % COMPLETION_SPREAD_TOKENS
        )
        limit = max(1, work.max_tokens)
        if work.answer_schema is not None:
            return self._structured(work, digest, limit)
        prefix = ["Simulated", "answer", "from", f"{work.provider}/{work.model}:"]
        body = [
            _WORDS[b % len(_WORDS)] for b in hashlib.shake_256(digest).digest(max(0, natural - len(prefix)))
        ]
        if body:
            body[0] = body[0].capitalize()
            body[-1] += "."
        words = (prefix + body)[: min(limit, natural)]
        if f"[simulate:wrong:{work.provider}]" in work.text:  # a lane made to answer wrongly
            words = WRONG_ANSWER.split(" ")[: min(limit, natural)]
        pieces = tuple(word if i == 0 else f" {word}" for i, word in enumerate(words))
        finish: Finish = "length" if natural > limit else "stop"
        answer = Answer(pieces, finish, prompt_tokens(work.messages), len(pieces), (), digest[:12].hex())
        return cut_at_stop(answer, work.stops)

    def _structured(self, work: Work, digest: bytes, limit: int) -> Answer:
        """A structured-output answer: a JSON document valid under the request's schema
        (`schema_example`), as a vendor's constrained decoding gives one, in pieces of four
        characters (a token each); cut at the output limit (finish `length`) as a vendor's is."""
        text = json.dumps(schema_example(work.answer_schema or {}), separators=(",", ":"))
        pieces = tuple(text[i : i + 4] for i in range(0, len(text), 4))
        finish: Finish = "length" if len(pieces) > limit else "stop"
        pieces = pieces[:limit]
        return Answer(pieces, finish, prompt_tokens(work.messages), len(pieces), (), digest[:12].hex())

    def vector(self, work: Work, text: str) -> tuple[float, ...]:
        """A unit vector of `work.dimensions` floats (EMBEDDING_DIMENSIONS by default) from a
        hash of the text: a shorter one is a longer one's start, normalized again, as an
        OpenAI text-embedding-3 vector shortened with `dimensions` is."""
        seed = "\n".join((work.provider, work.model, text)).encode("utf-8", "surrogatepass")
        raw = hashlib.shake_256(seed).digest(2 * (work.dimensions or EMBEDDING_DIMENSIONS))
        values = [int.from_bytes(raw[i : i + 2], "big") / 32767.5 - 1.0 for i in range(0, len(raw), 2)]
        norm = math.sqrt(sum(v * v for v in values)) or 1.0
        return tuple(round(v / norm, 6) for v in values)


def embedding_tokens(inputs: Iterable[str]) -> int:
    """The prompt tokens of an embeddings request's inputs, summed (its `usage`; the quote's
    conservative estimate of their text, domain/catalog/tokens.py)."""
    return tokens.prompt_tokens(text_bytes=sum(len(t.encode()) for t in inputs), messages=0, images=0)


def prompt_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """The quote's conservative estimate of chat messages (domain/catalog/tokens.py)."""
    listed = list(messages)
    images = sum(
        1
        for message in listed
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if isinstance(part, Mapping) and part.get("type") in ("image_url", "input_image", "image")
    )
    text: list[object] = []
    for message in listed:
        content = message.get("content")
        for part in content if isinstance(content, list) else [content]:
            if isinstance(part, Mapping):
                text.append({k: v for k, v in part.items() if k not in ("image_url", "source")})
            else:
                text.append(part)
    return tokens.prompt_tokens(text_bytes=tokens.value_bytes(text), messages=len(listed), images=images)


def call_arguments(schema: object) -> dict[str, Any]:
    """What a model calls a function with: an object valid under the function's parameters
    schema (a strict function's arguments always are), `{}` when it declares none."""
    value = schema_example(schema) if isinstance(schema, Mapping) else None
    return value if isinstance(value, dict) else {}


def schema_example(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None, depth: int = 0) -> Any:
    """A deterministic JSON value valid under `schema` (the subset structured outputs use:
    types, properties, items, enum, const, anyOf / oneOf, local `$ref`s, minimum, minLength,
    minItems), what the emulators answer a structured-output request with: `{}` (JSON mode)
    is an empty object. Gemini's OpenAPI subset writes its types in capitals."""
    root = schema if root is None else root
    if depth > 32 or not isinstance(schema, Mapping):
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        return schema_example(target or {}, root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return schema_example(options[0], root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if str(k).lower() != "null"), "null")
    kind = str(kind).lower() if kind is not None else ("object" if "properties" in schema else None)
    if kind == "object" or kind is None:
        properties = schema.get("properties")
        fields = properties if isinstance(properties, Mapping) else {}
        return {str(name): schema_example(sub, root, depth + 1) for name, sub in fields.items()}
    if kind == "array":
        count = max(1, int(schema.get("minItems") or 0))
        return [schema_example(schema.get("items") or {}, root, depth + 1) for _ in range(count)]
    if kind == "string":
        return "simulated".ljust(int(schema.get("minLength") or 0), "x")
    if kind in ("integer", "number"):
        least = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = least + 1 if "exclusiveMinimum" in schema and "minimum" not in schema else least
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return False
    return None
