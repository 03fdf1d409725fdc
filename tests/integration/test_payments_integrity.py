"""Only a real payment credits, once (issue 27 point 1, docs/payments.md "What credits a
wallet"), over HTTP on moto against the payment emulator: a completed checkout credits only a
session the service opened and recorded, only when the event matches that record (org,
amount, currency) and the key's mode, and, outside local mode, only when the processor's own
copy of the session says it is paid and matches too; an auto top-up's success only for its
attempt's PaymentIntent, amount and currency. Each refusal credits nothing, writes nothing,
answers 2xx (no redelivery loop), is logged with the event id and counted in
`PaymentEventsRejected`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from batchroute.clock import FixedClock
from batchroute.money import Money
from batchroute.observability import metrics
from batchroute_tools.local.provision import LocalStack
from tests.integration.payments_harness import DECLINES_LATER, Bench, payments_bench
from tests.integration.principals import new_org

START = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
REJECTED_METRIC = "PaymentEventsRejected"  # the metric infra/monitoring.py alarms on


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START)


@pytest.fixture
def bench(local_aws: LocalStack, clock: FixedClock) -> Iterator[Bench]:
    with payments_bench(clock) as running:  # local mode: the service's record decides
        yield running


@pytest.fixture
def confirming(local_aws: LocalStack, clock: FixedClock) -> Iterator[Bench]:
    with payments_bench(clock, confirm_with_processor=True) as running:  # as outside local mode
        yield running


class Refusals:
    """What the operator sees of refused events: the error log (event id, problem) and the
    metric the alarm watches."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self.caplog = caplog
        self.counted_before = self._counted()

    @staticmethod
    def _counted() -> int:
        return sum(metrics.metric_set.get(REJECTED_METRIC, {}).get("Value", []))

    @property
    def logged(self) -> list[tuple[str | None, str]]:
        return [
            (getattr(r, "event_id", None), str(getattr(r, "problem", "")))
            for r in self.caplog.records
            if r.levelname == "ERROR" and r.getMessage().startswith("payment event refused")
        ]

    @property
    def counted(self) -> int:
        return self._counted() - self.counted_before


@pytest.fixture
def refusals(caplog: pytest.LogCaptureFixture) -> Refusals:
    caplog.set_level(logging.INFO)
    return Refusals(caplog)


def cents(checkout: dict[str, Any]) -> int:
    return int(Decimal(checkout["amount"]["amount"]) * 100)


def completion(bench: Bench, checkout: dict[str, Any], event_id: str, **changes: Any) -> dict[str, Any]:
    """A paid `checkout.session.completed` for `checkout` as the processor would send it, with
    `changes` to the session (a `metadata` change replaces the org)."""
    session = {
        "id": checkout["session_id"],
        "object": "checkout.session",
        "mode": "payment",
        "payment_status": "paid",
        "amount_total": cents(checkout),
        "currency": "usd",
        "payment_intent": None,
        "metadata": {"org_id": bench.org.org_id, "purpose": "credit_purchase"},
        **changes,
    }
    return {
        "id": event_id,
        "object": "event",
        "livemode": False,
        "type": "checkout.session.completed",
        "created": 1,
        "data": {"object": session},
    }


def purchases(bench: Bench, org_id: str | None = None) -> list[dict[str, Any]]:
    entries = bench.wiring.ledger.entries(org_id or bench.org.org_id, limit=None)
    return [e for e in entries if e["entry_type"] in ("purchase", "topup")]


def record_status(bench: Bench, session_id: str) -> str | None:
    record = bench.wiring.payments_store.checkout_record(session_id)
    return record.status if record else None


def acknowledged_unapplied(answer: Any) -> bool:
    return bool(answer.status_code == 200 and answer.json()["applied"] is False)


# -- the service's checkout record -------------------------------------------------------------
def test_checkout_records_the_session_it_opened(bench: Bench) -> None:
    checkout = bench.checkout("25.50")
    record = bench.wiring.payments_store.checkout_record(checkout["session_id"])
    assert record is not None
    assert (record.org_id, record.amount_cents, record.currency, record.status) == (
        bench.org.org_id,
        2550,
        "usd",
        "open",
    )
    assert record.user_id and record.created_at == "2026-03-01T09:30:00.000Z"


