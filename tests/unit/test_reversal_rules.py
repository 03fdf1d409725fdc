"""Refunds and lost disputes taken back from a credit (domain/billing/reversals.py,
docs/payments.md "Refunds and disputes"): once, on the processor's cumulative figures, never
more than available, never more than the credit; a refund that fails later is undone once,
first from the part not recovered, then given back; the ledger's invariants catch a refund
(or a give-back) that breaks them; the reconciliation reports a reversal the ledger does not
reflect."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hypothesis import given
from hypothesis import strategies as st

from batchroute.domain.billing.ledger import Entry, Wallet, ledger_violations
from batchroute.domain.billing.reconciliation import reconcile
from batchroute.domain.billing.reversals import (
    MICROS_PER_CENT,
    CreditReversal,
    ProcessorCharge,
    ProcessorDispute,
    ReversalClaim,
    ReversalFigures,
    ReversalStep,
    charge_problem,
    dispute_problem,
    reversal_step,
)
from tests.unit.test_reconciliation_rules import SETTLED, SINCE, credit, kinds, purchase_payment

USD25 = 25_000_000
CHARGE = ProcessorCharge("ch_1", "pi_1", 2500, 1000, "usd", "succeeded")


def test_a_refund_takes_what_is_available_and_records_the_rest() -> None:
    step = reversal_step(CreditReversal(USD25), ReversalFigures("refund", 2500), available_micros=5_000_000)
    assert step is not None
    assert (step.debit_micros, step.unrecovered_micros) == (5_000_000, 20_000_000)
    assert step.after.recovered_micros + step.after.unrecovered_micros == USD25


def test_a_repeat_or_an_older_figure_records_nothing_and_partial_refunds_add_up() -> None:
    first = reversal_step(CreditReversal(USD25), ReversalFigures("refund", 1000), available_micros=USD25)
    assert first is not None and first.debit_micros == 10_000_000
    assert reversal_step(first.after, ReversalFigures("refund", 1000), available_micros=USD25) is None
    assert reversal_step(first.after, ReversalFigures("refund", 500), available_micros=USD25) is None
    second = reversal_step(first.after, ReversalFigures("refund", 2500), available_micros=USD25)
    assert second is not None and second.debit_micros == 15_000_000 and second.after.version == 2


def test_a_refund_and_a_lost_dispute_never_take_more_than_the_credit() -> None:
    refunded = reversal_step(CreditReversal(USD25), ReversalFigures("refund", 2000), available_micros=USD25)
    assert refunded is not None
    lost = reversal_step(refunded.after, ReversalFigures("dispute", 2500), available_micros=USD25)
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


# -- a refund that fails after it was recorded -----------------------------------------------
USD10, USD15, USD5 = 10_000_000, 15_000_000, 5_000_000


def test_a_failed_refund_gives_back_what_it_took_once() -> None:
    # Given a full refund recorded and taken back in full
    taken = reversal_step(CreditReversal(USD25), ReversalFigures("refund", 2500), available_micros=USD25)
    assert taken is not None and taken.debit_micros == USD25
    # When the processor says 0 refunded, 25 of refunds failed
    failed = reversal_step(taken.after, ReversalFigures("refund", 0, 2500), available_micros=0)
    # Then all of it is given back, once, and the record follows the processor
    assert failed is not None
    assert (failed.failed_cents, failed.credit_back_micros, failed.unrecovered_cleared_micros) == (
        2500,
        USD25,
        0,
    )
    assert (failed.debit_micros, failed.unrecovered_micros) == (0, 0)
    after = failed.after
    assert (after.refunded_cents, after.refund_failed_cents, after.recovered_micros, after.version) == (
        0,
        2500,
        0,
        2,
    )
    for stale in ((0, 2500), (2500, 0), (0, 0)):  # the failure again, or reads from before it
        again = reversal_step(after, ReversalFigures("refund", stale[0], stale[1]), available_micros=USD25)
        assert again is None


def test_a_lower_figure_without_a_reported_failure_is_an_older_read() -> None:
    # Given 10 then 15 more refunded, the second read recorded first (events handled together)
    second = reversal_step(CreditReversal(USD25), ReversalFigures("refund", 2500), available_micros=USD25)
    assert second is not None
    # When the first event's read (10 refunded, nothing failed) is recorded after it: nothing
    assert reversal_step(second.after, ReversalFigures("refund", 1000), available_micros=USD25) is None
    # And a failure only gives back what the processor says failed
    failed = reversal_step(second.after, ReversalFigures("refund", 1000, 1500), available_micros=0)
    assert failed is not None and failed.credit_back_micros == USD15 and failed.after.refunded_cents == 1000


def test_a_failed_refund_is_undone_first_from_the_part_not_recovered() -> None:
    # Given a refund of 25 when only 5 was left: 5 taken, 20 not recovered
    taken = reversal_step(CreditReversal(USD25), ReversalFigures("refund", 2500), available_micros=USD5)
    assert taken is not None and taken.after.unrecovered_micros == 20_000_000
    # When 15 of it fails (25 -> 10 refunded): 15 of the 20 never taken is no longer owed
    partly = reversal_step(taken.after, ReversalFigures("refund", 1000, 1500), available_micros=0)
    assert partly is not None
    assert (partly.credit_back_micros, partly.unrecovered_cleared_micros) == (0, USD15)
    assert (partly.after.recovered_micros, partly.after.unrecovered_micros) == (USD5, USD5)
    # And when the rest fails too, the 5 not recovered goes first, then the 5 taken comes back
    rest = reversal_step(partly.after, ReversalFigures("refund", 0, 2500), available_micros=0)
    assert rest is not None
    assert (rest.credit_back_micros, rest.unrecovered_cleared_micros) == (USD5, USD5)
    assert (rest.after.recovered_micros, rest.after.unrecovered_micros) == (0, 0)


def test_a_failed_refund_covered_by_a_lost_dispute_moves_nothing_but_is_recorded() -> None:
    # Given a refund of 20, then a lost dispute of 25: the whole credit is owed back
    refunded = reversal_step(CreditReversal(USD25), ReversalFigures("refund", 2000), available_micros=USD25)
    assert refunded is not None
    lost = reversal_step(refunded.after, ReversalFigures("dispute", 2500), available_micros=USD25)
    assert lost is not None and lost.after.recovered_micros == USD25
    # When the refund fails: the dispute still takes the whole credit, so nothing comes back
    failed = reversal_step(lost.after, ReversalFigures("refund", 0, 2000), available_micros=0)
    assert failed is not None and failed.failed_cents == 2000
    assert (failed.credit_back_micros, failed.unrecovered_cleared_micros) == (0, 0)
    assert (failed.after.refunded_cents, failed.after.recovered_micros) == (0, USD25)
    # And a lost dispute's figure never shrinks: a lower one is an older one, late
    assert reversal_step(failed.after, ReversalFigures("dispute", 0), available_micros=0) is None


def test_a_refund_made_again_after_one_failed_is_taken_back_again() -> None:
    taken = reversal_step(CreditReversal(USD25), ReversalFigures("refund", 1000), available_micros=USD25)
    assert taken is not None
    failed = reversal_step(taken.after, ReversalFigures("refund", 0, 1000), available_micros=0)
    assert failed is not None and failed.credit_back_micros == USD10
    again = reversal_step(failed.after, ReversalFigures("refund", 1000, 1000), available_micros=USD25)
    assert again is not None and again.debit_micros == USD10 and again.after.version == 3
    # Both seen at once (failed, and made again, before either event arrived): recorded, quiet
    both = reversal_step(taken.after, ReversalFigures("refund", 1000, 1000), available_micros=USD25)
    assert both is not None and both.quiet and (both.debit_micros, both.credit_back_micros) == (0, 0)
    assert both.after.refund_failed_cents == 1000


def test_a_charge_refunded_event_sent_before_its_refund_failed_is_not_a_forgery() -> None:
    failed_back = replace(CHARGE, refunded_cents=0, failed_refund_cents=2500)
    assert charge_problem(failed_back, ReversalClaim("refund", "ch_1", claimed_cents=2500)) is None
    assert charge_problem(failed_back, ReversalClaim("refund", "ch_1", claimed_cents=2501)) is not None


def test_the_invariants_catch_a_give_back_of_more_than_was_taken() -> None:
    def problems(*entries: Entry) -> list[str]:
        balance = sum(-e.amount if e.entry_type == "refund" else e.amount for e in entries)
        return ledger_violations(
            balance=balance, reserved=0, available=balance, reservations=(), entries=entries
        )

    purchase = Entry("purchase", USD25, processor_ref="cs_1")
    refund = Entry("refund", USD25, processor_ref="cs_1")
    back = Entry("refund_reversed", USD25, processor_ref="cs_1")
    assert problems(purchase, refund, back) == []
    assert problems(purchase, refund, back, refund) == []  # refunded again after it failed
    assert problems(purchase, refund, back, back) != []  # given back twice
    assert problems(purchase, Entry("refund_reversed", USD5, processor_ref="cs_2")) != []
    assert problems(purchase, refund, back, refund, refund) != []  # more than the credit, net


def test_reconciliation_reports_a_failed_refund_the_ledger_still_holds() -> None:
    # Given a refund of 25 recorded, which then failed at the processor (0 refunded there)
    recorded = replace(credit(), reversed_cents=2500)
    report = reconcile([recorded], [purchase_payment()], since=SINCE, settled_before=SETTLED)
    assert kinds(report.differences) == ["refund_failure_not_recorded"]
    # Once the failure is recorded (the credit given back), the two sides agree again
    assert reconcile([credit()], [purchase_payment()], since=SINCE, settled_before=SETTLED).clean


# -- any sequence: the processor's refunds (made, failed), lost disputes, reads old and new --
@dataclass
class Processor:
    """A Charge of `cents` as the processor keeps it: its refunds, each standing or failed,
    a lost dispute, and every read the service could have made of it (old ones arrive late)."""

    cents: int
    refunds: list[list[int]] = field(default_factory=list)  # [amount, failed (0/1)]
    lost: int = 0
    reads: list[tuple[int, int, int]] = field(default_factory=list)  # (refunded, failed, lost)

    def read(self) -> tuple[int, int, int]:
        refunded = sum(a for a, failed in self.refunds if not failed)
        failed = sum(a for a, f in self.refunds if f)
        self.reads.append((refunded, failed, self.lost))
        return self.reads[-1]

    def act(self, move: str, number: int) -> tuple[int, int, int]:
        """Make a refund of `number` percent (at most what is left), fail the standing refund
        `number`, lose a dispute, or answer the `number`-th latest read (a late event)."""
        refunded, _, _ = self.read()
        standing = [r for r in self.refunds if not r[1]]
        if move == "refund" and (amount := min(number * self.cents // 100, self.cents - refunded)):
            self.refunds.append([amount, 0])
        elif move == "fail" and standing:
            standing[number % len(standing)][1] = 1
        elif move == "dispute":
            self.lost = max(self.lost, number * self.cents // 100)
        elif move == "late":
            return self.reads[-1 - number % len(self.reads)]
        return self.read()


MOVES = st.lists(
    st.tuples(
        st.sampled_from(["refund", "refund", "fail", "late", "dispute"]),
        st.integers(0, 100),
        st.integers(-100, 100),  # before it: the org spends (<0) or adds (>0) that percent of the credit
    ),
    max_size=25,
)


def _record(wallet: Wallet, step: ReversalStep, ref: str) -> None:
    """The ledger store's writes of a step, on the in-memory wallet (adapters/dynamo/ledger.py)."""
    if step.debit_micros:
        wallet.balance -= step.debit_micros
        wallet.entries.append(Entry("refund", step.debit_micros, processor_ref=ref))
    if step.credit_back_micros:
        wallet.balance += step.credit_back_micros
        wallet.entries.append(Entry("refund_reversed", step.credit_back_micros, processor_ref=ref))


