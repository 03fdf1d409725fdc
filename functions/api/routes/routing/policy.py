"""The org's route policy: read it, change it (version-checked, every save in its history),
and its history (docs/routing-policy.md)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response

from batchroute.domain.accounts.access import Principal
from batchroute.domain.catalog.catalog import Catalog
from batchroute.domain.routing.policy import PolicyHistoryView
from functions.api.auth import require
from functions.api.deps import RoutePolicyDep, built
from functions.api.envelope import ErrorEnvelope
from functions.api.limits import client_ip
from functions.api.schemas.routing.policy import RoutePolicyEnvelope, RoutePolicyHistory, RoutePolicyUpdate

router = APIRouter(tags=["routing"])

Reader = Annotated[Principal, Depends(require("routing:read"))]
Manager = Annotated[Principal, Depends(require("routing:manage"))]
DeploymentCatalog = Annotated[Catalog, Depends(built("catalog"))]

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorEnvelope, "description": "Missing, invalid or revoked credentials"},
    403: {"model": ErrorEnvelope, "description": "The role may not do this (`permission_denied`)"},
}


@router.get(
    "/v1/routing/policy",
    response_model=RoutePolicyEnvelope,
    responses=_ERRORS,
    summary="The org's route policy (defaults, configured=false, until the first save); ETag = version",
)
def get_policy(principal: Reader, service: RoutePolicyDep, response: Response) -> dict[str, Any]:
    policy = service.get(principal)
    response.headers["ETag"] = f'"{policy.version}"'
    return {"policy": policy.to_api()}


@router.put(
    "/v1/routing/policy",
    response_model=RoutePolicyEnvelope,
    responses={
        **_ERRORS,
        400: {"model": ErrorEnvelope, "description": "`invalid_request`: details.field and details.errors"},
        409: {
            "model": ErrorEnvelope,
            "description": "`policy_version_mismatch`: If-Match / version is not the stored version",
        },
    },
    summary="Change the org's route policy (owner, admin); every saved change is in its history",
)
def update_policy(
    request: Request,
    principal: Manager,
    service: RoutePolicyDep,
    body: RoutePolicyUpdate,
    catalog: DeploymentCatalog,
    response: Response,
    if_match: Annotated[str | None, Header(description='The version you read, e.g. "3"')] = None,
) -> dict[str, Any]:
    policy = service.update(
        principal, body.command(catalog), if_match=if_match, ip_address=client_ip(request)
    )
    response.headers["ETag"] = f'"{policy.version}"'
    return {"policy": policy.to_api()}


@router.get(
    "/v1/routing/policy/history",
    response_model=RoutePolicyHistory,
    responses={
        **_ERRORS,
        400: {"model": ErrorEnvelope, "description": "`invalid_request`: a cursor that is not a change id"},
    },
    summary="The route policy's changes, newest first: who, when, before and after",
)
def policy_history(
    principal: Reader,
    service: RoutePolicyDep,
    limit: Annotated[int, Query(ge=1, le=200, description="1-200, default 50")] = 50,
    cursor: Annotated[str | None, Query(description="`next_cursor` of the previous page")] = None,
) -> PolicyHistoryView:
    return service.history(principal, limit=limit, cursor=cursor)
