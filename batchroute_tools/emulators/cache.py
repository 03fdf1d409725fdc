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


Prefix = tuple[Mapping[str, Any], ...]  # leading messages, the last one possibly cut


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
        self._used: OrderedDict[bytes, float] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._used)

    def automatic(self, scope: str, messages: Sequence[Mapping[str, Any]], rule: CacheRule) -> int:
        """The cached tokens of a vendor that caches every long prefix by itself."""
        use = self.marked(scope, message_prefixes(messages), rule)
        return use.read // rule.increment * rule.increment

    def marked(self, scope: str, breakpoints: Sequence[Prefix], rule: CacheRule) -> CacheUse:
        """Read the longest live prefix of `breakpoints` (each a prefix ending at a cache
        breakpoint), write every one of at least the rule's minimum; the tokens read, and
        the tokens written past what was read up to the last breakpoint."""
        sized = [(digest(scope, p), prompt_tokens(p)) for p in breakpoints]
        eligible = [(key, size) for key, size in sized if size >= rule.minimum]
        if not eligible:
            return CacheUse()
        now = self.clock()
        with self._lock:
            read = max((size for key, size in eligible if self._alive(key, now, rule.lifetime)), default=0)
            for key, _ in eligible:
                self._touch(key, now)
        last = max(size for _, size in eligible)
        return CacheUse(read=read, written=max(0, last - read))

    def _alive(self, key: bytes, now: float, lifetime: float) -> bool:
        used = self._used.get(key)
        return used is not None and now - used < lifetime

    def _touch(self, key: bytes, now: float) -> None:
        self._used[key] = now
        self._used.move_to_end(key)
        while len(self._used) > self.limit:
            self._used.popitem(last=False)
