"""A batch's delivery to the org's buckets: its states, its retry schedule and its view
(docs/delivery-targets.md).

One delivery per batch, made when the workflow's Deliver step runs: it snapshots the org's
enabled targets and pushes the batch's artifacts to each. States:

- `pending`: made (or re-enqueued by redeliver), no attempt running yet;
- `delivering`: an attempt holds the lease and is pushing;
- `delivered`: every target has every artifact;
- `failed`: the last attempt left a target without its artifacts. While `next_attempt_at`
  is set, the sweeper retries then (only the targets not yet delivered); once the schedule
  is spent it is null and only `POST /v1/batches/{id}/redeliver` starts a new round.

Attempt 1 runs in the Deliver step; retries follow RETRY_DELAYS_SECONDS after each failed
attempt (1 min, 5 min, 30 min, 2 h, 6 h, 12 h: seven attempts over about 20.6 hours).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from typing import Final, Literal, TypedDict, cast

from batchroute.clock import isoformat
from batchroute.domain.views import view_of

DeliveryState = Literal["pending", "delivering", "delivered", "failed"]
TargetState = Literal["pending", "delivered", "failed"]

RETRY_DELAYS_SECONDS: Final[tuple[int, ...]] = (60, 300, 1800, 7200, 21_600, 43_200)
MAX_ATTEMPTS: Final = 1 + len(RETRY_DELAYS_SECONDS)
# How long an attempt may hold the delivery before the sweeper counts its worker as gone:
# above the deliver worker's 120 s time-out.
LEASE_SECONDS: Final = 300
INTERRUPTED: Final = "the attempt stopped before it recorded an outcome (worker time-out or crash)"
# A target that failed for one of these reasons cannot succeed later: no retry is scheduled.
FINAL_ERRORS: Final = frozenset({"results_expired"})  # retention reclaimed the batch's bytes


class DeliveryErrorView(TypedDict):
    code: str
    message: str
    target_id: str | None


class TargetDeliveryView(TypedDict):
    """A target's share as shown: its fields (`dataclasses.asdict` of `TargetDelivery`)."""

    target_id: str
    name: str
    bucket: str
    prefix: str
    state: TargetState
    last_error: DeliveryErrorView | None
    delivered_at: str | None
    objects: list[str]
    bytes_delivered: int


class DeliveryView(TypedDict):
    """A batch's delivery as shown (`created_at` null while it is only pending)."""

    state: DeliveryState
    attempts: int
    max_attempts: int
    last_error: DeliveryErrorView | None
    last_attempt_at: str | None
    next_attempt_at: str | None
    delivered_at: str | None
    redeliveries: int
    created_at: str | None
    targets: list[TargetDeliveryView]


@dataclass(frozen=True)
class DeliveryError:
    code: str
    message: str
    target_id: str | None = None

    def to_api(self) -> DeliveryErrorView:
        return view_of(self, DeliveryErrorView)


@dataclass(frozen=True)
class TargetDelivery:
    """One target's share of a batch delivery."""

    target_id: str
    name: str
    bucket: str
    prefix: str = ""
    state: TargetState = "pending"
    last_error: DeliveryError | None = None
    delivered_at: str | None = None
    objects: tuple[str, ...] = ()
    bytes_delivered: int = 0

    def to_api(self) -> TargetDeliveryView:
        return cast(TargetDeliveryView, asdict(self))  # the stored shape is the public one


@dataclass(frozen=True)
class DeliveryRecord:
    """A batch's bucket delivery as stored (`BATCH#<id>` / `DELIVERY#BUCKET`)."""

    batch_id: str
    org_id: str
    state: DeliveryState
    targets: tuple[TargetDelivery, ...]
    created_at: str
    updated_at: str
    attempts: int = 0
    round_start: int = 0  # `attempts` when the current round began (redeliver starts a new one)
    redeliveries: int = 0
    next_attempt_at: str | None = None
    last_attempt_at: str | None = None
    lease_until: str | None = None
    delivered_at: str | None = None
    last_error: DeliveryError | None = None

    def due(self, now_iso: str) -> bool:
        """An attempt is owed now: pending or failed, with its next attempt at or before now."""
        return (
            self.state in ("pending", "failed")
            and self.next_attempt_at is not None
            and (self.next_attempt_at <= now_iso)
        )

    def after_attempt(
        self, targets: tuple[TargetDelivery, ...], *, attempts: int, now: datetime
    ) -> DeliveryRecord:
        """The delivery once attempt `attempts` ended at `now` with `targets`: delivered, or
        failed and due again as the round's schedule says (`outcome`); out of its lease."""
        at = isoformat(now)
        state, next_at, error = outcome(targets, attempts=attempts, round_start=self.round_start, now=now)
        return replace(
            self,
            state=state,
            targets=targets,
            attempts=attempts,
            updated_at=at,
            next_attempt_at=isoformat(next_at) if next_at else None,
            lease_until=None,
            delivered_at=at if state == "delivered" else None,
            last_error=error,
        )

    def lease_expired(self, now_iso: str) -> bool:
        return self.state == "delivering" and (self.lease_until is None or self.lease_until < now_iso)

    def to_api(self) -> DeliveryView:
        return view_of(
            self,
            DeliveryView,
            max_attempts=self.round_start + MAX_ATTEMPTS,
            last_error=self.last_error.to_api() if self.last_error else None,
            targets=[t.to_api() for t in self.targets],
        )


def new_round(targets: Iterable[TargetDelivery]) -> tuple[TargetDelivery, ...]:
    """Every target pending again (redeliver pushes everything once more: writes overwrite)."""
    return tuple(replace(t, state="pending", last_error=None, delivered_at=None, objects=()) for t in targets)


def outcome(
    targets: Iterable[TargetDelivery], *, attempts: int, round_start: int, now: datetime
) -> tuple[DeliveryState, datetime | None, DeliveryError | None]:
    """After an attempt: `delivered` when every target is, else `failed` with the time of the
    next retry (None once the round's schedule is spent, or when no target left can succeed:
    FINAL_ERRORS) and the first target's error."""
    pending = [t for t in targets if t.state != "delivered"]
    if not pending:
        return "delivered", None, None
    error = next((t.last_error for t in pending if t.last_error), None) or DeliveryError(
        "delivery_failed", "a target was not delivered"
    )
    made = attempts - round_start  # attempts made in this round, this one included
    hopeless = all(t.last_error is not None and t.last_error.code in FINAL_ERRORS for t in pending)
    if made >= MAX_ATTEMPTS or hopeless:
        return "failed", None, error
    return "failed", now + timedelta(seconds=RETRY_DELAYS_SECONDS[made - 1]), error


def pending_view(targets: Iterable[TargetDelivery]) -> DeliveryView:
    """What a batch shows before its Deliver step made the delivery: pending to these targets."""
    return {
        "state": "pending",
        "attempts": 0,
        "max_attempts": MAX_ATTEMPTS,
        "last_error": None,
        "last_attempt_at": None,
        "next_attempt_at": None,
        "delivered_at": None,
        "redeliveries": 0,
        "created_at": None,
        "targets": [t.to_api() for t in targets],
    }
