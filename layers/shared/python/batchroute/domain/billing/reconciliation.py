"""Payments reconciliation: the ledger's processor credits against the processor's successful
payments (docs/payments.md, "Reconciliation").

Money comes in only as a purchase (credited under its Checkout Session id) or an auto top-up
(credited under its PaymentIntent id). Every successful payment the processor took for one
of them should be credited exactly once, to the org its metadata names, for the amount and
currency it took; every such credit should stand on a successful payment. `reconcile` lists
each way the two sides disagree. Pure: the caller reads both sides.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal, TypedDict

from batchroute.domain.billing.ledger import ProcessorCredit
from batchroute.domain.views import view_of
from batchroute.money import Money, format_amount

# The `metadata.purpose` the service puts on its own payments (services/billing/payments.py).
PURCHASE_PURPOSE = "credit_purchase"
TOPUP_PURPOSE = "auto_topup"
CREDITED_PURPOSES = frozenset({PURCHASE_PURPOSE, TOPUP_PURPOSE})
# The processor's amounts are in the currency's minor unit; the ledger's in micro-units.
_MICROS_PER_MINOR_UNIT = 10_000

DifferenceKind = Literal[
    "not_credited",  # paid at the processor, never credited
    "no_payment",  # credited, but no successful payment at the processor
    "amount_differs",
    "currency_differs",
    "org_differs",
    "credited_twice",  # one payment, more than one credit
    "reversal_not_recorded",  # refunded / lost in dispute at the processor, not on the ledger
    "reversal_unrecovered",  # recorded, but part of it was spent before: not taken back
    "refund_failure_not_recorded",  # recorded as refunded, but the refund failed at the processor
]


@dataclass(frozen=True)
class LedgerCredit:
    """One processor credit on the ledger (its exactly-once marker)."""

    org_id: str
    processor_ref: str  # a Checkout Session id (purchase) or a PaymentIntent id (top-up)
    kind: ProcessorCredit
    amount: Money
    at: str  # when it was credited (ISO-8601 UTC)
    # refunded + lost in disputes, as recorded (docs/payments.md): a refund that failed and
    # was recorded as failed (its credit given back) no longer counts, as at the processor
    reversed_cents: int = 0
    unrecovered_micros: int = 0  # of that, what the wallet no longer held


@dataclass(frozen=True)
class ProcessorPayment:
    """One successful payment at the processor (a succeeded PaymentIntent)."""

    payment_id: str  # the PaymentIntent id
    session_id: str | None  # the Checkout Session that took it, for a purchase
    org_id: str | None  # from its metadata
    amount_minor: int  # what it received, in the currency's minor unit (cents)
    currency: str
    purpose: str | None  # from its metadata
    created: str  # ISO-8601 UTC
    reversed_cents: int = 0  # refunded (its charge's `amount_refunded`) + lost disputes

    @property
    def refs(self) -> tuple[str, ...]:
        """The ids a credit of this payment may be recorded under."""
        return (self.payment_id,) if self.session_id is None else (self.payment_id, self.session_id)

    def paid_text(self) -> str:
        return _money_text(Money(_minor_to_micros(self.amount_minor), self.currency.lower()))


class DifferenceView(TypedDict):
    kind: DifferenceKind
    org_id: str | None
    processor_ref: str
    credited_refs: list[str]
    paid: str | None
    credited: str | None
    detail: str


class ReportView(TypedDict):
    since: str
    settled_before: str
    credits: int
    payments: int
    matched: int
    foreign_payments: int
    awaiting_credit: list[str]
    differences: list[DifferenceView]
    counts: dict[str, int]


@dataclass(frozen=True)
class Difference:
    kind: DifferenceKind
    org_id: str | None
    processor_ref: str  # the payment's id, or the credit's ref when no payment matches
    detail: str
    credited: tuple[str, ...] = ()  # the refs it was credited under
    paid: str | None = None  # e.g. "25.00 usd"
    credited_amount: str | None = None

    def to_dict(self) -> DifferenceView:
        return view_of(self, DifferenceView, credited_refs=list(self.credited), credited=self.credited_amount)


@dataclass(frozen=True)
class ReconciliationReport:
    since: str
    settled_before: str  # payments after this may still be awaiting their webhook
    credits: int
    payments: int
    matched: int
    differences: tuple[Difference, ...]
    awaiting_credit: tuple[str, ...] = ()  # recent payments not credited yet (not differences)
    foreign_payments: int = 0  # payments that are not the service's (other purposes)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not self.differences

    def to_dict(self) -> ReportView:
        return view_of(
            self,
            ReportView,
            awaiting_credit=list(self.awaiting_credit),
            differences=[d.to_dict() for d in self.differences],
            counts=dict(self.counts),
        )


def reconcile(
    credits: Iterable[LedgerCredit],
    payments: Iterable[ProcessorPayment],
    *,
    since: str,
    settled_before: str,
) -> ReconciliationReport:
    """Every difference between the credits made at or after `since` and the service's
    successful payments. `payments` may reach back before `since` (a payment just before it
    credited just after it is no difference); only those created at or after `since` are
    owed a credit. A payment created at or after `settled_before` and not credited yet is
    `awaiting_credit` (its webhook may still be on its way), not a difference."""
    in_window = [c for c in credits if c.at >= since]
    all_payments = list(payments)
    ours = [p for p in all_payments if p.purpose in CREDITED_PURPOSES]
    by_ref = {ref: p for p in ours for ref in p.refs}
    credited: dict[str, list[LedgerCredit]] = defaultdict(list)
    differences: list[Difference] = []
    for credit in sorted(in_window, key=lambda c: (c.at, c.processor_ref)):
        payment = by_ref.get(credit.processor_ref)
        if payment is None:
            differences.append(_no_payment(credit))
        else:
            credited[payment.payment_id].append(credit)
    awaiting: list[str] = []
    matched = 0
    for payment in sorted(ours, key=lambda p: (p.created, p.payment_id)):
        found = credited.get(payment.payment_id, [])
        if not found:
            if payment.created < since:
                continue  # credited (or not) before the window: not this run's question
            if payment.created >= settled_before:
                awaiting.append(payment.payment_id)
                continue
            if payment.reversed_cents < payment.amount_minor:  # refunded in full: nothing owed
                differences.append(_not_credited(payment))
            continue
        problems = _compare(payment, found)
        differences.extend(problems)
        matched += not problems
    counts: dict[str, int] = defaultdict(int)
    for difference in differences:
        counts[difference.kind] += 1
    return ReconciliationReport(
        since=since,
        settled_before=settled_before,
        credits=len(in_window),
        payments=sum(1 for p in ours if p.created >= since),
        matched=matched,
        differences=tuple(differences),
        awaiting_credit=tuple(awaiting),
        foreign_payments=len(all_payments) - len(ours),
        counts=dict(counts),
    )


def _no_payment(credit: LedgerCredit) -> Difference:
    return Difference(
        kind="no_payment",
        org_id=credit.org_id,
        processor_ref=credit.processor_ref,
        detail=f"{credit.kind} credited at {credit.at} without a successful payment at the processor",
        credited=(credit.processor_ref,),
        credited_amount=_money_text(credit.amount),
    )


def _not_credited(payment: ProcessorPayment) -> Difference:
    """A payment never credited, less what the processor gave back of it (a refund, a lost
    dispute): only the rest is owed, and the runbook's hand grant is that much."""
    detail = f"paid at {payment.created} ({payment.purpose}) and never credited"
    if payment.reversed_cents:
        kept = Money(
            _minor_to_micros(payment.amount_minor - payment.reversed_cents), payment.currency.lower()
        )
        reversed_ = Money(_minor_to_micros(payment.reversed_cents), payment.currency.lower())
        detail += f"; {_money_text(reversed_)} of it refunded or lost in dispute, {_money_text(kept)} owed"
    return Difference(
        kind="not_credited",
        org_id=payment.org_id,
        processor_ref=payment.payment_id,
        detail=detail,
        paid=payment.paid_text(),
    )


