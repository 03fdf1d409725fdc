"""Billing controls: the org's spend limit and alerts, and the audit trail of their changes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BaseModel

from batchroute.domain.access import Principal
from batchroute.domain.billing_controls import MAX_THRESHOLDS, MAX_USD
from functions.api.auth import require
from functions.api.deps import BillingControlsDep
from functions.api.envelope import ErrorEnvelope
from functions.api.limits import client_ip

router = APIRouter(tags=["billing"])


Reader = Annotated[Principal, Depends(require("billing:read"))]
Manager = Annotated[Principal, Depends(require("billing:manage", session_only=True))]

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorEnvelope, "description": "Missing, invalid or revoked credentials"},
    403: {"model": ErrorEnvelope, "description": "The role may not do this (`permission_denied`)"},
}


# -- response models (documentation and shape checks) ------------------------------------
class MoneyOut(BaseModel):
    currency: str
    amount: str


class ThresholdOut(BaseModel):
    type: Literal["balance_below", "spend_above", "pct_of_limit"]
    value: MoneyOut | int  # Money for the USD types, a whole percent for pct_of_limit


class ControlsOut(BaseModel):
    org_id: str
    configured: bool
    limit_enabled: bool
    limit_period: Literal["daily", "monthly"] | None
    limit_amount: MoneyOut | None
    limit_mode: Literal["soft", "hard"]
    limit_timezone: str
    low_balance_amount: MoneyOut | None
    alert_thresholds: list[ThresholdOut]
    alert_email_enabled: bool
    alert_webhook_enabled: bool
    created_at: str | None
    updated_at: str | None


class ControlsEnvelope(BaseModel):
    controls: ControlsOut


class AuditEntryOut(BaseModel):
    id: str
    org_id: str
    actor_user_id: str | None
    actor_role: str | None
    action: str
    before: dict[str, Any]
    after: dict[str, Any]
    ip_address: str | None
    created_at: str


class AuditList(BaseModel):
    data: list[AuditEntryOut]


# The body is parsed by the domain (partial update: absent, null and value all differ),
# so the schema is documented here rather than inferred from a model.
_USD = {
    "anyOf": [
        {"type": "number", "minimum": 0, "maximum": float(MAX_USD)},
        {"type": "string", "pattern": r"^\d+(\.\d{1,6})?$"},
        {
            "type": "object",
            "properties": {"currency": {"const": "usd"}, "amount": {"type": "string"}},
            "required": ["currency", "amount"],
        },
    ],
    "description": "USD dollars, at most 6 decimals (a Money object as returned by GET is accepted too)",
}
_NULLABLE_USD = {"anyOf": [*_USD["anyOf"], {"type": "null"}], "description": _USD["description"]}
CONTROLS_UPDATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "description": "Partial update: only given fields change; null clears a nullable field.",
    "properties": {
        "limit_enabled": {"type": "boolean"},
        "limit_period": {"enum": ["daily", "monthly", None]},
        "limit_amount": _NULLABLE_USD,
        "limit_mode": {"enum": ["soft", "hard"]},
        "limit_timezone": {"type": "string", "description": "IANA time zone, e.g. Europe/Berlin"},
        "low_balance_amount": _NULLABLE_USD,
        "alert_thresholds": {
            "type": ["array", "null"],
            "maxItems": MAX_THRESHOLDS,
            "items": {
                "type": "object",
                "required": ["type", "value"],
                "properties": {
                    "type": {"enum": ["balance_below", "spend_above", "pct_of_limit"]},
                    "value": {
                        "anyOf": [*_USD["anyOf"], {"type": "integer", "minimum": 0, "maximum": 100}],
                        "description": "USD for balance_below and spend_above; "
                        "whole percent 0-100 for pct_of_limit",
                    },
                },
            },
        },
        "alert_email_enabled": {"type": "boolean"},
        "alert_webhook_enabled": {"type": "boolean"},
        "org_id": {"type": "string", "readOnly": True},
        "configured": {"type": "boolean", "readOnly": True},
        "created_at": {"type": ["string", "null"], "readOnly": True},
        "updated_at": {"type": ["string", "null"], "readOnly": True},
    },
}


@router.get(
    "/v1/billing/controls",
    response_model=ControlsEnvelope,
    responses=_ERRORS,
    summary="The org's billing controls (defaults, configured=false, until the first save)",
)
def get_controls(principal: Reader, service: BillingControlsDep) -> dict[str, Any]:
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
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": CONTROLS_UPDATE_SCHEMA}}}
    },
)
def update_controls(
    request: Request,
    principal: Manager,
    service: BillingControlsDep,
    body: Annotated[dict[str, Any], Body()],
) -> dict[str, Any]:
    controls = service.update(principal, body, ip_address=client_ip(request))
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
) -> dict[str, Any]:
    return {"data": [entry.to_api() for entry in service.audit(principal.org_id, limit=limit)]}
