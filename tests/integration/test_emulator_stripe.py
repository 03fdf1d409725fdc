"""The payment emulator cannot drift from Stripe: the official `stripe` SDK drives it over HTTP
and parses every answer into its own types (`stripe.Customer`, `stripe.checkout.Session`,
`stripe.PaymentIntent`, `stripe.CardError`), its webhooks verify with
`stripe.Webhook.construct_event`, and the service's adapter (`StripePayments`) runs against
it unchanged."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import stripe

from batchroute.adapters.stripe_payments import StripeKeys, StripePayments
from batchroute.domain.billing.payments import CheckoutTerms, ProcessorSession
from batchroute.domain.billing.reversals import ReversalClaim
from batchroute.errors import InvalidRequest
from batchroute_tools.emulators.server import EmulatorServer
from batchroute_tools.emulators.stripe import REFUND_FAILURE_SECONDS, StripeEmulator, decode_form, sign

SECRET_KEY = "sk_test_emulated"
WEBHOOK_SECRET = "whsec_emulated"
HOOK = "https://service.example/v1/billing/stripe/webhook"


@pytest.fixture
def received() -> list[tuple[str, bytes, dict[str, str]]]:
    return []


@pytest.fixture
def emulator(received: list[tuple[str, bytes, dict[str, str]]]) -> StripeEmulator:
    def deliver(url: str, payload: bytes, headers: dict[str, str]) -> int:
        received.append((url, payload, headers))
        return 200

    return StripeEmulator(
        secret_key=SECRET_KEY, webhook_secret=WEBHOOK_SECRET, webhook_url=HOOK, deliver=deliver
    )


@pytest.fixture
def server(emulator: StripeEmulator) -> Iterator[EmulatorServer]:
    running = EmulatorServer([emulator.vendor]).start()
    yield running
    running.stop()


@pytest.fixture
def client(server: EmulatorServer) -> stripe.StripeClient:
    return stripe.StripeClient(
        SECRET_KEY, base_addresses={"api": server.base_url + "/stripe"}, max_network_retries=0
    )


@pytest.fixture
def adapter(server: EmulatorServer) -> StripePayments:
    keys = StripeKeys(secret_key=SECRET_KEY, webhook_secret=WEBHOOK_SECRET)
    return StripePayments(lambda: keys, api_base=server.base_url + "/stripe", max_network_retries=0)


def open_session(client: stripe.StripeClient, customer: str, cents: int = 2500) -> stripe.checkout.Session:
    return client.v1.checkout.sessions.create(
        params={
            "mode": "payment",
            "customer": customer,
            "line_items": [
                {
                    "quantity": 1,
                    "price_data": {"currency": "usd", "unit_amount": cents, "product_data": {"name": "c"}},
                }
            ],
            "payment_intent_data": {"setup_future_usage": "off_session", "metadata": {"org_id": "org_1"}},
            "metadata": {"org_id": "org_1", "purpose": "credit_purchase"},
            "success_url": "https://console.example/billing?session_id={CHECKOUT_SESSION_ID}",
            "cancel_url": "https://console.example/billing",
        }
    )


def pay(session_url: str, card: str = "4242424242424242") -> httpx.Response:
    page = httpx.get(session_url)
    assert page.status_code == 200 and '<button type="submit">Pay</button>' in page.text
    return httpx.post(session_url + "/pay", data={"card": card})


def test_the_form_encoding_decodes_as_stripe_nests_it() -> None:
    body = b"a=1&m%5Bk%5D=v&l%5B0%5D%5Bx%5D=1&l%5B1%5D%5Bx%5D=2"
    assert decode_form(body) == {"a": "1", "m": {"k": "v"}, "l": [{"x": "1"}, {"x": "2"}]}


def test_checkout_parses_as_sdk_types_and_the_hosted_page_pays_and_signs_its_webhooks(
    client: stripe.StripeClient, emulator: StripeEmulator, received: list[tuple[str, bytes, dict[str, str]]]
) -> None:
    # Given a customer and an open Checkout Session
    customer = client.v1.customers.create(params={"metadata": {"org_id": "org_1"}})
    assert isinstance(customer, stripe.Customer) and customer.id.startswith("cus_")
    session = open_session(client, customer.id)
    assert isinstance(session, stripe.checkout.Session)
    assert (session.status, session.payment_status, session.amount_total) == ("open", "unpaid", 2500)
    # When the user pays on the hosted page
    answer = pay(str(session.url))
    # Then it redirects to the success URL with the session id, and the session is paid
    assert answer.status_code == 303
    assert answer.headers["location"] == f"https://console.example/billing?session_id={session.id}"
    paid = client.v1.checkout.sessions.retrieve(session.id)
    assert (paid.status, paid.payment_status) == ("complete", "paid")
    intent = client.v1.payment_intents.retrieve(str(paid.payment_intent))
    assert isinstance(intent, stripe.PaymentIntent) and intent.status == "succeeded"
    method = client.v1.payment_methods.retrieve(str(intent.payment_method))
    assert isinstance(method, stripe.PaymentMethod) and method.customer == customer.id  # saved off-session
    assert method.card is not None and method.card.last4 == "4242"
    # And its webhooks verify with the SDK's own check, and only with the right secret
    assert emulator.deliver_pending() == [200, 200]
    events = [
        stripe.Webhook.construct_event(p, h["stripe-signature"], WEBHOOK_SECRET) for _, p, h in received
    ]
    assert [e.type for e in events] == ["payment_intent.succeeded", "checkout.session.completed"]
    assert all(url == HOOK for url, _, _ in received)
    assert events[1].data.object["id"] == session.id
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.Webhook.construct_event(received[0][1], received[0][2]["stripe-signature"], "whsec_other")
    assert emulator.deliver_pending() == []  # delivered once; redeliver() sends again on demand
    assert emulator.redeliver(events[1].id) == 200 and len(received) == 3


def test_a_declined_card_at_checkout_leaves_the_session_open_and_sends_nothing(
    client: stripe.StripeClient, emulator: StripeEmulator
) -> None:
    session = open_session(client, client.v1.customers.create().id)
    answer = pay(str(session.url), card="4000000000000002")
    assert answer.status_code == 402 and "Your card was declined." in answer.text
    assert client.v1.checkout.sessions.retrieve(session.id).status == "open"
    assert emulator.pending() == []


def test_off_session_charges_succeed_decline_and_replay_by_idempotency_key(
    client: stripe.StripeClient, emulator: StripeEmulator
) -> None:
    customer = client.v1.customers.create().id
    cards = {}
    for number in ("4242424242424242", "4000000000000341"):
        session = open_session(client, customer)
        pay(str(session.url), card=number)
        intent = client.v1.payment_intents.retrieve(
            str(client.v1.checkout.sessions.retrieve(session.id).payment_intent)
        )
        cards[number] = str(intent.payment_method)

    def params(method: str) -> stripe.params.PaymentIntentCreateParams:
        return {
            "amount": 5000,
            "currency": "usd",
            "customer": customer,
            "off_session": True,
            "confirm": True,
            "payment_method": method,
        }

    good = client.v1.payment_intents.create(
        params=params(cards["4242424242424242"]), options={"idempotency_key": "topup_1"}
    )
    assert isinstance(good, stripe.PaymentIntent) and good.status == "succeeded"
    again = client.v1.payment_intents.create(
        params=params(cards["4242424242424242"]), options={"idempotency_key": "topup_1"}
    )
    assert again.id == good.id  # the same charge, not a second one
    with pytest.raises(stripe.CardError) as declined:
        client.v1.payment_intents.create(params=params(cards["4000000000000341"]))
    assert declined.value.code == "card_declined" and declined.value.http_status == 402
    assert declined.value.error is not None and declined.value.error.payment_intent is not None
    assert declined.value.error.payment_intent.status == "requires_payment_method"
    assert [e["type"] for e in emulator.pending()][-2:] == [
        "payment_intent.succeeded",
        "payment_intent.payment_failed",
    ]


def test_a_wrong_api_key_is_refused_as_stripe_refuses_it(server: EmulatorServer) -> None:
    wrong = stripe.StripeClient("sk_test_wrong", base_addresses={"api": server.base_url + "/stripe"})
    with pytest.raises(stripe.AuthenticationError):
        wrong.v1.customers.create()


def test_the_service_adapter_runs_unchanged_against_the_emulator(
    adapter: StripePayments, emulator: StripeEmulator, received: list[tuple[str, bytes, dict[str, str]]]
) -> None:
    # Given a customer and a checkout opened through the adapter
    customer = adapter.create_customer(org_id="org_7")
    session = adapter.create_checkout(
        CheckoutTerms(
            customer_id=customer,
            amount_cents=1000,
            org_id="org_7",
            user_id="user_1",
            success_url="https://x.example/s?id={CHECKOUT_SESSION_ID}",
            cancel_url="https://x.example/c",
            idempotency_key="checkout-1",
        )
    )
    assert session.session_id.startswith("cs_test_") and session.expires_at.endswith("Z")
    # When the card that declines off-session pays, the adapter sees the saved card
    pay(session.url, card="4000000000000341")
    emulator.deliver_pending()
    completed = adapter.verify_event(received[-1][1], received[-1][2]["stripe-signature"])
    assert completed.event_type == "checkout.session.completed"
    assert isinstance(completed.subject, ProcessorSession)
    assert completed.subject.metadata == {
        "org_id": "org_7",
        "user_id": "user_1",
        "purpose": "credit_purchase",
    }
    card = adapter.saved_card(str(completed.subject.payment_intent))
    assert card is not None and (card.brand, card.last4) == ("visa", "0341")
    # Then an off-session charge is a failed Charge with the processor's reason
    charge = adapter.charge_off_session(
        customer_id=customer,
        payment_method_id=card.payment_method_id,
        amount_cents=2000,
        org_id="org_7",
        attempt_id="topup_x",
    )
    assert (charge.status, charge.failure_code) == ("failed", "card_declined")
    assert charge.processor_ref.startswith("pi_") and charge.metadata["attempt_id"] == "topup_x"
    assert adapter.payment_intent(charge.processor_ref).status == "failed"
    # And a forged or stale signature does not verify
    payload = received[-1][1]
    with pytest.raises(InvalidRequest) as forged:
        adapter.verify_event(payload, sign(payload, "whsec_forged", int(completed.created)))
    assert forged.value.code == "invalid_signature"
    with pytest.raises(InvalidRequest):
        adapter.verify_event(payload, sign(payload, WEBHOOK_SECRET, 1_000_000_000))  # years old
    with pytest.raises(InvalidRequest):
        adapter.verify_event(payload, None)
    # And one dated further ahead than the tolerance does not either (the SDK checks only the past)
    ahead = int(time.time()) + 4000
    with pytest.raises(InvalidRequest) as future:
        adapter.verify_event(payload, sign(payload, WEBHOOK_SECRET, ahead))
    assert future.value.code == "invalid_signature"
    signed = sign(payload, WEBHOOK_SECRET, ahead)  # its time written as int() still reads it
    for odd in (signed.replace(f"t={ahead}", f"t=+{ahead}"), signed.replace(f"t={ahead}", f"t= {ahead}")):
        with pytest.raises(InvalidRequest):
            adapter.verify_event(payload, odd)
    # And a correctly signed body that is no event is refused as such, never a 500
    for body in (b"not json", b"[]", b'{"id": "evt_1"}'):
        with pytest.raises(InvalidRequest) as no_event:
            adapter.verify_event(body, sign(body, WEBHOOK_SECRET, int(time.time())))
        assert no_event.value.code == "invalid_event"


def test_a_refund_of_the_refund_failing_card_fails_later_as_stripe_makes_it_fail(
    client: stripe.StripeClient,
    adapter: StripePayments,
    emulator: StripeEmulator,
    received: list[tuple[str, bytes, dict[str, str]]],
) -> None:
    # Given a payment with Stripe's refund-failing test card, refunded in part
    now = [time.time()]  # the clock signs the events too: they must be recent
    emulator.clock = lambda: now[0]
    session = open_session(client, client.v1.customers.create().id)
    pay(str(session.url), card="4000000000005126")
    intent = client.v1.payment_intents.retrieve(
        str(client.v1.checkout.sessions.retrieve(session.id).payment_intent)
    )
    refund = client.v1.refunds.create(params={"payment_intent": intent.id, "amount": 1000})
    assert isinstance(refund, stripe.Refund) and refund.status == "succeeded"  # at first
    charge_id = str(intent.latest_charge)
    assert client.v1.charges.retrieve(charge_id).amount_refunded == 1000
    emulator.deliver_pending()
    # When time passes at the processor
    now[0] += REFUND_FAILURE_SECONDS
    emulator.deliver_pending()
    # Then the refund failed, and its money is off the Charge again
    failed = client.v1.refunds.retrieve(refund.id)
    assert (failed.status, failed.failure_reason) == ("failed", "expired_or_canceled_card")
    assert str(failed.failure_balance_transaction).startswith("txn_")
    charge = client.v1.charges.retrieve(charge_id)
    assert (charge.amount_refunded, charge.refunded) == (0, False)
    listed = client.v1.refunds.list(params={"charge": charge_id})
    assert [r.id for r in listed.data] == [refund.id]
    # And the failure was sent as Stripe sends it, signed like every event
    events = [
        stripe.Webhook.construct_event(p, h["stripe-signature"], WEBHOOK_SECRET) for _, p, h in received
    ]
    assert [e.type for e in events][-3:] == ["charge.refund.updated", "refund.updated", "refund.failed"]
    assert events[-1].data.object["status"] == "failed"
    assert events[-1].data["previous_attributes"]["status"] == "succeeded"
    # And the service's adapter reads what the failed refunds came to, and the failure event
    confirmed = adapter.charge(charge_id)
    assert confirmed is not None and (confirmed.refunded_cents, confirmed.failed_refund_cents) == (0, 1000)
    notice = adapter.verify_event(received[-1][1], received[-1][2]["stripe-signature"])
    assert notice.subject == ReversalClaim("refund", charge_id)
    # And a refund of any other card stays refunded
    other = open_session(client, client.v1.customers.create().id)
    pay(str(other.url))
    kept = client.v1.refunds.create(
        params={"payment_intent": str(client.v1.checkout.sessions.retrieve(other.id).payment_intent)}
    )
    now[0] += 10 * REFUND_FAILURE_SECONDS
    assert emulator.fail_due_refunds() == [] and client.v1.refunds.retrieve(kept.id).status == "succeeded"


# -- lists (the reconciliation's reads: issue 27 point 2) ---------------------------------------
class _Ticking:
    """The emulator's clock, ten seconds further at each object created."""

    def __init__(self, start: int = 1_790_000_000) -> None:
        self.now = start

    def __call__(self) -> float:
        return float(self.now)


