"""The auto top-up sweep over HTTP on moto against the payment emulator: each pending attempt
is swept on its own, so one the processor keeps refusing (a PaymentIntent it does not know, a
charge repeated under the attempt's key with another card, anything unexpected) never stops
the attempts of other orgs swept after it; and a charged attempt the processor never settles
fails in the end instead of holding its org's slot for ever (docs/payments.md, "Auto
top-up")."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import stripe

from batchroute.adapters.stripe_payments import StripePayments
from batchroute.clock import FixedClock
from batchroute.money import Money
from tests.integration.payments_harness import GOOD_CARD, Bench, counted, stripe_client
from tests.integration.payments_harness import real_time_clock as real_time_clock  # the fixtures
from tests.integration.payments_harness import running_bench as running_bench
from tests.integration.principals import TestOrg, new_org

SWEEP_ERRORS = "AutoTopupSweepErrors"
ARMED = {"enabled": True, "trigger_balance": "30", "amount": "50"}


def pending_attempt(bench: Bench, org: TestOrg) -> str:
    """`org` buys 25 USD with a good card, arms auto top-up (trigger 30, amount 50) and falls
    under the trigger: its attempt, pending (not charged yet)."""
    checkout = bench.client.post(
        "/v1/billing/checkout", json={"amount": 25}, headers=org.session_headers("billing")
    )
    assert checkout.status_code == 200, checkout.text
    assert httpx.post(checkout.json()["checkout_url"] + "/pay", data={"card": GOOD_CARD}).status_code == 303
    bench.emulator.deliver_pending()
    saved = bench.client.put("/v1/billing/auto-topup", json=ARMED, headers=org.key_headers("billing"))
    assert saved.status_code == 200, saved.text
    wiring = bench.wiring
    wiring.auto_topup.balance_moved(org.org_id, wiring.ledger.state(org.org_id), at=bench.clock.now())
    (attempt,) = wiring.payments_store.attempts(org.org_id, limit=5)
    assert attempt.status == "pending" and attempt.processor_ref is None
    return attempt.attempt_id


def attempt_of(bench: Bench, org: TestOrg, attempt_id: str) -> Any:
    return bench.wiring.payments_store.attempt(org.org_id, attempt_id)


def charged_attempt(bench: Bench) -> tuple[str, Any]:
    """The bench org's pending attempt (`pending_attempt`) charged by a sweep: its id and its
    PaymentIntent."""
    attempt_id = pending_attempt(bench, bench.org)
    bench.wiring.sweeper.sweep()
    return attempt_id, attempt_of(bench, bench.org, attempt_id).processor_ref


def test_an_attempt_whose_payment_intent_the_processor_does_not_know_fails_and_the_next_is_charged(
    bench: Bench, clock: FixedClock
) -> None:
    # Given org 1's attempt charged, whose PaymentIntent the processor then no longer knows
    # (the keys were switched to another account or mode with the attempt in flight)
    first, intent = charged_attempt(bench)
    assert intent is not None
    bench.emulator.intents.pop(intent)
    bench.emulator.events.clear()
    # And org 2's ordinary attempt, started later
    clock.advance(seconds=5)
    other = new_org()
    second = pending_attempt(bench, other)
    # When the sweeper runs once the first is stuck
    clock.advance(minutes=11)
    report = bench.wiring.sweeper.sweep()["auto_topups"]
    # Then the first is failed, its slot freed, and the second is charged in the same sweep
    failed = attempt_of(bench, bench.org, first)
    assert (failed.status, failed.failure_code, failed.processor_ref) == (
        "failed",
        "processor_unknown",
        intent,
    )
    assert bench.wiring.payments_store.auto_topup(bench.org.org_id).in_flight is None
    assert report["recovered"] == [first] and report["charged"] == [second]
    assert attempt_of(bench, other, second).processor_ref is not None


def test_a_charge_repeated_with_another_saved_card_takes_the_first_payment_intent(
    bench: Bench, clock: FixedClock
) -> None:
    # Given an attempt whose first charge reached the processor (with the card saved then)
    # but whose answer, and webhook, were lost
    attempt_id = pending_attempt(bench, bench.org)
    store = bench.wiring.payments_store
    old_card = store.payment_method(bench.org.org_id)
    assert old_card is not None
    client = stripe_client(bench)
    first = client.v1.payment_intents.create(
        params={
            "amount": 5000,
            "currency": "usd",
            "customer": str(store.customer_id(bench.org.org_id)),
            "payment_method": old_card.payment_method_id,
            "off_session": True,
            "confirm": True,
            "metadata": {"org_id": bench.org.org_id, "attempt_id": attempt_id, "purpose": "auto_topup"},
        },
        options={"idempotency_key": attempt_id},
    )
    bench.emulator.events.clear()
    # And the org bought again before the sweeper's retry: another card is saved
    clock.advance(seconds=5)
    bench.buy(5)
    assert store.payment_method(bench.org.org_id) != old_card
    before = bench.balance()
    # When the sweeper charges the attempt: the same key with another card is Stripe's
    # idempotency_error
    report = bench.wiring.sweeper.sweep()["auto_topups"]
    # Then the attempt takes the first charge's PaymentIntent; no second charge is made
    assert report["charged"] == [attempt_id]
    assert attempt_of(bench, bench.org, attempt_id).processor_ref == first.id
    charged = [i for i in bench.emulator.intents.values() if i["metadata"].get("attempt_id") == attempt_id]
    assert [i["id"] for i in charged] == [first.id]
    # And the sweeper's recovery credits it, once
    clock.advance(minutes=11)
    assert bench.wiring.sweeper.sweep()["auto_topups"]["recovered"] == [attempt_id]
    assert bench.balance() == before + Money.usd(50)
    assert attempt_of(bench, bench.org, attempt_id).status == "succeeded"


def test_an_attempt_whose_sweep_raises_is_left_pending_and_counted_and_the_next_is_charged(
    bench: Bench, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given org 1's attempt, whose charge raises what no retry was expected to fix, and org
    # 2's attempt, started later
    first = pending_attempt(bench, bench.org)
    clock.advance(seconds=5)
    other = new_org()
    second = pending_attempt(bench, other)
    real = StripePayments.charge_off_session

    def charge(self: StripePayments, **terms: Any) -> Any:
        if terms["org_id"] == bench.org.org_id:
            raise stripe.StripeError("an answer the adapter does not expect")
        return real(self, **terms)

    monkeypatch.setattr(StripePayments, "charge_off_session", charge)
    errors = counted(SWEEP_ERRORS)
    # When the sweeper runs
    report = bench.wiring.sweeper.sweep()["auto_topups"]
    # Then the first is left pending (the next sweep tries again) and counted, and the
    # second is charged in the same sweep
    assert report["left_pending"] == [first] and report["charged"] == [second]
    assert attempt_of(bench, bench.org, first).status == "pending"
    assert attempt_of(bench, other, second).processor_ref is not None
    assert counted(SWEEP_ERRORS) == errors + 1


def test_a_charged_attempt_the_processor_never_settles_fails_after_three_days(
    bench: Bench, clock: FixedClock
) -> None:
    # Given an attempt charged whose PaymentIntent the processor keeps `processing`, its
    # webhook not delivered
    attempt_id, intent = charged_attempt(bench)
    bench.emulator.intents[intent]["status"] = "processing"
    before = bench.balance()
    # When the sweeper runs over the next three days
    clock.advance(hours=1)
    assert bench.wiring.sweeper.sweep()["auto_topups"]["left_pending"] == [attempt_id]
    clock.advance(days=3)
    report = bench.wiring.sweeper.sweep()["auto_topups"]
    # Then it fails, and the org's slot is free for the next fall under the trigger
    assert report["recovered"] == [attempt_id]
    failed = attempt_of(bench, bench.org, attempt_id)
    assert (failed.status, failed.failure_code, failed.processor_ref) == (
        "failed",
        "attempt_unresolved",
        intent,
    )
    assert bench.wiring.payments_store.auto_topup(bench.org.org_id).in_flight is None
    # And a success the processor reports after all still credits it, once
    bench.emulator.intents[intent]["status"] = "succeeded"
    assert bench.emulator.deliver_pending() == [200]
    assert bench.balance() == before + Money.usd(50)
    assert attempt_of(bench, bench.org, attempt_id).status == "succeeded"
