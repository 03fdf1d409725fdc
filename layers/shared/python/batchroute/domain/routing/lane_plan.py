"""A batch's lane assignments: which lane runs which items, and where a failed lane hands over.

Pure. Items of one model keep their input order across chunks; a model's *ordinal* is the
index of an item among that model's items. `chunk_models[c]` (written by batch create)
says how many items of each model chunk `c` holds, so the ordinal of a model's first item
in every chunk is a running sum, and a lane that owns the ordinals `[start, end)` touches
exactly the chunks whose ordinal spans overlap that range. docs/batches.md is the contract.

A lane of a split group with shared prompt prefixes (cache-aware routing) owns a *stream*
of its model's items instead: those whose prefix is one of some shared prefixes, or none
of them (`PrefixFilter`), its ordinals counted among that stream's items, in input order.
`chunk_models[c]` then also counts each shared prefix's items of the chunk
(`prefix_count_key`), so the stream's ordinal at every chunk is a running sum too and
everything above holds per stream: every shared prefix stays on one lane, in input order,
without the items or the chunks changing (docs/routing.md, "Keeping a prefix on one lane").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from typing import Final, NamedTuple, TypedDict

from batchroute.domain.catalog.catalog import BatchLimits, Catalog, Lane
from batchroute.domain.catalog.pricing import NO_USAGE, TokenUsage
from batchroute.domain.routing.engine import (
    LaneProofView,
    RejectedLaneView,
    RejectionView,
    RoutePlanView,
    SelectedLaneView,
)
from batchroute.domain.routing.items import BatchItem, InputLine
from batchroute.domain.routing.policy import RoutePolicy
from batchroute.domain.routing.prompt_cache import REST, GroupPrefix, Share, item_prefix_key, lane_shares

OUTRANKED = "outranked"
# The vendors that cache only what a request marks: their lanes mark the shared prefixes.
MARKED_CACHES: Final = frozenset({"cache_control", "cache_point"})
# A vendor request is estimated at twice the item's compact ASCII JSON (a transform adds
# per-message wrappers; ASCII escaping is already the widest form of a character) plus what
# the line itself adds (custom id, method, URL, model, output limit).
REQUEST_SIZE_FACTOR: Final = 2
REQUEST_OVERHEAD_BYTES: Final = 1024
# The shared-prefix counts a batch keeps beside `chunk_models` (its PLAN item stays far under
# DynamoDB's 400 KB): past this many (chunk, prefix) counts a split group is not grouped.
MAX_PREFIX_COUNTS: Final = 2048


class PlanMismatch(ValueError):
    """The plan's lane item counts do not add up to the items the chunks hold."""


def model_slug(model: str) -> str:
    """`meta-llama/Llama-3.1-8B-Instruct` -> `meta-llama-llama-3-1-8b-instruct`."""
    return re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-") or "model"


def lane_key(number: int, provider: str, model: str, *, failover_depth: int = 0) -> str:
    """`<nn>-<provider>-<model slug>`; a failover lane of lane nn is `<nn>f<depth>-...`."""
    head = f"{number:02d}" + (f"f{failover_depth}" if failover_depth else "")
    return f"{head}-{provider}-{model_slug(model)}"


def model_offsets(chunk_models: Sequence[Mapping[str, int]], model: str) -> list[int]:
    """The model's ordinal at the start of every chunk, plus its total at the end
    (`len(chunk_models) + 1` numbers)."""
    offsets = [0]
    for counts in chunk_models:
        offsets.append(offsets[-1] + int(counts.get(model, 0) or 0))
    return offsets


def prefix_count_key(model: str, prefix: str) -> str:
    """The `chunk_models` key counting a chunk's items of `model` whose prefix is `prefix`."""
    return f"{model}#{prefix}"


def is_prefix_count_key(key: str) -> bool:
    """A `chunk_models` key of a prefix's count (`prefix_count_key`), not a model's (a model
    id never holds `#`: catalog/loader.py refuses one)."""
    return "#" in key


# A lane's `PrefixFilter` as its record stores it: one of the two lists ("except" is a keyword).
PrefixFilterItem = TypedDict("PrefixFilterItem", {"only": list[str], "except": list[str]}, total=False)


