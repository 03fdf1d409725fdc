"""Verify a webhook delivery on the receiver's side.

The service signs `{X-Service-Timestamp}.{raw body}` with HMAC-SHA256 keyed by the webhook
secret's UTF-8 bytes and sends the digest base64url-encoded without padding in
`X-Service-Signature` (docs/webhooks.md). `verify` checks the signature in constant time and
the timestamp window, then returns the parsed event.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

SIGNATURE_HEADER = "X-Service-Signature"
TIMESTAMP_HEADER = "X-Service-Timestamp"
EVENT_HEADER = "X-Service-Event"
DEFAULT_TOLERANCE_SECONDS = 300


class WebhookVerificationError(Exception):
    """The delivery cannot be trusted; answer it with a 4xx and do not act on it."""


class MalformedWebhookError(WebhookVerificationError):
    """A header is missing or unreadable, or the body is not a JSON object."""


class InvalidSignatureError(WebhookVerificationError):
    """The signature does not match the raw body, timestamp and secret."""


class StaleTimestampError(WebhookVerificationError):
    """The timestamp is further from the receiver's clock than the tolerance (replay guard)."""


def compute_signature(secret: str, timestamp: str, raw_body: bytes) -> str:
    digest = hmac.new(
        secret.encode("utf-8"), timestamp.encode("ascii") + b"." + raw_body, hashlib.sha256
    ).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _header(headers: Mapping[str, str], name: str) -> str:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    raise MalformedWebhookError(f"missing {name} header")


def verify(
    raw_body: bytes,
    headers: Mapping[str, str],
    secret: str,
    tolerance: int = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> dict[str, Any]:
    """Return the event of a genuine, fresh delivery; raise `WebhookVerificationError` otherwise.

    Pass the request body exactly as received (never re-serialized JSON) and its headers
    (any case). `now` (Unix seconds) defaults to the receiver's clock.
    """
    if not isinstance(raw_body, bytes | bytearray):
        raise TypeError("raw_body must be the request's raw bytes")
    if not secret:
        raise ValueError("secret is empty")
    timestamp = _header(headers, TIMESTAMP_HEADER).strip()
    signature = _header(headers, SIGNATURE_HEADER).strip()
    # (20 digits at most: a longer one is no Unix time, and as a float it would overflow)
    if not timestamp.isdigit() or not timestamp.isascii() or len(timestamp) > 20:
        raise MalformedWebhookError(f"{TIMESTAMP_HEADER} is not a Unix time in seconds")
    current = time.time() if now is None else now
    if abs(current - int(timestamp)) > tolerance:
        raise StaleTimestampError(f"timestamp is more than {tolerance} s from this clock")
    expected = compute_signature(secret, timestamp, bytes(raw_body))
    if not hmac.compare_digest(expected.encode("ascii"), signature.encode("utf-8", "replace")):
        raise InvalidSignatureError("signature does not match")
    try:
        event = json.loads(raw_body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedWebhookError("body is not JSON") from exc
    if not isinstance(event, dict):
        raise MalformedWebhookError("body is not a JSON object")
    return event
