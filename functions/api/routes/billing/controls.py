"""Billing controls: the org's spend limit and alerts, and the audit trail of their changes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from batchroute.domain.accounts.access import Principal
from batchroute.domain.billing.controls import ControlsView
from functions.api.auth import require
from functions.api.deps import BillingControlsDep
from functions.api.envelope import ErrorEnvelope
from functions.api.limits import client_ip
from functions.api.schemas.billing.controls import AuditList, ControlsEnvelope, ControlsUpdate

router = APIRouter(tags=["billing"])


Reader = Annotated[Principal, Depends(require("billing:read"))]
Manager = Annotated[Principal, Depends(require("billing:manage", session_only=True))]

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorEnvelope, "description": "Missing, invalid or revoked credentials"},
    403: {"model": ErrorEnvelope, "description": "The role may not do this (`permission_denied`)"},
}


@router.get(
    "/v1/billing/controls",
    response_model=ControlsEnvelope,
    responses=_ERRORS,
    summary="The org's billing controls (defaults, configured=false, until the first save)",
)
def get_controls(principal: Reader, service: BillingControlsDep) -> dict[str, ControlsView]:
    return {"controls": service.get(principal.org_id).to_api()}


@router.put(
    "/v1/billing/controls",
    response_model=ControlsEnvelope,
    responses={
        **_ERRORS,
        403: {
            "model": ErrorEnvelope,
            "description": "`user_session_required` for API keys; `permission_denied` for roles "
            "without billing:manage",
        },
        409: {"model": ErrorEnvelope, "description": "`concurrent_update`: saved by someone else meanwhile"},
    },
    summary="Update billing controls (user session only); every save is audited",
)
def update_controls(
    request: Request,
    principal: Manager,
    service: BillingControlsDep,
    body: ControlsUpdate,
) -> dict[str, ControlsView]:
    controls = service.update(principal, body.command(), ip_address=client_ip(request))
    return {"controls": controls.to_api()}


@router.get(
    "/v1/billing/controls/audit",
    response_model=AuditList,
    responses=_ERRORS,
    summary="Audit trail of billing-control changes, newest first",
)
def get_controls_audit(
    principal: Reader,
    service: BillingControlsDep,
    limit: Annotated[int, Query(ge=1, le=200, description="1-200, default 50")] = 50,
    cursor: Annotated[str | None, Query(description="the previous page's next_cursor")] = None,
) -> dict[str, Any]:
    page = service.audit(principal.org_id, limit=limit, cursor=cursor)
    return {"data": [entry.to_api() for entry in page.entries], "next_cursor": page.next_cursor}
