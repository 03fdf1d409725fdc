"""Credit purchase through the payment processor, and the processor's webhook events
(docs/payments.md).

A purchase is a Checkout Session the billing dashboard opens for a signed-in user; the
wallet is credited ONLY when the processor's signed `checkout.session.completed` arrives
(paid), exactly once per session (the ledger's marker), and the card it saved is kept for
auto top-up. `payment_intent.succeeded` / `payment_intent.payment_failed` of an auto top-up
settle its attempt (`AutoTopupService`). Any other event is acknowledged and ignored.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from aws_lambda_powertools.metrics import MetricUnit

from batchroute.clock import Clock, isoformat
from batchroute.domain.access import Principal, require_user_session
from batchroute.domain.payments import (
    Charge,
    CheckoutSession,
    PaymentMethod,
    ProcessorEvent,
    charge_of,
    from_cents,
    payment_amount,
    purchase_mismatch,
    to_cents,
)
from batchroute.errors import InvalidRequest
from batchroute.observability import logger, metrics
from batchroute.services.billing.auto_topup import AutoTopupService, Credits

CHECKOUT_PURPOSE = "credit_purchase"
TOPUP_PURPOSE = "auto_topup"
COMPLETED_EVENTS = ("checkout.session.completed", "checkout.session.async_payment_succeeded")


class Processor(Protocol):
    def create_customer(self, *, org_id: str) -> str: ...

    def create_checkout(
        self,
        *,
        customer_id: str,
        amount_cents: int,
        org_id: str,
        user_id: str,
        success_url: str,
        cancel_url: str,
        idempotency_key: str,
    ) -> CheckoutSession: ...

    def saved_card(self, payment_intent_id: str) -> PaymentMethod | None: ...

    def verify_event(self, payload: bytes, signature: str | None) -> ProcessorEvent: ...


class Profiles(Protocol):
    def customer_id(self, org_id: str) -> str | None: ...

    def claim_customer(self, org_id: str, customer_id: str, *, at: str) -> str: ...

    def save_payment_method(self, org_id: str, card: PaymentMethod, *, at: str) -> None: ...


class CreditPurchases:
    def __init__(
        self,
        *,
        processor: Processor,
        profiles: Profiles,
        ledger: Credits,
        topups: AutoTopupService,
        on_moved: Callable[[str, datetime], None],
        clock: Clock,
        public_base_url: str,
    ) -> None:
        self.processor = processor
        self.profiles = profiles
        self.ledger = ledger
        self.topups = topups
        self.on_moved = on_moved
        self.clock = clock
        self.public_base_url = public_base_url.rstrip("/")

    # -- the dashboard's checkout ------------------------------------------------------------
    def checkout(self, principal: Principal, body: Any) -> dict[str, Any]:
        """A Checkout Session for `body.amount` USD (5..10000) for the signed-in user's org."""
        require_user_session(principal)
        if not isinstance(body, dict):
            raise InvalidRequest("The body must be a JSON object.", code="invalid_amount")
        unknown = sorted(str(k) for k in body if k != "amount")
        if unknown:
            raise InvalidRequest(
                f"Unknown field {unknown[0]!r}.", code="invalid_request", details={"field": unknown[0]}
            )
        if "amount" not in body:
            raise InvalidRequest("amount is required.", code="invalid_amount", details={"field": "amount"})
        amount = payment_amount(body["amount"])
        at = isoformat(self.clock.now())
        customer = self.profiles.customer_id(principal.org_id)
        if customer is None:
            customer = self.profiles.claim_customer(
                principal.org_id, self.processor.create_customer(org_id=principal.org_id), at=at
            )
        console = f"{self.public_base_url}/console/billing"
        session = self.processor.create_checkout(
            customer_id=customer,
            amount_cents=to_cents(amount),
            org_id=principal.org_id,
            user_id=principal.user_id or "",
            success_url=f"{console}?checkout=success&session_id={{CHECKOUT_SESSION_ID}}",
            cancel_url=f"{console}?checkout=canceled",
            idempotency_key=f"checkout-{secrets.token_hex(12)}",
        )
        logger.info("checkout opened", extra={"org_id": principal.org_id, "session_id": session.session_id})
        return {
            "checkout_url": session.url,
            "session_id": session.session_id,
            "expires_at": session.expires_at,
            "amount": amount.to_api(),
        }

    # -- the processor's webhook -------------------------------------------------------------
    def handle_webhook(self, payload: bytes, signature: str | None) -> dict[str, Any]:
        """Verify and apply one event; the answer says whether it changed anything. Raises
        InvalidRequest `invalid_signature` (400, nothing applied) for a forged one."""
        event = self.processor.verify_event(payload, signature)
        applied = False
        if event.event_type in COMPLETED_EVENTS:
            applied = self._purchase_completed(event)
        elif event.event_type in ("payment_intent.succeeded", "payment_intent.payment_failed"):
            applied = self._topup_outcome(event)
        logger.info(
            "processor event",
            extra={"event_id": event.event_id, "event_type": event.event_type, "applied": applied},
        )
        return {"received": True, "event_id": event.event_id, "applied": applied}

    def _purchase_completed(self, event: ProcessorEvent) -> bool:
        session = event.data
        metadata = session.get("metadata") or {}
        org_id = metadata.get("org_id")
        if session.get("mode") != "payment" or metadata.get("purpose") != CHECKOUT_PURPOSE or not org_id:
            return False
        if session.get("payment_status") != "paid":
            return False  # an asynchronous method: credited on async_payment_succeeded
        at = self.clock.now()
        amount = from_cents(int(session.get("amount_total") or 0))
        problem = purchase_mismatch(session, amount)
        if problem is not None:  # checked before anything is written: nothing is credited
            logger.error(
                "payment event refused: it does not match what checkout sells",
                extra={
                    "event_id": event.event_id,
                    "session_id": session.get("id"),
                    "org_id": org_id,
                    "problem": problem,
                },
            )
            metrics.add_metric(name="PaymentEventsRejected", unit=MetricUnit.Count, value=1)
            return False
        credited = self.ledger.credit(
            org_id,
            amount,
            kind="purchase",
            processor_ref=str(session["id"]),
            at=isoformat(at),
            memo=f"credit purchase {session['id']}",
        )
        if credited:
            self._moved(org_id, at)
        # Also on a repeat: a first delivery that failed after crediting saves the card now.
        intent = session.get("payment_intent")
        if isinstance(intent, str) and intent:
            card = self.processor.saved_card(intent)
            if card is not None:
                self.profiles.save_payment_method(org_id, card, at=isoformat(at))
        return credited

    def _topup_outcome(self, event: ProcessorEvent) -> bool:
        intent = event.data
        metadata = intent.get("metadata") or {}
        org_id, attempt_id = metadata.get("org_id"), metadata.get("attempt_id")
        if metadata.get("purpose") != TOPUP_PURPOSE or not org_id or not attempt_id:
            return False
        charge: Charge = charge_of(intent)
        if event.event_type == "payment_intent.succeeded" and charge.status == "succeeded":
            return self.topups.succeeded(org_id, attempt_id, charge, at=self.clock.now())
        if event.event_type == "payment_intent.payment_failed":
            return self.topups.failed(
                org_id,
                attempt_id,
                processor_ref=charge.processor_ref,
                code=charge.failure_code or "payment_failed",
                reason=charge.failure_reason or "The payment did not go through.",
                at=self.clock.now(),
            )
        return False

    def _moved(self, org_id: str, at: datetime) -> None:
        try:
            self.on_moved(org_id, at)
        except Exception:
            logger.exception("balance watch failed", extra={"org_id": org_id})
