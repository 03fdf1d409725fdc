"""Pricing: subtotal rounded up once, fee with the control-plane fee and the margin floor,
a discount that never takes the fee below the floor; quotes and settlements alike."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchroute.domain.catalog.pricing import LaneUsage, estimate_price, price_usage, token_cost
from batchroute.domain.routing.engine import route
from batchroute.domain.routing.gates import RouteRequest
from batchroute.money import Money
from tests.unit.catalog_fixtures import FEES, NOW, catalog, chat_group, lane, live, provider


def usage(
    prompt: int, output: int, *, lane_id: str = "p/m", inp: str = "0.075", out: str = "0.30"
) -> LaneUsage:
    return LaneUsage(lane_id, prompt, output, Decimal(inp), Decimal(out))


def test_the_worked_example_of_docs_routing_md() -> None:
    # Given 10,000 items of 500 prompt and 200 output tokens on one lane at $0.075 / $0.30
    price = price_usage([usage(5_000_000, 2_000_000)], FEES)
    # Then subtotal 5 x 0.075 + 2 x 0.30, fee 5.90 % + one lane's $0.01, total their sum
    assert price.provider_subtotal == Money.usd("0.975")
    assert price.service_fee == Money.usd("0.067525")
    assert price.customer_discount == Money.zero()
    assert price.total == Money.usd("1.042525")
    assert price.to_api() == {
        "provider_subtotal": {"currency": "usd", "amount": "0.975"},
        "service_fee": {"currency": "usd", "amount": "0.067525"},
        "customer_discount": {"currency": "usd", "amount": "0.00"},
        "total": {"currency": "usd", "amount": "1.042525"},
    }


def test_the_subtotal_rounds_up_to_the_micro_dollar() -> None:
    # Given one token at $0.15 per million: 0.00000015 USD
    price = price_usage([usage(1, 0, inp="0.15")], FEES)
    # Then the quote covers it with a whole micro-dollar, never zero
    assert price.provider_subtotal == Money(1)


def test_the_subtotal_is_summed_exactly_before_rounding() -> None:
    # Given three lanes each costing a third of a micro-dollar
    lanes = [usage(1, 0, lane_id=f"p{i}/m", inp="0.333333") for i in range(3)]
    # Then it rounds once (1 micro), not once per lane (3 micros)
    assert price_usage(lanes, FEES).provider_subtotal == Money(1)


def test_the_control_plane_fee_is_per_distinct_lane() -> None:
    one = price_usage([usage(1_000_000, 0)], FEES)
    two = price_usage([usage(500_000, 0, lane_id="a/m"), usage(500_000, 0, lane_id="b/m")], FEES)
    same_lane_twice = price_usage([usage(500_000, 0), usage(500_000, 0)], FEES)
    assert two.service_fee - one.service_fee == Money.usd("0.01")
    assert (two.lane_count, same_lane_twice.lane_count) == (2, 1)


def test_workflow_products_pay_the_workflow_fee() -> None:
    price = price_usage([usage(10_000_000, 0, inp="1")], FEES, fee_kind="workflow")
    assert price.service_fee == Money.usd("1.18") + Money.usd("0.01")
    assert price.fee_pct == Decimal("11.80")


def test_the_margin_floor_raises_a_fee_rate_set_below_it() -> None:
    # Given a schedule whose batch rate (2 %) is under the margin floor (5.90 %)
    fees = replace(FEES, standard_batch_fee_pct=Decimal("2"), control_plane_fee_per_lane_usd=Decimal(0))
    price = price_usage([usage(100_000_000, 0, inp="1")], fees)
    # Then the fee is the floor
    assert price.provider_subtotal == Money.usd("100")
    assert price.service_fee == Money.usd("5.90")
    assert price.margin_floor_applied


def test_a_discount_never_takes_the_fee_below_the_margin_floor() -> None:
    # Given the worked example (fee 0.067525, floor 0.057525) and a 5-cent discount
    price = price_usage([usage(5_000_000, 2_000_000)], FEES, customer_discount=Money.usd("0.05"))
    # Then only the part of the fee above the floor is given away
    assert price.customer_discount == Money.usd("0.01")
    assert price.total == Money.usd("1.032525")
    # And a small discount applies in full
    small = price_usage([usage(5_000_000, 2_000_000)], FEES, customer_discount=Money.usd("0.004"))
    assert (small.customer_discount, small.total) == (Money.usd("0.004"), Money.usd("1.038525"))


def test_a_negative_discount_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        price_usage([usage(1, 1)], FEES, customer_discount=Money(-1))


def test_an_estimate_prices_the_selected_lanes_at_their_locked_batch_prices() -> None:
    # Given a routed group of 100 chat items on the only lane
    cheap = lane("alpha", batch_in="0.10", batch_out="0.40")
    cat = catalog([provider("alpha")], [cheap])
    group = chat_group(100)
    plan = route([group], cat, live=live([cheap]), request=RouteRequest(), now=NOW)
    # When estimated
    price = estimate_price(plan, cat.fees)
    # Then the subtotal is the group's tokens at the lane's batch prices, rounded up
    exact = token_cost(group.prompt_tokens, group.output_tokens, Decimal("0.10"), Decimal("0.40"))
    assert price.provider_subtotal == Money.usd_ceil(exact)
    assert price.lane_count == 1


def test_a_settlement_is_the_same_formula_on_actual_usage() -> None:
    # Given the locked prices of a quote and the tokens the provider actually reported
    quoted = price_usage([usage(5_000_000, 2_000_000)], FEES)
    settled = price_usage([usage(4_000_000, 1_000_000)], FEES)
    # Then the settlement prices the actual tokens, which here cost less than the estimate
    assert settled.provider_subtotal == Money.usd("0.6")
    assert settled.total < quoted.total


@given(
    st.lists(
        st.tuples(st.integers(0, 10**9), st.integers(0, 10**8), st.decimals("0", "100", places=4)),
        min_size=1,
        max_size=5,
    ),
    st.integers(0, 10**7),
)
def test_the_total_always_adds_up_and_never_under_covers(
    lanes: list[tuple[int, int, Decimal]], discount_micros: int
) -> None:
    usages = [usage(p, o, lane_id=f"l{i}/m", inp=str(r), out=str(r)) for i, (p, o, r) in enumerate(lanes)]
    price = price_usage(usages, FEES, customer_discount=Money(discount_micros))
    exact = sum((u.cost for u in usages), Decimal(0))
    assert price.provider_subtotal.amount >= exact
    assert price.provider_subtotal.amount - exact < Decimal("0.000001")
    assert price.total == price.provider_subtotal + price.service_fee - price.customer_discount
    floor = price.provider_subtotal.amount * FEES.margin_floor_pct / 100
    assert (price.service_fee - price.customer_discount).amount >= floor


def test_the_fee_basis_shows_the_schedule_line_behind_a_fee_100_times_the_cost() -> None:
    # Given a tiny batch: 0.0001 USD of provider cost on one lane (issue 29)
    price = price_usage([usage(1_000, 0, inp="0.10")], FEES)
    basis = price.fee_basis(FEES)
    # Then the receipt can say the flat per-lane fee, not the rate, makes the fee
    assert basis == {
        "fee": "standard_batch_fee",
        "fee_pct": "5.9",
        "control_plane_fee_per_lane": {"currency": "usd", "amount": "0.01"},
        "lane_count": 1,
        "margin_floor_pct": "5.9",
        "margin_floor_applied": False,
        "schedule_line": "Service fee 0.01 USD: the 5.9% standard batch fee of the provider subtotal "
        "(0.0001 USD) plus 0.01 USD for each lane that delivered answers (1 lane).",
    }


def test_the_fee_basis_names_the_margin_floor_and_the_workflow_fee_when_they_apply() -> None:
    fees = replace(FEES, standard_batch_fee_pct=Decimal("2"), control_plane_fee_per_lane_usd=Decimal(0))
    floor = price_usage([usage(100_000_000, 0, inp="1")], fees).fee_basis(fees)
    assert floor["margin_floor_applied"] is True
    assert floor["schedule_line"] == (
        "Service fee 5.90 USD: the 5.9% margin floor of the provider subtotal (100.00 USD), more than "
        "the 2% standard batch fee plus 0.00 USD for each lane that delivered answers (1 lane)."
    )
    two = [usage(10_000_000, 0, lane_id="a/m", inp="1"), usage(1, 0, lane_id="b/m")]
    workflow = price_usage(two, FEES, fee_kind="workflow").fee_basis(FEES)
    expected = ("workflow_product_fee", "11.8", 2)
    assert (workflow["fee"], workflow["fee_pct"], workflow["lane_count"]) == expected
    assert "11.8% workflow-product fee" in workflow["schedule_line"]
    assert "(2 lanes)" in workflow["schedule_line"]