def _compare(payment: ProcessorPayment, found: list[LedgerCredit]) -> list[Difference]:
    refs = tuple(c.processor_ref for c in found)
    problems: list[Difference] = []
    if len(found) > 1:
        problems.append(
            Difference(
                kind="credited_twice",
                org_id=payment.org_id,
                processor_ref=payment.payment_id,
                detail=f"one payment credited {len(found)} times (under {', '.join(refs)})",
                credited=refs,
                paid=payment.paid_text(),
                credited_amount=_money_text(_total(found)),
            )
        )
    for credit in found:
        one = Difference(
            kind="org_differs",
            org_id=credit.org_id,
            processor_ref=payment.payment_id,
            detail="",
            credited=(credit.processor_ref,),
            paid=payment.paid_text(),
            credited_amount=_money_text(credit.amount),
        )
        if credit.org_id != payment.org_id:
            detail = f"credited to {credit.org_id}, paid for {payment.org_id or '(no org)'}"
            problems.append(replace(one, detail=detail))
        problems.extend(_reversal_differences(payment, credit, one))
        if credit.amount.currency.lower() != payment.currency.lower():
            detail = f"credited in {credit.amount.currency}, paid in {payment.currency}"
            problems.append(replace(one, kind="currency_differs", detail=detail))
        elif credit.amount.micros != _minor_to_micros(payment.amount_minor):
            detail = f"credited {_money_text(credit.amount)}, paid {payment.paid_text()}"
            problems.append(replace(one, kind="amount_differs", detail=detail))
    return problems


def _reversal_differences(
    payment: ProcessorPayment, credit: LedgerCredit, one: Difference
) -> list[Difference]:
    """A refund or lost dispute the ledger does not reflect: not recorded at all (or less of
    it), recorded but not taken back in full (the credit was spent before), or recorded for
    more than the processor now says (a refund that failed, its credit not given back)."""
    found: list[Difference] = []
    reversed_text = _money_text(Money(_minor_to_micros(payment.reversed_cents), payment.currency.lower()))
    if payment.reversed_cents > credit.reversed_cents:
        detail = (
            f"refunded or lost in dispute {reversed_text} at the processor, "
            f"{credit.reversed_cents} cents recorded"
        )
        found.append(replace(one, kind="reversal_not_recorded", detail=detail))
    elif payment.reversed_cents < credit.reversed_cents:
        detail = (
            f"{credit.reversed_cents} cents recorded as refunded or lost in dispute, "
            f"{reversed_text} at the processor (a refund failed)"
        )
        found.append(replace(one, kind="refund_failure_not_recorded", detail=detail))
    if credit.unrecovered_micros > 0:
        lost = _money_text(Money(credit.unrecovered_micros, credit.amount.currency))
        detail = (
            f"refunded or lost in dispute, {lost} not taken back (spent, or reserved by running work, then)"
        )
        found.append(replace(one, kind="reversal_unrecovered", detail=detail))
    return found


def _minor_to_micros(minor: int) -> int:
    return minor * _MICROS_PER_MINOR_UNIT


def _money_text(amount: Money) -> str:
    return f"{format_amount(amount.amount)} {amount.currency}"


def _total(found: list[LedgerCredit]) -> Money:
    total = Money(0, found[0].amount.currency)
    for credit in found:
        if credit.amount.currency == total.currency:
            total = total + credit.amount
    return total
