"""The payment processor: Stripe, through its official `stripe` SDK (docs/payments.md).

The same code runs everywhere: in AWS it talks to Stripe with the keys of the Secrets Manager
secret `<prefix>-payments-stripe` (JSON `{secret_key, webhook_secret}`, read through
powertools' cache, never logged); locally and in tests it talks to the payment emulator
(`batchroute_tools/emulators/stripe.py`, docs/emulators.md), which speaks Stripe's wire
protocol and signs its webhooks the same way, with the keys from the settings.

What the service asks of it: a Customer per org, a Checkout Session for a credit purchase
(the card saved for later off-session use), an off-session PaymentIntent for an auto top-up
(idempotency key = the attempt id, so a retried charge never charges twice), a PaymentIntent
read back (the sweeper's recovery), the card a purchase saved, the verification of a
webhook's `Stripe-Signature`, the successful payments since a date with what was refunded
or lost in disputes of them (the payments reconciliation: `successful_payments`), and a
Charge, a Dispute and the Checkout Session of a PaymentIntent read back (refunds and
disputes: docs/payments.md).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

if TYPE_CHECKING:
    import stripe

from batchroute.config import DEV_WEBHOOK_SECRET, Settings
from batchroute.domain.billing.payments import (
    Charge,
    CheckoutSession,
    CheckoutTerms,
    PaymentMethod,
    ProcessorEvent,
    ProcessorSession,
    charge_of,
    from_cents,
    session_of,
)
from batchroute.domain.billing.reconciliation import ProcessorPayment
from batchroute.domain.billing.reversals import ProcessorCharge, ProcessorDispute, ReversalClaim
from batchroute.errors import InvalidRequest, TransientError, Unavailable

# How far a webhook's signing time may be from now, either way (Stripe's own default).
WEBHOOK_TOLERANCE_SECONDS = 300

PRODUCT_NAME = "BatchRoute credits"
# A Checkout Session is open for 24 hours: one paid after `since` opened at most this before it.
SESSION_LOOKBACK_SECONDS = 24 * 3600


class PaymentsNotConfigured(Unavailable):
    """The processor's keys are missing (the operator has not filled the secret yet): buying
    credits answers 503 and auto top-ups wait."""

    default_code = "payments_unavailable"


@dataclass(frozen=True)
class StripeKeys:
    secret_key: str
    webhook_secret: str

    def __repr__(self) -> str:  # never shown, whatever prints it
        return "StripeKeys(<redacted>)"


class SecretsManagerStripeKeys:
    """The keys from the secret `name`, cached for `max_age` seconds (a rotation is seen
    within minutes without a redeploy)."""

    def __init__(self, name: str, *, secretsmanager: Any, max_age: int = 300) -> None:
        from aws_lambda_powertools.utilities.parameters import SecretsProvider

        self.name = name
        self.max_age = max_age
        self._provider = SecretsProvider(boto3_client=secretsmanager)

    def __call__(self) -> StripeKeys:
        from aws_lambda_powertools.utilities.parameters.exceptions import (
            GetParameterError,
            TransformParameterError,
        )

        try:
            value = self._provider.get(self.name, max_age=self.max_age, transform="json")
        except (GetParameterError, TransformParameterError, ValueError) as exc:
            raise PaymentsNotConfigured(
                f"Payments are not available: the secret {self.name} cannot be read."
            ) from exc
        if not isinstance(value, Mapping) or not value.get("secret_key") or not value.get("webhook_secret"):
            raise PaymentsNotConfigured(
                f"Payments are not available: the secret {self.name} needs secret_key and webhook_secret."
            )
        if value["webhook_secret"] == DEV_WEBHOOK_SECRET:
            raise PaymentsNotConfigured(
                f"Payments are not available: the secret {self.name} holds the emulator's public "
                "webhook secret; put the processor's own signing secret in."
            )
        return StripeKeys(secret_key=str(value["secret_key"]), webhook_secret=str(value["webhook_secret"]))


@dataclass(eq=False)
class StripePayments:
    keys: Callable[[], StripeKeys]
    _: KW_ONLY
    api_base: str | None = None
    timeout_seconds: float = 20.0
    max_network_retries: int = 2

    @classmethod
    def from_settings(cls, settings: Settings) -> StripePayments:
        """In AWS, the keys of the payments secret (read through the cache); elsewhere the
        settings' own (the emulator's, locally)."""
        keys: Callable[[], StripeKeys]
        if settings.payments_secret_name:
            from batchroute.adapters.aws import client

            keys = SecretsManagerStripeKeys(
                settings.payments_secret_name, secretsmanager=client("secretsmanager")
            )
        else:
            local = StripeKeys(
                secret_key=settings.stripe_secret_key.get_secret_value(),
                webhook_secret=settings.stripe_webhook_secret.get_secret_value(),
            )

            def keys() -> StripeKeys:
                return local

        return cls(keys, api_base=settings.effective_payments_api_url)

    def _client(self) -> stripe.StripeClient:
        import stripe  # on first use: the SDK costs ~120 ms of import, kept off cold starts

        return stripe.StripeClient(
            self.keys().secret_key,
            base_addresses={"api": self.api_base} if self.api_base else None,
            max_network_retries=self.max_network_retries,
            http_client=stripe.RequestsClient(timeout=self.timeout_seconds),
        )

    # -- customers and Checkout --------------------------------------------------------------
    def create_customer(self, *, org_id: str) -> str:
        with _transient():
            customer = self._client().v1.customers.create(
                params={"description": f"BatchRoute org {org_id}", "metadata": {"org_id": org_id}},
                options={"idempotency_key": f"customer-{org_id}"},
            )
        return str(customer.id)

    def create_checkout(self, terms: CheckoutTerms) -> CheckoutSession:
        metadata = {"org_id": terms.org_id, "user_id": terms.user_id, "purpose": "credit_purchase"}
        with _transient():
            session = self._client().v1.checkout.sessions.create(
                params={
                    "mode": "payment",
                    "customer": terms.customer_id,
                    "client_reference_id": terms.org_id,
                    "line_items": [
                        {
                            "quantity": 1,
                            "price_data": {
                                "currency": "usd",
                                "unit_amount": terms.amount_cents,
                                "product_data": {"name": PRODUCT_NAME},
                            },
                        }
                    ],
                    "payment_intent_data": {"setup_future_usage": "off_session", "metadata": metadata},
                    "metadata": metadata,
                    "success_url": terms.success_url,
                    "cancel_url": terms.cancel_url,
                },
                options={"idempotency_key": terms.idempotency_key},
            )
        return CheckoutSession(
            session_id=str(session.id),
            url=str(session.url),
            expires_at=_iso(int(session.expires_at)),
        )

    # -- off-session charges -----------------------------------------------------------------
    def charge_off_session(
        self, *, customer_id: str, payment_method_id: str, amount_cents: int, org_id: str, attempt_id: str
    ) -> Charge:
        """Charge the saved card now, without the customer. A decline is a failed Charge; a
        network or processor outage raises TransientError (retry with the same attempt id)."""
        import stripe

        try:
            with _transient():
                intent = self._client().v1.payment_intents.create(
                    params={
                        "amount": amount_cents,
                        "currency": "usd",
                        "customer": customer_id,
                        "payment_method": payment_method_id,
                        "off_session": True,
                        "confirm": True,
                        "description": "BatchRoute auto top-up",
                        "metadata": {"org_id": org_id, "attempt_id": attempt_id, "purpose": "auto_topup"},
                    },
                    options={"idempotency_key": attempt_id},
                )
        except stripe.CardError as exc:
            error = exc.error
            intent_data = error.payment_intent.to_dict() if error and error.payment_intent else {}
            return Charge(
                processor_ref=str(intent_data.get("id") or ""),
                status="failed",
                amount=from_cents(amount_cents),
                failure_code=str(exc.code or "card_declined"),
                failure_reason=str(exc.user_message or "The card was declined."),
                metadata=intent_data.get("metadata") or {},
            )
        except stripe.InvalidRequestError as exc:  # e.g. the saved card was detached
            return Charge(
                processor_ref="",
                status="failed",
                amount=from_cents(amount_cents),
                failure_code=str(exc.code or "invalid_request"),
                failure_reason=str(exc.user_message or "The processor refused the charge."),
            )
        except stripe.IdempotencyError:
            # The key was used before with other parameters (the saved card changed since a
            # first charge whose answer was lost): that first request's PaymentIntent, if any.
            return self._attempt_intent(customer_id, attempt_id, amount_cents)
        return charge_of(intent.to_dict())

    def _attempt_intent(self, customer_id: str, attempt_id: str, amount_cents: int) -> Charge:
        """The customer's PaymentIntent charged for `attempt_id` (its metadata), among its
        latest 100 (a list is consistent at once, a search is not); a failed Charge when there
        is none, as the processor then charged nothing under the attempt's key."""
        with _transient():
            found = self._client().v1.payment_intents.list(params={"customer": customer_id, "limit": 100})
        for intent in found.data:
            data = intent.to_dict()
            if (data.get("metadata") or {}).get("attempt_id") == attempt_id:
                return charge_of(data)
        return Charge(
            processor_ref="",
            status="failed",
            amount=from_cents(amount_cents),
            failure_code="idempotency_error",
            failure_reason="The processor refused a repeated charge with other parameters.",
        )

    def payment_intent(self, processor_ref: str) -> Charge:
        """The PaymentIntent as a Charge; a failed one (`processor_unknown`) when the processor
        does not know it (404 `resource_missing`: e.g. the keys now name another account or
        mode), so the attempt that recorded it is settled rather than looked up for ever."""
        import stripe

        try:
            with _transient():
                intent = self._client().v1.payment_intents.retrieve(processor_ref)
        except stripe.InvalidRequestError as exc:
            if exc.code != "resource_missing":
                raise
            return Charge(
                processor_ref=processor_ref,
                status="failed",
                amount=from_cents(0),
                failure_code="processor_unknown",
                failure_reason="The payment processor does not know this payment.",
            )
        return charge_of(intent.to_dict())

    def saved_card(self, payment_intent_id: str) -> PaymentMethod | None:
        """The card a completed purchase saved for off-session use; None when there is none,
        or the processor does not know the PaymentIntent (a foreign event: acknowledged, logged
        by the caller, never a 500 the processor would redeliver for days)."""
        client = self._client()
        intent = _known(client.v1.payment_intents.retrieve, payment_intent_id)
        method_id = None if intent is None else intent.payment_method
        if not isinstance(method_id, str):
            return None
        with _transient():
            method = client.v1.payment_methods.retrieve(method_id)
        card = method.to_dict().get("card") or {}
        return PaymentMethod(
            payment_method_id=method_id,
            brand=str(card.get("brand", "card")),
            last4=str(card.get("last4", "")),
        )

    # -- webhooks ----------------------------------------------------------------------------
    def verify_event(self, payload: bytes, signature: str | None) -> ProcessorEvent:
        """The event, once its `Stripe-Signature` (HMAC-SHA256 over `{t}.{payload}`, 300 s
        tolerance either way: the SDK refuses only a stale one, so one dated further ahead is
        refused here) checks out; InvalidRequest `invalid_signature` otherwise, and
        `invalid_event` for a signed body that is no event (nothing to apply, nothing to retry)."""
        import stripe

        try:
            stripe.WebhookSignature.verify_header(
                payload.decode("utf-8"),
                signature or "",
                self.keys().webhook_secret,
                WEBHOOK_TOLERANCE_SECONDS,
            )
        except (stripe.SignatureVerificationError, ValueError) as exc:
            raise InvalidRequest("The webhook signature does not verify.", code="invalid_signature") from exc
        if _signed_at(signature or "") > time.time() + WEBHOOK_TOLERANCE_SECONDS:
            raise InvalidRequest("The webhook signature is dated in the future.", code="invalid_signature")
        try:
            body = json.loads(payload)
        except ValueError:
            body = None
        if not _is_event(body):
            raise InvalidRequest("The signed webhook body is not an event.", code="invalid_event")
        livemode = body.get("livemode")
        event_type = str(body["type"])
        return ProcessorEvent(
            event_id=str(body["id"]),
            event_type=event_type,
            created=int(body.get("created") or 0),
            subject=_subject(event_type, (body.get("data") or {}).get("object")),
            livemode=livemode if isinstance(livemode, bool) else None,
        )

    # -- what credits a wallet (issue 27) ----------------------------------------------------
    def live_key(self) -> bool:
        """Whether the configured secret key is a live one (`sk_live_...`, `rk_live_...`): only
        events with that `livemode` are payments to this service."""
        return self.keys().secret_key.startswith(("sk_live_", "rk_live_"))

    def checkout_session(self, session_id: str) -> ProcessorSession | None:
        """The Checkout Session as the processor has it; None when it does not know it."""
        session = _known(self._client().v1.checkout.sessions.retrieve, session_id)
        return None if session is None else session_of(session.to_dict())

    # -- refunds and disputes (docs/payments.md) ---------------------------------------------
    def charge(self, charge_id: str) -> ProcessorCharge | None:
        """The Charge as the processor has it, with what its failed (or canceled) refunds
        came to (`GET /v1/refunds?charge=`: the Charge's `amount_refunded` no longer counts
        them); None when the processor does not know it."""
        client = self._client()
        charge = _known(client.v1.charges.retrieve, charge_id)
        if charge is None:
            return None
        with _transient():
            failed = sum(
                int(r.amount)
                for r in client.v1.refunds.list(params={"charge": charge_id, "limit": 100}).auto_paging_iter()
                if r.status in ("failed", "canceled")
            )
        return replace(_charge_of(charge.to_dict()), failed_refund_cents=failed)

    def dispute(self, dispute_id: str) -> ProcessorDispute | None:
        """The Dispute as the processor has it; None when it does not know it."""
        dispute = _known(self._client().v1.disputes.retrieve, dispute_id)
        if dispute is None:
            return None
        found = dispute.to_dict()
        return ProcessorDispute(
            dispute_id=str(found["id"]),
            charge_id=_ref(found.get("charge")),
            amount_cents=int(found.get("amount") or 0),
            status=str(found.get("status") or ""),
            currency=str(found.get("currency") or "").lower(),
        )

    def intent_metadata(self, payment_intent_id: str) -> Mapping[str, str] | None:
        """The metadata the service put on a PaymentIntent; None when the processor does not
        know it."""
        intent = _known(self._client().v1.payment_intents.retrieve, payment_intent_id)
        return None if intent is None else dict(intent.to_dict().get("metadata") or {})

    def purchase_session(self, payment_intent_id: str) -> ProcessorSession | None:
        """The Checkout Session a PaymentIntent paid, as the processor has it; None when none."""
        with _transient():
            found = self._client().v1.checkout.sessions.list(
                params={"payment_intent": payment_intent_id, "limit": 1}
            )
        return next((session_of(s.to_dict()) for s in found.data), None)

    # -- reconciliation (docs/payments.md) ---------------------------------------------------
    def successful_payments(self, since: datetime) -> list[ProcessorPayment]:
        """Every PaymentIntent created at or after `since` that succeeded, with the Checkout
        Session that took it (a purchase is credited under the session's id): the processor's
        list API, auto-paged (100 a page). Sessions are listed from a day earlier, since a
        session opened before `since` may be paid after it."""
        created = int(since.timestamp())
        with _transient():
            client = self._client()
            sessions = {
                str(s.payment_intent): s
                for s in client.v1.checkout.sessions.list(
                    params={"created": {"gte": created - SESSION_LOOKBACK_SECONDS}, "limit": 100}
                ).auto_paging_iter()
                if isinstance(s.payment_intent, str) and s.payment_status == "paid"
            }
            intents = [
                i.to_dict()
                for i in client.v1.payment_intents.list(
                    params={"created": {"gte": created}, "limit": 100}
                ).auto_paging_iter()
                if i.status == "succeeded"
            ]
            reversed_cents = _reversed_by_intent(client, created)
        return [
            _payment_of(intent, sessions.get(str(intent["id"])), reversed_cents.get(str(intent["id"]), 0))
            for intent in intents
        ]


