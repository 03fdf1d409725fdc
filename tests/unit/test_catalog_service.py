"""The catalog service: model filters, model views with routing eligibility, providers,
fees and workflow products, against an in-memory live state and a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from batchroute.catalog import builtin_catalog
from batchroute.clock import FixedClock, isoformat
from batchroute.config import Settings
from batchroute.domain.catalog.catalog import LaneLive
from batchroute.errors import InvalidRequest, NotFound
from batchroute.services.catalog.catalog import CatalogService, ModelFilters

CATALOG = builtin_catalog()
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
LLAMA_70B = "meta-llama/Llama-3.3-70B-Instruct"


class FakeLive:
    def __init__(self, states: dict[str, LaneLive] | None = None) -> None:
        self.states = states or {}
        self.reads = 0

    def live_states(self, *, consistent: bool = False) -> dict[str, LaneLive]:
        self.reads += 1
        return dict(self.states)


def all_fresh(at: datetime = NOW, **overrides: int) -> dict[str, LaneLive]:
    """Every lane heartbeating at `at` with its full daily capacity (or an override)."""
    return {
        lane.lane_id: LaneLive(
            lane_id=lane.lane_id,
            remaining_capacity_items=overrides.get(lane.lane_id, lane.daily_capacity_items),
            last_heartbeat_at=isoformat(at),
        )
        for lane in CATALOG.lanes
    }


def service(live: FakeLive | None = None, settings: Settings | None = None) -> CatalogService:
    return CatalogService(CATALOG, live or FakeLive(all_fresh()), settings or Settings(), FixedClock(NOW))


def ids(filters: ModelFilters) -> set[str]:
    return {m["id"] for m in service().list_models(filters)["data"]}


# -- listing and filters -------------------------------------------------------------------
def test_unfiltered_list_has_every_model_the_pricing_date_and_provider_count() -> None:
    # Given a fresh live state / When the list is asked with no filter
    live = FakeLive(all_fresh())
    body = service(live).list_models(ModelFilters())
    # Then every model, the catalog's pricing date, every provider, in ONE live read
    assert {m["id"] for m in body["data"]} == {m.id for m in CATALOG.models}
    assert body["pricing_updated_at"] == CATALOG.pricing_updated_at
    assert body["provider_count"] == len(CATALOG.providers)
    assert live.reads == 1


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (ModelFilters(operation="embeddings"), {"text-embedding-3-small", "BAAI/bge-large-en-v1.5"}),
        (
            ModelFilters(operation="vision"),
            {
                "gpt-4o-mini",
                "gpt-4.1-mini",
                "claude-sonnet-4",
                "gemini-2.0-flash",
                "gemini-1.5-flash",
                "meta-llama/Llama-3.2-11B-Vision-Instruct",
            },
        ),
        (ModelFilters(provider="groq"), {LLAMA_70B, "meta-llama/Llama-3.1-8B-Instruct"}),
        (ModelFilters(privacy_tier="restricted"), set()),
        (ModelFilters(runtime_capability="audio"), {"gemini-2.0-flash", "gemini-1.5-flash"}),
        (ModelFilters(runtime_capability="reasoning"), {"claude-sonnet-4"}),
        (ModelFilters(hosted_tool="file_search"), {"gpt-4o-mini", "gpt-4.1-mini"}),
        # No adapter runs a calculator (catalog/data/hosted_tools.toml): no lane offers one
        (ModelFilters(hosted_tool="calculator"), set()),
        (
            ModelFilters(hosted_tool="python_execution"),
            {
                "gpt-4o-mini",
                "gpt-4.1-mini",
                "claude-3-5-haiku",
                "claude-sonnet-4",
                "gemini-2.0-flash",
                "gemini-1.5-flash",
            },
        ),
        (ModelFilters(hosted_tool="retrieval"), set()),
    ],
)
def test_each_filter_alone(filters: ModelFilters, expected: set[str]) -> None:
    assert ids(filters) == expected


def test_confidential_excludes_models_only_served_by_standard_tier_providers() -> None:
    # Gemini is served by Google alone, which declares the standard tier only
    confidential = ids(ModelFilters(privacy_tier="confidential"))
    assert confidential == {m.id for m in CATALOG.models} - {"gemini-2.0-flash", "gemini-1.5-flash"}
    assert ids(ModelFilters(privacy_tier="standard")) == {m.id for m in CATALOG.models}


@pytest.mark.parametrize("tier", ["flex", "standard", "priority"])
def test_every_sla_tier_is_served_as_standard(tier: str) -> None:
    assert ids(ModelFilters(sla_tier=tier)) == {m.id for m in CATALOG.models}  # type: ignore[arg-type]


def test_filters_combine_with_and_on_one_lane() -> None:
    # Groq serves Llama, and other hosts serve Llama with json_schema, but no Groq lane has it
    assert ids(ModelFilters(provider="groq", runtime_capability="json_schema")) == set()
    # Claude Haiku has a Bedrock lane and an Anthropic lane with web search, never both in one lane
    assert ids(ModelFilters(provider="bedrock", hosted_tool="web_search")) == set()
    assert ids(ModelFilters(provider="anthropic", hosted_tool="web_search")) == {
        "claude-3-5-haiku",
        "claude-sonnet-4",
    }
    assert ids(ModelFilters(operation="vision", privacy_tier="confidential")) == {
        "gpt-4o-mini",
        "gpt-4.1-mini",
        "claude-sonnet-4",
        "meta-llama/Llama-3.2-11B-Vision-Instruct",
    }
    assert ids(ModelFilters(operation="responses", provider="together", q="qwen")) == {
        "Qwen/Qwen2.5-72B-Instruct"
    }


@pytest.mark.parametrize(
    ("q", "expected", "field"),
    [
        ("GPT-4O Mini", {"gpt-4o-mini"}, "title"),
        ("cheapest 1m-context", {"gemini-1.5-flash"}, "summary"),
        ("qwen/QWEN2.5", {"Qwen/Qwen2.5-72B-Instruct"}, "id"),
        ("SCREENSHOT", {"meta-llama/Llama-3.2-11B-Vision-Instruct"}, "description"),
        ("Legacy", {"gemini-1.5-flash"}, "tags"),
        ("  ", {m.id for m in CATALOG.models}, "blank"),
        ("no-such-model-anywhere", set(), "none"),
    ],
)
def test_q_is_case_insensitive_over_each_field(q: str, expected: set[str], field: str) -> None:
    assert ids(ModelFilters(q=q)) == expected, field


def test_unknown_provider_is_invalid() -> None:
    with pytest.raises(InvalidRequest) as raised:
        service().list_models(ModelFilters(provider="nope"))
    assert raised.value.details["errors"][0]["path"] == "query.provider"  # type: ignore[index]


def test_no_match_makes_no_live_read() -> None:
    live = FakeLive(all_fresh())
    body = service(live).list_models(ModelFilters(privacy_tier="restricted"))
    assert body == {"data": [], "pricing_updated_at": CATALOG.pricing_updated_at, "provider_count": 0}
    assert live.reads == 0


# -- model view ----------------------------------------------------------------------------
def test_a_lanes_prompt_cache_prices_are_shown_as_they_are_charged() -> None:
    # Given Claude Sonnet 4 on Anthropic, whose cache reads cost a tenth of input and writes more
    [lane] = service(FakeLive(all_fresh())).model("claude-sonnet-4")["model"]["providers"]
    [price] = [lane.price for lane in CATALOG.lanes_for("claude-sonnet-4") if lane.provider == "anthropic"]
    # Then the model view shows both, direct and batch (it showed input and output only, while
    # receipts and the direct hold use them: docs/chat.md, "Hold and charge")
    assert {key: lane["pricing"][key] for key in ("input", "cached_input", "cache_write_input")} == {
        "input": "3.00",
        "cached_input": "0.30",
        "cache_write_input": "3.75",
    }
    assert Decimal(lane["pricing"]["batch_cache_write_input"]) == price.batch.cache_write_input_per_mtok
    assert Decimal(lane["pricing"]["batch_cached_input"]) == price.batch.cached_input_per_mtok


def test_a_lanes_hosted_tool_prices_are_shown_as_they_are_charged() -> None:
    # Given GPT-4o mini on OpenAI, whose web search is billed by the call and Code Interpreter by
    # the container
    [lane] = service(FakeLive(all_fresh())).model("gpt-4o-mini")["model"]["providers"]
    # Then its pricing shows each tool it offers: the price per 1,000 calls and the calls a
    # quote counts per item (docs/money.md, "Hosted tool calls")
    assert lane["pricing"]["hosted_tools"] == {
        "file_search": {"per_1k_calls": "2.50", "calls_per_item": 2},
        "python_execution": {"per_1k_calls": "30.00", "calls_per_item": 1},
        "web_search": {"per_1k_calls": "10.00", "calls_per_item": 3},
    }


def test_model_view_has_per_provider_prices_capacity_and_eligibility() -> None:
    # Given Groq stale (last heartbeat 10 minutes ago) and DeepInfra out of capacity
    states = all_fresh(**{f"deepinfra/{LLAMA_70B}": 0})
    states[f"groq/{LLAMA_70B}"] = LaneLive(
        f"groq/{LLAMA_70B}", 999, isoformat(datetime(2026, 11, 21, 11, 50, tzinfo=UTC))
    )
    # When the model is read
    body = service(FakeLive(states)).model(LLAMA_70B)
    model = body["model"]
    lanes = {lane["provider"]: lane for lane in model["providers"]}
    # Then prices are decimal strings per million tokens, batch and direct
    assert lanes["together"]["pricing"] == {
        "currency": "usd",
        "unit": "per_million_tokens",
        "input": "0.88",
        "output": "0.88",
        "batch_input": "0.44",
        "batch_output": "0.44",
        # no published cache prices: cached input is charged at the input price
        "cached_input": "0.88",
        "cache_write_input": "0.88",
        "batch_cached_input": "0.44",
        "batch_cache_write_input": "0.44",
        "hosted_tools": {},  # it runs none
    }
    assert (lanes["groq"]["pricing"]["batch_input"], lanes["groq"]["pricing"]["batch_output"]) == (
        "0.59",
        "0.79",
    )
    assert lanes["deepinfra"]["pricing"]["input"] == "0.23"
    # And the stale and full lanes are named with their codes; the rest are available
    eligibility = model["routing_eligibility"]
    assert eligibility["eligible"] is True
    assert eligibility["lanes_available"] == len(lanes) - 2
    assert {(r["provider"], r["code"]) for r in eligibility["reasons"]} == {
        ("groq", "stale_heartbeat"),
        ("deepinfra", "capacity_full"),
    }
    # And capacity counts available lanes only; the model spans both regions and retentions
    available = [lane for lane in CATALOG.lanes_for(LLAMA_70B) if lane.provider not in {"groq", "deepinfra"}]
    assert model["capacity"]["remaining_capacity_items"] == sum(
        lane.daily_capacity_items for lane in available
    )
    assert model["regions"] == ["eu", "us"]
    assert model["retention"]["min_data_retention_days"] == 0
    assert "edge-eu" in model["retention"]["zero_data_retention_providers"]
    assert model["context_window"] == 131_072
    assert body["pricing_updated_at"] == CATALOG.pricing_updated_at


def test_model_without_any_live_state_is_not_eligible() -> None:
    model = service(FakeLive({})).model("gpt-4o-mini")["model"]
    assert model["routing_eligibility"]["eligible"] is False
    assert [r["code"] for r in model["routing_eligibility"]["reasons"]] == ["stale_heartbeat"]
    assert model["providers"][0]["capacity"] == {
        "daily_capacity_items": 500_000,
        "remaining_capacity_items": None,
        "last_heartbeat_at": None,
    }
    assert model["hosted_tools"] == ["file_search", "python_execution", "web_search"]


def test_guards_show_in_eligibility() -> None:
    # Given a test deployment (launch guard active) that allows only edge pools and Groq
    settings = Settings(environment="test", provider_allowlist=["edge-eu", "edge-us", "groq"])
    model = service(settings=settings).model(LLAMA_70B)["model"]
    codes = {r["provider"]: r["code"] for r in model["routing_eligibility"]["reasons"]}
    # Then edge-us is held back by the launch guard and the others by the allowlist
    assert codes["edge-us"] == "not_launched"
    assert codes["together"] == codes["fireworks"] == "not_in_allowlist"
    assert model["routing_eligibility"]["lanes_available"] == 2  # groq and edge-eu


def test_unknown_model_is_not_found() -> None:
    with pytest.raises(NotFound):
        service().model("gpt-5-imaginary")


# -- providers and fees --------------------------------------------------------------------
def test_provider_directory() -> None:
    providers = {p["slug"]: p for p in service().providers()["providers"]}
    assert len(providers) == len(CATALOG.providers)
    assert providers["openai"]["supported_operations"] == ["embeddings", "responses", "vision"]
    assert providers["openai"]["display_name"] == "OpenAI"
    assert all(p["enabled"] for p in providers.values())  # local: no launch guard
    guarded = service(settings=Settings(environment="test")).provider("edge-us")["provider"]
    assert guarded["enabled"] is False and guarded["status"] == "not_launched"
    with pytest.raises(NotFound):
        service().provider("nope")


def test_fee_schedule_view() -> None:
    fees = service().fees()
    assert fees["standard_batch_fee_pct"] == "5.90"
    assert fees["workflow_product_fee_pct"] == "11.80"
    assert fees["margin_floor_pct"] == "5.90"
    assert fees["control_plane_fee_per_lane"] == {"currency": "usd", "amount": "0.01"}


# -- workflow products ---------------------------------------------------------------------
def test_workflow_products_report_capacity_per_provider_from_live_state() -> None:
    # Given every lane fresh but the edge-eu pool's Llama 70B at 7 items, and Fireworks stale
    states = all_fresh(**{f"edge-eu/{LLAMA_70B}": 7})
    for lane in CATALOG.lanes:
        if lane.provider == "fireworks":
            states.pop(lane.lane_id)
    live = FakeLive(states)
    # When the PII product is read
    body = service(live).workflow_product("pii-redaction")
    # Then its capacity is the edge pools' (Fireworks is able but stale: 0), in one read
    edge_eu_8b = next(
        lane for lane in CATALOG.lanes if lane.lane_id == "edge-eu/meta-llama/Llama-3.1-8B-Instruct"
    )
    assert body["provider_capacity"]["fireworks"] == 0
    assert body["provider_capacity"]["edge-eu"] == 7 + edge_eu_8b.daily_capacity_items
    assert set(body["provider_capacity"]) == {"fireworks", "edge-eu", "edge-us"}  # Bedrock: no json_schema
    assert body["product"]["lanes_available"] < body["product"]["lanes_able"]
    assert body["product"]["fee_pct"] == "11.80"
    assert live.reads == 1


def test_workflow_product_list_covers_providers_able_to_serve_any_product() -> None:
    body = service().workflow_products()
    assert [p["slug"] for p in body["data"]] == [p.slug for p in CATALOG.workflow_products]
    assert "google" in body["provider_capacity"] and "anthropic" not in body["provider_capacity"]
    with pytest.raises(NotFound):
        service().workflow_product("nope")
