"""Public catalog: models, workflow products, the provider directory and the fee schedule."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel

from batchroute.domain.catalog import HostedTool, Operation, PrivacyTier, RuntimeCapability, SlaTier
from batchroute.domain.lanes import LaneStatus
from batchroute.services.catalog.catalog import ModelFilters
from functions.api.deps import CatalogDep
from functions.api.envelope import errors_doc

router = APIRouter(tags=["catalog"])


# -- response models (documentation and shape checks) ------------------------------------
class LanePricingOut(BaseModel):
    currency: str
    unit: str
    input: str
    output: str
    batch_input: str
    batch_output: str


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


class RetentionOut(BaseModel):
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
    retention: RetentionOut
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


class MoneyOut(BaseModel):
    currency: str
    amount: str


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


# -- routes ------------------------------------------------------------------------------
@router.get(
    "/v1/catalog/models",
    response_model=ModelListOut,
    summary="Catalog models; every filter is optional and they combine with AND",
)
def list_models(
    service: CatalogDep,
    operation: Operation | None = None,
    provider: Annotated[str | None, Query(description="a provider slug (see /v1/providers)")] = None,
    privacy_tier: PrivacyTier | None = None,
    sla_tier: SlaTier | None = None,
    runtime_capability: RuntimeCapability | None = None,
    hosted_tool: HostedTool | None = None,
    q: Annotated[
        str | None,
        Query(
            max_length=200, description="case-insensitive search over title, summary, id, description, tags"
        ),
    ] = None,
) -> dict[str, Any]:
    filters = ModelFilters(
        operation=operation,
        provider=provider,
        privacy_tier=privacy_tier,
        sla_tier=sla_tier,
        runtime_capability=runtime_capability,
        hosted_tool=hosted_tool,
        q=q,
    )
    return service.list_models(filters)


@router.get(
    "/v1/catalog/models/{slug:path}",
    response_model=ModelEnvelope,
    responses=errors_doc({404: "No such model (`model_not_found`)"}),
    summary="One model by its exact id (ids may contain slashes)",
)
def get_model(slug: str, service: CatalogDep) -> dict[str, Any]:
    return service.model(slug)


@router.get(
    "/v1/catalog/workflow-products",
    response_model=WorkflowProductListOut,
    summary="Workflow products, with the remaining capacity per provider able to serve them",
)
def list_workflow_products(service: CatalogDep) -> dict[str, Any]:
    return service.workflow_products()


@router.get(
    "/v1/catalog/workflow-products/{slug}",
    response_model=WorkflowProductEnvelope,
    responses=errors_doc({404: "No such workflow product (`workflow_product_not_found`)"}),
    summary="One workflow product",
)
def get_workflow_product(slug: str, service: CatalogDep) -> dict[str, Any]:
    return service.workflow_product(slug)


@router.get("/v1/providers", response_model=ProvidersOut, summary="The provider directory")
def list_providers(service: CatalogDep) -> dict[str, Any]:
    return service.providers()


@router.get(
    "/v1/providers/{slug}",
    response_model=ProviderEnvelope,
    responses=errors_doc({404: "No such provider (`provider_not_found`)"}),
    summary="One provider",
)
def get_provider(slug: str, service: CatalogDep) -> dict[str, Any]:
    return service.provider(slug)


@router.get(
    "/v1/pricing/fees",
    response_model=FeeScheduleOut,
    summary="The fee schedule quotes and settlement use",
)
def get_fees(service: CatalogDep) -> dict[str, Any]:
    return service.fees()
