"""Billing alert rules: which `billing.*` events a money movement raises, and their debounce
keys (pure; `docs/billing-alerts.md` is the customer-facing version).

After every movement the watch (`services/billing/watch.py`) observes the wallet and the
period's charged spend, and asks `due_alerts` what is due:

- `billing.limit_reached`: the period's charged spend reached the spending limit (a
  settlement took it there, so under a hard limit the next submit is refused until the
  period ends); once per limit period. In-flight reservations alone raise nothing: they are
  estimates that usually settle lower, and a submit they block is refused with the figures.
- `billing.threshold_crossed`: an `alert_thresholds` entry holds: `balance_below` (balance
  < value), `spend_above` (period spend > value), `pct_of_limit` (period spend >= that
  percent of an active limit, and > 0); each entry once per alert period.
- `billing.low_balance`: balance < `low_balance_amount`, once per episode; an episode ends
  (the alert re-arms) when the balance is back at >= 110% of the level (`low_balance_step`).

The alert period is the controls' `limit_period`, or monthly when none is set, by the local
date in `limit_timezone`. A debounce key (`once_key`) names the rule and the period, so the
store records each at most once whatever the number of concurrent movers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_DOWN, Decimal
from typing import Literal, TypedDict

from batchroute.domain.billing.controls import BillingControls, Mode, Period, Threshold, ThresholdType
from batchroute.domain.billing.ledger import DAILY_PREFIX, WalletState, period_keys
from batchroute.domain.views import view_of
from batchroute.money import Money, MoneyView, format_amount

LIMIT_REACHED = "billing.limit_reached"
THRESHOLD_CROSSED = "billing.threshold_crossed"
LOW_BALANCE = "billing.low_balance"
AUTO_TOPUP_SUCCEEDED = "billing.auto_topup_succeeded"
AUTO_TOPUP_FAILED = "billing.auto_topup_failed"
# a refund or a lost dispute taken back, or a recorded refund that failed given back
PAYMENT_REVERSED = "billing.payment_reversed"
PAYMENT_DISPUTED = "billing.payment_disputed"  # a dispute opened or closed without a loss
EVENT_TYPES: tuple[str, ...] = (
    LIMIT_REACHED,
    THRESHOLD_CROSSED,
    LOW_BALANCE,
    AUTO_TOPUP_SUCCEEDED,
    AUTO_TOPUP_FAILED,
    PAYMENT_REVERSED,
    PAYMENT_DISPUTED,
)
DEFAULT_ALERT_PERIOD: Period = "monthly"
# The low-balance alert re-arms once the balance is back at this percent of the level.
REARM_PERCENT = 110

LowBalanceStep = Literal["fire", "rearm"]


@dataclass(frozen=True)
class AlertPeriod:
    period: Period
    key: str  # the ledger's spend-counter key, e.g. "M#2026-11" or "D#2026-11-21"
    timezone: str

    @property
    def start(self) -> str:
        """The period's first local date, e.g. "2026-11-01"."""
        text = self.key.split("#", 1)[1]
        return text if self.key.startswith(DAILY_PREFIX) else f"{text}-01"

    def data(self) -> AlertData:
        """The period's part of an event's data."""
        return {
            "period": self.period,
            "period_key": self.key,
            "period_start": self.start,
            "timezone": self.timezone,
        }


class AlertThreshold(TypedDict):
    type: ThresholdType
    value: str | int | None  # a USD amount, or a whole percent for pct_of_limit


class AlertData(TypedDict, total=False):
    """An event's data (docs/billing-alerts.md): each event type fills its own keys. USD
    amounts are decimal strings, but an auto top-up's `amount` (a Money view)."""

    # billing.limit_reached and billing.threshold_crossed: the period (`AlertPeriod.data`)
    period: Period
    period_key: str
    period_start: str
    timezone: str
    limit: str
    spent: str
    in_flight: str
    projected: str
    mode: Mode
    threshold: AlertThreshold
    observed: str
    # billing.threshold_crossed and billing.low_balance
    balance: str
    level: str
    available: str
    reserved: str
    rearm_at: str
    # billing.auto_topup_succeeded and billing.auto_topup_failed
    attempt_id: str
    amount: MoneyView
    processor_reference: str
    failure_code: str
    failure_reason: str
    reason: str  # what a failure's `failure_reason` was called in events stored before it
    consecutive_failures: int
    retry_after: str | None
    auto_topup_disabled: bool
    message: str
    # billing.payment_reversed and billing.payment_disputed (processor_reference: the payment
    # as credited, a Checkout Session or PaymentIntent id)
    reversal: str  # refund | dispute | refund_failed (a recorded refund failed later)
    reversed: str  # refunded / lost in disputes of the payment, in all
    taken_back: str  # debited from the wallet now
    not_recovered: str  # owed back now but not available: spent, or reserved by running work
    refund_failed: str  # refund_failed: the refunded amount that failed
    credited_back: str  # refund_failed: given back to the wallet now
    dispute_id: str
    dispute_status: str


