"""Property: cache-aware grouping never changes which items run or what they are sent, only
which lane runs them (issue 32). Whatever the items' prefixes, the lanes' room and the
chunking, the lanes planned with cache-aware routing on run exactly the items they run with
it off, each once and unchanged, and split fewer runs of a shared prefix across lanes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchroute.domain.routing.engine import RoutePlan, route
from batchroute.domain.routing.gates import RouteRequest, RoutingGuards
from batchroute.domain.routing.items import InputLine
from batchroute.domain.routing.lane_plan import (
    LaneRecord,
    lane_chunks,
    lane_items,
    model_offsets,
    plan_groups,
    plan_lanes,
)
from batchroute.domain.routing.prompt_cache import PrefixRun
from tests.unit.catalog_fixtures import NOW, catalog, group_of, live, provider
from tests.unit.test_cache_routing import RULE, SYSTEM, caching_lane, chat

PROMPTS = (None, SYSTEM, SYSTEM.upper(), SYSTEM + " Be brief.")
LANES = [
    caching_lane("a", batch_in="0.50", cached="0.05", write="0.625", rule=RULE),
    caching_lane("b", batch_in="0.55", cached="0.055", write="0.69", rule=RULE),
    caching_lane("c", batch_in="0.60", cached="0.06", write="0.75", rule=RULE),
]
CATALOG = catalog([provider(lane.provider) for lane in LANES], LANES)


def routed(items: list[dict[str, Any]], rooms: list[int], *, cache_aware: bool) -> RoutePlan:
    states = live(
        LANES, overrides={lane.lane_id: (room, 30) for lane, room in zip(LANES, rooms, strict=True)}
    )
    return route(
        [group_of(items)],
        CATALOG,
        live=states,
        request=RouteRequest(),
        guards=RoutingGuards(cache_aware=cache_aware),
        now=NOW,
    )


def ran(plan: RoutePlan, chunks: list[list[InputLine]]) -> dict[int, tuple[str, dict[str, Any]]]:
    """seq -> (lane, item) for every item the planned lanes run; an item run twice fails."""
    chunk_models = [{"m-chat": len(chunk)} for chunk in chunks]
    offsets = model_offsets(chunk_models, "m-chat")
    runs: dict[int, tuple[str, dict[str, Any]]] = {}
    lane: LaneRecord
    for lane in plan_lanes(plan_groups(plan.to_api()), chunk_models, at="t"):
        for chunk in lane_chunks(lane):
            owned = lane_items(
                chunks[chunk],
                model="m-chat",
                first_ordinal=offsets[chunk],
                start=lane.ordinal_start,
                end=lane.ordinal_end,
            )
            for seq, item in owned:
                assert seq not in runs, f"item {seq} runs on two lanes"
                runs[seq] = (lane.lane_id, dict(item))
    return runs


def split_runs(plan: RoutePlan, runs: list[PrefixRun]) -> int:
    """Contiguous runs of a shared prefix whose items are on more than one lane."""
    points, at = [], 0
    for lane in plan.groups[0].selected[:-1]:
        at += lane.item_count
        points.append(at)
    return sum(1 for run in runs if run.contiguous and any(run.first < p <= run.last for p in points))


@settings(max_examples=80, deadline=None)
@given(
    prompts=st.lists(st.sampled_from(range(len(PROMPTS))), min_size=1, max_size=40),
    rooms=st.lists(st.integers(min_value=0, max_value=40), min_size=3, max_size=3),
    chunk_size=st.integers(min_value=1, max_value=12),
)
def test_grouping_changes_only_the_lane_never_the_items(
    prompts: list[int], rooms: list[int], chunk_size: int
) -> None:
    items = [chat(index, PROMPTS[choice]) for index, choice in enumerate(prompts)]
    lines: list[InputLine] = [{"seq": seq, "item": item} for seq, item in enumerate(items)]  # type: ignore[typeddict-item]
    chunks = [lines[at : at + chunk_size] for at in range(0, len(lines), chunk_size)]
    on, off = routed(items, rooms, cache_aware=True), routed(items, rooms, cache_aware=False)
    assert on.ok == off.ok
    if not on.ok:
        return  # no lane room for them all: neither plan runs anything
    with_grouping, without = ran(on, chunks), ran(off, chunks)
    # every item runs exactly once either way, and is sent as it came
    assert sorted(with_grouping) == sorted(without) == list(range(len(items)))
    assert all(with_grouping[seq][1] == without[seq][1] == items[seq] for seq in with_grouping)
    # the same lanes, taking as many items in all; only which items a lane takes may differ
    assert [lane.lane_id for lane in on.groups[0].selected] == [
        lane.lane_id for lane in off.groups[0].selected
    ]
    assert sum(lane.item_count for lane in on.groups[0].selected) == len(items)
    runs = list(group_of(items).prefixes.values())
    assert split_runs(on, runs) <= split_runs(off, runs)
