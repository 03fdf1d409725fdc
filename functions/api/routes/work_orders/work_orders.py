"""Work orders (beta): one id over the batches and queued chat jobs of one business job, with
a status and totals derived from its members (docs/work-orders.md). Every role that reads
batches reads them; those that create batches create, change and close them."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query, Response

from batchroute.domain.accounts.access import Principal
from batchroute.domain.work_orders.work_orders import (
    LIST_LIMIT_MAX,
    MemberAddedView,
    MemberListView,
    WorkOrderView,
)
from functions.api.auth import require
from functions.api.deps import WorkOrdersDep
from functions.api.envelope import errors_doc
from functions.api.schemas.work_orders.work_orders import (
    WorkOrderCreate,
    WorkOrderList,
    WorkOrderMemberAdd,
    WorkOrderMemberAdded,
    WorkOrderMemberList,
    WorkOrderOut,
    WorkOrderUpdate,
)

router = APIRouter(tags=["work orders (beta)"])

Reader = Annotated[Principal, Depends(require("batches:read"))]
Writer = Annotated[Principal, Depends(require("batches:create"))]
WorkOrderId = Annotated[str, Path(min_length=1, max_length=64)]

_ERRORS = errors_doc(
    {401: "Missing, invalid or revoked credentials", 403: "The role may not do this (`permission_denied`)"}
)
_ONE = {**_ERRORS, **errors_doc({404: "No such work order in this organization (`work_order_not_found`)"})}
_INVALID = "`invalid_request` with `details.field` naming the field"


@router.post(
    "/v1/work-orders",
    status_code=201,
    responses={
        201: {"model": WorkOrderOut, "description": "The work order (a replay: the first answer)"},
        **_ERRORS,
        **errors_doc(
            {400: _INVALID + ", or a bad Idempotency-Key", 409: "Idempotency-Key reused with another body"}
        ),
    },
    summary="(beta) Create a work order; an Idempotency-Key (optional) is honoured like batch create's",
)
def create_work_order(
    principal: Writer,
    orders: WorkOrdersDep,
    body: WorkOrderCreate,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> Response:
    answer = orders.create(principal, body.command(), idempotency_key)
    headers = {"Idempotent-Replayed": "true"} if answer.replayed else None
    return Response(
        content=answer.body, status_code=answer.status_code, media_type="application/json", headers=headers
    )


@router.get(
    "/v1/work-orders",
    response_model=WorkOrderList,
    responses={**_ERRORS, **errors_doc({400: "A bad status, cursor or limit (`details.field`)"})},
    summary="(beta) The org's work orders, newest first",
)
def list_work_orders(
    principal: Reader,
    orders: WorkOrdersDep,
    status: str | None = None,
    client_reference: Annotated[str | None, Query(max_length=128)] = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=LIST_LIMIT_MAX)] = 20,
) -> dict[str, Any]:
    found, next_cursor = orders.listing(
        principal, status=status, client_reference=client_reference, cursor=cursor, limit=limit
    )
    return {"object": "list", "data": [o.to_api() for o in found], "next_cursor": next_cursor}


@router.get(
    "/v1/work-orders/{work_order_id}",
    response_model=WorkOrderOut,
    responses=_ONE,
    summary="(beta) One work order: status and totals from its members",
)
def get_work_order(work_order_id: WorkOrderId, principal: Reader, orders: WorkOrdersDep) -> WorkOrderView:
    return orders.get(principal, work_order_id).to_api()


@router.patch(
    "/v1/work-orders/{work_order_id}",
    response_model=WorkOrderOut,
    responses={**_ONE, **errors_doc({400: _INVALID})},
    summary="(beta) Rename, replace metadata or close (final) a work order",
)
def update_work_order(
    work_order_id: WorkOrderId, principal: Writer, orders: WorkOrdersDep, body: WorkOrderUpdate
) -> WorkOrderView:
    return orders.update(principal, work_order_id, body.command()).to_api()


@router.post(
    "/v1/work-orders/{work_order_id}/members",
    response_model=WorkOrderMemberAdded,
    responses={
        **_ONE,
        **errors_doc(
            {
                400: _INVALID,
                409: "Closed (`work_order_closed`), full (`work_order_full`), the batch is in a work "
                "order already (`already_in_work_order`) or a direct chat request (`not_attachable`)",
            }
        ),
    },
    summary="(beta) Attach an existing batch or queued chat job of the org",
)
def add_member(
    work_order_id: WorkOrderId, principal: Writer, orders: WorkOrdersDep, body: WorkOrderMemberAdd
) -> MemberAddedView:
    return orders.attach(principal, work_order_id, body.command())


@router.get(
    "/v1/work-orders/{work_order_id}/members",
    response_model=WorkOrderMemberList,
    responses=_ONE,
    summary="(beta) The work order's members, oldest batch first",
)
def list_members(
    work_order_id: WorkOrderId,
    principal: Reader,
    orders: WorkOrdersDep,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=LIST_LIMIT_MAX)] = 20,
) -> MemberListView:
    return orders.members(principal, work_order_id, cursor=cursor, limit=limit)