@dataclass(frozen=True, slots=True)
class PrefixFilter:
    """The stream of its model's items a lane owns: those whose cacheable prefix is one of
    `keys` (`only`), or none of them (the items of no shared prefix among them)."""

    only: bool
    keys: tuple[str, ...]

    def admits(self, item: BatchItem) -> bool:
        return (item_prefix_key(item) in self.keys) == self.only

    def to_item(self) -> PrefixFilterItem:
        return {"only": list(self.keys)} if self.only else {"except": list(self.keys)}

    @classmethod
    def from_item(cls, value: object) -> PrefixFilter | None:
        if not isinstance(value, Mapping):
            return None
        only = "only" in value
        keys = value.get("only" if only else "except") or []
        return cls(only, tuple(str(key) for key in keys))


def stream_offsets(
    chunk_models: Sequence[Mapping[str, int]], model: str, prefixes: PrefixFilter | None
) -> list[int]:
    """`model_offsets` of the stream a lane owns (`prefixes`; None: every item of the model)."""
    if prefixes is None:
        return model_offsets(chunk_models, model)
    offsets = [0]
    for counts in chunk_models:
        shared = sum(int(counts.get(prefix_count_key(model, key), 0) or 0) for key in prefixes.keys)
        offsets.append(offsets[-1] + (shared if prefixes.only else int(counts.get(model, 0) or 0) - shared))
    return offsets


def lane_offsets(chunk_models: Sequence[Mapping[str, int]], lane: LaneRecord) -> list[int]:
    """The ordinal of the lane's stream at the start of every chunk, plus its total."""
    return stream_offsets(chunk_models, lane.model, lane.prefixes)


def chunks_for_range(offsets: Sequence[int], start: int, end: int) -> list[int]:
    """The chunks holding at least one of the ordinals `[start, end)`."""
    return [
        chunk
        for chunk in range(len(offsets) - 1)
        if offsets[chunk + 1] > offsets[chunk] and offsets[chunk] < end and offsets[chunk + 1] > start
    ]


@dataclass(frozen=True, slots=True)
class PlanLane:
    """A lane entry of the quote's plan (a group's `selected_lanes` or `rejected_lanes`), read
    from the plan the batch keeps verbatim."""

    lane_id: str | None
    provider: str
    item_count: int
    unit_prices: Mapping[str, str]
    rejection_code: str | None
    # a rejected lane's estimated provider cost (the order of failover); Infinity when unknown
    estimated_cost: Decimal
    proof: LaneProofView | None  # the quote-time data/privacy proof, shown as planned
    # cache-aware routing (a selected lane whose vendor caches): items grouped on a shared
    # prefix, and the shortest prefix the lane marks for caching (None: it marks none)
    grouped_items: int = 0
    marks_from_tokens: int | None = None
    # an outranked lane that would stop the group's answers short of the output they ask for
    # (rank_basis `output_limit`): a failover takes it only after the lanes that would not
    stops_short: bool = False

    @classmethod
    def from_selected(cls, entry: SelectedLaneView) -> PlanLane:
        prices = entry.get("unit_prices") or {}
        item_count = int(entry.get("item_count") or 0)
        lane = cls._of(entry, item_count, {str(k): str(v) for k, v in prices.items()}, None)
        cache = entry.get("prompt_cache")
        if cache is None:
            return lane
        marked = str(cache.get("marker")) in MARKED_CACHES
        return replace(
            lane,
            grouped_items=int(cache.get("grouped_items") or 0),
            marks_from_tokens=int(cache.get("min_prefix_tokens") or 0) if marked else None,
        )

    @classmethod
    def from_rejected(cls, entry: RejectedLaneView) -> PlanLane:
        return cls._of(entry, 0, {}, entry.get("rejection"))

    @classmethod
    def _of(
        cls,
        entry: SelectedLaneView | RejectedLaneView,
        item_count: int,
        unit_prices: dict[str, str],
        rejection: RejectionView | None,
    ) -> PlanLane:
        lane_id, proof = entry.get("lane_id"), entry.get("proof")
        details = (rejection.get("details") if rejection else None) or {}
        return cls(
            lane_id=None if lane_id is None else str(lane_id),
            provider=str(entry.get("provider") or ""),
            item_count=item_count,
            unit_prices=unit_prices,
            rejection_code=rejection.get("code") if rejection else None,
            estimated_cost=_estimated_cost(details.get("estimated_provider_cost")),
            proof=proof if isinstance(proof, Mapping) else None,
            stops_short=details.get("rank_basis") == "output_limit",
        )


