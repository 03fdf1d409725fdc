"""Credit purchase (the billing dashboard's checkout), the payment processor's webhook, and
auto top-up settings and attempts (docs/payments.md)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.concurrency import run_in_threadpool

from batchroute.domain.accounts.access import Principal
from batchroute.domain.billing.payments import AttemptPage, AutoTopupView
from batchroute.services.billing.payments import CheckoutOpened, CheckoutState, WebhookAck
from functions.api.auth import require
from functions.api.deps import AutoTopupDep, CreditPurchasesDep
from functions.api.envelope import ErrorEnvelope
from functions.api.schemas.billing.payments import (
    AttemptList,
    AutoTopupEnvelope,
    AutoTopupUpdate,
    CheckoutOut,
    CheckoutRequest,
    CheckoutStateOut,
    ProcessorWebhookAck,
)

router = APIRouter(tags=["billing"])

Reader = Annotated[Principal, Depends(require("billing:read"))]
Manager = Annotated[Principal, Depends(require("billing:manage"))]
SessionManager = Annotated[Principal, Depends(require("billing:manage", session_only=True))]
SessionId = Annotated[str, Path(min_length=1, max_length=255, description="The processor's cs_... id")]

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorEnvelope, "description": "Missing, invalid or revoked credentials"},
    403: {"model": ErrorEnvelope, "description": "The role may not do this (`permission_denied`)"},
}
_EVENT_SCHEMA = {
    "type": "object",
    "description": "A Stripe event, signed in the Stripe-Signature header",
    "required": ["id", "type", "data"],
    "properties": {
        "id": {"type": "string"},
        "type": {"type": "string"},
        "created": {"type": "integer"},
        "data": {"type": "object", "properties": {"object": {"type": "object"}}},
    },
}


@router.post(
    "/v1/billing/checkout",
    response_model=CheckoutOut,
    responses={
        **_ERRORS,
        400: {"model": ErrorEnvelope, "description": "`invalid_amount`: not 5-10000 USD in whole cents"},
        403: {
            "model": ErrorEnvelope,
            "description": "`user_session_required` for API keys; `permission_denied` without billing:manage",
        },
    },
    summary="Buy credits: open the processor's hosted checkout (billing dashboard, user session only)",
)
def create_checkout(
    principal: SessionManager, service: CreditPurchasesDep, body: CheckoutRequest
) -> CheckoutOpened:
    return service.checkout(principal, body.command())


@router.get(
    "/v1/billing/checkout/{session_id}",
    response_model=CheckoutStateOut,
    responses={**_ERRORS, 404: {"model": ErrorEnvelope, "description": "`checkout_not_found`"}},
    summary="A credit purchase's state: `credited` once the wallet has the credit",
)
def get_checkout(principal: Reader, service: CreditPurchasesDep, session_id: SessionId) -> CheckoutState:
    return service.checkout_state(principal, session_id)


@router.post(
    "/v1/billing/stripe/webhook",
    response_model=ProcessorWebhookAck,
    responses={
        400: {"model": ErrorEnvelope, "description": "`invalid_signature`: nothing applied"},
        503: {
            "model": ErrorEnvelope,
            "description": "Nothing applied, the processor redelivers: `payment_not_credited` (a refund "
            "or dispute of our payment whose credit has not landed yet), or a store or the processor "
            "could not be reached",
        },
    },
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": _EVENT_SCHEMA}}},
        "security": [],
    },
    summary="The payment processor's webhook (signature-verified; each event applied once)",
)
async def processor_webhook(request: Request, service: CreditPurchasesDep) -> WebhookAck:
    payload = await request.body()
    return await run_in_threadpool(service.handle_webhook, payload, request.headers.get("stripe-signature"))


@router.get(
    "/v1/billing/auto-topup",
    response_model=AutoTopupEnvelope,
    responses=_ERRORS,
    summary="Auto top-up settings (defaults, configured=false, until the first save)",
)
def get_auto_topup(principal: Reader, service: AutoTopupDep) -> dict[str, AutoTopupView]:
    return {"auto_topup": service.get(principal.org_id)}


@router.put(
    "/v1/billing/auto-topup",
    response_model=AutoTopupEnvelope,
    responses={
        **_ERRORS,
        400: {
            "model": ErrorEnvelope,
            "description": "`invalid_auto_topup` (details.field); `payment_method_required` to "
            "enable without a saved card",
        },
        409: {"model": ErrorEnvelope, "description": "`concurrent_update`"},
    },
    summary="Update auto top-up settings",
)
def update_auto_topup(
    principal: Manager, service: AutoTopupDep, body: AutoTopupUpdate
) -> dict[str, AutoTopupView]:
    return {"auto_topup": service.update(principal, body.command())}


@router.get(
    "/v1/billing/auto-topup/attempts",
    response_model=AttemptList,
    responses=_ERRORS,
    summary="Auto top-up attempts, newest first",
)
def list_auto_topup_attempts(
    principal: Reader,
    service: AutoTopupDep,
    limit: Annotated[int, Query(ge=1, le=100, description="1-100, default 20")] = 20,
    cursor: Annotated[str | None, Query(description="the previous page's next_cursor")] = None,
) -> AttemptPage:
    return service.attempts(principal.org_id, limit=limit, cursor=cursor)
