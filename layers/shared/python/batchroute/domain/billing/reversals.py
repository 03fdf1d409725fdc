"""Refunds and lost disputes of a credited payment (docs/payments.md, "Refunds and disputes").

Money the processor gave back to the payer (a refund) or took back from the service (a lost
dispute, a chargeback) is taken back from the wallet the payment credited, under the same
processor reference, at most once and never below zero: what is still available (balance -
reserved) is debited as a `refund` ledger entry, the rest is recorded as not recovered (shown
by the reconciliation, alerted). The amounts recorded are the processor's own cumulative
figures (a Charge's `amount_refunded`; a lost Dispute's `amount`), never an event's, so a
repeated, reordered or partial delivery converges on the same record.

A refund can fail after it succeeded (the payer's card or bank refuses it: the Refund turns
`failed`, the money comes back to the service's processor balance and the Charge's
`amount_refunded` goes down again). The record keeps the failed refunds' total as well, and
takes each of "ever refunded" (refunded + failed) and "failed" as the larger of recorded and
read, so a stale read never lowers the refunded figure and a reported failure lowers it
once; what the record took for the failed part is then undone once: first from the part
recorded as not recovered (never taken), the rest given back to the wallet (a
`refund_reversed` entry). A lost dispute's amount never shrinks. Pure: the ledger store reads
and writes (`adapters/dynamo/ledger.py record_reversal`).
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
    refunded_cents: int  # `amount_refunded`, cumulative (a failed refund no longer counts)
    currency: str
    status: str
    failed_refund_cents: int = 0  # refunds of it that failed or were canceled, in all


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
    # A `charge.refunded` sent before one of its refunds failed claims more than the Charge
    # shows now; only more than was ever refunded (failed refunds included) is a forgery.
    ever_refunded = charge.refunded_cents + charge.failed_refund_cents
    if claim.kind == "refund" and claim.claimed_cents > ever_refunded:
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
    recovered_micros: int = 0  # taken back from the wallet (`refund` entries, less `refund_reversed`)
    unrecovered_micros: int = 0  # owed back but already spent: the service's loss
    version: int = 0
    refund_failed_cents: int = 0  # the processor's failed (or canceled) refunds last recorded

    @property
    def reversed_cents(self) -> int:
        return self.refunded_cents + self.disputed_cents

    @property
    def owed_micros(self) -> int:
        """What the recorded refunds and lost disputes take back, at most the credit."""
        return min(self.credited_micros, self.reversed_cents * MICROS_PER_CENT)


@dataclass(frozen=True)
class ReversalFigures:
    """The processor's own figures for a claim: the cents refunded (a Charge's
    `amount_refunded`) or lost in disputes, in all, and for a refund what its failed refunds
    came to."""

    kind: ReversalKind
    confirmed_cents: int
    failed_cents: int = 0

    def beyond(self, recorded: CreditReversal) -> bool:
        """Whether they go past what `recorded` holds (not a repeat, an older figure, or a
        refund that failed)."""
        if self.kind == "dispute":
            return self.confirmed_cents > recorded.disputed_cents
        ever = recorded.refunded_cents + recorded.refund_failed_cents
        return self.confirmed_cents + self.failed_cents > ever


@dataclass(frozen=True)
class ReversalStep:
    """One recorded change: the record after it, what is debited now, what is not recovered;
    for refunds that failed, also how many refunded cents failed, what is given back to the
    wallet now and what is no longer owed of the part not recovered. `quiet`: only the
    processor's failed total moved (a refund failed and another of as much was made since):
    nothing to tell."""

    after: CreditReversal
    debit_micros: int
    unrecovered_micros: int
    failed_cents: int = 0
    credit_back_micros: int = 0
    unrecovered_cleared_micros: int = 0
    quiet: bool = False


def reversal_step(
    current: CreditReversal, figures: ReversalFigures, *, available_micros: int
) -> ReversalStep | None:
    """The step that records the processor's `figures`, or None when the record already
    holds them (a repeat, or an older read delivered late). Takes what is owed now from
    `available_micros`, at most; the rest is not recovered. A refunded figure lowered by a
    failed refund undoes what it took (`refund_failed_step`). Never debits more than the
    credit, never twice; never gives back more than it took."""
    confirmed_cents = figures.confirmed_cents
    if figures.kind == "dispute":
        if confirmed_cents <= current.disputed_cents:
            return None  # a lost dispute stays lost: a lower figure is an older one
        return _taken_step(current, replace(current, disputed_cents=confirmed_cents), available_micros)
    after = refund_figures(current, refunded_cents=confirmed_cents, failed_cents=figures.failed_cents)
    if after == current:
        return None
    if after.refunded_cents < current.refunded_cents:
        return refund_failed_step(current, after)
    step = _taken_step(current, after, available_micros)
    return replace(step, quiet=after.refunded_cents == current.refunded_cents)


def refund_figures(current: CreditReversal, *, refunded_cents: int, failed_cents: int) -> CreditReversal:
    """The record's refund figures after the processor's read: `amount_refunded` and the
    failed refunds' total. Both of what was ever refunded (refunded + failed) and what failed
    only grow at the processor, so each is the larger of the recorded and the read one: a
    stale read (an event handled late, or alongside a newer one) can never lower the refunded
    figure; only a failure the processor reports can, and by no more than it."""
    failed = max(current.refund_failed_cents, failed_cents)
    ever = max(current.refunded_cents + current.refund_failed_cents, refunded_cents + failed_cents)
    return replace(current, refunded_cents=ever - failed, refund_failed_cents=failed)


def _taken_step(current: CreditReversal, after: CreditReversal, available_micros: int) -> ReversalStep:
    """Record higher figures: what they owe beyond what was taken, from what is available."""
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


def refund_failed_step(current: CreditReversal, after: CreditReversal) -> ReversalStep:
    """Record `after`'s LOWER refunded figure: a refund the processor had made failed, and
    the money came back to the service. What the record took for the failed part (beyond
    what the refunds still standing and the lost disputes owe) is undone: first from the part
    recorded as not recovered (the service never took it), the rest given back to the
    wallet. Recorded even when nothing moves (the credit's cap still covers it), so that a
    later refund of the same money is taken back again."""
    taken = current.recovered_micros + current.unrecovered_micros
    excess = max(0, taken - after.owed_micros)
    cleared = min(excess, current.unrecovered_micros)
    back = excess - cleared
    after = replace(
        after,
        recovered_micros=current.recovered_micros - back,
        unrecovered_micros=current.unrecovered_micros - cleared,
        version=current.version + 1,
    )
    return ReversalStep(
        after=after,
        debit_micros=0,
        unrecovered_micros=0,
        failed_cents=current.refunded_cents - after.refunded_cents,
        credit_back_micros=back,
        unrecovered_cleared_micros=cleared,
    )