def _move_wallet(wallet: Wallet, n: int, percent: int, credit: int) -> None:
    amount = abs(percent) * credit // 100
    spent = min(amount, wallet.available)
    if percent > 0 and amount:
        wallet.grant(amount)
    elif percent < 0 and spent:
        wallet.reserve(f"r{n}", spent)
        wallet.settle(f"r{n}", spent, period_keys=("D#d", "M#m"))


def _apply(record: CreditReversal, read: tuple[int, int, int], available: int) -> list[ReversalStep]:
    """What the service records of one read: the refund figures, then the lost dispute."""
    refunded, failed, lost = read
    steps = [reversal_step(record, ReversalFigures("refund", refunded, failed), available_micros=available)]
    if steps[0] is not None:
        record, available = steps[0].after, available - steps[0].debit_micros + steps[0].credit_back_micros
    if lost:
        steps.append(reversal_step(record, ReversalFigures("dispute", lost), available_micros=available))
    return [s for s in steps if s is not None]


@given(cents=st.integers(50, 5000), moves=MOVES)
def test_any_sequence_of_refunds_failures_and_late_reads_keeps_the_books(
    cents: int, moves: list[tuple[str, int, int]]
) -> None:
    credit_micros, processor = cents * MICROS_PER_CENT, Processor(cents)
    wallet, record, debited, given_back = Wallet(), CreditReversal(credit_micros), 0, 0
    wallet.credit("cs_1", credit_micros, kind="purchase")
    for n, (move, number, wallet_move) in enumerate([*moves, ("late", 0, 0)]):  # ends on the latest
        _move_wallet(wallet, n, wallet_move, credit_micros)
        read = processor.act(move, number)
        steps = _apply(record, read, wallet.available)
        # A read older than one recorded (an event handled late) changes nothing: only a
        # failure the processor reports gives credit back
        assert steps == [] or move != "late"
        for step in steps:
            # Each step: never more than available, never more given back than was taken
            assert (
                step.debit_micros <= wallet.available and step.credit_back_micros <= record.recovered_micros
            )
            _record(wallet, step, "cs_1")
            record = step.after
            debited, given_back = debited + step.debit_micros, given_back + step.credit_back_micros
            # Then the record owes exactly what its figures say, split into what the wallet
            # gave (net of what came back) and what it could not; the books stay whole
            assert record.recovered_micros + record.unrecovered_micros == record.owed_micros
            assert record.recovered_micros == debited - given_back >= 0 and record.unrecovered_micros >= 0
            assert wallet.balance >= 0 and wallet.violations() == []
        # And the same read again changes nothing: each step is recorded once
        assert _apply(record, read, USD25) == []
    # Finally the record holds the processor's latest figures, however the reads were ordered
    refunded, failed, lost = processor.reads[-1]
    assert (record.refunded_cents, record.refund_failed_cents, record.disputed_cents) == (
        refunded,
        failed,
        lost,
    )
    assert given_back <= debited


@given(
    cents=st.integers(50, 5000),
    moves=st.lists(st.tuples(st.sampled_from(["refund", "fail"]), st.integers(0, 100))),
)
def test_with_credit_to_spare_the_wallet_ends_debited_by_what_stays_refunded(
    cents: int, moves: list[tuple[str, int]]
) -> None:
    # Given an org that never spends, whatever was refunded and failed on the way
    processor, record, net = Processor(cents), CreditReversal(cents * MICROS_PER_CENT), 0
    for move, number in moves:
        for step in _apply(record, processor.act(move, number), 10**12):
            record, net = step.after, net + step.debit_micros - step.credit_back_micros
    # Then the wallet is debited by exactly what stays refunded, nothing left unrecovered
    refunded, _, _ = processor.read()
    assert net == refunded * MICROS_PER_CENT == record.recovered_micros
    assert record.unrecovered_micros == 0
