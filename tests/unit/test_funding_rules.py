"""Funding at submit over an in-memory ledger: the balance check (with or without a limit),
hard limits (402 for batches, 403 for chat, details shape), soft limits (flag only), and the
spend period taken in the controls' zone."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.billing.ledger import ReservationTerms, WalletState
from batchroute.domain.billing.spending_limit import LimitGuard
from batchroute.errors import Forbidden, PaymentRequired, Unavailable
from batchroute.money import Money
from batchroute.services.billing.funding import FUNDING_ATTEMPTS, Funding, Funds, decide, funded
from batchroute.transactions import TransactItem

ORG = "org_a"
NOW = datetime(2026, 11, 21, 10, 30, tzinfo=UTC)


class MemoryLedger:
    def __init__(self, balance: str, reserved: str = "0", spend: dict[str, str] | None = None) -> None:
        self.wallet = WalletState(balance=Money.usd(balance), reserved=Money.usd(reserved))
        self.spend = {k: Money.usd(v) for k, v in (spend or {}).items()}
        self.asked: list[str] = []

    def state(self, org_id: str) -> WalletState:
        return self.wallet

    def period_spend(self, org_id: str, period_key: str) -> Money:
        self.asked.append(period_key)
        return self.spend.get(period_key, Money.zero())


def limit(mode: str, amount: str = "100", period: str = "daily", zone: str = "UTC") -> BillingControls:
    return BillingControls(
        org_id=ORG,
        configured=True,
        limit_enabled=True,
        limit_period=period,  # type: ignore[arg-type]
        limit_amount=Money.usd(amount),
        limit_mode=mode,  # type: ignore[arg-type]
        limit_timezone=zone,
    )


def test_no_limit_accepts_what_the_balance_covers() -> None:
    # Given 50 USD with 10 in flight and no limit / When 40 USD is estimated
    decision = Funding(MemoryLedger("50", reserved="10")).check_funding(
        ORG, Money.usd("40"), BillingControls(org_id=ORG), now=NOW
    )
    # Then it is accepted, with the figures it was judged on
    assert (decision.available, decision.in_flight, decision.required) == (
        Money.usd("40"),
        Money.usd("10"),
        Money.usd("40"),
    )
    assert decision.limit_reached is False and decision.limit is None


@pytest.mark.parametrize(
    ("surface", "code"), [("batch", "insufficient_credits"), ("chat", "insufficient_funds")]
)
def test_available_below_the_estimate_is_a_402_even_without_a_limit(surface: str, code: str) -> None:
    # Given 50 USD of which 10 in flight / When 40.000001 USD is estimated
    with pytest.raises(PaymentRequired) as refused:
        Funding(MemoryLedger("50", reserved="10")).check_funding(
            ORG,
            Money.usd("40.000001"),
            None,
            now=NOW,
            surface=surface,  # type: ignore[arg-type]
        )
    # Then 402 with the available and required amounts as decimal strings
    assert refused.value.code == code
    assert refused.value.details == {"available": "40.00", "required": "40.000001"}


def test_hard_limit_refuses_a_batch_with_402_and_the_limit_details() -> None:
    # Given a hard daily limit of 100 USD, 60 spent today, 30 in flight
    ledger = MemoryLedger("1000", reserved="30", spend={"D#2026-11-21": "60"})
    # When a batch estimated at 10.5 USD is submitted
    with pytest.raises(PaymentRequired) as refused:
        Funding(ledger).check_funding(ORG, Money.usd("10.5"), limit("hard"), now=NOW)
    # Then 402 insufficient_credits with limit, period, spent, projected
    assert refused.value.code == "insufficient_credits"
    assert refused.value.details == {
        "limit": "100.00",
        "period": "daily",
        "spent": "60.00",
        "projected": "100.50",
    }


def test_hard_limit_refuses_chat_with_403_spending_limit_reached() -> None:
    ledger = MemoryLedger("1000", spend={"M#2026-11": "99.99"})
    with pytest.raises(Forbidden) as refused:
        Funding(ledger).check_funding(
            ORG, Money.usd("0.02"), limit("hard", period="monthly"), now=NOW, surface="chat"
        )
    assert refused.value.code == "spending_limit_reached"
    assert refused.value.details == {
        "limit": "100.00",
        "period": "monthly",
        "spent": "99.99",
        "projected": "100.01",
    }


def test_hard_limit_accepts_up_to_the_limit_and_flags_it_reached() -> None:
    # Given 60 spent and 30 in flight under a hard 100 USD limit / When exactly 10 is estimated
    ledger = MemoryLedger("1000", reserved="30", spend={"D#2026-11-21": "60"})
    decision = Funding(ledger).check_funding(ORG, Money.usd("10"), limit("hard"), now=NOW)
    # Then accepted; the limit is reached, so the next submit would be refused
    assert decision.limit_reached is True
    assert (decision.spent, decision.projected, decision.period_key) == (
        Money.usd("60"),
        Money.usd("100"),
        "D#2026-11-21",
    )


@pytest.mark.parametrize(("estimate", "reached"), [("5", False), ("40", True), ("5000", True)])
def test_soft_limit_never_refuses_but_flags(estimate: str, reached: bool) -> None:
    ledger = MemoryLedger("10000", reserved="30", spend={"D#2026-11-21": "60"})
    decision = Funding(ledger).check_funding(ORG, Money.usd(estimate), limit("soft"), now=NOW, surface="chat")
    assert decision.limit_reached is reached


def test_period_spend_is_read_for_the_local_period_of_the_controls_zone() -> None:
    # Given a hard daily limit in UTC+14 (10:30Z on the 21st is already the 22nd there)
    ledger = MemoryLedger("1000", spend={"D#2026-11-21": "100"})
    # When funding is checked / Then the 22nd's spend (nothing yet) is what counts
    decision = Funding(ledger).check_funding(
        ORG, Money.usd("1"), limit("hard", zone="Pacific/Kiritimati"), now=NOW
    )
    assert ledger.asked == ["D#2026-11-22", "D#2026-11-23"]  # and the next day's, a hard limit's
    assert decision.spent == Money.zero()


def test_a_disabled_or_incomplete_limit_is_ignored() -> None:
    ledger = MemoryLedger("1000", spend={"D#2026-11-21": "500"})
    disabled = BillingControls(org_id=ORG, limit_enabled=False, limit_mode="hard")
    assert Funding(ledger).check_funding(ORG, Money.usd("1"), disabled, now=NOW).limit is None
    assert ledger.asked == []


def test_decide_refuses_a_negative_estimate() -> None:
    wallet = WalletState(balance=Money.usd("1"), reserved=Money.zero())
    with pytest.raises(ValueError, match="negative"):
        decide(wallet=wallet, estimate=Money(-1), controls=None, spent=None, period_key=None)


def test_a_hard_decision_carries_the_guard_its_write_must_assert() -> None:
    # Given 60 spent and 30 in flight under a hard 100 USD limit (controls at version 7)
    ledger = MemoryLedger("1000", reserved="30", spend={"D#2026-11-21": "60"})
    controls = replace(limit("hard"), version=7)
    # When 4 USD is estimated
    decision = Funding(ledger).check_funding(ORG, Money.usd("4"), controls, now=NOW)
    # Then the reservation may only be written while at most 36 USD is in flight, the day's
    # spend is still 60 and the controls are still version 7
    assert decision.guard == LimitGuard(
        hard=True,
        version=7,
        limit_micros=100_000_000,
        period="daily",
        period_key="D#2026-11-21",
        spent_micros=60_000_000,
    )
    assert decision.guard.reserved_cap(Money.usd("4")) == 36_000_000


@pytest.mark.parametrize("controls", [None, BillingControls(org_id=ORG), limit("soft")])
def test_without_a_hard_limit_the_guard_asserts_there_is_none(controls: BillingControls | None) -> None:
    decision = Funding(MemoryLedger("50")).check_funding(ORG, Money.usd("1"), controls, now=NOW)
    assert decision.guard == LimitGuard() and decision.guard.reserved_cap(Money.usd("1")) is None


def test_a_hold_whose_commit_is_refused_is_decided_again_until_it_commits() -> None:
    answers = iter([None, None, "held"])
    calls: list[int] = []

    def attempt() -> str | None:
        calls.append(1)
        return next(answers)

    assert funded(attempt, what="batch") == "held" and len(calls) == 3


def test_a_wallet_that_keeps_moving_is_a_retryable_503_naming_what_was_funded() -> None:
    calls: list[int] = []

    def attempt() -> None:
        calls.append(1)

    with pytest.raises(Unavailable) as refused:
        funded(attempt, what="regression run")
    assert len(calls) == FUNDING_ATTEMPTS
    assert refused.value.code == "funding_contended" and refused.value.retry_after_seconds == 1
    assert refused.value.message == "The wallet kept changing while this regression run was funded; retry."


# -- Funds: the one way a service holds credit ---------------------------------------------------


class HoldingLedger(MemoryLedger):
    """MemoryLedger that also answers the reserve items a hold is written with."""

    def reserve_items(
        self, org_id: str, terms: ReservationTerms, *, at: str, reserved_at_most: int | None = None
    ) -> list[TransactItem]:
        return [
            {"Put": {"TableName": "ledger", "Item": {"id": terms.reservation_id, "cap": reserved_at_most}}}
        ]


class GuardChecks:
    def items(self, org_id: str, guard: LimitGuard) -> list[TransactItem]:
        return (
            [{"ConditionCheck": {"TableName": "controls", "Key": {"version": guard.version}}}]
            if guard.hard
            else []
        )


class Watch:
    def __init__(self) -> None:
        self.moved_for: list[tuple[str, BillingControls | None]] = []

    def moved(self, org_id: str, *, at: datetime, controls: BillingControls | None = None) -> None:
        self.moved_for.append((org_id, controls))


def test_a_hold_under_a_hard_limit_is_bounded_by_the_limits_room_and_carries_its_checks() -> None:
    # Given 100 USD, 30 spent today under a hard daily limit of 50
    ledger = HoldingLedger("100", spend={"D#2026-11-21": "30"})
    funds = Funds(ledger, None, GuardChecks(), None)  # type: ignore[arg-type]
    terms = ReservationTerms(reservation_id="res_1", amount=Money.usd("15"), purpose="batch", ref="b1")
    # When a 15 USD hold is decided
    held = funds.guarded(terms, limit("hard", "50"), org_id=ORG, now=NOW)
    # Then the reservation may take the wallet's in-flight credit to 50 - 30 - 15 at most
    assert held.decision.guard.hard and held.decision.required == Money.usd("15")
    assert held.reservation[0]["Put"]["Item"]["cap"] == Money.usd("5").micros
    assert held.limit_checks == [{"ConditionCheck": {"TableName": "controls", "Key": {"version": 0}}}]


def test_a_hold_past_a_hard_limit_is_refused_before_any_item_is_built() -> None:
    funds = Funds(HoldingLedger("100", spend={"D#2026-11-21": "40"}), None, GuardChecks(), None)  # type: ignore[arg-type]
    terms = ReservationTerms(reservation_id="res_1", amount=Money.usd("15"), purpose="regression", ref="r1")
    with pytest.raises(Forbidden) as refused:
        funds.guarded(terms, limit("hard", "50"), org_id=ORG, now=NOW, surface="regression")
    assert refused.value.code == "spending_limit_reached"


def test_the_watch_hears_of_a_move() -> None:
    watch = Watch()
    controls = BillingControls(org_id=ORG)
    Funds(MemoryLedger("1"), None, None, watch=watch).moved(ORG, at=NOW, controls=controls)  # type: ignore[arg-type]
    assert watch.moved_for == [(ORG, controls)]


def test_a_hard_limits_guard_is_the_limit_as_read() -> None:
    guard = LimitGuard.of_hard_limit(
        3, Money.usd("50"), "daily", "D#2026-11-21", spent=Money.usd("30"), next_spent=Money.usd("35")
    )
    assert guard == LimitGuard(
        True, 3, Money.usd("50").micros, "daily", "D#2026-11-21", 30_000_000, 35_000_000
    )
    assert guard.reserved_cap(Money.usd("10")) == Money.usd("5").micros  # the larger spend counts
