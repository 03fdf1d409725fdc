"""Prompt caching in routing (issue 32): the shared prefixes of a batch's items, and what a
lane whose vendor caches is expected to read from its cache. Pure. docs/routing.md,
"Cache-aware routing", is the long form.

An item's cacheable prefix is what every vendor caches first and in this order: its tool
definitions, its system prompt (`system` / `instructions` and the system or developer
messages before the first other turn count as leading messages) and its messages before
the last user turn; its structured-output format is part of the key (not of the size), so
items that differ there are not grouped. OpenAI caches the exact leading tokens of the
request (tools included), Anthropic tools, system and messages up to a `cache_control`
breakpoint, Bedrock up to a `cachePoint`: that prefix is a leading run of each of them.

The prefix is keyed by a digest of its parts (`prefix_key`: texts as their bytes, anything
else as canonical JSON), and sized at
PREFIX_BYTES_PER_TOKEN bytes a token (the tokenizers' English average, not the prompt
estimate's conservative 3: a vendor's minimum is only taken as reached when it likely is,
and a saving is not overstated). Prefixes under MIN_TRACKED_TOKENS (the smallest minimum
any vendor caches) are never hashed, so most items cost one size check.

Expected cache use of n items sharing a prefix of t tokens on a lane whose vendor caches
prefixes of at least `min_tokens`: one write of t tokens and n - 1 reads of t tokens
(`expected_cache`). A group split among lanes keeps each shared prefix whole on one lane
where the lanes' room allows (`pack_prefixes`, `lane_shares`), so a lane's share of a
prefix is known exactly, never pro rata. Below the minimum nothing changes. An
expectation, never a bound: the vendor decides what it reads, so the amount a batch
reserves stays the uncached estimate.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Final, NamedTuple, NotRequired, Protocol, TypedDict, TypeGuard

from batchroute.domain.catalog.catalog import Lane, PromptCacheRule
from batchroute.domain.catalog.pricing import CacheUse, batch_cost, token_cost
from batchroute.domain.catalog.tokens import TOKENS_PER_MESSAGE, utf8_len, value_bytes

PREFIX_BYTES_PER_TOKEN: Final = 4
MIN_TRACKED_TOKENS: Final = 1024  # the smallest minimum of any vendor (OpenAI, most Claude models)
MAX_TRACKED_PREFIXES: Final = 4096  # distinct prefixes one model group follows
MAX_SHARED_PREFIXES: Final = 32  # the shared prefixes a group keeps (the largest savings)
_KEY_BYTES: Final = 12
_KEYS_BYTES: Final = len("role") + len("content")  # a plain message's keys, as value_bytes counts them


class ItemPrefix(NamedTuple):
    """An item's cacheable prefix: its key and its size in tokens."""

    key: str
    tokens: int


@dataclass(slots=True)
class PrefixRun:
    """The items of one model sharing a prefix: how many, and the model ordinals of the
    first and last (contiguous when `last - first + 1 == items`)."""

    tokens: int
    items: int
    first: int
    last: int

    @property
    def contiguous(self) -> bool:
        return self.last - self.first + 1 == self.items


class SharedPrefixView(TypedDict):
    """A shared prefix as a plan's group keeps it (and an item profile stores it)."""

    prefix: str
    tokens: int
    items: int
    first: int
    last: int
    lane: NotRequired[int]  # a split plan's: the selected lane taking it whole (none: cut)


class ChatInput(Protocol):
    """A chat item's `input` object (any mapping of its keys): what the prefix reads of it."""

    def get(self, key: str, /) -> object: ...


def item_prefix_key(item: ChatInput) -> str | None:
    """The key of a batch item's cacheable prefix, as the preflight reads it (an
    embeddings item has none); None when it has none."""
    payload = item.get("input")
    if item.get("operation") == "embeddings" or not isinstance(payload, Mapping):
        return None
    prefix = item_prefix(payload)
    return None if prefix is None else prefix.key


