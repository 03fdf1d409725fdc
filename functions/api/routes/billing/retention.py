"""Retention settings: how long the org's result files are kept."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from batchroute.domain.accounts.access import Principal
from batchroute.domain.billing.retention import RetentionView
from functions.api.auth import require
from functions.api.deps import RetentionDep, SettingsDep
from functions.api.envelope import ErrorEnvelope
from functions.api.schemas.billing.retention import RetentionSettingsOut, RetentionUpdate

router = APIRouter(tags=["retention"])


# Every role may read when results expire (members fetch them); changing it is for managers.
Reader = Annotated[Principal, Depends(require("account:read"))]
Manager = Annotated[Principal, Depends(require("retention:manage"))]

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorEnvelope, "description": "Missing, invalid or revoked credentials"},
    403: {"model": ErrorEnvelope, "description": "The role may not do this (`permission_denied`)"},
}


@router.get(
    "/v1/retention-settings",
    response_model=RetentionSettingsOut,
    responses=_ERRORS,
    summary="The org's result retention settings (grace_only until changed)",
)
def get_retention(principal: Reader, service: RetentionDep, settings: SettingsDep) -> RetentionView:
    return service.get(principal.org_id).to_api(grace_hours=settings.retention_grace_hours)


@router.put(
    "/v1/retention-settings",
    response_model=RetentionSettingsOut,
    responses={**_ERRORS, 409: {"model": ErrorEnvelope, "description": "`concurrent_update`"}},
    summary="Change result retention (owner, admin)",
)
def update_retention(
    principal: Manager,
    service: RetentionDep,
    settings: SettingsDep,
    body: RetentionUpdate,
) -> RetentionView:
    updated = service.update(principal.org_id, body.command())
    return updated.to_api(grace_hours=settings.retention_grace_hours)
