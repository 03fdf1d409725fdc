"""Billing controls use cases: read (defaults until the first save), update with an audit
entry, and the audit trail. Authorization happens at the edge (billing:read for reads,
billing:manage from a user session for updates); this module records who acted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal
from batchroute.domain.accounts.audit import AuditEntry
from batchroute.domain.billing.controls import (
    ACTION_UPDATE,
    BillingControls,
    ConcurrentUpdate,
    ControlsSettingsView,
    UpdateControls,
    apply_update,
)
from batchroute.errors import InvalidRequest
from batchroute.ids import has_prefix, new_id
from batchroute.services.billing.ports import ControlsReader

# Concurrent saves are rare (a human edits settings); a few re-reads settle them.
_SAVE_ATTEMPTS = 3
Saved = TypeVar("Saved")


def saved_with_retries(save_once: Callable[[], Saved]) -> Saved:
    """Run a read-change-save (a version-checked write) again while someone else's save gets
    in between (`ConcurrentUpdate`), a few times; the last refusal raises."""
    for attempt in range(_SAVE_ATTEMPTS):
        try:
            return save_once()
        except ConcurrentUpdate:
            if attempt == _SAVE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass(frozen=True)
class AuditPage:
    entries: list[AuditEntry[ControlsSettingsView]]
    next_cursor: str | None


class ControlsRecords(ControlsReader, Protocol):
    def save_billing_controls(
        self, controls: BillingControls, *, expected_version: int, audit: AuditEntry[ControlsSettingsView]
    ) -> None: ...

    def audit_entries(
        self, org_id: str, *, limit: int, after: str | None = None
    ) -> list[AuditEntry[ControlsSettingsView]]: ...


@dataclass(eq=False)
class BillingControlsService:
    records: ControlsRecords
    clock: Clock

    def get(self, org_id: str) -> BillingControls:
        return self.records.billing_controls(org_id) or BillingControls(org_id=org_id)

    def update(
        self, principal: Principal, command: UpdateControls, *, ip_address: str | None
    ) -> BillingControls:
        """Apply a partial update (validated at the edge, in domain values);
        every save writes one audit entry with what changed."""
        return saved_with_retries(lambda: self._save_once(principal, command, ip_address))

    def _save_once(
        self, principal: Principal, command: UpdateControls, ip_address: str | None
    ) -> BillingControls:
        current = self.get(principal.org_id)
        now = self.clock.now()
        change = apply_update(current, command, at=isoformat(now))
        if not change.needs_save:
            return current
        saved = replace(change.controls, version=current.version + 1)
        audit = AuditEntry(
            id=new_id("aud", at=now),
            org_id=principal.org_id,
            actor_user_id=principal.user_id,
            actor_role=principal.role,
            action=ACTION_UPDATE,
            before=change.before.copy(),
            after=change.after.copy(),
            ip_address=ip_address,
            created_at=isoformat(now),
        )
        self.records.save_billing_controls(saved, expected_version=current.version, audit=audit)
        return saved

    def audit(self, org_id: str, *, limit: int = 50, cursor: str | None = None) -> AuditPage:
        """A page of the audit trail, newest first; `next_cursor` (the last entry's id) reads
        the older ones, None when there are none."""
        if cursor is not None and not has_prefix(cursor, "aud"):
            raise InvalidRequest("cursor is not a cursor of this listing.", code="invalid_cursor")
        entries = self.records.audit_entries(org_id, limit=limit + 1, after=cursor)
        page = entries[:limit]
        return AuditPage(page, page[-1].id if len(entries) > limit and page else None)
