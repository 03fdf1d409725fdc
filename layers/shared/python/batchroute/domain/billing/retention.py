"""Result retention settings of an org: how long result files are kept after a batch ends.

`grace_only` (the default, free) keeps results for the grace window only; `extended_fixed`
keeps them `extended_days`; `until_deleted` until the customer deletes them. `never_charge`
guarantees zero storage spend, so it forces `grace_only` whatever tier is asked for.
Here are the rules of changing them, and (`keep_until`, `next_review`) the rule the sweeper's
garbage collection applies to a finished batch's result bytes (docs/retention.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal, TypedDict

from batchroute.domain.views import view_of
from batchroute.errors import InvalidRequest

RetentionTier = Literal["grace_only", "extended_fixed", "until_deleted"]
MIN_EXTENDED_DAYS = 1
MAX_EXTENDED_DAYS = 3650
# A batch whose bytes are kept (a long window, `until_deleted`, or not finished yet) is looked
# at again at most this much later, so a shortened window or a move to `grace_only` (or
# `never_charge`) applies within a day even to batches finished long ago.
REVIEW_INTERVAL = timedelta(hours=24)
# When retention deletes the input chunks of a batch create that never committed (its entry
# is put before the chunks, and deleted by the create's transaction): far longer than a
# create lasts (the API's 29 s), so a create still running never loses its chunks.
ORPHAN_AFTER = timedelta(hours=1)


class RetentionView(TypedDict):
    org_id: str
    retention_tier: RetentionTier
    extended_days: int | None
    never_charge: bool
    grace_hours: int
    updated_at: str | None


@dataclass(frozen=True, slots=True)
class UpdateRetention:
    """A partial update, validated at the edge (functions/api/schemas/billing/retention.py): only the
    fields named in `given` change."""

    given: frozenset[str]
    retention_tier: RetentionTier = "grace_only"
    extended_days: int | None = None
    never_charge: bool = False


@dataclass(frozen=True)
class RetentionSettings:
    org_id: str
    retention_tier: RetentionTier = "grace_only"
    extended_days: int | None = None
    never_charge: bool = False
    updated_at: str | None = None
    version: int = 0  # optimistic concurrency; not part of the API

    def to_api(self, *, grace_hours: int) -> RetentionView:
        return view_of(self, RetentionView, grace_hours=grace_hours)


def keep_until(settings: RetentionSettings, *, finalized_at: datetime, grace: timedelta) -> datetime | None:
    """When a batch's result bytes may be reclaimed under `settings`, or None (kept until
    deleted). The window starts when the result artifacts were written (`finalized_at`).
    `extended_fixed` keeps `extended_days` but never less than the free grace window."""
    if settings.never_charge or settings.retention_tier == "grace_only":
        return finalized_at + grace
    if settings.retention_tier == "extended_fixed":
        return finalized_at + max(grace, timedelta(days=settings.extended_days or 0))
    return None


def next_review(until: datetime | None, *, now: datetime) -> datetime:
    """When to look at a kept batch again: at its reclaim time, or a day from now if sooner."""
    later = now + REVIEW_INTERVAL
    return later if until is None else min(until, later)


def apply_update(current: RetentionSettings, command: UpdateRetention, *, at: str) -> RetentionSettings:
    """The settings with the command's given fields applied."""
    given = command.given
    tier = command.retention_tier if "retention_tier" in given else current.retention_tier
    days = command.extended_days if "extended_days" in given else current.extended_days
    never_charge = command.never_charge if "never_charge" in given else current.never_charge
    if "retention_tier" in given and tier != "extended_fixed" and "extended_days" not in given:
        days = None  # leaving extended_fixed forgets its day count
    if never_charge:
        # "never_charge forces grace_only": coerced, not refused, so the guarantee always holds.
        tier, days = "grace_only", None
    elif tier == "extended_fixed":
        if days is None:
            raise _invalid("extended_days", "extended_fixed needs extended_days (given now or saved before).")
    elif days is not None:
        raise _invalid("extended_days", "extended_days applies only to the extended_fixed tier.")
    return replace(current, retention_tier=tier, extended_days=days, never_charge=never_charge, updated_at=at)


def _invalid(name: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, code="invalid_retention", details={"field": name})
