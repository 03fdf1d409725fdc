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
confirm, or that names a payment that is not ours (or that failed before any charge), is
refused (`refuse_payment_event`: logged, `PaymentEventsRejected`) and changes nothing. One of
a payment of ours not credited YET (its checkout record, or its auto top-up attempt still
pending, exists: the processor does not keep its events in order) answers 503
`payment_not_credited`, so the processor delivers it again once the credit has landed.

A dispute opened or lost, and a refund taken back, switch the org's auto top-up off
(`disabled_reason` `payment_disputed` / `payment_refunded`) before the balance watch hears of
the debit: the card that was charged back or refunded is not charged again, off-session, until
the user saves the settings again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
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
    ReversalFigures,
    ReversalKind,
    ReversalStep,
    charge_problem,
    dispute_problem,
)
from batchroute.errors import Unavailable
from batchroute.money import Money, format_amount, money_text
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
# A dispute in any other status is open (or lost): auto top-up is switched off for it.
_DISPUTE_SETTLED_FOR_US = ("won", "warning_closed", "prevented")
_OFF_REASONS: dict[ReversalKind, str] = {"refund": "payment_refunded", "dispute": "payment_disputed"}
_SWITCHED_OFF = " Auto top-up is switched off until its settings are saved again."


class ReversalProcessor(Protocol):
    def charge(self, charge_id: str) -> ProcessorCharge | None: ...

    def dispute(self, dispute_id: str) -> ProcessorDispute | None: ...

    def intent_metadata(self, payment_intent_id: str) -> Mapping[str, str] | None: ...

    def purchase_session(self, payment_intent_id: str) -> ProcessorSession | None: ...


class ReversalTopups(Protocol):
    """services/billing/auto_topup.py:AutoTopupService."""

    def awaiting_credit(self, org_id: str, attempt_id: str, processor_ref: str) -> bool: ...

    def switch_off(self, org_id: str, reason: str, *, since: str | None = None) -> bool: ...


class CheckoutLookup(Protocol):
    def checkout_record(self, session_id: str) -> CheckoutRecord | None: ...


class ReversalLedger(Protocol):
    def credit_reversal(self, org_id: str, processor_ref: str) -> CreditReversal | None: ...

    def record_reversal(
        self, org_id: str, processor_ref: str, figures: ReversalFigures, *, at: str
    ) -> ReversalStep | None: ...


@dataclass(frozen=True)
class Confirmed:
    """The processor's word on a claim: its Charge, its figures, and the dispute's status."""

    charge: ProcessorCharge
    figures: ReversalFigures
    dispute_status: str | None = None


@dataclass(frozen=True)
class CreditedPayment:
    org_id: str
    processor_ref: str  # as credited: the Checkout Session id (purchase) or PaymentIntent id
    attempt_id: str | None = None  # an auto top-up's attempt (None: a purchase)
    recorded: CreditReversal | None = None  # what its marker holds, once credited


