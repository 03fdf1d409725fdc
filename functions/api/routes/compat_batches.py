"""The vendor-compatible surface's batches under /v1/compat/v1 (docs/compat.md): create
(quoted and funded internally; an ordinary batch), read, list with the vendor's cursor
pagination, cancel."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query
from pydantic import BaseModel, ConfigDict, Field

from batchroute.domain.access import Principal
from batchroute.services.compat.batches import CompatBatchRequest
from functions.api.auth import require
from functions.api.compat_envelope import COMPAT_ERRORS
from functions.api.deps import CompatBatchesDep

router = APIRouter(prefix="/v1/compat/v1", tags=["vendor-compatible"], responses=COMPAT_ERRORS)


Creator = Annotated[Principal, Depends(require("batches:create"))]
Reader = Annotated[Principal, Depends(require("batches:read"))]


class BatchCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_file_id: str = Field(min_length=1, max_length=64)
    endpoint: str = Field(description="/v1/chat/completions, /v1/responses or /v1/embeddings")
    completion_window: str = Field(description="24h")
    body_format: Literal["normalized", "raw"] | None = Field(
        default=None, description="default body format of the output file (normalized)"
    )
    metadata: dict[str, Annotated[str, Field(max_length=512)]] | None = None


class RequestCounts(BaseModel):
    total: int
    completed: int
    failed: int


class VendorBatch(BaseModel):
    id: str
    object: Literal["batch"]
    endpoint: str | None
    input_file_id: str | None
    completion_window: str
    status: Literal[
        "validating", "in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled"
    ]
    output_file_id: str | None
    error_file_id: str | None
    errors: dict[str, Any] | None
    created_at: int | None
    in_progress_at: int | None
    expires_at: int | None
    finalizing_at: int | None
    completed_at: int | None
    failed_at: int | None
    expired_at: int | None
    cancelling_at: int | None
    cancelled_at: int | None
    request_counts: RequestCounts
    metadata: dict[str, str] | None
    body_format: Literal["normalized", "raw"]


class VendorBatchList(BaseModel):
    object: Literal["list"]
    data: list[VendorBatch]
    first_id: str | None
    last_id: str | None
    has_more: bool


@router.post("/batches", response_model=VendorBatch, summary="Create a batch from an uploaded input file")
def create_batch(
    body: BatchCreate,
    principal: Creator,
    batches: CompatBatchesDep,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> dict[str, Any]:
    request = CompatBatchRequest(
        input_file_id=body.input_file_id,
        endpoint=body.endpoint,
        completion_window=body.completion_window,
        body_format=body.body_format,
        metadata=body.metadata,
    )
    return batches.create(principal, request, idempotency_key)


@router.get("/batches", response_model=VendorBatchList, summary="The org's compat batches, newest first")
def list_batches(
    principal: Reader,
    batches: CompatBatchesDep,
    after: str | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> dict[str, Any]:
    return batches.list(principal, after=after, limit=limit)


@router.get("/batches/{batch_id}", response_model=VendorBatch, summary="A Batch object")
def get_batch(batch_id: str, principal: Reader, batches: CompatBatchesDep) -> dict[str, Any]:
    return batches.get(principal, batch_id)


@router.post("/batches/{batch_id}/cancel", response_model=VendorBatch, summary="Cancel (best effort)")
def cancel_batch(batch_id: str, principal: Creator, batches: CompatBatchesDep) -> dict[str, Any]:
    return batches.cancel(principal, batch_id)
