"""The model list's query, and response models: the public catalog, its models with their
provider lanes, the workflow products, the provider directory and the fee schedule."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from batchroute.domain.catalog.catalog import HostedTool, Operation, PrivacyTier, RuntimeCapability, SlaTier
from batchroute.domain.routing.lanes import LaneStatus
from batchroute.services.catalog.catalog import ModelFilters
from functions.api.schemas.common import MoneyOut


class ModelListQuery(BaseModel):
    """The model list's query: every filter is optional and they combine with AND."""

    operation: Operation | None = None
    provider: Annotated[str | None, Field(description="a provider slug (see /v1/providers)")] = None
    privacy_tier: PrivacyTier | None = None
    sla_tier: SlaTier | None = None
    runtime_capability: RuntimeCapability | None = None
    hosted_tool: HostedTool | None = None
    q: Annotated[
        str | None,
        Field(
            max_length=200, description="case-insensitive search over title, summary, id, description, tags"
        ),
    ] = None

    def filters(self) -> ModelFilters:
        return ModelFilters(**self.model_dump())


class HostedToolPricingOut(BaseModel):
    per_1k_calls: str = Field(
        description="USD per 1,000 billed calls, direct and batch alike; 0: not charged"
    )
    calls_per_item: int = Field(description="The calls a quote counts for each item asking for the tool")


class LanePricingOut(BaseModel):
    currency: str
    unit: str
    input: str
    output: str
    batch_input: str
    batch_output: str
    # input read from / written to the vendor's prompt cache (the input price where it publishes none)
    cached_input: str
    cache_write_input: str
    batch_cached_input: str
    batch_cache_write_input: str
    hosted_tools: dict[str, HostedToolPricingOut] = Field(
        description="What the lane's vendor bills for each hosted tool it offers, by tool (docs/money.md)"
    )


class LaneCapacityOut(BaseModel):
    daily_capacity_items: int
    remaining_capacity_items: int | None
    last_heartbeat_at: str | None


class ModelLaneOut(BaseModel):
    lane_id: str
    provider: str
    provider_name: str
    provider_kind: str
    execution_mode: str
    provider_model_id: str
    pricing: LanePricingOut
    context_window: int
    max_output_tokens: int
    operations: list[str]
    runtime_capabilities: list[str]
    hosted_tools: list[str]
    regions: list[str]
    privacy_tiers: list[str]
    data_retention_days: int
    capacity: LaneCapacityOut
    status: LaneStatus
    eligible: bool


class DataRetentionOut(BaseModel):
    min_data_retention_days: int
    max_data_retention_days: int
    zero_data_retention_providers: list[str]


class CapacityOut(BaseModel):
    daily_capacity_items: int
    remaining_capacity_items: int


class IneligibleLaneOut(BaseModel):
    lane_id: str
    provider: str
    code: LaneStatus
    message: str


class RoutingEligibilityOut(BaseModel):
    eligible: bool
    lanes_available: int
    reasons: list[IneligibleLaneOut]


class ModelOut(BaseModel):
    id: str
    object: str
    title: str
    summary: str
    description: str
    tags: list[str]
    family: str
    open_weight: bool
    operations: list[str]
    runtime_capabilities: list[str]
    hosted_tools: list[str]
    privacy_tiers: list[str]
    regions: list[str]
    context_window: int
    max_output_tokens: int
    retention: DataRetentionOut
    capacity: CapacityOut
    routing_eligibility: RoutingEligibilityOut
    providers: list[ModelLaneOut]


class ModelListOut(BaseModel):
    data: list[ModelOut]
    pricing_updated_at: str | None
    provider_count: int


class ModelEnvelope(BaseModel):
    model: ModelOut
    pricing_updated_at: str | None


class WorkflowProductOut(BaseModel):
    slug: str
    object: str
    title: str
    summary: str
    operation: str
    sla_hours: int
    completion_window: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    route_policy: dict[str, Any]
    typical_input_tokens: int
    typical_output_tokens: int
    fee_pct: str
    models: list[str]
    lanes_able: int
    lanes_available: int


class WorkflowProductListOut(BaseModel):
    data: list[WorkflowProductOut]
    provider_capacity: dict[str, int]


class WorkflowProductEnvelope(BaseModel):
    product: WorkflowProductOut
    provider_capacity: dict[str, int]


class ProviderOut(BaseModel):
    slug: str
    display_name: str
    kind: str
    execution_mode: str
    enabled: bool
    status: LaneStatus
    launched: bool
    supported_operations: list[str]
    models: list[str]
    regions: list[str]
    privacy_tiers: list[str]
    data_retention_days: int
    website: str | None


class ProvidersOut(BaseModel):
    providers: list[ProviderOut]


class ProviderEnvelope(BaseModel):
    provider: ProviderOut


class FeeScheduleOut(BaseModel):
    currency: str
    standard_batch_fee_pct: str
    workflow_product_fee_pct: str
    margin_floor_pct: str
    control_plane_fee_per_lane: MoneyOut
    basis: str
    effective_at: str
    pricing_updated_at: str | None
    catalog_version: str