def create_intents(client: stripe.StripeClient, emulator: StripeEmulator, count: int) -> list[str]:
    ticking = _Ticking()
    emulator.clock = ticking
    ids = []
    for n in range(count):
        ticking.now += 10
        intent = client.v1.payment_intents.create(params={"amount": 1000 + n, "currency": "usd"})
        ids.append(intent.id)
    return ids


def test_payment_intents_list_pages_newest_first_through_the_sdk_as_stripe_does(
    client: stripe.StripeClient, emulator: StripeEmulator
) -> None:
    # Given five PaymentIntents created ten seconds apart
    ids = create_intents(client, emulator, 5)
    newest_first = list(reversed(ids))

    # When the SDK lists them two a page
    page = client.v1.payment_intents.list(params={"limit": 2})

    # Then it parses a Stripe list: newest first, more to come, the list's url
    assert isinstance(page, stripe.ListObject)
    assert all(isinstance(i, stripe.PaymentIntent) for i in page.data)
    assert [i.id for i in page.data] == newest_first[:2]
    assert (page.has_more, page.url) == (True, "/v1/payment_intents")
    # And its auto-paging (starting_after the last id of each page) reaches every one, once
    assert [i.id for i in page.auto_paging_iter()] == newest_first
    # And `created` filters as Stripe's range filter does
    created = [int(client.v1.payment_intents.retrieve(i).created) for i in ids]
    since = client.v1.payment_intents.list(params={"created": {"gte": created[2]}, "limit": 100})
    assert [i.id for i in since.data] == newest_first[:3] and since.has_more is False
    window = client.v1.payment_intents.list(params={"created": {"gt": created[0], "lte": created[3]}})
    assert [i.id for i in window.data] == [ids[3], ids[2], ids[1]]
    exact = client.v1.payment_intents.list(params={"created": created[4]})
    assert [i.id for i in exact.data] == [ids[4]]
    # And ending_before pages back towards the newest
    before = client.v1.payment_intents.list(params={"ending_before": ids[1], "limit": 2})
    assert [i.id for i in before.data] == [ids[3], ids[2]] and before.has_more is True


