"""Property: cache-aware grouping never changes which items run or what they are sent, only
which lane runs them (issue 32). Whatever the items' prefixes (interleaved or not), the
lanes' room and the chunking, the lanes planned with cache-aware routing on run exactly the
items they run with it off, each once, unchanged and in input order; every shared prefix is
on one lane whenever a lane has room for it; and a lane that fails over (or hands over to a
deadline rescue) passes on exactly the items it has not answered."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchroute.adapters.dynamo.lane_records import lane_from_item, lane_item
from batchroute.domain.routing import lane_plan
from batchroute.domain.routing.engine import RoutePlan, route
from batchroute.domain.routing.gates import RouteRequest, RoutingGuards
from batchroute.domain.routing.items import InputLine
from batchroute.domain.routing.lane_plan import (
    LaneRecord,
    PlanLane,
    failover_record,
    lane_chunks,
    lane_items,
    lane_offsets,
    plan_groups,
    plan_lanes,
)
from batchroute.domain.routing.prompt_cache import item_prefix_key
from batchroute.domain.routing.rescue import RescueOption, model_ordinals, rescue_records
from batchroute.services.batches import input_chunks
from batchroute.services.batches.input_chunks import InputChunkWriter
from tests.unit.catalog_fixtures import NOW, catalog, group_of, live, provider
from tests.unit.test_cache_routing import RULE, SYSTEM, caching_lane, chat

PROMPTS = (None, SYSTEM, SYSTEM.upper(), SYSTEM + " Be brief.")
LANES = [
    caching_lane("a", batch_in="0.50", cached="0.05", write="0.625", rule=RULE),
    caching_lane("b", batch_in="0.55", cached="0.055", write="0.69", rule=RULE),
    caching_lane("c", batch_in="0.60", cached="0.06", write="0.75", rule=RULE),
]
CATALOG = catalog([provider(lane.provider) for lane in LANES], LANES)


@dataclass
class _Chunks:
    """An object store keeping what InputChunkWriter writes: the lines of each chunk."""

    lines: dict[str, list[InputLine]] = field(default_factory=dict)

    def writer(self, key: str, *, content_type: str) -> _Chunks.Writer:
        self.lines[key] = []
        return _Chunks.Writer(self.lines[key])

    @dataclass
    class Writer:
        lines: list[InputLine]

        def write(self, data: bytes) -> None:
            self.lines.append(json.loads(data))

        def close(self) -> None:
            pass

        def abort(self) -> None:
            pass


@dataclass
class Batch:
    """A routed batch as create writes it: its plan, chunks and chunk_models."""

    plan: RoutePlan
    chunks: list[list[InputLine]]
    chunk_models: list[dict[str, int]]

    @property
    def items(self) -> dict[int, Any]:
        return {line["seq"]: line["item"] for chunk in self.chunks for line in chunk}

    def lanes(self) -> list[LaneRecord]:
        """Route's lane records, as they read back from their stored items."""
        lanes = plan_lanes(plan_groups(self.plan.to_api()), self.chunk_models, at="t")
        return [lane_from_item(lane_item(lane)) for lane in lanes]

    def owned(self, lane: LaneRecord, chunks: Sequence[int] | None = None) -> list[int]:
        """The seqs a lane record runs, in the order it runs them."""
        offsets = lane_offsets(self.chunk_models, lane)
        return [
            seq
            for chunk in (lane_chunks(lane) if chunks is None else chunks)
            for seq, _ in lane_items(
                self.chunks[chunk],
                model="m-chat",
                first_ordinal=offsets[chunk],
                start=lane.ordinal_start,
                end=lane.ordinal_end,
                exclude=frozenset(lane.exclude_seqs),
                prefixes=lane.prefixes,
            )
        ]


