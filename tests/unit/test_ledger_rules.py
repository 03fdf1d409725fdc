"""Ledger rules: spend-period keys across zones, the settlement split and absorb policy, the
in-memory wallet model, and the invariant checker (it must catch each kind of break)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchroute.domain.billing.ledger import (
    DuplicateReservation,
    Entry,
    Reservation,
    SettlementResult,
    UnknownReservation,
    Wallet,
    WalletState,
    ledger_violations,
    period_keys,
    resolve,
    split_settlement,
)
from batchroute.errors import PaymentRequired
from batchroute.money import Money

USD = 1_000_000


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# -- period keys -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("instant", "zone", "daily", "monthly"),
    [
        # UTC itself
        ("2026-11-21T23:59:59", "UTC", "D#2026-11-21", "M#2026-11"),
        # UTC+14: the local day starts 14 h before UTC's
        ("2026-11-21T09:59:59", "Pacific/Kiritimati", "D#2026-11-21", "M#2026-11"),
        ("2026-11-21T10:00:00", "Pacific/Kiritimati", "D#2026-11-22", "M#2026-11"),
        ("2026-11-30T10:00:00", "Pacific/Kiritimati", "D#2026-12-01", "M#2026-12"),
        # UTC-11: still the previous day (and month) when UTC has moved on
        ("2026-12-01T10:59:59", "Pacific/Pago_Pago", "D#2026-11-30", "M#2026-11"),
        ("2026-12-01T11:00:00", "Pacific/Pago_Pago", "D#2026-12-01", "M#2026-12"),
        # month and year boundary in a zone ahead of UTC
        ("2026-12-31T22:59:59", "Europe/Berlin", "D#2026-12-31", "M#2026-12"),
        ("2026-12-31T23:00:00", "Europe/Berlin", "D#2027-01-01", "M#2027-01"),
        # DST (New York springs forward on 2026-03-08): midnight is 05:00Z before, 04:00Z after
        ("2026-03-08T04:59:59", "America/New_York", "D#2026-03-07", "M#2026-03"),
        ("2026-03-08T05:00:00", "America/New_York", "D#2026-03-08", "M#2026-03"),
        ("2026-03-09T03:59:59", "America/New_York", "D#2026-03-08", "M#2026-03"),
        ("2026-03-09T04:00:00", "America/New_York", "D#2026-03-09", "M#2026-03"),
        # DST (Berlin falls back on 2026-10-25): the repeated hour stays on the same day
        ("2026-10-25T00:30:00", "Europe/Berlin", "D#2026-10-25", "M#2026-10"),
        ("2026-10-25T01:30:00", "Europe/Berlin", "D#2026-10-25", "M#2026-10"),
        ("2026-10-25T22:59:59", "Europe/Berlin", "D#2026-10-25", "M#2026-10"),
        ("2026-10-25T23:00:00", "Europe/Berlin", "D#2026-10-26", "M#2026-10"),
    ],
)
def test_period_keys_follow_the_local_date(instant: str, zone: str, daily: str, monthly: str) -> None:
    assert period_keys(utc(instant), zone) == {"daily": daily, "monthly": monthly}


def test_period_keys_refuse_a_naive_datetime() -> None:
    with pytest.raises(ValueError, match="aware"):
        period_keys(datetime(2026, 11, 21, 12), "UTC")


# -- settlement split --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reserved", "cost", "charged", "released", "absorbed"),
    [
        (10, 0, 0, 10, 0),
        (10, 4, 4, 6, 0),
        (10, 10, 10, 0, 0),
        (10, 13, 10, 0, 3),  # the customer never pays more than was reserved
    ],
)
def test_split_caps_the_charge_at_the_reservation(
    reserved: int, cost: int, charged: int, released: int, absorbed: int
) -> None:
    split = split_settlement(reserved, cost)
    assert (split.charged, split.released, split.absorbed) == (charged, released, absorbed)


@given(reserved=st.integers(1, 10**12), cost=st.integers(0, 10**12))
def test_split_always_adds_up(reserved: int, cost: int) -> None:
    split = split_settlement(reserved, cost)
    assert split.charged + split.released == reserved
    assert split.charged + split.absorbed == cost
    assert min(split.charged, split.released, split.absorbed) >= 0


@pytest.mark.parametrize(("reserved", "cost"), [(0, 0), (-1, 0), (5, -1)])
def test_split_refuses_impossible_amounts(reserved: int, cost: int) -> None:
    with pytest.raises(ValueError, match=r"positive|negative"):
        split_settlement(reserved, cost)


def pending(amount: int = 10 * USD) -> Reservation:
    return Reservation(
        reservation_id="r1",
        org_id="org_a",
        purpose="batch",
        ref="batch_1",
        amount=Money(amount),
        status="pending",
        created_at="2026-11-21T10:00:00.000Z",
    )


def test_resolve_settles_or_voids_exactly_once() -> None:
    # Given a pending reservation / When settled with a cost and, separately, voided
    settled = resolve(pending(), cost=4 * USD, at="t1", void=False)
    voided = resolve(pending(), cost=4 * USD, at="t1", void=True)
    # Then settling charges the cost and releases the rest; voiding releases all
    assert (settled.status, settled.charged, settled.released) == ("settled", Money(4 * USD), Money(6 * USD))
    assert (voided.status, voided.charged, voided.released) == ("released", Money(0), Money(10 * USD))
    # and a resolved reservation cannot be resolved again
    with pytest.raises(ValueError, match="exactly once"):
        resolve(settled, cost=1, at="t2", void=False)


def test_settlement_result_gives_the_receipt_credit_fields() -> None:
    result = SettlementResult.of(resolve(pending(), cost=4_250_000, at="t1", void=False), replayed=False)
    assert result.receipt_credits() == {
        "credit_reserved": {"currency": "usd", "amount": "10.00"},
        "credit_charged": {"currency": "usd", "amount": "4.25"},
        "credit_released": {"currency": "usd", "amount": "5.75"},
        "settled_at": "t1",
    }
    with pytest.raises(ValueError, match="not resolved"):
        SettlementResult.of(pending(), replayed=False)


def test_wallet_state_available_is_balance_less_reserved() -> None:
    assert WalletState(balance=Money(10), reserved=Money(3)).available == Money(7)


# -- the in-memory model -----------------------------------------------------------------------
def test_model_reserve_refuses_what_the_available_balance_cannot_cover() -> None:
    # Given 10 USD with 7 reserved
    wallet = Wallet()
    wallet.grant(10 * USD)
    wallet.reserve("r1", 7 * USD)
    # When 4 USD more are asked for / Then 402 with available and required, nothing changed
    with pytest.raises(PaymentRequired) as refused:
        wallet.reserve("r2", 4 * USD)
    assert refused.value.code == "insufficient_credits"
    assert refused.value.details == {"available": "3.00", "required": "4.00"}
    assert (wallet.balance, wallet.reserved, len(wallet.reservations)) == (10 * USD, 7 * USD, 1)
    # and an id is reserved once only
    with pytest.raises(DuplicateReservation):
        wallet.reserve("r1", 1)


def test_model_settlement_is_idempotent_and_feeds_the_spend_counters() -> None:
    # Given a 10 USD reservation out of 20 USD
    wallet = Wallet()
    wallet.grant(20 * USD, kind="signup_credit")
    wallet.reserve("r1", 10 * USD)
    # When it is settled at 12 USD (over the reservation), then the message repeats
    first = wallet.settle("r1", 12 * USD, period_keys=("D#2026-11-21", "M#2026-11"))
    again = wallet.settle("r1", 1 * USD, period_keys=("D#2026-11-21", "M#2026-11"))
    release = wallet.release("r1")
    # Then 10 USD is charged once, 2 USD absorbed, and the repeats change nothing
    assert (first.charged, first.released, first.absorbed, first.replayed) == (
        Money(10 * USD),
        Money(0),
        Money(2 * USD),
        False,
    )
    assert again == replace(first, replayed=True) == release
    assert (wallet.balance, wallet.reserved) == (10 * USD, 0)
    assert wallet.spend == {"D#2026-11-21": 10 * USD, "M#2026-11": 10 * USD}
    assert wallet.violations() == []
    with pytest.raises(UnknownReservation):
        wallet.release("nope")


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("grant"), st.integers(1, 50 * USD)),
        st.tuples(st.just("reserve"), st.integers(1, 80 * USD)),
        st.tuples(st.just("settle"), st.integers(0, 100 * USD)),
        st.tuples(st.just("release"), st.just(0)),
    ),
    max_size=60,
)


@given(ops=OPS)
def test_model_keeps_every_invariant(ops: list[tuple[str, int]]) -> None:
    # Given any sequence of grants, reservations, settlements and releases on the model
    wallet = Wallet()
    open_ids: list[str] = []
    for n, (op, amount) in enumerate(ops):
        if op == "grant":
            wallet.grant(amount)
        elif op == "reserve":
            try:
                wallet.reserve(f"r{n}", amount)
                open_ids.append(f"r{n}")
            except PaymentRequired:
                assert amount > wallet.available
        elif open_ids:
            target = open_ids.pop(0)
            if op == "settle":
                wallet.settle(target, amount, period_keys=("D#x", "M#x"))
            else:
                wallet.release(target)
        # Then after every step the ledger is consistent
        assert wallet.violations() == []
        assert wallet.balance >= 0 and wallet.available >= 0


# -- the invariant checker catches each break ------------------------------------------------
def consistent_wallet() -> Wallet:
    wallet = Wallet()
    wallet.grant(20 * USD)
    wallet.reserve("r1", 5 * USD)
    wallet.reserve("r2", 5 * USD)
    wallet.settle("r2", 3 * USD, period_keys=("D#d", "M#m"))
    assert wallet.violations() == []
    return wallet


def violations_of(wallet: Wallet, **overrides: object) -> list[str]:
    figures: dict[str, object] = {
        "balance": wallet.balance,
        "reserved": wallet.reserved,
        "available": wallet.available,
        "reservations": list(wallet.reservations.values()),
        "entries": list(wallet.entries),
        "spend": dict(wallet.spend),
    }
    figures.update(overrides)
    return ledger_violations(**figures)  # type: ignore[arg-type]


def test_checker_catches_a_wrong_available_or_reserved() -> None:
    wallet = consistent_wallet()
    assert any("available" in p for p in violations_of(wallet, available=wallet.available + 1))
    assert any("pending" in p for p in violations_of(wallet, reserved=wallet.reserved + 1))
    assert any("negative" in p for p in violations_of(wallet, balance=-1, reserved=0, available=-1))


def test_checker_catches_a_double_settlement() -> None:
    wallet = consistent_wallet()
    doubled = [*wallet.entries, Entry("charge", 3 * USD, "r2")]
    assert any("more than once" in p for p in violations_of(wallet, entries=doubled))


def test_checker_catches_unexplained_balance_and_parts_that_do_not_add_up() -> None:
    wallet = consistent_wallet()
    assert any("explain a balance" in p for p in violations_of(wallet, balance=wallet.balance + 1))
    broken = replace(wallet.reservations["r2"], released=Money(1))
    reservations = [wallet.reservations["r1"], broken]
    assert any("charged" in p for p in violations_of(wallet, reservations=reservations))


def test_checker_catches_spend_counters_that_miss_a_charge() -> None:
    wallet = consistent_wallet()
    assert any("spend counters" in p for p in violations_of(wallet, spend={"D#d": 3 * USD}))