class PlanPrefix(NamedTuple):
    """A shared prefix of a plan's group: its key, its size, its items, the model ordinal
    of the first, and on a split the selected lane taking it whole (None: cut, or no split)."""

    key: str
    tokens: int
    items: int = 0
    first: int = 0
    lane: int | None = None


@dataclass(frozen=True, slots=True)
class PlanGroup:
    """One model's group of the quote's plan: its selected lanes in order, and the lanes the
    quote rejected (with why)."""

    model: str
    selected: tuple[PlanLane, ...]
    rejected: tuple[PlanLane, ...]
    shared_prefixes: tuple[PlanPrefix, ...] = ()  # cache-aware routing
    operations: tuple[str, ...] = ()  # its items' operations; () on a plan stored before

    def cache_prefixes(self, lane: PlanLane) -> tuple[str, ...]:
        """The shared prefixes a lane marks for its vendor's cache: those of at least its
        vendor's minimum, on a lane whose vendor needs a marker (docs/routing.md)."""
        least = lane.marks_from_tokens
        if least is None:
            return ()
        return tuple(shared.key for shared in self.shared_prefixes if shared.tokens >= least)


def plan_groups(plan: RoutePlanView | None) -> tuple[PlanGroup, ...]:
    """The groups of the quote's plan (`BatchRecord.plan`, the snapshot's routing as stored)."""
    return tuple(
        PlanGroup(
            model=str(group.get("model")),
            selected=tuple(PlanLane.from_selected(e) for e in group.get("selected_lanes") or []),
            rejected=tuple(PlanLane.from_rejected(e) for e in group.get("rejected_lanes") or []),
            shared_prefixes=tuple(
                PlanPrefix(
                    str(shared["prefix"]),
                    int(shared["tokens"]),
                    int(shared.get("items") or 0),
                    int(shared.get("first") or 0),
                    None if shared.get("lane") is None else int(str(shared.get("lane"))),
                )
                for shared in group.get("shared_prefixes") or []
            ),
            operations=tuple(str(operation) for operation in group.get("operations") or ()),
        )
        for group in (plan.get("groups") if plan is not None else None) or []
    )


def with_prefix_counts(
    chunk_models: Sequence[Mapping[str, int]],
    prefix_counts: Sequence[Mapping[tuple[str, str], int]],
    plan: RoutePlanView | None,
) -> list[dict[str, int]]:
    """`chunk_models` as a batch keeps it: with, for each group the plan splits among lanes,
    each chunk's count of every shared prefix of the group's (`prefix_counts[c]`: (model,
    prefix) -> items of the chunk), unless that takes more than MAX_PREFIX_COUNTS counts."""
    shared = {
        group.model: {prefix.key for prefix in group.shared_prefixes}
        for group in plan_groups(plan)
        if len(group.selected) > 1 and group.shared_prefixes
    }
    kept = [
        {
            prefix_count_key(model, key): count
            for (model, key), count in counts.items()
            if key in shared.get(model, ())
        }
        for counts in prefix_counts
    ]
    if not shared or sum(len(counts) for counts in kept) > MAX_PREFIX_COUNTS:
        return [dict(models) for models in chunk_models]
    return [{**models, **counts} for models, counts in zip(chunk_models, kept, strict=True)]


def _estimated_cost(cost: object) -> Decimal:
    amount = cost.get("amount") if isinstance(cost, Mapping) else None
    try:
        return Decimal(str(amount)) if amount is not None else Decimal("Infinity")
    except InvalidOperation:
        return Decimal("Infinity")