def test_a_signed_session_the_service_never_opened_credits_nothing(bench: Bench, refusals: Refusals) -> None:
    # Given an event signed with the right secret for a session the processor never created
    # (it once credited $1,000 through the public default secret)
    foreign = {"session_id": "cs_test_never_opened", "amount": {"amount": "1000.00"}}
    answer = bench.post_event(completion(bench, foreign, "evt_foreign"))
    # Then it is acknowledged, credits nothing, and the operator is told
    assert acknowledged_unapplied(answer)
    assert bench.balance() == Money.zero() and purchases(bench) == []
    assert refusals.logged == [("evt_foreign", "a checkout session this service never opened")]
    assert refusals.counted == 1


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"currency": "jpy"}, "currency 'jpy'"),  # JPY 1000 once credited $10.00
        ({"amount_total": 10**12}, "outside checkout's"),  # once credited $10,000,000,000
        ({"amount_total": 2000}, "amount_total 2000 is not the checkout's 1000 cents"),
        ({"amount_total": "1000"}, "not a whole number of cents"),
    ],
)
def test_an_event_that_differs_from_the_record_credits_nothing(
    bench: Bench, refusals: Refusals, changes: dict[str, Any], problem: str
) -> None:
    # Given a real checkout of 10 USD, and an event for it claiming another amount or currency
    checkout = bench.checkout(10)
    answer = bench.post_event(completion(bench, checkout, "evt_differs", **changes))
    # Then nothing is credited and the record stays open
    assert acknowledged_unapplied(answer)
    assert bench.balance() == Money.zero() and purchases(bench) == []
    assert record_status(bench, checkout["session_id"]) == "open"
    ((event_id, logged),) = refusals.logged
    assert event_id == "evt_differs" and problem in logged
    assert refusals.counted == 1


def test_an_event_naming_another_org_credits_neither_and_saves_no_card(
    bench: Bench, refusals: Refusals
) -> None:
    # Given another org's checkout, really paid (its card saved for it)
    other = new_org()
    opened = bench.client.post(
        "/v1/billing/checkout", json={"amount": 30}, headers=other.session_headers("billing")
    )
    checkout = opened.json()
    assert bench.pay(checkout, card=DECLINES_LATER).status_code == 303
    intent = bench.emulator.sessions[checkout["session_id"]]["payment_intent"]
    # When an event for that session claims the bench's org
    claimed = {"org_id": bench.org.org_id, "purpose": "credit_purchase"}
    answer = bench.post_event(
        completion(bench, checkout, "evt_other_org", metadata=claimed, payment_intent=intent)
    )
    # Then neither org is credited, nothing is written: no card saved for the claimed org
    assert acknowledged_unapplied(answer)
    assert purchases(bench) == [] and purchases(bench, other.org_id) == []
    assert bench.wiring.payments_store.payment_method(bench.org.org_id) is None
    assert record_status(bench, checkout["session_id"]) == "open"
    ((event_id, logged),) = refusals.logged
    assert event_id == "evt_other_org" and f"is not the checkout's '{other.org_id}'" in logged
    # And the processor's own events still credit the org that paid, once
    bench.emulator.deliver_pending()
    assert bench.wiring.ledger.state(other.org_id).balance == Money.usd(30)
    assert bench.balance() == Money.zero()


def test_a_live_mode_event_is_refused_by_a_test_key(bench: Bench, refusals: Refusals) -> None:
    # Given a paid checkout whose completion says livemode: true (accepted locally before)
    checkout = bench.checkout(20)
    answer = bench.post_event({**completion(bench, checkout, "evt_live"), "livemode": True})
    # Then nothing is credited
    assert acknowledged_unapplied(answer)
    assert bench.balance() == Money.zero() and purchases(bench) == []
    ((event_id, logged),) = refusals.logged
    assert event_id == "evt_live" and "test key" in logged
    # And the same event in test mode credits, once
    assert bench.post_event(completion(bench, checkout, "evt_test")).json()["applied"] is True
    assert bench.balance() == Money.usd(20)


