"""Webhook rules: the signature, the event body, the retry schedule and delivery states.

Pure logic (no I/O). `docs/webhooks.md` is the customer-facing version of this module.

Signature: `X-Service-Signature` = base64url without padding of HMAC-SHA256, keyed with
the webhook secret, over the bytes `{timestamp}.{raw body}`; `X-Service-Timestamp` is the
Unix time in seconds at signing. Every attempt is signed afresh (new timestamp) over the
same raw body, which carries the same event id on every retry.

Delivery statuses: `pending` (created, first attempt due) -> `delivering` (an attempt is
claimed) -> `succeeded` (2xx) | `failed` (anything else; the next attempt is scheduled, and
a due retry goes back to `delivering`) | `dead_lettered` (the 8th attempt failed).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from email.utils import parsedate_to_datetime
from typing import Any, Final, Literal, TypedDict, get_args

from batchroute.domain.views import view_of

SIGNATURE_HEADER = "X-Service-Signature"
TIMESTAMP_HEADER = "X-Service-Timestamp"
EVENT_HEADER = "X-Service-Event"

# Receivers reject timestamps further than this from their clock (spec: about 5 minutes).
TOLERANCE_SECONDS = 300

DeliveryStatus = Literal["pending", "delivering", "succeeded", "failed", "dead_lettered"]
DELIVERY_STATUSES: tuple[DeliveryStatus, ...] = get_args(DeliveryStatus)

# Who may follow whom. `failed -> delivering` is a retry; the two final statuses end it.
TRANSITIONS: dict[DeliveryStatus, frozenset[DeliveryStatus]] = {
    "pending": frozenset({"delivering"}),
    "delivering": frozenset({"succeeded", "failed", "dead_lettered"}),
    "failed": frozenset({"delivering"}),
    "succeeded": frozenset(),
    "dead_lettered": frozenset(),
}

EventType = Literal["batch.completed", "batch.failed", "batch.canceled", "batch.expired"]
# Batch events raised while it runs (not by a terminal state): docs/webhooks.md.
RESCUE_STARTED: Final = "batch.rescue_started"
EVENT_TYPE_BY_STATE: dict[str, EventType] = {
    "completed": "batch.completed",
    "failed": "batch.failed",
    "canceled": "batch.canceled",
    "expired": "batch.expired",
}

# The delay before each attempt, counted from the previous attempt (attempt 1 is at once).
# Modelled on Svix's schedule, shortened at the tail so the whole run fits a day:
# 5 s + 5 min + 30 min + 2 h + 5 h + 8 h + 8 h = 84,905 s, about 23.6 h.
RETRY_DELAYS_SECONDS: tuple[int, ...] = (0, 5, 300, 1800, 7200, 18_000, 28_800, 28_800)
MAX_ATTEMPTS = len(RETRY_DELAYS_SECONDS)
# A 429's Retry-After lengthens the next delay, but never beyond the longest step, so a
# receiver cannot stretch the run past about a day and a half.
MAX_RETRY_AFTER_SECONDS = max(RETRY_DELAYS_SECONDS)


class TransitionError(ValueError):
    pass


# -- signature ---------------------------------------------------------------------------
def signed_bytes(timestamp: int, raw_body: bytes) -> bytes:
    return str(int(timestamp)).encode("ascii") + b"." + raw_body


def sign(secret: bytes, timestamp: int, raw_body: bytes) -> str:
    """base64url (no padding) of HMAC-SHA256(secret, b"{timestamp}." + raw_body)."""
    digest = hmac.new(secret, signed_bytes(timestamp, raw_body), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def verify(
    secret: bytes | str,
    timestamp: int | str,
    raw_body: bytes,
    signature: str,
    *,
    now: datetime | int | float,
    tolerance: int = TOLERANCE_SECONDS,
) -> bool:
    """A receiver's check: the timestamp is within `tolerance` seconds of `now` and the
    signature matches, compared in constant time. `secret` as the service shows it (text,
    its UTF-8 bytes signed) or as bytes. Never raises on malformed input."""
    key = secret.encode() if isinstance(secret, str) else secret
    try:
        ts = int(timestamp)
    except (TypeError, ValueError):
        return False
    now_seconds = now.timestamp() if isinstance(now, datetime) else float(now)
    if abs(now_seconds - ts) > tolerance:
        return False
    expected = sign(key, ts, raw_body)
    return hmac.compare_digest(expected.encode("ascii"), signature.strip().encode("ascii", "replace"))


def signature_headers(secret: bytes, timestamp: int, raw_body: bytes, event_type: str) -> dict[str, str]:
    return {
        SIGNATURE_HEADER: sign(secret, timestamp, raw_body),
        TIMESTAMP_HEADER: str(int(timestamp)),
        EVENT_HEADER: event_type,
    }


# -- events ------------------------------------------------------------------------------
def event_type_for(state: str) -> EventType | None:
    """The event a terminal batch state raises; None for a non-terminal state."""
    return EVENT_TYPE_BY_STATE.get(state)


def delivery_id_for(batch_id: str, event_type: str) -> str:
    """One delivery per (batch, event type): a repeated deliver step finds the same record."""
    digest = hashlib.sha256(f"{batch_id}\n{event_type}".encode()).hexdigest()
    return f"whd_{digest[:26]}"


def event_body(
    *, event_id: str, event_type: str, created_at: str, batch: Mapping[str, Any], **more: object
) -> str:
    """The raw JSON body, built once per delivery and stored, so every retry sends the same
    bytes; `more` adds an event's own top-level fields (`rescue` of batch.rescue_started)."""
    body = {"id": event_id, "type": event_type, "created_at": created_at, "batch": dict(batch), **more}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=_json_default)


