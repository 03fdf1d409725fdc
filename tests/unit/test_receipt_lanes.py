"""The billing receipt's lanes: a failover costs the customer no control-plane fee (a deadline
rescue lane does), a lane that ran is not also a rejected one, and the lanes' costs add up to
the provider subtotal (review rv_receipts F2, F4, F6)."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from batchroute.catalog import builtin_catalog
from batchroute.domain.billing.settlement import charged_usage, fee_lane, provider_lanes, rejected_lanes
from batchroute.domain.catalog.pricing import PriceBreakdown, price_usage, split_subtotal
from batchroute.domain.routing.lane_plan import LaneRecord
from batchroute.domain.routing.rescue import DEADLINE_RESCUE, RESCUE_REST
from batchroute.money import MICROS_PER_USD, Money

FEES = builtin_catalog().fees
PRICES = {"input_per_mtok": "2.00", "output_per_mtok": "10.00"}
RESCUE_PRICES = {"input_per_mtok": "3.00", "output_per_mtok": "12.00"}


def _rejected(provider: str, code: str) -> dict[str, Any]:
    return {
        "lane_id": f"{provider}/m",
        "provider": provider,
        "model": "m",
        "rejection": {"code": code, "message": "Eligible, but not needed"},
        "proof": {"provider": provider},
    }


PLAN: Any = {
    "groups": [
        {
            "model": "m",
            "selected_lanes": [{"lane_id": "a/m", "provider": "a", "proof": {"provider": "a"}}],
            "rejected_lanes": [
                _rejected("b", "outranked"),
                _rejected("c", "outranked"),
                _rejected("r", "outranked"),
                _rejected("z", "capacity_full"),
            ],
        }
    ]
}


def _lane(key: str, lane_id: str, status: str = "completed", **extra: Any) -> LaneRecord:
    fields: dict[str, Any] = {
        "lane_key": key,
        "lane_id": lane_id,
        "provider": lane_id.split("/")[0],
        "model": "m",
        "ordinal_start": 0,
        "ordinal_end": 0,
        "item_count": 0,
        "chunk_ranges": (),
        "unit_prices": PRICES,
        "created_at": "",
        "status": status,
        **extra,
    }
    return LaneRecord(**fields)


def _tally(completed: int, prompt: int, completion: int, failed: int = 0) -> dict[str, int]:
    return {
        "completed": completed,
        "failed": failed,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
    }


def _settled(lanes: list[LaneRecord], tallies: dict[str, dict[str, int]]) -> PriceBreakdown:
    return price_usage(charged_usage(lanes, tallies), FEES)


# The same 5 items, 1,000 prompt and 500 completion tokens, all on the planned lane a/m
PLANNED = [_lane("01-a-m", "a/m")]
PLANNED_TALLIES = {"01-a-m": _tally(5, 1_000, 500)}


def test_a_failover_adds_no_lane_to_the_control_plane_fee() -> None:
    # Given the planned lane delivering 2 items, then failing over to b/m, which delivers 3
    lanes = [
        _lane("01-a-m", "a/m", "failed", failover_to="01f1-b-m"),
        _lane("01f1-b-m", "b/m", failover_from="01-a-m", failover_depth=1),
    ]
    tallies = {"01-a-m": _tally(2, 400, 200, failed=3), "01f1-b-m": _tally(3, 600, 300)}
    # When settled
    usage = charged_usage(lanes, tallies)
    failover, plain = _settled(lanes, tallies), _settled(PLANNED, PLANNED_TALLIES)
    # Then both lanes' usage counts under the planned lane, whose id each still carries
    assert [(u.lane_id, u.fee_identity) for u in usage] == [("a/m", "a/m"), ("b/m", "a/m")]
    # And the customer pays the same as without the failover: one lane's fee
    assert failover.lane_count == plain.lane_count == 1
    assert failover.provider_subtotal == plain.provider_subtotal == Money.usd("0.007")
    assert failover.service_fee == plain.service_fee
    assert failover.fee_basis(FEES) == plain.fee_basis(FEES)
    assert "(1 lane)" in failover.fee_basis(FEES)["schedule_line"]


def test_a_chain_of_failovers_counts_as_its_planned_lane() -> None:
    # Given a/m -> b/m -> c/m, every lane delivering (and, again, only the last one)
    lanes = [
        _lane("01-a-m", "a/m", "failed", failover_to="01f1-b-m"),
        _lane("01f1-b-m", "b/m", "failed", failover_from="01-a-m", failover_to="01f2-c-m"),
        _lane("01f2-c-m", "c/m", failover_from="01f1-b-m"),
    ]
    every = {"01-a-m": _tally(1, 200, 100), "01f1-b-m": _tally(1, 200, 100), "01f2-c-m": _tally(3, 600, 300)}
    last = {"01-a-m": _tally(0, 0, 0, failed=1), "01f2-c-m": _tally(5, 1_000, 500)}
    plain = _settled(PLANNED, PLANNED_TALLIES)
    for tallies in (every, last):
        settled = _settled(lanes, tallies)
        assert {u.fee_identity for u in charged_usage(lanes, tallies)} == {"a/m"}
        assert (settled.lane_count, settled.service_fee) == (1, plain.service_fee)
        assert settled.total == plain.total


def test_each_planned_lane_still_pays_its_fee() -> None:
    # Given two planned lanes (a split group), one failing over
    lanes = [
        _lane("01-a-m", "a/m", "failed", failover_to="01f1-b-m"),
        _lane("01f1-b-m", "b/m", failover_from="01-a-m"),
        _lane("02-x-m", "x/m"),
    ]
    tallies = {"01-a-m": _tally(1, 1, 1), "01f1-b-m": _tally(1, 1, 1), "02-x-m": _tally(1, 1, 1)}
    # Then two lanes' fees: the planned ones
    assert _settled(lanes, tallies).lane_count == 2


def test_a_deadline_rescue_lane_keeps_its_own_fee() -> None:
    # Given the planned lane rescued by r/m (at its own prices), the rest left on a/m
    lanes = [
        _lane("01-a-m", "a/m", "failed", failover_to="01f1-r-m"),
        _lane(
            "01f1-r-m",
            "r/m",
            failover_from="01-a-m",
            handover_reason=DEADLINE_RESCUE,
            unit_prices=RESCUE_PRICES,
            then_lane="01f1-a-m",
        ),
        _lane("01f1-a-m", "a/m", failover_from="01-a-m", handover_reason=RESCUE_REST),
    ]
    tallies = {
        "01-a-m": _tally(1, 200, 100),
        "01f1-r-m": _tally(2, 400, 200),
        "01f1-a-m": _tally(2, 400, 200),
    }
    # Then the rescue lane is a lane of its own, the rest the planned lane's
    identities = [(u.lane_id, u.fee_identity) for u in charged_usage(lanes, tallies)]
    assert identities == [("a/m", "a/m"), ("a/m", "a/m"), ("r/m", "r/m")]
    assert _settled(lanes, tallies).lane_count == 2
    # And a failover of the rescue lane counts as the rescue lane: still two
    failed_rescue = replace(lanes[1], status="failed", failover_to="01f2-c-m")
    taker = _lane("01f2-c-m", "c/m", failover_from="01f1-r-m", unit_prices=RESCUE_PRICES)
    chained = [lanes[0], failed_rescue, lanes[2], taker]
    more = {**tallies, "01f2-c-m": _tally(1, 100, 50)}
    assert _settled(chained, more).lane_count == 2
    assert fee_lane(taker, {lane.lane_key: lane for lane in chained}) == "r/m"


def test_a_rescue_of_a_failover_lane_counts_the_planned_lane_and_the_rescue() -> None:
    # Given a/m -> b/m (failover), then b/m rescued by r/m with its rest kept on b/m
    lanes = [
        _lane("01-a-m", "a/m", "failed", failover_to="01f1-b-m"),
        _lane("01f1-b-m", "b/m", "failed", failover_from="01-a-m", failover_to="01f2-r-m"),
        _lane("01f2-r-m", "r/m", failover_from="01f1-b-m", handover_reason=DEADLINE_RESCUE),
        _lane("01f2-b-m", "b/m", failover_from="01f1-b-m", handover_reason=RESCUE_REST),
    ]
    tallies = {key: _tally(1, 100, 50) for key in ("01-a-m", "01f1-b-m", "01f2-r-m", "01f2-b-m")}
    usage = charged_usage(lanes, tallies)
    assert sorted({u.fee_identity for u in usage}) == ["a/m", "r/m"]
    assert _settled(lanes, tallies).lane_count == 2


def test_a_lane_whose_source_is_missing_counts_as_itself() -> None:
    orphan = _lane("01f1-b-m", "b/m", failover_from="01-gone-m")
    assert fee_lane(orphan, {orphan.lane_key: orphan}) == "b/m"
    # and a (corrupt) cycle ends
    one = _lane("01-a-m", "a/m", failover_from="01f1-b-m")
    two = _lane("01f1-b-m", "b/m", failover_from="01-a-m")
    assert fee_lane(two, {one.lane_key: one, two.lane_key: two}) in {"a/m", "b/m"}


def test_after_a_failover_no_lane_that_ran_is_listed_as_rejected() -> None:
    # Given a/m failed over to b/m, an outranked lane of the quote; c/m's record never ran
    lanes = [
        _lane("01-a-m", "a/m", "failed", failover_to="01f1-b-m"),
        _lane("01f1-b-m", "b/m", failover_from="01-a-m"),
        _lane("01f2-c-m", "c/m", "pending", failover_from="01f1-b-m"),
    ]
    tallies = {"01-a-m": _tally(0, 0, 0, failed=2), "01f1-b-m": _tally(2, 100, 50)}
    # When the receipt lists them
    ran = provider_lanes(lanes, tallies, PLAN)
    rejected = rejected_lanes(PLAN, {lane["lane_id"] for lane in ran})
    # Then the two lists are disjoint, and every other rejection is kept as planned
    assert {lane["lane_id"] for lane in ran} == {"a/m", "b/m"}
    assert [lane["lane_id"] for lane in rejected] == ["c/m", "r/m", "z/m"]
    assert rejected[0] == _rejected("c", "outranked")
    # And without lanes that ran, the quote's rejections as planned
    assert [lane["lane_id"] for lane in rejected_lanes(PLAN)] == ["b/m", "c/m", "r/m", "z/m"]


def test_the_lane_costs_add_up_to_the_subtotal() -> None:
    # Given three lanes of 0.00000366 USD each (review rv_receipts F6: each rounded up they
    # made 0.000012, against a subtotal of 0.000011)
    prices = {"input_per_mtok": "0.02", "output_per_mtok": "0.03"}
    lanes = [_lane(f"0{i}-p{i}-m", f"p{i}/m", unit_prices=prices) for i in range(1, 4)]
    tallies = {lane.lane_key: _tally(1, 29, 93) for lane in lanes}
    # Then the subtotal's 11 micro-dollars are split 4, 4, 3 (ties: the earlier lanes)
    costs = [lane["cost"]["amount"] for lane in provider_lanes(lanes, tallies, None)]
    assert costs == ["0.000004", "0.000004", "0.000003"]
    assert _settled(lanes, tallies).provider_subtotal == Money(11)


def test_a_split_gives_whole_costs_as_they_are_and_the_rest_by_largest_remainder() -> None:
    costs = [Decimal("0.000002"), Decimal("0.0000011"), Decimal("0.0000019"), Decimal(0)]
    # exact sum 5 micros: 2 as it is, then the larger remainder (0.9) gets the 1 left
    assert [m.micros for m in split_subtotal(costs)] == [2, 1, 2, 0]
    assert split_subtotal([]) == []


_PRICE = st.decimals("0", "60", places=6)
_LANE = st.tuples(
    st.integers(0, 3),  # completed items (0: a lane that ran and delivered nothing)
    st.integers(0, 10**9),  # prompt tokens
    st.integers(0, 10**8),  # completion tokens
    st.integers(0, 10**6),  # of the prompt, read from the prompt cache
    _PRICE,
    _PRICE,
    st.one_of(st.none(), _PRICE),  # the cached-input price, when locked
)


@given(st.lists(_LANE, min_size=1, max_size=8))
def test_lane_costs_always_add_up_to_the_subtotal_each_within_a_micro_dollar(
    drawn: list[tuple[int, int, int, int, Decimal, Decimal, Decimal | None]],
) -> None:
    lanes, tallies = [], {}
    for n, (completed, prompt, output, cached, inp, out, cached_price) in enumerate(drawn):
        prices = {"input_per_mtok": str(inp), "output_per_mtok": str(out)}
        if cached_price is not None:
            prices["cached_input_per_mtok"] = str(cached_price)
        lane = _lane(f"{n:02d}-p{n}-m", f"p{n}/m", unit_prices=prices)
        lanes.append(lane)
        tallies[lane.lane_key] = {
            **_tally(completed, prompt, output, failed=1),
            "cached_input_tokens": min(cached, prompt),
        }
    shown = provider_lanes(lanes, tallies, None)
    usage = {u.lane_id: u for u in charged_usage(lanes, tallies)}
    subtotal = price_usage(usage.values(), FEES).provider_subtotal
    costs = [Money.usd(lane["cost"]["amount"]) for lane in shown]
    assert sum(costs, Money.zero()) == subtotal
    for lane, cost in zip(shown, costs, strict=True):
        exact = usage[lane["lane_id"]].cost if lane["lane_id"] in usage else Decimal(0)
        assert abs(cost.micros - exact * MICROS_PER_USD) < 1


@given(st.lists(st.decimals("0", "1000", places=12), max_size=10))
def test_a_split_always_adds_up_to_the_rounded_up_sum(costs: list[Decimal]) -> None:
    split = split_subtotal(costs)
    assert sum(split, Money.zero()) == Money.usd_ceil(sum(costs, Decimal(0)))
    assert all(abs(m.micros - c * MICROS_PER_USD) < 1 for m, c in zip(split, costs, strict=True))
    assert all(
        m.micros == c * MICROS_PER_USD
        for m, c in zip(split, costs, strict=True)
        if (c * MICROS_PER_USD) % 1 == 0
    )
