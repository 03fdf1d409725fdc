"""Deadline rescue's money as it stands (services/workflow/rescue.py): the batch's estimated
cost that the reservation's headroom is measured against, and allow_overage's second hold:
its size (the cap, the wallet, the hard limit) and how it settles with the batch."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchroute.catalog import builtin_catalog
from batchroute.clock import FixedClock
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.billing.ledger import Reservation, SettlementResult, Wallet, WalletState, combined
from batchroute.domain.billing.usage import (
    ReservationCharge,
    UsageCharge,
    UsageLine,
    costs_only,
    usage_counters,
)
from batchroute.domain.catalog.pricing import TokenUsage
from batchroute.domain.routing.lane_plan import new_lane_record
from batchroute.domain.routing.rescue import item_micros, overage_room
from batchroute.errors import Forbidden, PaymentRequired
from batchroute.money import Money
from batchroute.services.billing.funding import Funding, Funds
from batchroute.services.workflow.rescue import _estimated_cost
from batchroute.services.workflow.settlement import Settlement

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
    old = _lane("01-a", 0, 10, status="failed", completed=2, handed_over=3, usage=TokenUsage(200, 100))
    successor = _lane("01f1-b", 2, 10)
    per_item = item_micros(Decimal(100), Decimal(50), PRICES, Decimal(0))
    estimate = _estimated_cost([old, successor], TOKENS, Decimal(0), Decimal("0.01"))
    # the answered usage once, the 8 open items once (not the 5 never started twice), two lanes' fee
    assert estimate == Money(2 * per_item + 8 * per_item) + Money.usd("0.02")
    # a lane that delivered nothing and owns nothing costs no lane fee
    nothing = _lane("02-c", 0, 4, status="failed", handed_over=4)
    assert _estimated_cost([nothing], TOKENS, Decimal(0), Decimal("0.01")) == Money(0)


# -- allow_overage: the second hold's size (docs/batches.md, "Deadline rescue") ---------------

ORG = "org_a"
NOW = datetime(2026, 11, 21, 10, 30, tzinfo=UTC)
micros = st.integers(min_value=0, max_value=50_000_000)


class _Wallet:
    """An in-memory wallet with one day's spend (what Funding reads)."""

    def __init__(self, balance: int, reserved: int, spent: int) -> None:
        self.wallet = WalletState(balance=Money(balance), reserved=Money(reserved))
        self.spent = Money(spent)

    def state(self, org_id: str) -> WalletState:
        return self.wallet

    def period_spend(self, org_id: str, period_key: str) -> Money:
        return self.spent if period_key == "D#2026-11-21" else Money.zero()


def _hard(limit_micros: int, mode: str = "hard") -> BillingControls:
    return BillingControls(
        org_id=ORG,
        configured=True,
        limit_enabled=True,
        limit_period="daily",
        limit_amount=Money(limit_micros),
        limit_mode=mode,  # type: ignore[arg-type]
    )


def test_the_overage_room_is_the_cap_less_what_is_held_within_the_wallet_and_the_limit() -> None:
    cap = Money.usd("5")
    # the cap less the batch's earlier holds, when the wallet and the limit have more room
    assert overage_room(cap=cap, held=Money.usd("2"), available=Money.usd("9"), limit_room=None) == Money.usd(
        "3"
    )
    # the wallet's available credit when it is shorter
    assert overage_room(cap=cap, held=Money(0), available=Money.usd("1.5"), limit_room=None) == Money.usd(
        "1.5"
    )
    # the hard limit's room when that is shorter still
    room = overage_room(cap=cap, held=Money(0), available=Money.usd("9"), limit_room=Money.usd("0.25"))
    assert room == Money.usd("0.25")
    # never below nothing: a limit already passed, a cap already used
    assert overage_room(
        cap=cap, held=Money(0), available=Money.usd("9"), limit_room=Money.usd("-1")
    ) == Money(0)
    assert overage_room(cap=cap, held=Money.usd("6"), available=Money.usd("9"), limit_room=None) == Money(0)


@given(
    cap=micros, held=micros, balance=micros, reserved=micros, spent=micros, limit=micros, hard=st.booleans()
)
def test_a_hold_of_at_most_the_room_passes_batch_creates_own_check_and_one_micro_more_does_not_fit(
    cap: int, held: int, balance: int, reserved: int, spent: int, limit: int, hard: bool
) -> None:
    # Given a wallet (its in-flight credit at most its balance), a day's spend and a limit
    reserved = min(reserved, balance)
    ledger = _Wallet(balance, reserved, spent)
    controls = _hard(limit, "hard" if hard else "soft")
    wallet = ledger.state(ORG)
    # When the room of an overage hold is taken with the limit's room Funding computes
    limit_room = Funding(ledger).limit_room(ORG, controls, wallet, now=NOW)
    assert (limit_room is None) == (not hard)
    room = overage_room(cap=Money(cap), held=Money(held), available=wallet.available, limit_room=limit_room)
    # Then it is never above the cap left, the available credit or the limit's room
    assert 0 <= room.micros <= max(0, min(cap - held, balance - reserved))
    if hard:
        assert spent + reserved + room.micros <= limit or room.micros == 0
    # and batch create's check (the one the hold is taken with) accepts it
    if room.micros > 0:
        Funding(ledger).check_funding(ORG, room, controls, now=NOW)
    # and when the wallet or the limit is what bounds it, one micro more is refused there
    if room.micros < cap - held:
        with pytest.raises((PaymentRequired, Forbidden)):
            Funding(ledger).check_funding(ORG, room + Money(1), controls, now=NOW)