def _reversed_by_intent(client: Any, created: int) -> dict[str, int]:
    """Cents refunded (a Charge's `amount_refunded`) or lost in disputes, per PaymentIntent,
    of the charges and disputes created since `created`: Stripe leaves a refunded
    PaymentIntent `succeeded` with its `amount_received`, so only its Charge shows it."""
    found: dict[str, int] = defaultdict(int)
    params = {"created": {"gte": created}, "limit": 100}
    for charge in client.v1.charges.list(params=params).auto_paging_iter():
        if isinstance(charge.payment_intent, str) and charge.amount_refunded:
            found[charge.payment_intent] += int(charge.amount_refunded)
    for dispute in client.v1.disputes.list(params=params).auto_paging_iter():
        if dispute.status == "lost" and isinstance(dispute.payment_intent, str):
            found[dispute.payment_intent] += int(dispute.amount)
    return found


def _payment_of(intent: Mapping[str, Any], session: Any | None, reversed_cents: int = 0) -> ProcessorPayment:
    metadata = dict(intent.get("metadata") or {})
    if session is not None:
        metadata = {**dict(session.to_dict().get("metadata") or {}), **metadata}
    return ProcessorPayment(
        payment_id=str(intent["id"]),
        session_id=str(session.id) if session is not None else None,
        org_id=metadata.get("org_id"),
        amount_minor=int(intent.get("amount_received") or 0),
        currency=str(intent.get("currency") or ""),
        purpose=metadata.get("purpose"),
        created=_iso(int(intent.get("created") or 0)),
        reversed_cents=reversed_cents,
    )


