"""The org's billing alert events: what the spend limit, the alert thresholds, the
low-balance level and auto top-up raised (docs/billing-alerts.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from batchroute.domain.accounts.access import Principal
from batchroute.services.billing.events import EventPage
from functions.api.auth import require
from functions.api.deps import BillingEventsDep
from functions.api.envelope import ErrorEnvelope
from functions.api.schemas.billing.events import BillingEventList

router = APIRouter(tags=["billing"])

Reader = Annotated[Principal, Depends(require("billing:read"))]


@router.get(
    "/v1/billing/events",
    response_model=BillingEventList,
    responses={
        400: {"model": ErrorEnvelope, "description": "`invalid_request`: a cursor that is not an event id"},
        401: {"model": ErrorEnvelope, "description": "Missing, invalid or revoked credentials"},
        403: {"model": ErrorEnvelope, "description": "The role may not do this (`permission_denied`)"},
    },
    summary="The org's billing alert events, newest first",
)
def list_billing_events(
    principal: Reader,
    log: BillingEventsDep,
    limit: Annotated[int, Query(ge=1, le=200, description="1-200, default 50")] = 50,
    cursor: Annotated[str | None, Query(description="`next_cursor` of the previous page")] = None,
) -> EventPage:
    return log.list(principal.org_id, limit=limit, cursor=cursor)