@dataclass(frozen=True, slots=True)
class LaneFailError:
    """The first item error a lane keeps for the items it fails (`fail_error`)."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class SubmittedJob:
    """A vendor batch job of the lane: stored on the lane record between invocations."""

    job_id: str
    attempt: int  # every request in the job is on this attempt
    item_count: int
    submitted_at: str  # ISO 8601
    # The job's item seqs; None = every item of the lane (the first job). Follow-up jobs
    # (resubmitted transient failures) list theirs, which stay few.
    seqs: tuple[int, ...] | None = None
    lost_resubmits: int = 0  # resubmits because the provider forgot the job
    # The lane's items were more than one vendor job holds: after this one (and its
    # follow-ups), the items not answered yet go in the next job.
    more: bool = False


@dataclass(frozen=True, slots=True)
class LaneRecord:
    """A lane's record `BATCH#<id>`/`LANE#<lane key>` (docs/batches.md): which items it owns,
    the chunks it runs in order and its progress through them, its tallies. Stored field for
    field but for its usage, kept as one map (adapters/dynamo/lane_records.py)."""

    lane_key: str
    lane_id: str
    provider: str
    model: str
    ordinal_start: int
    ordinal_end: int
    item_count: int
    chunk_ranges: tuple[tuple[int, int], ...]
    unit_prices: Mapping[str, str]
    created_at: str
    status: str = "pending"
    chunks_started_n: int = 0
    chunks_done_n: int = 0
    running_items: int = 0
    attempts: int = 0
    usage: TokenUsage = NO_USAGE  # of its finished chunks' completed items
    completed: int = 0
    failed: int = 0
    canceled: int = 0
    handed_over: int = 0
    exclude_seqs: tuple[int, ...] = ()
    failover_from: str | None = None
    failover_depth: int = 0
    # set as the lane runs
    started_at: str | None = None
    updated_at: str | None = None
    finished_at: str | None = None
    latest_error: str | None = None
    failover_to: str | None = None
    fail_error: LaneFailError | None = None
    job: SubmittedJob | None = None  # the vendor batch job in flight
    job_chunk: int | None = None
    # "<chunk>:<custom ids digest>:<unix seconds>:<key>": a vendor job submit begun and its job
    # not yet stored (services/workflow/submits.py); cleared when the job is stored
    submitting: str | None = None
    partial_chunk: int | None = None
    handover_reason: str | None = None  # "deadline_rescue" / "deadline_rescue_rest"; else failover
    then_lane: str | None = None  # run after this lane's chain: a rescue's rest on the old lane
    cache_prefixes: tuple[str, ...] = ()  # the shared prefixes its requests mark (cache-aware routing)
    prefixes: PrefixFilter | None = None  # the stream of its model's items it owns; None: all
    # "<chunk>:<writer>": the result file each finished chunk counted (`result_chunk_key`),
    # noted by the write that finished the chunk; a chunk not here (a record from before, or
    # one that answered none of it) has its file, if any, under the key without a writer
    result_writers: tuple[str, ...] = ()


def new_lane_record(
    *,
    lane_key: str,
    lane_id: str,
    provider: str,
    model: str,
    ordinal_start: int,
    ordinal_end: int,
    chunks: list[int],
    unit_prices: Mapping[str, str],
    at: str,
    exclude_seqs: Iterable[int] = (),
    failover_from: str | None = None,
    failover_depth: int = 0,
    cache_prefixes: tuple[str, ...] = (),
    prefixes: PrefixFilter | None = None,
) -> LaneRecord:
    excluded = tuple(sorted(set(exclude_seqs)))
    return LaneRecord(
        lane_key=lane_key,
        lane_id=lane_id,
        provider=provider,
        model=model,
        ordinal_start=ordinal_start,
        ordinal_end=ordinal_end,
        item_count=ordinal_end - ordinal_start - len(excluded),
        chunk_ranges=tuple((first, last) for first, last in chunk_ranges(chunks)),
        unit_prices=dict(unit_prices),
        created_at=at,
        exclude_seqs=excluded,
        failover_from=failover_from,
        failover_depth=failover_depth,
        cache_prefixes=cache_prefixes,
        prefixes=prefixes,
    )


# -- a lane's chunks and its progress through them ------------------------------------------------
# A lane runs its chunks in the order of its list, one invocation at a time, so the record keeps
# the list as ranges (`chunk_ranges`: `[[first, last], ...]`, run-length) and its progress as two
# watermarks in that order: the chunks at positions `< chunks_started_n` were started, those at
# `< chunks_done_n` finished. The record's size does not grow with the batch, and DynamoDB bills
# every rewrite of it (two per chunk) by its whole size. Records written before the watermarks
# carry the lists `chunks`, `chunks_started` and `chunks_done`; these helpers read both forms.


def chunk_ranges(chunks: Iterable[int]) -> list[list[int]]:
    """`[3, 4, 5, 9, 10]` -> `[[3, 5], [9, 10]]` (the chunks in their order, run-length)."""
    ranges: list[list[int]] = []
    for chunk in chunks:
        if ranges and chunk == ranges[-1][1] + 1:
            ranges[-1][1] = chunk
        else:
            ranges.append([chunk, chunk])
    return ranges


def lane_chunks(lane: LaneRecord) -> list[int]:
    """The lane's chunks in the order it runs them."""
    return [chunk for first, last in lane.chunk_ranges for chunk in range(first, last + 1)]


