"""The public catalog: models with their lanes, prices, capacity and routing eligibility;
providers; the fee schedule; workflow products with the capacity able to serve them.

Static data comes from the versioned catalog (batchroute/catalog/); live state (remaining
capacity, last heartbeat) from one read of the lane store per call. Availability rules are
in domain/routing/lanes.py. Answers are in the API's shape, typed below.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Literal, TypedDict

from batchroute.clock import Clock
from batchroute.domain.catalog.catalog import (
    Catalog,
    ExecutionMode,
    HostedTool,
    Lane,
    LaneLive,
    Model,
    Operation,
    PrivacyTier,
    Provider,
    ProviderKind,
    RuntimeCapability,
    SlaTier,
    WorkflowProduct,
)
from batchroute.domain.routing.gates import RoutingGuards
from batchroute.domain.routing.lanes import (
    STATUS_MESSAGES,
    LaneStatus,
    lane_serves_product,
    lane_status,
    provider_status,
)
from batchroute.domain.views import view_of
from batchroute.errors import InvalidRequest, NotFound
from batchroute.money import format_amount
from batchroute.services.catalog.ports import DeploymentSettings, LiveStates

PRICE_UNIT = "per_million_tokens"


class HostedToolPricingView(TypedDict):
    per_1k_calls: str  # USD per 1,000 billed calls; "0": not charged
    calls_per_item: int  # the calls a quote counts for each item asking for the tool


class PricingView(TypedDict):
    currency: str
    unit: str
    input: str
    output: str
    batch_input: str
    batch_output: str
    cached_input: str
    cache_write_input: str
    batch_cached_input: str
    batch_cache_write_input: str
    hosted_tools: dict[str, HostedToolPricingView]


class LaneCapacityView(TypedDict):
    daily_capacity_items: int
    remaining_capacity_items: int | None
    last_heartbeat_at: str | None


class LaneView(TypedDict):
    lane_id: str
    provider: str
    provider_name: str
    provider_kind: ProviderKind
    execution_mode: ExecutionMode
    provider_model_id: str
    pricing: PricingView
    context_window: int
    max_output_tokens: int
    operations: Sequence[str]
    runtime_capabilities: Sequence[str]
    hosted_tools: Sequence[str]
    regions: Sequence[str]
    privacy_tiers: Sequence[str]
    data_retention_days: int
    capacity: LaneCapacityView
    status: LaneStatus
    eligible: bool


class RetentionSpanView(TypedDict):
    min_data_retention_days: int
    max_data_retention_days: int
    zero_data_retention_providers: list[str]


class ModelCapacityView(TypedDict):
    daily_capacity_items: int
    remaining_capacity_items: int


class IneligibleLaneView(TypedDict):
    lane_id: str
    provider: str
    code: LaneStatus
    message: str


class EligibilityView(TypedDict):
    eligible: bool
    lanes_available: int
    reasons: list[IneligibleLaneView]


class ModelView(TypedDict):
    id: str
    object: Literal["model"]
    title: str
    summary: str
    description: str
    tags: list[str]
    family: str
    open_weight: bool
    operations: Sequence[str]
    runtime_capabilities: Sequence[str]
    hosted_tools: list[str]
    privacy_tiers: list[str]
    regions: list[str]
    context_window: int
    max_output_tokens: int
    retention: RetentionSpanView
    capacity: ModelCapacityView
    routing_eligibility: EligibilityView
    providers: list[LaneView]


class ModelList(TypedDict):
    data: list[ModelView]
    pricing_updated_at: str
    provider_count: int


class ModelEnvelope(TypedDict):
    model: ModelView
    pricing_updated_at: str


class OpenAIModelView(TypedDict):
    """A model as OpenAI's `GET /v1/models` shows one (its `Model` schema)."""

    id: str
    object: Literal["model"]
    created: int  # when its maker released it, Unix seconds (UTC midnight of that day)
    owned_by: str


class OpenAIModelList(TypedDict):
    object: Literal["list"]
    data: list[OpenAIModelView]


