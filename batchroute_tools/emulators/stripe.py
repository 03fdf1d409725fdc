"""The payment emulator: Stripe's API as far as the service uses it, on the emulator server
under `/stripe` (docs/emulators.md, docs/payments.md).

It speaks Stripe's wire protocol, so the service's adapter (the official `stripe` SDK) runs
unchanged against it: form-encoded POSTs under `/v1/...` with a bearer secret key, Stripe's
JSON objects, its error shape (`{"error": {type, code, decline_code, message, param,
payment_intent}}`, 402 for a card error), `Idempotency-Key` replays, and webhooks signed as
Stripe signs them (`Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "{t}.{payload}" keyed
with the whsec_ secret>`).

Objects: Customers, Checkout Sessions (mode `payment`, `price_data` line items; a hosted page
at the session's `url`, styled like the console, whose "Pay" marks the session paid, saves the
card when `setup_future_usage` asks, and sends `payment_intent.succeeded` and
`checkout.session.completed`), PaymentIntents (off-session confirm of a saved card; sends
`payment_intent.succeeded` or `payment_intent.payment_failed`) and PaymentMethods. PaymentIntents
and Checkout Sessions are listed as Stripe lists them (`GET /v1/payment_intents`,
`GET /v1/checkout/sessions`: newest first, `{object: "list", data, has_more, url}`, `limit`,
`starting_after` / `ending_before`, `created` filters), which the reconciliation reads.

Refunds and disputes: a succeeded PaymentIntent has a Charge (`latest_charge`, `GET
/v1/charges/<id>`, listed at `GET /v1/charges`). `POST /v1/refunds` (`payment_intent` or
`charge`, optional `amount`: the rest by default) refunds it as Stripe does: a `refund`
object (status `succeeded`), the Charge's `amount_refunded` added to and `refunded` true once
all of it is, the PaymentIntent left `succeeded` with its `amount_received`, and the events
`charge.refunded` (the Charge) and `refund.created` (the Refund); refusing more than is left
(`amount_too_large`), a fully refunded charge (`charge_already_refunded`) and a disputed one
(`charge_disputed`). A refund of a payment made with the refund-failing test card (below)
fails as Stripe's test mode makes it fail: asynchronously. It is answered `succeeded` (and
`charge.refunded` sent) like any other; `REFUND_FAILURE_SECONDS` later by the emulator's
`clock`, at the first call, delivery or delivery-loop tick after that, it turns `failed`
(`failure_reason` `expired_or_canceled_card`, a `failure_balance_transaction`), the money
goes back: the Charge's `amount_refunded` is lowered by it (`refunded` false again, so it can
be refunded again), and `charge.refund.updated`, `refund.updated` and `refund.failed` are
sent (the Refund, with `previous_attributes`). Refunds are listed at `GET /v1/refunds`
(`charge`, `payment_intent`). Disputes cannot be opened through Stripe's API (its test cards do it):
`open_dispute(payment_intent)` opens one for the Charge's unrefunded amount
(`needs_response`, the Charge `disputed`, `charge.dispute.created`) and
`close_dispute(dispute_id, won=...)` closes it `won` or `lost` (`charge.dispute.closed`);
`GET /v1/disputes/<id>` and `GET /v1/disputes` read them.

Deterministic test cards (the numbers Stripe's test mode uses for the same behaviour):

| Card | At checkout | Off-session later | A refund of it |
|---|---|---|---|
| 4242 4242 4242 4242 (visa) | paid | succeeds | succeeds |
| 4000 0000 0000 0341 (visa) | paid, card saved | declined: `card_declined` / `generic_decline` | succeeds |
| 4000 0027 6000 3184 (visa) | paid, card saved | `authentication_required` | succeeds |
| 4000 0000 0000 5126 (visa) | paid, card saved | succeeds | `succeeded`, later `failed` |
| 4000 0000 0000 0002 (visa) | declined (page says so, nothing sent) | - | - |

Ids are counters (`cus_emu00000001`, `cs_emu00000001`, ...), so a run is reproducible.
Events are queued; `deliver_pending()` posts them (tests call it, and may deliver an event
again with `redeliver(event_id)` or in any order); with `auto_deliver` a background thread
posts them a moment after the call that caused them, retrying a failed delivery with
back-off, like Stripe.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import logging
import operator
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

import httpx

from batchroute_tools.emulators.server import Reply, Request, Vendor

log = logging.getLogger(__name__)

API_VERSION = "2025-09-30.clover"
SESSION_SECONDS = 24 * 3600
MIN_CHARGE_CENTS = 50
DELIVERY_BACKOFF_SECONDS = (0.5, 2.0, 5.0, 15.0)
# How long after its creation a refund of the refund-failing card fails ("some time later"
# in Stripe's test mode; tests move the emulator's `clock` past it).
REFUND_FAILURE_SECONDS = 5.0
REFUND_FAILURE_REASON = "expired_or_canceled_card"


@dataclass(frozen=True)
class TestCard:
    __test__ = False
    number: str
    brand: str
    label: str
    checkout: str  # "paid" or a decline code
    off_session: str  # "succeeded" or a failure code
    refund: str = "succeeded"  # or "failed": a refund of it fails asynchronously


CARDS = {
    card.number: card
    for card in (
        TestCard("4242424242424242", "visa", "Visa 4242: always succeeds", "paid", "succeeded"),
        TestCard(
            "4000000000000341",
            "visa",
            "Visa 0341: later off-session charges decline",
            "paid",
            "card_declined",
        ),
        TestCard(
            "4000002760003184",
            "visa",
            "Visa 3184: later charges need authentication",
            "paid",
            "authentication_required",
        ),
        TestCard(
            "4000000000005126",
            "visa",
            "Visa 5126: a refund of it fails later",
            "paid",
            "succeeded",
            refund="failed",
        ),
        TestCard("4000000000000002", "visa", "Visa 0002: declined", "card_declined", "card_declined"),
    )
}
MESSAGES = {
    "card_declined": "Your card was declined.",
    "authentication_required": "Your card was declined. This transaction requires authentication.",
}

Deliver = Callable[[str, bytes, dict[str, str]], int]


def sign(payload: bytes, secret: str, timestamp: int) -> str:
    """The `Stripe-Signature` header of `payload` signed at `timestamp`."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + payload, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def http_deliver(url: str, payload: bytes, headers: dict[str, str]) -> int:
    return httpx.post(url, content=payload, headers=headers, timeout=15.0).status_code


