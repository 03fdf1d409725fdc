"""Webhook rules: signature vectors, verification, the retry schedule, delivery states."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from batchroute.domain.batches.record import BatchRecord, batch_summary
from batchroute.domain.delivery.webhooks import (
    DELIVERY_STATUSES,
    MAX_ATTEMPTS,
    RETRY_DELAYS_SECONDS,
    AttemptOutcome,
    TransitionError,
    can_transition,
    check_transition,
    decide,
    delivery_id_for,
    event_body,
    event_type_for,
    parse_retry_after,
    retry_delay,
    sign,
    signature_headers,
    verify,
)

SECRET = b"whsec-test-secret"
TIMESTAMP = 1767225600  # 2026-01-01T00:00:00Z
BODY = b'{"id":"evt_1","type":"batch.completed"}'
# Computed independently: printf '%s' '1767225600.{"id":"evt_1","type":"batch.completed"}' |
#   openssl dgst -sha256 -hmac 'whsec-test-secret' -binary | base64 | tr '+/' '-_' | tr -d '='
KNOWN_SIGNATURE = "37eUByXk4DKdSKGhE6lQ18y8vLf_CfDdN5hu3z9kvCc"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _ok(code: int = 200) -> AttemptOutcome:
    return AttemptOutcome(code, None, 12)


# -- signature ---------------------------------------------------------------------------
def test_sign_matches_a_fixed_known_vector() -> None:
    assert sign(SECRET, TIMESTAMP, BODY) == KNOWN_SIGNATURE


def test_sign_matches_the_stdlib_recipe_of_the_docs() -> None:
    # The recipe from docs/webhooks.md, spelled out with hmac and base64 only
    body = json.dumps({"id": "evt_2", "batch": {"id": "batch_x", "state": "failed"}}).encode()
    digest = hmac.new(SECRET, f"{TIMESTAMP}.".encode() + body, hashlib.sha256).digest()
    expected = base64.urlsafe_b64encode(digest).decode().rstrip("=")
    assert sign(SECRET, TIMESTAMP, body) == expected


def test_signature_is_base64url_without_padding() -> None:
    for n in range(40):
        signature = sign(SECRET, TIMESTAMP + n, BODY + b" " * n)
        assert "=" not in signature and "+" not in signature and "/" not in signature
        assert len(signature) == 43  # 32 bytes, unpadded


def test_signature_covers_timestamp_body_and_secret() -> None:
    assert sign(SECRET, TIMESTAMP + 1, BODY) != KNOWN_SIGNATURE
    assert sign(SECRET, TIMESTAMP, BODY + b" ") != KNOWN_SIGNATURE
    assert sign(b"another-secret", TIMESTAMP, BODY) != KNOWN_SIGNATURE


def test_signature_headers() -> None:
    headers = signature_headers(SECRET, TIMESTAMP, BODY, "batch.completed")
    assert headers == {
        "X-Service-Signature": KNOWN_SIGNATURE,
        "X-Service-Timestamp": str(TIMESTAMP),
        "X-Service-Event": "batch.completed",
    }


# -- verify ------------------------------------------------------------------------------
def test_verify_accepts_a_good_signature_within_tolerance() -> None:
    assert verify(SECRET, TIMESTAMP, BODY, KNOWN_SIGNATURE, now=TIMESTAMP)
    assert verify(SECRET, str(TIMESTAMP), BODY, KNOWN_SIGNATURE, now=NOW + timedelta(seconds=300))
    assert verify(SECRET, TIMESTAMP, BODY, KNOWN_SIGNATURE, now=NOW - timedelta(seconds=300))
    # the secret as the docs' vector gives it (text) verifies the same
    assert verify(SECRET.decode(), TIMESTAMP, BODY, KNOWN_SIGNATURE, now=TIMESTAMP)
    assert not verify("another-secret", TIMESTAMP, BODY, KNOWN_SIGNATURE, now=TIMESTAMP)


def test_verify_rejects_stale_or_future_timestamps() -> None:
    assert not verify(SECRET, TIMESTAMP, BODY, KNOWN_SIGNATURE, now=NOW + timedelta(seconds=301))
    assert not verify(SECRET, TIMESTAMP, BODY, KNOWN_SIGNATURE, now=NOW - timedelta(seconds=301))
    assert verify(SECRET, TIMESTAMP, BODY, KNOWN_SIGNATURE, now=TIMESTAMP + 900, tolerance=900)


@pytest.mark.parametrize(
    ("secret", "timestamp", "body", "signature"),
    [
        (b"wrong-secret", TIMESTAMP, BODY, KNOWN_SIGNATURE),
        (SECRET, TIMESTAMP, BODY + b"\n", KNOWN_SIGNATURE),  # re-serialized body
        (SECRET, TIMESTAMP + 1, BODY, KNOWN_SIGNATURE),
        (SECRET, TIMESTAMP, BODY, KNOWN_SIGNATURE[:-1]),
        (SECRET, TIMESTAMP, BODY, KNOWN_SIGNATURE + "="),
        (SECRET, TIMESTAMP, BODY, ""),
        (SECRET, TIMESTAMP, BODY, "ünïcode"),
        (SECRET, "not-a-number", BODY, KNOWN_SIGNATURE),
    ],
)
def test_verify_rejects_anything_else(secret: bytes, timestamp: object, body: bytes, signature: str) -> None:
    assert not verify(secret, timestamp, body, signature, now=TIMESTAMP + 1)  # type: ignore[arg-type]


# -- events ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("state", "event_type"),
    [
        ("completed", "batch.completed"),
        ("failed", "batch.failed"),
        ("canceled", "batch.canceled"),
        ("expired", "batch.expired"),
        ("running", None),
        ("priced", None),
    ],
)
def test_event_type_follows_the_terminal_state(state: str, event_type: str | None) -> None:
    assert event_type_for(state) == event_type


def test_delivery_id_is_deterministic_per_batch_and_event() -> None:
    first = delivery_id_for("batch_a", "batch.completed")
    assert first == delivery_id_for("batch_a", "batch.completed")
    assert first != delivery_id_for("batch_b", "batch.completed")
    assert first != delivery_id_for("batch_a", "batch.failed")
    assert first.startswith("whd_") and len(first) == 30


def test_event_body_has_id_type_time_and_batch_and_never_the_webhook() -> None:
    record = {
        "batch_id": "batch_1",
        "state": "completed",
        "org_id": "org_1",
        "counts": {"total": Decimal(3), "completed": Decimal(2), "failed": Decimal(1)},
        "created_at": "2026-01-01T00:00:00.000Z",
        "completed_at": "2026-01-01T01:00:00.000Z",
        "webhook": {"url": "https://hooks.example.com", "secret_sealed": "AQID"},
        "reserved_micros": Decimal(5),
    }
    stored = BatchRecord.from_mapping(record)
    raw = event_body(
        event_id="evt_1", event_type="batch.completed", created_at="t", batch=batch_summary(stored)
    )
    body = json.loads(raw)
    assert body == {
        "id": "evt_1",
        "type": "batch.completed",
        "created_at": "t",
        "batch": {
            "id": "batch_1",
            "state": "completed",
            "counts": {"total": 3, "completed": 2, "failed": 1},
            "created_at": "2026-01-01T00:00:00.000Z",
            "completed_at": "2026-01-01T01:00:00.000Z",
        },
    }
    assert "secret" not in raw and "webhook" not in raw
    assert raw == event_body(
        event_id="evt_1", event_type="batch.completed", created_at="t", batch=batch_summary(stored)
    )


# -- schedule ----------------------------------------------------------------------------
def test_schedule_is_eight_attempts_over_about_a_day() -> None:
    assert MAX_ATTEMPTS == 8 == len(RETRY_DELAYS_SECONDS)
    assert RETRY_DELAYS_SECONDS[0] == 0  # the first attempt is immediate
    total = sum(RETRY_DELAYS_SECONDS)
    assert total == 84_905
    assert 23 * 3600 <= total <= 25 * 3600
    assert list(RETRY_DELAYS_SECONDS) == sorted(RETRY_DELAYS_SECONDS)


def test_retry_delay_per_attempt_and_none_after_the_last() -> None:
    assert [retry_delay(n) for n in range(1, 8)] == [
        timedelta(seconds=s) for s in (5, 300, 1800, 7200, 18_000, 28_800, 28_800)
    ]
    assert retry_delay(8) is None
    with pytest.raises(ValueError, match="numbered from 1"):
        retry_delay(0)


def test_retry_after_is_a_minimum_and_capped() -> None:
    assert retry_delay(1, retry_after_seconds=120) == timedelta(seconds=120)
    assert retry_delay(3, retry_after_seconds=60) == timedelta(seconds=1800)  # schedule is longer
    assert retry_delay(1, retry_after_seconds=10**9) == timedelta(seconds=28_800)
    assert retry_delay(8, retry_after_seconds=60) is None


def test_parse_retry_after_seconds_and_http_dates() -> None:
    assert parse_retry_after("120", now=NOW) == 120
    assert parse_retry_after(" 7 ", now=NOW) == 7
    assert parse_retry_after("Thu, 01 Jan 2026 00:10:00 GMT", now=NOW) == 600
    assert parse_retry_after("Wed, 31 Dec 2025 00:00:00 GMT", now=NOW) == 0
    assert parse_retry_after(None, now=NOW) is None
    assert parse_retry_after("", now=NOW) is None
    assert parse_retry_after("soon", now=NOW) is None
    assert parse_retry_after("-5", now=NOW) is None


# -- decisions and transitions -----------------------------------------------------------
def test_2xx_succeeds() -> None:
    for code in (200, 201, 202, 204, 299):
        assert decide(1, _ok(code), now=NOW).status == "succeeded"
    decision = decide(5, _ok(), now=NOW)
    assert decision.next_attempt_at is None and decision.last_error is None


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_3xx_is_a_failure_and_says_redirects_are_not_followed(code: int) -> None:
    decision = decide(1, AttemptOutcome(code, None, 5), now=NOW)
    assert decision.status == "failed"
    assert decision.next_attempt_at == NOW + timedelta(seconds=5)
    assert decision.last_error is not None and "redirect" in decision.last_error


@pytest.mark.parametrize(
    "outcome",
    [
        AttemptOutcome(500, None, 5),
        AttemptOutcome(404, None, 5),
        AttemptOutcome(None, "timed out after 10 s", 10_000),
        AttemptOutcome(None, "could not connect to 1.1.1.1: refused", 3),
        AttemptOutcome(199, None, 5),
    ],
)
def test_non_2xx_timeouts_and_connection_errors_fail(outcome: AttemptOutcome) -> None:
    decision = decide(2, outcome, now=NOW)
    assert decision.status == "failed"
    assert decision.next_attempt_at == NOW + timedelta(seconds=300)
    assert decision.last_error


def test_429_retry_after_lengthens_the_next_delay_other_codes_ignore_it() -> None:
    assert decide(1, AttemptOutcome(429, None, 5, 90), now=NOW).next_attempt_at == NOW + timedelta(seconds=90)
    assert decide(1, AttemptOutcome(503, None, 5, 90), now=NOW).next_attempt_at == NOW + timedelta(seconds=5)


def test_the_eighth_failure_dead_letters() -> None:
    decision = decide(8, AttemptOutcome(500, None, 5), now=NOW)
    assert decision.status == "dead_lettered" and decision.next_attempt_at is None
    assert decision.last_error == "receiver answered 500"


def test_a_full_failing_run_spans_the_schedule() -> None:
    at, status, attempt = NOW, "pending", 0
    while status in ("pending", "failed"):
        check_transition(status, "delivering")
        attempt += 1
        decision = decide(attempt, AttemptOutcome(500, None, 1), now=at)
        check_transition("delivering", decision.status)
        status = decision.status
        if decision.next_attempt_at is not None:
            at = decision.next_attempt_at
    assert (status, attempt) == ("dead_lettered", 8)
    assert at - NOW == timedelta(seconds=84_905)


def test_transitions() -> None:
    assert set(DELIVERY_STATUSES) == {"pending", "delivering", "succeeded", "failed", "dead_lettered"}
    allowed = {
        ("pending", "delivering"),
        ("delivering", "succeeded"),
        ("delivering", "failed"),
        ("delivering", "dead_lettered"),
        ("failed", "delivering"),
    }
    for current in DELIVERY_STATUSES:
        for target in DELIVERY_STATUSES:
            assert can_transition(current, target) == ((current, target) in allowed), (current, target)
    with pytest.raises(TransitionError):
        check_transition("succeeded", "delivering")
    assert not can_transition("unknown", "delivering")
