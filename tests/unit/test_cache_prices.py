"""Prompt-cache prices (#32): the catalog's lanes carry cached-read and cache-write prices
(batch ones at the batch factor), settlement charges each token kind at its locked price,
and the direct chat charge and hold do the same at direct prices."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchroute.adapters.dynamo.lane_records import lane_from_item
from batchroute.catalog import builtin_catalog
from batchroute.catalog.datafile import DataError
from batchroute.catalog.loader import load_catalog
from batchroute.domain.billing.settlement import charged_usage, provider_lanes
from batchroute.domain.catalog.catalog import Lane
from batchroute.domain.catalog.pricing import price_usage
from batchroute.domain.chat.routing import DirectLane
from batchroute.domain.routing.lane_plan import LaneRecord
from batchroute.domain.workflow.results import LaneTally
from batchroute.money import Money
from batchroute.providers.base import ProviderResult, Usage
from batchroute.services.workflow.execution import result_line
from tests.unit.test_catalog_loader import _edited

MILLION = Decimal(1_000_000)


def _lane(provider: str, model: str) -> Lane:
    (lane,) = [lane for lane in builtin_catalog().lanes_for(model) if lane.provider == provider]
    return lane


def test_anthropic_lanes_price_cache_reads_and_writes_and_halve_them_for_batches() -> None:
    price = _lane("anthropic", "claude-sonnet-4").price
    assert (price.direct.cached_input_per_mtok, price.direct.cache_write_input_per_mtok) == (
        Decimal("0.30"),
        Decimal("3.75"),
    )
    assert (price.batch.cached_input_per_mtok, price.batch.cache_write_input_per_mtok) == (
        Decimal("0.150"),
        Decimal("1.875"),
    )


def test_openai_caches_reads_only_and_a_host_without_cache_prices_bills_input() -> None:
    openai = _lane("openai", "gpt-4o-mini").price
    assert openai.batch.cached_input_per_mtok == Decimal("0.0375")
    assert openai.batch.cache_write_input_per_mtok == openai.batch_input_per_mtok  # no write premium
    groq = _lane("groq", "meta-llama/Llama-3.1-8B-Instruct").price
    assert groq.cached_input_per_mtok is None
    assert groq.direct.cached_input_per_mtok == groq.direct.cache_write_input_per_mtok == groq.input_per_mtok


def test_a_cached_price_above_the_input_price_fails_naming_the_row(tmp_path: Path) -> None:
    folder = _edited(tmp_path, "lanes.toml", 'cached_input = "0.075"', 'cached_input = "0.20"')
    with pytest.raises(DataError, match=r"openai/gpt-4o-mini.*cached input price is above"):
        load_catalog(folder)


# -- settlement: each token kind at its price --------------------------------------------

PRICES = {
    "currency": "usd",
    "basis": "batch",
    "input_per_mtok": "1.50",
    "output_per_mtok": "7.50",
    "cached_input_per_mtok": "0.15",
    "cache_write_input_per_mtok": "1.875",
}
KINDS = ("fresh", "cached", "written", "output")
PRICE_OF = {
    "fresh": Decimal("1.50"),
    "cached": Decimal("0.15"),
    "written": Decimal("1.875"),
    "output": Decimal("7.50"),
}
item_usage = st.fixed_dictionaries({kind: st.integers(0, 200_000) for kind in KINDS})


def _record(prices: dict[str, str]) -> LaneRecord:
    return lane_from_item(
        {
            "lane_key": "01-anthropic-claude-sonnet-4",
            "lane_id": "anthropic/claude-sonnet-4",
            "provider": "anthropic",
            "model": "claude-sonnet-4",
            "status": "completed",
            "unit_prices": prices,
            "ordinal_start": 0,
            "ordinal_end": 0,
            "item_count": 0,
            "created_at": "",
        }
    )


def _tally(record: LaneRecord, items: list[dict[str, int]]) -> dict[str, int]:
    """The lane's tally as Finalize makes it, from result lines as the lane runner writes them."""
    tally = LaneTally()
    for seq, counts in enumerate(items):
        usage = Usage(
            counts["fresh"] + counts["cached"] + counts["written"],
            counts["output"],
            cached_input_tokens=counts["cached"],
            cache_write_input_tokens=counts["written"],
        )
        tally.add(
            result_line(seq, f"item-{seq}", ProviderResult(f"seq-{seq}", "completed", usage=usage), 1, record)
        )
    return tally.to_dict()


@settings(max_examples=60, deadline=None)
@given(st.lists(item_usage, min_size=1, max_size=12))
def test_the_charge_is_each_token_kind_times_its_price_summed_over_items(items: list[dict[str, int]]) -> None:
    record = _record(PRICES)
    tallies = {record.lane_key: _tally(record, items)}
    subtotal = price_usage(charged_usage([record], tallies), builtin_catalog().fees).provider_subtotal
    expected = sum((counts[kind] * PRICE_OF[kind] for counts in items for kind in KINDS), Decimal(0))
    assert subtotal == Money.usd_ceil(expected / MILLION)


@settings(max_examples=30, deadline=None)
@given(st.lists(item_usage, min_size=1, max_size=8))
def test_a_lane_locked_without_cache_prices_bills_cached_tokens_as_input(items: list[dict[str, int]]) -> None:
    prices = {k: v for k, v in PRICES.items() if not k.startswith("cache")}
    record = _record(prices)
    tallies = {record.lane_key: _tally(record, items)}
    subtotal = price_usage(charged_usage([record], tallies), builtin_catalog().fees).provider_subtotal
    inputs = sum(c["fresh"] + c["cached"] + c["written"] for c in items)
    expected = inputs * PRICE_OF["fresh"] + sum(c["output"] for c in items) * PRICE_OF["output"]
    assert subtotal == Money.usd_ceil(expected / MILLION)


def test_the_receipt_shows_the_split_where_it_shows_tokens() -> None:
    record = _record(PRICES)
    items = [{"fresh": 100, "cached": 3_000, "written": 0, "output": 50}] * 2
    (lane,) = provider_lanes([record], {record.lane_key: _tally(record, items)}, None)
    assert lane["usage"] == {"prompt_tokens": 6_200, "completion_tokens": 100, "cached_input_tokens": 6_000}
    assert lane["unit_prices"]["cached_input_per_mtok"] == "0.15"
    # 200 x 1.50 + 6000 x 0.15 + 100 x 7.50 = 1950 per million
    assert lane["cost"] == Money.usd("0.00195").to_api()


# -- the direct chat charge ----------------------------------------------------------------


def _direct(lane: Lane) -> DirectLane:
    return DirectLane(
        lane=lane,
        provider=builtin_catalog().provider(lane.provider),  # type: ignore[arg-type]
        max_output_tokens=100,
        hold=Money.usd("1"),
        expected_cost=Decimal(0),
        reliability=Decimal("0.99"),
    )


def test_the_direct_charge_prices_cache_reads_and_writes_at_direct_prices() -> None:
    direct = _direct(_lane("anthropic", "claude-sonnet-4"))
    plain = direct.charge(10_000, 100)
    read = direct.charge(10_000, 100, cached_input_tokens=9_000)
    written = direct.charge(10_000, 100, cache_write_input_tokens=9_000)
    # 1000 x 3.00 + 9000 x 0.30 + 100 x 15.00 ; 1000 x 3.00 + 9000 x 3.75 + 100 x 15.00
    assert read == Money.usd("0.0072") and written == Money.usd("0.03825")
    assert read < plain < written
