"""`billing.limit_reached` fires when charged spend reaches the limit, not on in-flight
estimates, and its email says new batches are refused only when a hard limit's spend itself
reached it (docs/billing-alerts.md)."""

from __future__ import annotations

from datetime import UTC, datetime

from batchroute.domain.billing.alerts import LIMIT_REACHED, AlertData, BillingEvent, alert_period, due_alerts
from batchroute.domain.billing.controls import BillingControls, Mode
from batchroute.domain.billing.ledger import WalletState
from batchroute.money import Money
from batchroute.services.billing.alerts import email_text

AT = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
BLOCKED = "New batches are refused"


def usd(amount: str) -> Money:
    return Money.usd(amount)


def hard_limit(amount: str, mode: Mode = "hard") -> BillingControls:
    return BillingControls(
        org_id="org_a", limit_enabled=True, limit_period="monthly", limit_amount=usd(amount), limit_mode=mode
    )


def wallet(reserved: str) -> WalletState:
    return WalletState(balance=usd("100"), reserved=usd(reserved))


def test_in_flight_estimates_reaching_the_limit_raise_no_limit_reached() -> None:
    # Given a hard $10 limit with nothing charged and a $10 estimate in flight
    rules = hard_limit("10")
    due = due_alerts(rules, wallet=wallet("10"), spent=usd("0"), period=alert_period(rules, AT))
    # Then nothing is due: the estimate may settle lower and give the room back
    assert [a for a in due if a.event_type == LIMIT_REACHED] == []


def test_charged_spend_reaching_the_limit_raises_limit_reached_once_per_period() -> None:
    rules = hard_limit("10")
    period = alert_period(rules, AT)
    (alert,) = due_alerts(rules, wallet=wallet("0"), spent=usd("10"), period=period)
    assert alert.event_type == LIMIT_REACHED and alert.once_key == "limit_reached#M#2026-11"
    assert (alert.details["spent"], alert.details["in_flight"], alert.details["mode"]) == (
        "10.00",
        "0.00",
        "hard",
    )


def _email(details: AlertData) -> str:
    event = BillingEvent("evt_1", "org_a", LIMIT_REACHED, "2026-11-21T12:00:00.000Z", details)
    return email_text(event)[1]


def test_the_email_says_batches_are_refused_only_when_a_hard_limits_spend_reached_it() -> None:
    reached: AlertData = {
        "period": "monthly",
        "limit": "10.00",
        "spent": "10.00",
        "in_flight": "0.00",
        "mode": "hard",
    }
    assert BLOCKED in _email(reached)
    # Not for spend plus in-flight estimates (events recorded before this rule), nor a soft limit
    assert BLOCKED not in _email({**reached, "spent": "0.00", "in_flight": "10.00"})
    assert BLOCKED not in _email({**reached, "mode": "soft"})
