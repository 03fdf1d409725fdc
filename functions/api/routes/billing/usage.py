"""Usage: the remaining balance, in-flight credit and the spend of the current and previous
period, by day, model and provider (docs/usage.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query

from batchroute.domain.accounts.access import Principal
from batchroute.domain.billing.usage import UsageReportView
from functions.api.auth import require
from functions.api.deps import UsageDep
from functions.api.envelope import ErrorEnvelope
from functions.api.schemas.billing.usage import UsageOut

router = APIRouter(tags=["billing"])

Reader = Annotated[Principal, Depends(require("billing:read"))]


@router.get(
    "/v1/usage",
    response_model=UsageOut,
    response_model_exclude_unset=True,  # the prompt-cache token counts appear only when not zero
    responses={
        400: {"model": ErrorEnvelope, "description": "`invalid_request`: an unknown period"},
        401: {"model": ErrorEnvelope, "description": "Missing, invalid or revoked credentials"},
        403: {"model": ErrorEnvelope, "description": "The role may not do this (`permission_denied`)"},
    },
    summary="Usage and remaining balance: spend of the current and previous period by day, "
    "model and provider",
)
def get_usage(
    principal: Reader,
    service: UsageDep,
    period: Annotated[
        Literal["daily", "monthly"] | None,
        Query(
            description="daily or monthly; default: the spending limit's period while a limit "
            "is on, else monthly. Boundaries are local midnights in the billing controls' "
            "limit_timezone."
        ),
    ] = None,
) -> UsageReportView:
    return service.report(principal, period=period).to_api()
