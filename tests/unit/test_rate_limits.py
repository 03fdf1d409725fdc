"""Rate limits: the sliding-window math, and the limiter over an in-memory counter store with
a fixed clock (time moves by advancing the clock, never by sleeping)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchroute.clock import FixedClock
from batchroute.config import Settings
from batchroute.domain.accounts.access import Principal
from batchroute.domain.billing.rate_limits import (
    Limit,
    WindowCounts,
    decide,
    expires_at_epoch,
    most_counted_before,
    position,
    retry_after,
    rolling_count,
)
from batchroute.errors import RateLimited, TransientError
from batchroute.services.accounts.login_lockout import LockoutPolicy
from batchroute.services.billing.rate_limiting import RateLimiter, RateLimitPolicy, ip_scope
from batchroute.wiring import Wiring

START = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)  # on a window boundary for 60 s and 3600 s


class MemoryCounters:
    """The DynamoDB store's semantics: a count per (scope, window length, counter, window)."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, int, str, int], int] = defaultdict(int)
        self.hits = 0
        self.give_backs = 0
        self.failing = False

    def hit(
        self, scope: str, *, window_seconds: int, index: int, counters: Sequence[str]
    ) -> dict[str, WindowCounts]:
        if self.failing:
            raise TransientError("throttled")
        self.hits += 1
        for counter in counters:
            self.counts[(scope, window_seconds, counter, index)] += 1
        return {
            counter: WindowCounts(
                current=self.counts[(scope, window_seconds, counter, index)],
                previous=self.counts[(scope, window_seconds, counter, index - 1)],
            )
            for counter in counters
        }

    def give_back(self, scope: str, *, window_seconds: int, index: int, counters: Sequence[str]) -> None:
        self.give_backs += 1
        for counter in counters:
            self.counts[(scope, window_seconds, counter, index)] -= 1


def key_principal(org: str = "org_a", key: str = "key_1") -> Principal:
    return Principal(org_id=org, role="member", via="api_key", key_id=key)


def limiter(policy: RateLimitPolicy | None = None) -> tuple[RateLimiter, MemoryCounters, FixedClock]:
    counters, clock = MemoryCounters(), FixedClock(START)
    return RateLimiter(counters, clock, policy or RateLimitPolicy(), secret=b"s"), counters, clock


def allowed(check: object) -> bool:
    try:
        check()  # type: ignore[operator]
    except RateLimited:
        return False
    return True


# -- window math -------------------------------------------------------------------------
def test_position_cuts_time_into_fixed_windows() -> None:
    assert position(START, 60).fraction == 0.0
    later = position(datetime(2026, 1, 1, 12, 0, 45, tzinfo=UTC), 60)
    assert later.index == position(START, 60).index and later.fraction == pytest.approx(0.75)
    assert position(datetime(2026, 1, 1, 12, 1, 0, tzinfo=UTC), 60).index == position(START, 60).index + 1


def test_rolling_count_weights_the_previous_window_by_what_is_left_of_it() -> None:
    assert rolling_count(WindowCounts(current=4, previous=10), 0.25) == pytest.approx(11.5)
    assert rolling_count(WindowCounts(current=4, previous=10), 0.0) == 14


def test_decide_allows_up_to_the_limit_and_refuses_beyond() -> None:
    limit = Limit("api_key", 3, 60)
    assert decide(limit, WindowCounts(3, 0), 0.5, counted_if_refused=False).allowed
    refused = decide(limit, WindowCounts(4, 0), 0.5, counted_if_refused=False)
    # The rest of this window (30 s), then until 3 * (1 - g) + 1 <= 3 in the next: g = 1/3 (20 s)
    assert not refused.allowed and refused.retry_after_seconds == 50


def test_retry_after_waits_for_the_previous_window_to_decay() -> None:
    # Given 10 requests last window, 4 now (the 4th refused and given back), limit 10, 25% in
    limit = Limit("api_key", 10, 60)
    counts = WindowCounts(current=4, previous=10)
    # Then the next request fits once 10 * (1 - f) + 4 <= 10, i.e. at f = 0.4: 9 s from now
    assert retry_after(limit, counts, 0.25, counted_if_refused=False) == 9
    # And if refused requests stay counted, the next one is the 6th: f = 0.5, 15 s
    assert retry_after(limit, counts, 0.25, counted_if_refused=True) == 15


def test_a_limit_needs_room_for_one_request() -> None:
    with pytest.raises(ValueError, match="at least one request"):
        Limit("x", 0, 60)


def test_counters_expire_after_serving_as_the_previous_window() -> None:
    assert expires_at_epoch(100, 60) == 102 * 60 + 60


