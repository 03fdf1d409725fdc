"""Credit purchase through the payment processor, and the processor's webhook events
(docs/payments.md).

A purchase is a Checkout Session the billing dashboard opens for a signed-in user, recorded
by the service (org, user, amount, currency); the wallet is credited ONLY when the
processor's signed `checkout.session.completed` arrives (paid) for a recorded session and
matches the record, and, when `confirm_with_processor` (outside local mode), the processor's
own copy of the session says it is paid and matches too; exactly once per session (the
ledger's marker), and the card it saved is kept for auto top-up. Every check passes before
anything is written; a refused event is logged, counted and acknowledged
(`payment_refusals`). `payment_intent.succeeded` / `payment_intent.payment_failed` of an auto top-up
settle its attempt (`AutoTopupService`). Refunds and disputes of a credited payment
(`charge.refunded`, `charge.refund.updated`, `refund.failed`, `charge.dispute.created`,
`charge.dispute.closed`) take the credit back as far as it is still available, and give it
back when a refund fails (`PaymentReversals`). Any other event
is acknowledged and ignored.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Protocol, TypedDict

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal, require_user_session
from batchroute.domain.billing.payments import (
    Charge,
    CheckoutRecord,
    CheckoutSession,
    CheckoutStatus,
    CheckoutTerms,
    PaymentMethod,
    ProcessorEvent,
    ProcessorSession,
    from_cents,
    livemode_mismatch,
    purchase_mismatch,
    session_mismatch,
    to_cents,
)
from batchroute.domain.billing.reconciliation import LedgerCredit
from batchroute.errors import NotFound
from batchroute.money import MoneyView
from batchroute.observability import logger
from batchroute.services.billing.auto_topup import AutoTopupService, Credits, OnMoved, SavedCards, tell_moved
from batchroute.services.billing.commands import StartCheckout
from batchroute.services.billing.payment_refusals import refuse_payment_event
from batchroute.services.billing.reversals import REVERSAL_EVENTS, CheckoutLookup
from batchroute.transactions import TransactItem

CHECKOUT_PURPOSE = "credit_purchase"
TOPUP_PURPOSE = "auto_topup"
COMPLETED_EVENTS = ("checkout.session.completed", "checkout.session.async_payment_succeeded")
TOPUP_EVENTS = ("payment_intent.succeeded", "payment_intent.payment_failed")


class CheckoutOpened(TypedDict):
    checkout_url: str
    session_id: str
    expires_at: str
    amount: MoneyView


class CheckoutState(TypedDict):
    session_id: str
    status: CheckoutStatus  # `credited` once the processor's webhook credited the wallet
    amount: MoneyView


class WebhookAck(TypedDict):
    received: bool
    event_id: str
    applied: bool


class Processor(Protocol):
    def create_customer(self, *, org_id: str) -> str: ...

    def create_checkout(self, terms: CheckoutTerms) -> CheckoutSession: ...

    def saved_card(self, payment_intent_id: str) -> PaymentMethod | None: ...

    def verify_event(self, payload: bytes, signature: str | None) -> ProcessorEvent: ...

    def live_key(self) -> bool: ...

    def checkout_session(self, session_id: str) -> ProcessorSession | None: ...


class Reversals(Protocol):
    """services/billing/reversals.py:PaymentReversals."""

    def apply(self, event: ProcessorEvent) -> bool: ...


class Profiles(SavedCards, Protocol):
    def customer_id(self, org_id: str) -> str | None: ...

    def claim_customer(self, org_id: str, customer_id: str, *, at: str) -> str: ...

    def save_payment_method(self, org_id: str, card: PaymentMethod, *, at: str) -> None: ...


class CheckoutRecords(CheckoutLookup, Protocol):
    """The service's own record of every Checkout Session it opened (`checkout_record`)."""

    def record_checkout(self, record: CheckoutRecord) -> None: ...

    def checkout_credited_item(self, session_id: str, *, at: str) -> TransactItem: ...


