"""Deadline rescue's money as it stands (services/workflow/rescue.py): the batch's estimated
cost that the reservation's headroom is measured against."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from batchroute.domain.routing.lane_plan import new_lane_record
from batchroute.domain.routing.rescue import item_micros
from batchroute.money import Money
from batchroute.services.workflow.rescue import _estimated_cost

PRICES = {"input_per_mtok": "1", "output_per_mtok": "2"}
TOKENS = {"m": (Decimal(100), Decimal(50))}  # an item: 100 in, 50 out = 200 micros before the fee


def _lane(key: str, start: int, end: int, **changes: object):  # type: ignore[no-untyped-def]
    lane = new_lane_record(
        lane_key=key,
        lane_id=f"{key}/m",
        provider=key,
        model="m",
        ordinal_start=start,
        ordinal_end=end,
        chunks=[0, 1],
        unit_prices=PRICES,
        at="t",
    )
    return replace(lane, **changes)


def test_items_are_counted_once_whoever_owns_them_now() -> None:
    # A lane of 10 items that answered 2 (200 input and 100 output tokens), then handed the
    # other 8 over (3 of its chunk, 5 never started) to a successor still running
    old = _lane(
        "01-a", 0, 10, status="failed", completed=2, handed_over=3, prompt_tokens=200, completion_tokens=100
    )
    successor = _lane("01f1-b", 2, 10)
    per_item = item_micros(Decimal(100), Decimal(50), PRICES, Decimal(0))
    estimate = _estimated_cost([old, successor], TOKENS, Decimal(0), Decimal("0.01"))
    # the answered usage once, the 8 open items once (not the 5 never started twice), two lanes' fee
    assert estimate == Money(2 * per_item + 8 * per_item) + Money.usd("0.02")
    # a lane that delivered nothing and owns nothing costs no lane fee
    nothing = _lane("02-c", 0, 4, status="failed", handed_over=4)
    assert _estimated_cost([nothing], TOKENS, Decimal(0), Decimal("0.01")) == Money(0)
