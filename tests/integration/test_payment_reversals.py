"""Refunds and disputes of a credited payment (docs/payments.md, "Refunds and disputes"),
over HTTP on moto against the payment emulator: the processor's refund (or lost dispute) is
taken back from the wallet the payment credited, once, whatever the delivery order, never
below zero (the rest recorded as not recovered and shown by the reconciliation); a refund
that fails later (Stripe's refund-failing test card) is given back once; an event for a
payment the service never credited, or one the processor does not confirm, changes
nothing."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import stripe

from batchroute.clock import FixedClock
from batchroute.money import Money
from batchroute.services.billing.reconciliation import PaymentsReconciliation
from batchroute_tools.emulators.stripe import REFUND_FAILURE_SECONDS
from tests.integration.payments_harness import (
    Bench,
    counted,
    entries,
    intent_of,
    paid_not_credited,
    stripe_client,
)
from tests.integration.payments_harness import real_time_clock as real_time_clock  # the fixtures
from tests.integration.payments_harness import running_bench as running_bench


def refund(bench: Bench, payment_intent: str, cents: int | None = None) -> stripe.Refund:
    params: dict[str, Any] = {"payment_intent": payment_intent}
    if cents is not None:
        params["amount"] = cents
    return stripe_client(bench).v1.refunds.create(params=params)  # type: ignore[arg-type]


def refunds_of(bench: Bench, kind: str = "refund") -> list[dict[str, Any]]:
    return entries(bench, kind)


REFUND_FAILS = "4000000000005126"  # Stripe's test card whose refunds fail, some time later


def refund_fails(bench: Bench) -> list[str]:
    """Time passes at the processor until the refunds of the refund-failing card fail; the
    failure's events (charge.refund.updated, refund.updated, refund.failed) are delivered."""
    later = time.time() + REFUND_FAILURE_SECONDS + 1
    bench.emulator.clock = lambda: later
    assert bench.emulator.fail_due_refunds()
    failure_events = [e["type"] for e in bench.emulator.pending()]
    assert bench.emulator.deliver_pending() == [200] * len(failure_events)
    return failure_events


def clean(bench: Bench) -> None:
    assert bench.wiring.ledger.violations(bench.org.org_id) == []


def reconcile(bench: Bench, clock: FixedClock) -> list[dict[str, Any]]:
    wiring = bench.wiring
    run = PaymentsReconciliation(wiring.ledger, wiring.payment_processor, clock, settling_time=timedelta(0))
    return [d.to_dict() for d in run.run(clock.now() - timedelta(days=1)).differences]  # type: ignore[misc]


def test_a_refund_after_a_purchase_takes_the_credit_back_once(bench: Bench) -> None:
    start = bench.balance()
    session = bench.buy(25)
    assert bench.balance() == start + Money.usd("25")
    stripe_refund = refund(bench, intent_of(bench, session))
    assert stripe_refund.status == "succeeded" and stripe_refund.amount == 2500
    charge = stripe_client(bench).v1.charges.retrieve(str(stripe_refund.charge))
    assert charge.refunded is True and charge.amount_refunded == 2500
    assert stripe_client(bench).v1.payment_intents.retrieve(intent_of(bench, session)).amount_received == 2500
    reversed_before = counted("PaymentReversals")

    assert bench.emulator.deliver_pending() == [200, 200]  # charge.refunded, refund.created
    assert bench.balance() == start
    (event_id,) = bench.event_ids("charge.refunded")
    assert bench.emulator.redeliver(event_id) == 200  # a repeat
    assert bench.balance() == start
    (entry,) = refunds_of(bench)
    assert entry["processor_ref"] == session and entry["amount_micros"] == Money.usd("25").micros
    assert counted("PaymentReversals") == reversed_before + 1
    (alert,) = bench.events("billing.payment_reversed")
    assert alert["details"]["processor_reference"] == session and alert["details"]["taken_back"] == "25.00"
    # (its message as a person reads amounts, docs/money.md: "25.00 USD")
    said = f"A refund of 25.00 USD on payment {session} took 25.00 USD of credit back."
    assert alert["details"]["message"].startswith(said), alert["details"]["message"]
    clean(bench)


def test_partial_refunds_delivered_out_of_order_apply_once(bench: Bench) -> None:
    start = bench.balance()
    session = bench.buy(25)
    intent = intent_of(bench, session)
    refund(bench, intent, 1000)
    refund(bench, intent, 1500)
    first, second = bench.event_ids("charge.refunded")
    bench.emulator.redeliver(second)  # the later (cumulative) figure first: 25.00 refunded
    assert bench.balance() == start
    bench.emulator.redeliver(first)  # an older figure (10.00) late: nothing more
    bench.emulator.deliver_pending()
    bench.emulator.redeliver(second)
    assert bench.balance() == start
    assert sum(e["amount_micros"] for e in refunds_of(bench)) == Money.usd("25").micros
    assert reconcile(bench, bench.clock) == []  # reflected in full: no difference
    clean(bench)