@dataclass(eq=False, kw_only=True)
class PaymentReversals:
    processor: ReversalProcessor
    checkouts: CheckoutLookup
    ledger: ReversalLedger
    topups: ReversalTopups
    notifier: Notifier
    on_moved: OnMoved
    clock: Clock

    def apply(self, event: ProcessorEvent) -> bool:
        """Record a refund or a lost dispute the processor confirms against the payment we
        credited, once; True when it changed the record. Raises Unavailable
        `payment_not_credited` (503: delivered again) when the payment is ours but not
        credited yet."""
        claim = event.subject
        if not isinstance(claim, ReversalClaim) or not claim.charge_id:
            return False
        confirmed = self._confirmed(event, claim)
        if confirmed is None:
            return False
        credited = self._credited(event, claim, confirmed.charge)
        if credited is None:
            return False
        at = self.clock.now()
        if claim.kind == "dispute" and confirmed.figures.confirmed_cents == 0:
            self._disputed(
                credited, claim, confirmed.dispute_status or "", at=at, since=_instant(event.created)
            )
            return False
        # before the debit is recorded and the balance watch hears of it: no off-session
        # charge of the refunded (or charged back) card follows it
        switched_off = self._switch_off(credited, claim, confirmed, since=_instant(event.created))
        step = self.ledger.record_reversal(
            credited.org_id, credited.processor_ref, confirmed.figures, at=isoformat(at)
        )
        if step is None:
            return False  # recorded before (a repeat, or an older figure delivered late)
        if step.failed_cents:
            self._refund_failed(credited, claim, step, at=at)
        elif not step.quiet:
            self._reversed(credited, claim, step, at=at, switched_off=switched_off)
        return True

    def _switch_off(
        self, credited: CreditedPayment, claim: ReversalClaim, confirmed: Confirmed, *, since: str
    ) -> bool:
        """Switch the org's auto top-up off for a refund or lost dispute beyond what the
        payment's marker holds (not for a repeat, an older figure, or a refund that failed);
        True when it was switched off now."""
        was = credited.recorded or CreditReversal(credited_micros=0)
        grows = confirmed.figures.beyond(was)
        return grows and self.topups.switch_off(credited.org_id, _OFF_REASONS[claim.kind], since=since)

    def _confirmed(self, event: ProcessorEvent, claim: ReversalClaim) -> Confirmed | None:
        """The processor's own Charge (and Dispute), once they confirm the claim; None after
        refusing the event."""
        charge = self.processor.charge(claim.charge_id)
        problem = charge_problem(charge, claim)
        confirmed = None
        if charge is not None and problem is None:
            refunded = ReversalFigures("refund", charge.refunded_cents, charge.failed_refund_cents)
            confirmed = Confirmed(charge, refunded)
            if claim.kind == "dispute":
                dispute = self.processor.dispute(claim.dispute_id or "")
                problem = dispute_problem(dispute, claim)
                if dispute is not None:
                    confirmed = Confirmed(
                        charge, ReversalFigures("dispute", dispute.lost_cents), dispute.status
                    )
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

    def _credited(
        self, event: ProcessorEvent, claim: ReversalClaim, charge: ProcessorCharge
    ) -> CreditedPayment | None:
        """The credit the charge's payment made, as the service made it. None after refusing
        the event when the service never credited it and never will (not ours, or an auto
        top-up that failed before any charge); Unavailable when it is ours and its credit
        may still come: the reversal is applied on a later delivery, after the credit."""
        found = self._ours(charge)
        recorded = self.ledger.credit_reversal(found.org_id, found.processor_ref) if found else None
        if found is not None and recorded is not None:
            return replace(found, recorded=recorded)
        context = {
            "event_id": event.event_id,
            "event_type": event.event_type,
            "charge_id": claim.charge_id,
            "payment_intent": charge.payment_intent,
        }
        if found is not None and self._awaited(found):
            logger.warning(
                "payment reversal deferred: its payment is not credited yet",
                extra={**context, "org_id": found.org_id, "processor_ref": found.processor_ref},
            )
            raise Unavailable(
                "The payment this event reverses is not credited yet; deliver it again later.",
                code="payment_not_credited",
            )
        refuse_payment_event("a payment this service never credited", **context)
        return None

    def _awaited(self, payment: CreditedPayment) -> bool:
        """Whether a payment of ours not credited may still be: a purchase (our checkout
        record of it exists, its completion is on its way), or a top-up whose attempt may
        still take its success."""
        if payment.attempt_id is None:
            return True
        return self.topups.awaiting_credit(payment.org_id, payment.attempt_id, payment.processor_ref)

    def _ours(self, charge: ProcessorCharge) -> CreditedPayment | None:
        """The payment the charge paid, as the service credits it (credited or not); None
        when it is not ours."""
        intent = charge.payment_intent or ""
        metadata = self.processor.intent_metadata(intent)
        if metadata is None:
            return None
        org_id = metadata.get("org_id")
        if metadata.get("purpose") == TOPUP_PURPOSE and org_id:
            return CreditedPayment(org_id, intent, attempt_id=metadata.get("attempt_id") or "")
        if metadata.get("purpose") == PURCHASE_PURPOSE:
            session = self.processor.purchase_session(intent)
            record = self.checkouts.checkout_record(session.session_id) if session else None
            return CreditedPayment(record.org_id, record.session_id) if record else None
        return None

    def _reversed(
        self,
        credited: CreditedPayment,
        claim: ReversalClaim,
        step: ReversalStep,
        *,
        at: datetime,
        switched_off: bool = False,
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
        reversed_text = money_text(Money(after.reversed_cents * MICROS_PER_CENT))
        message = f"A {claim.kind} of {reversed_text} on payment {credited.processor_ref}"
        message += f" took {money_text(Money(step.debit_micros))} of credit back."
        if switched_off:
            message += _SWITCHED_OFF
        self._tell_reversed(
            credited,
            after,
            {
                "reversal": claim.kind,
                "taken_back": _usd(step.debit_micros),
                "not_recovered": _usd(step.unrecovered_micros),
                "message": message,
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
            f"{money_text(Money(step.credit_back_micros))} of credit given back"
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
                "message": f"A refund of {money_text(Money(step.failed_cents * MICROS_PER_CENT))} "
                f"on payment {credited.processor_ref} "
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
        self, credited: CreditedPayment, claim: ReversalClaim, status: str, *, at: datetime, since: str
    ) -> None:
        """An opened (or won) dispute: logged, counted, told to the org; an open one switches
        auto top-up off (unless the user saved its settings after the event)."""
        message = f"Payment {credited.processor_ref} is disputed ({status})."
        if status not in _DISPUTE_SETTLED_FOR_US and self.topups.switch_off(
            credited.org_id, "payment_disputed", since=since
        ):
            message += _SWITCHED_OFF
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
                    "message": message,
                },
            ),
            at=at,
        )


def _instant(epoch_seconds: int) -> str:
    """An event's `created` as the service stamps instants."""
    return isoformat(datetime.fromtimestamp(epoch_seconds, UTC))


def _usd(micros: int) -> str:
    return format_amount(Money(micros).amount)
