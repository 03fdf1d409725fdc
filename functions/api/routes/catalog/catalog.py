"""Public catalog: models, workflow products, the provider directory and the fee schedule."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from batchroute.services.catalog import catalog
from functions.api.deps import CatalogDep
from functions.api.envelope import errors_doc
from functions.api.schemas.catalog.catalog import (
    FeeScheduleOut,
    ModelEnvelope,
    ModelListOut,
    ModelListQuery,
    ProviderEnvelope,
    ProvidersOut,
    WorkflowProductEnvelope,
    WorkflowProductListOut,
)

router = APIRouter(tags=["catalog"])


@router.get(
    "/v1/catalog/models",
    response_model=ModelListOut,
    summary="Catalog models; every filter is optional and they combine with AND",
)
def list_models(service: CatalogDep, query: Annotated[ModelListQuery, Query()]) -> catalog.ModelList:
    return service.list_models(query.filters())


@router.get(
    "/v1/catalog/models/{slug:path}",
    response_model=ModelEnvelope,
    responses=errors_doc({404: "No such model (`model_not_found`)"}),
    summary="One model by its exact id (ids may contain slashes)",
)
def get_model(slug: str, service: CatalogDep) -> catalog.ModelEnvelope:
    return service.model(slug)


@router.get(
    "/v1/catalog/workflow-products",
    response_model=WorkflowProductListOut,
    summary="Workflow products, with the remaining capacity per provider able to serve them",
)
def list_workflow_products(service: CatalogDep) -> catalog.ProductList:
    return service.workflow_products()


@router.get(
    "/v1/catalog/workflow-products/{slug}",
    response_model=WorkflowProductEnvelope,
    responses=errors_doc({404: "No such workflow product (`workflow_product_not_found`)"}),
    summary="One workflow product",
)
def get_workflow_product(slug: str, service: CatalogDep) -> catalog.ProductEnvelope:
    return service.workflow_product(slug)


@router.get("/v1/providers", response_model=ProvidersOut, summary="The provider directory")
def list_providers(service: CatalogDep) -> catalog.ProviderList:
    return service.providers()


@router.get(
    "/v1/providers/{slug}",
    response_model=ProviderEnvelope,
    responses=errors_doc({404: "No such provider (`provider_not_found`)"}),
    summary="One provider",
)
def get_provider(slug: str, service: CatalogDep) -> catalog.ProviderEnvelope:
    return service.provider(slug)


@router.get(
    "/v1/pricing/fees",
    response_model=FeeScheduleOut,
    summary="The fee schedule quotes and settlement use",
)
def get_fees(service: CatalogDep) -> catalog.FeesView:
    return service.fees()
