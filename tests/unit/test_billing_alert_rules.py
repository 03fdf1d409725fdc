"""The pure billing alert rules (domain/billing/alerts.py) and the alert emails' text."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from batchroute.domain.billing.alerts import (
    LIMIT_REACHED,
    THRESHOLD_CROSSED,
    BillingEvent,
    alert_period,
    due_alerts,
    low_balance_alert,
    low_balance_step,
    needs_spend,
    rearm_level,
)
from batchroute.domain.billing.controls import BillingControls, Threshold
from batchroute.domain.billing.ledger import WalletState
from batchroute.money import Money
from batchroute.services.billing.alerts import email_text

AT = datetime(2026, 11, 21, 3, 0, tzinfo=UTC)  # Nov 20, 22:00 in New York


def usd(text: str) -> Money:
    return Money.usd(text)


def wallet(balance: str, reserved: str = "0") -> WalletState:
    return WalletState(balance=usd(balance), reserved=usd(reserved))


def controls(**fields: object) -> BillingControls:
    return BillingControls(org_id="org_x", configured=True, **fields)  # type: ignore[arg-type]


def test_the_alert_period_is_the_limit_period_else_monthly_in_the_limit_zone() -> None:
    daily = alert_period(controls(limit_period="daily", limit_timezone="America/New_York"), AT)
    assert (daily.period, daily.key, daily.start) == ("daily", "D#2026-11-20", "2026-11-20")
    monthly = alert_period(controls(), AT)
    assert (monthly.period, monthly.key, monthly.start, monthly.timezone) == (
        "monthly",
        "M#2026-11",
        "2026-11-01",
        "UTC",
    )


@pytest.mark.parametrize(
    ("threshold", "balance", "spent", "fires"),
    [
        (Threshold("balance_below", amount=usd("5")), "5", "0", False),  # not below: equal
        (Threshold("balance_below", amount=usd("5")), "4.999999", "0", True),
        (Threshold("spend_above", amount=usd("5")), "100", "5", False),  # not above: equal
        (Threshold("spend_above", amount=usd("5")), "100", "5.000001", True),
        (Threshold("pct_of_limit", percent=80), "100", "7.999999", False),
        (Threshold("pct_of_limit", percent=80), "100", "8", True),  # reached
        (Threshold("pct_of_limit", percent=0), "100", "0", False),  # nothing spent yet
        (Threshold("pct_of_limit", percent=0), "100", "0.000001", True),
    ],
)
def test_each_threshold_holds_exactly_at_its_edge(
    threshold: Threshold, balance: str, spent: str, fires: bool
) -> None:
    rules = controls(
        limit_enabled=True, limit_period="monthly", limit_amount=usd("10"), alert_thresholds=(threshold,)
    )
    period = alert_period(rules, AT)
    found = [
        a
        for a in due_alerts(rules, wallet=wallet(balance), spent=usd(spent), period=period)
        if a.event_type == THRESHOLD_CROSSED
    ]
    assert bool(found) is fires
    if fires:
        assert found[0].once_key.startswith(f"threshold#{threshold.type}#") and found[0].once_key.endswith(
            "#M#2026-11"
        )


@pytest.mark.parametrize(
    ("spent", "observed"), [("8", "80.00"), ("8.903444", "89.03"), ("9.999999", "99.99")]
)
def test_a_percent_of_the_limit_is_observed_with_two_decimals(spent: str, observed: str) -> None:
    rules = controls(
        limit_enabled=True,
        limit_period="monthly",
        limit_amount=usd("10"),
        alert_thresholds=(Threshold("pct_of_limit", percent=80),),
    )
    period = alert_period(rules, AT)
    (alert,) = [
        a
        for a in due_alerts(rules, wallet=wallet("100"), spent=usd(spent), period=period)
        if a.event_type == THRESHOLD_CROSSED
    ]
    assert alert.details["observed"] == observed


def test_debounce_keys_name_the_threshold_value_and_the_period() -> None:
    rules = controls(
        limit_period="daily",
        alert_thresholds=(
            Threshold("spend_above", amount=usd("1")),
            Threshold("spend_above", amount=usd("2")),
        ),
    )
    period = alert_period(rules, AT)
    keys = [a.once_key for a in due_alerts(rules, wallet=wallet("1"), spent=usd("3"), period=period)]
    assert keys == ["threshold#spend_above#1.00#D#2026-11-21", "threshold#spend_above#2.00#D#2026-11-21"]


def test_limit_reached_counts_charged_spend_and_keys_on_the_limit_period() -> None:
    rules = controls(limit_enabled=True, limit_period="daily", limit_amount=usd("10"), limit_mode="hard")
    period = alert_period(rules, AT)
    # In-flight reservations alone do not reach the limit (they usually settle lower)
    assert due_alerts(rules, wallet=wallet("50", reserved="3"), spent=usd("7"), period=period) == []
    assert due_alerts(rules, wallet=wallet("50", reserved="3"), spent=usd("9.99"), period=period) == []
    (alert,) = due_alerts(rules, wallet=wallet("50", reserved="3"), spent=usd("10"), period=period)
    assert alert.event_type == LIMIT_REACHED and alert.once_key == "limit_reached#D#2026-11-21"
    assert alert.details["spent"] == "10.00" and alert.details["in_flight"] == "3.00"
    assert alert.details["projected"] == "13.00" and alert.details["mode"] == "hard"
    # A disabled limit never reports, and pct_of_limit needs one
    off = controls(
        limit_period="daily", limit_amount=usd("10"), alert_thresholds=(Threshold("pct_of_limit", percent=1),)
    )
    assert due_alerts(off, wallet=wallet("0"), spent=usd("100"), period=alert_period(off, AT)) == []


def test_needs_spend_only_for_spend_rules() -> None:
    assert not needs_spend(controls(alert_thresholds=(Threshold("balance_below", amount=usd("1")),)))
    assert needs_spend(controls(alert_thresholds=(Threshold("spend_above", amount=usd("1")),)))
    assert needs_spend(controls(limit_enabled=True, limit_period="daily", limit_amount=usd("1")))


def test_low_balance_fires_below_the_level_and_rearms_at_110_percent() -> None:
    level = usd("50")
    assert rearm_level(level) == usd("55") and rearm_level(usd("0.000001")) == Money(2)  # rounded up
    assert low_balance_step(None, usd("0"), fired=False) is None
    assert low_balance_step(level, usd("50"), fired=False) is None
    assert low_balance_step(level, usd("49.999999"), fired=False) == "fire"
    assert low_balance_step(level, usd("10"), fired=True) is None
    assert low_balance_step(level, usd("54.999999"), fired=True) is None
    assert low_balance_step(level, usd("55"), fired=True) == "rearm"
    alert = low_balance_alert(level, wallet("40", reserved="5"), episode=3)
    assert alert.once_key == "low_balance#3"
    assert alert.details == {
        "level": "50.00",
        "balance": "40.00",
        "available": "35.00",
        "reserved": "5.00",
        "rearm_at": "55.00",
    }


def test_event_view_and_email_text() -> None:
    event = BillingEvent(
        event_id="evt_1",
        org_id="org_x",
        type="billing.threshold_crossed",
        created_at="2026-11-21T03:00:00.000Z",
        details={
            "threshold": {"type": "spend_above", "value": "1.00"},
            "observed": "1.20",
            "period": "daily",
        },
    )
    assert event.to_api() == {
        "id": "evt_1",
        "object": "billing.event",
        "type": "billing.threshold_crossed",
        "org_id": "org_x",
        "created_at": "2026-11-21T03:00:00.000Z",
        "data": event.details,
    }
    subject, text = email_text(event)
    assert subject == "Billing alert threshold crossed" and "daily spend (1.20 USD) is above 1.00 USD" in text
    # the amount as the event carries it (a Money object), read as a person reads it; a reason
    # that ends its own sentence gets no second stop
    money = {"currency": "usd", "amount": "25.00"}
    failed = replace(
        event,
        type="billing.auto_topup_failed",
        details={"amount": money, "failure_reason": "Your card was declined."},
    )
    assert email_text(failed) == (
        "Auto top-up failed",
        "An automatic top-up of 25.00 USD failed: Your card was declined. "
        "Check the saved payment method in your billing settings.",
    )
    topped = replace(event, type="billing.auto_topup_succeeded", details={"amount": money})
    assert email_text(topped)[1] == "Your wallet was topped up automatically: 25.00 USD."
    # an event that says what it did (a refund taken back) is told so, not as its type
    said = "A refund of a payment took 4.47 USD of credit back."
    reversed_ = replace(event, type="billing.payment_reversed", details={"message": said})
    assert email_text(reversed_) == ("Billing alert", said)
