"""GET /v1/batches/{batch_id}/webhooks: every webhook delivery of a batch and every attempt.

The secret never appears, not even sealed. See docs/webhooks.md.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path

from batchroute.domain.accounts.access import Principal
from batchroute.services.delivery.webhooks import BatchWebhooksView, batch_webhooks_view
from functions.api.auth import require
from functions.api.deps import ReadsDep, WiringDep
from functions.api.envelope import ErrorEnvelope
from functions.api.schemas.delivery.webhooks import BatchWebhooksOut

router = APIRouter(tags=["batches"])

Reader = Annotated[Principal, Depends(require("batches:read"))]

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorEnvelope, "description": "Missing, invalid or revoked credentials"},
    403: {"model": ErrorEnvelope, "description": "Another organization's batch, or the role may not read"},
    404: {"model": ErrorEnvelope, "description": "No such batch (`batch_not_found`)"},
}


@router.get(
    "/v1/batches/{batch_id}/webhooks",
    response_model=BatchWebhooksOut,
    responses=_ERRORS,
    summary="The batch's webhook deliveries and every attempt",
)
def list_batch_webhooks(
    batch_id: Annotated[str, Path(min_length=1, max_length=128)],
    principal: Reader,
    reads: ReadsDep,
    wiring: WiringDep,
) -> BatchWebhooksView:
    reads.owned(principal, batch_id)  # 404 batch_not_found, or 403 for another org's batch
    return batch_webhooks_view(wiring.webhook_deliveries, batch_id)