def lane_chunk_count(lane: LaneRecord) -> int:
    return sum(last - first + 1 for first, last in lane.chunk_ranges)


def lane_chunk_position(lane: LaneRecord, chunk: int) -> int | None:
    """The chunk's index in the lane's list (None: not the lane's)."""
    position = 0
    for first, last in lane.chunk_ranges:
        if first <= chunk <= last:
            return position + chunk - first
        position += last - first + 1
    return None


def result_writer_note(chunk: int, writer: str) -> str:
    """The lane record's note (`result_writers`) of the result file `writer` wrote of `chunk`."""
    return f"{chunk}:{writer}"


def lane_result_writer(lane: LaneRecord, chunk: int) -> str | None:
    """The writer of the result file the lane's finished `chunk` counted, if it noted one."""
    mark = result_writer_note(chunk, "")
    return next((entry[len(mark) :] for entry in lane.result_writers if entry.startswith(mark)), None)


def lane_chunk_done(lane: LaneRecord, chunk: int) -> bool:
    """The lane finished `chunk` (its result chunk is written)."""
    position = lane_chunk_position(lane, chunk)
    return position is not None and position < lane.chunks_done_n


def lane_done_chunks(lane: LaneRecord) -> frozenset[int]:
    """Every chunk the lane finished (for readers that test many chunks)."""
    return frozenset(lane_chunks(lane)[: lane.chunks_done_n])


def plan_lanes(
    groups: Sequence[PlanGroup], chunk_models: Sequence[Mapping[str, int]], *, at: str
) -> list[LaneRecord]:
    """The lane records Route writes (docs/batches.md), numbered in plan order: each model's
    items split among its group's selected lanes in order (`group_shares`), each lane's
    share a record for each stream it takes part of (its ordinal range and chunks there)."""
    lanes: list[LaneRecord] = []
    for group in groups:
        planned = group_shares(group, chunk_models)
        keys = tuple(dict.fromkeys(share.key for shares in planned for share in shares if share.key != REST))
        for entry, shares in zip(group.selected, planned, strict=True):
            for share in _merged(shares, keys):
                offsets = stream_offsets(chunk_models, group.model, share.prefixes)
                lanes.append(
                    new_lane_record(
                        lane_key=lane_key(len(lanes) + 1, entry.provider, group.model),
                        lane_id=str(entry.lane_id),
                        provider=entry.provider,
                        model=group.model,
                        ordinal_start=share.start,
                        ordinal_end=share.end,
                        chunks=chunks_for_range(offsets, share.start, share.end),
                        unit_prices=entry.unit_prices,
                        at=at,
                        cache_prefixes=group.cache_prefixes(entry),
                        prefixes=share.prefixes,
                    )
                )
    return lanes


def group_shares(group: PlanGroup, chunk_models: Sequence[Mapping[str, int]]) -> list[list[Share]]:
    """Each selected lane's shares of the group's items. The lanes take the model's items in
    input order, one range after another, unless the group is split among lanes and has
    shared prefixes whose counts the batch keeps (cache-aware routing): then each shared
    prefix the plan places on a lane (`lane`) goes there whole, and the lanes take the rest
    in order (prompt_cache.lane_shares, as the quote planned them)."""
    model = group.model
    total = model_offsets(chunk_models, model)[-1]
    counts = [entry.item_count for entry in group.selected]
    shared = [GroupPrefix(prefix.key, prefix.items, prefix.first) for prefix in group.shared_prefixes]
    if len(counts) < 2 or not all(_counted(chunk_models, model, prefix) for prefix in shared):
        shared = []  # one stream; or counts not kept (too many, a batch from before them)
    lane_of = {prefix.key: prefix.lane for prefix in group.shared_prefixes if prefix.lane is not None}
    try:
        return lane_shares(shared, lane_of if shared else {}, counts, total)
    except ValueError as exc:
        raise PlanMismatch(
            f"the plan places {sum(counts)} items of {model} but the batch holds {total}"
        ) from exc


def _counted(chunk_models: Sequence[Mapping[str, int]], model: str, prefix: GroupPrefix) -> bool:
    key = prefix_count_key(model, prefix.key)
    return sum(int(counts.get(key, 0) or 0) for counts in chunk_models) == prefix.items


