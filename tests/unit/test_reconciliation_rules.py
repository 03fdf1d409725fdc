"""Payments reconciliation (domain/billing/reconciliation.py): every way the ledger's processor credits
and the processor's successful payments can disagree is one listed difference (issue 27
point 2)."""

from __future__ import annotations

from dataclasses import replace

from batchroute.domain.billing.ledger import ProcessorCredit
from batchroute.domain.billing.reconciliation import Difference, LedgerCredit, ProcessorPayment, reconcile
from batchroute.money import Money

SINCE = "2026-11-01T00:00:00.000Z"
SETTLED = "2026-11-28T23:00:00.000Z"


def purchase_payment(
    payment_id: str = "pi_1",
    session_id: str | None = "cs_1",
    *,
    org_id: str | None = "org_a",
    cents: int = 2500,
    currency: str = "usd",
    created: str = "2026-11-10T10:00:00.000Z",
    purpose: str | None = "credit_purchase",
) -> ProcessorPayment:
    return ProcessorPayment(
        payment_id=payment_id,
        session_id=session_id,
        org_id=org_id,
        amount_minor=cents,
        currency=currency,
        purpose=purpose,
        created=created,
    )


def credit(
    ref: str = "cs_1",
    *,
    org_id: str = "org_a",
    usd: str = "25",
    kind: ProcessorCredit = "purchase",
    at: str = "2026-11-10T10:00:05.000Z",
    currency: str = "usd",
) -> LedgerCredit:
    amount = Money(Money.usd(usd).micros, currency)
    return LedgerCredit(org_id=org_id, processor_ref=ref, kind=kind, amount=amount, at=at)


def kinds(differences: tuple[Difference, ...]) -> list[str]:
    return [d.kind for d in differences]


def test_a_purchase_and_a_top_up_each_credited_once_as_paid_are_no_difference() -> None:
    # Given a purchase credited under its session and a top-up under its PaymentIntent
    payments = [
        purchase_payment(),
        purchase_payment("pi_2", None, cents=5000, purpose="auto_topup", created="2026-11-12T00:00:00.000Z"),
    ]
    credits = [credit(), credit("pi_2", usd="50", kind="topup", at="2026-11-12T00:00:01.000Z")]

    # When
    report = reconcile(credits, payments, since=SINCE, settled_before=SETTLED)

    # Then
    assert report.clean
    assert (report.credits, report.payments, report.matched) == (2, 2, 2)


def test_a_payment_never_credited_is_reported_with_what_was_paid() -> None:
    report = reconcile([], [purchase_payment()], since=SINCE, settled_before=SETTLED)

    (difference,) = report.differences
    assert (difference.kind, difference.processor_ref, difference.org_id) == ("not_credited", "pi_1", "org_a")
    assert difference.paid == "25.00 usd"
    assert report.counts == {"not_credited": 1}


def test_a_payment_never_credited_and_refunded_owes_only_what_was_kept() -> None:
    # Refunded in full: the money is back with the customer, nothing to grant by hand
    refunded = replace(purchase_payment(), reversed_cents=2500)
    assert reconcile([], [refunded], since=SINCE, settled_before=SETTLED).clean
    # Refunded in part: reported, saying how much of it is owed
    partly = replace(purchase_payment(), reversed_cents=1000)
    (difference,) = reconcile([], [partly], since=SINCE, settled_before=SETTLED).differences
    assert difference.kind == "not_credited" and difference.paid == "25.00 usd"
    assert difference.detail.endswith("; 10.00 usd of it refunded or lost in dispute, 15.00 usd owed")


def test_a_credit_without_a_successful_payment_is_reported() -> None:
    report = reconcile([credit("cs_forged", usd="1000")], [], since=SINCE, settled_before=SETTLED)

    (difference,) = report.differences
    assert (difference.kind, difference.processor_ref) == ("no_payment", "cs_forged")
    assert difference.credited_amount == "1000.00 usd"


def test_an_amount_a_currency_and_an_org_that_differ_are_each_reported() -> None:
    # Given three payments, each credited differently from what was paid
    payments = [
        purchase_payment("pi_1", "cs_1", cents=1000),
        purchase_payment("pi_2", "cs_2", cents=1000, currency="jpy"),
        purchase_payment("pi_3", "cs_3", org_id="org_a"),
    ]
    credits = [
        credit("cs_1", usd="10000000000"),  # 10^12 cents credited as dollars
        credit("cs_2", usd="10"),  # JPY 1000 credited as $10
        credit("cs_3", org_id="org_b"),
    ]

    # When
    report = reconcile(credits, payments, since=SINCE, settled_before=SETTLED)

    # Then
    assert kinds(report.differences) == ["amount_differs", "currency_differs", "org_differs"]
    amount = report.differences[0]
    assert (amount.paid, amount.credited_amount) == ("10.00 usd", "10000000000.00 usd")
    assert report.differences[2].org_id == "org_b"
    assert report.matched == 0


def test_one_payment_credited_under_its_session_and_its_intent_is_credited_twice() -> None:
    payments = [purchase_payment()]
    credits = [credit("cs_1"), credit("pi_1", kind="topup", at="2026-11-10T10:00:09.000Z")]

    report = reconcile(credits, payments, since=SINCE, settled_before=SETTLED)

    (difference,) = report.differences
    assert difference.kind == "credited_twice"
    assert difference.credited == ("cs_1", "pi_1")
    assert difference.credited_amount == "50.00 usd"


def test_a_payment_just_before_the_window_credited_inside_it_matches() -> None:
    payments = [purchase_payment(created="2026-10-31T23:59:59.000Z")]
    credits = [credit(at="2026-11-01T00:00:02.000Z")]

    report = reconcile(credits, payments, since=SINCE, settled_before=SETTLED)

    assert report.clean and report.matched == 1


def test_an_uncredited_payment_before_the_window_is_not_this_runs_question() -> None:
    report = reconcile(
        [], [purchase_payment(created="2026-10-30T00:00:00.000Z")], since=SINCE, settled_before=SETTLED
    )

    assert report.clean and report.payments == 0


def test_a_payment_newer_than_the_settling_time_is_awaiting_its_credit_not_a_difference() -> None:
    report = reconcile(
        [], [purchase_payment(created="2026-11-28T23:30:00.000Z")], since=SINCE, settled_before=SETTLED
    )

    assert report.clean
    assert report.awaiting_credit == ("pi_1",)


def test_payments_that_are_not_the_services_own_are_counted_not_owed_a_credit() -> None:
    report = reconcile(
        [],
        [purchase_payment(purpose=None), purchase_payment("pi_9", None, purpose="invoice")],
        since=SINCE,
        settled_before=SETTLED,
    )

    assert report.clean
    assert report.foreign_payments == 2


def test_the_json_form_lists_every_difference() -> None:
    report = reconcile([credit("cs_x")], [purchase_payment()], since=SINCE, settled_before=SETTLED)

    document = report.to_dict()

    assert [d["kind"] for d in document["differences"]] == ["no_payment", "not_credited"]
    assert document["counts"] == {"no_payment": 1, "not_credited": 1}
    assert document["since"] == SINCE
