"""The vendor-compatible surface's batches under /v1/compat/v1 (docs/compat.md): create
(quoted and funded internally; an ordinary batch), read, list with the vendor's cursor
pagination, cancel."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query

from batchroute.domain.accounts.access import Principal
from batchroute.domain.compat.batches import VendorBatchListView, VendorBatchView
from batchroute.services.compat.batches import CompatBatchRequest
from functions.api.auth import require
from functions.api.compat_envelope import COMPAT_ERRORS, compat_errors_doc
from functions.api.deps import CompatBatchesDep
from functions.api.schemas.compat.compat import VendorBatch, VendorBatchCreate, VendorBatchList

router = APIRouter(prefix="/v1/compat/v1", tags=["vendor-compatible"], responses=COMPAT_ERRORS)


Creator = Annotated[Principal, Depends(require("batches:create"))]
Reader = Annotated[Principal, Depends(require("batches:read"))]


@router.post(
    "/batches",
    response_model=VendorBatch,
    responses=compat_errors_doc(
        {409: "The Idempotency-Key was used with another body (`idempotency_conflict`)"}
    ),
    summary="Create a batch from an uploaded input file",
)
def create_batch(
    body: VendorBatchCreate,
    principal: Creator,
    batches: CompatBatchesDep,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> VendorBatchView:
    request = CompatBatchRequest(
        input_file_id=body.input_file_id,
        endpoint=body.endpoint,
        completion_window=body.completion_window,
        body_format=body.body_format,
        metadata=body.metadata,
        output_expires_after=body.output_expires_after,
    )
    return batches.create(principal, request, idempotency_key)


@router.get("/batches", response_model=VendorBatchList, summary="The org's compat batches, newest first")
def list_batches(
    principal: Reader,
    batches: CompatBatchesDep,
    after: str | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> VendorBatchListView:
    return batches.list(principal, after=after, limit=limit)


@router.get("/batches/{batch_id}", response_model=VendorBatch, summary="A Batch object")
def get_batch(batch_id: str, principal: Reader, batches: CompatBatchesDep) -> VendorBatchView:
    return batches.get(principal, batch_id)


@router.post(
    "/batches/{batch_id}/cancel",
    response_model=VendorBatch,
    summary="Cancel (best effort)",
    responses=compat_errors_doc({409: "The batch has ended: nothing to cancel (`batch_not_cancellable`)"}),
)
def cancel_batch(batch_id: str, principal: Creator, batches: CompatBatchesDep) -> VendorBatchView:
    return batches.cancel(principal, batch_id)
