"""SubmitTries: which keyed batch submissions are retries of a lost try, and when a retry
looks for the job that try made (providers/base.py; used by the OpenAI and Gemini adapters)."""

from __future__ import annotations

import pytest

from batchroute.providers import base


def _never(_since: int | None) -> str | None:
    raise AssertionError("a first try must not look for an earlier job")


def test_a_first_try_does_not_look_and_an_answered_try_forgets_its_key() -> None:
    tries = base.SubmitTries()
    with tries.trying("k1") as attempt:
        assert not attempt.retried
        assert attempt.made_before(_never) is None
    with tries.trying("k1") as attempt:  # answered before: a new submission, not a retry
        assert not attempt.retried


def test_a_transient_failure_keeps_the_key_so_the_next_try_looks_first() -> None:
    tries = base.SubmitTries()
    with pytest.raises(base.TransientProviderError), tries.trying("k1"):
        raise base.TransientProviderError("read timed out", code="provider_timeout")
    with tries.trying("k1") as attempt:
        assert attempt.retried
        assert attempt.made_before(lambda since: "batch_1" if since is None else None) == "batch_1"
    with tries.trying("k1") as attempt:
        assert not attempt.retried


def test_a_permanent_failure_forgets_the_key() -> None:
    tries = base.SubmitTries()
    with pytest.raises(base.PermanentProviderError), tries.trying("k1"):
        raise base.PermanentProviderError("bad body", code="invalid_item")
    with tries.trying("k1") as attempt:
        assert not attempt.retried


def test_an_unkeyed_submission_is_never_a_retry() -> None:
    tries = base.SubmitTries()
    for key in (None, ""):
        with pytest.raises(base.TransientProviderError), tries.trying(key):
            raise base.TransientProviderError("read timed out", code="provider_timeout")
        with tries.trying(key) as attempt:
            assert not attempt.retried


def test_a_refused_look_up_makes_the_job_and_a_transient_one_is_tried_again() -> None:
    retry = base.SubmitTry(retried=True)

    def refused(_since: int | None) -> str | None:
        raise base.PermanentProviderError("this key may not list batches", code="provider_forbidden")

    def timed_out(_since: int | None) -> str | None:
        raise base.TransientProviderError("read timed out", code="provider_timeout")

    assert retry.made_before(refused) is None
    with pytest.raises(base.TransientProviderError):
        retry.made_before(timed_out)


def test_only_the_newest_unanswered_keys_are_kept() -> None:
    tries = base.SubmitTries()
    keys = [f"k{n}" for n in range(base.MAX_UNANSWERED_KEYS + 2)]
    for key in keys:  # each one's retries ran out: never answered
        with pytest.raises(base.TransientProviderError), tries.trying(key):
            raise base.TransientProviderError("read timed out", code="provider_timeout")
    with tries.trying(keys[0]) as oldest:
        assert not oldest.retried  # forgotten, the memory bounded
    with tries.trying(keys[-1]) as newest:
        assert newest.retried


def test_a_key_noted_by_a_dead_invocation_is_looked_for_since_its_note() -> None:
    tries = base.SubmitTries()
    tries.assume_tried("k1", since=1_700_000_000)
    seen: list[str | None] = []

    def try_once() -> None:
        with tries.trying("k1") as attempt:
            seen.append(attempt.made_before(lambda since: f"made since {since}"))
            raise base.TransientProviderError("read timed out", code="provider_timeout")

    with pytest.raises(base.TransientProviderError):
        try_once()
    assert seen == ["made since 1700000000"]
    with tries.trying("k1") as again:  # its own retry still looks back as far
        assert again.retried and again.since == 1_700_000_000
