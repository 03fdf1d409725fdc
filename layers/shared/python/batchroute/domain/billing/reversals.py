"""Refunds and lost disputes of a credited payment (docs/payments.md, "Refunds and disputes").

Money the processor gave back to the payer (a refund) or took back from the service (a lost
dispute, a chargeback) is taken back from the wallet the payment credited, under the same
processor reference, at most once and never below zero: what is still available (balance -
reserved) is debited as a `refund` ledger entry, the rest is recorded as not recovered (shown
by the reconciliation, alerted). The amounts recorded are the processor's own cumulative
figures (a Charge's `amount_refunded`; a lost Dispute's `amount`), never an event's, so a
repeated, reordered or partial delivery converges on the same record. Pure: the ledger store
reads and writes (`adapters/dynamo/ledger.py record_reversal`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

ReversalKind = Literal["refund", "dispute"]
# The processor's amounts are in cents; the ledger's in micro-dollars.
MICROS_PER_CENT = 10_000


@dataclass(frozen=True)
class ReversalClaim:
    """What a refund or dispute event says. Read only to know what to ask the processor:
    `charge_id` names the Charge, `dispute_id` the Dispute, `claimed_cents` what the event
    says was refunded (the Charge's `amount_refunded`) or lost (a lost Dispute's amount)."""

    kind: ReversalKind
    charge_id: str
    dispute_id: str | None = None
    claimed_cents: int = 0


@dataclass(frozen=True)
class ProcessorCharge:
    """A Charge as the processor has it."""

    charge_id: str
    payment_intent: str | None
    amount_cents: int
    refunded_cents: int  # `amount_refunded`, cumulative
    currency: str
    status: str


@dataclass(frozen=True)
class ProcessorDispute:
    """A Dispute as the processor has it."""

    dispute_id: str
    charge_id: str
    amount_cents: int
    status: str  # warning_needs_response, needs_response, under_review, won, lost, ...
    currency: str

    @property
    def lost_cents(self) -> int:
        return self.amount_cents if self.status == "lost" else 0


def charge_problem(charge: ProcessorCharge | None, claim: ReversalClaim) -> str | None:
    """Why the processor's Charge cannot be a reversal of one of our payments, or None."""
    if charge is None:
        return "the processor does not know this charge"
    if charge.charge_id != claim.charge_id:
        return f"the processor's charge is {charge.charge_id}, not {claim.charge_id}"
    if charge.status != "succeeded" or not charge.payment_intent:
        return f"the processor's charge is {charge.status!r}, without a payment of ours"
    if charge.currency != "usd":
        return f"currency {charge.currency or 'missing'!r}: the service is paid in USD only"
    if claim.kind == "refund" and claim.claimed_cents > charge.refunded_cents:
        return f"the event says {claim.claimed_cents} cents refunded, the processor {charge.refunded_cents}"
    return None


def dispute_problem(dispute: ProcessorDispute | None, claim: ReversalClaim) -> str | None:
    """Why the processor's Dispute does not confirm the event, or None."""
    if dispute is None:
        return "the processor does not know this dispute"
    if dispute.charge_id != claim.charge_id:
        return f"the processor's dispute is of {dispute.charge_id}, not {claim.charge_id}"
    if claim.claimed_cents > dispute.lost_cents:
        return f"the event says {claim.claimed_cents} cents lost, the processor {dispute.lost_cents}"
    return None


@dataclass(frozen=True)
class CreditReversal:
    """What was recorded against one processor credit (on its `PAYMENT#` marker)."""

    credited_micros: int
    refunded_cents: int = 0  # the processor's `amount_refunded` last recorded
    disputed_cents: int = 0  # the lost disputes' amount last recorded
    recovered_micros: int = 0  # taken back from the wallet (`refund` entries)
    unrecovered_micros: int = 0  # owed back but already spent: the service's loss
    version: int = 0

    @property
    def reversed_cents(self) -> int:
        return self.refunded_cents + self.disputed_cents

    @property
    def owed_micros(self) -> int:
        """What the recorded refunds and lost disputes take back, at most the credit."""
        return min(self.credited_micros, self.reversed_cents * MICROS_PER_CENT)


@dataclass(frozen=True)
class ReversalStep:
    """One recorded change: the record after it, what is debited now, what is not recovered."""

    after: CreditReversal
    debit_micros: int
    unrecovered_micros: int


def reversal_step(
    current: CreditReversal, *, kind: ReversalKind, confirmed_cents: int, available_micros: int
) -> ReversalStep | None:
    """The step that records the processor's `confirmed_cents` (refunded, or lost in
    disputes), or None when the record already holds that much (a repeat, or an older
    figure delivered late). Takes what is owed now from `available_micros`, at most; the rest
    is not recovered. Never debits more than the credit, never twice."""
    recorded = current.refunded_cents if kind == "refund" else current.disputed_cents
    if confirmed_cents <= recorded:
        return None
    after = (
        replace(current, refunded_cents=confirmed_cents)
        if kind == "refund"
        else replace(current, disputed_cents=confirmed_cents)
    )
    taken = current.recovered_micros + current.unrecovered_micros
    owed = max(0, after.owed_micros - taken)
    debit = min(owed, max(0, available_micros))
    after = replace(
        after,
        recovered_micros=current.recovered_micros + debit,
        unrecovered_micros=current.unrecovered_micros + owed - debit,
        version=current.version + 1,
    )
    return ReversalStep(after=after, debit_micros=debit, unrecovered_micros=owed - debit)
