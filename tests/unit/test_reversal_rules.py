"""Refunds and lost disputes taken back from a credit (domain/billing/reversals.py,
docs/payments.md "Refunds and disputes"): once, on the processor's cumulative figures, never
more than available, never more than the credit; the ledger's invariants catch a refund that
breaks them; the reconciliation reports a reversal the ledger does not reflect."""

from __future__ import annotations

from dataclasses import replace

from batchroute.domain.billing.ledger import Entry, ledger_violations
from batchroute.domain.billing.reconciliation import reconcile
from batchroute.domain.billing.reversals import (
    CreditReversal,
    ProcessorCharge,
    ProcessorDispute,
    ReversalClaim,
    charge_problem,
    dispute_problem,
    reversal_step,
)
from tests.unit.test_reconciliation_rules import SETTLED, SINCE, credit, kinds, purchase_payment

USD25 = 25_000_000
CHARGE = ProcessorCharge("ch_1", "pi_1", 2500, 1000, "usd", "succeeded")


def test_a_refund_takes_what_is_available_and_records_the_rest() -> None:
    step = reversal_step(
        CreditReversal(USD25), kind="refund", confirmed_cents=2500, available_micros=5_000_000
    )
    assert step is not None
    assert (step.debit_micros, step.unrecovered_micros) == (5_000_000, 20_000_000)
    assert step.after.recovered_micros + step.after.unrecovered_micros == USD25


def test_a_repeat_or_an_older_figure_records_nothing_and_partial_refunds_add_up() -> None:
    first = reversal_step(CreditReversal(USD25), kind="refund", confirmed_cents=1000, available_micros=USD25)
    assert first is not None and first.debit_micros == 10_000_000
    assert reversal_step(first.after, kind="refund", confirmed_cents=1000, available_micros=USD25) is None
    assert reversal_step(first.after, kind="refund", confirmed_cents=500, available_micros=USD25) is None
    second = reversal_step(first.after, kind="refund", confirmed_cents=2500, available_micros=USD25)
    assert second is not None and second.debit_micros == 15_000_000 and second.after.version == 2


def test_a_refund_and_a_lost_dispute_never_take_more_than_the_credit() -> None:
    refunded = reversal_step(
        CreditReversal(USD25), kind="refund", confirmed_cents=2000, available_micros=USD25
    )
    assert refunded is not None
    lost = reversal_step(refunded.after, kind="dispute", confirmed_cents=2500, available_micros=USD25)
    assert lost is not None and lost.debit_micros == 5_000_000
    assert lost.after.recovered_micros == USD25


def test_the_processor_must_confirm_what_the_event_claims() -> None:
    assert charge_problem(CHARGE, ReversalClaim("refund", "ch_1", claimed_cents=1000)) is None
    assert charge_problem(CHARGE, ReversalClaim("refund", "ch_1", claimed_cents=2500)) is not None
    assert charge_problem(None, ReversalClaim("refund", "ch_1")) is not None
    assert charge_problem(replace(CHARGE, currency="eur"), ReversalClaim("refund", "ch_1")) is not None
    open_dispute = ProcessorDispute("dp_1", "ch_1", 2500, "needs_response", "usd")
    claim = ReversalClaim("dispute", "ch_1", "dp_1", claimed_cents=2500)
    assert dispute_problem(open_dispute, claim) is not None  # the event says lost, it is not
    assert dispute_problem(replace(open_dispute, status="lost"), claim) is None
    assert (
        dispute_problem(replace(open_dispute, charge_id="ch_2"), replace(claim, claimed_cents=0)) is not None
    )


def test_the_invariants_catch_a_refund_of_nothing_credited_or_more_than_the_credit() -> None:
    def problems(*entries: Entry) -> list[str]:
        balance = sum(e.amount if e.entry_type == "purchase" else -e.amount for e in entries)
        return ledger_violations(
            balance=balance, reserved=0, available=balance, reservations=(), entries=entries
        )

    purchase = Entry("purchase", USD25, processor_ref="cs_1")
    assert problems(purchase, Entry("refund", 5_000_000, processor_ref="cs_1")) == []
    assert problems(purchase, Entry("refund", 5_000_000, processor_ref="cs_2")) != []
    assert problems(purchase, Entry("refund", USD25 + 1, processor_ref="cs_1")) != []


def test_reconciliation_reports_a_reversal_not_recorded_and_one_not_recovered() -> None:
    refunded = replace(purchase_payment(), reversed_cents=2500)
    report = reconcile([credit()], [refunded], since=SINCE, settled_before=SETTLED)
    assert kinds(report.differences) == ["reversal_not_recorded"]
    recorded = replace(credit(), reversed_cents=2500, unrecovered_micros=20_000_000)
    report = reconcile([recorded], [refunded], since=SINCE, settled_before=SETTLED)
    assert kinds(report.differences) == ["reversal_unrecovered"]
    fully = replace(recorded, unrecovered_micros=0)
    assert reconcile([fully], [refunded], since=SINCE, settled_before=SETTLED).clean
