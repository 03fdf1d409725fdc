"""Auto top-up after a refund or a dispute of one of the org's payments, over HTTP on moto
against the payment emulator (docs/payments.md, "Refunds and disputes" and "Auto top-up"): a
dispute opened (or lost) and a refund taken back switch auto top-up off with a
`disabled_reason`, before the balance watch hears of the debit, so the card that was charged
back or refunded is not charged again off-session; saving the settings switches it on again,
and a late repeat of the dispute's event does not switch it off again."""

from __future__ import annotations

from typing import Any

import pytest

from batchroute.clock import FixedClock
from batchroute.domain.billing.payments import AutoTopup
from batchroute.errors import TransientError
from batchroute.money import Money
from tests.integration.payments_harness import Bench, intent_of, stripe_client
from tests.integration.payments_harness import real_time_clock as real_time_clock  # the fixtures
from tests.integration.payments_harness import running_bench as running_bench
from tests.integration.test_auto_topup_api import settings

ARMED = {"enabled": True, "trigger_balance": "10", "amount": "50"}


def started_attempt(bench: Bench) -> dict[str, Any]:
    """100 USD bought, auto top-up on, then 95 spent: an attempt started (the balance fell
    under the trigger) and not charged yet, which the sweeper charges within the minute."""
    bench.buy(100)
    bench.configure(**ARMED)
    bench.spend("95")
    bench.moved()
    (started,) = bench.attempts()
    assert started["status"] == "pending" and not started["processor_reference"]
    return started


def switched_off(bench: Bench) -> str | None:
    found = settings(bench)
    return None if found["enabled"] else found["status"]["disabled_reason"]


def test_a_lost_dispute_charges_the_disputed_card_no_more(bench: Bench, clock: FixedClock) -> None:
    # Given 100 USD bought (the card saved) and auto top-up on (trigger 10, amount 50)
    session = bench.buy(100)
    bench.configure(**ARMED)
    # When the payment is disputed, its opening never delivered, and the dispute is lost
    dispute = bench.emulator.open_dispute(intent_of(bench, session))
    bench.emulator.events.clear()
    bench.emulator.close_dispute(dispute["id"], won=False)
    assert bench.emulator.deliver_pending() == [200]
    assert bench.balance() == Money.zero()
    # Then auto top-up is off, with its reason, and no sweep charges the card
    assert switched_off(bench) == "payment_disputed"
    bench.wiring.sweeper.sweep()
    clock.advance(minutes=1)
    bench.wiring.sweeper.sweep()
    assert bench.attempts() == []
    (alert,) = bench.events("billing.payment_reversed")
    assert "Auto top-up is switched off" in alert["details"]["message"]


def test_an_opened_dispute_switches_auto_top_up_off_until_the_settings_are_saved(
    bench: Bench, clock: FixedClock
) -> None:
    # Given 100 USD bought and auto top-up on
    session = bench.buy(100)
    bench.configure(**ARMED)
    # When the payment is disputed
    bench.emulator.open_dispute(intent_of(bench, session))
    bench.emulator.deliver_pending()
    # Then auto top-up is off at once (no money moved yet), and the org is told
    assert switched_off(bench) == "payment_disputed" and bench.balance() == Money.usd(100)
    (alert,) = bench.events("billing.payment_disputed")
    assert "Auto top-up is switched off" in alert["details"]["message"]
    # And saving the settings later switches it on again; a late repeat of the opening
    # changes nothing
    clock.advance(minutes=5)
    assert bench.configure(enabled=True)["status"]["disabled_reason"] is None
    (opened,) = bench.event_ids("charge.dispute.created")
    assert bench.emulator.redeliver(opened) == 200
    assert switched_off(bench) is None


