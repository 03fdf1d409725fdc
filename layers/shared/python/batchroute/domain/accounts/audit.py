"""The audit entry of a change to an org's settings: its billing controls
(domain/billing/controls.py) and its route policy (domain/routing/policy.py, `PolicyChange`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypedDict, TypeVar

from batchroute.domain.views import view_of

# The changed fields' API shape: billing's ControlsSettingsView, the policy's PolicyFieldsView.
Changes = TypeVar("Changes")


class AuditEntryView(TypedDict, Generic[Changes]):
    id: str
    org_id: str
    actor_user_id: str | None
    actor_role: str | None
    action: str
    before: Changes
    after: Changes
    ip_address: str | None
    created_at: str


@dataclass(frozen=True)
class AuditEntry(Generic[Changes]):
    id: str
    org_id: str
    actor_user_id: str | None
    actor_role: str | None
    action: str
    # The changed fields as the API showed them, a JSON snapshot kept verbatim (the route
    # policy's history, domain/routing/policy.py PolicyChange, keeps its own the same way).
    before: Changes
    after: Changes
    ip_address: str | None
    created_at: str

    def to_api(self) -> AuditEntryView[Changes]:
        return view_of(self, AuditEntryView[Changes])