def test_an_unknown_payment_intent_follows_the_record_and_answers_2xx(
    bench: Bench, refusals: Refusals
) -> None:
    # A foreign session naming an unknown PaymentIntent: 2xx, nothing credited (it once credited
    # the wallet, then answered 500 on every delivery)
    foreign = {"session_id": "cs_test_foreign", "amount": {"amount": "10.00"}}
    for _ in range(2):
        answer = bench.post_event(completion(bench, foreign, "evt_f", payment_intent="pi_unknown"))
        assert acknowledged_unapplied(answer)
    assert bench.balance() == Money.zero()
    # A recorded session naming an unknown PaymentIntent: credited once per the record, no card
    checkout = bench.checkout(10)
    event = completion(bench, checkout, "evt_r", payment_intent="pi_unknown")
    assert bench.post_event(event).json() == {"received": True, "event_id": "evt_r", "applied": True}
    again = bench.post_event(event)
    assert acknowledged_unapplied(again)
    assert bench.balance() == Money.usd(10) and len(purchases(bench)) == 1
    assert bench.wiring.payments_store.payment_method(bench.org.org_id) is None
    assert [e for e, _ in refusals.logged] == ["evt_f", "evt_f"]


def test_a_duplicate_delivery_credits_once_and_marks_the_record_credited(bench: Bench) -> None:
    checkout = bench.checkout(15)
    assert bench.pay(checkout).status_code == 303
    bench.emulator.deliver_pending()
    (completed,) = bench.event_ids("checkout.session.completed")
    # Delivered again, and as the asynchronous success of the same session
    assert bench.emulator.redeliver(completed) == 200
    paid_later = completion(bench, checkout, "evt_async", payment_intent=None)
    paid_later["type"] = "checkout.session.async_payment_succeeded"
    assert acknowledged_unapplied(bench.post_event(paid_later))
    assert bench.balance() == Money.usd(15) and len(purchases(bench)) == 1
    assert record_status(bench, checkout["session_id"]) == "credited"
    assert bench.wiring.ledger.violations(bench.org.org_id) == []


# -- outside local mode: the processor's word --------------------------------------------------
def test_an_event_claiming_paid_for_a_session_the_processor_says_is_unpaid_credits_nothing(
    confirming: Bench, refusals: Refusals
) -> None:
    # Given a recorded checkout nobody paid, and a signed event that says it was paid
    checkout = confirming.checkout(50)
    answer = confirming.post_event(completion(confirming, checkout, "evt_claims_paid"))
    # Then the processor's own copy says unpaid: nothing credited
    assert acknowledged_unapplied(answer)
    assert confirming.balance() == Money.zero() and purchases(confirming) == []
    assert refusals.logged == [("evt_claims_paid", "the processor says the session is 'unpaid', not paid")]
    # And once it is really paid, the processor's events credit it, once
    assert confirming.pay(checkout).status_code == 303
    confirming.emulator.deliver_pending()
    assert confirming.balance() == Money.usd(50) and len(purchases(confirming)) == 1
    assert record_status(confirming, checkout["session_id"]) == "credited"
    card = confirming.wiring.payments_store.payment_method(confirming.org.org_id)
    assert card is not None and card.last4 == "4242"


def test_the_processors_session_must_match_the_record_too(confirming: Bench, refusals: Refusals) -> None:
    # Given two paid checkouts whose processor copies differ from our records
    changed, vanished = confirming.checkout(20), confirming.checkout(30)
    for checkout in (changed, vanished):
        assert confirming.pay(checkout).status_code == 303
    confirming.emulator.sessions[changed["session_id"]]["amount_total"] = 200_000
    del confirming.emulator.sessions[vanished["session_id"]]
    # When events matching our records arrive
    for checkout, event_id in ((changed, "evt_changed"), (vanished, "evt_vanished")):
        assert acknowledged_unapplied(confirming.post_event(completion(confirming, checkout, event_id)))
    # Then nothing is credited, each refusal says why
    assert confirming.balance() == Money.zero() and purchases(confirming) == []
    assert refusals.logged == [
        ("evt_changed", "the processor's session: amount_total 200000 is not the checkout's 2000 cents"),
        ("evt_vanished", "the processor does not know this checkout session"),
    ]
    assert refusals.counted == 2


