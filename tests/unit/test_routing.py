"""The routing engine: every rejection code with its receipt, every routing mode, splitting."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from batchroute.domain.catalog.catalog import Lane, LaneLive, Provider
from batchroute.domain.routing.engine import GroupRoute, Rejection, RoutePlan, route
from batchroute.domain.routing.gates import (
    GATE_ORDER,
    REJECTION_CODES,
    LaneDemand,
    MaxPrice,
    RouteRequest,
    RoutingGuards,
    _price_failures,
)
from batchroute.domain.routing.items import ModelGroup
from batchroute.errors import InvalidRequest
from tests.unit.catalog_fixtures import (
    CHAT,
    EMBED,
    NOW,
    catalog,
    chat_group,
    group_of,
    item,
    lane,
    live,
    provider,
)


def plan_for(
    providers: list[Provider],
    lanes: list[Lane],
    groups: list[ModelGroup] | None = None,
    *,
    request: RouteRequest | None = None,
    guards: RoutingGuards | None = None,
    states: dict[str, LaneLive] | None = None,
) -> RoutePlan:
    return route(
        groups if groups is not None else [chat_group(10)],
        catalog(providers, lanes),
        live=live(lanes) if states is None else states,
        request=request or RouteRequest(),
        guards=guards,
        now=NOW,
    )


def only_group(plan: RoutePlan) -> GroupRoute:
    (group,) = plan.groups
    return group


def selected_ids(group: GroupRoute) -> list[str]:
    return [lane.lane_id for lane in group.selected]


def rejected(group: GroupRoute, lane_id: str) -> Rejection:
    return next(r for r in group.rejected if r.lane_id == lane_id)


# Three public lanes of one chat model, cheapest first: a < b < c.
A = lane("a", batch_in="0.10", batch_out="0.40")
B = lane("b", batch_in="0.20", batch_out="0.80")
C = lane("c", batch_in="0.30", batch_out="1.20")
PUBLIC = [provider("a"), provider("b"), provider("c")]


def test_cheapest_selects_the_lowest_group_cost_and_says_why_the_others_lost() -> None:
    # Given three eligible lanes
    group = only_group(plan_for(PUBLIC, [C, A, B]))
    # Then the cheapest takes all ten items
    assert selected_ids(group) == ["a/m-chat"]
    assert group.selected[0].item_count == 10
    # And each other lane's receipt says it was eligible but cost more
    for lane_id in ("b/m-chat", "c/m-chat"):
        receipt = rejected(group, lane_id)
        assert receipt.code == "outranked"
        assert receipt.details["rank_basis"] == "cost"
        assert receipt.details["selected"] == ["a/m-chat"]
        assert "a/m-chat costs " in receipt.message and " USD for this group, this lane " in receipt.message
        assert "tie_break" not in receipt.details
    # And rejected lanes are listed in lane_id order
    assert [r.lane_id for r in group.rejected] == ["b/m-chat", "c/m-chat"]


def test_cost_ties_go_to_the_more_reliable_lane_then_to_lane_id() -> None:
    steady = lane("y", reliability="0.999")
    shaky = lane("x", reliability="0.95")
    twin = lane("z", reliability="0.999")
    group = only_group(plan_for([provider("x"), provider("y"), provider("z")], [shaky, twin, steady]))
    assert selected_ids(group) == ["y/m-chat"]
    # And each loser's receipt names the tie-break that decided, not only "outranked" (issue 29)
    less_reliable, later = rejected(group, "x/m-chat"), rejected(group, "z/m-chat")
    assert (less_reliable.code, less_reliable.details["tie_break"]) == ("outranked", "reliability")
    assert "same price (" in less_reliable.message
    assert "y/m-chat is more reliable (0.999 against 0.95)" in less_reliable.message
    assert (later.code, later.details["tie_break"]) == ("outranked", "lane_id")
    assert "same price (" in later.message and "y/m-chat comes first by lane id" in later.message
    assert " USD for this group)" in later.message


def test_costs_read_by_the_money_rule_and_exactly_when_the_rule_would_show_them_equal() -> None:
    # Given the cheapest lane and one that costs more, then one that costs a hair more
    dearer = only_group(plan_for([provider("a"), provider("c")], [A, C]))
    hair = only_group(
        plan_for([provider("a"), provider("b")], [A, lane("b", batch_in="0.1001", batch_out="0.40")])
    )
    # Then the price reads by docs/money.md; two prices it would round alike are given exactly
    assert (
        "a/m-chat costs 0.0041 USD for this group, this lane 0.01 USD."
        in rejected(dearer, "c/m-chat").message
    )
    assert "costs 0.004111 USD for this group, this lane 0.004112 USD." in rejected(hair, "b/m-chat").message


def test_the_selected_lane_carries_locked_prices_tokens_cost_and_proof() -> None:
    group_in = chat_group(10)
    group = only_group(plan_for(PUBLIC, [A, B, C], [group_in]))
    chosen = group.selected[0]
    assert (chosen.batch_input_per_mtok, chosen.batch_output_per_mtok) == (Decimal("0.10"), Decimal("0.40"))
    assert (chosen.prompt_tokens, chosen.output_tokens) == (group_in.prompt_tokens, group_in.output_tokens)
    assert chosen.proof.to_api() == {
        "provider": "a",
        "provider_kind": "public_host",
        "execution_mode": "sync",
        "privacy_tiers": ["standard"],
        "data_retention_days": 30,
        "zero_data_retention": False,
        "regions": ["us"],
        "last_heartbeat_at": "2026-03-01T11:59:30.000Z",
        "heartbeat_age_seconds": 30,
        "remaining_capacity_items": 1_000_000,
        "catalog_version": "test-1",
        "pricing_updated_at": "2026-02-01",
    }
    shown = chosen.to_api()
    assert shown["unit_prices"] == {
        "currency": "usd",
        "basis": "batch",
        "input_per_mtok": "0.10",
        "output_per_mtok": "0.40",
    }
    assert shown["estimated_provider_cost"]["currency"] == "usd"


# -- one test per rejection code ---------------------------------------------------------------


def test_capacity_full_when_a_lane_has_no_room_for_the_group() -> None:
    # Given the cheapest lane has room for 5 of the 10 items and the next for all
    states = live([A, B], overrides={"a/m-chat": (5, 30)})
    group = only_group(plan_for(PUBLIC[:2], [A, B], states=states))
    # Then the group goes whole to b (a split is only for when no lane has room)
    assert selected_ids(group) == ["b/m-chat"]
    receipt = rejected(group, "a/m-chat")
    assert receipt.code == "capacity_full"
    assert receipt.details == {"remaining_capacity_items": 5, "needed_items": 10}


def test_context_window_exceeded_when_the_largest_item_does_not_fit() -> None:
    # Given a lane with a 2,000-token window and an item of about 3,400 prompt tokens
    small = lane("a", window=2_000)
    group = only_group(plan_for(PUBLIC[:2], [small, B], [chat_group(3, text="x" * 10_000)]))
    receipt = rejected(group, "a/m-chat")
    assert receipt.code == "context_window_exceeded"
    assert receipt.details["context_window"] == 2_000
    assert receipt.details["needed_tokens"] > 2_000
    assert selected_ids(group) == ["b/m-chat"]


def test_context_window_counts_output_capped_by_the_lane() -> None:
    # Given an item asking 100,000 output tokens and a lane that can only produce 1,000
    capped = lane("a", window=4_000, max_output=1_000)
    group = only_group(plan_for(PUBLIC[:1], [capped], [chat_group(1, max_output_tokens=100_000)]))
    # Then it fits: prompt + min(requested, lane max) stays inside the window
    assert selected_ids(group) == ["a/m-chat"]
    assert group.selected[0].output_tokens == 1_000


def test_a_lane_that_would_cut_the_answer_short_ranks_after_one_that_can_produce_it() -> None:
    # Given items asking for 3,000 output tokens, a lane that stops at 2,048 (cheap only
    # because it would produce less) and a lane that can produce them, cheaper per token
    short = lane("a", batch_in="0.36", batch_out="0.36", max_output=2_048)
    full = lane("b", batch_in="0.20", batch_out="0.30", max_output=4_096)
    for mode in ("cheapest", "sla_aware", "public_only"):
        group = only_group(
            plan_for(
                PUBLIC[:2],
                [short, full],
                [chat_group(5, max_output_tokens=3_000)],
                request=RouteRequest(routing_mode=mode),
            )
        )
        # Then the lane that can produce them is selected, and is asked for all of them
        assert selected_ids(group) == ["b/m-chat"], mode
        assert group.selected[0].output_tokens == 15_000
        # And the short lane's receipt says why, not that it costs more
        receipt = rejected(group, "a/m-chat")
        assert receipt.code == "outranked"
        assert receipt.details["rank_basis"] == "output_limit"
        assert (receipt.details["requested_output_tokens"], receipt.details["max_output_tokens"]) == (
            3_000,
            2_048,
        )
        assert "this lane stops at 2048" in receipt.message


def test_a_short_lane_still_serves_when_no_lane_can_produce_the_output_asked() -> None:
    # Given items asking for more than any lane produces: the cheapest runs them, capped
    short = lane("a", batch_in="0.10", batch_out="0.40", max_output=2_048)
    shorter_dearer = lane("b", max_output=1_024)
    group = only_group(
        plan_for(PUBLIC[:2], [short, shorter_dearer], [chat_group(2, max_output_tokens=9_000)])
    )
    assert selected_ids(group) == ["a/m-chat"]
    assert group.selected[0].output_tokens == 4_096
    assert rejected(group, "b/m-chat").details["rank_basis"] == "cost"


def test_tool_support_lists_required_and_offered_tools() -> None:
    # Given a required web_search from the request and a calculator inferred from the input
    searcher = lane("a", tools=("web_search",))
    full = lane("b", tools=("web_search", "calculator", "time"))
    items = [
        item(0, input={"messages": [{"role": "user", "content": "2+2"}], "tools": [{"type": "calculator"}]})
    ]
    request = RouteRequest(required_tools=frozenset({"web_search"}))
    group = only_group(plan_for(PUBLIC[:2], [searcher, full], [group_of(items)], request=request))
    # Then the lane without the calculator is rejected with both lists
    receipt = rejected(group, "a/m-chat")
    assert receipt.code == "tool_support"
    assert receipt.details == {
        "required": ["calculator", "web_search"],
        "offered": ["web_search"],
        "missing": ["calculator"],
    }
    assert selected_ids(group) == ["b/m-chat"]


def test_item_level_required_tools_reach_the_gate() -> None:
    group_in = chat_group(2, required_tools=["python_execution"])
    group = only_group(plan_for(PUBLIC[:2], [A, lane("b", tools=("python_execution",))], [group_in]))
    assert rejected(group, "a/m-chat").code == "tool_support"
    assert selected_ids(group) == ["b/m-chat"]


def test_stale_heartbeat_when_too_old_or_never_reported() -> None:
    # Given a lane last seen an hour ago and one with no live record at all
    states = live([A, B, C], overrides={"a/m-chat": (1_000, 3_600)})
    del states["b/m-chat"]
    group = only_group(plan_for(PUBLIC, [A, B, C], states=states))
    old = rejected(group, "a/m-chat")
    assert old.code == "stale_heartbeat"
    assert old.details == {
        "last_heartbeat_at": "2026-03-01T11:00:00.000Z",
        "heartbeat_age_seconds": 3_600,
        "ttl_seconds": 300,
    }
    assert rejected(group, "b/m-chat").code == "stale_heartbeat"
    assert rejected(group, "b/m-chat").details["heartbeat_age_seconds"] is None
    assert selected_ids(group) == ["c/m-chat"]


def test_the_heartbeat_ttl_is_a_service_setting() -> None:
    states = live([A], overrides={"a/m-chat": (1_000, 120)})
    strict = only_group(
        plan_for(PUBLIC[:1], [A], states=states, guards=RoutingGuards(heartbeat_ttl_seconds=60))
    )
    assert strict.rejected[0].code == "stale_heartbeat"
    assert not strict.ok


def test_privacy_tier_mismatch_when_the_provider_does_not_declare_the_tier() -> None:
    # Given a confidential batch and only b declaring confidential
    providers = [provider("a"), provider("b", privacy=("standard", "confidential"))]
    group = only_group(plan_for(providers, [A, B], request=RouteRequest(privacy_tier="confidential")))
    receipt = rejected(group, "a/m-chat")
    assert receipt.code == "privacy_tier_mismatch"
    assert receipt.details == {
        "requested": "confidential",
        "offered": ["standard"],
        "data_retention_days": 30,
        "zero_data_retention_required": False,
    }
    assert selected_ids(group) == ["b/m-chat"]


def test_restricted_finds_no_provider_unless_one_declares_it() -> None:
    group = only_group(plan_for(PUBLIC, [A, B, C], request=RouteRequest(privacy_tier="restricted")))
    assert not group.ok
    assert {r.code for r in group.rejected} == {"privacy_tier_mismatch"}
    assert "3 privacy_tier_mismatch" in (group.failure or "")


def test_region_unavailable_when_no_provider_region_matches() -> None:
    providers = [provider("a", regions=("us",)), provider("b", regions=("us", "eu"))]
    group = only_group(plan_for(providers, [A, B], request=RouteRequest(regions=("eu",))))
    receipt = rejected(group, "a/m-chat")
    assert receipt.code == "region_unavailable"
    assert receipt.details == {"requested": ["eu"], "offered": ["us"]}
    assert selected_ids(group) == ["b/m-chat"]


@pytest.mark.parametrize(
    ("cap", "bound"),
    [
        (MaxPrice(input_per_mtok=Decimal("0.15")), "input_per_mtok"),
        (MaxPrice(output_per_mtok=Decimal("0.50")), "output_per_mtok"),
        (MaxPrice(per_item_usd=Decimal("0.0005")), "per_item_usd"),
    ],
)
def test_price_cap_exceeded_names_the_bound_the_lane_breaks(cap: MaxPrice, bound: str) -> None:
    # Given a cap only lane a (0.10 / 0.40 per million; ~0.0004 per item) stays under
    group = only_group(plan_for(PUBLIC[:2], [A, B], request=RouteRequest(max_price=cap)))
    receipt = rejected(group, "b/m-chat")
    assert receipt.code == "price_cap_exceeded"
    assert list(receipt.details["exceeded"]) == [bound]
    assert selected_ids(group) == ["a/m-chat"]


def test_a_per_item_cost_just_over_the_cap_never_reads_as_equal_to_it() -> None:
    # Given one item costing 0.0004112 USD on lane b, and a cap of 0.000411
    group = group_of([item(0)])
    demand = replace(LaneDemand.of(group, B), cost=Decimal("0.0004112"))
    # When the gate refuses the lane (it read "per_item_usd 0.000411 > 0.000411")
    [failure] = _price_failures(B, group, demand, MaxPrice(per_item_usd=Decimal("0.000411")))
    # Then the cost shows above the cap, rounded up
    assert failure.details["exceeded"]["per_item_usd"] == {"lane": "0.000412", "max": "0.000411"}
    assert failure.message == "Above max_price: per_item_usd 0.000412 > 0.000411."


def test_operation_not_supported_when_the_lane_does_not_run_the_operation() -> None:
    chat_only = lane("a", model=EMBED)
    both = lane("b", model=EMBED, operations=("responses", "embeddings"))
    embeddings = group_of([item(0, model=EMBED, operation="embeddings", input={"input": "text"})])
    group = only_group(plan_for(PUBLIC[:2], [chat_only, both], [embeddings]))
    receipt = rejected(group, f"a/{EMBED}")
    assert receipt.code == "operation_not_supported"
    assert receipt.details == {"required": ["embeddings"], "offered": ["responses"]}


def test_capability_missing_when_the_lane_cannot_follow_a_json_schema() -> None:
    schema = {"type": "object", "properties": {"label": {"type": "string"}}}
    structured = item(
        0,
        input={
            "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "label", "schema": schema}},
        },
    )
    plain = lane("a")
    follows = lane("b", batch_in="5", capabilities=("structured_outputs",))
    group = only_group(plan_for(PUBLIC[:2], [plain, follows], [group_of([structured])]))
    receipt = rejected(group, "a/m-chat")
    assert receipt.code == "capability_missing"
    assert receipt.details == {"required": ["json_schema"], "offered": [], "missing": ["json_schema"]}
    assert selected_ids(group) == ["b/m-chat"]


def test_provider_guards_disabled_not_launched_and_allowlist() -> None:
    # Given a disabled provider, an unlaunched one, and an allowlist without c
    providers = [provider("a", enabled=False), provider("b", launched=False), provider("c"), provider("d")]
    d = lane("d", batch_in="9")
    guards = RoutingGuards(provider_allowlist=("a", "b", "d"))
    group = only_group(plan_for(providers, [A, B, C, d], guards=guards))
    assert rejected(group, "a/m-chat").code == "provider_disabled"
    assert rejected(group, "b/m-chat").code == "not_launched"
    assert rejected(group, "c/m-chat").code == "not_in_allowlist"
    assert rejected(group, "c/m-chat").details == {"provider_allowlist": ["a", "b", "d"]}
    assert selected_ids(group) == ["d/m-chat"]


def test_the_launch_guard_can_be_switched_off() -> None:
    providers = [provider("a", launched=False)]
    group = only_group(plan_for(providers, [A], guards=RoutingGuards(launch_provider_guard=False)))
    assert selected_ids(group) == ["a/m-chat"]


def test_a_lane_failing_several_gates_names_the_first_and_lists_all() -> None:
    # Given a lane in the wrong region, without the tool, with a stale heartbeat
    states = live([A, B], overrides={"a/m-chat": (1_000, 10_000)})
    request = RouteRequest(regions=("eu",), required_tools=frozenset({"time"}))
    providers = [provider("a"), provider("b", regions=("eu",))]
    group = only_group(plan_for(providers, [A, lane("b", tools=("time",))], states=states, request=request))
    receipt = rejected(group, "a/m-chat")
    assert receipt.code == "region_unavailable"
    assert receipt.reasons == ("region_unavailable", "tool_support", "stale_heartbeat")


def test_every_rejection_code_is_documented_in_gate_order() -> None:
    assert (*GATE_ORDER, "outranked") == REJECTION_CODES
    assert len(set(REJECTION_CODES)) == len(REJECTION_CODES)


# -- routing modes ---------------------------------------------------------------------------

EDGE = provider("e", kind="edge", privacy=("standard", "confidential"), retention_days=0)
VENDOR = provider("v", kind="vendor_batch")
E = lane("e", batch_in="0.50", batch_out="1.00")  # edge: dearer than a here
V = lane("v", batch_in="0.05", batch_out="0.20")  # vendor: the cheapest


def test_public_only_excludes_edge_lanes() -> None:
    group = only_group(
        plan_for([EDGE, VENDOR, PUBLIC[0]], [E, V, A], request=RouteRequest(routing_mode="public_only"))
    )
    receipt = rejected(group, "e/m-chat")
    assert receipt.code == "routing_mode_excluded"
    assert receipt.details == {"routing_mode": "public_only", "provider_kind": "edge"}
    assert selected_ids(group) == ["v/m-chat"]


def test_edge_only_excludes_vendor_and_public_lanes() -> None:
    group = only_group(
        plan_for([EDGE, VENDOR, PUBLIC[0]], [E, V, A], request=RouteRequest(routing_mode="edge_only"))
    )
    assert selected_ids(group) == ["e/m-chat"]
    assert rejected(group, "v/m-chat").code == "routing_mode_excluded"
    assert rejected(group, "a/m-chat").code == "routing_mode_excluded"


def test_hybrid_fills_edge_lanes_first_even_when_public_is_cheaper() -> None:
    group = only_group(plan_for([EDGE, VENDOR], [E, V], request=RouteRequest(routing_mode="hybrid")))
    assert selected_ids(group) == ["e/m-chat"]
    receipt = rejected(group, "v/m-chat")
    assert receipt.code == "outranked"
    assert receipt.details["rank_basis"] == "edge_first"


def test_hybrid_spills_what_edge_cannot_take_to_the_cheapest_public_lane() -> None:
    # Given edge room for 4 of 10 items
    states = live([E, V, A], overrides={"e/m-chat": (4, 30)})
    plan = plan_for(
        [EDGE, VENDOR, PUBLIC[0]], [E, V, A], states=states, request=RouteRequest(routing_mode="hybrid")
    )
    group = only_group(plan)
    # Then edge takes 4 and the cheapest public lane the other 6
    assert [(s.lane_id, s.item_count) for s in group.selected] == [("e/m-chat", 4), ("v/m-chat", 6)]
    receipt = rejected(group, "a/m-chat")
    assert (receipt.code, receipt.details["rank_basis"]) == ("outranked", "cost")


def test_hybrid_without_edge_room_is_cheapest_public() -> None:
    states = live([E, V], overrides={"e/m-chat": (0, 30)})
    group = only_group(
        plan_for([EDGE, VENDOR], [E, V], states=states, request=RouteRequest(routing_mode="hybrid"))
    )
    assert selected_ids(group) == ["v/m-chat"]
    assert rejected(group, "e/m-chat").code == "capacity_full"


def test_sla_aware_prefers_a_lane_with_twice_the_room_over_a_cheaper_tight_one() -> None:
    # Given the cheapest lane has room for 15 of 10 items (1.5x) and b for 100 (10x)
    states = live([A, B], overrides={"a/m-chat": (15, 30), "b/m-chat": (100, 30)})
    request = RouteRequest(routing_mode="sla_aware")
    group = only_group(plan_for(PUBLIC[:2], [A, B], states=states, request=request))
    assert selected_ids(group) == ["b/m-chat"]
    receipt = rejected(group, "a/m-chat")
    assert (receipt.code, receipt.details["rank_basis"]) == ("outranked", "sla_headroom_then_cost")
    assert receipt.details["remaining_capacity_items"] == 15
    assert (
        "b/m-chat has room for at least 2x this group's 10 items today, this lane for 15" in receipt.message
    )
    # And under cheapest the tight lane would have won
    assert selected_ids(only_group(plan_for(PUBLIC[:2], [A, B], states=states))) == ["a/m-chat"]


def test_sla_aware_between_roomy_lanes_says_cost_decided() -> None:
    # Given both lanes roomy, b with more room (it said "ranks higher on headroom" of the lane
    # with more room, where cost decided)
    states = live([A, B], overrides={"a/m-chat": (50, 30), "b/m-chat": (100, 30)})
    group = only_group(
        plan_for(PUBLIC[:2], [A, B], states=states, request=RouteRequest(routing_mode="sla_aware"))
    )
    # Then the cheaper a is selected and b's receipt names cost
    assert selected_ids(group) == ["a/m-chat"]
    receipt = rejected(group, "b/m-chat")
    assert (receipt.code, receipt.details["rank_basis"]) == ("outranked", "cost")
    assert "headroom" not in receipt.message


def test_sla_aware_falls_back_to_cost_when_no_lane_has_headroom() -> None:
    states = live([A, B], overrides={"a/m-chat": (12, 30), "b/m-chat": (15, 30)})
    group = only_group(
        plan_for(PUBLIC[:2], [A, B], states=states, request=RouteRequest(routing_mode="sla_aware"))
    )
    assert selected_ids(group) == ["a/m-chat"]


def test_privacy_constrained_requires_the_tier_and_zero_retention() -> None:
    # Given a confidential provider that keeps data 30 days and a zero-retention one
    keeps = provider("a", privacy=("standard", "confidential"), retention_days=30)
    request = RouteRequest(routing_mode="privacy_constrained", privacy_tier="confidential")
    group = only_group(plan_for([keeps, EDGE], [A, E], request=request))
    receipt = rejected(group, "a/m-chat")
    assert receipt.code == "privacy_tier_mismatch"
    assert receipt.details["zero_data_retention_required"] is True
    assert "zero data retention" in receipt.message
    assert selected_ids(group) == ["e/m-chat"]
    assert group.selected[0].proof.data_retention_days == 0


@pytest.mark.parametrize("tier", ["flex", "standard", "priority"])
def test_every_sla_tier_routes_as_standard(tier: str) -> None:
    plan = plan_for(PUBLIC, [A, B, C], request=RouteRequest(sla_tier=tier))  # type: ignore[arg-type]
    assert selected_ids(only_group(plan)) == ["a/m-chat"]
    assert plan.to_api()["effective_sla_tier"] == "standard"


# -- splitting and failure -------------------------------------------------------------------


def test_a_group_is_split_when_no_single_lane_has_room() -> None:
    # Given 10 items and lanes with room for 4, 3 and 5
    states = live([A, B, C], overrides={"a/m-chat": (4, 30), "b/m-chat": (3, 30), "c/m-chat": (5, 30)})
    group_in = chat_group(10)
    group = only_group(plan_for(PUBLIC, [A, B, C], [group_in], states=states))
    # Then the lanes fill in cost order until the group is placed
    assert [(s.lane_id, s.item_count) for s in group.selected] == [
        ("a/m-chat", 4),
        ("b/m-chat", 3),
        ("c/m-chat", 3),
    ]
    # And the token shares, rounded up, never add up to less than the whole
    assert sum(s.prompt_tokens for s in group.selected) >= group_in.prompt_tokens
    assert sum(s.output_tokens for s in group.selected) >= group_in.output_tokens
    assert group.ok


def test_a_split_leaves_unneeded_lanes_outranked() -> None:
    d = lane("d", batch_in="9")
    states = live([A, B, d], overrides={"a/m-chat": (6, 30), "b/m-chat": (6, 30), "d/m-chat": (6, 30)})
    group = only_group(plan_for([*PUBLIC[:2], provider("d")], [A, B, d], states=states))
    assert [(s.lane_id, s.item_count) for s in group.selected] == [("a/m-chat", 6), ("b/m-chat", 4)]
    assert rejected(group, "d/m-chat").code == "outranked"


def test_not_enough_room_anywhere_fails_the_group_with_capacity_full_receipts() -> None:
    states = live([A, B], overrides={"a/m-chat": (4, 30), "b/m-chat": (3, 30)})
    plan = plan_for(PUBLIC[:2], [A, B], states=states)
    group = only_group(plan)
    assert not plan.ok and plan.failures == (group,)
    assert group.selected == ()
    assert {r.code for r in group.rejected} == {"capacity_full"}
    assert group.failure == "the eligible lanes have room for 7 of the 10 items today"


def test_a_model_without_lanes_fails_with_a_clear_reason() -> None:
    plan = plan_for(PUBLIC[:1], [A], [chat_group(2, model="m-other")])
    assert only_group(plan).failure == "the catalog has no lane for m-other"


def test_groups_are_routed_per_model_in_model_order() -> None:
    embed = lane("a", model=EMBED, operations=("embeddings",))
    groups = [
        chat_group(3),
        group_of([item(i, model=EMBED, operation="embeddings", input={"input": "t"}) for i in range(2)]),
    ]
    plan = plan_for(PUBLIC[:1], [A, embed], groups)
    assert [(g.model, g.item_count) for g in plan.groups] == [(CHAT, 3), (EMBED, 2)]
    assert [s.lane_id for s in plan.selected] == ["a/m-chat", f"a/{EMBED}"]
    assert len(plan.usage()) == 2


def test_the_plan_explains_itself_and_serializes() -> None:
    plan = plan_for(PUBLIC, [A, B, C])
    text = plan.explanation()
    assert text.startswith(
        "m-chat: 10 items on a ($0.10 in / $0.40 out per million tokens), by cheapest routing"
    )
    assert "2 outranked" in text
    shown: dict[str, Any] = plan.to_api()
    assert shown["routing_mode"] == "cheapest"
    (group,) = shown["groups"]
    assert [lane["selected"] for lane in group["selected_lanes"]] == [True]
    assert group["rejected_lanes"][0]["rejection"]["code"] == "outranked"
    assert group["rejected_lanes"][0]["proof"]["provider"] == "b"


def test_routing_is_deterministic_whatever_the_catalog_order() -> None:
    first = plan_for(PUBLIC, [A, B, C]).to_api()
    again = plan_for(list(reversed(PUBLIC)), [C, B, A]).to_api()
    assert first == again


# -- reading the request ---------------------------------------------------------------------


def test_a_route_request_is_read_from_the_api_body() -> None:
    request = RouteRequest.from_api(
        {
            "routing_mode": "hybrid",
            "privacy_tier": "confidential",
            "sla_tier": "priority",
            "required_tools": ["web_search"],
            "region": "eu",
            "max_price": {"input_per_mtok": 1.5, "per_item_usd": "0.01"},
        }
    )
    assert request == RouteRequest(
        routing_mode="hybrid",
        privacy_tier="confidential",
        sla_tier="priority",
        required_tools=frozenset({"web_search"}),
        regions=("eu",),
        max_price=MaxPrice(input_per_mtok=Decimal("1.5"), per_item_usd=Decimal("0.01")),
    )
    assert RouteRequest.from_api({}) == RouteRequest()


@pytest.mark.parametrize(
    ("body", "regions"),
    [
        ({"region": "eu", "regions": ["us", "eu"]}, ("eu",)),  # both hold: eu
        ({"region": "eu", "regions": []}, ("eu",)),  # an empty list allows anywhere
        ({"region": "eu"}, ("eu",)),
        ({"regions": ["us", "eu"]}, ("us", "eu")),
    ],
)
def test_region_and_regions_both_hold(body: dict[str, Any], regions: tuple[str, ...]) -> None:
    assert RouteRequest.from_api(body).regions == regions


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"routing_mode": "fastest"}, "routing_mode"),
        ({"privacy_tier": "secret"}, "privacy_tier"),
        ({"required_tools": ["teleport"]}, "required_tools"),
        ({"regions": "eu"}, "region"),
        # both hold, and cannot (regions won: a region the customer asked for was ignored)
        ({"region": "eu", "regions": ["us"]}, "region"),
        ({"max_price": {"input_per_mtok": -1}}, "max_price.input_per_mtok"),
        ({"max_price": {"input_per_mtok": "lots"}}, "max_price.input_per_mtok"),
        # typed amounts are ASCII digits, the whole text (docs/money.md, "Typed amounts")
        ({"max_price": {"input_per_mtok": "5\n"}}, "max_price.input_per_mtok"),
        ({"max_price": {"input_per_mtok": "\u0665"}}, "max_price.input_per_mtok"),  # Arabic-Indic 5
        ({"max_price": {"total": 5}}, "max_price"),
        ({"max_price": 5}, "max_price"),
    ],
)
def test_a_bad_route_request_names_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        RouteRequest.from_api(body)
    assert caught.value.details == {"field": field}
