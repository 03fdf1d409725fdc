"""Account lockout on moto (issue 27 point 3): failed sign-ins for one address are counted
across every IP; the 10th locks its password sign-in for 15 minutes (429 `rate_limited`,
`details.limit = "login_account"`, Retry-After), and the account is emailed once per lockout.
An unknown address is locked the same way and nobody is emailed. Time moves by the
harness's clock."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.rate_limits import LoginLockStore
from batchroute.clock import FixedClock
from batchroute.config import get_settings
from batchroute.services.accounts.login_lockout import LOCK_SUBJECT
from batchroute_tools.local.provision import LocalStack
from tests.integration.accounts_harness import PASSWORD, Harness, make_harness

FAILURES = 10  # Settings.login_lockout_failures, the default
LOCK_SECONDS = 900
WINDOW_SECONDS = 900


@pytest.fixture
def harness(local_aws: LocalStack) -> Harness:
    made = make_harness()
    # At the start of a 15-minute window, so the rolling count's arithmetic is plain
    now = made.clock.now().timestamp()
    made.clock = FixedClock(datetime.fromtimestamp(now - now % WINDOW_SECONDS, UTC))
    return made


def _from(harness: Harness, n: int) -> TestClient:
    """A browser at its own IP address (203.0.113.n), as the socket peer."""
    return TestClient(harness.client.app, raise_server_exceptions=False, client=(f"203.0.113.{n}", 40000 + n))


def _login(harness: Harness, n: int, email: str, password: str) -> httpx.Response:
    return _from(harness, n).post("/v1/auth/login", json={"email": email, "password": password})


def _lock_emails(harness: Harness, address: str) -> list[Any]:
    return [m for m in harness.outbox.to(address) if m.subject == LOCK_SUBJECT]


def test_30_wrong_passwords_from_30_ips_lock_the_account_after_10_and_email_it_once(harness: Harness) -> None:
    harness.register("ann@example.com")

    # When 30 wrong passwords arrive for one address, each from a different IP
    answers = [_login(harness, n, "ann@example.com", f"wrong-{n}") for n in range(30)]

    # Then the first 10 are the usual 401, and every later one is refused as locked
    assert [a.status_code for a in answers[:FAILURES]] == [401] * FAILURES
    assert all(a.json()["error"]["code"] == "invalid_credentials" for a in answers[:FAILURES])
    for locked in answers[FAILURES:]:
        assert locked.status_code == 429
        assert locked.json()["error"]["code"] == "rate_limited"
        assert locked.json()["error"]["details"] == {"limit": "login_account"}
        assert 0 < int(locked.headers["retry-after"]) <= LOCK_SECONDS
    # And the account was told once, not once per attempt
    emails = _lock_emails(harness, "ann@example.com")
    assert len(emails) == 1
    assert "10 times" in emails[0].text and "15 minutes" in emails[0].text
    assert "wrong-" not in emails[0].text

    # When the right password comes during the lockout, from a new IP: still locked
    assert _login(harness, 99, "ann@example.com", PASSWORD).status_code == 429

    # When the lockout has passed, the right password signs in again
    harness.clock.advance(seconds=LOCK_SECONDS + 1)
    assert _login(harness, 99, "ann@example.com", PASSWORD).status_code == 200
    assert len(_lock_emails(harness, "ann@example.com")) == 1


def test_an_unknown_address_is_locked_the_same_way_and_nobody_is_emailed(harness: Harness) -> None:
    harness.register("ann@example.com")
    statuses = [_login(harness, n, "nobody@example.com", "wrong-password").status_code for n in range(12)]
    assert statuses == [401] * FAILURES + [429, 429]
    assert harness.outbox.to("nobody@example.com") == []
    # And another address is not affected by it
    assert _login(harness, 50, "ann@example.com", PASSWORD).status_code == 200


def test_a_successful_sign_in_resets_no_failure_count(harness: Harness) -> None:
    harness.register("ann@example.com")
    for n in range(FAILURES - 1):
        assert _login(harness, n, "ann@example.com", "wrong-password").status_code == 401
    # When the attacker (or the user) signs in successfully from yet another IP
    assert _login(harness, 60, "ann@example.com", PASSWORD).status_code == 200
    # Then the failures from the other IPs still count: the next one locks the account
    assert _login(harness, 61, "ann@example.com", "wrong-password").status_code == 401
    assert _login(harness, 62, "ann@example.com", PASSWORD).status_code == 429
    assert len(_lock_emails(harness, "ann@example.com")) == 1


def test_failures_outside_the_window_do_not_add_up(harness: Harness) -> None:
    harness.register("ann@example.com")
    for n in range(FAILURES - 1):
        assert _login(harness, n, "ann@example.com", "wrong-password").status_code == 401
    # Two windows later the old failures no longer count
    harness.clock.advance(seconds=2 * WINDOW_SECONDS)
    for n in range(FAILURES - 1):
        assert _login(harness, n, "ann@example.com", "wrong-password").status_code == 401
    assert _login(harness, 70, "ann@example.com", PASSWORD).status_code == 200
    assert _lock_emails(harness, "ann@example.com") == []


def test_a_second_lockout_sends_a_second_email(harness: Harness) -> None:
    harness.register("ann@example.com")
    for n in range(FAILURES):
        _login(harness, n, "ann@example.com", "wrong-password")
    harness.clock.advance(seconds=LOCK_SECONDS + 1)
    # The failures that locked it still weigh in the rolling window: one more locks it again
    assert _login(harness, 80, "ann@example.com", "wrong-password").status_code == 401
    assert _login(harness, 81, "ann@example.com", PASSWORD).status_code == 429
    assert len(_lock_emails(harness, "ann@example.com")) == 2


def test_a_lock_is_taken_once_until_it_ends(local_aws: LocalStack) -> None:
    # The store's conditional put: of concurrent failures reaching the threshold, one takes
    # the lock (and sends the email); the others find it held
    locks = LoginLockStore(get_settings().table_name("controls"))
    assert locks.locked_until("acct") is None
    assert locks.lock("acct", now=1000, until=1900) is True
    assert locks.lock("acct", now=1001, until=1901) is False
    assert locks.locked_until("acct") == 1900
    # Once it has ended, the next lockout takes it again
    assert locks.lock("acct", now=1900, until=2800) is True
    assert locks.locked_until("acct") == 2800
