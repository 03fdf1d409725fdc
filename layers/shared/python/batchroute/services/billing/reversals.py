"""Refunds and disputes of a credited payment (docs/payments.md, "Refunds and disputes").

`charge.refunded` / `charge.refund.updated` / `refund.failed` and `charge.dispute.created` /
`charge.dispute.closed` name a Charge (and a Dispute); nothing else an event says is trusted.
The Charge (and the Dispute) are read back from the processor; the payment they belong to is
found as the service credited it (an auto top-up: its PaymentIntent; a purchase: the
Checkout Session that PaymentIntent paid, and our checkout record of it), and only a payment
the ledger credited (its `PAYMENT#` marker) is touched. The processor's cumulative refunded
amount, or a lost dispute's amount, is then recorded against the credit exactly once
(`LedgerStore.record_reversal`): what is still available is debited as a `refund` entry, the
rest recorded as not recovered. A dispute debits at its loss, not at its opening: an
opened (or won) dispute is alerted and moves no money. A refund that fails after it was
recorded lowers the Charge's `amount_refunded` again: the lower figure is recorded once too,
and what was taken for it is undone (first the part not recovered, then credit given back to
the wallet as a `refund_reversed` entry).

Every recorded reversal is logged (org, payment, amounts), counted in `PaymentReversals`
(and `PaymentReversalUnrecovered` when part was already spent, which alarms) and sent to the
org as `billing.payment_reversed`; a dispute opened or won is logged, counted in
`PaymentDisputes` and sent as `billing.payment_disputed`; a refund that failed is logged,
counted in `PaymentRefundsFailed` and sent as `billing.payment_reversed` with `reversal`
`refund_failed` (and what was `credited_back`). An event that the processor does not
confirm, or that names a payment the service never credited, is refused
(`refuse_payment_event`: logged, `PaymentEventsRejected`) and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from aws_lambda_powertools.metrics import MetricUnit

from batchroute.clock import Clock, isoformat
from batchroute.domain.billing.alerts import PAYMENT_DISPUTED, PAYMENT_REVERSED, Alert, AlertData
from batchroute.domain.billing.payments import CheckoutRecord, ProcessorEvent, ProcessorSession
from batchroute.domain.billing.reconciliation import PURCHASE_PURPOSE, TOPUP_PURPOSE
from batchroute.domain.billing.reversals import (
    MICROS_PER_CENT,
    CreditReversal,
    ProcessorCharge,
    ProcessorDispute,
    ReversalClaim,
    ReversalKind,
    ReversalStep,
    charge_problem,
    dispute_problem,
)
from batchroute.money import Money, format_amount
from batchroute.observability import logger, metrics
from batchroute.services.billing.auto_topup import OnMoved, tell_moved
from batchroute.services.billing.payment_notices import notify_quietly
from batchroute.services.billing.payment_refusals import refuse_payment_event
from batchroute.services.billing.ports import Notifier

REVERSAL_EVENTS = (
    "charge.refunded",
    "charge.refund.updated",  # deprecated by Stripe for `refund.updated`, still sent
    "refund.failed",  # what Stripe sends when a refund fails (docs/payments.md)
    "charge.dispute.created",
    "charge.dispute.closed",
)
REVERSED_METRIC = "PaymentReversals"
UNRECOVERED_METRIC = "PaymentReversalUnrecovered"
DISPUTED_METRIC = "PaymentDisputes"
REFUND_FAILED_METRIC = "PaymentRefundsFailed"


class ReversalProcessor(Protocol):
    def charge(self, charge_id: str) -> ProcessorCharge | None: ...

    def dispute(self, dispute_id: str) -> ProcessorDispute | None: ...

    def intent_metadata(self, payment_intent_id: str) -> Mapping[str, str] | None: ...

    def purchase_session(self, payment_intent_id: str) -> ProcessorSession | None: ...


class CheckoutLookup(Protocol):
    def checkout_record(self, session_id: str) -> CheckoutRecord | None: ...


class ReversalLedger(Protocol):
    def credit_reversal(self, org_id: str, processor_ref: str) -> CreditReversal | None: ...

    def record_reversal(
        self,
        org_id: str,
        processor_ref: str,
        *,
        kind: ReversalKind,
        confirmed_cents: int,
        at: str,
        failed_cents: int = 0,
    ) -> ReversalStep | None: ...


@dataclass(frozen=True)
class Confirmed:
    """The processor's word on a claim: its Charge, the cents refunded (refund) or lost
    (dispute) in all, the refunds that failed (refund), and the dispute's status."""

    charge: ProcessorCharge
    cents: int
    dispute_status: str | None = None
    failed_cents: int = 0


