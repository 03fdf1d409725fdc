"""Route policy use cases: read (the default until the first save), a version-checked update
that writes its history entry in the same transaction, the history (cursor-paginated), and
`PolicyReader`, the read every routing path uses.

Authorization happens here (`routing:read` for reads, `routing:manage` for updates), so the
service is safe whoever calls it. docs/routing-policy.md has the long form.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal, authorize
from batchroute.domain.routing.policy import (
    ACTION_UPDATE,
    PolicyChange,
    PolicyHistoryView,
    PolicyVersionMismatch,
    RoutePolicy,
    UpdateRoutePolicy,
    apply_update,
    diff,
)
from batchroute.errors import InvalidRequest
from batchroute.ids import has_prefix, new_id

MAX_PAGE = 200
# After an answer, direct chat re-reads a copy older than this (see PolicyReader).
CACHE_SECONDS = 30.0
_MAX_CACHED_ORGS = 10_000


class PolicyRecords(Protocol):
    def policy(self, org_id: str, *, consistent: bool = True) -> RoutePolicy | None: ...

    def save_policy(self, policy: RoutePolicy, *, expected_version: int, entry: PolicyChange) -> None: ...

    def history(
        self, org_id: str, *, limit: int, starting_after: str | None = None
    ) -> tuple[list[PolicyChange], bool]: ...


def policy_version(policy: RoutePolicy | None) -> int:
    """The version a hold asserts: the stored policy's, 0 when none is stored."""
    return policy.version if policy is not None else 0


@dataclass(eq=False)
class PolicyReader:
    """The policy as routing reads it.

    `current` is one strongly consistent GetItem (quotes, batch create, compat, queued chat:
    off the hot path, always fresh). `cached` serves direct chat from a per-process copy of
    any age, so a warm direct request spends no AWS round trip on it; its correctness does
    not rest on the copy's age: the chat hold's transaction asserts the stored policy is
    still the copy's version (`policy_version`), and a refusal makes the caller re-read
    (`current`) and re-plan. `refresh_if_stale` runs after an answer (never before one) and
    re-reads a copy older than `cache_seconds` (by the injected clock), so a change saved in
    another process reaches this one within `cache_seconds` of traffic without costing a
    request anything. A save in this process refreshes its copy at once."""

    records: PolicyRecords
    clock: Clock
    _: KW_ONLY
    cache_seconds: float = CACHE_SECONDS
    _cache: OrderedDict[str, tuple[float, RoutePolicy | None]] = field(
        default_factory=OrderedDict, init=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def current(self, org_id: str) -> RoutePolicy | None:
        """The org's stored policy (None before its first save): one strongly consistent GetItem."""
        policy = self.records.policy(org_id)
        self.remember(org_id, policy)
        return policy

    def cached(self, org_id: str) -> RoutePolicy | None:
        """The copy this process holds, whatever its age; read only when there is none."""
        with self._lock:
            hit = self._cache.get(org_id)
        if hit is not None:
            return hit[1]
        return self.current(org_id)

    def refresh_if_stale(self, org_id: str) -> None:
        """After an answer: re-read the org's copy once it is `cache_seconds` old (or from a
        clock that went back). May raise; the caller logs it and keeps the old copy."""
        now = self.clock.now().timestamp()
        with self._lock:
            hit = self._cache.get(org_id)
        if hit is not None and 0 <= now - hit[0] < self.cache_seconds:
            return
        self.current(org_id)

    def remember(self, org_id: str, policy: RoutePolicy | None) -> None:
        with self._lock:
            self._cache[org_id] = (self.clock.now().timestamp(), policy)
            self._cache.move_to_end(org_id)
            while len(self._cache) > _MAX_CACHED_ORGS:
                self._cache.popitem(last=False)


@dataclass(eq=False)
class RoutePolicyService:
    records: PolicyRecords
    clock: Clock
    reader: PolicyReader

    def get(self, principal: Principal) -> RoutePolicy:
        authorize(principal, "routing:read")
        return self.records.policy(principal.org_id) or RoutePolicy(org_id=principal.org_id)

    def update(
        self,
        principal: Principal,
        update: UpdateRoutePolicy,
        *,
        if_match: str | None = None,
        ip_address: str | None = None,
    ) -> RoutePolicy:
        """Apply a partial update (only the given fields change; null resets one). With a
        version (`If-Match` or the body's `version`) the save is refused with 409
        `policy_version_mismatch` unless that is still the stored version."""
        authorize(principal, "routing:manage")
        expected = _expected_version(if_match, update.version)
        current = self.records.policy(principal.org_id) or RoutePolicy(org_id=principal.org_id)
        if expected is not None and expected != current.version:
            raise PolicyVersionMismatch(
                f"The route policy is at version {current.version}, not {expected}; read it again.",
                details={"expected_version": expected, "current_version": current.version},
            )
        updated = apply_update(current, update)
        before, after = diff(current, updated)
        if not before and current.configured:
            return current
        now = isoformat(self.clock.now())
        saved = replace(
            updated,
            configured=True,
            version=current.version + 1,
            created_at=current.created_at or now,
            updated_at=now,
            updated_by=principal.user_id or principal.key_id,
        )
        entry = PolicyChange(
            id=new_id("aud", at=self.clock.now()),
            org_id=principal.org_id,
            version=saved.version,
            actor_user_id=principal.user_id,
            actor_key_id=principal.key_id if principal.via == "api_key" else None,
            actor_role=principal.role,
            action=ACTION_UPDATE,
            before=before,
            after=after,
            ip_address=ip_address,
            created_at=now,
        )
        self.records.save_policy(saved, expected_version=current.version, entry=entry)
        self.reader.remember(principal.org_id, saved)
        return saved

    def history(
        self, principal: Principal, *, limit: int = 50, cursor: str | None = None
    ) -> PolicyHistoryView:
        authorize(principal, "routing:read")
        if cursor is not None and not has_prefix(cursor, "aud"):
            raise InvalidRequest(
                "cursor must be the next_cursor of a previous page.", details={"field": "cursor"}
            )
        limit = max(1, min(MAX_PAGE, limit))
        entries, more = self.records.history(principal.org_id, limit=limit, starting_after=cursor)
        return {
            "data": [entry.to_api() for entry in entries],
            "next_cursor": entries[-1].id if more and entries else None,
        }


def _expected_version(if_match: str | None, version: int | None) -> int | None:
    if if_match is not None:
        text = if_match.strip().removeprefix("W/").strip('"')
        if not text.isdecimal():
            raise InvalidRequest(
                'If-Match must be the policy\'s version, e.g. "3".', details={"field": "If-Match"}
            )
        return int(text)
    return version