def test_a_refund_charges_the_refunded_card_no_more(bench: Bench) -> None:
    # Given 100 USD bought and auto top-up on
    session = bench.buy(100)
    bench.configure(**ARMED)
    # When the payment is refunded in full
    client = stripe_client(bench)
    client.v1.refunds.create(params={"payment_intent": intent_of(bench, session)})
    assert bench.emulator.deliver_pending() == [200, 200]
    # Then the credit is taken back, auto top-up is off and nothing is charged
    assert bench.balance() == Money.zero()
    assert switched_off(bench) == "payment_refunded"
    bench.wiring.sweeper.sweep()
    assert bench.attempts() == []
    # And once the user saves the settings again, the next fall under the trigger tops up
    bench.configure(enabled=True)
    bench.moved()
    bench.wiring.sweeper.sweep()
    (attempt,) = bench.attempts()
    assert attempt["processor_reference"]


def test_an_attempt_not_charged_yet_is_not_charged_once_the_user_switched_auto_top_up_off(
    bench: Bench,
) -> None:
    # Given an attempt started but not charged yet
    started = started_attempt(bench)
    # When the user switches auto top-up off before the sweep
    bench.configure(enabled=False)
    report = bench.wiring.sweeper.sweep()["auto_topups"]
    assert report["withdrawn"] == [started["id"]] and report["charged"] == []
    # Then the card is not charged: the attempt ends, saying why, and the balance is as it was
    (ended,) = bench.attempts()
    assert ended["status"] == "failed" and not ended["processor_reference"], ended
    assert ended["failure_code"] == "auto_topup_disabled", ended
    assert bench.balance() == Money.usd(5)
    # And nothing counts as a failed payment: no back-off, no "failed" email
    assert settings(bench)["status"]["consecutive_failures"] == 0
    assert not bench.events("billing.auto_topup_failed")


def test_an_attempt_is_not_charged_when_auto_top_up_is_switched_off_while_the_sweep_decides(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an attempt started but not charged yet, and a sweep that finds auto top-up on just
    # before the user (or a dispute's webhook) switches it off
    started = started_attempt(bench)
    store = bench.wiring.auto_topup.store
    read = store.auto_topup

    def read_then_switched_off(org_id: str) -> AutoTopup:
        monkeypatch.setattr(store, "auto_topup", read)  # once
        found = read(org_id)
        bench.configure(enabled=False)
        return found

    monkeypatch.setattr(store, "auto_topup", read_then_switched_off)
    # When that sweep and the next run
    bench.wiring.sweeper.sweep()
    report = bench.wiring.sweeper.sweep()["auto_topups"]
    # Then the card is never charged: the attempt is withdrawn, and the balance is as it was
    assert report["withdrawn"] == [started["id"]]
    (ended,) = bench.attempts()
    assert ended["failure_code"] == "auto_topup_disabled" and not ended["processor_reference"], ended
    assert bench.emulator.deliver_pending() == [] and bench.balance() == Money.usd(5)


def test_an_attempt_whose_charge_answer_was_lost_is_charged_again_not_withdrawn(bench: Bench) -> None:
    # Given an attempt whose charge reached the processor but whose answer was lost
    bench.buy(100)
    bench.configure(**ARMED)
    bench.spend("95")
    bench.moved()
    processor = bench.wiring.auto_topup.processor
    real = processor.charge_off_session

    def answer_lost(**kwargs: Any) -> Any:
        real(**kwargs)
        raise TransientError("the answer never came")

    processor.charge_off_session = answer_lost
    try:
        bench.wiring.sweeper.sweep()
    finally:
        del processor.charge_off_session
    (tried,) = bench.attempts()
    assert tried["status"] == "pending" and not tried["processor_reference"]
    # When the user switches auto top-up off before the next sweep
    bench.configure(enabled=False)
    bench.wiring.sweeper.sweep()
    assert bench.emulator.deliver_pending()
    # Then the charge is repeated under its key (the same PaymentIntent) and credited: the card
    # was charged, so the attempt is never withdrawn
    (done,) = bench.attempts()
    assert done["status"] == "succeeded", done
    assert bench.balance() == Money.usd(55)
