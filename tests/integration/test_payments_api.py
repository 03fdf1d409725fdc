"""Credit purchase over HTTP on moto against the payment emulator: checkout is session-only and
validated; the wallet is credited only by the processor's signed webhook, once, whether the
events come twice, in another order or forged; the purchase saves the card for auto top-up."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from batchroute.adapters.aws import client
from batchroute.clock import FixedClock
from batchroute.money import Money
from batchroute_tools.local.provision import LocalStack
from tests.integration.payments_harness import SECRET_KEY, WEBHOOK_PATH, WEBHOOK_SECRET, Bench, payments_bench
from tests.integration.principals import new_org

START = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START)


@pytest.fixture
def bench(local_aws: LocalStack, clock: FixedClock) -> Iterator[Bench]:
    with payments_bench(clock) as running:
        yield running


def test_in_aws_the_keys_come_from_secrets_manager_and_an_empty_secret_answers_503(
    local_aws: LocalStack, clock: FixedClock
) -> None:
    secrets = client("secretsmanager")
    secrets.create_secret(Name="bench-payments-stripe")  # as the stack creates it: empty
    with payments_bench(clock, secret_name="bench-payments-stripe") as bench:
        # An empty secret: buying credits is unavailable, nothing reaches the processor
        answer = bench.client.post(
            "/v1/billing/checkout", json={"amount": 25}, headers=bench.org.session_headers("billing")
        )
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "payments_unavailable"
        assert "sk_" not in answer.text and bench.emulator.customers == {}
    keys = {"secret_key": SECRET_KEY, "webhook_secret": WEBHOOK_SECRET}
    secrets.put_secret_value(SecretId="bench-payments-stripe", SecretString=json.dumps(keys))
    with payments_bench(clock, secret_name="bench-payments-stripe") as bench:
        # Filled by the operator: checkout and the signed webhook work with those keys
        bench.buy(25)
        assert bench.balance() == Money.usd(25)


def purchases(bench: Bench) -> list[dict[str, object]]:
    return [
        e for e in bench.wiring.ledger.entries(bench.org.org_id, limit=None) if e["entry_type"] == "purchase"
    ]


# -- checkout ----------------------------------------------------------------------------------
def test_checkout_needs_a_signed_in_user_with_billing_manage(bench: Bench) -> None:
    # An API key, even the owner's, gets 403 user_session_required (like PUT /v1/billing/controls)
    by_key = bench.client.post(
        "/v1/billing/checkout", json={"amount": 25}, headers=bench.org.key_headers("owner")
    )
    assert by_key.status_code == 403 and by_key.json()["error"]["code"] == "user_session_required"
    # A member's or admin's session lacks billing:manage
    for role in ("member", "admin"):
        answer = bench.client.post(
            "/v1/billing/checkout", json={"amount": 25}, headers=bench.org.session_headers(role)
        )
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "permission_denied"
    assert bench.client.post("/v1/billing/checkout", json={"amount": 25}).status_code == 401


@pytest.mark.parametrize("amount", [4.99, 10_000.01, "abc", 5.001, -5, None, True, {"x": 1}])
def test_checkout_refuses_amounts_outside_5_to_10000_usd_in_whole_cents(bench: Bench, amount: object) -> None:
    answer = bench.client.post(
        "/v1/billing/checkout", json={"amount": amount}, headers=bench.org.session_headers("billing")
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid_amount"
    assert bench.emulator.sessions == {}  # nothing opened at the processor


def test_checkout_opens_a_hosted_session_for_the_org_and_reuses_its_customer(bench: Bench) -> None:
    first = bench.checkout("25.50")
    second = bench.checkout(100)
    assert first["amount"] == {"currency": "usd", "amount": "25.50"}
    assert first["checkout_url"].endswith(f"/stripe/checkout/{first['session_id']}")
    assert first["expires_at"].endswith("Z")
    sessions = bench.emulator.sessions
    one, two = sessions[first["session_id"]], sessions[second["session_id"]]
    assert (one["amount_total"], two["amount_total"]) == (2550, 10_000)
    assert one["customer"] == two["customer"] and len(bench.emulator.customers) == 1
    assert one["metadata"]["org_id"] == bench.org.org_id and one["metadata"]["purpose"] == "credit_purchase"
    assert one["_payment_intent_data"]["setup_future_usage"] == "off_session"
    assert one["success_url"].startswith("http://127.0.0.1:8000/console/billing?checkout=success")
    # Opening a checkout credits nothing
    assert bench.balance() == Money.zero()
    # And the runtime says checkout is available here
    capability = bench.client.get("/v1/runtime").json()["capabilities"]["billing_checkout"]
    assert capability["enabled"] is True and "payment emulator" in capability["detail"]


# -- the webhook -------------------------------------------------------------------------------
def test_paying_credits_the_wallet_once_through_the_signed_webhook(bench: Bench) -> None:
    # Given a checkout paid on the hosted page, its webhooks not yet delivered
    checkout = bench.checkout(25)
    assert bench.pay(checkout).status_code == 303
    assert bench.balance() == Money.zero()  # the redirect alone credits nothing
    # When the processor delivers its events
    assert bench.emulator.deliver_pending() == [200, 200]
    # Then the wallet holds the purchase, once, with its ledger entry
    assert bench.balance() == Money.usd(25)
    (entry,) = purchases(bench)
    assert entry["processor_ref"] == checkout["session_id"] and entry["amount_micros"] == 25_000_000
    # And every repeat of every event changes nothing
    for event_id in [e.event["id"] for e in bench.emulator.events] * 2:
        assert bench.emulator.redeliver(event_id) == 200
    assert bench.balance() == Money.usd(25) and len(purchases(bench)) == 1
    assert bench.wiring.ledger.violations(bench.org.org_id) == []
    # And the card it saved shows on the auto top-up settings
    card = bench.client.get("/v1/billing/auto-topup", headers=bench.org.key_headers("billing")).json()
    assert card["auto_topup"]["payment_method"] == {"brand": "visa", "last4": "4242"}


def test_a_checkout_reads_open_until_its_credit_lands_then_credited(bench: Bench) -> None:
    # Given a paid checkout whose webhooks are not yet delivered
    checkout = bench.checkout(25)
    bench.pay(checkout)
    path = f"/v1/billing/checkout/{checkout['session_id']}"
    reader = bench.org.key_headers("billing")
    # Then it reads open, with its amount
    opened = bench.client.get(path, headers=reader)
    assert opened.status_code == 200, opened.text
    expected = {"session_id": checkout["session_id"], "status": "open", "amount": checkout["amount"]}
    assert opened.json() == expected
    # When the processor's events arrive / Then it reads credited
    bench.emulator.deliver_pending()
    assert bench.client.get(path, headers=reader).json()["status"] == "credited"
    # And another org, or an unknown id, finds nothing
    stranger = new_org().key_headers()
    assert bench.client.get(path, headers=stranger).json()["error"]["code"] == "checkout_not_found"
    assert bench.client.get("/v1/billing/checkout/cs_nope", headers=reader).status_code == 404


def test_events_in_any_order_credit_once(bench: Bench) -> None:
    checkout = bench.checkout(40)
    bench.pay(checkout)
    completed, succeeded = (
        bench.event_ids("checkout.session.completed"),
        bench.event_ids("payment_intent.succeeded"),
    )
    # The session's completion first, then the intent's success, then the completion again
    answers = [bench.emulator.redeliver(i) for i in (*completed, *succeeded, *completed)]
    assert answers == [200, 200, 200]
    assert bench.balance() == Money.usd(40) and len(purchases(bench)) == 1


def test_a_webhook_answer_says_whether_it_applied(bench: Bench) -> None:
    checkout = bench.checkout(10)
    bench.pay(checkout)
    (completed,) = bench.event_ids("checkout.session.completed")
    payload, headers = bench.emulator.signed(completed)
    first = bench.client.post(WEBHOOK_PATH, content=payload, headers=headers)
    again = bench.client.post(WEBHOOK_PATH, content=payload, headers=headers)
    assert first.json() == {"received": True, "event_id": completed, "applied": True}
    assert again.json() == {"received": True, "event_id": completed, "applied": False}


def test_forged_or_tampered_events_are_refused_and_credit_nothing(bench: Bench) -> None:
    checkout = bench.checkout(25)
    bench.pay(checkout)
    (completed,) = bench.event_ids("checkout.session.completed")
    payload, headers = bench.emulator.signed(completed)
    # A wrong secret
    forged = bench.emulator.signed(completed, secret="whsec_attacker")[1]
    # The right signature over other bytes (the amount raised)
    event = json.loads(payload)
    event["data"]["object"]["amount_total"] = 1_000_000
    tampered = json.dumps(event).encode()
    for body, sent in [
        (payload, forged),
        (tampered, headers),
        (payload, {"content-type": "application/json"}),
    ]:
        answer = bench.client.post(WEBHOOK_PATH, content=body, headers=sent)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_signature"
    # An event signed long ago (a replay) is refused too
    stale = bench.post_event(event, at=datetime(2020, 1, 1, tzinfo=UTC))
    assert stale.status_code == 400
    assert bench.balance() == Money.zero() and purchases(bench) == []


def test_a_signed_event_of_an_odd_shape_is_refused_or_ignored_never_a_500(bench: Bench) -> None:
    # Given a real completed purchase's event, signed, with one field of a shape Stripe never sends
    checkout = bench.checkout(10)
    bench.pay(checkout)
    (completed,) = bench.event_ids("checkout.session.completed")
    event = json.loads(bench.emulator.signed(completed)[0])
    not_events = [{**event, "created": "abc"}, {**event, "created": True}, {**event, "data": "x"}]
    for odd in not_events:
        # Then one that is no Event is 400 invalid_event (Stripe would retry a 500 for days)
        answer = bench.post_event(odd)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_event", odd
    # And an object whose metadata is not a map names no org: acknowledged, nothing applied
    session = {**event["data"]["object"], "metadata": ["org_id", "purpose"]}
    answer = bench.post_event({**event, "id": "evt_odd_metadata", "data": {"object": session}})
    assert answer.status_code == 200 and answer.json()["applied"] is False
    intent = {
        "id": "pi_odd",
        "object": "payment_intent",
        "status": "succeeded",
        "amount": 1000,
        "metadata": 7,
    }
    answer = bench.post_event(
        {**event, "id": "evt_odd_pi", "type": "payment_intent.succeeded", "data": {"object": intent}}
    )
    assert answer.status_code == 200 and answer.json()["applied"] is False
    assert bench.balance() == Money.zero()


def test_an_unpaid_completion_credits_nothing_until_the_payment_succeeds(bench: Bench) -> None:
    # Given an asynchronous payment method: the session completes unpaid
    checkout = bench.checkout(30)
    session = {
        "id": checkout["session_id"],
        "object": "checkout.session",
        "mode": "payment",
        "payment_status": "unpaid",
        "amount_total": 3000,
        "currency": "usd",
        "metadata": {"org_id": bench.org.org_id, "purpose": "credit_purchase"},
        "payment_intent": None,
    }
    event = {
        "id": "evt_async_1",
        "object": "event",
        "livemode": False,
        "created": 1,
        "type": "checkout.session.completed",
        "data": {"object": session},
    }
    assert bench.post_event(event).json()["applied"] is False
    assert bench.balance() == Money.zero()
    # When it is paid later
    paid = {**event, "id": "evt_async_2", "type": "checkout.session.async_payment_succeeded"}
    paid["data"] = {"object": {**session, "payment_status": "paid"}}
    assert bench.post_event(paid).json()["applied"] is True
    assert bench.post_event(paid).json()["applied"] is False
    assert bench.balance() == Money.usd(30)


def test_events_of_other_kinds_are_acknowledged_and_ignored(bench: Bench) -> None:
    event = {
        "id": "evt_other",
        "object": "event",
        "livemode": False,
        "created": 1,
        "type": "customer.created",
        "data": {"object": {"id": "cus_1"}},
    }
    answer = bench.post_event(event)
    assert answer.status_code == 200 and answer.json()["applied"] is False


def _signed_completion(bench: Bench, **session: object) -> dict[str, object]:
    """A checkout.session.completed for the bench's org, as a key holder could sign one."""
    return {
        "id": f"evt_{'_'.join(str(v) for v in session.values())}",
        "object": "event",
        "livemode": False,
        "type": "checkout.session.completed",
        "created": int(datetime.now(UTC).timestamp()),
        "data": {
            "object": {
                "id": "cs_test_unknown",
                "object": "checkout.session",
                "mode": "payment",
                "payment_status": "paid",
                "amount_total": 1000,
                "currency": "usd",
                "payment_intent": "pi_does_not_exist",
                "metadata": {"org_id": bench.org.org_id, "purpose": "credit_purchase"},
                **session,
            }
        },
    }


@pytest.mark.parametrize(
    "session",
    [
        {"currency": "jpy"},  # JPY 1000 once credited $10.00
        {"amount_total": 10**12},  # once credited $10,000,000,000; checkout sells at most $10,000
        {"amount_total": 100},  # under checkout's $5
    ],
)
def test_a_signed_event_that_is_not_what_checkout_sells_credits_nothing(
    bench: Bench, session: dict[str, object]
) -> None:
    # Given a correctly signed completion whose currency or amount checkout never sells (issue 27)
    answer = bench.post_event(_signed_completion(bench, **session))
    # Then it is acknowledged (no redelivery loop) and credits nothing
    assert answer.status_code == 200 and answer.json()["applied"] is False
    assert bench.balance() == Money.zero() and purchases(bench) == []


def test_a_paid_session_naming_an_unknown_payment_intent_answers_2xx(bench: Bench) -> None:
    # Once credited, then answered 500 on every delivery (the processor retries for days)
    answer = bench.post_event(_signed_completion(bench))
    again = bench.post_event(_signed_completion(bench))
    assert answer.status_code == 200 and again.status_code == 200
    assert again.json()["applied"] is False  # once
