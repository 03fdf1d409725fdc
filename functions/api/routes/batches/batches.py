"""Batches: create (202, priced), list, read, items, results, artifacts, cancel, retry, receipt."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Request, Response

from batchroute.domain.accounts.access import Principal
from batchroute.services.batches.commands import request_hash
from batchroute.services.batches.create import CreateAnswer, RetriedView, check_idempotency_key
from batchroute.services.batches.reads import ArtifactUrlView, ItemsPageView, ResultsPageView
from batchroute.services.batches.views import batch_details, batch_summary
from functions.api.auth import require
from functions.api.deps import BatchesDep, BucketDeliveryDep, ReadsDep
from functions.api.envelope import errors_doc
from functions.api.middleware import json_body
from functions.api.openapi import documented_as
from functions.api.schemas.batches.batches import (
    ArtifactUrl,
    BatchCreateRequest,
    BatchEnvelope,
    BatchList,
    BatchRead,
    CancelRequest,
    ItemsPage,
    ResultsPage,
    RetriedBatch,
)
from functions.api.schemas.batches.receipts import BillingReceipt

router = APIRouter(tags=["batches"])


_READ_ERRORS = errors_doc(
    {
        401: "Missing or invalid credentials",
        403: "Another organization's batch, or a role that may not read batches",
        404: "No such batch (`batch_not_found`)",
    }
)
# Content reads once retention reclaimed the batch's bytes (docs/retention.md).
_GONE = errors_doc({410: "The result bytes were reclaimed by retention (`results_expired`)"})


def _plain(value: Any) -> Any:
    """DynamoDB numbers (Decimal) as JSON numbers: left alone, the response model renders them
    as strings ("item_counts": {"total": "10"}), unlike receipt.json and the docs."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


Creator = Annotated[Principal, Depends(require("batches:create"))]
Reader = Annotated[Principal, Depends(require("batches:read"))]


async def _sent(request: Request) -> Any:
    """The body as sent, read before FastAPI validates it (400 `invalid_json` when it is not
    JSON, whatever its content type)."""
    return await json_body(request)


