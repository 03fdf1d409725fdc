"""Refunds delivered before the credit of the payment they reverse, over HTTP on moto against
the payment emulator (docs/payments.md, "Refunds and disputes", 2): Stripe does not keep its
events in order, so a refund of a payment of ours not credited yet (its checkout record, or
its auto top-up attempt still pending, exists) is answered 503 and delivered again; once the
credit has landed it is applied, once. A refund of a payment that is not ours is still
refused and acknowledged."""

from __future__ import annotations

from tests.integration.payments_harness import Bench, counted, entries, intent_of, stripe_client
from tests.integration.payments_harness import real_time_clock as real_time_clock  # the fixtures
from tests.integration.payments_harness import running_bench as running_bench


def refund_first(bench: Bench, payment_intent: str) -> None:
    """Refund the payment in full at the processor; its `charge.refunded` reaches the service
    before anything else, and is answered 503: the processor keeps it to deliver again."""
    stripe_client(bench).v1.refunds.create(params={"payment_intent": payment_intent})
    (event_id,) = bench.event_ids("charge.refunded")
    answer = bench.emulator.redeliver(event_id)
    assert answer == 503
    assert "charge.refunded" in {e["type"] for e in bench.emulator.pending()}


def test_a_refund_delivered_before_the_purchase_is_credited_is_applied_after_the_credit(
    bench: Bench,
) -> None:
    # Given a paid purchase of 100 USD, refunded at once, whose refund events arrive first
    start = bench.balance()
    checkout = bench.checkout(100)
    assert bench.pay(checkout).status_code == 303
    rejected = counted("PaymentEventsRejected")
    refund_first(bench, intent_of(bench, checkout["session_id"]))
    assert bench.balance() == start and entries(bench, "refund") == []
    # When the processor delivers the rest (the completion) and again what was answered 503
    assert set(bench.emulator.deliver_pending()) == {200}
    # Then the credit and the refund are both applied, once: nothing of the refund is kept
    assert bench.balance() == start
    assert len(entries(bench, "purchase")) == 1 and len(entries(bench, "refund")) == 1
    (event_id,) = bench.event_ids("charge.refunded")
    assert bench.emulator.redeliver(event_id) == 200  # a repeat changes nothing
    assert bench.balance() == start and len(entries(bench, "refund")) == 1
    assert counted("PaymentEventsRejected") == rejected  # deferred, not refused
    assert bench.wiring.ledger.violations(bench.org.org_id) == []


def test_a_refund_delivered_before_the_auto_top_up_is_credited_is_applied_after_the_credit(
    bench: Bench,
) -> None:
    # Given an auto top-up charged, whose success webhook has not arrived yet
    bench.buy(25)
    bench.configure(enabled=True, trigger_balance="30", amount="50")
    bench.moved()
    bench.wiring.sweeper.sweep()
    (attempt,) = bench.attempts()
    assert attempt["status"] == "pending" and attempt["processor_reference"]
    before = bench.balance()
    # When it is refunded and the refund's events arrive before its success
    refund_first(bench, attempt["processor_reference"])
    assert set(bench.emulator.deliver_pending()) == {200}
    # Then it is credited and taken back, once each
    assert bench.balance() == before
    assert len(entries(bench, "topup")) == 1 and len(entries(bench, "refund")) == 1
    assert bench.attempts()[0]["status"] == "succeeded"
    assert bench.wiring.ledger.violations(bench.org.org_id) == []


def test_a_refund_of_a_payment_that_is_not_ours_is_still_refused_and_acknowledged(bench: Bench) -> None:
    # Given a payment made at the processor outside the service (no metadata of ours)
    session = bench.buy(25)
    start = bench.balance()
    client = stripe_client(bench)
    card = str(client.v1.payment_intents.retrieve(intent_of(bench, session)).payment_method)
    customer = str(bench.wiring.payments_store.customer_id(bench.org.org_id))
    foreign = client.v1.payment_intents.create(
        params={
            "amount": 2500,
            "currency": "usd",
            "customer": customer,
            "payment_method": card,
            "off_session": True,
            "confirm": True,
        }
    )
    bench.emulator.deliver_pending()
    rejected = counted("PaymentEventsRejected")
    # When it is refunded
    client.v1.refunds.create(params={"payment_intent": foreign.id})
    # Then the refund is acknowledged, refused and changes nothing
    assert bench.emulator.deliver_pending() == [200, 200]
    assert bench.balance() == start and entries(bench, "refund") == []
    assert counted("PaymentEventsRejected") == rejected + 1
