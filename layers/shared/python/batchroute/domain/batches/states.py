"""Batch lifecycle: states, order, and which moves are allowed.

A batch never moves backward and never leaves a terminal state; a fast batch may skip
intermediate states. Storage enforces these rules with conditional writes built from
`allowed_sources`.
"""

from __future__ import annotations

from typing import Literal, get_args

BatchState = Literal[
    "received",
    "validated",
    "priced",
    "queued",
    "dispatching",
    "running",
    "finalizing",
    "completed",
    "failed",
    "canceled",
    "expired",
]

# The forward path: the states in the order above, up to `completed`.
PROGRESSION: tuple[BatchState, ...] = get_args(BatchState)[: get_args(BatchState).index("completed") + 1]
TERMINAL: frozenset[BatchState] = frozenset({"completed", "failed", "canceled", "expired"})
NON_TERMINAL: frozenset[BatchState] = frozenset(s for s in get_args(BatchState) if s not in TERMINAL)
ALL_STATES: frozenset[BatchState] = frozenset(get_args(BatchState))


def is_terminal(state: BatchState) -> bool:
    return state in TERMINAL


def can_transition(current: BatchState, target: BatchState) -> bool:
    if current in TERMINAL or current == target:
        return False
    if target in ("failed", "canceled", "expired"):
        return True
    if target == "completed":
        return current == "finalizing"
    return PROGRESSION.index(target) > PROGRESSION.index(current)


def allowed_sources(target: BatchState) -> frozenset[BatchState]:
    """Every state a batch may be in for a move to `target` to be legal."""
    return frozenset(s for s in NON_TERMINAL if can_transition(s, target))