def created(items: list[dict[str, Any]], rooms: list[int], chunk_size: int, *, cache_aware: bool) -> Batch:
    states = live(
        LANES, overrides={lane.lane_id: (room, 30) for lane, room in zip(LANES, rooms, strict=True)}
    )
    plan = route(
        [group_of(items)],
        CATALOG,
        live=states,
        request=RouteRequest(),
        guards=RoutingGuards(cache_aware=cache_aware),
        now=NOW,
    )
    store = _Chunks()
    writer = InputChunkWriter(store, "b", chunk_size=chunk_size)  # type: ignore[arg-type]
    for item in items:
        writer.add(item)
    writer.close()
    chunks = [store.lines[key] for key in sorted(store.lines)]
    return Batch(plan, chunks, writer.chunk_models_for(plan.to_api()))


def ran(batch: Batch) -> dict[int, tuple[str, dict[str, Any]]]:
    """seq -> (lane id, item) for every item the planned lanes run; an item run twice fails.
    Each record runs its items in input order."""
    runs: dict[int, tuple[str, dict[str, Any]]] = {}
    for lane in batch.lanes():
        seqs = batch.owned(lane)
        assert seqs == sorted(seqs), f"{lane.lane_key} runs its items out of input order"
        assert len(seqs) == lane.item_count, f"{lane.lane_key} owns {len(seqs)}, counts {lane.item_count}"
        for seq in seqs:
            assert seq not in runs, f"item {seq} runs on two lanes"
            runs[seq] = (lane.lane_id, dict(batch.items[seq]))
    return runs


def cut_without_room(batch: Batch, rooms: dict[str, int], lanes_of: dict[str, set[str]]) -> list[str]:
    """The shared prefixes on two lanes or more although a selected lane had room left for
    all of it once the larger ones were placed whole."""
    group = batch.plan.groups[0]
    views = sorted(group.shared_prefixes, key=lambda view: (-view["items"], view["first"]))
    found = []
    for at, view in enumerate(views):
        if len(lanes_of[view["prefix"]]) < 2:
            continue
        for index, lane in enumerate(group.selected):
            held = sum(earlier["items"] for earlier in views[:at] if earlier.get("lane") == index)
            if rooms[lane.lane_id] - held >= view["items"]:
                found.append(view["prefix"])
    return found


ITEMS = st.lists(st.sampled_from(range(len(PROMPTS))), min_size=1, max_size=40)
ROOMS = st.lists(st.integers(min_value=0, max_value=40), min_size=3, max_size=3)


@settings(max_examples=120, deadline=None)
@given(prompts=ITEMS, rooms=ROOMS, chunk_size=st.integers(min_value=1, max_value=12))
def test_grouping_changes_only_the_lane_never_the_items(
    prompts: list[int], rooms: list[int], chunk_size: int
) -> None:
    items = [chat(index, PROMPTS[choice]) for index, choice in enumerate(prompts)]
    on = created(items, rooms, chunk_size, cache_aware=True)
    off = created(items, rooms, chunk_size, cache_aware=False)
    assert on.plan.ok == off.plan.ok
    if not on.plan.ok:
        return  # no lane room for them all: neither plan runs anything
    with_grouping, without = ran(on), ran(off)
    # every item runs exactly once either way, and is sent as it came
    assert sorted(with_grouping) == sorted(without) == list(range(len(items)))
    assert all(with_grouping[seq][1] == without[seq][1] == items[seq] for seq in with_grouping)
    # lanes of the same plan, taking as many items in all; only which items a lane takes differ
    selected = [lane.lane_id for lane in on.plan.groups[0].selected]
    assert set(selected) <= {lane.lane_id for lane in off.plan.groups[0].selected}
    assert sum(lane.item_count for lane in on.plan.groups[0].selected) == len(items)
    # every shared prefix is on one lane whenever a lane had room for it
    lanes_of: dict[str, set[str]] = defaultdict(set)
    for lane_id, item in with_grouping.values():
        key = item_prefix_key(item)
        if key is not None:
            lanes_of[key].add(lane_id)
    lane_rooms = {lane.lane_id: room for lane, room in zip(LANES, rooms, strict=True)}
    assert cut_without_room(on, lane_rooms, lanes_of) == []


