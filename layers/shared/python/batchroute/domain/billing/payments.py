"""Credit purchase and auto top-up rules: amounts and their limits, the auto top-up settings
and their update, when a top-up may start (trigger, monthly cap, one in flight, back-off),
and the record of an attempt. Pure: the store and the processor live in adapters; the long
form is docs/payments.md.

Amounts are Money (integer micro-dollars); the processor counts USD cents, so every amount
that reaches it is a whole number of cents.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal, TypedDict

from batchroute.clock import isoformat
from batchroute.domain.billing.controls import MAX_USD, parse_usd
from batchroute.domain.billing.reversals import ReversalClaim
from batchroute.domain.views import view_of
from batchroute.errors import InvalidRequest
from batchroute.money import MICROS_PER_USD, Money, MoneyView, money_text

# A purchase or top-up: at least 5 USD (below that card fees dominate), at most 10,000 USD.
MIN_PAYMENT = Money.usd(5)
MAX_PAYMENT = Money.usd(10_000)
MAX_TRIGGER = Money.usd(10_000)
MAX_MONTHLY_CAP = Money.usd(100_000)
MICROS_PER_CENT = MICROS_PER_USD // 100

# After the n-th consecutive failed top-up the next waits BACKOFF[n-1]; after the last one
# auto top-up is switched off until the user saves the settings again.
BACKOFF = (timedelta(hours=1), timedelta(hours=6), timedelta(hours=24))
MAX_FAILURES = len(BACKOFF)

AttemptStatus = Literal["pending", "succeeded", "failed"]
DEFAULTS = {"trigger_balance": Money.usd(10), "amount": Money.usd(50), "monthly_cap": Money.usd(500)}


def to_cents(amount: Money) -> int:
    if amount.micros % MICROS_PER_CENT:
        raise ValueError("the processor charges whole cents")
    return amount.micros // MICROS_PER_CENT


def from_cents(cents: int) -> Money:
    return Money(cents * MICROS_PER_CENT)


def month_key(at: datetime) -> str:
    """The calendar month (UTC) a top-up counts against the monthly cap in."""
    return at.astimezone(UTC).strftime("%Y-%m")


def payment_amount(value: Any, name: str = "amount", *, code: str = "invalid_amount") -> Money:
    """A USD amount to pay: 5..10000, whole cents."""
    between = f"{name} must be between {money_text(MIN_PAYMENT)} and {money_text(MAX_PAYMENT)}."
    amount = _usd(value, name, code=code, ceiling=MAX_PAYMENT.amount, too_large=between)
    if not MIN_PAYMENT <= amount <= MAX_PAYMENT:
        raise _invalid(name, between, code=code)
    return amount


def _usd(
    value: Any, name: str, *, code: str, ceiling: Decimal = MAX_USD, too_large: str | None = None
) -> Money:
    try:
        amount = parse_usd(value, name, ceiling=ceiling, too_large=too_large)
    except InvalidRequest as exc:
        raise _invalid(name, exc.message, code=code) from exc
    if amount.micros % MICROS_PER_CENT:
        raise _invalid(name, f"{name} must be a whole number of cents.", code=code)
    return amount


def _invalid(name: str | None, message: str, *, code: str = "invalid_auto_topup") -> InvalidRequest:
    return InvalidRequest(message, code=code, details={"field": name})


# -- the saved card ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PaymentMethod:
    """A card saved at the processor for off-session charges; only brand and last4 are shown."""

    payment_method_id: str
    brand: str
    last4: str

    def to_api(self) -> CardView:
        return {"brand": self.brand, "last4": self.last4}


class CardView(TypedDict):
    brand: str
    last4: str


class AutoTopupStatusView(TypedDict):
    in_flight_attempt_id: str | None
    consecutive_failures: int
    retry_after: str | None
    disabled_reason: str | None
    month: str | None
    month_committed: MoneyView


class AutoTopupView(TypedDict):
    org_id: str
    configured: bool
    enabled: bool
    trigger_balance: MoneyView
    amount: MoneyView
    monthly_cap: MoneyView
    payment_method: CardView | None
    status: AutoTopupStatusView
    created_at: str | None
    updated_at: str | None


@dataclass(frozen=True, slots=True)
class UpdateAutoTopup:
    """A partial update of the settings, validated at the edge (functions/api/schemas/billing/payments.py):
    only the fields named in `given` change."""

    given: frozenset[str]
    enabled: bool = False
    trigger_balance: Money = DEFAULTS["trigger_balance"]
    amount: Money = DEFAULTS["amount"]
    monthly_cap: Money = DEFAULTS["monthly_cap"]


# -- auto top-up settings ----------------------------------------------------------------------
@dataclass(frozen=True)
class AutoTopup:
    """An org's auto top-up settings and the state of its top-ups (one item)."""

    org_id: str
    enabled: bool = False
    trigger_balance: Money = DEFAULTS["trigger_balance"]
    amount: Money = DEFAULTS["amount"]
    monthly_cap: Money = DEFAULTS["monthly_cap"]
    configured: bool = False
    created_at: str | None = None
    updated_at: str | None = None
    # state
    version: int = 0
    in_flight: str | None = None  # the pending attempt's id
    failures: int = 0  # consecutive failed attempts
    retry_after: str | None = None  # back-off: no attempt before this instant
    disabled_reason: str | None = None  # set when failures switched auto top-up off
    month: str | None = None
    month_committed: Money = field(default_factory=Money.zero)  # pending + succeeded this month

    def committed_in(self, month: str) -> Money:
        return self.month_committed if self.month == month else Money.zero()

    def to_api(self, payment_method: PaymentMethod | None) -> AutoTopupView:
        return view_of(
            self,
            AutoTopupView,
            trigger_balance=self.trigger_balance.to_api(),
            amount=self.amount.to_api(),
            monthly_cap=self.monthly_cap.to_api(),
            payment_method=payment_method.to_api() if payment_method else None,
            status={
                "in_flight_attempt_id": self.in_flight,
                "consecutive_failures": self.failures,
                "retry_after": self.retry_after,
                "disabled_reason": self.disabled_reason,
                "month": self.month,
                "month_committed": self.month_committed.to_api(),
            },
        )