class ProviderView(TypedDict):
    slug: str
    display_name: str
    kind: ProviderKind
    execution_mode: ExecutionMode
    enabled: bool
    status: LaneStatus
    launched: bool
    supported_operations: list[str]
    models: list[str]
    regions: Sequence[str]
    privacy_tiers: Sequence[str]
    data_retention_days: int
    website: str | None


class ProviderList(TypedDict):
    providers: list[ProviderView]


class ProviderEnvelope(TypedDict):
    provider: ProviderView


class LaneFeeView(TypedDict):
    currency: str
    amount: str


class FeesView(TypedDict):
    currency: str
    standard_batch_fee_pct: str
    workflow_product_fee_pct: str
    margin_floor_pct: str
    control_plane_fee_per_lane: LaneFeeView
    basis: str
    effective_at: str
    pricing_updated_at: str
    catalog_version: str


class ProductView(TypedDict):
    slug: str
    object: Literal["workflow_product"]
    title: str
    summary: str
    operation: Operation
    sla_hours: int
    completion_window: str
    input_schema: object  # a JSON Schema, as the catalog holds it
    output_schema: object
    route_policy: object
    typical_input_tokens: int
    typical_output_tokens: int
    fee_pct: str
    models: list[str]
    lanes_able: int
    lanes_available: int


class ProductList(TypedDict):
    data: list[ProductView]
    provider_capacity: dict[str, int]


class ProductEnvelope(TypedDict):
    product: ProductView
    provider_capacity: dict[str, int]


@dataclass(frozen=True)
class ModelFilters:
    """The model list's query filters; all combine with AND. Lane-level filters (operation,
    provider, privacy tier, runtime capability, hosted tool) must hold on one same lane."""

    operation: Operation | None = None
    provider: str | None = None
    privacy_tier: PrivacyTier | None = None
    sla_tier: SlaTier | None = None
    runtime_capability: RuntimeCapability | None = None
    hosted_tool: HostedTool | None = None
    q: str | None = None

    def lane_matches(self, lane: Lane, provider: Provider) -> bool:
        return (
            (self.operation is None or self.operation in lane.operations)
            and (self.provider is None or lane.provider == self.provider)
            and (self.privacy_tier is None or self.privacy_tier in provider.privacy_tiers)
            and (self.runtime_capability is None or self.runtime_capability in lane.runtime_capabilities)
            and (self.hosted_tool is None or self.hosted_tool in lane.hosted_tools)
        )

    def text_matches(self, model: Model) -> bool:
        needle = (self.q or "").strip().casefold()
        if not needle:
            return True
        haystack = (model.title, model.summary, model.id, model.description, *model.tags)
        return any(needle in text.casefold() for text in haystack)


def guards_for(settings: DeploymentSettings) -> RoutingGuards:
    return RoutingGuards(
        provider_allowlist=tuple(settings.provider_allowlist),
        # The launch guard never applies in local mode, where every provider is simulated.
        launch_provider_guard=settings.launch_provider_guard and settings.environment != "local",
        heartbeat_ttl_seconds=settings.lane_heartbeat_ttl_seconds,
        cache_aware=settings.cache_aware_routing,
    )