@settings(max_examples=80, deadline=None)
@given(
    prompts=ITEMS,
    rooms=ROOMS,
    chunk_size=st.integers(min_value=1, max_value=12),
    where=st.floats(min_value=0, max_value=1),
    answered=st.floats(min_value=0, max_value=1),
    rescued=st.integers(min_value=0, max_value=40),
)
def test_a_grouped_lane_hands_over_exactly_its_unanswered_items(
    prompts: list[int], rooms: list[int], chunk_size: int, where: float, answered: float, rescued: int
) -> None:
    items = [chat(index, PROMPTS[choice]) for index, choice in enumerate(prompts)]
    batch = created(items, rooms, chunk_size, cache_aware=True)
    if not batch.plan.ok:
        return
    other = PlanLane("other/m-chat", "other", 0, {}, "outranked", Decimal(1), None)
    for lane in batch.lanes():
        chunks = lane_chunks(lane)
        if not chunks:
            continue
        # the lane fails over (or is rescued) in one of its chunks, having answered some of it
        at = min(int(where * len(chunks)), len(chunks) - 1)
        chunk = chunks[at]
        before = batch.owned(lane, chunks[:at])
        here = batch.owned(lane, [chunk])
        done = here[: int(answered * len(here))]
        first = lane_offsets(batch.chunk_models, lane)[chunk]
        successor = failover_record(
            lane, other, chunk=chunk, chunk_first_ordinal=first, answered=done, root_number=1, at="t"
        )
        taken = batch.owned(successor)
        assert sorted(before + done + taken) == batch.owned(lane)
        assert len(taken) == successor.item_count
        made = rescue_records(
            lane,
            RescueOption(other, 1, 1, {}),
            items=rescued,
            chunk=chunk,
            ordinals=model_ordinals(batch.chunks[chunk], "m-chat", first, lane.prefixes),
            done=done,
            offsets=lane_offsets(batch.chunk_models, lane),
            root_number=1,
            at="t",
        )
        rescue, rest = batch.owned(made.rescue), batch.owned(made.rest) if made.rest else []
        assert sorted(before + done + rescue + rest) == batch.owned(lane)
        assert len(rescue) == made.rescue.item_count
        assert made.rest is None or len(rest) == made.rest.item_count


# -- when the prefix counts are not kept, a split group runs in input order -------------------------

SPLIT = [chat(index, PROMPTS[1 + index % 2]) for index in range(10)]  # A B A B ...: 5 each


def test_a_split_group_keeps_the_counts_of_its_shared_prefixes_and_runs_them_whole() -> None:
    batch = created(SPLIT, [6, 6, 0], 3, cache_aware=True)
    assert any("#" in key for counts in batch.chunk_models for key in counts)
    runs = ran(batch)
    for key in {item_prefix_key(item) for item in SPLIT}:
        assert len({lane for lane, item in runs.values() if item_prefix_key(item) == key}) == 1


def test_without_the_counts_a_split_group_is_split_in_input_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # past the counts a batch keeps (or for a batch from before them) Route splits the group
    # in input order, as the quote's expectation did not: every item still runs once
    monkeypatch.setattr(lane_plan, "MAX_PREFIX_COUNTS", 0)
    batch = created(SPLIT, [6, 6, 0], 3, cache_aware=True)
    assert not any("#" in key for counts in batch.chunk_models for key in counts)
    lanes = batch.lanes()
    assert [(lane.prefixes, lane.ordinal_start, lane.ordinal_end) for lane in lanes] == [
        (None, 0, 5),
        (None, 5, 10),
    ]
    assert sorted(ran(batch)) == list(range(10))


def test_the_writer_stops_counting_prefixes_past_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(input_chunks, "MAX_COUNTED_PREFIXES", 3)
    batch = created(SPLIT, [6, 6, 0], 3, cache_aware=True)  # 4 chunks, 2 prefixes in each
    assert not any("#" in key for counts in batch.chunk_models for key in counts)
    assert sorted(ran(batch)) == list(range(10))
