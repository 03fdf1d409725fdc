"""Cache-aware routing from plan to request (issue 32): the lanes whose vendor caches only
what a request marks carry the batch's shared prefixes, their requests mark them, and the
receipt says what the cache did."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

from batchroute.adapters.dynamo.lane_records import lane_from_item, lane_item
from batchroute.catalog import builtin_catalog
from batchroute.domain.billing.settlement import prompt_cache_receipt, provider_lanes
from batchroute.domain.catalog.pricing import CacheUse, LaneUsage
from batchroute.domain.routing.engine import RoutePlanView, route
from batchroute.domain.routing.gates import RouteRequest, RoutingGuards
from batchroute.domain.routing.lane_plan import failover_record, plan_groups, plan_lanes
from batchroute.domain.routing.prompt_cache import item_prefix
from batchroute.providers import base
from batchroute.providers.anthropic import transform as anthropic
from batchroute.providers.bedrock import transform as bedrock
from batchroute.services.workflow.runner import build_request
from tests.unit.catalog_fixtures import NOW, group_of, live
from tests.unit.test_cache_routing import SYSTEM
from tests.unit.test_cache_routing import chat as routed_chat

HAIKU = "claude-3-5-haiku"


def chat(index: int, system: str | None = SYSTEM) -> dict[str, Any]:
    return routed_chat(index, system, model=HAIKU)


def request(
    payload: dict[str, Any], *, cache_prefix: bool = True, model: str = HAIKU
) -> base.ProviderRequest:
    return base.ProviderRequest(
        custom_id="seq-0",
        customer_item_id="i0",
        operation="responses",
        model=model,
        provider_model_id="claude-3-5-haiku-20241022",
        input=payload,
        max_output_tokens=64,
        cache_prefix=cache_prefix,
    )


def haiku_plan(items: list[dict[str, Any]], *, cache_aware: bool = True) -> RoutePlanView:
    catalog = builtin_catalog()
    lanes = catalog.lanes_for(HAIKU)
    return route(
        [group_of(items)],
        catalog,
        live=live(lanes),
        request=RouteRequest(),
        guards=RoutingGuards(cache_aware=cache_aware),
        now=NOW,
    ).to_api()


# -- the plan's lanes carry the shared prefixes they mark --------------------------------------------


def test_the_anthropic_lane_marks_the_batchs_shared_prefix() -> None:
    items = [chat(i) for i in range(4)] + [chat(9, system=None)]
    plan = haiku_plan(items)
    (lane,) = plan_lanes(plan_groups(plan), [{HAIKU: 5}], at="2026-03-01T12:00:00Z")
    key = item_prefix(items[0]["input"])
    assert key is not None
    assert lane.lane_id == "anthropic/claude-3-5-haiku"
    assert lane.cache_prefixes == (key.key,)
    assert lane_from_item(lane_item(lane)).cache_prefixes == (key.key,)  # stored and read back
    # a failover lane keeps marking them
    other = plan_groups(plan)[0].rejected[0]
    taken = failover_record(lane, other, chunk=0, chunk_first_ordinal=0, answered=(), root_number=1, at="t")
    assert taken.cache_prefixes == lane.cache_prefixes


def test_without_cache_aware_routing_or_below_the_minimum_nothing_is_marked() -> None:
    items = [chat(i) for i in range(4)]
    (off,) = plan_lanes(plan_groups(haiku_plan(items, cache_aware=False)), [{HAIKU: 4}], at="t")
    assert off.cache_prefixes == ()
    short = [chat(i, system="Label reviews. " * 300) for i in range(4)]  # ~1,100 tokens < 2,048
    (below,) = plan_lanes(plan_groups(haiku_plan(short)), [{HAIKU: 4}], at="t")
    assert below.cache_prefixes == ()
    assert "cache_prefixes" not in lane_item(below)


def test_a_request_asks_for_the_marker_only_for_an_item_of_a_shared_prefix() -> None:
    lane = next(one for one in builtin_catalog().lanes_for(HAIKU) if one.provider == "anthropic")
    key = item_prefix(chat(0)["input"])
    assert key is not None
    shared = build_request(0, chat(0), lane, cache_prefixes=frozenset({key.key}))  # type: ignore[arg-type]
    alone = build_request(1, chat(1, system="Another long prompt. " * 600), lane, cache_prefixes={key.key})  # type: ignore[arg-type]
    unmarked = build_request(0, chat(0), lane)  # type: ignore[arg-type]
    assert (shared.cache_prefix, alone.cache_prefix, unmarked.cache_prefix) == (True, False, False)


# -- the adapters' markers ------------------------------------------------------------------------


def test_anthropic_marks_the_system_prompt_of_a_shared_prefix() -> None:
    body = anthropic.messages_body(request(chat(0)["input"]), default_max_tokens=1024)
    assert body["system"] == [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    assert body["messages"] == [{"role": "user", "content": "Review 0: fine."}]
    plain = anthropic.messages_body(request(chat(0)["input"], cache_prefix=False), default_max_tokens=1024)
    assert plain["system"] == SYSTEM


def test_anthropic_marks_the_last_turn_before_the_final_question() -> None:
    payload = chat(0)["input"]
    payload["messages"][1:1] = [
        {"role": "user", "content": "Review: bad."},
        {"role": "assistant", "content": "negative"},
    ]
    body = anthropic.messages_body(request(payload), default_max_tokens=1024)
    assert body["system"] == SYSTEM
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "negative", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"][2] == {"role": "user", "content": "Review 0: fine."}


def test_anthropic_never_adds_a_breakpoint_to_a_body_that_has_its_own() -> None:
    body: dict[str, Any] = {
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "q"}],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
    }
    anthropic.mark_cached_prefix(body)
    assert "cache_control" not in body["tools"][0]
    assert sum("cache_control" in block for block in body["system"]) == 1


def test_bedrock_marks_a_cache_point_in_converse_and_nothing_in_batch_records() -> None:
    asked = base.ProviderRequest(
        **{
            **_fields(request(chat(0)["input"])),
            "provider_model_id": "anthropic.claude-3-5-haiku-20241022-v1:0",
        }
    )
    kwargs = bedrock.converse_request(asked)
    assert kwargs["system"] == [{"text": SYSTEM}, {"cachePoint": {"type": "default"}}]
    # a batch inference record carries no marker (caching is not counted on there)
    assert bedrock.batch_record(asked)["modelInput"]["system"] == SYSTEM


def test_the_caching_lane_wins_over_an_equal_one_that_caches_nothing() -> None:
    items = [chat(i) for i in range(4)]
    on = haiku_plan(items)["groups"][0]
    off = haiku_plan(items, cache_aware=False)["groups"][0]
    assert (
        on["selected_lanes"][0]["lane_id"]
        == off["selected_lanes"][0]["lane_id"]
        == "anthropic/claude-3-5-haiku"
    )
    (bedrock_on,) = on["rejected_lanes"]
    (bedrock_off,) = off["rejected_lanes"]
    # without cache-aware routing the two lanes cost the same and the lane id decides
    assert bedrock_off["rejection"]["details"].get("tie_break") == "lane_id"
    # with it the Anthropic lane is cheaper as expected
    assert "tie_break" not in bedrock_on["rejection"]["details"]
    assert "anthropic/claude-3-5-haiku costs" in bedrock_on["rejection"]["message"]


def _fields(one: base.ProviderRequest) -> dict[str, Any]:
    return {name: getattr(one, name) for name in one.__slots__}  # type: ignore[attr-defined]


# -- the receipt -----------------------------------------------------------------------------------


def test_the_receipt_says_what_the_cache_saved() -> None:
    usage = LaneUsage(
        "anthropic/claude-3-5-haiku",
        prompt_tokens=30_000,
        output_tokens=100,
        input_per_mtok=Decimal("0.40"),
        output_per_mtok=Decimal("2.00"),
        cache=CacheUse(27_000, 3_000, Decimal("0.04"), Decimal("0.50")),
    )
    shown = prompt_cache_receipt(usage, grouped_items=10)
    # 27,000 x (0.40 - 0.04) - 3,000 x (0.50 - 0.40) = 9,720 - 300 = 9,420 per million
    assert shown == {
        "grouped_items": 10,
        "cached_input_tokens": 27_000,
        "cache_write_input_tokens": 3_000,
        "saved": {"currency": "usd", "amount": "0.00942"},
    }
    plain = LaneUsage("x/m", 100, 10, Decimal("1"), Decimal("1"))
    assert prompt_cache_receipt(plain, grouped_items=0) is None


def test_the_receipt_lane_shows_the_grouped_items_of_the_plan() -> None:
    items = [chat(i) for i in range(4)]
    plan = haiku_plan(items)
    (lane,) = plan_lanes(plan_groups(plan), [{HAIKU: 4}], at="t")
    tally = {"completed": 4, "prompt_tokens": 12_000, "completion_tokens": 40, "cached_input_tokens": 9_000}
    (shown,) = provider_lanes([lane], {lane.lane_key: tally}, plan)
    assert shown["prompt_cache"]["grouped_items"] == 4
    assert shown["prompt_cache"]["cached_input_tokens"] == 9_000
    assert Decimal(shown["prompt_cache"]["saved"]["amount"]) > 0


def test_a_lane_run_as_two_records_shows_its_grouped_items_once() -> None:
    # a split group's lane may run as several records (its whole prefixes, a part of the
    # other items): the receipt counts the plan's grouped items once, on the first
    items = [chat(i) for i in range(4)]
    plan = haiku_plan(items)
    (lane,) = plan_lanes(plan_groups(plan), [{HAIKU: 4}], at="t")
    second = replace(lane, lane_key="02-" + lane.lane_key[3:])
    tally = {"completed": 2, "prompt_tokens": 6_000, "completion_tokens": 20, "cached_input_tokens": 3_000}
    tallies = {lane.lane_key: tally, second.lane_key: tally}
    first_shown, second_shown = provider_lanes([second, lane], tallies, plan)
    assert first_shown["lane_key"] == lane.lane_key
    assert first_shown["prompt_cache"]["grouped_items"] == 4
    assert second_shown["prompt_cache"]["grouped_items"] == 0
