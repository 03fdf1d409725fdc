"""The pure payment rules (domain/billing/payments.py, docs/payments.md): amounts and cents, the auto
top-up update, when a top-up starts, the back-off schedule, how a PaymentIntent reads as a
charge, and the ledger's processor-credit invariant."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, cast

import pytest
from pydantic import ValidationError

from batchroute.adapters.stripe_payments import SecretsManagerStripeKeys, StripeKeys, StripePayments
from batchroute.clock import FixedClock
from batchroute.config import Settings
from batchroute.domain.billing.ledger import Entry, Wallet, WalletState, ledger_violations
from batchroute.domain.billing.payments import (
    BACKOFF,
    AutoTopup,
    Charge,
    CheckoutRecord,
    PaymentMethod,
    ProcessorEvent,
    TopupAttempt,
    UpdateAutoTopup,
    after_failure,
    after_success,
    apply_update,
    charge_of,
    from_cents,
    livemode_mismatch,
    month_key,
    payment_amount,
    session_mismatch,
    session_of,
    settled_slot,
    skip_reason,
    started,
    to_cents,
    topup_mismatch,
)
from batchroute.errors import InvalidRequest
from batchroute.money import Money
from batchroute.services.billing.auto_topup import AutoTopupService, tell_moved
from batchroute_tools.emulators.stripe import sign
from functions.api.schemas.billing.payments import AutoTopupUpdate, CheckoutRequest

AT = datetime(2026, 3, 31, 23, 30, tzinfo=UTC)
CARD = PaymentMethod("pm_1", "visa", "4242")
ON = AutoTopup(
    org_id="org_1",
    enabled=True,
    trigger_balance=Money.usd(10),
    amount=Money.usd(20),
    monthly_cap=Money.usd(60),
    configured=True,
    version=3,
)


def test_amounts_are_whole_cents_between_5_and_10000_usd() -> None:
    assert payment_amount(5) == Money.usd(5) and payment_amount("10000") == Money.usd(10_000)
    assert payment_amount({"currency": "USD", "amount": "12.34"}) == Money.usd("12.34")
    for bad in (4.99, 10_000.01, "1.234", "x", None, True, -10):
        with pytest.raises(InvalidRequest) as refused:
            payment_amount(bad)
        assert refused.value.code == "invalid_amount" and refused.value.details == {"field": "amount"}
    # an absurd amount (a body's 1e400, read as a decimal) is told the payment's own bound
    for huge in (Decimal("1E+400"), 1e12, "20000"):
        with pytest.raises(InvalidRequest) as refused:
            payment_amount(huge)
        assert refused.value.message == "amount must be between 5.00 USD and 10,000.00 USD."
    assert to_cents(Money.usd("12.34")) == 1234 and from_cents(1234) == Money.usd("12.34")
    with pytest.raises(ValueError, match="whole cents"):
        to_cents(Money(1))


def test_the_month_is_the_utc_calendar_month() -> None:
    assert month_key(AT) == "2026-03"
    assert month_key(AT + timedelta(hours=1)) == "2026-04"


def test_an_update_changes_only_what_it_gives_and_clears_the_back_off() -> None:
    failing = replace(
        ON, failures=2, retry_after="2026-04-01T00:00:00.000Z", enabled=False, disabled_reason="x"
    )
    new = apply_update(failing, parse_update({"amount": 25}), payment_method=CARD, at=AT)
    assert new.amount == Money.usd(25) and new.trigger_balance == ON.trigger_balance
    assert (new.failures, new.retry_after, new.disabled_reason) == (0, None, None)
    assert new.updated_at == "2026-03-31T23:30:00.000Z" and new.version == ON.version  # the store bumps it


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"enabled": True}, "payment_method_required"),
        ({"monthly_cap": 10}, "invalid_auto_topup"),
        ({"trigger_balance": "10000.01"}, "invalid_auto_topup"),  # above the most a trigger may be
        ({"monthly_cap": "100000.01"}, "invalid_auto_topup"),
        ({"amount": "2"}, "invalid_auto_topup"),
        ({"nope": 1}, "invalid_auto_topup"),
        ([], "invalid_auto_topup"),
    ],
)
def test_invalid_updates_are_refused(body: object, code: str) -> None:
    with pytest.raises((InvalidRequest, ValidationError)) as refused:
        apply_update(AutoTopup(org_id="org_1"), parse_update(body), payment_method=None, at=AT)
    if isinstance(refused.value, InvalidRequest):  # a cross-field rule of the domain
        assert refused.value.code == code
    else:  # a field's own rule, answered by the request model (the one [] is not an object)
        assert isinstance(refused.value, ValidationError)
        assert [e["type"] for e in refused.value.errors()] == [code if body != [] else "dict_type"]


def parse_update(body: object) -> UpdateAutoTopup:
    """What the request model hands the service: the given fields, in domain values."""
    return AutoTopupUpdate.model_validate(body).command()


def test_a_top_up_starts_only_below_the_trigger_with_room_under_the_cap_and_no_back_off() -> None:
    def why(settings: AutoTopup, balance: str = "9.99", card: bool = True, at: datetime = AT) -> object:
        return skip_reason(settings, balance=Money.usd(balance), has_card=card, at=at)

    assert why(ON) is None
    assert why(ON, balance="10") == "above_trigger"
    assert why(replace(ON, enabled=False)) == "disabled"
    assert why(ON, card=False) == "no_card"
    assert why(replace(ON, in_flight="topup_x")) == "in_flight"
    assert why(replace(ON, retry_after="2026-03-31T23:30:00.001Z")) == "backing_off"
    assert why(replace(ON, retry_after="2026-03-31T23:30:00.000Z")) is None
    assert why(replace(ON, month="2026-03", month_committed=Money.usd(41))) == "monthly_cap"
    assert why(replace(ON, month="2026-03", month_committed=Money.usd(40))) is None
    # A new month starts from nothing
    assert (
        why(replace(ON, month="2026-03", month_committed=Money.usd(60)), at=AT + timedelta(hours=1)) is None
    )


def test_started_failed_and_succeeded_move_the_state() -> None:
    running = started(ON, "topup_1", at=AT)
    assert (running.in_flight, running.month, running.month_committed) == (
        "topup_1",
        "2026-03",
        Money.usd(20),
    )
    attempt = TopupAttempt("topup_1", "org_1", Money.usd(20), "pending", "2026-03-31T23:30:00.000Z", "x")
    state = running
    for n, wait in enumerate(BACKOFF[:-1], start=1):
        state = after_failure(state, attempt, at=AT)
        assert (state.failures, state.in_flight, state.enabled) == (n, None, True)
        assert state.retry_after == (AT + wait).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        assert state.month_committed == Money.zero()  # a failed top-up gives its room back
        state = started(state, "topup_1", at=AT)
    off = after_failure(state, attempt, at=AT)
    assert (off.enabled, off.disabled_reason, off.retry_after) == (False, "payment_failed", None)
    done = after_success(running, attempt)
    assert (done.in_flight, done.failures, done.month_committed) == (None, 0, Money.usd(20))
    # A success reported after the failure was recorded takes the room back
    failed_first = after_failure(running, attempt, at=AT)
    late = after_success(failed_first, replace(attempt, status="failed"))
    assert (late.failures, late.retry_after, late.month_committed) == (0, None, Money.usd(20))
    # A late failure of another attempt leaves the one in flight alone
    assert after_failure(started(ON, "topup_2", at=AT), attempt, at=AT).in_flight == "topup_2"


def test_a_slot_held_by_a_settled_attempt_is_free() -> None:
    # Settings that still hold an attempt in flight after it settled (written before the
    # settings rode in the credit's transaction) free the slot; a pending one keeps it.
    held = replace(started(ON, "topup_1", at=AT), failures=1, retry_after="2026-03-31T22:00:00.000Z")
    attempt = TopupAttempt("topup_1", "org_1", Money.usd(20), "pending", "2026-03-31T23:30:00.000Z", "x")
    assert settled_slot(held, attempt) == held
    assert settled_slot(held, replace(attempt, attempt_id="topup_2", status="succeeded")) == held
    assert settled_slot(ON, replace(attempt, status="succeeded")) == ON
    done = settled_slot(held, replace(attempt, status="succeeded"))
    # the success applies now: the slot frees, the count resets, the month keeps the money
    assert (done.in_flight, done.failures, done.retry_after, done.month_committed) == (
        None,
        0,
        None,
        Money.usd(20),
    )
    # a failure was counted when it was recorded; a missing attempt holds nothing
    for gone in (replace(attempt, status="failed"), None):
        freed = settled_slot(held, gone)
        assert (freed.in_flight, freed.failures, freed.month_committed) == (None, 1, Money.usd(20))
    assert skip_reason(held, balance=Money.usd(1), has_card=True, at=AT) == "in_flight"
    assert skip_reason(done, balance=Money.usd(1), has_card=True, at=AT) is None


def test_a_payment_intent_reads_as_a_charge() -> None:
    ok = charge_of({"id": "pi_1", "status": "succeeded", "amount": 2000, "metadata": {"a": "b"}})
    assert (ok.status, ok.amount, ok.metadata) == ("succeeded", Money.usd(20), {"a": "b"})
    declined = charge_of(
        {
            "id": "pi_2",
            "status": "requires_payment_method",
            "amount": 2000,
            "last_payment_error": {"code": "card_declined", "message": "Your card was declined."},
        }
    )
    assert (declined.status, declined.failure_code, declined.failure_reason) == (
        "failed",
        "card_declined",
        "Your card was declined.",
    )
    assert (
        charge_of({"id": "pi_3", "status": "requires_action", "amount": 1}).failure_code
        == "authentication_required"
    )
    assert charge_of({"id": "pi_4", "status": "processing", "amount": 1}).status == "processing"


def test_each_processor_reference_is_credited_once() -> None:
    wallet = Wallet()
    assert wallet.credit("cs_1", 25, kind="purchase") and wallet.credit("pi_1", 20, kind="topup")
    assert not wallet.credit("cs_1", 25, kind="purchase")
    assert wallet.balance == 45 and wallet.violations() == []
    twice = [Entry("purchase", 5, processor_ref="cs_1"), Entry("purchase", 5, processor_ref="cs_1")]
    assert ledger_violations(balance=10, reserved=0, available=10, reservations=[], entries=twice) == [
        "cs_1: credited more than once"
    ]
    nameless = [Entry("topup", 5)]
    assert "a topup credit without a processor reference" in ledger_violations(
        balance=5, reserved=0, available=5, reservations=[], entries=nameless
    )


def test_the_balance_listener_never_raises() -> None:
    # The money movement that called it has happened: a failing store is logged, not raised
    class BrokenStore:
        def auto_topup(self, org_id: str) -> AutoTopup:
            raise RuntimeError("the table is gone")

    service = AutoTopupService(
        store=cast(Any, BrokenStore()),
        ledger=cast(Any, None),
        processor=cast(Any, None),
        notifier=cast(Any, None),
        on_moved=lambda org_id, at: None,
        clock=FixedClock(AT),
    )
    service.balance_moved("org_1", WalletState(balance=Money.zero(), reserved=Money.zero()), at=AT)


# -- what credits a wallet (issue 27) ----------------------------------------------------------
RECORD = CheckoutRecord("cs_1", "org_1", "user_1", 2500, "usd", "2026-03-01T09:30:00.000Z")
SESSION = {"id": "cs_1", "amount_total": 2500, "currency": "usd", "metadata": {"org_id": "org_1"}}


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({}, None),
        ({"currency": "USD"}, None),  # the processor's case does not matter
        ({"metadata": {"org_id": "org_2"}}, "org 'org_2' is not the checkout's 'org_1'"),
        ({"metadata": None}, "org None is not the checkout's 'org_1'"),
        ({"amount_total": 2501}, "amount_total 2501 is not the checkout's 2500 cents"),
        ({"amount_total": True}, "amount_total True is not the checkout's 2500 cents"),
        ({"currency": "eur"}, "currency 'eur' is not the checkout's 'usd'"),
        ({"currency": None}, "currency 'missing' is not the checkout's 'usd'"),
    ],
)
def test_a_session_matches_the_record_in_org_amount_and_currency(
    changes: dict[str, Any], problem: str | None
) -> None:
    assert session_mismatch(session_of({**SESSION, **changes}), RECORD) == problem


def test_an_event_must_come_in_the_mode_of_the_key() -> None:
    def event(livemode: bool | None) -> ProcessorEvent:
        return ProcessorEvent("evt_1", "checkout.session.completed", 1, None, livemode=livemode)

    assert livemode_mismatch(event(False), live_key=False) is None
    assert livemode_mismatch(event(True), live_key=True) is None
    assert (
        livemode_mismatch(event(True), live_key=False) == "livemode True but the processor key is a test key"
    )
    assert (
        livemode_mismatch(event(False), live_key=True) == "livemode False but the processor key is a live key"
    )
    assert livemode_mismatch(event(None), live_key=False) is not None  # an event that does not say


@pytest.mark.parametrize(
    ("key", "live"),
    [("sk_live_abc", True), ("rk_live_abc", True), ("sk_test_abc", False), ("sk_test_emulator", False)],
)
def test_the_keys_mode_comes_from_its_prefix(key: str, live: bool) -> None:
    assert StripePayments(lambda: StripeKeys(secret_key=key, webhook_secret="whsec_x")).live_key() is live


def test_the_processor_reads_its_keys_from_the_secret_in_aws_and_from_the_settings_elsewhere() -> None:
    local = StripePayments.from_settings(
        Settings(stripe_secret_key="sk_test_local", payments_api_url="http://127.0.0.1:8010/stripe")
    )
    assert local.keys().secret_key == "sk_test_local"
    assert local.api_base == "http://127.0.0.1:8010/stripe"
    aws = StripePayments.from_settings(
        Settings(
            payments_secret_name="batchroute-test-payments-stripe",
        )
    )
    assert isinstance(aws.keys, SecretsManagerStripeKeys)
    assert aws.keys.name == "batchroute-test-payments-stripe"


PENDING = TopupAttempt("topup_1", "org_1", Money.usd(20), "pending", "2026-03-01", "2026-03-01")
CHARGED = replace(PENDING, processor_ref="pi_1")
PAID = Charge(processor_ref="pi_1", status="succeeded", amount=Money.usd(20), currency="usd")


@pytest.mark.parametrize(
    ("attempt", "charge", "problem"),
    [
        (PENDING, PAID, None),  # the webhook may come before the charge's answer is recorded
        (CHARGED, PAID, None),
        (replace(CHARGED, status="succeeded"), PAID, None),  # a repeat: the ledger's marker says no
        (replace(CHARGED, status="failed"), PAID, None),  # the money was taken after all
        (replace(PENDING, status="failed"), PAID, "the attempt failed before any charge was made"),
        (None, PAID, "no such auto top-up attempt"),
        (CHARGED, replace(PAID, processor_ref="pi_2"), "PaymentIntent pi_2 is not the attempt's pi_1"),
        (CHARGED, replace(PAID, amount=Money.usd(21)), "amount 21.00 USD is not the attempt's 20.00 USD"),
        (CHARGED, replace(PAID, currency="jpy"), "currency 'jpy': auto top-up charges USD only"),
    ],
)
def test_a_top_up_success_must_be_its_attempts(
    attempt: TopupAttempt | None, charge: Charge, problem: str | None
) -> None:
    assert topup_mismatch(attempt, charge) == problem


def test_a_payment_intent_reads_with_its_currency() -> None:
    assert (
        charge_of({"id": "pi_1", "status": "succeeded", "amount": 100, "currency": "JPY"}).currency == "jpy"
    )
    assert charge_of({"id": "pi_1", "status": "succeeded", "amount": 100}).currency == ""


@pytest.mark.parametrize(
    ("body", "code", "message", "details"),
    [
        ({}, "invalid_amount", "amount is required.", {"field": "amount"}),
        ({"amount": 25, "coupon": "x"}, "invalid_request", "Unknown field 'coupon'.", {"field": "coupon"}),
        ({"amount": 4}, "invalid_amount", "the domain's words", {"field": "amount"}),
    ],
)
def test_the_checkout_body_is_refused_in_the_spec_terms(
    body: dict[str, Any], code: str, message: str, details: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError) as refused:
        CheckoutRequest.model_validate(body)
    [error] = refused.value.errors()
    if message == "the domain's words":
        with pytest.raises(InvalidRequest) as domain:
            payment_amount(body["amount"])
        message = domain.value.message
    assert (error["type"], error["msg"], error["ctx"]["details"]) == (code, message, details)
    assert CheckoutRequest.model_validate({"amount": "25.50"}).amount == Money.usd("25.50")


@pytest.mark.parametrize(
    "data",
    [
        {"object": {"object": "payment_intent", "amount": 2000, "status": "succeeded"}},  # no id
        {"object": {"id": "pi_1", "amount": "lots", "status": "succeeded"}},
        {"object": "pi_1"},
        {},
    ],
)
def test_a_signed_event_whose_object_cannot_be_read_has_no_subject(data: dict[str, Any]) -> None:
    # Given a correctly signed payment_intent event whose object is malformed
    payload = json.dumps(
        {"id": "evt_1", "type": "payment_intent.succeeded", "created": 1, "livemode": False, "data": data}
    ).encode()
    adapter = StripePayments(lambda: StripeKeys("sk_test_x", "whsec_x"))
    # When it is verified
    event = adapter.verify_event(payload, sign(payload, "whsec_x", int(time.time())))
    # Then it is read without an error, and carries nothing that could move money
    assert (event.event_id, event.subject) == ("evt_1", None)


def test_a_failing_balance_watch_never_undoes_a_credit() -> None:
    told: list[str] = []

    def watch(org_id: str, at: datetime) -> None:
        told.append(org_id)
        raise RuntimeError("the watch is down")

    tell_moved(watch, "org_1", AT)  # logged, not raised: the credit that called it stands
    assert told == ["org_1"]