# The rules of the auto top-up request model's fields (functions/api/schemas/billing/payments.py).
def parse_enabled(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise _invalid(name, f"{name} must be true or false.")
    return value


def parse_trigger_balance(value: Any, name: str) -> Money:
    return _usd_at_most(value, name, MAX_TRIGGER)


def parse_topup_amount(value: Any, name: str) -> Money:
    return payment_amount(value, name, code="invalid_auto_topup")


def parse_monthly_cap(value: Any, name: str) -> Money:
    return _usd_at_most(value, name, MAX_MONTHLY_CAP)


def _usd_at_most(value: Any, name: str, most: Money) -> Money:
    amount = _usd(value, name, code="invalid_auto_topup")
    if amount > most:
        raise _invalid(name, f"{name} must be at most {money_text(most)}.")
    return amount


def apply_update(
    current: AutoTopup, command: UpdateAutoTopup, *, payment_method: PaymentMethod | None, at: datetime
) -> AutoTopup:
    """The settings after a PUT: only the given fields change; saving clears the back-off and a
    failure switch-off (the user has looked at it). Enabling needs a saved card."""
    new = replace(current, **{name: getattr(command, name) for name in command.given})
    if new.monthly_cap < new.amount:
        raise _invalid("monthly_cap", "monthly_cap must be at least the top-up amount.")
    if new.enabled and payment_method is None:
        raise InvalidRequest(
            "Auto top-up needs a saved card: buy credits once in the billing dashboard and the "
            "card is saved for auto top-up.",
            code="payment_method_required",
            details={"field": "enabled"},
        )
    stamp = isoformat(at)
    return replace(
        new,
        configured=True,
        created_at=current.created_at or stamp,
        updated_at=stamp,
        failures=0,
        retry_after=None,
        disabled_reason=None,
    )


# -- starting a top-up -------------------------------------------------------------------------
SkipReason = Literal["disabled", "above_trigger", "in_flight", "backing_off", "monthly_cap", "no_card"]


def skip_reason(settings: AutoTopup, *, balance: Money, has_card: bool, at: datetime) -> SkipReason | None:
    """Why no top-up starts now (None: start one): it must be enabled with a card, the balance
    below the trigger, no attempt in flight, no back-off running, and the month's pending and
    succeeded top-ups plus this one within the monthly cap. An `in_flight` attempt that is no
    longer pending does not hold the slot: pass the settings through `settled_slot` first."""
    if not settings.enabled:
        return "disabled"
    if not has_card:
        return "no_card"
    if balance >= settings.trigger_balance:
        return "above_trigger"
    if settings.in_flight is not None:
        return "in_flight"
    if settings.retry_after is not None and isoformat(at) < settings.retry_after:
        return "backing_off"
    if settings.committed_in(month_key(at)) + settings.amount > settings.monthly_cap:
        return "monthly_cap"
    return None


def settled_slot(settings: AutoTopup, in_flight: TopupAttempt | None) -> AutoTopup:
    """The settings with the slot freed when the attempt they hold `in_flight` (read again:
    `in_flight`, None when there is no such attempt) is no longer pending. Settling an attempt
    frees its slot in the same write, so this only happens to settings written before the
    settings rode in the credit's transaction (a first delivery that crashed between the
    credit and the settings, docs/payments.md): a succeeded attempt's success is applied now
    (`after_success`: the failure count resets), a failed or missing one just frees the slot
    (its failure was counted when it was recorded). Anything else: unchanged."""
    if settings.in_flight is None:
        return settings
    if in_flight is not None and (
        in_flight.attempt_id != settings.in_flight or in_flight.status == "pending"
    ):
        return settings
    if in_flight is not None and in_flight.status == "succeeded":
        return after_success(settings, in_flight)
    return replace(settings, version=settings.version + 1, in_flight=None)


def started(settings: AutoTopup, attempt_id: str, *, at: datetime) -> AutoTopup:
    month = month_key(at)
    return replace(
        settings,
        version=settings.version + 1,
        in_flight=attempt_id,
        month=month,
        month_committed=settings.committed_in(month) + settings.amount,
    )


def after_failure(settings: AutoTopup, attempt: TopupAttempt, *, at: datetime) -> AutoTopup:
    """A failed attempt frees the slot, gives its amount back to the month, and backs off (the
    last step of the schedule switches auto top-up off)."""
    failures = settings.failures + 1
    in_flight = None if settings.in_flight == attempt.attempt_id else settings.in_flight
    month_committed = settings.month_committed
    if settings.month == month_key(_parse(attempt.created_at)):
        month_committed = Money(max(0, (month_committed - attempt.amount).micros))
    if failures >= MAX_FAILURES:
        return replace(
            settings,
            version=settings.version + 1,
            in_flight=in_flight,
            failures=failures,
            retry_after=None,
            enabled=False,
            disabled_reason="payment_failed",
            month_committed=month_committed,
        )
    return replace(
        settings,
        version=settings.version + 1,
        in_flight=in_flight,
        failures=failures,
        retry_after=isoformat(at + BACKOFF[failures - 1]),
        month_committed=month_committed,
    )


def after_withdrawal(settings: AutoTopup, attempt: TopupAttempt, *, at: datetime) -> AutoTopup:
    """An attempt ended before its card was charged because auto top-up was switched off:
    the slot frees and its amount goes back to the month, with no failure counted and no
    back-off (nothing failed; a `disabled_reason` set by a refund or dispute stays)."""
    month_committed = settings.month_committed
    if settings.month == month_key(_parse(attempt.created_at)):
        month_committed = Money(max(0, (month_committed - attempt.amount).micros))
    return replace(
        settings,
        version=settings.version + 1,
        in_flight=None if settings.in_flight == attempt.attempt_id else settings.in_flight,
        month_committed=month_committed,
    )


def after_success(settings: AutoTopup, attempt: TopupAttempt) -> AutoTopup:
    """A top-up went through: the slot frees and the failure count resets. One recorded as
    failed before (the processor reported the success later) takes its room in the month's
    cap back."""
    month_committed = settings.month_committed
    if attempt.status == "failed" and settings.month == month_key(_parse(attempt.created_at)):
        month_committed = month_committed + attempt.amount
    return replace(
        settings,
        version=settings.version + 1,
        in_flight=None if settings.in_flight == attempt.attempt_id else settings.in_flight,
        failures=0,
        retry_after=None,
        month_committed=month_committed,
    )


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


# -- attempts ----------------------------------------------------------------------------------
class TopupAttemptView(TypedDict):
    id: str
    amount: MoneyView
    status: AttemptStatus
    processor_reference: str | None
    failure_code: str | None
    failure_reason: str | None
    created_at: str
    updated_at: str


class AttemptPage(TypedDict):
    data: list[TopupAttemptView]
    next_cursor: str | None


@dataclass(frozen=True)
class TopupAttempt:
    attempt_id: str
    org_id: str
    amount: Money
    status: AttemptStatus
    created_at: str
    updated_at: str
    processor_ref: str | None = None  # the PaymentIntent id
    failure_code: str | None = None
    failure_reason: str | None = None
    # when a charge was first sent to the processor (its answer may have been lost): from
    # then on the attempt is only ever charged again under its key, never withdrawn
    charge_tried_at: str | None = None

    def to_api(self) -> TopupAttemptView:
        return view_of(
            self,
            TopupAttemptView,
            id=self.attempt_id,
            amount=self.amount.to_api(),
            processor_reference=self.processor_ref,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckoutTerms:
    """What the processor's Checkout Session is opened on: the customer and the amount, the
    org and user it credits, where the payer returns to, and the request's idempotency key."""

    customer_id: str
    amount_cents: int
    org_id: str
    user_id: str
    success_url: str
    cancel_url: str
    idempotency_key: str


# -- what the processor answers ----------------------------------------------------------------
@dataclass(frozen=True)
class CheckoutSession:
    session_id: str
    url: str
    expires_at: str


ChargeStatus = Literal["succeeded", "processing", "failed"]


@dataclass(frozen=True, slots=True)
class AttemptFailure:
    """Why a top-up attempt ends failed: the code and reason (the processor's, or the
    service's own), the PaymentIntent that failed (None: none was made), and `untried`: the
    attempt was withdrawn before any charge of it was sent (refused once one was)."""

    code: str
    reason: str
    processor_ref: str | None = None
    untried: bool = False


@dataclass(frozen=True)
class Charge:
    """An off-session charge (a PaymentIntent) as the processor reports it."""

    processor_ref: str
    status: ChargeStatus
    amount: Money
    failure_code: str | None = None
    failure_reason: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    currency: str = "usd"  # the service charges USD only; charge_of reads the processor's


@dataclass(frozen=True, kw_only=True)
class ProcessorSession:
    """A Checkout Session as the processor reports it (an event's object, or its own copy),
    read by `session_of`. `amount_total` and `payment_status` stay as sent: a refusal names
    what the processor said."""

    session_id: str
    mode: str | None = None
    payment_status: object = None
    amount_total: object = None
    currency: str = ""  # lowercase; "" when missing
    metadata: Mapping[str, str] = field(default_factory=dict)
    payment_intent: str | None = None


@dataclass(frozen=True)
class ProcessorEvent:
    """A verified processor webhook event: its id, type, the object it is about (a Checkout
    Session, a PaymentIntent as a Charge, a refund's or dispute's claim, or None for other
    objects), and whether the
    processor sent it in live mode (None when the event does not say)."""

    event_id: str
    event_type: str
    created: int
    subject: ProcessorSession | Charge | ReversalClaim | None
    livemode: bool | None = None


def metadata_of(given: object) -> dict[str, str]:
    """An object's `metadata` as the processor keeps it (string keys to string values): any
    other value is no metadata (so names no org), never an error."""
    if not isinstance(given, Mapping):
        return {}
    return {str(key): value for key, value in given.items() if isinstance(value, str)}


def session_of(session: Mapping[str, Any]) -> ProcessorSession:
    """A Checkout Session (as a dict) as the service sees it."""
    intent = session.get("payment_intent")
    return ProcessorSession(
        session_id=str(session.get("id") or ""),
        mode=session.get("mode"),
        payment_status=session.get("payment_status"),
        amount_total=session.get("amount_total"),
        currency=str(session.get("currency") or "").lower(),
        metadata=metadata_of(session.get("metadata")),
        payment_intent=intent if isinstance(intent, str) and intent else None,
    )


# A PaymentIntent in one of these states after an off-session confirm did not take the money.
_NEEDS_CUSTOMER = {"requires_action", "requires_payment_method", "requires_confirmation", "canceled"}


def charge_of(intent: Mapping[str, Any]) -> Charge:
    """A PaymentIntent (as a dict) as the service sees a charge."""
    status = str(intent.get("status"))
    error = intent.get("last_payment_error") or {}
    charge = Charge(
        processor_ref=str(intent["id"]),
        status="processing",
        amount=from_cents(int(intent.get("amount", 0))),
        metadata=metadata_of(intent.get("metadata")),
        currency=str(intent.get("currency") or "").lower(),
    )
    if status == "succeeded":
        return replace(charge, status="succeeded")
    if status in _NEEDS_CUSTOMER:
        code = error.get("code") or (
            "authentication_required" if status == "requires_action" else "payment_failed"
        )
        return replace(
            charge,
            status="failed",
            failure_code=str(code),
            failure_reason=str(error.get("message") or "The payment did not go through."),
        )
    return charge


def purchase_mismatch(session: ProcessorSession, amount: Money) -> str | None:
    """Why a paid checkout session cannot be what the dashboard's checkout sold (USD, 5..10000
    in whole cents), or None. A signed event is the processor's word, not a reason to credit
    whatever it says (issue 27)."""
    currency = session.currency
    if currency != "usd":
        return f"currency {currency or 'missing'!r}: checkout sells USD only"
    if not MIN_PAYMENT <= amount <= MAX_PAYMENT:
        return (
            f"amount {money_text(amount)} is outside checkout's "
            f"{money_text(MIN_PAYMENT)}..{money_text(MAX_PAYMENT)}"
        )
    return None


# -- what credits a wallet (issue 27) ----------------------------------------------------------
CheckoutStatus = Literal["open", "credited"]


@dataclass(frozen=True)
class CheckoutRecord:
    """A Checkout Session the service opened, as it opened it: the only sessions whose payment
    credits a wallet, and only for this org, amount and currency."""

    session_id: str
    org_id: str
    user_id: str
    amount_cents: int
    currency: str
    created_at: str
    status: CheckoutStatus = "open"


def session_mismatch(session: ProcessorSession, record: CheckoutRecord) -> str | None:
    """How a checkout session (the event's, or the one the processor returns) differs from the
    service's record of it (org, amount, currency), or None."""
    org_id = session.metadata.get("org_id")
    if org_id != record.org_id:
        return f"org {org_id!r} is not the checkout's {record.org_id!r}"
    amount = session.amount_total
    if isinstance(amount, bool) or amount != record.amount_cents:
        return f"amount_total {amount!r} is not the checkout's {record.amount_cents} cents"
    currency = session.currency
    if currency != record.currency:
        return f"currency {currency or 'missing'!r} is not the checkout's {record.currency!r}"
    return None


def livemode_mismatch(event: ProcessorEvent, *, live_key: bool) -> str | None:
    """An event from the other mode than the configured key's (a test event against a live
    key, or a live one locally) is not a payment to this service."""
    if event.livemode is not live_key:
        return f"livemode {event.livemode!r} but the processor key is a {'live' if live_key else 'test'} key"
    return None


def topup_mismatch(attempt: TopupAttempt | None, charge: Charge) -> str | None:
    """Why a succeeded PaymentIntent cannot be the payment of this auto top-up attempt, or
    None: the attempt must exist, be charged under this PaymentIntent (when it recorded one),
    for its amount, in USD. A failed attempt still takes a success of its own PaymentIntent
    (the processor took the money after all); one that failed before any charge takes none."""
    if attempt is None:
        return "no such auto top-up attempt"
    if attempt.processor_ref is not None and charge.processor_ref != attempt.processor_ref:
        return f"PaymentIntent {charge.processor_ref} is not the attempt's {attempt.processor_ref}"
    if attempt.status == "failed" and attempt.processor_ref is None:
        return "the attempt failed before any charge was made"
    if charge.currency != "usd":
        return f"currency {charge.currency or 'missing'!r}: auto top-up charges USD only"
    if charge.amount != attempt.amount:
        return f"amount {money_text(charge.amount)} is not the attempt's {money_text(attempt.amount)}"
    return None