def test_a_processor_outage_during_the_confirmation_answers_5xx_and_credits_nothing(
    confirming: Bench,
) -> None:
    # The processor cannot be asked: the event is not refused but left for its redelivery
    checkout = confirming.checkout(20)
    confirming.server.stop()
    answer = confirming.post_event(completion(confirming, checkout, "evt_outage"))
    assert answer.status_code >= 500 and "error" in answer.json()
    assert confirming.balance() == Money.zero() and purchases(confirming) == []
    assert record_status(confirming, checkout["session_id"]) == "open"


# -- auto top-up -------------------------------------------------------------------------------
def charged_attempt(bench: Bench) -> tuple[dict[str, Any], dict[str, Any]]:
    """A purchase of 20 USD, auto top-up of 20 below 10, 15 spent, the top-up charged (its
    webhook not yet delivered): the attempt and its PaymentIntent."""
    bench.buy(20)
    bench.configure(enabled=True, trigger_balance=10, amount=20, monthly_cap=100)
    bench.spend("15")
    bench.moved()
    bench.wiring.sweeper.sweep()
    (attempt,) = bench.attempts()
    return attempt, dict(bench.emulator.intents[attempt["processor_reference"]])


def intent_event(
    intent: dict[str, Any], event_id: str, event_type: str = "payment_intent.succeeded"
) -> dict[str, Any]:
    return {
        "id": event_id,
        "object": "event",
        "livemode": False,
        "type": event_type,
        "created": 1,
        "data": {"object": intent},
    }


def test_a_top_up_success_that_is_not_its_attempts_credits_nothing(bench: Bench, refusals: Refusals) -> None:
    attempt, intent = charged_attempt(bench)
    metadata = intent["metadata"]
    forged = {
        "evt_amount": {**intent, "amount": 10**8},  # a million dollars for a 20 USD attempt
        "evt_currency": {**intent, "currency": "jpy"},
        "evt_attempt": {**intent, "metadata": {**metadata, "attempt_id": "topup_unknown"}},
        "evt_intent": {**intent, "id": "pi_someone_elses"},
        "evt_live": intent,
    }
    for event_id, obj in forged.items():
        event = intent_event(obj, event_id)
        if event_id == "evt_live":
            event["livemode"] = True
        assert acknowledged_unapplied(bench.post_event(event)), event_id
    # Then nothing was credited, the attempt still pending, each refusal logged and counted
    assert bench.balance() == Money.usd(5) and [e["entry_type"] for e in purchases(bench)] == ["purchase"]
    assert bench.attempts()[0]["status"] == "pending"
    logged = dict(refusals.logged)
    assert list(logged) == list(forged)
    assert "is not the attempt's 20.00 USD" in logged["evt_amount"]
    assert "currency 'jpy'" in logged["evt_currency"]
    assert logged["evt_attempt"] == "no such auto top-up attempt"
    assert f"is not the attempt's {attempt['processor_reference']}" in logged["evt_intent"]
    assert refusals.counted == len(forged)
    # And the processor's real event credits the attempt, once
    bench.emulator.deliver_pending()
    assert bench.balance() == Money.usd(25) and bench.attempts()[0]["status"] == "succeeded"


def test_another_payment_intents_failure_does_not_fail_the_attempt(bench: Bench) -> None:
    _, intent = charged_attempt(bench)
    failed = {
        **intent,
        "id": "pi_someone_elses",
        "status": "requires_payment_method",
        "last_payment_error": {"code": "card_declined", "message": "declined"},
    }
    assert acknowledged_unapplied(
        bench.post_event(intent_event(failed, "evt_other_fail", "payment_intent.payment_failed"))
    )
    assert bench.attempts()[0]["status"] == "pending" and bench.events("billing.auto_topup_failed") == []
    bench.emulator.deliver_pending()
    assert bench.balance() == Money.usd(25) and bench.attempts()[0]["status"] == "succeeded"