class _Stream(NamedTuple):
    """A lane's share as a record runs it: its stream and its ordinals `[start, end)` there."""

    prefixes: PrefixFilter | None
    start: int
    end: int


def _merged(shares: list[Share], keys: tuple[str, ...]) -> list[_Stream]:
    """A lane's shares as streams: its whole shares as one (the items of its whole shared
    prefixes, and of no shared prefix if it takes them all), each part of a stream alone."""
    wholes = [share for share in shares if share.whole]
    parts = [_Stream(_stream(share.key, keys), share.start, share.end) for share in shares if not share.whole]
    if not wholes:
        return parts
    size = sum(share.size for share in wholes)
    own = tuple(share.key for share in wholes if share.key != REST)
    if len(wholes) == len(own):
        return [_Stream(PrefixFilter(True, own), 0, size), *parts]
    others = tuple(key for key in keys if key not in own)
    return [_Stream(PrefixFilter(False, others) if others else None, 0, size), *parts]


def _stream(key: str, keys: tuple[str, ...]) -> PrefixFilter | None:
    """The stream of one share: a shared prefix's items, or those of none (every item of
    the model when there is no shared prefix)."""
    if key != REST:
        return PrefixFilter(True, (key,))
    return PrefixFilter(False, keys) if keys else None


def lane_items(
    lines: Iterable[InputLine],
    *,
    model: str,
    first_ordinal: int,
    start: int,
    end: int,
    exclude: frozenset[int] = frozenset(),
    prefixes: PrefixFilter | None = None,
) -> Iterator[tuple[int, BatchItem]]:
    """The `(seq, item)` pairs of one input chunk that a lane owns: items of its model (of
    its stream: `prefixes`) whose ordinal (counted from `first_ordinal`, the stream's ordinal
    at the chunk's start) is in `[start, end)`, less the `exclude`d seqs (answered by the
    lane it took over from)."""
    ordinal = first_ordinal
    for line in lines:
        item = line["item"]
        if item.get("model") != model or (prefixes is not None and not prefixes.admits(item)):
            continue
        seq = int(line["seq"])
        if start <= ordinal < end and seq not in exclude:
            yield seq, item
        ordinal += 1
        if ordinal >= end:
            return


# -- vendor batch jobs ----------------------------------------------------------------------------


def estimated_request_bytes(item: BatchItem) -> int:
    """A conservative estimate of the bytes one item takes in a vendor batch job: never
    less than the serialized request a transform builds from it."""
    compact = json.dumps(item, ensure_ascii=True, separators=(",", ":"), default=str)
    return REQUEST_SIZE_FACTOR * len(compact) + REQUEST_OVERHEAD_BYTES


def embedding_inputs(item: BatchItem) -> int:
    """How many embedding inputs an item sends: one for a string or a token array, each
    entry for a list of strings or of token arrays; 0 for an item of another operation."""
    if item.get("operation") != "embeddings":
        return 0
    payload = item.get("input")
    value = None
    if isinstance(payload, Mapping):
        value = payload.get("input") if "input" in payload else payload.get("text")
    if isinstance(value, list) and value and not all(isinstance(v, int) for v in value):
        return len(value)
    return 1


def job_parts(
    items: Iterable[tuple[int, BatchItem]], limits: BatchLimits
) -> list[list[tuple[int, BatchItem]]]:
    """The items split, in order, into consecutive parts that each fit one vendor batch job:
    at most `limits.max_requests` items, `limits.max_bytes` estimated bytes and
    `limits.max_embedding_inputs` embedding inputs. An item over a limit alone is a part of
    its own (the vendor decides)."""
    parts: list[list[tuple[int, BatchItem]]] = []
    current: list[tuple[int, BatchItem]] = []
    size = inputs = 0
    for seq, item in items:
        item_bytes = estimated_request_bytes(item) if limits.max_bytes is not None else 0
        item_inputs = embedding_inputs(item) if limits.max_embedding_inputs is not None else 0
        full = limits.max_requests is not None and len(current) >= limits.max_requests
        too_big = limits.max_bytes is not None and size + item_bytes > limits.max_bytes
        too_many = (
            limits.max_embedding_inputs is not None and inputs + item_inputs > limits.max_embedding_inputs
        )
        if current and (full or too_big or too_many):
            parts.append(current)
            current, size, inputs = [], 0, 0
        current.append((seq, item))
        size += item_bytes
        inputs += item_inputs
    if current:
        parts.append(current)
    return parts


