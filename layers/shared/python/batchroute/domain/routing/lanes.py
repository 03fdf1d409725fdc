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
from typing import Final, Literal

from batchroute.domain.catalog.catalog import Catalog, Lane, LaneLive, Provider, WorkflowProduct
from batchroute.domain.routing.gates import Exclusions, GateDetail, GateFailure, RoutingGuards

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
    return not contract_failures(lane, provider, product)


def contract_exclusions(catalog: Catalog, product: WorkflowProduct) -> Exclusions:
    """The catalog's lanes outside a workflow product's contract, each with every rule it
    breaks: what a workflow quote (and a retry of its batch) routes around."""
    excluded: dict[str, tuple[GateFailure, ...]] = {}
    for lane in catalog.lanes:
        provider = catalog.provider(lane.provider)
        failures = contract_failures(lane, provider, product) if provider is not None else []
        if failures:
            excluded[lane.lane_id] = tuple(failures)
    return excluded


def contract_failures(lane: Lane, provider: Provider, product: WorkflowProduct) -> list[GateFailure]:
    """What keeps the lane from a workflow product's contract (its `route_policy`), each as the
    routing gate of the same rule would say it (docs/routing.md, "Gates and rejection codes"),
    its message naming the contract: a workflow quote excludes the lane with them."""
    found = (rule(lane, provider, product) for rule in _CONTRACT_RULES)
    return [failure for failure in found if failure is not None]


def _operation_rule(lane: Lane, _provider: Provider, product: WorkflowProduct) -> GateFailure | None:
    if product.operation in lane.operations:
        return None
    return GateFailure(
        "operation_not_supported",
        f"{_contract(product)} runs {product.operation}; this lane does not.",
        {"required": [product.operation], "offered": list(lane.operations)},
    )


def _capability_rule(lane: Lane, _provider: Provider, product: WorkflowProduct) -> GateFailure | None:
    required = _strings(product.route_policy.get("required_capabilities", ()))
    missing = sorted(required - set(lane.runtime_capabilities))
    if not missing:
        return None
    return GateFailure(
        "capability_missing",
        f"{_contract(product)} needs {', '.join(missing)}; this lane lacks it.",
        {"required": sorted(required), "offered": list(lane.runtime_capabilities), "missing": missing},
    )


def _context_rule(lane: Lane, _provider: Provider, product: WorkflowProduct) -> GateFailure | None:
    needed = product.route_policy.get("min_context_window", 0)
    window = needed if isinstance(needed, int) else 0
    if lane.context_window >= window:
        return None
    return GateFailure(
        "context_window_exceeded",
        f"{_contract(product)} needs a context window of {window:,} tokens; this lane's is "
        f"{lane.context_window:,}.",
        {"needed_tokens": window, "context_window": lane.context_window},
    )


def _privacy_rule(_lane: Lane, provider: Provider, product: WorkflowProduct) -> GateFailure | None:
    tier = str(product.route_policy.get("privacy_tier", "standard"))
    zero_retention = product.route_policy.get("routing_mode") == PRIVACY_CONSTRAINED
    if zero_retention and tier == "standard":  # privacy_constrained: confidential at the least
        tier = "confidential"
    details: dict[str, GateDetail] = {
        "requested": tier,
        "offered": list(provider.privacy_tiers),
        "data_retention_days": provider.data_retention_days,
        "zero_data_retention_required": zero_retention,
    }
    if tier not in provider.privacy_tiers:
        message = f"{_contract(product)} needs the {tier} privacy tier; the provider does not declare it."
    elif zero_retention and provider.data_retention_days > 0:
        message = (
            f"{_contract(product)} needs zero data retention; the provider keeps data up to "
            f"{provider.data_retention_days} days."
        )
    else:
        return None
    return GateFailure("privacy_tier_mismatch", message, details)


def _mode_rule(_lane: Lane, provider: Provider, product: WorkflowProduct) -> GateFailure | None:
    mode = str(product.route_policy.get("routing_mode", "cheapest"))
    if mode not in (EDGE_ONLY, PUBLIC_ONLY) or fits_routing_mode(provider, mode):
        return None
    return GateFailure(
        "routing_mode_excluded",
        f"{_contract(product)} routes {mode}; this lane is {provider.kind}.",
        {"routing_mode": mode, "provider_kind": provider.kind},
    )


def _contract(product: WorkflowProduct) -> str:
    return f"The {product.slug} workflow contract"


# The contract's rules, in the routing gates' order (domain/routing/gates.py).
_CONTRACT_RULES: Final = (_mode_rule, _operation_rule, _privacy_rule, _capability_rule, _context_rule)


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
