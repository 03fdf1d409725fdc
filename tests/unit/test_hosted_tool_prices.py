"""Hosted tool calls priced (docs/money.md, "Hosted tool calls"): the catalog's price per 1,000
calls, the calls a quote counts per item, locked in the plan's unit prices, in the estimate,
in the ranking, at settlement and in a direct request's hold and charge."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from pathlib import Path

from batchroute.catalog import builtin_catalog
from batchroute.catalog.environments import ENVIRONMENTS, load_deployment
from batchroute.domain.batches.item_profile import ModelProfile
from batchroute.domain.billing.savings import References, TokenCounts
from batchroute.domain.catalog.catalog import HostedToolPrice, Lane
from batchroute.domain.catalog.pricing import (
    LaneUsage,
    ToolUses,
    locked_tool_prices,
    tool_cost,
    tool_price_key,
)
from batchroute.domain.chat.routing import tool_calls_asked
from batchroute.domain.routing.engine import RoutePlan, route
from batchroute.domain.routing.gates import RouteRequest
from batchroute.domain.routing.items import ModelGroup
from tests.unit.catalog_fixtures import NOW, catalog, chat_group, group_of, item, lane, live, provider
from tests.unit.test_catalog_loader import _edited, _fails

SEARCH = HostedToolPrice(per_1k_calls=Decimal("10.00"), calls_per_item=3)
GROUNDING = HostedToolPrice(per_1k_calls=Decimal("35.00"), calls_per_item=1)
FREE = HostedToolPrice(per_1k_calls=Decimal("0"), calls_per_item=1)


def _searching_lane(slug: str, price: HostedToolPrice = SEARCH, **kwargs: object) -> Lane:
    offered = lane(slug, tools=("web_search", "python_execution"), **kwargs)  # type: ignore[arg-type]
    return replace(offered, hosted_tool_prices=(("python_execution", FREE), ("web_search", price)))


def _searching_items(count: int, *, plain: int = 0) -> list[dict[str, object]]:
    asks = {"messages": [{"role": "user", "content": "Find the news."}], "tools": [{"type": "web_search"}]}
    plain_input = {"messages": [{"role": "user", "content": "Find the news."}]}
    return [item(i, input=asks if i < count else plain_input) for i in range(count + plain)]


def test_every_lane_that_offers_a_hosted_tool_prices_it_in_every_environment() -> None:
    for name in ENVIRONMENTS:
        for offered in load_deployment(builtin_catalog(), name).catalog.lanes:
            for tool in offered.hosted_tools:
                price = offered.tool_price(tool)
                assert price is not None, (name, offered.lane_id, tool)
                assert price.calls_per_item >= 1


def test_the_vendors_bill_searches_by_the_call_and_code_execution_by_the_container_or_not_at_all() -> None:
    lanes = {one.lane_id: one for one in builtin_catalog().lanes}
    openai = lanes["openai/gpt-4o-mini"]
    assert openai.tool_price("web_search") == HostedToolPrice(Decimal("10.00"), 3)
    assert openai.tool_price("file_search") == HostedToolPrice(Decimal("2.50"), 2)
    # Code Interpreter: $0.03 a container, counted once per container an answer names
    assert openai.tool_price("python_execution") == HostedToolPrice(Decimal("30.00"), 1)
    assert lanes["anthropic/claude-sonnet-4"].tool_price("web_search") == HostedToolPrice(Decimal("10.00"), 3)
    # Google bills a grounded prompt once, however many queries it ran
    assert lanes["google/gemini-2.0-flash"].tool_price("web_search") == HostedToolPrice(Decimal("35.00"), 1)
    # billed by container time, which answers do not report (Anthropic), or as tokens (Gemini):
    # priced at nothing, and never locked
    assert lanes["anthropic/claude-sonnet-4"].tool_price("python_execution") == FREE
    assert lanes["google/gemini-2.0-flash"].tool_price("python_execution") == FREE
    assert ("python_execution", Decimal(0)) not in lanes["google/gemini-2.0-flash"].tool_prices_per_1k


def test_a_lane_offering_a_tool_its_provider_does_not_price_is_refused(tmp_path: Path) -> None:
    old = 'hosted_tool_prices.file_search = { per_1k_calls = "2.50", calls_per_item = 2 }\n'
    _fails(
        _edited(tmp_path, "providers.toml", old, ""),
        "lanes.toml",
        "hosted_tools",
        "'file_search' has no price",
    )


def test_a_price_for_a_tool_the_service_does_not_know_is_refused(tmp_path: Path) -> None:
    old = "hosted_tool_prices.file_search = {"
    _fails(_edited(tmp_path, "providers.toml", old, "hosted_tool_prices.grep = {"), "'grep' is not one of")


def test_a_tool_price_must_be_a_decimal_string_and_calls_per_item_at_least_one(tmp_path: Path) -> None:
    old = 'hosted_tool_prices.file_search = { per_1k_calls = "2.50", calls_per_item = 2 }'
    bad_price = "hosted_tool_prices.file_search = { per_1k_calls = 2.5, calls_per_item = 2 }"
    _fails(_edited(tmp_path / "a", "providers.toml", old, bad_price), "per_1k_calls", "decimal string")
    no_calls = 'hosted_tool_prices.file_search = { per_1k_calls = "2.50", calls_per_item = 0 }'
    _fails(_edited(tmp_path / "b", "providers.toml", old, no_calls), "calls_per_item", "integer >= 1")


def test_calls_cost_their_price_per_thousand_and_an_unpriced_tool_nothing() -> None:
    uses = ToolUses.of([("web_search", 4), ("python_execution", 2)])
    assert tool_cost(uses, [("web_search", Decimal("10.00"))]) == Decimal("0.04")
    usage = LaneUsage(
        "a/m", 0, 0, Decimal(1), Decimal(1), tool_uses=uses, tool_prices=(("web_search", Decimal(35)),)
    )
    assert usage.cost == Decimal("0.14")
    locked = {"input_per_mtok": "1", tool_price_key("web_search"): "10.00", "currency": "usd"}
    assert locked_tool_prices(locked) == (("web_search", Decimal("10.00")),)


def test_a_quote_counts_each_asking_items_calls_and_locks_the_price() -> None:
    # Given three items asking for web search and two that do not, on one lane
    searcher = _searching_lane("a")
    plan = _route([searcher], group_of(_searching_items(3, plain=2)))
    ((selected,),) = [group.selected for group in plan.groups]
    # Then the lane counts 3 x 3 calls at 10.00 USD per 1,000 (0.09 USD) beside the tokens
    assert selected.tool_calls == ToolUses((("web_search", 9),))
    view = selected.to_api()
    assert view["estimated_tool_calls"] == {"web_search": 9}
    assert view["unit_prices"].get("web_search_per_1k_calls") == "10.00"
    assert "python_execution_per_1k_calls" not in view["unit_prices"]
    tokens = (selected.prompt_tokens * Decimal(1) + selected.output_tokens * Decimal(2)) / 1_000_000
    assert selected.estimated_cost.amount == (tokens + Decimal("0.09")).quantize(
        Decimal("0.000001"), "ROUND_CEILING"
    )
    assert selected.usage().cost == tokens + Decimal("0.09")
    # And the quote's plain-language explanation says so
    assert "per million tokens, plus 9 web_search calls at $10.00 per 1,000)" in plan.explanation()
    one = _route([searcher], group_of(_searching_items(1))).explanation()
    assert one.startswith("m-chat: 1 item on a (") and "plus 3 web_search calls" in one


def test_items_that_ask_for_no_tool_lock_no_tool_price() -> None:
    plan = _route([_searching_lane("a")], chat_group(3))
    ((selected,),) = [group.selected for group in plan.groups]
    assert not selected.tool_calls and "estimated_tool_calls" not in selected.to_api()
    assert not any(key.endswith("_per_1k_calls") for key in selected.to_api()["unit_prices"])


def test_routing_ranks_lanes_on_their_tool_calls_too() -> None:
    # Given two lanes at the same token prices, one billing a search 10.00 per 1,000 calls (3
    # per item), the other 35.00 per grounded prompt (1 per item)
    searcher = _searching_lane("a")
    grounder = _searching_lane("b", GROUNDING)
    plan = _route([searcher, grounder], group_of(_searching_items(4)))
    # Then the 0.035 USD of grounding per item beats the 0.03 of searches only on tokens:
    # the searching lane costs less and is chosen
    ((selected,),) = [group.selected for group in plan.groups]
    assert selected.lane_id == "a/m-chat"
    # And with searches dearer the grounding lane wins
    dear = _searching_lane("a", HostedToolPrice(Decimal("20.00"), 3))
    ((chosen,),) = [
        group.selected for group in _route([dear, grounder], group_of(_searching_items(4))).groups
    ]
    assert chosen.lane_id == "b/m-chat"


def test_a_split_group_counts_each_lanes_share_of_the_asking_items_rounded_up() -> None:
    group = group_of(_searching_items(3, plain=1))
    searcher = _searching_lane("a")
    assert group.tool_calls_on(searcher, 4) == ToolUses((("web_search", 9),))
    assert group.tool_calls_on(searcher, 1) == ToolUses((("web_search", 3),))  # ceil(3 x 1 / 4) items
    assert group.tool_calls_on(searcher, 2) == ToolUses((("web_search", 6),))  # ceil(3 x 2 / 4) items


def test_tool_choice_none_asks_for_no_tool_and_counts_no_calls() -> None:
    none = {
        "messages": [{"role": "user", "content": "x"}],
        "tools": [{"type": "web_search"}],
        "tool_choice": "none",
    }
    group = group_of([item(0, input=none)])
    assert group.tool_calls_on(_searching_lane("a"), 1) == ToolUses()


def test_a_profile_kept_before_tool_items_counts_every_item_of_the_group() -> None:
    group = group_of(_searching_items(2, plain=3))
    profile = ModelProfile.of(group, ((1, 1),))
    assert ModelProfile.from_json(profile.to_json()).group() == group
    old = {key: value for key, value in profile.to_json().items() if key != "tool_items"}
    assert ModelProfile.from_json(old).tool_items == {"web_search": 5}


def test_a_direct_request_holds_for_its_tools_calls() -> None:
    assert tool_calls_asked({"web_search", "python_execution"}, _searching_lane("a")) == ToolUses(
        (("python_execution", 1), ("web_search", 3))
    )
    assert tool_calls_asked(set(), _searching_lane("a")) == ToolUses()


def test_savings_set_the_tool_calls_on_both_sides() -> None:
    references = References.of(builtin_catalog())
    tokens = TokenCounts(1_000, 1_000)
    searched = references.cost("gpt-4o-mini", replace(tokens, tool_usd=Decimal("0.04")))
    plain = references.cost("gpt-4o-mini", tokens)
    assert searched is not None and plain is not None
    assert searched.list_usd - plain.list_usd == searched.batch_usd - plain.batch_usd == Decimal("0.04")


def _route(lanes: list[Lane], group: ModelGroup) -> RoutePlan:
    providers = [provider(one.provider) for one in lanes]
    return route([group], catalog(providers, lanes), live=live(lanes), request=RouteRequest(), now=NOW)