def failover_candidates(
    groups: Sequence[PlanGroup], model: str, used_lane_ids: Iterable[str]
) -> list[PlanLane]:
    """The lanes a failed lane of `model` may hand over to: the quote's rejected lanes with
    code `outranked` (eligible, only not needed), as the quote ranked them: those that can
    produce the output the items ask for before those that would stop it short, then cheapest
    first (then plan order), less the lanes the batch already used."""
    used = set(used_lane_ids)
    found: list[tuple[bool, Decimal, int, PlanLane]] = []
    for group in groups:
        if group.model != model:
            continue
        for index, entry in enumerate(group.rejected):
            if entry.rejection_code == OUTRANKED and entry.lane_id not in used:
                found.append((entry.stops_short, entry.estimated_cost, index, entry))
    return [entry for *_, entry in sorted(found, key=lambda f: f[:3])]


def handover_lanes(
    groups: Sequence[PlanGroup],
    model: str,
    used_lane_ids: Iterable[str],
    catalog: Catalog,
    policy: RoutePolicy | None,
) -> list[tuple[PlanLane, Lane]]:
    """`failover_candidates` still in the catalog and admitted by the org's route policy as it
    stands now (`policy`, in force; None: none), on batch prices for the operations of the
    model group's items as the quote checked them (a plan stored before it kept them: every
    operation of the model), each with its catalog lane: a failover or a rescue never leaves
    the policy, even one changed since the quote (docs/routing-policy.md)."""
    group = next((g for g in groups if g.model == model), None)
    known = catalog.model(model)
    wanted = (group.operations if group is not None else ()) or (known.operations if known else ())
    found: list[tuple[PlanLane, Lane]] = []
    for candidate in failover_candidates(groups, model, used_lane_ids):
        lane = next((c for c in catalog.lanes_for(model) if c.lane_id == candidate.lane_id), None)
        provider = catalog.provider(lane.provider) if lane is not None else None
        if lane is None or provider is None:
            continue
        if policy is not None and policy.lane_failures(lane, provider, wanted, "batch"):
            continue
        found.append((candidate, lane))
    return found


def plan_lane_entry(groups: Sequence[PlanGroup], lane_id: str) -> PlanLane | None:
    """The plan's entry (selected or rejected) for a lane: its quote-time proof is there."""
    for group in groups:
        for entry in (*group.selected, *group.rejected):
            if entry.lane_id == lane_id:
                return entry
    return None


def failover_record(
    source: LaneRecord,
    candidate: PlanLane,
    *,
    chunk: int,
    chunk_first_ordinal: int,
    answered: Iterable[int],
    root_number: int,
    at: str,
) -> LaneRecord:
    """The lane record that takes over `source`'s unfinished items from `chunk` on: the
    ordinals from the lane's first one in that chunk to its end, less the seqs already
    answered there, at the source lane's (quoted) unit prices."""
    start = max(source.ordinal_start, chunk_first_ordinal)
    excluded = set(answered)
    source_chunks = lane_chunks(source)
    if source_chunks and chunk == source_chunks[0]:
        excluded |= set(source.exclude_seqs)
    depth = source.failover_depth + 1
    provider = candidate.provider
    model = source.model
    successor = new_lane_record(
        lane_key=lane_key(root_number, provider, model, failover_depth=depth),
        lane_id=str(candidate.lane_id),
        provider=provider,
        model=model,
        ordinal_start=start,
        ordinal_end=source.ordinal_end,
        chunks=[c for c in source_chunks if c >= chunk],
        unit_prices=source.unit_prices,
        at=at,
        exclude_seqs=excluded,
        failover_from=source.lane_key,
        failover_depth=depth,
        cache_prefixes=source.cache_prefixes,
        prefixes=source.prefixes,
    )
    # A rescue lane that fails over hands on the rest its old lane keeps (rescue.py).
    return replace(successor, then_lane=source.then_lane) if source.then_lane else successor


def root_number(lane_key_value: str) -> int:
    """The planned lane number a lane key starts with (`03f2-...` -> 3)."""
    digits = re.match(r"\d+", lane_key_value)
    return int(digits.group(0)) if digits else 0