@dataclass(frozen=True)
class Alert:
    """An event to record once per `once_key`, with its data (JSON, as the event list and the
    webhook show it, `BillingEvent.to_api`)."""

    event_type: str
    once_key: str  # at most one event per key, ever
    details: AlertData


class BillingEventView(TypedDict):
    id: str
    object: Literal["billing.event"]
    type: str
    org_id: str
    created_at: str
    data: AlertData


@dataclass(frozen=True)
class BillingEvent:
    """A recorded alert event."""

    event_id: str
    org_id: str
    type: str
    created_at: str
    details: AlertData

    def to_api(self) -> BillingEventView:
        """The event as the API lists it and the webhook sends it."""
        return view_of(
            self, BillingEventView, id=self.event_id, object="billing.event", data=self.details.copy()
        )


def alert_period(controls: BillingControls, at: datetime) -> AlertPeriod:
    """The period thresholds are debounced in (and `spend_above` measured over)."""
    period: Period = controls.limit_period or DEFAULT_ALERT_PERIOD
    zone = controls.limit_timezone or "UTC"
    return AlertPeriod(period=period, key=period_keys(at, zone)[period], timezone=zone)


def active_limit(controls: BillingControls) -> Money | None:
    if controls.limit_enabled and controls.limit_amount is not None and controls.limit_period is not None:
        return controls.limit_amount
    return None


def needs_spend(controls: BillingControls) -> bool:
    """Whether any rule reads the period's spend (else the watch reads it only for the event
    of an alert that holds)."""
    if active_limit(controls) is not None:
        return True
    return any(t.type in ("spend_above", "pct_of_limit") for t in controls.alert_thresholds)


def due_alerts(
    controls: BillingControls, *, wallet: WalletState, spent: Money, period: AlertPeriod
) -> list[Alert]:
    """The limit and threshold alerts that hold now (the store debounces repeats)."""
    alerts: list[Alert] = []
    limit = active_limit(controls)
    if limit is not None:
        projected = spent + wallet.reserved
        if spent >= limit:
            alerts.append(
                Alert(
                    LIMIT_REACHED,
                    f"limit_reached#{period.key}",
                    {
                        "limit": _usd(limit),
                        **period.data(),
                        "spent": _usd(spent),
                        "in_flight": _usd(wallet.reserved),
                        "projected": _usd(projected),
                        "mode": controls.limit_mode,
                    },
                )
            )
    for threshold in controls.alert_thresholds:
        observed = _crossed(threshold, wallet=wallet, spent=spent, limit=limit)
        if observed is None:
            continue
        shown = threshold.percent if threshold.amount is None else _usd(threshold.amount)
        details: AlertData = {
            "threshold": {"type": threshold.type, "value": shown},
            "observed": observed,
            **period.data(),
            "balance": _usd(wallet.balance),
            "spent": _usd(spent),
        }
        if limit is not None:
            details["limit"] = _usd(limit)
        alerts.append(Alert(THRESHOLD_CROSSED, f"threshold#{threshold.type}#{shown}#{period.key}", details))
    return alerts


def _crossed(threshold: Threshold, *, wallet: WalletState, spent: Money, limit: Money | None) -> str | None:
    """The observed figure when the threshold holds, else None: USD for an amount, and for
    pct_of_limit the percent with two decimals, cut down (`"80.00"`: never shown past what
    was spent)."""
    if threshold.type == "balance_below" and threshold.amount is not None:
        return _usd(wallet.balance) if wallet.balance < threshold.amount else None
    if threshold.type == "spend_above" and threshold.amount is not None:
        return _usd(spent) if spent > threshold.amount else None
    if threshold.type == "pct_of_limit" and threshold.percent is not None and limit is not None:
        if limit.micros <= 0 or spent.micros <= 0:
            return None
        if spent.micros * 100 >= threshold.percent * limit.micros:
            percent = Decimal(spent.micros * 100) / Decimal(limit.micros)
            return str(percent.quantize(Decimal("0.01"), rounding=ROUND_DOWN))
    return None


# -- low balance ---------------------------------------------------------------------------
def rearm_level(level: Money) -> Money:
    """Balance at which a fired low-balance alert re-arms: 110% of the level, rounded up."""
    return Money(-(-level.micros * REARM_PERCENT // 100))


def low_balance_step(level: Money | None, balance: Money, *, fired: bool) -> LowBalanceStep | None:
    """`fire` when the balance is under the level and this episode has not fired yet;
    `rearm` when a fired episode's balance recovered to the re-arm level; else None."""
    if level is None:
        return None
    if not fired and balance < level:
        return "fire"
    if fired and balance >= rearm_level(level):
        return "rearm"
    return None


def low_balance_alert(level: Money, wallet: WalletState, *, episode: int) -> Alert:
    return Alert(
        LOW_BALANCE,
        f"low_balance#{episode}",
        {
            "level": _usd(level),
            "balance": _usd(wallet.balance),
            "available": _usd(wallet.available),
            "reserved": _usd(wallet.reserved),
            "rearm_at": _usd(rearm_level(level)),
        },
    )


def _usd(money: Money) -> str:
    return format_amount(money.amount)
