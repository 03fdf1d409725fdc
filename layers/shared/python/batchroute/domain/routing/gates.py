"""What a routing request asks for, and the gates a lane must pass to serve a model group.

Each gate that fails gives a rejection code; a lane's receipt names the first failure in
GATE_ORDER (the most fundamental) and lists every failure in `reasons`. The router and the
property tests call the same `lane_gate_failures`, so a selected lane is re-checkable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any, Final, Literal, Protocol, TypedDict, get_args

from batchroute.domain.catalog.catalog import Lane, LaneLive, PrivacyTier, Provider, SlaTier
from batchroute.domain.catalog.pricing import batch_cost, tool_cost
from batchroute.domain.routing.items import HOSTED_TOOLS, ModelGroup
from batchroute.errors import InvalidRequest
from batchroute.money import is_amount_text

RoutingMode = Literal["cheapest", "sla_aware", "public_only", "edge_only", "hybrid", "privacy_constrained"]
ROUTING_MODES: Final[tuple[RoutingMode, ...]] = get_args(RoutingMode)
PRIVACY_TIERS: Final[tuple[PrivacyTier, ...]] = get_args(PrivacyTier)
SLA_TIERS: Final[tuple[str, ...]] = get_args(SlaTier)

GATE_ORDER: Final[tuple[str, ...]] = (
    "provider_disabled",
    "not_launched",
    "not_in_allowlist",
    "policy",  # the org's route policy (domain/routing/policy.py): details.rule names the rule
    "routing_mode_excluded",
    "operation_not_supported",
    "privacy_tier_mismatch",
    "region_unavailable",
    "tool_support",
    "capability_missing",
    "context_window_exceeded",
    "stale_heartbeat",
    "capacity_full",
    "price_cap_exceeded",
    "regression_failed",  # a schedule's golden set scored the lane below its threshold
)
# Given to eligible lanes that passed every gate but lost the ranking.
OUTRANKED: Final = "outranked"
REJECTION_CODES: Final[tuple[str, ...]] = (*GATE_ORDER, OUTRANKED)

DEFAULT_HEARTBEAT_TTL_SECONDS: Final = 300  # = Settings.lane_heartbeat_ttl_seconds
_MODE_KINDS: Final[dict[str, frozenset[str]]] = {
    "public_only": frozenset({"vendor_batch", "public_host"}),
    "edge_only": frozenset({"edge"}),
}
# A runtime capability an item needs that other lane capabilities also satisfy; every other
# need is met by the lane capability (or operation) of its own name.
_CAPABILITY_MATCHES: Final[dict[str, frozenset[str]]] = {
    "json_schema": frozenset({"json_schema", "structured_outputs"}),
}


@dataclass(frozen=True)
class MaxPrice:
    """The most the customer will pay a lane, in USD at batch prices; any bound may be left out.

    `input_per_mtok` / `output_per_mtok` cap the lane's batch unit prices per million tokens;
    `per_item_usd` caps the lane's estimated provider cost per item (the model group's
    estimated cost on that lane divided by its item count, before the service fee).
    """

    input_per_mtok: Decimal | None = None
    output_per_mtok: Decimal | None = None
    per_item_usd: Decimal | None = None

    def to_api(self) -> dict[str, str]:
        bounds = {
            "input_per_mtok": self.input_per_mtok,
            "output_per_mtok": self.output_per_mtok,
            "per_item_usd": self.per_item_usd,
        }
        return {name: format(value, "f") for name, value in bounds.items() if value is not None}


class RoutingFields(TypedDict, total=False):
    """The routing fields a quote or batch body gave (each only when given, `region` as a
    one-region `regions`), as a body carries them, and a batch-wide preset: what a preset
    fills, what the Intake step reads an input file with, and what a batch keeps of its
    request (`BatchRecord.routing_fields`, a quote's snapshot) so that a retry asks the same
    (services/batches/commands.py:Routing.fields writes them)."""

    routing_mode: str
    privacy_tier: str
    sla_tier: str
    required_tools: list[str]
    regions: list[str]
    max_price: dict[str, str] | None
    preset: object


def stored_routing_fields(value: object) -> RoutingFields | None:
    """Routing fields as a store kept them (a JSON text, a DynamoDB item), read back; None
    for a value that is not an object (a record or snapshot written before they were kept)."""
    if not isinstance(value, Mapping):
        return None
    fields = RoutingFields()
    mode, privacy, sla = value.get("routing_mode"), value.get("privacy_tier"), value.get("sla_tier")
    if isinstance(mode, str):
        fields["routing_mode"] = mode
    if isinstance(privacy, str):
        fields["privacy_tier"] = privacy
    if isinstance(sla, str):
        fields["sla_tier"] = sla
    tools, regions = value.get("required_tools"), value.get("regions")
    if isinstance(tools, list):
        fields["required_tools"] = [str(tool) for tool in tools]
    if isinstance(regions, list):
        fields["regions"] = [str(region) for region in regions]
    if "max_price" in value:
        price = value["max_price"]
        fields["max_price"] = (
            {str(k): str(v) for k, v in price.items()} if isinstance(price, Mapping) else None
        )
    if value.get("preset") is not None:
        fields["preset"] = value["preset"]
    return fields


@dataclass(frozen=True)
class RouteRequest:
    """The customer's routing constraints for one batch (or quote)."""

    routing_mode: RoutingMode = "cheapest"
    privacy_tier: PrivacyTier = "standard"
    sla_tier: SlaTier = "standard"  # flex and priority are treated as standard: one 24 h SLA
    required_tools: frozenset[str] = frozenset()  # merged with each item's own
    regions: tuple[str, ...] = ()  # empty = anywhere; else a provider region must be one of them
    max_price: MaxPrice | None = None
    # Lanes the service rules out: those a schedule's golden-set regression run failed
    # (docs/schedules.md), those outside a workflow product's contract (docs/catalog.md).
    # Set by the service, never read from a body.
    excluded_lanes: Exclusions = field(default_factory=dict)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> RouteRequest:
        """Read the routing fields of a quote or batch body; InvalidRequest names the field."""
        mode = _choice(body, "routing_mode", ROUTING_MODES, "cheapest")
        privacy = _choice(body, "privacy_tier", PRIVACY_TIERS, "standard")
        sla = _choice(body, "sla_tier", SLA_TIERS, "standard")
        tools = body.get("required_tools")
        tools = [] if tools is None else tools  # only null is absent: false or {} is refused
        if not isinstance(tools, list) or not all(isinstance(t, str) and t in HOSTED_TOOLS for t in tools):
            raise _invalid("required_tools", f"required_tools must list tools from {sorted(HOSTED_TOOLS)}.")
        regions, region = body.get("regions"), body.get("region")
        # Both hold (a residency constraint is never read as absent): the lane serves from
        # `region`, which `regions` must allow (an empty list: anywhere); a `regions` of another
        # type is refused below, as alone.
        if region is not None and isinstance(regions, list) and regions and region not in regions:
            raise _invalid("region", f"region {region!r} is not one of regions {regions!r}.")
        if region is not None and (regions is None or isinstance(regions, list)):
            regions = [region]
        regions = [] if regions is None else regions
        if not isinstance(regions, list) or not all(isinstance(r, str) and r for r in regions):
            raise _invalid("region", "region must be a region name (regions a list of them).")
        return cls(
            routing_mode=mode,  # type: ignore[arg-type]
            privacy_tier=privacy,  # type: ignore[arg-type]
            sla_tier=sla,  # type: ignore[arg-type]
            required_tools=frozenset(tools),
            regions=tuple(dict.fromkeys(regions)),
            max_price=_max_price(body.get("max_price")),
        )


class LanePolicy(Protocol):
    """The org's route policy as a gate (domain/routing/policy.py:RoutePolicy)."""

    def lane_failures(
        self, lane: Lane, provider: Provider, operations: Iterable[str], basis: Literal["batch", "direct"]
    ) -> list[GateFailure]: ...


@dataclass(frozen=True)
class RoutingGuards:
    """Service settings, not customer choices: the provider allowlist, the launch guard and
    how old a lane's heartbeat may be before the lane counts as down. `policy` is the org's
    route policy when one applies (the `policy` gate), judged on `price_basis` prices."""

    provider_allowlist: tuple[str, ...] = ()  # empty = every provider
    launch_provider_guard: bool = True
    heartbeat_ttl_seconds: int = DEFAULT_HEARTBEAT_TTL_SECONDS
    policy: LanePolicy | None = field(default=None, compare=False)
    price_basis: Literal["batch", "direct"] = "batch"
    # Cache-aware routing (docs/routing.md): lanes are ranked on their expected cost with the
    # batch's shared prompt prefixes read from the vendor's cache. A service setting
    # (CACHE_AWARE_ROUTING), off only to compare (bench/cache_example.py).
    cache_aware: bool = True

    def admits(self, provider: Provider | None) -> bool:
        return provider is not None and not _guard_failures(provider, self)


# A failed gate's details, shown on the lane's rejection: a gate's figures, names and caps
# (a schedule's regression exclusion adds its score, a number as stored).
GateDetail = (
    str | int | float | Decimal | bool | None | list[str] | dict[str, str] | dict[str, dict[str, str]]
)


@dataclass(frozen=True)
class GateFailure:
    code: str
    message: str
    details: dict[str, GateDetail] = field(default_factory=dict)


# Lanes the service rules out for a request: lane id -> the failures its receipt shows.
Exclusions = Mapping[str, tuple[GateFailure, ...]]


@dataclass(frozen=True)
class LaneDemand:
    """The model group as one lane sees it: its output capped by the lane, its cost there."""

    prompt_tokens: int
    output_tokens: int
    context_tokens: int
    cost: Decimal  # exact USD at the lane's batch prices, for the whole group, tool calls included
    tool_cost: Decimal = Decimal(0)  # of which the hosted tool calls the quote counts

    @classmethod
    def of(cls, group: ModelGroup, lane: Lane) -> LaneDemand:
        output = group.output_tokens_on(lane.max_output_tokens)
        tools = tool_cost(group.tool_calls_on(lane, group.item_count), lane.tool_prices_per_1k)
        return cls(
            prompt_tokens=group.prompt_tokens,
            output_tokens=output,
            context_tokens=group.context_tokens_on(lane.max_output_tokens),
            cost=batch_cost(group.prompt_tokens, output, lane.price) + tools,
            tool_cost=tools,
        )


def heartbeat_age_seconds(live: LaneLive | None, now: datetime) -> int | None:
    """Whole seconds since the lane's last heartbeat; None when it never reported or the
    timestamp is unreadable (both count as stale)."""
    if live is None:
        return None
    try:
        beat = datetime.fromisoformat(live.last_heartbeat_at)
    except (TypeError, ValueError):
        return None
    if beat.tzinfo is None:
        beat = beat.replace(tzinfo=UTC)
    return max(0, int((now - beat).total_seconds()))


def lane_gate_failures(
    lane: Lane,
    provider: Provider | None,
    group: ModelGroup,
    *,
    request: RouteRequest,
    guards: RoutingGuards,
    live: LaneLive | None,
    now: datetime,
    item_count: int | None = None,
    demand: LaneDemand | None = None,
) -> list[GateFailure]:
    """Every gate the lane fails for this group, in GATE_ORDER. `item_count` is the number
    of items the lane would take (the capacity gate); None skips the capacity gate."""
    if provider is None:
        return [GateFailure("provider_disabled", "The lane's provider is not in the catalog.")]
    demand = demand or LaneDemand.of(group, lane)
    failures = _guard_failures(provider, guards)
    if guards.policy is not None:
        failures.extend(guards.policy.lane_failures(lane, provider, group.operations, guards.price_basis))
    failures.extend(_present(_mode_gate(provider, request), _operations_gate(lane, group)))
    failures.extend(_privacy_failures(provider, request))
    failures.extend(
        _present(
            _region_gate(provider, request),
            _tools_gate(lane, group, request),
            _capabilities_gate(lane, group),
            _context_gate(lane, group, demand),
            _heartbeat_gate(live, now, guards),
            _capacity_gate(live, item_count),
        )
    )
    failures.extend(_price_failures(lane, group, demand, request.max_price))
    failures.extend(request.excluded_lanes.get(lane.lane_id, ()))
    return failures


def _present(*gates: GateFailure | None) -> list[GateFailure]:
    return [failure for failure in gates if failure is not None]


def _mode_gate(provider: Provider, request: RouteRequest) -> GateFailure | None:
    allowed_kinds = _MODE_KINDS.get(request.routing_mode)
    if allowed_kinds is None or provider.kind in allowed_kinds:
        return None
    return GateFailure(
        "routing_mode_excluded",
        f"routing_mode {request.routing_mode} admits only {_names(allowed_kinds)} lanes; "
        f"this lane is {provider.kind}.",
        {"routing_mode": request.routing_mode, "provider_kind": provider.kind},
    )


def _operations_gate(lane: Lane, group: ModelGroup) -> GateFailure | None:
    missing_ops = group.operations.difference(lane.operations)
    if not missing_ops:
        return None
    return GateFailure(
        "operation_not_supported",
        f"The lane does not run {_names(missing_ops)}.",
        {"required": sorted(group.operations), "offered": list(lane.operations)},
    )


def _region_gate(provider: Provider, request: RouteRequest) -> GateFailure | None:
    if not request.regions or set(request.regions).intersection(provider.regions):
        return None
    return GateFailure(
        "region_unavailable",
        f"The provider runs in {_names(provider.regions)}, not in {_names(request.regions)}.",
        {"requested": list(request.regions), "offered": list(provider.regions)},
    )


def _tools_gate(lane: Lane, group: ModelGroup, request: RouteRequest) -> GateFailure | None:
    required_tools = request.required_tools.union(group.tools)
    missing_tools = required_tools.difference(lane.hosted_tools)
    if not missing_tools:
        return None
    return GateFailure(
        "tool_support",
        f"The lane does not offer {_names(missing_tools)}.",
        {
            "required": sorted(required_tools),
            "offered": sorted(lane.hosted_tools),
            "missing": sorted(missing_tools),
        },
    )


def _capabilities_gate(lane: Lane, group: ModelGroup) -> GateFailure | None:
    offered_capabilities = set(lane.runtime_capabilities).union(lane.operations)
    missing_capabilities = {
        need
        for need in group.capabilities
        if need not in offered_capabilities
        and not _CAPABILITY_MATCHES.get(need, frozenset()) & offered_capabilities
    }
    if not missing_capabilities:
        return None
    return GateFailure(
        "capability_missing",
        f"The lane lacks {_names(missing_capabilities)}.",
        {
            "required": sorted(group.capabilities),
            "offered": sorted(lane.runtime_capabilities),
            "missing": sorted(missing_capabilities),
        },
    )


# A lane's image limits: (the details' keys, and what the refusal says).
_IMAGE_COUNT: Final = (
    "needed_images",
    "image_limit",
    "The largest item holds {needed:,} images; the lane takes at most {limit:,} a request.",
)
_IMAGE_BYTES: Final = (
    "needed_image_bytes",
    "image_bytes_limit",
    "The largest image is {needed:,} bytes; the lane takes at most {limit:,} bytes an image.",
)


def _context_gate(lane: Lane, group: ModelGroup, demand: LaneDemand) -> GateFailure | None:
    """The largest item must fit the lane's window (for embeddings, its largest input) and,
    on a lane with a per-request limit, an embeddings item's inputs summed must fit it, and
    an item's images the lane's image limits (how many, how large)."""
    if demand.context_tokens > lane.context_window:
        return GateFailure(
            "context_window_exceeded",
            f"The largest item needs about {demand.context_tokens} tokens (prompt + output); "
            f"the lane's context window is {lane.context_window}.",
            {"needed_tokens": demand.context_tokens, "context_window": lane.context_window},
        )
    for needed, limit, (needed_key, limit_key, says) in (
        (group.max_images, lane.max_images, _IMAGE_COUNT),
        (group.max_image_bytes, lane.max_image_bytes, _IMAGE_BYTES),
    ):
        if limit is not None and needed > limit:
            message = says.format(needed=needed, limit=limit)
            return GateFailure("context_window_exceeded", message, {needed_key: needed, limit_key: limit})
    limit, needed = lane.max_embedding_request_tokens, group.max_embedding_prompt_tokens
    if limit is None or needed <= limit:
        return None
    return GateFailure(
        "context_window_exceeded",
        f"The largest embeddings item needs about {needed:,} tokens summed across its inputs; "
        f"the lane takes at most {limit:,} a request.",
        {"needed_tokens": needed, "request_token_limit": limit},
    )


def _heartbeat_gate(live: LaneLive | None, now: datetime, guards: RoutingGuards) -> GateFailure | None:
    age = heartbeat_age_seconds(live, now)
    if age is not None and age <= guards.heartbeat_ttl_seconds:
        return None
    details: dict[str, GateDetail] = {
        "last_heartbeat_at": live.last_heartbeat_at if live else None,
        "heartbeat_age_seconds": age,
        "ttl_seconds": guards.heartbeat_ttl_seconds,
    }
    if live is not None and live.unavailable_reason:
        message = f"The lane was marked unavailable: {live.unavailable_reason}"
        details["unavailable_reason"] = live.unavailable_reason
    elif age is None:
        message = "The lane has not reported a heartbeat."
    else:
        message = f"The lane's last heartbeat is {age} s old (limit {guards.heartbeat_ttl_seconds} s)."
    return GateFailure("stale_heartbeat", message, details)


def _capacity_gate(live: LaneLive | None, item_count: int | None) -> GateFailure | None:
    if item_count is None or live is None or live.remaining_capacity_items >= item_count:
        return None
    return GateFailure(
        "capacity_full",
        f"The lane has room for {live.remaining_capacity_items} more items today; "
        f"this group needs {item_count}.",
        {"remaining_capacity_items": live.remaining_capacity_items, "needed_items": item_count},
    )


def _guard_failures(provider: Provider, guards: RoutingGuards) -> list[GateFailure]:
    failures = []
    if not provider.enabled:
        failures.append(GateFailure("provider_disabled", f"{provider.display_name} is disabled."))
    if guards.launch_provider_guard and not provider.launched:
        failures.append(GateFailure("not_launched", f"{provider.display_name} is not launched yet."))
    if guards.provider_allowlist and provider.slug not in guards.provider_allowlist:
        failures.append(
            GateFailure(
                "not_in_allowlist",
                f"{provider.slug} is not in the service's provider allowlist.",
                {"provider_allowlist": list(guards.provider_allowlist)},
            )
        )
    return failures


def _privacy_failures(provider: Provider, request: RouteRequest) -> list[GateFailure]:
    zero_retention = request.routing_mode == "privacy_constrained"
    details: dict[str, GateDetail] = {
        "requested": request.privacy_tier,
        "offered": list(provider.privacy_tiers),
        "data_retention_days": provider.data_retention_days,
        "zero_data_retention_required": zero_retention,
    }
    if request.privacy_tier not in provider.privacy_tiers:
        message = f"The provider does not declare the {request.privacy_tier} privacy tier."
        return [GateFailure("privacy_tier_mismatch", message, details)]
    if zero_retention and provider.data_retention_days > 0:
        message = (
            "privacy_constrained routing requires zero data retention; the provider keeps data "
            f"up to {provider.data_retention_days} days."
        )
        return [GateFailure("privacy_tier_mismatch", message, details)]
    return []


def _price_failures(
    lane: Lane, group: ModelGroup, demand: LaneDemand, cap: MaxPrice | None
) -> list[GateFailure]:
    if cap is None:
        return []
    over: dict[str, dict[str, str]] = {}
    price = lane.price
    if cap.input_per_mtok is not None and price.batch_input_per_mtok > cap.input_per_mtok:
        over["input_per_mtok"] = _over(price.batch_input_per_mtok, cap.input_per_mtok)
    if cap.output_per_mtok is not None and price.batch_output_per_mtok > cap.output_per_mtok:
        over["output_per_mtok"] = _over(price.batch_output_per_mtok, cap.output_per_mtok)
    if cap.per_item_usd is not None and group.item_count:
        per_item = demand.cost / group.item_count
        if per_item > cap.per_item_usd:
            # rounded up: a cost just over the cap never shows as equal to it ("0.000411 > 0.000411")
            over["per_item_usd"] = _over(
                per_item.quantize(Decimal("0.000001"), rounding=ROUND_CEILING), cap.per_item_usd
            )
    if not over:
        return []
    named = ", ".join(f"{name} {values['lane']} > {values['max']}" for name, values in over.items())
    return [GateFailure("price_cap_exceeded", f"Above max_price: {named}.", {"exceeded": over})]


def _over(lane_value: Decimal, cap: Decimal) -> dict[str, str]:
    return {"lane": format(lane_value, "f"), "max": format(cap, "f")}


def _names(values: Iterable[str]) -> str:
    """Sets in sorted order (stable messages), sequences as given."""
    return ", ".join(sorted(values) if isinstance(values, set | frozenset) else values)


def _choice(body: Mapping[str, Any], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = body.get(name)
    if value is None:
        return default
    if value not in allowed:
        raise _invalid(name, f"{name} must be one of {', '.join(allowed)}.")
    return str(value)


def _max_price(value: object) -> MaxPrice | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _invalid("max_price", "max_price must be an object.")
    bounds: dict[str, Decimal | None] = {}
    for key in ("input_per_mtok", "output_per_mtok", "per_item_usd"):
        raw = value.get(key)
        if raw is None:
            bounds[key] = None
            continue
        try:
            if isinstance(raw, bool) or (isinstance(raw, str) and not is_amount_text(raw)):
                raise InvalidOperation
            amount = Decimal(str(raw))
        except InvalidOperation:
            amount = Decimal(-1)
        if not amount.is_finite() or amount < 0:
            raise _invalid(f"max_price.{key}", f"max_price.{key} must be a USD amount of at least 0.")
        bounds[key] = amount
    unknown = set(value).difference(bounds)
    if unknown:
        raise _invalid("max_price", f"max_price does not take {_names(set(map(str, unknown)))}.")
    return MaxPrice(**bounds)


def _invalid(field_name: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, details={"field": field_name})
