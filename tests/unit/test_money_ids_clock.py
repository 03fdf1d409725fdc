from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from batchroute.clock import FixedClock, isoformat
from batchroute.ids import has_prefix, new_id, suffix_of
from batchroute.money import Money, format_amount


def test_money_round_trips_micros_and_api_shape() -> None:
    # Given a decimal amount / When stored and read back / Then nothing is lost and no float appears
    money = Money.usd("12.345678")
    assert money.micros == 12_345_678
    assert money.to_api() == {"currency": "usd", "amount": "12.345678"}
    assert Money.usd(25).to_api() == {"currency": "usd", "amount": "25.00"}
    assert (Money.usd("1.5") + Money.usd("0.25")).to_api()["amount"] == "1.75"


def test_holds_round_up_never_under_cover() -> None:
    assert Money.usd_ceil(Decimal("0.0000001")).micros == 1


def test_amount_formatting() -> None:
    assert format_amount(Decimal("0")) == "0.00"
    assert format_amount(Decimal("0.1")) == "0.10"
    assert format_amount(Decimal("3.000120")) == "3.00012"


def test_ids_are_prefixed_and_sortable() -> None:
    early = new_id("batch", datetime(2026, 1, 1, tzinfo=UTC))
    late = new_id("batch", datetime(2026, 1, 2, tzinfo=UTC))
    assert has_prefix(early, "batch") and early < late
    assert len(suffix_of(early)) == 26
    with pytest.raises(ValueError, match="unknown id prefix"):
        new_id("nope")


def test_fixed_clock_moves_only_when_told() -> None:
    clock = FixedClock(datetime(2026, 3, 1, 12, tzinfo=UTC))
    assert isoformat(clock.now()) == "2026-03-01T12:00:00.000Z"
    clock.advance(hours=25)
    assert isoformat(clock.now()) == "2026-03-02T13:00:00.000Z"
