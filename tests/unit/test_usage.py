"""Usage counters and periods (domain/billing/usage.py): what a charge adds, how the periods fall in a
zone, and how counters add up into the answer."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchroute.adapters.dynamo.lane_records import lane_from_item
from batchroute.catalog import builtin_catalog
from batchroute.clock import FixedClock
from batchroute.domain.accounts.access import Principal
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.billing.ledger import WalletState
from batchroute.domain.billing.savings import References
from batchroute.domain.billing.usage import (
    OTHER,
    UNATTRIBUTED,
    PeriodWindow,
    UsageCharge,
    UsageCounter,
    UsageFigures,
    UsageLine,
    batch_usage_lines,
    period_window,
    summarize,
    usage_counters,
    usage_day,
    usage_sort_key,
)
from batchroute.errors import Forbidden, InvalidRequest
from batchroute.money import Money
from batchroute.services.billing.usage import UsageService

DAY = "2026-11-21"

# What a stored lane always has and these usage lines never read.
NEVER_READ = {"ordinal_start": 0, "ordinal_end": 0, "item_count": 0, "created_at": ""}


def _line(model: str, provider: str, cost: str, tin: int = 10, tout: int = 5, **kw: int) -> UsageLine:
    return UsageLine(model, provider, Decimal(cost), tin, tout, **kw)


# -- what a charge adds --------------------------------------------------------------------
def test_the_charge_is_apportioned_by_cost_and_adds_up_exactly() -> None:
    # Given two lanes costing 1 : 2 and a charge of 100 µ$ (fee included)
    charge = UsageCharge(DAY, (_line("m1", "p1", "0.000010"), _line("m2", "p2", "0.000020")))
    counters = usage_counters(charge, 100)
    # Then 33 and 67 (largest remainder), adding up to the charge
    assert [(c.model, c.figures.cost_micros) for c in counters] == [("m1", 33), ("m2", 67)]
    assert sum(c.figures.cost_micros for c in counters) == 100
    assert all(c.day == DAY for c in counters)


def test_lines_of_the_same_model_and_provider_merge() -> None:
    charge = UsageCharge(
        DAY,
        (_line("m", "p", "1", 10, 1, batch_items=2), _line("m", "p", "1", 5, 2, batch_items=1)),
    )
    (counter,) = usage_counters(charge, 7)
    assert counter.figures == UsageFigures(cost_micros=7, input_tokens=15, output_tokens=3, batch_items=3)


def test_names_with_hashes_never_share_a_counter_item() -> None:
    # Given two pairs whose plain "model#provider" would read the same
    lines = (_line("a#b", "c", "1"), _line("a", "b#c", "1"))
    counters = usage_counters(UsageCharge(DAY, lines), 10)
    # Then two counters with two distinct keys
    assert len({c.sort_key for c in counters}) == 2
    assert usage_sort_key(DAY, "m%23", "p") != usage_sort_key(DAY, "m#", "p")


def test_lines_without_cost_share_by_tokens_then_equally() -> None:
    by_tokens = usage_counters(
        UsageCharge(DAY, (_line("a", "p", "0", 30, 0), _line("b", "p", "0", 10, 0))), 8
    )
    assert [c.figures.cost_micros for c in by_tokens] == [6, 2]
    equal = usage_counters(UsageCharge(DAY, (_line("a", "p", "0", 0, 0, chat_requests=1),)), 5)
    assert [c.figures.cost_micros for c in equal] == [5]


def test_a_charge_without_lines_is_unattributed_and_nothing_is_written_for_nothing() -> None:
    (counter,) = usage_counters(UsageCharge(DAY, ()), 42)
    assert (counter.model, counter.provider, counter.figures.cost_micros) == (UNATTRIBUTED, UNATTRIBUTED, 42)
    assert usage_counters(UsageCharge(DAY, ()), 0) == []


def test_a_free_charge_still_counts_its_tokens() -> None:
    (counter,) = usage_counters(UsageCharge(DAY, (_line("m", "p", "0.001", 3, 4, chat_requests=1),)), 0)
    assert counter.figures == UsageFigures(cost_micros=0, input_tokens=3, output_tokens=4, chat_requests=1)


def test_counters_per_charge_are_bounded_and_the_smallest_fold_into_other() -> None:
    # Given 120 distinct model/provider lines (more than a transaction may carry)
    lines = tuple(_line(f"m{i:03}", "p", str(i + 1), 1, 1, batch_items=1) for i in range(120))
    counters = usage_counters(UsageCharge(DAY, lines), 1_000_000, max_counters=50)
    # Then 50 counters: the 49 dearest, and `other` holding the rest; nothing is lost
    assert len(counters) == 50
    assert {c.model for c in counters} >= {"m119", "m071", OTHER}
    assert "m070" not in {c.model for c in counters}
    assert sum(c.figures.cost_micros for c in counters) == 1_000_000
    assert sum(c.figures.batch_items for c in counters) == 120
    assert sum(c.figures.input_tokens for c in counters) == 120


@given(
    costs=st.lists(st.integers(min_value=0, max_value=10**9), min_size=0, max_size=80),
    charged=st.integers(min_value=0, max_value=10**12),
    cap=st.integers(min_value=1, max_value=60),
)
def test_counters_always_add_up_to_the_charge(costs: list[int], charged: int, cap: int) -> None:
    lines = tuple(_line(f"m{i % 37}", f"p{i % 3}", str(Decimal(c) / 10**6)) for i, c in enumerate(costs))
    counters = usage_counters(UsageCharge(DAY, lines), charged, max_counters=cap)
    assert len(counters) <= cap
    assert sum(c.figures.cost_micros for c in counters) == charged
    assert all(c.figures.cost_micros >= 0 for c in counters)
    assert len({(c.model, c.provider) for c in counters}) == len(counters)  # one item each


def test_batch_lines_take_the_completed_lanes_only() -> None:
    lanes = [
        lane_from_item(
            {
                "lane_key": "a",
                "lane_id": "l1",
                "model": "m",
                "provider": "p1",
                "unit_prices": {"input_per_mtok": "1"},
                **NEVER_READ,
            }
        ),
        lane_from_item(
            {
                "lane_key": "b",
                "lane_id": "l2",
                "model": "m",
                "provider": "p2",
                "unit_prices": {},
                **NEVER_READ,
            }
        ),
    ]
    tallies = {"a": {"completed": 3, "prompt_tokens": 30, "completion_tokens": 9}, "b": {"failed": 2}}
    (line,) = batch_usage_lines(lanes, tallies)
    assert (line.provider, line.input_tokens, line.output_tokens, line.batch_items) == ("p1", 30, 9, 3)
    assert line.cost == Decimal("0.00003")
    (chat,) = batch_usage_lines(lanes, tallies, chat=True)
    assert (chat.batch_items, chat.chat_requests) == (0, 3)


def test_the_usage_counters_carry_the_prompt_cache_split_and_its_cheaper_cost() -> None:
    # Given a lane locked with a cache-read price a tenth of its input price
    lane = lane_from_item(
        {
            "lane_key": "a",
            "lane_id": "l1",
            "model": "m",
            "provider": "p1",
            "unit_prices": {"input_per_mtok": "1", "cached_input_per_mtok": "0.1"},
            **NEVER_READ,
        }
    )
    tally = {"completed": 2, "prompt_tokens": 1_000, "completion_tokens": 0, "cached_input_tokens": 800}
    (line,) = batch_usage_lines([lane], {"a": tally})
    # Then the line is priced by kind (200 x 1 + 800 x 0.1) and keeps the split
    assert line.cost == Decimal("0.00028") and line.cached_input_tokens == 800
    (counter,) = usage_counters(UsageCharge(DAY, (line, line)), 10)
    assert counter.figures.cached_input_tokens == 1_600
    assert counter.figures.to_api()["tokens"] == {
        "input": 2_000,
        "output": 0,
        "total": 2_000,
        "cached_input": 1_600,
    }
    assert "cached_input" not in UsageFigures(input_tokens=5).to_api()["tokens"]


# -- periods -------------------------------------------------------------------------------
def test_the_usage_day_is_the_local_date() -> None:
    at = datetime(2026, 4, 1, 6, 30, tzinfo=UTC)  # 23:30 on March 31 in Los Angeles (PDT)
    assert usage_day(at, "America/Los_Angeles") == "2026-03-31"
    assert usage_day(at, "UTC") == "2026-04-01"
    with pytest.raises(ValueError, match="aware"):
        usage_day(datetime(2026, 4, 1), "UTC")


def test_monthly_windows_follow_local_midnights_across_dst() -> None:
    now = datetime(2026, 3, 10, 12, tzinfo=UTC)
    current = period_window("monthly", now, "America/New_York")
    assert (current.start, current.end) == (date(2026, 3, 1), date(2026, 3, 31))
    assert current.starts_at == datetime(2026, 3, 1, 5, tzinfo=UTC)  # EST
    assert current.ends_at == datetime(2026, 4, 1, 4, tzinfo=UTC)  # EDT
    previous = current.previous()
    assert (previous.start, previous.end) == (date(2026, 2, 1), date(2026, 2, 28))
    assert previous.ends_at == current.starts_at


def test_daily_windows_and_the_year_boundary() -> None:
    now = datetime(2026, 1, 1, 3, tzinfo=UTC)  # still Dec 31 in Los Angeles
    day = period_window("daily", now, "America/Los_Angeles")
    assert (day.start, day.end) == (date(2025, 12, 31), date(2025, 12, 31))
    assert day.previous().start == date(2025, 12, 30)
    january = period_window("monthly", now, "UTC")
    assert (january.previous().start, january.previous().end) == (date(2025, 12, 1), date(2025, 12, 31))


def test_summary_adds_counters_per_day_model_and_provider() -> None:
    window = PeriodWindow("monthly", "UTC", date(2026, 11, 1), date(2026, 11, 30))

    def counter(day: str, model: str, provider: str, cost: int) -> UsageCounter:
        return UsageCounter(day, model, provider, UsageFigures(cost, 10, 1, 1, 0))

    counters = [
        counter("2026-11-01", "a", "p", 5),
        counter("2026-11-01", "b", "q", 7),
        counter("2026-11-03", "a", "q", 1),
        counter("2026-10-31", "a", "p", 100),  # the previous period: not counted here
    ]
    usage = summarize(counters, window, today=date(2026, 11, 3))
    assert usage.total == UsageFigures(13, 30, 3, 3, 0)
    assert [(d.day, f.cost_micros) for d, f in usage.by_day] == [(1, 12), (2, 0), (3, 1)]
    assert [(m, f.cost_micros) for m, f in usage.by_model] == [("b", 7), ("a", 6)]
    assert [(p, f.cost_micros) for p, f in usage.by_provider] == [("q", 8), ("p", 5)]
    api = usage.to_api()
    assert api["spend"] == {"currency": "usd", "amount": "0.000013"}
    assert api["tokens"] == {"input": 30, "output": 3, "total": 33}
    assert api["requests"] == {"batch_items": 3, "chat": 0, "total": 3}
    assert api["starts_at"] == "2026-11-01T00:00:00.000Z" and api["ends_at"] == "2026-12-01T00:00:00.000Z"


def test_each_day_is_split_by_model_and_provider_for_the_stacked_chart() -> None:
    # Given two days of counters on several models and providers
    window = PeriodWindow("monthly", "UTC", date(2026, 11, 1), date(2026, 11, 30))
    counters = [
        UsageCounter("2026-11-01", "a", "p", UsageFigures(5, 10, 1, 1, 0)),
        UsageCounter("2026-11-01", "b", "q", UsageFigures(7, 10, 1, 1, 0)),
        UsageCounter("2026-11-01", "a", "q", UsageFigures(2, 10, 1, 1, 0)),
        UsageCounter("2026-11-03", "a", "q", UsageFigures(1, 10, 1, 0, 1)),
    ]
    # When the period is summarized
    days = summarize(counters, window, today=date(2026, 11, 3)).to_api()["by_day"]

    # Then each day carries its own split, dearest first, adding up to the day's figures
    def split(day: dict[str, Any], by: str) -> list[tuple[str, str]]:
        return [(row[by[3:]], row["spend"]["amount"]) for row in day[by]]

    assert split(days[0], "by_model") == [("a", "0.000007"), ("b", "0.000007")]  # tie: more tokens first
    assert split(days[0], "by_provider") == [("q", "0.000009"), ("p", "0.000005")]
    assert days[0]["by_model"][0]["tokens"] == {"input": 20, "output": 2, "total": 22}
    assert days[1]["by_model"] == [] and days[1]["by_provider"] == []  # a day without spend
    assert split(days[2], "by_model") == [("a", "0.000001")]
    assert days[2]["by_provider"][0]["requests"] == {"batch_items": 0, "chat": 1, "total": 1}


# -- the read --------------------------------------------------------------------------------
class _Ledger:
    """In-memory counters; records the ranges it was asked for."""

    def __init__(self, counters: list[UsageCounter]) -> None:
        self.counters = counters
        self.ranges: list[tuple[str, str]] = []

    def state(self, org_id: str) -> WalletState:
        return WalletState(balance=Money(9_000_000), reserved=Money(500_000))

    def usage_between(self, org_id: str, first_day: str, last_day: str) -> list[UsageCounter]:
        self.ranges.append((first_day, last_day))
        return [c for c in self.counters if first_day <= c.day <= last_day]


class _Controls:
    def __init__(self, controls: BillingControls | None) -> None:
        self.controls = controls

    def billing_controls(self, org_id: str) -> BillingControls | None:
        return self.controls


PRINCIPAL = Principal(org_id="org_1", role="billing", via="api_key", key_id="key_1")
REFERENCES = References.of(builtin_catalog())


def test_the_read_is_one_range_over_both_periods() -> None:
    ledger = _Ledger([UsageCounter("2026-10-31", "m", "p", UsageFigures(5, 1, 1, 1, 0))])
    clock = FixedClock(datetime(2026, 11, 5, 12, tzinfo=UTC))
    report = UsageService(ledger=ledger, controls=_Controls(None), clock=clock, references=REFERENCES).report(
        PRINCIPAL
    )
    assert ledger.ranges == [("2026-10-01", "2026-11-30")]
    api = report.to_api()
    assert api["period"] == "monthly" and api["timezone"] == "UTC"
    assert api["available"] == {"currency": "usd", "amount": "8.50"}
    assert api["previous_period"]["spend"] == {"currency": "usd", "amount": "0.000005"}
    assert api["current_period"]["by_day"][-1]["date"] == "2026-11-05"


def test_the_default_period_is_the_enabled_limits() -> None:
    clock = FixedClock(datetime(2026, 11, 5, 12, tzinfo=UTC))
    ledger = _Ledger([])

    def service(controls: BillingControls | None) -> UsageService:
        return UsageService(ledger=ledger, controls=_Controls(controls), clock=clock, references=REFERENCES)

    daily = BillingControls(org_id="org_1", limit_enabled=True, limit_period="daily", limit_amount=Money(1))
    assert service(daily).report(PRINCIPAL).period == "daily"
    assert ledger.ranges == [("2026-11-04", "2026-11-05")]
    off = BillingControls(org_id="org_1", limit_enabled=False, limit_period="daily")
    assert service(off).report(PRINCIPAL).period == "monthly"
    with pytest.raises(InvalidRequest):
        service(None).report(PRINCIPAL, period="weekly")
    member = Principal(org_id="org_1", role="member", via="api_key", key_id="key_2")
    with pytest.raises(Forbidden):
        service(None).report(member)
