"""Pure rules about lanes: whether one is available now, and whether it fits a workflow product.

Availability combines the deployment's routing guards (provider allowlist, launch guard)
with the lane's live state: a lane with no live record, or whose last heartbeat is older
than the TTL, is `stale_heartbeat` (nothing vouches for it); one with no capacity left
today is `capacity_full`. The codes and their order are the routing gates' own
(domain/routing/gates.py), so the catalog and the receipts agree.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from batchroute.domain.catalog.catalog import Lane, LaneLive, Provider, WorkflowProduct
from batchroute.domain.routing.gates import RoutingGuards

LaneStatus = Literal[
    "available",
    "provider_disabled",
    "not_launched",
    "not_in_allowlist",
    "stale_heartbeat",
    "capacity_full",
]

STATUS_MESSAGES: dict[LaneStatus, str] = {
    "available": "The lane can take work now.",
    "provider_disabled": "The provider is disabled in the catalog.",
    "not_in_allowlist": "The provider is not on this deployment's provider allowlist.",
    "not_launched": "The provider is not launched yet; the launch guard keeps it out of routing.",
    "stale_heartbeat": "The lane has not reported a heartbeat within the heartbeat TTL.",
    "capacity_full": "The lane has no capacity left today.",
}

# Routing modes that constrain which kind of provider may serve (the rest do not).
EDGE_ONLY = "edge_only"
PUBLIC_ONLY = "public_only"
PRIVACY_CONSTRAINED = "privacy_constrained"


def parse_instant(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def heartbeat_is_fresh(live: LaneLive | None, now: datetime, ttl_seconds: int) -> bool:
    """A heartbeat counts for `ttl_seconds`; no live record at all is never fresh."""
    if live is None or not live.last_heartbeat_at:
        return False
    return now - parse_instant(live.last_heartbeat_at) <= timedelta(seconds=ttl_seconds)


def provider_status(provider: Provider, guards: RoutingGuards) -> LaneStatus:
    """Whether the deployment lets the provider route at all (before any live state)."""
    if not provider.enabled:
        return "provider_disabled"
    if guards.launch_provider_guard and not provider.launched:
        return "not_launched"
    if guards.provider_allowlist and provider.slug not in guards.provider_allowlist:
        return "not_in_allowlist"
    return "available"


def lane_status(
    provider: Provider, live: LaneLive | None, now: datetime, guards: RoutingGuards
) -> LaneStatus:
    admitted = provider_status(provider, guards)
    if admitted != "available":
        return admitted
    if not heartbeat_is_fresh(live, now, guards.heartbeat_ttl_seconds):
        return "stale_heartbeat"
    assert live is not None
    if live.remaining_capacity_items <= 0:
        return "capacity_full"
    return "available"


def fits_routing_mode(provider: Provider, routing_mode: str) -> bool:
    if routing_mode == EDGE_ONLY:
        return provider.kind == "edge"
    if routing_mode == PUBLIC_ONLY:
        return provider.kind != "edge"
    if routing_mode == PRIVACY_CONSTRAINED:
        return "confidential" in provider.privacy_tiers and provider.data_retention_days == 0
    return True  # cheapest, sla_aware, hybrid: any kind of provider


def lane_serves_product(lane: Lane, provider: Provider, product: WorkflowProduct) -> bool:
    """Whether the lane meets the product's contract: operation, route policy capabilities,
    context window, privacy tier and routing mode (not live state)."""
    policy = product.route_policy
    required = _strings(policy.get("required_capabilities", ()))
    min_context = policy.get("min_context_window", 0)
    privacy_tier = policy.get("privacy_tier", "standard")
    return (
        product.operation in lane.operations
        and required <= set(lane.runtime_capabilities)
        and isinstance(min_context, int)
        and lane.context_window >= min_context
        and privacy_tier in provider.privacy_tiers
        and fits_routing_mode(provider, str(policy.get("routing_mode", "cheapest")))
    )


def _strings(values: object) -> set[str]:
    if isinstance(values, Collection) and not isinstance(values, str):
        return {str(v) for v in values}
    return set()


@dataclass(frozen=True, slots=True)
class LaneAttempt:
    """One lane a direct chat request tried before its first byte: its error code, or None
    for the lane that answered."""

    lane_id: str
    provider: str
    error: str | None

    def to_item(self) -> dict[str, str | None]:
        return {"lane_id": self.lane_id, "provider": self.provider, "error": self.error}