def test_a_refund_after_the_credit_was_spent_takes_only_what_is_available(bench: Bench) -> None:
    session = bench.buy(25)
    bench.spend(str((bench.balance() - Money.usd("5")).amount))
    assert bench.balance() == Money.usd("5")
    unrecovered_before = counted("PaymentReversalUnrecovered")
    refund(bench, intent_of(bench, session))
    bench.emulator.deliver_pending()
    assert bench.balance() == Money.zero()  # never negative
    (entry,) = refunds_of(bench)
    assert entry["amount_micros"] == Money.usd("5").micros
    record = bench.wiring.ledger.credit_reversal(bench.org.org_id, session)
    assert record is not None and record.refunded_cents == 2500
    assert record.recovered_micros == Money.usd("5").micros
    assert record.unrecovered_micros == Money.usd("20").micros
    assert counted("PaymentReversalUnrecovered") == unrecovered_before + 1
    (event_id,) = bench.event_ids("charge.refunded")
    bench.emulator.redeliver(event_id)  # a repeat takes nothing more, even with credit back
    assert len(refunds_of(bench)) == 1
    (difference,) = reconcile(bench, bench.clock)
    assert difference["kind"] == "reversal_unrecovered" and difference["credited_refs"] == [session]
    clean(bench)


def test_a_lost_dispute_takes_the_credit_back_at_its_loss(bench: Bench) -> None:
    start = bench.balance()
    session = bench.buy(40)
    dispute = bench.emulator.open_dispute(intent_of(bench, session))
    bench.emulator.deliver_pending()
    assert bench.balance() == start + Money.usd("40")  # opened: alerted, nothing taken yet
    (opened,) = bench.events("billing.payment_disputed")
    assert opened["details"]["dispute_status"] == "needs_response"
    bench.emulator.close_dispute(dispute["id"], won=False)
    bench.emulator.deliver_pending()
    (event_id,) = bench.event_ids("charge.dispute.closed")
    bench.emulator.redeliver(event_id)
    assert bench.balance() == start
    assert len(refunds_of(bench)) == 1
    clean(bench)


def test_a_refund_of_an_auto_topup_takes_it_back(bench: Bench) -> None:
    bench.buy(25)
    bench.configure(enabled=True, trigger_balance="10", amount="50")
    bench.spend(str((bench.balance() - Money.usd("1")).amount))
    bench.moved()
    bench.wiring.sweeper.sweep()
    bench.emulator.deliver_pending()
    (attempt,) = [a for a in bench.attempts() if a["status"] == "succeeded"]
    assert bench.balance() == Money.usd("51")
    refund(bench, attempt["processor_reference"], 2000)
    bench.emulator.deliver_pending()
    assert bench.balance() == Money.usd("31")
    (entry,) = refunds_of(bench)
    assert entry["processor_ref"] == attempt["processor_reference"]
    clean(bench)


def test_a_refund_of_a_payment_never_credited_changes_nothing(bench: Bench) -> None:
    start = bench.balance()
    session = paid_not_credited(bench)  # paid at the processor, its webhook never arrived
    refund(bench, intent_of(bench, session))
    rejected = counted("PaymentEventsRejected")
    # ours, not credited yet: 503, kept by the processor for later (tests/integration/
    # test_payment_reversals_before_credit.py); the refund.created it ignores
    assert bench.emulator.deliver_pending() == [503, 200]
    assert bench.balance() == start and refunds_of(bench) == []
    assert counted("PaymentEventsRejected") == rejected
    clean(bench)


def test_a_forged_refund_the_processor_does_not_confirm_changes_nothing(bench: Bench) -> None:
    start = bench.balance()
    session = bench.buy(25)
    charge_id = bench.emulator.intents[intent_of(bench, session)]["latest_charge"]
    forged: list[tuple[str, dict[str, Any]]] = [
        (
            "charge.refunded",
            {"id": charge_id, "object": "charge", "amount": 2500, "amount_refunded": 2500, "refunded": True},
        ),
        (
            "charge.dispute.closed",
            {"id": "dp_forged", "object": "dispute", "charge": charge_id, "amount": 2500, "status": "lost"},
        ),
        (
            "charge.refunded",
            {"id": "ch_unknown", "object": "charge", "amount": 2500, "amount_refunded": 2500},
        ),
    ]
    for n, (event_type, obj) in enumerate(forged):
        event = {"id": f"evt_forged{n}", "type": event_type, "created": 0, "livemode": False}
        answer = bench.post_event({**event, "data": {"object": {**obj, "currency": "usd"}}})
        assert answer.status_code == 200 and answer.json()["applied"] is False
    assert bench.balance() == start + Money.usd("25") and refunds_of(bench) == []
    clean(bench)


def test_reconciliation_lists_a_refund_the_ledger_does_not_reflect(bench: Bench) -> None:
    session = bench.buy(25)
    refund(bench, intent_of(bench, session))
    bench.emulator.events.clear()  # the refund's events never reach the service
    (difference,) = reconcile(bench, bench.clock)
    assert difference["kind"] == "reversal_not_recorded"
    assert (
        difference["processor_ref"] == intent_of(bench, session) and difference["org_id"] == bench.org.org_id
    )