@given(
    limit=st.integers(1, 50),
    previous=st.integers(0, 120),
    current=st.integers(1, 120),
    fraction=st.floats(0, 0.999),
    counted=st.booleans(),
)
def test_after_retry_after_the_next_request_fits(
    limit: int, previous: int, current: int, fraction: float, counted: bool
) -> None:
    # Given a refused request
    rule = Limit("x", limit, 60)
    counts = WindowCounts(current=current, previous=previous)
    decision = decide(rule, counts, fraction, counted_if_refused=counted)
    if decision.allowed:
        return
    # When the caller waits exactly Retry-After with no other traffic
    moment = fraction + decision.retry_after_seconds / 60
    after_refusal = current if counted else current - 1
    if moment < 1:
        nxt = WindowCounts(current=after_refusal + 1, previous=previous)
        fits = decide(rule, nxt, moment, counted_if_refused=counted).allowed
    else:
        nxt = WindowCounts(current=1, previous=after_refusal if moment < 2 else 0)
        fits = decide(rule, nxt, moment - int(moment), counted_if_refused=counted).allowed
    # Then the next request fits
    assert fits
    assert decision.retry_after_seconds >= 1


# -- the limiter -------------------------------------------------------------------------
def test_a_key_under_its_limit_passes_and_over_it_gets_429_with_retry_after() -> None:
    # Given a limit of 3 per minute per key
    rate, counters, clock = limiter(RateLimitPolicy(per_key=3, per_account=100))
    principal = key_principal()
    # When the key makes 3 requests / Then all pass, in one store round trip each
    for _ in range(3):
        rate.check_caller(principal)
    assert counters.hits == 3
    # And the 4th, 15 s in, is refused: the rest of this window (45 s), then until the
    # 3 requests weigh little enough in the next (3 * (1 - g) + 1 <= 3: g = 1/3, 20 s)
    clock.advance(seconds=15)
    with pytest.raises(RateLimited) as caught:
        rate.check_caller(principal)
    assert caught.value.code == "rate_limited"
    assert caught.value.retry_after_seconds == 65
    assert caught.value.details == {"limit": "api_key", "max_requests": 3, "window_seconds": 60}


def test_the_window_rolls() -> None:
    # Given a key that used its 3 requests at the start of a minute
    rate, _, clock = limiter(RateLimitPolicy(per_key=3, per_account=100))
    principal = key_principal()
    for _ in range(3):
        rate.check_caller(principal)
    assert not allowed(lambda: rate.check_caller(principal))
    # When a full window passes, the previous window still weighs in at first
    clock.advance(seconds=60)
    assert not allowed(lambda: rate.check_caller(principal))
    # And once a third of it has slid out, one request fits again (3 * 2/3 + 1 = 3)
    clock.advance(seconds=20)
    assert allowed(lambda: rate.check_caller(principal))
    # And two windows later everything is forgotten
    clock.advance(seconds=120)
    for _ in range(3):
        rate.check_caller(principal)


def test_keys_are_independent_and_a_refused_request_uses_no_room() -> None:
    # Given a key limit of 2 and an account limit of 3
    rate, counters, _ = limiter(RateLimitPolicy(per_key=2, per_account=3))
    runaway, other = key_principal(key="key_runaway"), key_principal(key="key_other")
    # When one key hammers far beyond its limit
    results = [allowed(lambda: rate.check_caller(runaway)) for _ in range(10)]
    # Then it gets its 2, and its refusals were given back...
    assert results.count(True) == 2
    assert counters.give_backs == 8
    # ...so the account still has room for its other key
    assert allowed(lambda: rate.check_caller(other))
    # And the account limit then holds for every key
    with pytest.raises(RateLimited) as caught:
        rate.check_caller(other)
    assert caught.value.details is not None and caught.value.details["limit"] == "account"


def test_accounts_are_independent() -> None:
    rate, _, _ = limiter(RateLimitPolicy(per_key=10, per_account=2))
    for _ in range(2):
        rate.check_caller(key_principal(org="org_a", key="key_a"))
    assert not allowed(lambda: rate.check_caller(key_principal(org="org_a", key="key_a2")))
    assert allowed(lambda: rate.check_caller(key_principal(org="org_b", key="key_b")))


def test_a_session_is_limited_per_user() -> None:
    rate, _, _ = limiter(RateLimitPolicy(per_key=1, per_account=10))
    alice = Principal(org_id="org_a", role="owner", via="session", user_id="user_alice")
    bob = Principal(org_id="org_a", role="billing", via="session", user_id="user_bob")
    rate.check_caller(alice)
    with pytest.raises(RateLimited) as caught:
        rate.check_caller(alice)
    assert caught.value.details is not None and caught.value.details["limit"] == "user"
    rate.check_caller(bob)


def test_disabled_limits_never_touch_the_store() -> None:
    rate, counters, _ = limiter(RateLimitPolicy(enabled=False, per_key=1))
    for _ in range(5):
        rate.check_caller(key_principal())
        rate.check_anonymous("register", ip="203.0.113.1")
    assert counters.hits == 0


def test_an_unavailable_counter_store_fails_open() -> None:
    rate, counters, _ = limiter(RateLimitPolicy(per_key=1))
    counters.failing = True
    for _ in range(3):
        rate.check_caller(key_principal())


