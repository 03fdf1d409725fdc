from __future__ import annotations

import random

import pytest

from batchroute.config import Settings
from batchroute.providers.retry import RetryPolicy, backoff_ceiling, backoff_delay, no_sleep


def test_ceiling_doubles_from_base_up_to_cap() -> None:
    # Given the default base 0.5 s and cap 30 s, when each attempt's ceiling is computed
    ceilings = [backoff_ceiling(n, base=0.5, cap=30) for n in range(1, 9)]
    # Then it doubles and stops at the cap
    assert ceilings == [0.5, 1, 2, 4, 8, 16, 30, 30]


def test_huge_attempt_numbers_stay_finite() -> None:
    assert backoff_ceiling(10_000, base=0.5, cap=30) == 30


def test_attempts_are_one_based() -> None:
    with pytest.raises(ValueError, match="1-based"):
        backoff_ceiling(0, base=0.5, cap=30)


def test_full_jitter_is_pure_in_its_unit() -> None:
    assert backoff_delay(3, 0.0, base=0.5, cap=30) == 0
    assert backoff_delay(3, 0.5, base=0.5, cap=30) == 1.0
    assert backoff_delay(3, 0.25, base=0.5, cap=30) == backoff_delay(3, 0.25, base=0.5, cap=30)


def test_delays_stay_within_bounds() -> None:
    # Given a policy drawing from a seeded random source
    policy = RetryPolicy(random=random.Random(7).random, sleeper=no_sleep)  # noqa: S311
    # When many delays are drawn for each attempt
    for attempt in range(1, 12):
        ceiling = backoff_ceiling(attempt, base=0.5, cap=30)
        delays = [policy.next_delay(attempt) for _ in range(200)]
        # Then each lies in [0, ceiling) and they are spread, not constant
        assert all(0 <= d < ceiling for d in delays)
        assert max(delays) > ceiling / 2 > min(delays)


def test_retry_after_is_the_least_wait_but_still_capped() -> None:
    policy = RetryPolicy(random=lambda: 0.0, sleeper=no_sleep, cap_seconds=10)
    assert policy.next_delay(1, retry_after=3) == 3
    assert policy.next_delay(1, retry_after=60) == 10
    assert policy.next_delay(1, retry_after=None) == 0


def test_attempts_are_bounded() -> None:
    policy = RetryPolicy(max_attempts=4)
    assert [policy.can_retry(n) for n in range(1, 6)] == [True, True, True, False, False]


def test_wait_sleeps_the_drawn_delay_through_the_injected_sleeper() -> None:
    slept: list[float] = []
    policy = RetryPolicy(random=lambda: 0.5, sleeper=slept.append)
    assert policy.wait(2) == 0.5
    assert policy.wait(1, retry_after=None) == 0.25
    assert slept == [0.5, 0.25]
    # A zero delay does not call the sleeper at all
    RetryPolicy(random=lambda: 0.0, sleeper=slept.append).wait(1)
    assert slept == [0.5, 0.25]


def test_policy_from_settings() -> None:
    settings = Settings(
        provider_retry_max_attempts=6, provider_retry_base_seconds=0.1, provider_retry_cap_seconds=2
    )
    policy = RetryPolicy.from_settings(settings, random=lambda: 0.99, sleeper=no_sleep)
    assert (policy.max_attempts, policy.base_seconds, policy.cap_seconds) == (6, 0.1, 2)
    assert policy.next_delay(10) == pytest.approx(1.98)
    defaults = RetryPolicy.from_settings(Settings())
    assert (defaults.max_attempts, defaults.base_seconds, defaults.cap_seconds) == (4, 0.5, 30)


def test_invalid_policies_are_refused() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="negative"):
        RetryPolicy(base_seconds=-1)