class _transient:
    """Network trouble, rate limits, keys the processor refuses (a wrong or restricted key:
    the operator's to fix) and the processor's own errors are worth a retry."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        import stripe

        if isinstance(
            exc,
            stripe.APIConnectionError
            | stripe.RateLimitError
            | stripe.AuthenticationError
            | stripe.PermissionError,
        ):
            raise TransientError(f"payment processor unavailable: {type(exc).__name__}") from exc
        if isinstance(exc, stripe.APIError):
            raise TransientError("payment processor error") from exc


Found = TypeVar("Found")


def _known(retrieve: Callable[[str], Found], object_id: str) -> Found | None:
    """`retrieve(object_id)`, one of the SDK's GETs of an object; None when the processor
    refuses it as a bad request (404 `resource_missing`: it does not know the object)."""
    import stripe

    with _transient():
        try:
            return retrieve(object_id)
        except stripe.InvalidRequestError:
            return None


def _iso(epoch_seconds: int) -> str:
    return (
        datetime.fromtimestamp(epoch_seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def _is_event(body: object) -> TypeGuard[dict[str, Any]]:
    """An Event object's shape, as Stripe sends one: a string `id` and `type`, an integer
    `created` (or none) and an object `data` (or none)."""
    if (
        not isinstance(body, dict)
        or not isinstance(body.get("id"), str)
        or not isinstance(body.get("type"), str)
    ):
        return False
    created, data = body.get("created"), body.get("data")
    well_dated = created is None or (isinstance(created, int) and not isinstance(created, bool))
    return well_dated and (data is None or isinstance(data, dict))


def _subject(event_type: str, obj: object) -> ProcessorSession | Charge | ReversalClaim | None:
    """The object an event is about, read: a Checkout Session, a PaymentIntent as a Charge, or
    what a refund or dispute event claims (`_claim_of`).
    None when it is neither, or cannot be read (no id, an amount that is not a number): such an
    event moves no money, and is acknowledged like any other that does not apply."""
    if not isinstance(obj, dict):
        return None
    try:
        if event_type.startswith("checkout.session."):
            return session_of(obj)
        if event_type.startswith("payment_intent."):
            return charge_of(obj)
        if event_type.startswith(("charge.", "refund.")):
            return _claim_of(event_type, obj)
    except (KeyError, TypeError, ValueError):
        return None
    return None


def _claim_of(event_type: str, obj: Mapping[str, Any]) -> ReversalClaim | None:
    """`charge.refunded` (a Charge), `charge.refund.updated` and `refund.failed` (a Refund),
    `charge.dispute.*` (a Dispute): which Charge (and Dispute) to ask the processor about, and
    what it claims."""
    if event_type == "charge.refunded":
        return ReversalClaim("refund", str(obj["id"]), claimed_cents=int(obj.get("amount_refunded") or 0))
    if event_type in ("charge.refund.updated", "refund.failed"):
        return ReversalClaim("refund", _ref(obj["charge"]))
    if event_type in ("charge.dispute.created", "charge.dispute.closed"):
        lost = int(obj.get("amount") or 0) if obj.get("status") == "lost" else 0
        return ReversalClaim("dispute", _ref(obj["charge"]), dispute_id=str(obj["id"]), claimed_cents=lost)
    return None


def _ref(value: object) -> str:
    """An expandable field's id (a string, or the object when expanded)."""
    if isinstance(value, Mapping):
        return str(value["id"])
    return str(value or "")


def _charge_of(charge: Mapping[str, Any]) -> ProcessorCharge:
    return ProcessorCharge(
        charge_id=str(charge["id"]),
        payment_intent=_ref(charge.get("payment_intent")) or None,
        amount_cents=int(charge.get("amount") or 0),
        refunded_cents=int(charge.get("amount_refunded") or 0),
        currency=str(charge.get("currency") or "").lower(),
        status=str(charge.get("status") or ""),
    )


def _signed_at(signature: str) -> int:
    """The `t=` of a `Stripe-Signature` header (its signing time, Unix seconds), read exactly
    as the SDK reads the time it verifies: the first item named `t`, as `int()` reads it."""
    items = [item.split("=", 2) for item in signature.split(",")]
    stamps = [item[1] for item in items if len(item) > 1 and item[0] == "t"]
    try:
        return int(stamps[0]) if stamps else 0
    except ValueError:
        return 0