def test_registration_is_limited_per_ip_and_refusals_stay_counted() -> None:
    # Given 2 registrations per hour per IP
    rate, counters, clock = limiter(RateLimitPolicy(register_per_ip=2))
    rate.check_anonymous("register", ip="198.51.100.7")
    rate.check_anonymous("register", ip="198.51.100.7")
    # When a third comes from the same IP 10 minutes later / Then 429; the refused attempt
    # stays counted, so the rest of the hour (50 min) plus until 3 * (1 - g) + 1 <= 2 (40 min)
    clock.advance(minutes=10)
    with pytest.raises(RateLimited) as caught:
        rate.check_anonymous("register", ip="198.51.100.7")
    assert caught.value.retry_after_seconds == 90 * 60
    assert counters.give_backs == 0
    # And another IP is unaffected
    rate.check_anonymous("register", ip="198.51.100.8")


def test_login_is_limited_per_ip_and_email_pair_and_per_ip() -> None:
    rate, _, _ = limiter(RateLimitPolicy(login_per_ip=3, login_per_ip_email=2))
    ip = "198.51.100.7"
    # Given two failed guesses at one address
    rate.check_anonymous("login", ip=ip, email="Alice@Example.com")
    rate.check_anonymous("login", ip=ip, email="alice@example.com ")
    # Then a third at the same address (any spelling) is refused...
    assert not allowed(lambda: rate.check_anonymous("login", ip=ip, email="ALICE@example.com"))
    # ...the same address from elsewhere is not (nobody can lock alice out)
    rate.check_anonymous("login", ip="198.51.100.99", email="alice@example.com")
    # ...and the IP as a whole is capped across addresses (3 counted so far)
    assert not allowed(lambda: rate.check_anonymous("login", ip=ip, email="bob@example.com"))


def test_password_endpoints_are_limited_per_ip_and_per_email() -> None:
    rate, _, _ = limiter(RateLimitPolicy(password_per_ip=5, password_per_email=2))
    rate.check_anonymous("password", ip="198.51.100.1", email="victim@example.com")
    rate.check_anonymous("password", ip="198.51.100.2", email="victim@example.com")
    # A third reset email to one address is refused whatever the IP
    assert not allowed(
        lambda: rate.check_anonymous("password", ip="198.51.100.3", email="victim@example.com")
    )
    # A reset without an email (token submit) is limited per IP only
    rate.check_anonymous("password", ip="198.51.100.3")


def test_the_policy_comes_from_settings() -> None:
    settings = Settings(
        rate_limit_per_key=7, rate_limit_per_account=9, rate_limit_window_seconds=30, login_lockout_failures=3
    )
    wiring = Wiring(settings, FixedClock(datetime(2026, 1, 1, tzinfo=UTC)))
    policy = wiring.rate_limit_policy
    assert (policy.per_key, policy.per_account, policy.window_seconds) == (7, 9, 30)
    assert wiring.lockout_policy == LockoutPolicy(failures=3)
    defaults = Wiring(Settings(), FixedClock(datetime(2026, 1, 1, tzinfo=UTC)))
    assert (defaults.rate_limit_policy, defaults.lockout_policy) == (RateLimitPolicy(), LockoutPolicy())
    from_env = Settings.from_environ({"RATE_LIMIT_PER_KEY": "42", "RATE_LIMITS_ENABLED": "0"})
    assert (from_env.rate_limit_per_key, from_env.rate_limits_enabled) == (42, False)
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        Settings(rate_limit_per_account=0)


@pytest.mark.parametrize(
    ("ip", "scope"),
    [
        ("198.51.100.7", "198.51.100.7"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),
        ("::ffff:198.51.100.7", "198.51.100.7"),
        ("testclient", "testclient"),
        ("", "unknown"),
        ("a b#c", "abc"),
    ],
)
def test_ip_scope_groups_an_ipv6_subscriber_prefix(ip: str, scope: str) -> None:
    assert ip_scope(ip) == scope


def test_the_folded_bound_allows_exactly_what_decide_allows() -> None:
    """most_counted_before is the condition the chat hold's transaction writes: a count of
    `existing` before the request passes it exactly when `decide` allows existing + 1."""
    limit = Limit("api_key", 10, 60)
    for previous in range(0, 14):
        for fraction in (0.0, 0.01, 0.25, 0.5, 0.73, 0.999):
            most = most_counted_before(limit, previous, fraction)
            for existing in range(0, 14):
                counts = WindowCounts(current=existing + 1, previous=previous)
                allowed = decide(limit, counts, fraction, counted_if_refused=False).allowed
                assert (existing <= most) == allowed, (previous, fraction, existing, most)


def test_the_limiter_never_shows_its_secret() -> None:
    """The secret keys the email digests; a log line of the limiter must not carry it."""
    counters, clock = MemoryCounters(), FixedClock(START)
    shown = repr(RateLimiter(counters, clock, RateLimitPolicy(), secret=b"s3cr3t-digest-key"))
    assert "s3cr3t" not in shown and "RateLimiter(" in shown