def decode_form(body: bytes) -> dict[str, Any]:
    """Stripe's form encoding (`a[b][0][c]=v`) as nested dicts and lists."""
    root: dict[str, Any] = {}
    for key, value in parse_qsl(body.decode(), keep_blank_values=True):
        parts = key.replace("]", "").split("[")
        node = root
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    decoded: dict[str, Any] = _lists(root)
    return decoded


def _lists(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    converted = {k: _lists(v) for k, v in node.items()}
    if converted and all(k.isdecimal() for k in converted):
        return [converted[k] for k in sorted(converted, key=int)]
    return converted


class StripeError(Exception):
    def __init__(self, status: int, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.status = status
        self.error = error


def _invalid(message: str, param: str | None = None, code: str = "parameter_invalid") -> StripeError:
    return StripeError(
        400, {"type": "invalid_request_error", "code": code, "message": message, "param": param}
    )


def _missing(kind: str, ident: str, param: str) -> StripeError:
    return StripeError(
        404 if param == "id" else 400,
        {
            "type": "invalid_request_error",
            "code": "resource_missing",
            "message": f"No such {kind}: '{ident}'",
            "param": param,
        },
    )


@dataclass
class _Event:
    event: dict[str, Any]
    payload: bytes
    attempts: int = 0
    delivered: bool = False
    next_at: float = 0.0  # auto delivery: not before this time (back-off after a failure)


@dataclass
class StripeEmulator:
    secret_key: str = "sk_test_emulator"  # noqa: S105 (the emulator's, as in the local settings)
    webhook_secret: str = "whsec_emulator"  # noqa: S105
    webhook_url: str | None = None
    prefix: str = "/stripe"
    clock: Callable[[], float] = time.time
    deliver: Deliver = http_deliver
    auto_deliver: bool = False
    customers: dict[str, dict[str, Any]] = field(default_factory=dict)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    intents: dict[str, dict[str, Any]] = field(default_factory=dict)
    methods: dict[str, dict[str, Any]] = field(default_factory=dict)
    charges: dict[str, dict[str, Any]] = field(default_factory=dict)
    refunds: dict[str, dict[str, Any]] = field(default_factory=dict)
    disputes: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[_Event] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        self._counter = 0
        self._idempotent: dict[tuple[str, str], tuple[dict[str, Any], Reply]] = {}
        self._wake = threading.Event()
        self.vendor = self._routes()
        if self.auto_deliver:
            threading.Thread(target=self._delivery_loop, name="stripe-webhooks", daemon=True).start()

    # -- plumbing ----------------------------------------------------------------------------
    def _id(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}_emu{self._counter:08d}"

    def _now(self) -> int:
        return int(self.clock())

    def _routes(self) -> Vendor:
        vendor = Vendor(self.prefix)
        api = [
            ("POST", r"/v1/customers", self._create_customer),
            ("GET", r"/v1/customers/(?P<id>[^/]+)", self._get(self.customers, "customer")),
            ("POST", r"/v1/checkout/sessions", self._create_session),
            ("GET", r"/v1/checkout/sessions/(?P<id>[^/]+)", self._get(self.sessions, "checkout.session")),
            ("POST", r"/v1/payment_intents", self._create_intent),
            ("GET", r"/v1/payment_intents/(?P<id>[^/]+)", self._get(self.intents, "payment_intent")),
            ("GET", r"/v1/payment_methods/(?P<id>[^/]+)", self._get(self.methods, "payment_method")),
            ("GET", r"/v1/charges/(?P<id>[^/]+)", self._get(self.charges, "charge")),
            ("POST", r"/v1/refunds", self._create_refund),
            ("GET", r"/v1/refunds/(?P<id>[^/]+)", self._get(self.refunds, "refund")),
            ("GET", r"/v1/disputes/(?P<id>[^/]+)", self._get(self.disputes, "dispute")),
        ]
        for method, pattern, handler in [*api, *self._list_routes()]:
            vendor.route(method, pattern)(self._api(handler))
        vendor.route("GET", r"/checkout/(?P<id>[^/]+)")(self._page)
        vendor.route("POST", r"/checkout/(?P<id>[^/]+)/pay")(self._pay)
        return vendor

    def _api(self, handler: Callable[[Request], dict[str, Any]]) -> Callable[[Request], Reply]:
        def run(request: Request) -> Reply:
            auth = request.headers.get("authorization", "")
            if auth != f"Bearer {self.secret_key}":
                return Reply.json(
                    401,
                    {"error": {"type": "invalid_request_error", "message": "Invalid API Key provided."}},
                )
            key = request.headers.get("idempotency-key")
            self.fail_due_refunds()
            with self._lock:
                if key and request.method == "POST" and (request.path, key) in self._idempotent:
                    return self._replay(key, decode_form(request.body), *self._idempotent[request.path, key])
                try:
                    reply = Reply.json(200, handler(request))
                except StripeError as exc:
                    reply = Reply.json(exc.status, {"error": exc.error})
                reply.headers["request-id"] = self._id("req")
                if key and request.method == "POST":
                    self._idempotent[request.path, key] = (decode_form(request.body), reply)
            self._wake.set()
            return reply

        return run

    def _replay(self, key: str, form: dict[str, Any], first_form: dict[str, Any], first: Reply) -> Reply:
        """A POST with a key seen before: the first answer again, as Stripe does; with other
        parameters than the first request's, Stripe's 400 `idempotency_error`."""
        if form != first_form:
            error = {
                "type": "idempotency_error",
                "message": "Keys for idempotent requests can only be used with the same parameters "
                f"they were first used with. Try using a key other than '{key}' if you meant to "
                "execute a different request.",
            }
            return Reply.json(400, {"error": error})
        return Reply(first.status, {**first.headers, "idempotent-replayed": "true"}, first.body)

    def _get(self, store: dict[str, dict[str, Any]], kind: str) -> Callable[[Request], dict[str, Any]]:
        def read(request: Request) -> dict[str, Any]:
            found = store.get(request.params["id"])
            if found is None:
                raise _missing(kind, request.params["id"], "id")
            return _public(found)

        return read

    def _list_routes(self) -> list[tuple[str, str, Callable[[Request], dict[str, Any]]]]:
        """The list endpoints the reconciliation reads (docs/payments.md), paged as Stripe pages."""
        return [
            ("GET", r"/v1/payment_intents", self._lister(self.intents, "payment_intent", ("customer",))),
            (
                "GET",
                r"/v1/checkout/sessions",
                self._lister(self.sessions, "checkout.session", ("customer", "payment_intent", "status")),
            ),
            ("GET", r"/v1/charges", self._lister(self.charges, "charge", ("customer", "payment_intent"))),
            ("GET", r"/v1/refunds", self._lister(self.refunds, "refund", ("charge", "payment_intent"))),
            ("GET", r"/v1/disputes", self._lister(self.disputes, "dispute", ("charge", "payment_intent"))),
        ]

    def _lister(
        self, store: dict[str, dict[str, Any]], kind: str, filters: tuple[str, ...]
    ) -> Callable[[Request], dict[str, Any]]:
        def read(request: Request) -> dict[str, Any]:
            query = decode_form(urlencode(request.query).encode())
            return list_page(request.path, store, kind, query, filters)

        return read

    # -- customers ---------------------------------------------------------------------------
    def _create_customer(self, request: Request) -> dict[str, Any]:
        form = decode_form(request.body)
        customer_id = self._id("cus")
        customer = {
            "id": customer_id,
            "object": "customer",
            "created": self._now(),
            "description": form.get("description"),
            "email": form.get("email"),
            "metadata": form.get("metadata") or {},
            "livemode": False,
            "invoice_settings": {"default_payment_method": None},
        }
        self.customers[customer_id] = customer
        return customer

    # -- Checkout ----------------------------------------------------------------------------
    def _create_session(self, request: Request) -> dict[str, Any]:
        form = decode_form(request.body)
        if form.get("mode") != "payment":
            raise _invalid("The emulator supports mode=payment only.", "mode")
        for name in ("success_url", "cancel_url"):
            if not form.get(name):
                raise _invalid(f"Missing required param: {name}.", name, "parameter_missing")
        items = form.get("line_items")
        if not isinstance(items, list) or not items:
            raise _invalid("Missing required param: line_items.", "line_items", "parameter_missing")
        total = 0
        for index, item in enumerate(items):
            price = item.get("price_data") or {}
            if price.get("currency") != "usd":
                raise _invalid("Only usd is supported.", f"line_items[{index}][price_data][currency]")
            try:
                unit, quantity = int(price.get("unit_amount", "")), int(item.get("quantity", "1"))
            except ValueError as exc:
                raise _invalid("Invalid integer.", f"line_items[{index}][price_data][unit_amount]") from exc
            total += unit * quantity
        if total < MIN_CHARGE_CENTS:
            raise _invalid("Amount must be at least $0.50 usd.", "line_items", "amount_too_small")
        customer = form.get("customer")
        if customer is not None and customer not in self.customers:
            raise _missing("customer", customer, "customer")
        created = self._now()
        session_id = self._id("cs_test")
        host = request.headers.get("host", "127.0.0.1")
        session = {
            "id": session_id,
            "object": "checkout.session",
            "mode": "payment",
            "status": "open",
            "payment_status": "unpaid",
            "amount_subtotal": total,
            "amount_total": total,
            "currency": "usd",
            "customer": customer,
            "client_reference_id": form.get("client_reference_id"),
            "metadata": form.get("metadata") or {},
            "payment_intent": None,
            "payment_method_types": ["card"],
            "success_url": form["success_url"],
            "cancel_url": form["cancel_url"],
            "created": created,
            "expires_at": created + SESSION_SECONDS,
            "livemode": False,
            "url": f"http://{host}{self.prefix}/checkout/{session_id}",
        }
        session["_payment_intent_data"] = form.get("payment_intent_data") or {}
        self.sessions[session_id] = session
        return _public(session)

    def _page(self, request: Request) -> Reply:
        session = self.sessions.get(request.params["id"])
        if session is None:
            return _message_page(404, "No such checkout session")
        return Reply.raw(
            200, _page_html(session, self.prefix, error=None).encode(), "text/html; charset=utf-8"
        )

    def _pay(self, request: Request) -> Reply:
        form = dict(parse_qsl(request.body.decode(), keep_blank_values=True))
        with self._lock:
            session = self.sessions.get(request.params["id"])
            if session is None:
                return _message_page(404, "No such checkout session")
            if session["status"] == "open" and self._now() >= session["expires_at"]:
                session["status"] = "expired"
            if session["status"] != "open":
                return _message_page(410, f"This checkout is {session['status']}")
            card = CARDS.get(form.get("card", "").replace(" ", ""))
            if card is None or card.checkout != "paid":
                message = "Unknown test card." if card is None else MESSAGES[card.checkout]
                page = _page_html(session, self.prefix, error=message)
                return Reply.raw(402, page.encode(), "text/html; charset=utf-8")
            self._complete(session, card)
        self._wake.set()
        return Reply(
            303, {"location": session["success_url"].replace("{CHECKOUT_SESSION_ID}", session["id"])}
        )

    def _complete(self, session: dict[str, Any], card: TestCard) -> None:
        data = session["_payment_intent_data"]
        customer = session["customer"]
        method = self._new_method(card, customer if data.get("setup_future_usage") else None)
        intent = self._new_intent(
            amount=session["amount_total"],
            customer=customer,
            method=method["id"],
            metadata=data.get("metadata") or {},
            description=data.get("description"),
            setup_future_usage=data.get("setup_future_usage"),
        )
        self._succeed(intent)
        session.update(status="complete", payment_status="paid", payment_intent=intent["id"])
        self._emit("payment_intent.succeeded", intent)
        self._emit("checkout.session.completed", _public(session))

    # -- payment methods and intents ---------------------------------------------------------
    def _new_method(self, card: TestCard, customer: str | None) -> dict[str, Any]:
        method_id = self._id("pm")
        method = {
            "id": method_id,
            "object": "payment_method",
            "type": "card",
            "customer": customer,
            "created": self._now(),
            "livemode": False,
            "billing_details": {"address": None, "email": None, "name": None, "phone": None},
            "card": {
                "brand": card.brand,
                "last4": card.number[-4:],
                "exp_month": 12,
                "exp_year": 2034,
                "funding": "credit",
                "country": "US",
            },
            "metadata": {},
            "_card": card.number,
        }
        self.methods[method_id] = method
        return _public(method)

    def _new_intent(
        self,
        *,
        amount: int,
        customer: str | None,
        method: str | None,
        metadata: dict[str, Any],
        description: str | None = None,
        setup_future_usage: str | None = None,
    ) -> dict[str, Any]:
        intent_id = self._id("pi")
        intent = {
            "id": intent_id,
            "object": "payment_intent",
            "amount": amount,
            "amount_received": 0,
            "currency": "usd",
            "customer": customer,
            "payment_method": method,
            "status": "requires_confirmation",
            "metadata": metadata,
            "description": description,
            "setup_future_usage": setup_future_usage,
            "capture_method": "automatic",
            "confirmation_method": "automatic",
            "client_secret": f"{intent_id}_secret_emulator",
            "created": self._now(),
            "last_payment_error": None,
            "latest_charge": None,
            "livemode": False,
            "payment_method_types": ["card"],
        }
        self.intents[intent_id] = intent
        return intent

    def _create_intent(self, request: Request) -> dict[str, Any]:
        form = decode_form(request.body)
        try:
            amount = int(form.get("amount", ""))
        except ValueError as exc:
            raise _invalid("Missing required param: amount.", "amount", "parameter_missing") from exc
        if amount < MIN_CHARGE_CENTS:
            raise _invalid("Amount must be at least $0.50 usd.", "amount", "amount_too_small")
        if form.get("currency") != "usd":
            raise _invalid("Only usd is supported.", "currency")
        customer = form.get("customer")
        if customer is not None and customer not in self.customers:
            raise _missing("customer", customer, "customer")
        method_id = form.get("payment_method")
        method = self.methods.get(method_id or "")
        if method_id is not None and method is None:
            raise _missing("payment_method", method_id, "payment_method")
        intent = self._new_intent(
            amount=amount,
            customer=customer,
            method=method_id,
            metadata=form.get("metadata") or {},
            description=form.get("description"),
        )
        if form.get("confirm") != "true":
            return intent
        if method is None:
            raise _invalid(
                "You must provide a payment_method to confirm.", "payment_method", "parameter_missing"
            )
        if form.get("off_session") == "true" and method.get("customer") != customer:
            raise _invalid(
                "The provided PaymentMethod is not attached to this customer.",
                "payment_method",
                "payment_method_invalid",
            )
        outcome = CARDS[method["_card"]].off_session
        if outcome == "succeeded":
            self._succeed(intent)
            self._emit("payment_intent.succeeded", intent)
            return intent
        error = {
            "type": "card_error",
            "code": outcome,
            "decline_code": "generic_decline" if outcome == "card_declined" else None,
            "message": MESSAGES[outcome],
            "param": None,
            "payment_method": _public(method),
        }
        intent.update(status="requires_payment_method", last_payment_error=dict(error))
        self._emit("payment_intent.payment_failed", intent)
        raise StripeError(402, {**error, "payment_intent": dict(intent)})

    # -- charges, refunds and disputes -------------------------------------------------------
    def _succeed(self, intent: dict[str, Any]) -> None:
        """The PaymentIntent took its amount: succeeded, with its Charge."""
        charge_id = self._id("ch")
        self.charges[charge_id] = {
            "id": charge_id,
            "object": "charge",
            "amount": intent["amount"],
            "amount_captured": intent["amount"],
            "amount_refunded": 0,
            "captured": True,
            "created": self._now(),
            "currency": intent["currency"],
            "customer": intent["customer"],
            "description": intent["description"],
            "disputed": False,
            "livemode": False,
            "metadata": dict(intent["metadata"]),
            "paid": True,
            "payment_intent": intent["id"],
            "payment_method": intent["payment_method"],
            "refunded": False,
            "status": "succeeded",
        }
        intent.update(status="succeeded", amount_received=intent["amount"], latest_charge=charge_id)

    def _refunded_charge(self, form: dict[str, Any]) -> dict[str, Any]:
        """The Charge a refund request names (`charge`, or `payment_intent`'s latest)."""
        if form.get("charge"):
            charge = self.charges.get(str(form["charge"]))
            if charge is None:
                raise _missing("charge", str(form["charge"]), "charge")
            return charge
        intent_id = form.get("payment_intent")
        if not intent_id:
            raise _invalid("One of charge or payment_intent is required.", None, "parameter_missing")
        intent = self.intents.get(str(intent_id))
        if intent is None:
            raise _missing("payment_intent", str(intent_id), "payment_intent")
        charge = self.charges.get(str(intent.get("latest_charge") or ""))
        if charge is None:
            raise _invalid(
                "This PaymentIntent does not have a successful charge to refund.",
                "payment_intent",
                "charge_not_refundable",
            )
        return charge

    def _create_refund(self, request: Request) -> dict[str, Any]:
        form = decode_form(request.body)
        charge = self._refunded_charge(form)
        left = charge["amount"] - charge["amount_refunded"]
        if charge["disputed"]:
            raise _invalid(f"Charge {charge['id']} has been charged back.", None, "charge_disputed")
        if left <= 0:
            raise _invalid(
                f"Charge {charge['id']} has already been refunded.", None, "charge_already_refunded"
            )
        amount = _integer(form["amount"], "amount") if "amount" in form else left
        if not 0 < amount <= left:
            raise _invalid(
                f"Refund amount ({amount}) is greater than unrefunded amount on charge ({left})",
                "amount",
                "amount_too_large",
            )
        refund_id = self._id("re")
        refund = {
            "id": refund_id,
            "object": "refund",
            "amount": amount,
            "charge": charge["id"],
            "created": self._now(),
            "currency": charge["currency"],
            "metadata": form.get("metadata") or {},
            "payment_intent": charge["payment_intent"],
            "reason": form.get("reason"),
            "status": "succeeded",
            "failure_reason": None,
            "failure_balance_transaction": None,
        }
        if self._card_of(charge).refund == "failed":  # succeeded at first, fails later
            refund["_fails_at"] = self.clock() + REFUND_FAILURE_SECONDS
        self.refunds[refund_id] = refund
        charge["amount_refunded"] += amount
        charge["refunded"] = charge["amount_refunded"] == charge["amount"]
        self._emit("charge.refunded", _public(charge))
        self._emit("refund.created", _public(refund))
        return _public(refund)

    def _card_of(self, charge: dict[str, Any]) -> TestCard:
        method = self.methods.get(str(charge.get("payment_method") or ""), {})
        return CARDS.get(str(method.get("_card")), CARDS["4242424242424242"])

    def fail_due_refunds(self) -> list[str]:
        """Fail every refund of the refund-failing card whose time has come, as Stripe's test
        mode does some time after answering it `succeeded`: the Refund `failed`, its amount
        back off the Charge's `amount_refunded`, and `charge.refund.updated`, `refund.updated`
        and `refund.failed` sent. Runs on every call and delivery; the ids it failed."""
        failed = []
        with self._lock:
            for refund in self.refunds.values():
                if refund.get("_fails_at") is None or self.clock() < refund["_fails_at"]:
                    continue
                del refund["_fails_at"]
                before = {k: refund[k] for k in ("status", "failure_reason", "failure_balance_transaction")}
                refund.update(
                    status="failed",
                    failure_reason=REFUND_FAILURE_REASON,
                    failure_balance_transaction=self._id("txn"),
                )
                charge = self.charges[refund["charge"]]
                charge["amount_refunded"] -= refund["amount"]
                charge["refunded"] = False
                for event_type in ("charge.refund.updated", "refund.updated", "refund.failed"):
                    self._emit(event_type, _public(refund), previous=before)
                failed.append(str(refund["id"]))
        if failed:
            self._wake.set()
        return failed

    def open_dispute(self, payment_intent_id: str, *, reason: str = "fraudulent") -> dict[str, Any]:
        """The payer disputes a payment (Stripe's test cards do this; its API cannot): a
        Dispute of the Charge's unrefunded amount, `needs_response`; `charge.dispute.created`."""
        with self._lock:
            charge = self.charges[self.intents[payment_intent_id]["latest_charge"]]
            dispute_id = self._id("dp")
            dispute = {
                "id": dispute_id,
                "object": "dispute",
                "amount": charge["amount"] - charge["amount_refunded"],
                "charge": charge["id"],
                "created": self._now(),
                "currency": charge["currency"],
                "is_charge_refundable": False,
                "livemode": False,
                "metadata": {},
                "payment_intent": payment_intent_id,
                "reason": reason,
                "status": "needs_response",
            }
            self.disputes[dispute_id] = dispute
            charge["disputed"] = True
            self._emit("charge.dispute.created", dispute)
        self._wake.set()
        return _public(dispute)

    def close_dispute(self, dispute_id: str, *, won: bool) -> dict[str, Any]:
        """The dispute decided: `won` or `lost`; `charge.dispute.closed`."""
        with self._lock:
            dispute = self.disputes[dispute_id]
            dispute["status"] = "won" if won else "lost"
            self._emit("charge.dispute.closed", dispute)
        self._wake.set()
        return _public(dispute)

    # -- webhooks ----------------------------------------------------------------------------
    def _emit(self, event_type: str, obj: dict[str, Any], *, previous: dict[str, Any] | None = None) -> None:
        data: dict[str, Any] = {"object": json.loads(json.dumps(obj))}
        if previous is not None:
            data["previous_attributes"] = previous  # what an `*.updated` event changed
        event = {
            "id": self._id("evt"),
            "object": "event",
            "api_version": API_VERSION,
            "created": self._now(),
            "livemode": False,
            "pending_webhooks": 1,
            "request": {"id": None, "idempotency_key": None},
            "type": event_type,
            "data": data,
        }
        self.events.append(_Event(event, json.dumps(event).encode()))

    def signed(self, event_id: str, *, secret: str | None = None) -> tuple[bytes, dict[str, str]]:
        """An event's payload and headers as they are sent (signed now, with `secret` if given)."""
        found = next(e for e in self.events if e.event["id"] == event_id)
        headers = {
            "content-type": "application/json; charset=utf-8",
            "stripe-signature": sign(found.payload, secret or self.webhook_secret, self._now()),
            "user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
        }
        return found.payload, headers

    def pending(self) -> list[dict[str, Any]]:
        return [e.event for e in self.events if not e.delivered]

    def deliver_pending(self) -> list[int]:
        """Post every undelivered event, oldest first; the statuses answered."""
        self.fail_due_refunds()
        statuses = []
        for queued in list(self.events):
            if not queued.delivered:
                statuses.append(self._send(queued))
        return statuses

    def redeliver(self, event_id: str) -> int:
        """Send an event again (Stripe resends until a 2xx, and sometimes after one)."""
        return self._send(next(e for e in self.events if e.event["id"] == event_id))

    def _send(self, queued: _Event) -> int:
        if not self.webhook_url:
            return 0
        payload, headers = self.signed(queued.event["id"])
        queued.attempts += 1
        try:
            status = self.deliver(self.webhook_url, payload, headers)
        except httpx.HTTPError as exc:
            log.warning("stripe emulator: webhook %s not delivered: %s", queued.event["id"], exc)
            return 0
        queued.delivered = queued.delivered or 200 <= status < 300
        return status

    def _delivery_loop(self) -> None:
        while True:
            self._wake.wait(timeout=1.0)
            self._wake.clear()
            time.sleep(0.05)  # after the answer that caused them, as Stripe does
            self.fail_due_refunds()
            for queued in list(self.events):
                if queued.delivered or queued.attempts > len(DELIVERY_BACKOFF_SECONDS):
                    continue
                if time.time() < queued.next_at:
                    continue
                self._send(queued)
                if not queued.delivered and queued.attempts <= len(DELIVERY_BACKOFF_SECONDS):
                    queued.next_at = time.time() + DELIVERY_BACKOFF_SECONDS[queued.attempts - 1]


LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX = 10, 100
_CREATED_OPERATORS: dict[str, Callable[[int, int], bool]] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}


def list_page(
    url: str, store: dict[str, dict[str, Any]], kind: str, query: dict[str, Any], filters: tuple[str, ...]
) -> dict[str, Any]:
    """One page of a Stripe list: newest first, `limit` (1..100, default 10) objects after the
    `starting_after` object or before the `ending_before` one, `created` as an integer or
    `{gt, gte, lt, lte}`, equality `filters`; `{object: "list", data, has_more, url}`."""
    unknown = sorted(set(query) - {"limit", "starting_after", "ending_before", "created", *filters})
    if unknown:
        raise _invalid(f"Received unknown parameter: {unknown[0]}", unknown[0], "parameter_unknown")
    limit = _integer(query.get("limit", str(LIST_LIMIT_DEFAULT)), "limit")
    if not 1 <= limit <= LIST_LIMIT_MAX:
        raise _invalid(f"This value must be between 1 and {LIST_LIMIT_MAX}.", "limit")
    after, before = query.get("starting_after"), query.get("ending_before")
    if after is not None and before is not None:
        raise _invalid("You may only specify one of these parameters: ending_before, starting_after.")
    tests = _created_tests(query.get("created"))
    newest_first = sorted(store.values(), key=_position, reverse=True)
    matching = [
        o
        for o in newest_first
        if all(compare(int(o["created"]), bound) for compare, bound in tests)
        and all(str(o.get(name)) == str(query[name]) for name in filters if name in query)
    ]
    if after is not None:
        cursor = _position(_cursor(store, kind, after, "starting_after"))
        older = [o for o in matching if _position(o) < cursor]
        page, has_more = older[:limit], len(older) > limit
    elif before is not None:
        cursor = _position(_cursor(store, kind, before, "ending_before"))
        newer = [o for o in matching if _position(o) > cursor]
        page, has_more = newer[-limit:], len(newer) > limit
    else:
        page, has_more = matching[:limit], len(matching) > limit
    return {"object": "list", "data": [_public(o) for o in page], "has_more": has_more, "url": url}


def _position(obj: dict[str, Any]) -> tuple[int, str]:
    return int(obj["created"]), str(obj["id"])  # the ids are counters: creation order breaks ties


def _cursor(store: dict[str, dict[str, Any]], kind: str, ident: str, param: str) -> dict[str, Any]:
    found = store.get(ident)
    if found is None:
        raise _missing(kind, ident, param)
    return found


def _integer(text: Any, param: str) -> int:
    try:
        return int(str(text))
    except ValueError as exc:
        raise _invalid(f"Invalid integer: {text}", param, "parameter_invalid_integer") from exc


def _created_tests(created: Any) -> list[tuple[Callable[[int, int], bool], int]]:
    """`created` as (comparison, bound) pairs an object's `created` must all pass."""
    if created is None:
        return []
    if not isinstance(created, dict):
        return [(operator.eq, _integer(created, "created"))]
    tests = []
    for name, bound in created.items():
        compare = _CREATED_OPERATORS.get(name)
        if compare is None:
            raise _invalid(
                f"Received unknown parameter: created[{name}]", f"created[{name}]", "parameter_unknown"
            )
        tests.append((compare, _integer(bound, f"created[{name}]")))
    return tests


def _public(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the API shows it (without the emulator's own `_` fields)."""
    return {k: v for k, v in obj.items() if not k.startswith("_")}


# The hosted pages look like the console the customer comes from (console/src/styles.css):
# its typeface, page colour, card and primary button, and the same phone-width reflow.
_PAGE_STYLE = """
:root { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1b1f24;
  background: #f6f7f9; line-height: 1.45; }
* { box-sizing: border-box; }
body { margin: 0; }
a { color: #0b57d0; }
:focus-visible { outline: 3px solid #f9a825; outline-offset: 2px; }
header { display: flex; flex-wrap: wrap; align-items: center; gap: 4px 24px; padding: 10px 20px;
  background: #fff; border-bottom: 1px solid #dde1e6; }
header span { color: #555; font-size: 0.9rem; }
main { max-width: 480px; margin: 32px auto; padding: 16px 20px; background: #fff;
  border: 1px solid #dde1e6; border-radius: 8px; }
h1 { font-size: 1.5rem; margin: 8px 0 12px; overflow-wrap: anywhere; }
fieldset { border: 1px solid #dde1e6; border-radius: 6px; margin: 10px 0; }
label { display: flex; gap: 8px; align-items: center; padding: 4px 0; }
.actions { display: flex; flex-wrap: wrap; gap: 10px; align-items: center; margin: 12px 0 4px; }
button { font: inherit; padding: 6px 14px; border-radius: 5px; border: 1px solid #0b57d0;
  background: #0b57d0; color: #fff; cursor: pointer; }
.error { color: #b71c1c; background: #fdecea; border: 1px solid #f5c2c0; border-radius: 5px;
  padding: 6px 10px; }
@media (max-width: 640px) { header { padding: 8px 10px; } main { margin: 10px; padding: 10px; } }
"""


def _html_page(title: str, body: str) -> str:
    """A hosted page of the emulator: `body` (HTML) under the emulator's header."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{_PAGE_STYLE}</style></head>
<body>
<header><strong>BatchRoute</strong><span>Payment emulator (test mode)</span></header>
<main>
{body}
</main>
</body></html>
"""


def _message_page(status: int, message: str) -> Reply:
    page = _html_page(message, f"<h1>{html.escape(message)}</h1>")
    return Reply.raw(status, page.encode(), "text/html; charset=utf-8")


def _page_html(session: dict[str, Any], prefix: str, *, error: str | None) -> str:
    amount = f"{session['amount_total'] / 100:.2f}"
    options = "\n".join(
        f'<label><input type="radio" name="card" value="{c.number}"{" checked" if i == 0 else ""}> '
        f"{html.escape(c.label)}</label>"
        for i, c in enumerate(CARDS.values())
    )
    notice = f'<p class="error" role="alert">{html.escape(error)}</p>' if error else ""
    body = f"""<h1>BatchRoute credits: {amount} USD</h1>
<p>Choose a test card: nothing is charged.</p>
{notice}
<form method="post" action="{prefix}/checkout/{html.escape(session["id"])}/pay">
<fieldset><legend>Test card</legend>
{options}
</fieldset>
<div class="actions"><button type="submit">Pay</button>
<a href="{html.escape(session["cancel_url"])}">Cancel</a></div>
</form>"""
    return _html_page(f"Pay {amount} USD (payment emulator)", body)
