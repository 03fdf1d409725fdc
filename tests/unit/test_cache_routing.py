"""Cache-aware routing (issue 32): shared prompt prefixes found by the preflight, priced per
lane on the quote, kept whole on one lane when a group is split; the reservation stays the
uncached bound."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

from batchroute.domain.batches.item_profile import ItemProfile, profile_items
from batchroute.domain.catalog.catalog import Lane, LanePrice, PromptCacheRule
from batchroute.domain.catalog.pricing import estimate_price
from batchroute.domain.routing.engine import RoutePlan, route, stored_plan
from batchroute.domain.routing.gates import RouteRequest, RoutingGuards
from batchroute.domain.routing.items import ModelGroup, read_item
from batchroute.domain.routing.prompt_cache import (
    MIN_TRACKED_TOKENS,
    ExpectedCache,
    PrefixRun,
    expected_cache,
    item_prefix,
)
from tests.unit.catalog_fixtures import CHAT, FEES, NOW, catalog, group_of, live, provider

SYSTEM = "You label customer reviews by sentiment and topic. " * 240  # ~12,000 bytes, ~3,000 tokens
SHORT_SYSTEM = "You label customer reviews. " * 20  # ~560 bytes: under every vendor's minimum
RULE = PromptCacheRule(min_tokens=1024, lifetime_seconds=300, marker="cache_control")


def chat(index: int, system: str | None = SYSTEM, *, model: str = CHAT, **extra: Any) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Review {index}: fine."}]
    if system is not None:
        messages.insert(0, {"role": "system", "content": system})
    return {
        "customer_item_id": f"item-{index}",
        "operation": "responses",
        "model": model,
        "input": {"messages": messages, **extra},
    }


def caching_lane(slug: str, *, batch_in: str, cached: str, write: str | None, rule: PromptCacheRule) -> Lane:
    cache = None if write is None else Decimal(write)
    prices = {
        "cached_input_per_mtok": Decimal(cached) * 2,
        "cache_write_input_per_mtok": None if cache is None else cache * 2,
        "batch_cached_input_per_mtok": Decimal(cached),
        "batch_cache_write_input_per_mtok": cache,
    }
    return plain_lane(slug, batch_in=batch_in, prompt_cache=rule, **prices)


def plain_lane(
    slug: str, *, batch_in: str, prompt_cache: PromptCacheRule | None = None, **cache_prices: Decimal | None
) -> Lane:
    return Lane(
        provider=slug,
        model=CHAT,
        price=LanePrice(
            input_per_mtok=Decimal(batch_in) * 2,
            output_per_mtok=Decimal("4"),
            batch_input_per_mtok=Decimal(batch_in),
            batch_output_per_mtok=Decimal("2"),
            **cache_prices,
        ),
        context_window=200_000,
        max_output_tokens=8_192,
        operations=("responses",),
        prompt_cache=prompt_cache,
    )


# A caching lane a little dearer on input than a plain one: $0.50 against $0.45 a million.
CACHING = caching_lane("cache", batch_in="0.50", cached="0.05", write="0.625", rule=RULE)
PLAIN = plain_lane("plain", batch_in="0.45")
LANES = [CACHING, PLAIN]


def plan(
    group: ModelGroup, *, cache_aware: bool = True, lanes: list[Lane] = LANES, room: int = 10**6
) -> RoutePlan:
    return route(
        [group],
        catalog([provider(lane.provider) for lane in lanes], lanes),
        live=live(lanes, capacity=room),
        request=RouteRequest(),
        guards=RoutingGuards(cache_aware=cache_aware),
        now=NOW,
    )


# -- prefix detection -----------------------------------------------------------------------------


def test_a_long_system_prompt_is_the_prefix_and_the_user_turn_is_not() -> None:
    first, second = item_prefix(chat(1)["input"]), item_prefix(chat(2)["input"])
    assert first is not None and second is not None
    assert first == second  # the user turns differ, the prefix does not
    assert 2_900 <= first.tokens <= 3_100  # ~12,000 bytes at 4 bytes a token, + one message


def test_short_or_absent_prefixes_are_not_tracked() -> None:
    assert item_prefix(chat(1, system=SHORT_SYSTEM)["input"]) is None
    assert item_prefix(chat(1, system=None)["input"]) is None
    assert item_prefix({"input": "one Responses string"}) is None


def test_tools_instructions_and_earlier_turns_are_part_of_the_prefix_key() -> None:
    base = item_prefix(chat(1)["input"])
    other_format = item_prefix(chat(1, response_format={"type": "json_object"})["input"])
    with_instructions = item_prefix({**chat(1, system=None)["input"], "instructions": SYSTEM})
    assert base is not None and other_format is not None and with_instructions is not None
    assert other_format.key != base.key  # a different output format: another prefix
    assert with_instructions.key != base.key
    few_shot = chat(1)
    few_shot["input"]["messages"][1:1] = [
        {"role": "user", "content": "Review 0: bad."},
        {"role": "assistant", "content": "negative"},
    ]
    grown = item_prefix(few_shot["input"])
    assert grown is not None and grown.key != base.key and grown.tokens > base.tokens


def test_the_group_counts_items_per_prefix_with_their_ordinals() -> None:
    items = [chat(0, system=None), chat(1), chat(2), chat(3, system=SHORT_SYSTEM), chat(4)]
    group = group_of(items)
    (shared,) = group.shared_prefixes()
    assert (shared["items"], shared["first"], shared["last"]) == (3, 1, 4)
    assert shared["tokens"] >= MIN_TRACKED_TOKENS


def test_embeddings_and_single_items_share_nothing() -> None:
    facts, _ = read_item(
        {"customer_item_id": "e", "operation": "embeddings", "model": CHAT, "input": {"input": SYSTEM}}
    )
    assert facts is not None and facts.prefix is None
    assert group_of([chat(1)]).shared_prefixes() == []


def test_the_item_profile_keeps_the_shared_prefixes_and_stands_in_for_the_items() -> None:
    items = [chat(i) for i in range(5)] + [chat(9, system=None)]
    profile = profile_items(items)
    read_back = ItemProfile.from_json(profile.to_json())
    assert read_back is not None and read_back.usable
    (model,) = read_back.models
    assert model.group().shared_prefixes() == group_of(items).shared_prefixes()


# -- pricing and ranking ---------------------------------------------------------------------------


def test_expected_cache_is_one_write_and_a_read_per_further_item() -> None:
    run = PrefixRun(tokens=3_000, items=10, first=0, last=9)
    whole = expected_cache([run], RULE)
    assert (whole.grouped_items, whole.cached_tokens, whole.write_tokens) == (10, 27_000, 3_000)
    half = expected_cache([run], RULE, start=0, end=5)
    assert (half.grouped_items, half.cached_tokens, half.write_tokens) == (5, 12_000, 3_000)
    assert expected_cache([run], replace(RULE, min_tokens=4_096)).cached_tokens == 0
    assert expected_cache([run], None).grouped_items == 0


def test_a_caching_lane_wins_on_cost_when_the_shared_prefix_is_long() -> None:
    group = group_of(chat(i) for i in range(50))
    (chosen,) = plan(group).groups[0].selected
    assert chosen.lane_id == "cache/m-chat"
    cache = chosen.prompt_cache
    assert cache is not None
    assert cache.expected.grouped_items == 50
    assert (
        cache.expected.write_tokens > 0 and cache.expected.cached_tokens == 49 * cache.expected.write_tokens
    )
    assert cache.savings.micros > 0
    assert cache.expected_cost == chosen.estimated_cost - cache.savings
    assert (
        "50 of them sharing a cached prompt prefix: expected 0.14 USD instead of 0.20 USD"
        in plan(group).explanation()
    )
    # without cache-aware routing the plain lane is cheaper, as before
    (uncached,) = plan(group, cache_aware=False).groups[0].selected
    assert uncached.lane_id == "plain/m-chat" and uncached.prompt_cache is None


def test_below_the_minimum_nothing_changes() -> None:
    group = group_of(chat(i, system=SHORT_SYSTEM * 4) for i in range(50))  # ~560 tokens at 4 B
    (chosen,) = plan(group).groups[0].selected
    assert chosen.lane_id == "plain/m-chat"
    high_minimum = caching_lane(
        "cache", batch_in="0.50", cached="0.05", write="0.625", rule=replace(RULE, min_tokens=8_192)
    )
    long_group = group_of(chat(i) for i in range(50))
    (chosen,) = plan(long_group, lanes=[high_minimum, PLAIN]).groups[0].selected
    assert chosen.lane_id == "plain/m-chat"


def test_the_reservation_stays_the_uncached_bound() -> None:
    group = group_of(chat(i) for i in range(50))
    cached_plan = plan(group, lanes=[CACHING])
    uncached_plan = plan(group, lanes=[CACHING], cache_aware=False)
    (lane,) = cached_plan.groups[0].selected
    assert lane.prompt_cache is not None and lane.prompt_cache.savings.micros > 0
    # the quote's price (what a batch reserves) is the uncached estimate either way
    assert estimate_price(cached_plan, FEES) == estimate_price(uncached_plan, FEES)
    assert lane.usage() == uncached_plan.groups[0].selected[0].usage()


def test_the_cache_expectation_and_shared_prefixes_survive_the_snapshot() -> None:
    group = group_of(chat(i) for i in range(5))
    shown = plan(group).to_api()
    assert stored_plan(shown) == shown
    assert shown["groups"][0]["shared_prefixes"][0]["items"] == 5
    assert shown["groups"][0]["selected_lanes"][0]["prompt_cache"]["grouped_items"] == 5
    assert "shared_prefixes" not in plan(group, cache_aware=False).to_api()["groups"][0]


# -- a split keeps a prefix's run on one lane -------------------------------------------------------


def _two_lanes_of_six(
    pattern: str,
    *,
    cache_aware: bool = True,
    lanes: tuple[Lane, Lane] | None = None,
    rooms: tuple[int, int] = (6, 6),
) -> RoutePlan:
    """Items of prefix A or B in this pattern, on two lanes (caching ones unless given) with
    room for 6 each (unless given)."""
    items = [chat(i, SYSTEM if kind == "A" else SYSTEM.upper()) for i, kind in enumerate(pattern)]
    pair = lanes or (CACHING, caching_lane("other", batch_in="0.60", cached="0.06", write="0.75", rule=RULE))
    return route(
        [group_of(items)],
        catalog([provider(lane.provider) for lane in pair], pair),
        live=live(pair, overrides={lane.lane_id: (room, 30) for lane, room in zip(pair, rooms, strict=True)}),
        request=RouteRequest(),
        guards=RoutingGuards(cache_aware=cache_aware),
        now=NOW,
    )


def test_a_split_keeps_each_interleaved_prefix_whole_on_one_lane() -> None:
    # two prefixes interleaved (A B A B A B A B B B: A 4 items, B 6); each lane has room for
    # 6. In input order the first lane would take A A A B B B and the second A B B B: both
    # prefixes cut, each written on both lanes. Grouped, the largest prefix goes whole to
    # the first lane with room for it, the other to the next
    routed = _two_lanes_of_six("ABABABABBB")
    group = routed.groups[0]
    first, second = group.selected
    assert (first.item_count, second.item_count) == (6, 4)
    # the plan says which lane takes each prefix whole; each lane expects one write of its
    # prefix and a read for every other item of it, exactly (never pro rata)
    assert {view["items"]: view.get("lane") for view in group.shared_prefixes} == {6: 0, 4: 1}
    tokens = group.shared_prefixes[0]["tokens"]
    assert first.prompt_cache is not None and second.prompt_cache is not None
    assert first.prompt_cache.expected == ExpectedCache(6, 5 * tokens, tokens)
    assert second.prompt_cache.expected == ExpectedCache(4, 3 * tokens, tokens)
    # the quote's snapshot keeps where each prefix goes (Route reads it from the batch's plan)
    stored = stored_plan(routed.to_api())
    assert [view.get("lane") for view in stored["groups"][0]["shared_prefixes"]] == [0, 1]
    off = _two_lanes_of_six("ABABABABBB", cache_aware=False).groups[0]
    assert [lane.item_count for lane in off.selected] == [6, 4]
    assert "shared_prefixes" not in off.to_api()


def test_a_prefix_no_lane_has_room_for_is_cut_and_the_lanes_fill_in_rank_order() -> None:
    # A has 8 items, more than either lane's room (6): it is cut; B (2) goes whole to the
    # first lane, which A's first 4 items then fill, the second lane taking A's other 4
    group = _two_lanes_of_six("AABAAAABAA").groups[0]
    first, second = group.selected
    assert (first.item_count, second.item_count) == (6, 4)
    assert {view["items"]: view.get("lane") for view in group.shared_prefixes} == {8: None, 2: 0}
    tokens = group.shared_prefixes[0]["tokens"]
    assert first.prompt_cache is not None and second.prompt_cache is not None
    assert first.prompt_cache.expected == ExpectedCache(6, 4 * tokens, 2 * tokens)
    assert second.prompt_cache.expected == ExpectedCache(4, 3 * tokens, tokens)


def test_a_split_moves_no_item_for_a_prefix_no_chosen_lane_caches() -> None:
    # A and B (4 items each) on lanes with room for 6 and 5: kept whole, the first lane
    # would take 4 (A) and the second 4 (B), 2 items more on the dearer lane. That pays only
    # when a lane caches them: on lanes that cache nothing the split stays the plain fill
    caching = _two_lanes_of_six("ABABABAB", rooms=(6, 5)).groups[0]
    assert [lane.item_count for lane in caching.selected] == [4, 4]
    plain = (PLAIN, plain_lane("dearer", batch_in="0.60"))
    uncached = _two_lanes_of_six("ABABABAB", lanes=plain, rooms=(6, 5)).groups[0]
    assert [lane.item_count for lane in uncached.selected] == [6, 2]
    assert all("lane" not in view for view in uncached.shared_prefixes)
