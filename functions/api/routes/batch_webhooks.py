"""GET /v1/batches/{batch_id}/webhooks: every webhook delivery of a batch and every attempt.

The secret never appears, not even sealed. See docs/webhooks.md.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel

from batchroute.domain.access import Principal
from batchroute.services.delivery.webhooks import batch_webhooks_view
from functions.api.auth import require
from functions.api.deps import ReadsDep, WiringDep
from functions.api.envelope import ErrorEnvelope

router = APIRouter(tags=["batches"])

Reader = Annotated[Principal, Depends(require("batches:read"))]

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorEnvelope, "description": "Missing, invalid or revoked credentials"},
    403: {"model": ErrorEnvelope, "description": "Another organization's batch, or the role may not read"},
    404: {"model": ErrorEnvelope, "description": "No such batch (`batch_not_found`)"},
}


class WebhookDeliveryOut(BaseModel):
    id: str
    event_id: str | None
    event_type: str | None
    url: str | None
    status: Literal["pending", "delivering", "succeeded", "failed", "dead_lettered"]
    attempt_count: int
    last_attempt_at: str | None
    next_attempt_at: str | None
    last_response_status: int | None
    last_error: str | None
    created_at: str | None


class WebhookAttemptOut(BaseModel):
    delivery_id: str | None
    attempt: int
    at: str | None
    status_code: int | None
    error: str | None
    duration_ms: int


class BatchWebhooksOut(BaseModel):
    batch_id: str
    data: list[WebhookDeliveryOut]
    events: list[WebhookAttemptOut]


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
) -> dict[str, Any]:
    reads.owned(principal, batch_id)  # 404 batch_not_found, or 403 for another org's batch
    return batch_webhooks_view(wiring.webhook_deliveries, batch_id)