def _json_default(value: object) -> object:
    if isinstance(value, Decimal):  # DynamoDB numbers
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, set | frozenset):
        return sorted(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


# -- attempts and the schedule -----------------------------------------------------------
@dataclass(frozen=True)
class AttemptOutcome:
    """What one POST achieved: a status code, or an error (time-out, refused, unsafe URL)."""

    status_code: int | None
    error: str | None
    duration_ms: int
    retry_after_seconds: int | None = None

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def describe_failure(outcome: AttemptOutcome) -> str | None:
    """The short `last_error` of an attempt; None for a success."""
    if outcome.succeeded:
        return None
    if outcome.error:
        return outcome.error[:300]
    code = outcome.status_code
    if code is not None and 300 <= code < 400:
        return f"redirect ({code}) not followed: answer 2xx at the configured URL"
    return f"receiver answered {code}"


def retry_delay(attempt: int, retry_after_seconds: int | None = None) -> timedelta | None:
    """The wait after failed attempt number `attempt` (1-based), or None when it was the last.

    A 429's Retry-After is honoured as the minimum, capped at MAX_RETRY_AFTER_SECONDS."""
    if attempt < 1:
        raise ValueError("attempts are numbered from 1")
    if attempt >= MAX_ATTEMPTS:
        return None
    seconds = RETRY_DELAYS_SECONDS[attempt]
    if retry_after_seconds is not None and retry_after_seconds > 0:
        seconds = max(seconds, min(retry_after_seconds, MAX_RETRY_AFTER_SECONDS))
    return timedelta(seconds=seconds)


@dataclass(frozen=True)
class AttemptDecision:
    status: DeliveryStatus
    next_attempt_at: datetime | None
    last_error: str | None


def decide(attempt: int, outcome: AttemptOutcome, *, now: datetime) -> AttemptDecision:
    """Where a delivery goes after attempt number `attempt` ended with `outcome` at `now`."""
    if outcome.succeeded:
        return AttemptDecision("succeeded", None, None)
    error = describe_failure(outcome)
    retry_after = outcome.retry_after_seconds if outcome.status_code == 429 else None
    delay = retry_delay(attempt, retry_after)
    if delay is None:
        return AttemptDecision("dead_lettered", None, error)
    return AttemptDecision("failed", now + delay, error)


def check_transition(current: str, target: str) -> None:
    allowed = TRANSITIONS.get(current)  # type: ignore[call-overload]
    if allowed is None or target not in allowed:
        raise TransitionError(f"a delivery cannot go from {current!r} to {target!r}")


def can_transition(current: str, target: str) -> bool:
    try:
        check_transition(current, target)
    except TransitionError:
        return False
    return True


def parse_retry_after(value: str | None, *, now: datetime) -> int | None:
    """Retry-After as whole seconds from `now`: delta-seconds or an HTTP date; None if absent
    or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if value.isdecimal():
        return int(value)
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0, int((moment - now).total_seconds()))


# -- the records -------------------------------------------------------------------------
class WebhookDeliveryView(TypedDict):
    """A delivery as GET /v1/batches/{id}/webhooks and a billing event's `webhook` show it."""

    id: str
    event_id: str
    event_type: str
    url: str
    status: str
    attempt_count: int
    last_attempt_at: str | None
    next_attempt_at: str | None
    last_response_status: int | None
    last_error: str | None
    created_at: str


class WebhookAttemptView(TypedDict):
    delivery_id: str
    attempt: int
    at: str | None
    status_code: int | None
    error: str | None
    duration_ms: int


@dataclass(frozen=True, slots=True)
class WebhookDeliveryRecord:
    """One event's delivery to a webhook, as stored (adapters/dynamo/webhook_deliveries.py):
    `payload` is the exact raw body (every retry sends the same bytes), `secret_sealed` the
    KMS ciphertext of the signing secret (never the secret). A batch event's delivery has
    `batch_id`; an org event's (a billing alert) has none."""

    delivery_id: str
    org_id: str
    event_id: str
    event_type: str
    url: str
    status: str
    attempt_count: int
    created_at: str
    updated_at: str
    payload: str = field(repr=False)
    secret_source: str
    secret_sealed: str = field(repr=False)
    next_attempt_at: str | None = None
    batch_id: str | None = None
    last_attempt_at: str | None = None
    last_response_status: int | None = None
    last_error: str | None = None
    lease_until: str | None = None

    def owner_id(self, owner_field: str) -> str:
        """What the store keys it by: its batch (`batch_id`) or its org (`org_id`)."""
        return str(self.batch_id if owner_field == "batch_id" else self.org_id)

    def log_ids(self) -> dict[str, str | None]:
        return {name: getattr(self, name) for name in ("batch_id", "org_id", "delivery_id", "event_id")}

    def to_api(self) -> WebhookDeliveryView:
        """The public view of a delivery: never its secret, ciphertext or payload."""
        return view_of(self, WebhookDeliveryView, id=self.delivery_id)


@dataclass(frozen=True, slots=True)
class WebhookAttempt:
    """One attempt of a delivery, as stored beside it (the store's plain values)."""

    delivery_id: str
    attempt: int
    at: str | None = None
    status_code: int | None = None
    error: str | None = None
    duration_ms: int = 0

    def to_api(self) -> WebhookAttemptView:
        return view_of(self, WebhookAttemptView)


DELIVERY_WEBHOOK_PURPOSE = "delivery_webhook"


def webhook_secret_context(org_id: str) -> dict[str, str]:
    """The KMS encryption context of an org's delivery-webhook secret (seal and unseal)."""
    return {"org_id": org_id, "purpose": DELIVERY_WEBHOOK_PURPOSE}