def item_prefix(payload: ChatInput) -> ItemPrefix | None:
    """The cacheable prefix of a chat item's `input`; None when it has none of at least
    MIN_TRACKED_TOKENS tokens."""
    conversation = payload.get("messages")
    leading = _leading(payload.get("input") if conversation is None else conversation)
    tools = payload.get("tools")
    system, instructions = payload.get("system"), payload.get("instructions")
    if not leading and tools is None and system is None and instructions is None:
        return None  # most items: one user turn
    size = sum(utf8_len(text) for text in (system, instructions) if isinstance(text, str))
    size += sum(_message_bytes(message) for message in leading)
    size += value_bytes(tools) if tools is not None else 0
    tokens = -(-size // PREFIX_BYTES_PER_TOKEN) + TOKENS_PER_MESSAGE * len(leading)
    if tokens < MIN_TRACKED_TOKENS:
        return None
    parts = [tools, system, instructions, *leading, payload.get("response_format"), payload.get("text")]
    return ItemPrefix(prefix_key(parts), tokens)


def prefix_key(parts: Iterable[object]) -> str:
    """A digest of the parts in order: a text or a plain `{role, content}` message fed as its
    UTF-8 bytes (a long system prompt is hashed, not re-encoded as JSON: most of a quote's
    time on such items), anything else as its canonical JSON; each part tagged and sized, so
    no two different part lists feed the same bytes."""
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, str):
            _feed(digest.update, b"s", part)
        elif _plain(part):
            _feed(digest.update, b"r", part["role"])
            _feed(digest.update, b"c", part["content"])
        elif part is None:
            digest.update(b"n;")
        else:
            canonical = json.dumps(part, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
            _feed(digest.update, b"j", canonical)
    return digest.hexdigest()[: 2 * _KEY_BYTES]


def _feed(update: Callable[[bytes], None], tag: bytes, text: str) -> None:
    data = text.encode("utf-8", "surrogatepass")
    update(b"%s%d:" % (tag, len(data)))
    update(data)


def _plain(message: object) -> TypeGuard[dict[str, str]]:
    """A `{role, content}` message of two texts (most messages)."""
    return (
        type(message) is dict
        and len(message) == 2
        and isinstance(message.get("role"), str)
        and isinstance(message.get("content"), str)
    )


def _message_bytes(message: object) -> int:
    """value_bytes of a message, a plain one without walking it."""
    if _plain(message):
        return _KEYS_BYTES + utf8_len(message["role"]) + utf8_len(message["content"])
    return value_bytes(message)


def _leading(conversation: object) -> list[object]:
    """The messages before the last user turn (a Responses `input` string has none)."""
    if not isinstance(conversation, list):
        return []
    for position in range(len(conversation) - 1, -1, -1):
        message = conversation[position]
        if isinstance(message, Mapping) and message.get("role") == "user":
            return conversation[:position]
    return []


def shared_runs(prefixes: Mapping[str, PrefixRun]) -> list[tuple[str, PrefixRun]]:
    """The prefixes two or more items share, the largest possible savings first (at most
    MAX_SHARED_PREFIXES of them; ties by key, so the order is the same on every path)."""
    shared = [(key, run) for key, run in prefixes.items() if run.items >= 2]
    shared.sort(key=lambda entry: (-(entry[1].items - 1) * entry[1].tokens, entry[0]))
    return shared[:MAX_SHARED_PREFIXES]


def shared_views(prefixes: Mapping[str, PrefixRun]) -> list[SharedPrefixView]:
    return run_views(shared_runs(prefixes))


def run_views(entries: Iterable[tuple[str, PrefixRun]]) -> list[SharedPrefixView]:
    return [
        {"prefix": key, "tokens": run.tokens, "items": run.items, "first": run.first, "last": run.last}
        for key, run in entries
    ]


def runs_of(views: Iterable[SharedPrefixView]) -> dict[str, PrefixRun]:
    """Shared prefixes read back from their views (a profile's, a stored plan's)."""
    return {
        str(view["prefix"]): PrefixRun(
            tokens=_whole(view["tokens"]),
            items=_whole(view["items"]),
            first=_whole(view["first"]),
            last=_whole(view["last"]),
        )
        for view in views
    }


def _whole(value: object) -> int:
    return int(str(value))


@dataclass(frozen=True, slots=True)
class ExpectedCache:
    """What a lane's share of a group is expected to read from / write to the cache."""

    grouped_items: int = 0  # items whose prefix is shared and at or above the lane's minimum
    cached_tokens: int = 0
    write_tokens: int = 0

    def __add__(self, other: ExpectedCache) -> ExpectedCache:
        return ExpectedCache(
            self.grouped_items + other.grouped_items,
            self.cached_tokens + other.cached_tokens,
            self.write_tokens + other.write_tokens,
        )


NO_EXPECTED_CACHE: Final = ExpectedCache()


# -- a split group: each shared prefix whole on one lane ------------------------------------------
REST: Final = ""  # the stream of a split group's items of no shared prefix (no key is empty)


class GroupPrefix(NamedTuple):
    """A shared prefix of a group as a split places it: its key, its items, and the model
    ordinal of the first (the order of first appearance)."""

    key: str
    items: int
    first: int


class Share(NamedTuple):
    """A lane's share of one *stream* of a split group's items (a shared prefix's items, or
    REST: the items of none), numbered in input order within the stream: `[start, end)` of
    its `size` items."""

    key: str
    start: int
    end: int
    size: int

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.end == self.size


def pack_prefixes(
    shared: Sequence[GroupPrefix], rooms: Sequence[int], total: int
) -> tuple[dict[str, int], list[int]]:
    """How a group of `total` items splits among lanes with these `rooms` (in rank order,
    together room for all): the lane taking each shared prefix whole (largest first, each on
    the first lane with room left for it; a prefix no lane has room left for is cut), and
    how many items each lane takes (its whole prefixes, then the other items in rank order)."""
    free = list(rooms)
    lane_of: dict[str, int] = {}
    for prefix in sorted(shared, key=lambda prefix: (-prefix.items, prefix.first)):
        lane = next((at for at, room in enumerate(free) if room >= prefix.items), None)
        if lane is not None:
            lane_of[prefix.key] = lane
            free[lane] -= prefix.items
    left = total - sum(prefix.items for prefix in shared if prefix.key in lane_of)
    counts = [room - room_left for room, room_left in zip(rooms, free, strict=True)]
    for at, room_left in enumerate(free):
        step = min(room_left, left)
        counts[at] += step
        left -= step
    return lane_of, counts


def lane_shares(
    shared: Sequence[GroupPrefix], lane_of: Mapping[str, int], counts: Sequence[int], total: int
) -> list[list[Share]]:
    """Each lane's shares of a group of `total` items that lanes take `counts` of: the
    shared prefixes `lane_of` places whole, then, in lane order, the rest in order (the
    prefixes cut, by first appearance, then the items of no shared prefix). ValueError when
    the counts do not add up."""
    ordered = sorted(shared, key=lambda prefix: prefix.first)
    placed = {key: lane for key, lane in lane_of.items() if 0 <= lane < len(counts)}
    rest: list[tuple[str, int]] = [(p.key, p.items) for p in ordered if p.key not in placed]
    others = total - sum(prefix.items for prefix in ordered)
    if others > 0:
        rest.append((REST, others))
    shares: list[list[Share]] = []
    at = used = 0  # the rest's stream, and its items taken so far
    for lane, count in enumerate(counts):
        taken = [Share(p.key, 0, p.items, p.items) for p in ordered if placed.get(p.key) == lane]
        left = count - sum(share.size for share in taken)
        while left > 0 and at < len(rest):
            key, size = rest[at]
            step = min(left, size - used)
            taken.append(Share(key, used, used + step, size))
            left, used = left - step, used + step
            if used == size:
                at, used = at + 1, 0
        if left != 0:
            raise ValueError(f"lane {lane} is planned {count} items, its shares are {count - left}")
        shares.append(taken)
    if at < len(rest):
        raise ValueError("the lanes' items do not add up to the group's")
    return shares


def expected_cache(
    runs: Iterable[PrefixRun], rule: PromptCacheRule | None, *, start: int = 0, end: int | None = None
) -> ExpectedCache:
    """The expected cache use of the items with model ordinals in `[start, end)` (all of
    them: `end` None): for each shared prefix of at least the rule's minimum, its items
    there (exact for a contiguous run, pro rata, rounded down, otherwise) make one write and
    a read each after the first."""
    if rule is None:
        return NO_EXPECTED_CACHE
    total = NO_EXPECTED_CACHE
    for run in runs:
        if run.tokens < rule.min_tokens:
            continue
        count = _items_in(run, start, end)
        if count >= 2:
            total = total + ExpectedCache(count, (count - 1) * run.tokens, run.tokens)
    return total


def _items_in(run: PrefixRun, start: int, end: int | None) -> int:
    if start <= run.first and (end is None or run.last < end):
        return run.items
    stop = run.last + 1 if end is None else min(end, run.last + 1)
    overlap = max(0, stop - max(start, run.first))
    if run.contiguous:
        return overlap
    return overlap * run.items // (run.last - run.first + 1)


def expected_cost(lane: Lane, prompt_tokens: int, output_tokens: int, expected: ExpectedCache) -> Decimal:
    """Exact USD of the tokens at the lane's batch prices, the expected cache reads and
    writes at theirs (the uncached cost when nothing is expected)."""
    if not expected.cached_tokens and not expected.write_tokens:
        return batch_cost(prompt_tokens, output_tokens, lane.price)
    prices = lane.price.batch
    cache = CacheUse.priced(expected.cached_tokens, expected.write_tokens, prices)
    return token_cost(
        prompt_tokens, output_tokens, prices.input_per_mtok, prices.output_per_mtok, cache=cache
    )


def cache_saving(
    cached_tokens: int,
    write_tokens: int,
    input_per_mtok: Decimal,
    cached_per_mtok: Decimal | None,
    write_per_mtok: Decimal | None,
) -> Decimal:
    """Exact USD the cache saved against billing every token as input: cached tokens x
    (input price - cached price) less the write premium (write tokens x (write price -
    input price)); a price not given is the input price."""
    cached_price = input_per_mtok if cached_per_mtok is None else cached_per_mtok
    write_price = input_per_mtok if write_per_mtok is None else write_per_mtok
    saved = cached_tokens * (input_per_mtok - cached_price) - write_tokens * (write_price - input_per_mtok)
    return saved / Decimal(1_000_000)