@dataclass(frozen=True)
class CreditedPayment:
    org_id: str
    processor_ref: str  # as credited: the Checkout Session id (purchase) or PaymentIntent id


@dataclass(eq=False, kw_only=True)
class PaymentReversals:
    processor: ReversalProcessor
    checkouts: CheckoutLookup
    ledger: ReversalLedger
    notifier: Notifier
    on_moved: OnMoved
    clock: Clock

    def apply(self, event: ProcessorEvent) -> bool:
        """Record a refund or a lost dispute the processor confirms against the payment we
        credited, once; True when it changed the record."""
        claim = event.subject
        if not isinstance(claim, ReversalClaim) or not claim.charge_id:
            return False
        confirmed = self._confirmed(event, claim)
        if confirmed is None:
            return False
        credited = self._credited(confirmed.charge)
        if credited is None:
            refuse_payment_event(
                "a payment this service never credited",
                event_id=event.event_id,
                event_type=event.event_type,
                charge_id=claim.charge_id,
                payment_intent=confirmed.charge.payment_intent,
            )
            return False
        at = self.clock.now()
        if claim.kind == "dispute" and confirmed.cents == 0:
            self._disputed(credited, claim, confirmed.dispute_status or "", at=at)
            return False
        step = self.ledger.record_reversal(
            credited.org_id,
            credited.processor_ref,
            kind=claim.kind,
            confirmed_cents=confirmed.cents,
            at=isoformat(at),
            failed_cents=confirmed.failed_cents,
        )
        if step is None:
            return False  # recorded before (a repeat, or an older figure delivered late)
        if step.failed_cents:
            self._refund_failed(credited, claim, step, at=at)
        elif not step.quiet:
            self._reversed(credited, claim, step, at=at)
        return True

    def _confirmed(self, event: ProcessorEvent, claim: ReversalClaim) -> Confirmed | None:
        """The processor's own Charge (and Dispute), once they confirm the claim; None after
        refusing the event."""
        charge = self.processor.charge(claim.charge_id)
        problem = charge_problem(charge, claim)
        confirmed = None
        if charge is not None and problem is None:
            confirmed = Confirmed(charge, charge.refunded_cents, failed_cents=charge.failed_refund_cents)
            if claim.kind == "dispute":
                dispute = self.processor.dispute(claim.dispute_id or "")
                problem = dispute_problem(dispute, claim)
                if dispute is not None:
                    confirmed = Confirmed(charge, dispute.lost_cents, dispute.status)
        if problem is not None or confirmed is None:
            refuse_payment_event(
                problem or "the processor does not confirm the event",
                event_id=event.event_id,
                event_type=event.event_type,
                charge_id=claim.charge_id,
                dispute_id=claim.dispute_id,
            )
            return None
        return confirmed

    def _credited(self, charge: ProcessorCharge) -> CreditedPayment | None:
        """The credit the charge's payment made, as the service made it; None when the
        service never credited it (not ours, or never paid in)."""
        intent = charge.payment_intent or ""
        metadata = self.processor.intent_metadata(intent)
        if metadata is None:
            return None
        found: CreditedPayment | None = None
        if metadata.get("purpose") == TOPUP_PURPOSE and metadata.get("org_id"):
            found = CreditedPayment(metadata["org_id"], intent)
        elif metadata.get("purpose") == PURCHASE_PURPOSE:
            session = self.processor.purchase_session(intent)
            record = self.checkouts.checkout_record(session.session_id) if session else None
            found = CreditedPayment(record.org_id, record.session_id) if record else None
        if found is None or self.ledger.credit_reversal(found.org_id, found.processor_ref) is None:
            return None
        return found

    def _reversed(
        self, credited: CreditedPayment, claim: ReversalClaim, step: ReversalStep, *, at: datetime
    ) -> None:
        after = step.after
        data = {
            "org_id": credited.org_id,
            "processor_ref": credited.processor_ref,
            "charge_id": claim.charge_id,
            "reversal": claim.kind,
            "reversed_cents": after.reversed_cents,
            "taken_back_micros": step.debit_micros,
            "not_recovered_micros": step.unrecovered_micros,
        }
        log = logger.error if step.unrecovered_micros else logger.warning
        log("payment reversed: credit taken back", extra=data)
        metrics.add_metric(name=REVERSED_METRIC, unit=MetricUnit.Count, value=1)
        if step.unrecovered_micros:
            metrics.add_metric(name=UNRECOVERED_METRIC, unit=MetricUnit.Count, value=1)
        reversed_text = _usd(after.reversed_cents * MICROS_PER_CENT)
        message = f"A {claim.kind} of {reversed_text} USD on payment {credited.processor_ref}"
        self._tell_reversed(
            credited,
            after,
            {
                "reversal": claim.kind,
                "taken_back": _usd(step.debit_micros),
                "not_recovered": _usd(step.unrecovered_micros),
                "message": f"{message} took {_usd(step.debit_micros)} USD of credit back.",
            },
            at=at,
        )
        if step.debit_micros:
            tell_moved(self.on_moved, credited.org_id, at)

    def _refund_failed(
        self, credited: CreditedPayment, claim: ReversalClaim, step: ReversalStep, *, at: datetime
    ) -> None:
        """A refund the processor had made failed: logged, counted, told to the org; the
        wallet listeners hear of the credit given back."""
        after = step.after
        logger.warning(
            "payment refund failed: credit given back",
            extra={
                "org_id": credited.org_id,
                "processor_ref": credited.processor_ref,
                "charge_id": claim.charge_id,
                "reversal": "refund_failed",
                "failed_cents": step.failed_cents,
                "reversed_cents": after.reversed_cents,
                "credited_back_micros": step.credit_back_micros,
                "unrecovered_cleared_micros": step.unrecovered_cleared_micros,
            },
        )
        metrics.add_metric(name=REFUND_FAILED_METRIC, unit=MetricUnit.Count, value=1)
        failed_text, back_text = _usd(step.failed_cents * MICROS_PER_CENT), _usd(step.credit_back_micros)
        outcome = (
            f"{back_text} USD of credit given back"
            if step.credit_back_micros
            else "no credit had been taken back for it"
        )
        self._tell_reversed(
            credited,
            after,
            {
                "reversal": "refund_failed",
                "refund_failed": failed_text,
                "credited_back": back_text,
                "taken_back": _usd(0),
                "not_recovered": _usd(0),
                "message": f"A refund of {failed_text} USD on payment {credited.processor_ref} "
                f"failed at the processor: {outcome}.",
            },
            at=at,
        )
        if step.credit_back_micros:
            tell_moved(self.on_moved, credited.org_id, at)

    def _tell_reversed(
        self, credited: CreditedPayment, after: CreditReversal, data: AlertData, *, at: datetime
    ) -> None:
        """`billing.payment_reversed` for the record `after`, once per its version: `data`
        with the payment's reference and what is reversed of it in all."""
        details = data.copy()
        details["processor_reference"] = credited.processor_ref
        details["reversed"] = _usd(after.reversed_cents * MICROS_PER_CENT)
        once_key = f"payment_reversed:{credited.processor_ref}:{after.version}"
        notify_quietly(self.notifier, credited.org_id, Alert(PAYMENT_REVERSED, once_key, details), at=at)

    def _disputed(
        self, credited: CreditedPayment, claim: ReversalClaim, status: str, *, at: datetime
    ) -> None:
        logger.warning(
            "payment disputed: no credit taken back unless the dispute is lost",
            extra={
                "org_id": credited.org_id,
                "processor_ref": credited.processor_ref,
                "charge_id": claim.charge_id,
                "dispute_id": claim.dispute_id,
                "dispute_status": status,
            },
        )
        metrics.add_metric(name=DISPUTED_METRIC, unit=MetricUnit.Count, value=1)
        notify_quietly(
            self.notifier,
            credited.org_id,
            Alert(
                PAYMENT_DISPUTED,
                f"payment_disputed:{claim.dispute_id}:{status}",
                {
                    "processor_reference": credited.processor_ref,
                    "dispute_id": claim.dispute_id or "",
                    "dispute_status": status,
                    "message": f"Payment {credited.processor_ref} is disputed ({status}).",
                },
            ),
            at=at,
        )


def _usd(micros: int) -> str:
    return format_amount(Money(micros).amount)