@dataclass(eq=False, kw_only=True)
class CreditPurchases:
    processor: Processor
    profiles: Profiles
    checkouts: CheckoutRecords
    ledger: Credits
    topups: AutoTopupService
    reversals: Reversals
    on_moved: OnMoved
    clock: Clock
    public_base_url: str
    confirm_with_processor: bool

    # -- the dashboard's checkout ------------------------------------------------------------
    def checkout(self, principal: Principal, command: StartCheckout) -> CheckoutOpened:
        """A Checkout Session for the command's amount (5..10000 USD, checked at the edge by the
        request model with the domain's `payment_amount`) for the signed-in user's org."""
        require_user_session(principal)
        amount = command.amount
        at = isoformat(self.clock.now())
        customer = self.profiles.customer_id(principal.org_id)
        if customer is None:
            customer = self.profiles.claim_customer(
                principal.org_id, self.processor.create_customer(org_id=principal.org_id), at=at
            )
        console = f"{self.public_base_url}/console/billing"
        terms = CheckoutTerms(
            customer_id=customer,
            amount_cents=to_cents(amount),
            org_id=principal.org_id,
            user_id=principal.user_id or "",
            success_url=f"{console}?checkout=success&session_id={{CHECKOUT_SESSION_ID}}",
            cancel_url=f"{console}?checkout=canceled",
            idempotency_key=f"checkout-{secrets.token_hex(12)}",
        )
        session = self.processor.create_checkout(terms)
        self.checkouts.record_checkout(
            CheckoutRecord(
                session_id=session.session_id,
                org_id=principal.org_id,
                user_id=principal.user_id or "",
                amount_cents=to_cents(amount),
                currency="usd",
                created_at=at,
            )
        )
        logger.info("checkout opened", extra={"org_id": principal.org_id, "session_id": session.session_id})
        return {
            "checkout_url": session.url,
            "session_id": session.session_id,
            "expires_at": session.expires_at,
            "amount": amount.to_api(),
        }

    def checkout_state(self, principal: Principal, session_id: str) -> CheckoutState:
        """Has this org's checkout been credited yet? The console asks after the processor
        sends the buyer back, until it has (docs/payments.md)."""
        record = self.checkouts.checkout_record(session_id)
        if record is None or record.org_id != principal.org_id:
            raise NotFound("No checkout with this id in this organization.", code="checkout_not_found")
        amount = from_cents(record.amount_cents).to_api()
        return {"session_id": record.session_id, "status": record.status, "amount": amount}

    # -- the processor's webhook -------------------------------------------------------------
    def handle_webhook(self, payload: bytes, signature: str | None) -> WebhookAck:
        """Verify and apply one event; the answer says whether it changed anything. Raises
        InvalidRequest `invalid_signature` (400, nothing applied) for a forged one."""
        event = self.processor.verify_event(payload, signature)
        applied = False
        if event.event_type in (*COMPLETED_EVENTS, *TOPUP_EVENTS, *REVERSAL_EVENTS) and (
            problem := livemode_mismatch(event, live_key=self.processor.live_key())
        ):
            refuse_payment_event(problem, event_id=event.event_id, event_type=event.event_type)
        elif event.event_type in COMPLETED_EVENTS:
            applied = self._purchase_completed(event)
        elif event.event_type in TOPUP_EVENTS:
            applied = self._topup_outcome(event)
        elif event.event_type in REVERSAL_EVENTS:
            applied = self.reversals.apply(event)
        logger.info(
            "processor event",
            extra={"event_id": event.event_id, "event_type": event.event_type, "applied": applied},
        )
        return {"received": True, "event_id": event.event_id, "applied": applied}

    def _purchase_completed(self, event: ProcessorEvent) -> bool:
        session = event.subject
        if not isinstance(session, ProcessorSession):
            return False
        metadata = session.metadata
        org_id = metadata.get("org_id")
        if session.mode != "payment" or metadata.get("purpose") != CHECKOUT_PURPOSE or not org_id:
            return False
        if session.payment_status != "paid":
            return False  # an asynchronous method: credited on async_payment_succeeded
        record, confirmed = self._checked(event, session)
        if record is None:
            return False
        # Read before the credit: a processor outage here is a 5xx with nothing credited yet.
        intent = (confirmed or session).payment_intent
        card = self.processor.saved_card(intent) if intent else None
        at = self.clock.now()
        credited = self.ledger.credit(
            LedgerCredit(
                org_id=record.org_id,
                processor_ref=record.session_id,
                kind="purchase",
                amount=from_cents(record.amount_cents),
                at=isoformat(at),
            ),
            memo=f"credit purchase {record.session_id}",
            extra_items=(self.checkouts.checkout_credited_item(record.session_id, at=isoformat(at)),),
        )
        self._save_card(record.org_id, card, credited=credited, at=isoformat(at))
        if credited:
            tell_moved(self.on_moved, record.org_id, at)
        return credited

    def _save_card(self, org_id: str, card: PaymentMethod | None, *, credited: bool, at: str) -> None:
        """Keep the purchase's card for auto top-up when this delivery credited it. A repeat
        (Stripe resends events, older ones too) never replaces a card a later purchase saved:
        it saves its card only when none is saved (its first delivery failed after crediting)."""
        if card is None:
            return
        if credited or self.profiles.payment_method(org_id) is None:
            self.profiles.save_payment_method(org_id, card, at=at)

    def _checked(
        self, event: ProcessorEvent, session: ProcessorSession
    ) -> tuple[CheckoutRecord | None, ProcessorSession | None]:
        """The record of the paid session the event names, and the processor's own copy of it
        (when it is asked), once every check passed; (None, None) after refusing the event."""
        session_id = session.session_id
        record, confirmed, problem = self._first_problem(session, session_id)
        if problem is not None or record is None:
            refuse_payment_event(
                problem or "no checkout record",
                event_id=event.event_id,
                session_id=session_id,
                org_id=session.metadata.get("org_id"),
            )
            return None, None
        return record, confirmed

    def _first_problem(
        self, session: ProcessorSession, session_id: str
    ) -> tuple[CheckoutRecord | None, ProcessorSession | None, str | None]:
        """The checks in order (docs/payments.md "What credits a wallet"): what checkout sells,
        our record, the event against it, then the processor's own copy when it is asked."""
        if problem := _purchase_problem(session):
            return None, None, problem
        record = self.checkouts.checkout_record(session_id)
        if record is None:
            return None, None, "a checkout session this service never opened"
        if problem := session_mismatch(session, record):
            return record, None, problem
        if not self.confirm_with_processor:
            return record, None, None
        confirmed = self.processor.checkout_session(session_id)
        return record, confirmed, _processor_problem(confirmed, record)

    def _topup_outcome(self, event: ProcessorEvent) -> bool:
        charge = event.subject
        if not isinstance(charge, Charge):
            return False
        metadata = charge.metadata
        org_id, attempt_id = metadata.get("org_id"), metadata.get("attempt_id")
        if metadata.get("purpose") != TOPUP_PURPOSE or not org_id or not attempt_id:
            return False
        if event.event_type == "payment_intent.succeeded" and charge.status == "succeeded":
            return self.topups.succeeded(
                org_id, attempt_id, charge, at=self.clock.now(), event_id=event.event_id
            )
        if event.event_type == "payment_intent.payment_failed":
            return self.topups.charge_failed(org_id, attempt_id, charge, at=self.clock.now())
        return False


def _purchase_problem(session: ProcessorSession) -> str | None:
    """What checkout never sells (not USD, outside 5..10,000 USD in whole cents), or None."""
    total = session.amount_total
    if not isinstance(total, int) or isinstance(total, bool):
        return f"amount_total {total!r} is not a whole number of cents"
    return purchase_mismatch(session, from_cents(total))


def _processor_problem(session: ProcessorSession | None, record: CheckoutRecord) -> str | None:
    """Why the processor's own copy of the session does not show our checkout paid, or None."""
    if session is None:
        return "the processor does not know this checkout session"
    if session.payment_status != "paid":
        return f"the processor says the session is {session.payment_status!r}, not paid"
    mismatch = session_mismatch(session, record)
    return f"the processor's session: {mismatch}" if mismatch else None
