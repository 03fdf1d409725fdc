"""POST /v1/batches/{batch_id}/redeliver: push a finished batch's artifacts to the org's
delivery targets again, after its delivery failed (docs/delivery-targets.md)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path

from batchroute.domain.accounts.access import Principal
from functions.api.auth import require
from functions.api.deps import BucketDeliveryDep, ReadsDep
from functions.api.envelope import errors_doc
from functions.api.schemas.delivery.targets import RedeliveryOut

router = APIRouter(tags=["batches"])

Creator = Annotated[Principal, Depends(require("batches:create"))]


@router.post(
    "/v1/batches/{batch_id}/redeliver",
    status_code=202,
    response_model=RedeliveryOut,
    responses=errors_doc(
        {
            401: "Missing or invalid credentials",
            403: "Another organization's batch, or a role that may not act on batches",
            404: "No such batch (`batch_not_found`)",
            409: "`already_delivered`, `delivery_in_progress`, `batch_not_finished` (not ended, or "
            "its artifacts not assembled yet), `nothing_to_deliver` (a direct chat request), or no "
            "enabled delivery target (`no_delivery_target`)",
            410: "The batch's result bytes were reclaimed by retention (`results_expired`)",
        }
    ),
    summary="Re-enqueue a failed delivery to the org's enabled delivery targets",
)
def redeliver_batch(
    batch_id: Annotated[str, Path(min_length=1, max_length=128)],
    principal: Creator,
    reads: ReadsDep,
    buckets: BucketDeliveryDep,
) -> dict[str, Any]:
    batch = reads.owned(principal, batch_id)  # 404 batch_not_found, or 403 for another org's batch
    return {"batch_id": batch_id, "delivery": buckets.redeliver(batch).to_api()}
