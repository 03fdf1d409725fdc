"""The org's route policy as the other contexts read it, declared once."""

from __future__ import annotations

from typing import Protocol

from batchroute.domain.routing.policy import RoutePolicy


class OrgPolicies(Protocol):
    """services/routing/policy.py:PolicyReader: `current` is one GetItem; `cached` costs no
    AWS call while warm; `refresh_if_stale` reloads an old cached entry."""

    def cached(self, org_id: str) -> RoutePolicy | None: ...

    def current(self, org_id: str) -> RoutePolicy | None: ...

    def refresh_if_stale(self, org_id: str) -> None: ...
