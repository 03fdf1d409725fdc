"""The account: read it, edit the profile, set the org's default delivery webhook."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from batchroute.domain.accounts.access import Principal
from functions.api.auth import require
from functions.api.deps import AccountSettingsDep
from functions.api.envelope import ErrorEnvelope
from functions.api.schemas.accounts.accounts import (
    AccountOut,
    DeliveryWebhookBody,
    DeliveryWebhookOut,
    ProfileBody,
)

router = APIRouter(tags=["account"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorEnvelope, "description": "Missing, invalid or revoked credentials"},
    403: {"model": ErrorEnvelope, "description": "The role may not do this"},
    404: {"model": ErrorEnvelope, "description": "The account no longer exists (`account_not_found`)"},
}

Reader = Annotated[Principal, Depends(require("account:read"))]
WebhookManager = Annotated[Principal, Depends(require("delivery:manage"))]


@router.get("/v1/auth/account", response_model=AccountOut, responses=_ERRORS, summary="The account")
def get_account(principal: Reader, accounts: AccountSettingsDep) -> AccountOut:
    return AccountOut.of(accounts.view(principal))


@router.put(
    "/v1/auth/account/profile",
    response_model=AccountOut,
    responses=_ERRORS,
    summary="Edit the org's display name (owner, admin) and your own full name (user sessions)",
)
def update_profile(body: ProfileBody, principal: Reader, accounts: AccountSettingsDep) -> AccountOut:
    view = accounts.update_profile(principal, display_name=body.display_name, full_name=body.full_name)
    return AccountOut.of(view)


@router.put(
    "/v1/auth/account/delivery-webhook",
    response_model=DeliveryWebhookOut,
    responses=_ERRORS,
    summary="Set the org's default webhook (public HTTPS; the secret is stored sealed, never returned)",
)
def set_delivery_webhook(
    body: DeliveryWebhookBody, principal: WebhookManager, accounts: AccountSettingsDep
) -> DeliveryWebhookOut:
    return DeliveryWebhookOut(**accounts.set_delivery_webhook(principal, url=body.url, secret=body.secret))