def _replayed(
    principal: Creator,
    batches: BatchesDep,
    sent: Annotated[Any, Depends(_sent)],
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> CreateAnswer | None:
    """The Idempotency-Key is checked, and a replay answered (or refused, 409 with another
    body), before the body is validated, as the spec orders them; a body that is not an
    object is refused first, by its model."""
    if not isinstance(sent, dict):
        return None
    return batches.replay(principal.org_id, check_idempotency_key(idempotency_key), request_hash(sent))


@router.post(
    "/v1/batches",
    status_code=202,
    responses={
        202: {
            "model": BatchEnvelope,
            "description": "The batch, already `priced` (a replay: the first answer)",
        },
        **errors_doc(
            {
                400: "Invalid body or Idempotency-Key, or preflight failed (`batch_preflight_failed`)",
                401: "Missing or invalid credentials",
                402: (
                    "`insufficient_credits`: balance short, or a hard spending limit (details limit, period, "
                    "spent, projected)"
                ),
                403: "The role may not create batches",
                404: "No such quote, input file or work order (`quote_not_found`, `file_not_found`, "
                "`work_order_not_found`)",
                409: "Idempotency-Key reused with another body, quote expired or not matching",
            }
        ),
    },
    summary="Create a batch: credits are reserved from the quote; answers 202 with the batch already priced",
)
def create_batch(
    principal: Creator,
    batches: BatchesDep,
    replayed: Annotated[CreateAnswer | None, Depends(_replayed)],
    body: BatchCreateRequest,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> Response:
    answer = replayed or batches.create(principal, body.command(), idempotency_key)
    headers = {"Idempotent-Replayed": "true"} if answer.replayed else None
    return Response(
        content=answer.body, status_code=answer.status_code, media_type="application/json", headers=headers
    )


@router.get(
    "/v1/batches",
    response_model=documented_as(BatchList),
    responses=_READ_ERRORS,
    summary="The org's batches, newest first",
)
def list_batches(
    principal: Reader,
    reads: ReadsDep,
    state: str | None = None,
    status: str | None = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> dict[str, Any]:
    if state is None and status == "active":
        state = "active"  # `status=active` is an alias; other status values are ignored
    page, next_cursor, total = reads.list_batches(principal, state=state, cursor=cursor, limit=limit)
    sign = reads.sign
    return {
        "data": [batch_summary(b, sign=sign) for b in page],
        "next_cursor": next_cursor,
        "workspace_total_count": total,
    }


@router.get(
    "/v1/batches/{batch_id}",
    response_model=documented_as(BatchRead),
    responses=_READ_ERRORS,
    summary="One batch",
)
def get_batch(
    batch_id: str,
    principal: Reader,
    reads: ReadsDep,
    buckets: BucketDeliveryDep,
    include_details: bool = False,
    include_billing_receipt: bool = False,
) -> dict[str, Any]:
    batch = reads.owned(principal, batch_id)
    summary = batch_summary(batch, sign=reads.sign)
    if include_details:
        details = batch_details(batch, delivery=buckets.view(batch))
        summary["details"] = {**details, "artifacts": reads.files(batch)}
    receipt = None
    if include_billing_receipt:
        summary["lane_statuses"] = reads.lane_statuses(batch)
        receipt = batch.billing if batch.settled_at else None
    return {"batch": _plain(summary), "billing_receipt": _plain(receipt)}


@router.get(
    "/v1/batches/{batch_id}/items",
    response_model=documented_as(ItemsPage),
    responses={**_READ_ERRORS, **_GONE},
    summary="Items with status and previews",
)
def list_items(
    batch_id: str,
    principal: Reader,
    reads: ReadsDep,
    status: Literal["pending", "processing", "completed", "failed"] | None = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> ItemsPageView:
    return reads.items(principal, batch_id, status=status, cursor=cursor, limit=limit)


@router.get(
    "/v1/batches/{batch_id}/results",
    response_model=documented_as(ResultsPage),
    responses={
        **_READ_ERRORS,
        **_GONE,
        **errors_doc(
            {
                409: "Results are ready once the batch is finalized",
                413: "A row too large for one answer (`result_too_large`: read it in the results file; "
                "`details.next_cursor` goes on past it)",
            }
        ),
    },
    summary="One result row per item, in input order, paginated",
)
def list_results(
    batch_id: str,
    principal: Reader,
    reads: ReadsDep,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    body_format: Literal["normalized", "raw"] = "normalized",
) -> ResultsPageView:
    return reads.results(principal, batch_id, cursor=cursor, limit=limit, body_format=body_format)


@router.get(
    "/v1/batches/{batch_id}/artifact-url",
    response_model=documented_as(ArtifactUrl),
    responses={
        **_READ_ERRORS,
        **_GONE,
        **errors_doc({409: "The artifact exists once the batch is finalized"}),
    },
    summary="A short-lived signed URL of the full JSONL results artifact",
)
def artifact_url(batch_id: str, principal: Reader, reads: ReadsDep) -> ArtifactUrlView:
    return reads.artifact_url(principal, batch_id)


@router.post(
    "/v1/batches/{batch_id}/cancel",
    response_model=documented_as(BatchEnvelope),
    responses={**_READ_ERRORS, **errors_doc({409: "The batch is already terminal"})},
    summary="Cancel (best effort): dispatched work may still finish and is charged",
)
def cancel_batch(
    batch_id: str,
    principal: Creator,
    batches: BatchesDep,
    reads: ReadsDep,
    body: CancelRequest | None = None,
) -> dict[str, Any]:
    batch = batches.cancel(principal, batch_id, body.reason if body is not None else None)
    return {"batch": batch_summary(batch, sign=reads.sign)}


@router.post(
    "/v1/batches/{batch_id}/retry",
    status_code=202,
    response_model=documented_as(RetriedBatch),
    responses={**_READ_ERRORS, **_GONE, **errors_doc({409: "Not finished, or nothing failed or canceled"})},
    summary="(beta) A new batch from the failed and canceled items of a finished one",
)
def retry_batch(batch_id: str, principal: Creator, batches: BatchesDep) -> RetriedView:
    return batches.retry(principal, batch_id)


@router.get(
    "/v1/batches/{batch_id}/billing-receipt",
    response_model=documented_as(BillingReceipt),
    responses={**_READ_ERRORS, **errors_doc({409: "Not settled yet (`receipt_not_ready`)"})},
    summary="The billing receipt, once the batch is settled",
)
def billing_receipt(batch_id: str, principal: Reader, reads: ReadsDep) -> dict[str, Any]:
    return dict(_plain(reads.billing_receipt(principal, batch_id)))