def test_list_parameters_stripe_refuses_are_refused(
    client: stripe.StripeClient, emulator: StripeEmulator
) -> None:
    create_intents(client, emulator, 1)
    refused = [
        {"limit": 101},
        {"limit": 0},
        {"starting_after": "pi_unknown"},
        {"starting_after": "pi_a", "ending_before": "pi_b"},
        {"created": {"after": 1}},
        {"status": "succeeded"},  # Stripe has no status filter on PaymentIntents
    ]
    for params in refused:
        with pytest.raises(stripe.InvalidRequestError) as caught:
            client.v1.payment_intents.list(params=params)  # type: ignore[arg-type]
        assert caught.value.http_status in (400, 404), params
    with pytest.raises(stripe.InvalidRequestError) as missing:
        client.v1.payment_intents.list(params={"starting_after": "pi_unknown"})
    assert missing.value.code == "resource_missing" and missing.value.param == "starting_after"


def test_checkout_sessions_list_filters_by_status_and_payment_intent(client: stripe.StripeClient) -> None:
    # Given two sessions of which one was paid
    customer = client.v1.customers.create(params={"metadata": {"org_id": "org_1"}})
    unpaid, paid = open_session(client, customer.id), open_session(client, customer.id, cents=4000)
    assert pay(str(paid.url)).status_code == 303
    intent = str(client.v1.checkout.sessions.retrieve(paid.id).payment_intent)

    # When they are listed
    everything = client.v1.checkout.sessions.list()
    complete = client.v1.checkout.sessions.list(params={"status": "complete"})
    by_intent = client.v1.checkout.sessions.list(params={"payment_intent": intent})

    # Then
    assert [s.id for s in everything.data] == [paid.id, unpaid.id]
    assert all(isinstance(s, stripe.checkout.Session) for s in everything.data)
    assert everything.url == "/v1/checkout/sessions"
    assert [(s.id, s.payment_status) for s in complete.data] == [(paid.id, "paid")]
    assert [s.id for s in by_intent.data] == [paid.id]


