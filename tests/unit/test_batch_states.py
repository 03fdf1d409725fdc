from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from batchroute.domain.batches.states import (
    ALL_STATES,
    NON_TERMINAL,
    PROGRESSION,
    TERMINAL,
    allowed_sources,
    can_transition,
)

states = st.sampled_from(sorted(ALL_STATES))


def test_forward_progression_is_allowed_and_may_skip() -> None:
    # Given the progression order / When moving forward / Then it is allowed, skips included
    assert can_transition("priced", "queued")
    assert can_transition("priced", "running")
    assert can_transition("finalizing", "completed")


def test_completed_only_from_finalizing() -> None:
    assert not can_transition("running", "completed")
    assert allowed_sources("completed") == frozenset({"finalizing"})


@given(current=states, target=states)
def test_never_backward_never_out_of_terminal(current: str, target: str) -> None:
    allowed = can_transition(current, target)  # type: ignore[arg-type]
    if current in TERMINAL:
        assert not allowed
    if allowed and current in PROGRESSION and target in PROGRESSION:
        assert PROGRESSION.index(target) > PROGRESSION.index(current)


def test_every_non_terminal_state_can_fail_cancel_or_expire() -> None:
    for target in ("failed", "canceled", "expired"):
        assert allowed_sources(target) == NON_TERMINAL  # type: ignore[arg-type]