def test_the_batch_and_its_overage_holds_settle_as_one() -> None:
    def settled(rid: str, amount: str, charged: str, *, replayed: bool = False) -> SettlementResult:
        return SettlementResult(
            reservation_id=rid,
            status="settled",
            reserved=Money.usd(amount),
            charged=Money.usd(charged),
            released=Money.usd(amount) - Money.usd(charged),
            absorbed=Money(0),
            settled_at="t",
            replayed=replayed,
        )

    whole = combined([settled("res_b", "2", "2"), settled("res_b-overage-01", "1", "0.4")])
    assert (whole.reservation_id, whole.reserved, whole.charged, whole.released) == (
        "res_b",
        Money.usd("3"),
        Money.usd("2.4"),
        Money.usd("0.6"),
    )
    assert whole.reserved == whole.charged + whole.released and whole.replayed is False
    again = combined([settled("res_b", "2", "2", replayed=True), settled("o", "1", "0.4", replayed=True)])
    assert again.replayed is True


def test_an_overage_hold_settles_with_the_costs_but_counts_the_tokens_once() -> None:
    usage = UsageCharge(
        day="2026-11-21",
        lines=(UsageLine("m", "a", cost=Decimal(3), input_tokens=10, output_tokens=5, batch_items=2),),
    )
    (counter,) = usage_counters(costs_only(usage), 700)
    assert counter.figures.cost_micros == 700 and counter.figures.input_tokens == 0
    assert counter.figures.batch_items == 0 and counter.figures.output_tokens == 0


class _ModelLedger:
    """The in-memory reference wallet behind Settle's ledger calls."""

    def __init__(self, wallet: Wallet) -> None:
        self.wallet = wallet

    def settle(self, org_id: str, settled: ReservationCharge, **_: object) -> SettlementResult:
        return self.wallet.settle(
            settled.reservation_id, settled.charge.micros, at="t", period_keys=("D#2026-11-21", "M#2026-11")
        )

    def reservation(self, org_id: str, reservation_id: str) -> Reservation | None:
        return self.wallet.reservations.get(reservation_id)


@given(
    reserved=st.integers(min_value=1, max_value=10_000),
    holds=st.lists(st.integers(min_value=1, max_value=10_000), min_size=1, max_size=3),
    cost=st.integers(min_value=0, max_value=40_000),
)
def test_settle_charges_the_reservation_first_then_each_overage_hold_exactly_once(
    reserved: int, holds: list[int], cost: int
) -> None:
    # Given a batch's reservation and the overage holds its rescues took, in that order
    wallet = Wallet(org_id=ORG)
    wallet.grant(100_000)
    wallet.reserve("res_b", reserved, ref="b")
    ids = [f"res_b-overage-0{n}" for n in range(len(holds))]
    for hold_id, amount in zip(ids, holds, strict=True):
        wallet.reserve(hold_id, amount, purpose="rescue_overage", ref="b")
    batch = BatchRecord(
        batch_id="b",
        org_id=ORG,
        state="finalizing",
        created_at="t",
        reservation_id="res_b",
        reserved_micros=reserved,
        overage_hold_ids=ids,
        overage_held_micros=sum(holds),
    )
    settlement = Settlement(
        records=None,  # type: ignore[arg-type]
        funds=Funds(_ModelLedger(wallet), None, None, None),  # type: ignore[arg-type]
        artifacts=None,  # type: ignore[arg-type]
        fees=builtin_catalog().fees,
        clock=FixedClock(NOW),
        work_orders=None,  # type: ignore[arg-type]
        references=None,  # type: ignore[arg-type]
    )
    usage = UsageCharge(day="2026-11-21", lines=())
    # When Settle charges the batch's cost
    charged = settlement._charge(batch, ORG, Money(cost), BillingControls(org_id=ORG), NOW, usage)
    # Then the holds settle as one: reserved = charged + released, the charge capped at them
    assert charged is not None
    whole, total = charged.result, reserved + sum(holds)
    assert whole.reserved == Money(total) and whole.reserved == whole.charged + whole.released
    assert whole.charged == Money(min(cost, total)) and whole.absorbed == Money(max(0, cost - total))
    # the batch's reservation first, each hold only beyond what came before it
    assert wallet.reservations["res_b"].charged == Money(min(cost, reserved))
    before = reserved
    for hold_id, amount in zip(ids, holds, strict=True):
        assert charged.holds[hold_id].charged == Money(max(0, min(cost - before, amount)))
        before += amount
    assert wallet.violations() == [] and wallet.reserved == 0
    # And a repeated Settle replays every one of them: nothing moves twice
    entries = list(wallet.entries)
    again = settlement._charge(batch, ORG, Money(cost), BillingControls(org_id=ORG), NOW, usage)
    assert again is not None and again.result == replace(whole, replayed=True)
    assert wallet.entries == entries