def test_the_adapter_lists_successful_payments_with_their_checkout_session(
    client: stripe.StripeClient, adapter: StripePayments
) -> None:
    # Given a paid purchase, an open one and an intent that never succeeded
    customer = adapter.create_customer(org_id="org_7")
    opened = [
        adapter.create_checkout(
            CheckoutTerms(
                customer_id=customer,
                amount_cents=cents,
                org_id="org_7",
                user_id="usr_1",
                success_url="https://console.example/ok",
                cancel_url="https://console.example/no",
                idempotency_key=f"checkout-{cents}",
            )
        )
        for cents in (2500, 9900)
    ]
    assert pay(opened[0].url).status_code == 303
    client.v1.payment_intents.create(params={"amount": 700, "currency": "usd", "metadata": {"org_id": "x"}})

    # When
    payments = adapter.successful_payments(datetime.now(UTC) - timedelta(hours=1))

    # Then only the paid purchase, under its intent and its session, for its org and amount
    (payment,) = payments
    assert payment.session_id == opened[0].session_id and payment.payment_id.startswith("pi_")
    assert (payment.org_id, payment.purpose, payment.amount_minor, payment.currency) == (
        "org_7",
        "credit_purchase",
        2500,
        "usd",
    )
    # And nothing created before `since`
    assert adapter.successful_payments(datetime.now(UTC) + timedelta(hours=1)) == []