def test_a_refund_that_fails_later_gives_the_credit_back_once(bench: Bench) -> None:
    # Given a purchase with the refund-failing card, refunded in full and taken back
    start = bench.balance()
    session = bench.buy(25, card=REFUND_FAILS)
    stripe_refund = refund(bench, intent_of(bench, session))
    assert stripe_refund.status == "succeeded"  # as Stripe answers it at first
    bench.emulator.deliver_pending()
    assert bench.balance() == start
    failed_before, rejected_before = counted("PaymentRefundsFailed"), counted("PaymentEventsRejected")
    # When the refund fails at the processor (the money comes back to the service)
    assert refund_fails(bench) == ["charge.refund.updated", "refund.updated", "refund.failed"]
    assert stripe_client(bench).v1.refunds.retrieve(stripe_refund.id).status == "failed"
    # Then the wallet is whole again: the credit given back once, as its own entry
    assert bench.balance() == start + Money.usd("25")
    (taken,) = refunds_of(bench)
    (given_back,) = refunds_of(bench, "refund_reversed")
    assert given_back["processor_ref"] == session and given_back["amount_micros"] == taken["amount_micros"]
    record = bench.wiring.ledger.credit_reversal(bench.org.org_id, session)
    assert record is not None and (record.refunded_cents, record.refund_failed_cents) == (0, 2500)
    assert (record.recovered_micros, record.unrecovered_micros) == (0, 0)
    assert counted("PaymentRefundsFailed") == failed_before + 1
    alerts = [e["details"] for e in bench.events("billing.payment_reversed")]
    (alert,) = [a for a in alerts if a["reversal"] == "refund_failed"]  # one, beside the refund's
    assert (alert["refund_failed"], alert["credited_back"]) == ("25.00", "25.00") and len(alerts) == 2
    # And the failure delivered again, or the refund's own event delivered late, change nothing
    for event_type in ("charge.refund.updated", "refund.failed", "charge.refunded"):
        (event_id,) = bench.event_ids(event_type)
        assert bench.emulator.redeliver(event_id) == 200
    assert bench.balance() == start + Money.usd("25") and len(refunds_of(bench, "refund_reversed")) == 1
    assert counted("PaymentEventsRejected") == rejected_before  # a late charge.refunded is no forgery
    assert reconcile(bench, bench.clock) == []
    clean(bench)


def test_a_failed_refund_of_spent_credit_clears_what_was_not_recovered_first(bench: Bench) -> None:
    # Given a purchase of 25 of which 20 was spent, refunded: 5 taken back, 20 not recovered
    session = bench.buy(25, card=REFUND_FAILS)
    bench.spend(str((bench.balance() - Money.usd("5")).amount))
    refund(bench, intent_of(bench, session))
    bench.emulator.deliver_pending()
    assert bench.balance() == Money.zero()
    (difference,) = reconcile(bench, bench.clock)
    assert difference["kind"] == "reversal_unrecovered"
    # When the refund fails
    refund_fails(bench)
    # Then the 20 never taken is no longer owed, and the 5 taken comes back
    assert bench.balance() == Money.usd("5")
    (given_back,) = refunds_of(bench, "refund_reversed")
    assert given_back["amount_micros"] == Money.usd("5").micros
    record = bench.wiring.ledger.credit_reversal(bench.org.org_id, session)
    assert record is not None and (record.recovered_micros, record.unrecovered_micros) == (0, 0)
    assert reconcile(bench, bench.clock) == []  # clean again
    clean(bench)


def test_a_refund_made_again_after_one_failed_is_taken_back_again(bench: Bench) -> None:
    start = bench.balance()
    session = bench.buy(25, card=REFUND_FAILS)
    refund(bench, intent_of(bench, session), 1000)
    bench.emulator.deliver_pending()
    refund_fails(bench)
    assert bench.balance() == start + Money.usd("25")
    # The card's refunds keep failing at the processor; this one is delivered before it does
    bench.emulator.clock = time.time
    refund(bench, intent_of(bench, session), 1000)
    bench.emulator.deliver_pending()
    assert bench.balance() == start + Money.usd("15")
    assert len(refunds_of(bench)) == 2 and len(refunds_of(bench, "refund_reversed")) == 1
    assert reconcile(bench, bench.clock) == []
    clean(bench)


def test_reconciliation_lists_a_failed_refund_whose_failure_never_arrived(bench: Bench) -> None:
    session = bench.buy(25, card=REFUND_FAILS)
    refund(bench, intent_of(bench, session))
    bench.emulator.deliver_pending()
    bench.emulator.clock = lambda: time.time() + REFUND_FAILURE_SECONDS + 1
    bench.emulator.fail_due_refunds()
    bench.emulator.events.clear()  # the failure's events never reach the service
    (difference,) = reconcile(bench, bench.clock)
    assert difference["kind"] == "refund_failure_not_recorded" and difference["credited_refs"] == [session]
