"""Funding decisions over the real ledger on moto: period spend recorded at settlement (in the
controls' zone) and in-flight reservations both count against a hard limit; the 402 details,
the chat 403, the soft-limit flag, and the balance check without any limit."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.clock import isoformat
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.billing.ledger import ReservationTerms, period_keys
from batchroute.domain.billing.usage import ReservationCharge
from batchroute.errors import Forbidden, PaymentRequired
from batchroute.money import Money
from batchroute.services.billing.funding import Funding
from batchroute_tools.local.provision import LocalStack
from functions.api.auth import identity_store
from tests.integration.principals import ledger_store, new_org

ZONE = "America/Los_Angeles"  # UTC-8 in November
# 2026-11-21 23:30 in Los Angeles, then 00:30 on the 22nd there
LATE_ON_21ST = datetime(2026, 11, 22, 7, 30, tzinfo=UTC)
EARLY_ON_22ND = datetime(2026, 11, 22, 8, 30, tzinfo=UTC)


@pytest.fixture
def ledger(local_aws: LocalStack) -> LedgerStore:
    identity_store.cache_clear()
    return ledger_store()


def controls(org_id: str, mode: str, amount: str = "50", period: str = "daily") -> BillingControls:
    return BillingControls(
        org_id=org_id,
        configured=True,
        limit_enabled=True,
        limit_period=period,  # type: ignore[arg-type]
        limit_amount=Money.usd(amount),
        limit_mode=mode,  # type: ignore[arg-type]
        limit_timezone=ZONE,
    )


def spend(ledger: LedgerStore, org_id: str, rid: str, usd: str, at: datetime) -> None:
    """Reserve and settle `usd`, counted in the controls' periods of `at`."""
    ledger.reserve(
        org_id,
        ReservationTerms(reservation_id=rid, amount=Money.usd(usd), purpose="batch", ref=rid),
        at=isoformat(at),
    )
    ledger.settle(
        org_id, ReservationCharge(rid, Money.usd(usd), isoformat(at), tuple(period_keys(at, ZONE).values()))
    )


def test_hard_limit_counts_local_day_spend_and_in_flight(ledger: LedgerStore) -> None:
    # Given a hard daily limit of 50 USD (Los Angeles days), 30 spent late on the 21st there,
    # and 15 USD in flight
    org_id = new_org(credit_usd="500").org_id
    spend(ledger, org_id, "b1", "30", LATE_ON_21ST)
    ledger.reserve(
        org_id,
        ReservationTerms(reservation_id="b2", amount=Money.usd("15"), purpose="batch", ref="b2"),
        at="t",
    )
    funding, limit = Funding(ledger), controls(org_id, "hard")
    # When a 5.01 USD batch is submitted the same local day
    with pytest.raises(PaymentRequired) as refused:
        funding.check_funding(org_id, Money.usd("5.01"), limit, now=LATE_ON_21ST)
    # Then 402 with the limit details: 30 spent + 15 in flight + 5.01
    assert refused.value.code == "insufficient_credits"
    assert refused.value.details == {
        "limit": "50.00",
        "period": "daily",
        "spent": "30.00",
        "projected": "50.01",
    }
    # and exactly 5 USD still fits, reaching the limit
    assert funding.check_funding(org_id, Money.usd("5"), limit, now=LATE_ON_21ST).limit_reached
    # When the local day turns (UTC is still the 22nd throughout) / Then the spend restarts
    decision = funding.check_funding(org_id, Money.usd("30"), limit, now=EARLY_ON_22ND)
    assert (decision.spent, decision.in_flight, decision.projected, decision.period_key) == (
        Money(0),
        Money.usd("15"),
        Money.usd("45"),
        "D#2026-11-22",
    )


def test_monthly_hard_limit_refuses_chat_with_403(ledger: LedgerStore) -> None:
    org_id = new_org(credit_usd="500").org_id
    spend(ledger, org_id, "b1", "49.5", LATE_ON_21ST)
    limit = controls(org_id, "hard", period="monthly")
    with pytest.raises(Forbidden) as refused:
        Funding(ledger).check_funding(org_id, Money.usd("1"), limit, now=EARLY_ON_22ND, surface="chat")
    assert refused.value.code == "spending_limit_reached"
    assert refused.value.details == {
        "limit": "50.00",
        "period": "monthly",
        "spent": "49.50",
        "projected": "50.50",
    }


def test_soft_limit_accepts_and_flags(ledger: LedgerStore) -> None:
    org_id = new_org(credit_usd="500").org_id
    spend(ledger, org_id, "b1", "60", LATE_ON_21ST)
    decision = Funding(ledger).check_funding(
        org_id, Money.usd("1"), controls(org_id, "soft"), now=LATE_ON_21ST
    )
    assert decision.limit_reached and decision.projected == Money.usd("61")


@pytest.mark.parametrize(
    ("surface", "code"), [("batch", "insufficient_credits"), ("chat", "insufficient_funds")]
)
def test_balance_below_the_estimate_is_a_402_without_any_limit(
    ledger: LedgerStore, surface: str, code: str
) -> None:
    # Given 20 USD with 12 reserved
    org_id = new_org(credit_usd="20").org_id
    ledger.reserve(
        org_id,
        ReservationTerms(reservation_id="b1", amount=Money.usd("12"), purpose="batch", ref="b1"),
        at="t",
    )
    # When 8.5 USD is asked for with no controls saved / Then 402 with available and required
    with pytest.raises(PaymentRequired) as refused:
        Funding(ledger).check_funding(
            org_id,
            Money.usd("8.5"),
            BillingControls(org_id=org_id),
            now=LATE_ON_21ST,
            surface=surface,  # type: ignore[arg-type]
        )
    assert (refused.value.code, refused.value.details) == (code, {"available": "8.00", "required": "8.50"})
