"""Delivery targets: the org's buckets that finished batches' artifacts are pushed to
(docs/delivery-targets.md). Every role may list them (no secret is ever shown); owners and
admins (`delivery:manage`) register, change, remove and test them."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path

from batchroute.domain.accounts.access import Principal
from batchroute.domain.delivery.targets import DeliveryTargetView, TargetTestView
from functions.api.auth import require
from functions.api.deps import DeliveryTargetsDep
from functions.api.envelope import errors_doc
from functions.api.schemas.delivery.targets import (
    DeliveryTargetCreate,
    DeliveryTargetDeleted,
    DeliveryTargetList,
    DeliveryTargetOut,
    DeliveryTargetUpdate,
    TargetTestOut,
)

router = APIRouter(tags=["delivery targets"])

Reader = Annotated[Principal, Depends(require("account:read"))]
Manager = Annotated[Principal, Depends(require("delivery:manage"))]
TargetId = Annotated[str, Path(min_length=1, max_length=64)]

_ERRORS = errors_doc(
    {401: "Missing, invalid or revoked credentials", 403: "The role may not do this (`permission_denied`)"}
)
_ONE = {**_ERRORS, **errors_doc({404: "No such target in this organization (`delivery_target_not_found`)"})}
_INVALID = (
    "`invalid_delivery_target` (details.field), or the endpoint refused by the SSRF guard "
    "(`https_required`, `unsafe_url`, `unresolvable_host`, `invalid_url`)"
)


@router.get(
    "/v1/delivery-targets",
    response_model=DeliveryTargetList,
    responses=_ERRORS,
    summary="The organization's delivery targets (never their secrets)",
)
def list_targets(principal: Reader, targets: DeliveryTargetsDep) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [t.to_api() for t in targets.for_org(principal.org_id)],
        "limit": targets.max_targets,
    }


@router.post(
    "/v1/delivery-targets",
    status_code=201,
    response_model=DeliveryTargetOut,
    responses={
        **_ERRORS,
        **errors_doc({400: _INVALID, 409: "At the per-organization limit (`delivery_target_limit`)"}),
    },
    summary="Register a bucket (S3 API) to push finished batches' artifacts to (owner, admin)",
)
def create_target(
    principal: Manager, targets: DeliveryTargetsDep, body: DeliveryTargetCreate
) -> DeliveryTargetView:
    return targets.create(principal.org_id, body.command()).to_api()


@router.get(
    "/v1/delivery-targets/{target_id}",
    response_model=DeliveryTargetOut,
    responses=_ONE,
    summary="One delivery target",
)
def get_target(target_id: TargetId, principal: Reader, targets: DeliveryTargetsDep) -> DeliveryTargetView:
    return targets.get(principal.org_id, target_id).to_api()


@router.patch(
    "/v1/delivery-targets/{target_id}",
    response_model=DeliveryTargetOut,
    responses={**_ONE, **errors_doc({400: _INVALID, 409: "Changed concurrently (`concurrent_update`)"})},
    summary="Change a delivery target: only the fields given (owner, admin)",
)
def update_target(
    target_id: TargetId, principal: Manager, targets: DeliveryTargetsDep, body: DeliveryTargetUpdate
) -> DeliveryTargetView:
    return targets.update(principal.org_id, target_id, body.command()).to_api()


@router.delete(
    "/v1/delivery-targets/{target_id}",
    response_model=DeliveryTargetDeleted,
    responses=_ONE,
    summary="Remove a delivery target (owner, admin); batches already delivered keep their objects",
)
def delete_target(target_id: TargetId, principal: Manager, targets: DeliveryTargetsDep) -> dict[str, Any]:
    targets.delete(principal.org_id, target_id)
    return {"id": target_id, "object": "delivery_target", "deleted": True}


@router.post(
    "/v1/delivery-targets/{target_id}/test",
    response_model=TargetTestOut,
    responses=_ONE,
    summary="Write a small sample object with the target's credentials; 200 with ok true or false",
)
def test_target(target_id: TargetId, principal: Manager, targets: DeliveryTargetsDep) -> TargetTestView:
    return targets.test(principal.org_id, target_id).to_api()