class CatalogService:
    def __init__(
        self, catalog: Catalog, live: LiveStates, settings: DeploymentSettings, clock: Clock
    ) -> None:
        self.catalog = catalog
        self.live = live
        self.guards = guards_for(settings)
        self.clock = clock

    # -- models --------------------------------------------------------------------------
    def list_models(self, filters: ModelFilters) -> ModelList:
        if filters.provider is not None and self.catalog.provider(filters.provider) is None:
            raise InvalidRequest(
                f"Unknown provider {filters.provider!r}.",
                details={
                    "errors": [
                        {
                            "path": "query.provider",
                            "message": "not a provider slug",
                            "allowed": [p.slug for p in self.catalog.providers],
                        }
                    ]
                },
            )
        matching = [model for model in self.catalog.models if self._model_matches(model, filters)]
        live = self.live.live_states() if matching else {}
        now = self.clock.now()
        views = [self._model_view(model, live, now) for model in matching]
        providers = {entry["provider"] for view in views for entry in view["providers"]}
        return {
            "data": views,
            "pricing_updated_at": self.catalog.pricing_updated_at,
            "provider_count": len(providers),
        }

    def model(self, model_id: str) -> ModelEnvelope:
        model = self.catalog.model(model_id)
        if model is None:
            raise NotFound(f"No model {model_id!r} in the catalog.", code="model_not_found")
        return {
            "model": self._model_view(model, self.live.live_states(), self.clock.now()),
            "pricing_updated_at": self.catalog.pricing_updated_at,
        }

    # -- the models POST /v1/chat/completions takes, as OpenAI's model list shows them -----
    def chat_models(self) -> OpenAIModelList:
        """Every catalog model a chat completion may name (a lane of it answers requests), in
        the catalog's order: the list OpenAI's SDK reads (`client.models.list()`)."""
        chat = [model for model in self.catalog.models if self._chats(model)]
        return {"object": "list", "data": [_openai_model(model) for model in chat]}

    def chat_model(self, model_id: str) -> OpenAIModelView:
        model = self.catalog.model(model_id)
        if model is None or not self._chats(model):
            raise NotFound(f"No chat model {model_id!r}: GET /v1/models lists them.", code="model_not_found")
        return _openai_model(model)

    def _chats(self, model: Model) -> bool:
        return any("responses" in lane.operations for lane in self.catalog.lanes_for(model.id))

    def _model_matches(self, model: Model, filters: ModelFilters) -> bool:
        if not filters.text_matches(model):
            return False
        lanes = self.catalog.lanes_for(model.id)
        # Every tier is served as the 24-hour standard SLA, so sla_tier holds for any model
        # with a lane; the other lane-level filters must hold on one lane together.
        return any(filters.lane_matches(lane, self._provider(lane)) for lane in lanes)

    def _model_view(self, model: Model, live: dict[str, LaneLive], now: datetime) -> ModelView:
        lanes = [
            self._lane_view(lane, live.get(lane.lane_id), now) for lane in self.catalog.lanes_for(model.id)
        ]
        available = [lane for lane in lanes if lane["status"] == "available"]
        providers = [self._provider(lane) for lane in self.catalog.lanes_for(model.id)]
        retention = [p.data_retention_days for p in providers]
        return {
            "id": model.id,
            "object": "model",
            "title": model.title,
            "summary": model.summary,
            "description": model.description,
            "tags": list(model.tags),
            "family": model.family,
            "open_weight": model.open_weight,
            "operations": list(model.operations),
            "runtime_capabilities": list(model.runtime_capabilities),
            "hosted_tools": _union(lane["hosted_tools"] for lane in lanes),
            "privacy_tiers": _union(lane["privacy_tiers"] for lane in lanes),
            "regions": _union(lane["regions"] for lane in lanes),
            "context_window": max((lane["context_window"] for lane in lanes), default=0),
            "max_output_tokens": max((lane["max_output_tokens"] for lane in lanes), default=0),
            "retention": {
                "min_data_retention_days": min(retention, default=0),
                "max_data_retention_days": max(retention, default=0),
                "zero_data_retention_providers": sorted(
                    p.slug for p in providers if p.data_retention_days == 0
                ),
            },
            "capacity": {
                "daily_capacity_items": sum(lane["capacity"]["daily_capacity_items"] for lane in lanes),
                "remaining_capacity_items": sum(
                    lane["capacity"]["remaining_capacity_items"] or 0 for lane in available
                ),
            },
            "routing_eligibility": {
                "eligible": bool(available),
                "lanes_available": len(available),
                "reasons": [
                    {
                        "lane_id": lane["lane_id"],
                        "provider": lane["provider"],
                        "code": lane["status"],
                        "message": STATUS_MESSAGES[lane["status"]],
                    }
                    for lane in lanes
                    if lane["status"] != "available"
                ],
            },
            "providers": lanes,
        }

    def _lane_view(self, lane: Lane, live: LaneLive | None, now: datetime) -> LaneView:
        provider = self._provider(lane)
        status = lane_status(provider, live, now, self.guards)
        return {
            "lane_id": lane.lane_id,
            "provider": provider.slug,
            "provider_name": provider.display_name,
            "provider_kind": provider.kind,
            "execution_mode": provider.execution_mode,
            "provider_model_id": lane.provider_model_id or lane.model,
            "pricing": {
                "currency": "usd",
                "unit": PRICE_UNIT,
                "input": _decimal(lane.price.input_per_mtok),
                "output": _decimal(lane.price.output_per_mtok),
                "batch_input": _decimal(lane.price.batch_input_per_mtok),
                "batch_output": _decimal(lane.price.batch_output_per_mtok),
                # what input read from / written to the vendor's prompt cache is charged at
                # (the input price where the vendor publishes none)
                "cached_input": _decimal(lane.price.direct.cached_input_per_mtok),
                "cache_write_input": _decimal(lane.price.direct.cache_write_input_per_mtok),
                "batch_cached_input": _decimal(lane.price.batch.cached_input_per_mtok),
                "batch_cache_write_input": _decimal(lane.price.batch.cache_write_input_per_mtok),
                "hosted_tools": {
                    tool: {
                        "per_1k_calls": _decimal(price.per_1k_calls),
                        "calls_per_item": price.calls_per_item,
                    }
                    for tool, price in lane.hosted_tool_prices
                    if tool in lane.hosted_tools
                },
            },
            "context_window": lane.context_window,
            "max_output_tokens": lane.max_output_tokens,
            "operations": list(lane.operations),
            "runtime_capabilities": list(lane.runtime_capabilities),
            "hosted_tools": list(lane.hosted_tools),
            "regions": list(provider.regions),
            "privacy_tiers": list(provider.privacy_tiers),
            "data_retention_days": provider.data_retention_days,
            "capacity": {
                "daily_capacity_items": lane.daily_capacity_items,
                "remaining_capacity_items": live.remaining_capacity_items if live else None,
                "last_heartbeat_at": live.last_heartbeat_at if live and live.last_heartbeat_at else None,
            },
            "status": status,
            "eligible": status == "available",
        }

    # -- providers -----------------------------------------------------------------------
    def providers(self) -> ProviderList:
        return {"providers": [self._provider_view(p) for p in self.catalog.providers]}

    def provider(self, slug: str) -> ProviderEnvelope:
        provider = self.catalog.provider(slug)
        if provider is None:
            raise NotFound(f"No provider {slug!r}.", code="provider_not_found")
        return {"provider": self._provider_view(provider)}

    def _provider_view(self, provider: Provider) -> ProviderView:
        lanes = [lane for lane in self.catalog.lanes if lane.provider == provider.slug]
        status = provider_status(provider, self.guards)
        return {
            "slug": provider.slug,
            "display_name": provider.display_name,
            "kind": provider.kind,
            "execution_mode": provider.execution_mode,
            # Enabled = this deployment routes work to it: enabled in the catalog and
            # admitted by the allowlist and launch guard (`status` says which, if not).
            "enabled": status == "available",
            "status": status,
            "launched": provider.launched,
            "supported_operations": _union(lane.operations for lane in lanes),
            "models": [lane.model for lane in lanes],
            "regions": list(provider.regions),
            "privacy_tiers": list(provider.privacy_tiers),
            "data_retention_days": provider.data_retention_days,
            "website": provider.website or None,
        }

    # -- fees ----------------------------------------------------------------------------
    def fees(self) -> FeesView:
        fees = self.catalog.fees
        return {
            "currency": "usd",
            "standard_batch_fee_pct": _decimal(fees.standard_batch_fee_pct),
            "workflow_product_fee_pct": _decimal(fees.workflow_product_fee_pct),
            "margin_floor_pct": _decimal(fees.margin_floor_pct),
            "control_plane_fee_per_lane": {
                "currency": "usd",
                "amount": _decimal(fees.control_plane_fee_per_lane_usd),
            },
            "basis": ("percentages of the provider subtotal; the control-plane fee per lane a batch runs on"),
            "effective_at": fees.effective_at,
            "pricing_updated_at": self.catalog.pricing_updated_at,
            "catalog_version": self.catalog.version,
        }

    # -- workflow products ---------------------------------------------------------------
    def workflow_products(self) -> ProductList:
        live = self.live.live_states()
        now = self.clock.now()
        serving: dict[str, Lane] = {}
        views = []
        for product in self.catalog.workflow_products:
            lanes = self._lanes_serving(product)
            serving.update({lane.lane_id: lane for lane in lanes})
            views.append(self._product_view(product, lanes, live, now))
        return {"data": views, "provider_capacity": self._provider_capacity(serving.values(), live, now)}

    def workflow_product(self, slug: str) -> ProductEnvelope:
        product = self.catalog.workflow_product(slug)
        if product is None:
            raise NotFound(f"No workflow product {slug!r}.", code="workflow_product_not_found")
        live = self.live.live_states()
        now = self.clock.now()
        lanes = self._lanes_serving(product)
        return {
            "product": self._product_view(product, lanes, live, now),
            "provider_capacity": self._provider_capacity(lanes, live, now),
        }

    def _lanes_serving(self, product: WorkflowProduct) -> list[Lane]:
        return [
            lane for lane in self.catalog.lanes if lane_serves_product(lane, self._provider(lane), product)
        ]

    def _product_view(
        self, product: WorkflowProduct, lanes: list[Lane], live: dict[str, LaneLive], now: datetime
    ) -> ProductView:
        available = [lane for lane in lanes if self._status(lane, live, now) == "available"]
        return view_of(
            product,
            ProductView,
            object="workflow_product",
            completion_window=f"{product.sla_hours}h",
            fee_pct=_decimal(self.catalog.fees.workflow_product_fee_pct),
            models=sorted({lane.model for lane in lanes}),
            lanes_able=len(lanes),
            lanes_available=len(available),
        )

    def _provider_capacity(
        self, lanes: Iterable[Lane], live: dict[str, LaneLive], now: datetime
    ) -> dict[str, int]:
        """Per provider: today's remaining capacity of its available lanes able to serve
        (a provider whose able lanes are all unavailable shows 0)."""
        capacity: dict[str, int] = {}
        for lane in lanes:
            remaining = 0
            if self._status(lane, live, now) == "available":
                remaining = live[lane.lane_id].remaining_capacity_items
            capacity[lane.provider] = capacity.get(lane.provider, 0) + remaining
        return dict(sorted(capacity.items()))

    # -- helpers -------------------------------------------------------------------------
    def _status(self, lane: Lane, live: dict[str, LaneLive], now: datetime) -> LaneStatus:
        return lane_status(self._provider(lane), live.get(lane.lane_id), now, self.guards)

    def _provider(self, lane: Lane) -> Provider:
        provider = self.catalog.provider(lane.provider)
        if provider is None:  # the catalog's invariants forbid it (tests/unit/test_catalog_data.py)
            raise LookupError(f"lane {lane.lane_id} names an unknown provider")
        return provider


def _decimal(value: Decimal) -> str:
    return format_amount(value)


def _union(groups: Iterable[Iterable[str]]) -> list[str]:
    seen: dict[str, None] = {}
    for group in groups:
        for value in group:
            seen.setdefault(value, None)
    return sorted(seen)


def _openai_model(model: Model) -> OpenAIModelView:
    released = model.released
    created = (
        int(datetime(released.year, released.month, released.day, tzinfo=UTC).timestamp()) if released else 0
    )
    return {"id": model.id, "object": "model", "created": created, "owned_by": model.owned_by}
