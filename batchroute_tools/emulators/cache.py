"""The vendors' prompt caches, as the emulators report them (docs/emulators.md): a prompt
prefix seen before, within the vendor's cache lifetime by the emulator's injected clock, is
counted as cached input in the vendor's usage fields.

A prefix is a leading run of the request's messages (in OpenAI's form, as `Work` holds them,
a message possibly cut after one of its content blocks); its tokens are the emulators' usual
estimate of those messages (`behaviour.prompt_tokens`), so a prefix never counts more than
the whole prompt. What is remembered is a digest per prefix and when it was last used, never
the prompt, in a bounded least-recently-used table: the emulator's memory stays bounded.

Two ways vendors cache:

- automatic (OpenAI, Gemini's implicit caching): every prefix at a message boundary of at
  least the vendor's minimum is written; a later request reads the longest one still alive,
  rounded down to the vendor's increment;
- marked (Anthropic, Bedrock's cache points): only the prefixes ending at a breakpoint the
  request marks, of at least the model's minimum, are written; a later request reads the
  longest of its breakpoints still alive, and writes the rest up to its last breakpoint.

A read refreshes the prefix's lifetime (each vendor's cache lives on for as long as it is
used).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from batchroute_tools.emulators.behaviour import prompt_tokens

PREFIX_LIMIT: Final = 100_000  # prefix digests remembered per emulator (32 bytes and a float each)


@dataclass(frozen=True)
class CacheRule:
    """A vendor's caching rule: the fewest tokens a cached prefix has, the increment cached
    tokens come in, and how long an unused prefix lives (seconds)."""

    minimum: int
    lifetime: float
    increment: int = 1


@dataclass(frozen=True)
class CacheUse:
    """What one request read from and wrote to the cache, in tokens."""

    read: int = 0
    written: int = 0


# OpenAI: automatic for prompts of 1,024 tokens or more, cached in 128-token increments;
# "cached prefixes generally remain active for 5 to 10 minutes of inactivity" (the lower
# figure; platform.openai.com/docs/guides/prompt-caching).
OPENAI_CACHE: Final = CacheRule(minimum=1024, lifetime=300.0, increment=128)

# Anthropic: only what `cache_control` marks, for its ttl (5 minutes by default, refreshed
# on every read; or 1 hour); the minimum cacheable prompt per model, from Anthropic's
# prompt-caching guide (docs.claude.com/en/docs/build-with-claude/prompt-caching), as of
# 2026-02: 4,096 for Opus 4.5 and Haiku 4.5, 2,048 for Haiku 3.5 and 3, else 1,024.
ANTHROPIC_MINIMUMS: Final = (
    ("claude-opus-4-5", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
)
ANTHROPIC_DEFAULT_MINIMUM: Final = 1024


def anthropic_minimum(model: str) -> int:
    """The fewest tokens a Claude model caches (a Bedrock model id holds the name too)."""
    return next((least for name, least in ANTHROPIC_MINIMUMS if name in model), ANTHROPIC_DEFAULT_MINIMUM)


# Gemini: implicit caching, automatic for Gemini 2.5 and newer (none for 1.5 and 2.0); the
# minimum input tokens per model from ai.google.dev/gemini-api/docs/caching (updated
# 2026-10-13): 2,048 for 2.5 Flash and 2.5 Pro, 4,096 for the newer models. Google documents
# no lifetime for implicit hits ("send requests with similar prefix in a short amount of
# time"): the emulator keeps a prefix for 5 minutes of inactivity, as OpenAI does.
GEMINI_LIFETIME: Final = 300.0


def gemini_rule(model: str) -> CacheRule | None:
    """Gemini's implicit caching of `model`; None for a model without it."""
    name = model.removeprefix("models/")
    if name.startswith(("gemini-1.", "gemini-2.0")) or not name.startswith("gemini-"):
        return None
    minimum = 2048 if name.startswith("gemini-2.5") else 4096
    return CacheRule(minimum=minimum, lifetime=GEMINI_LIFETIME)


Prefix = tuple[Mapping[str, Any], ...]  # leading messages, the last one possibly cut


@dataclass(frozen=True)
class Breakpoint:
    """A prefix a request may read from the cache and writes to it, and how long it then
    lives unused (seconds)."""

    prefix: Prefix
    lifetime: float


def digest(scope: str, prefix: Prefix) -> bytes:
    """The key of a prefix: the scope (provider, model, anything else the vendor keys its
    cache by) and the prefix's canonical JSON, its cache markers left out."""
    text = json.dumps(_unmarked(list(prefix)), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(f"{scope}\n{text}".encode("utf-8", "surrogatepass")).digest()


def _unmarked(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _unmarked(v) for k, v in value.items() if k not in ("cache_control", "cachePoint")}
    if isinstance(value, list | tuple):
        return [_unmarked(v) for v in value if not (isinstance(v, Mapping) and set(v) == {"cachePoint"})]
    return value


def message_prefixes(messages: Sequence[Mapping[str, Any]]) -> list[Prefix]:
    """Every prefix at a message boundary, shortest first."""
    return [tuple(messages[:count]) for count in range(1, len(messages) + 1)]


class PromptCache:
    """One emulator's cache of prefix digests (thread-safe, bounded, by the injected clock)."""

    def __init__(self, clock: Callable[[], float], *, limit: int = PREFIX_LIMIT) -> None:
        self.clock = clock
        self.limit = limit
        self._expires: OrderedDict[bytes, float] = OrderedDict()  # digest -> when it lapses
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._expires)

    def automatic(self, scope: str, messages: Sequence[Mapping[str, Any]], rule: CacheRule) -> int:
        """The cached tokens of a vendor that caches every long prefix by itself."""
        marks = [Breakpoint(prefix, rule.lifetime) for prefix in message_prefixes(messages)]
        use = self.marked(scope, marks, rule.minimum)
        return use.read // rule.increment * rule.increment

    def marked(self, scope: str, breakpoints: Sequence[Breakpoint], minimum: int) -> CacheUse:
        """Read the longest live prefix of `breakpoints`, write (or refresh) every one of at
        least `minimum` tokens; the tokens read, and the tokens written past what was read
        up to the last breakpoint."""
        sized = [
            (digest(scope, mark.prefix), prompt_tokens(mark.prefix), mark.lifetime) for mark in breakpoints
        ]
        eligible = [entry for entry in sized if entry[1] >= minimum]
        if not eligible:
            return CacheUse()
        now = self.clock()
        with self._lock:
            read = max((size for key, size, _ in eligible if self._expires.get(key, now) > now), default=0)
            for key, _, lifetime in eligible:
                self._touch(key, now + lifetime)
        last = max(size for _, size, _ in eligible)
        return CacheUse(read=read, written=max(0, last - read))

    def _touch(self, key: bytes, expires: float) -> None:
        self._expires[key] = max(expires, self._expires.get(key, expires))
        self._expires.move_to_end(key)
        while len(self._expires) > self.limit:
            self._expires.popitem(last=False)
