"""Request and response models: work orders (beta; docs/work-orders.md).

Every body is checked here, once, and becomes its command (services/work_orders/commands.py);
each problem is `invalid_request` with `details.field`. The create body is also hashed as
sent, for its Idempotency-Key.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator
from pydantic_core.core_schema import ValidatorFunctionWrapHandler

from batchroute.domain.work_orders.work_orders import (
    CLIENT_REFERENCE_MAX,
    MAX_MEMBERS,
    NAME_MAX,
    WorkOrderStatus,
    member_of,
    parse_client_reference,
    parse_closed,
    parse_metadata_map,
    parse_name,
    require_changes,
)
from batchroute.services.batches.commands import request_hash
from batchroute.services.work_orders.commands import AddMember, CreateWorkOrder, UpdateWorkOrder
from functions.api.schemas.batches.batches import Metadata
from functions.api.schemas.common import SOME_TEXT, MoneyOut, ResourceBody, domain_rule, omittable

_REFERENCE = "Your own id for the business job (an order number, a ticket); filterable, not unique"


Name = Annotated[
    str | None,
    domain_rule(
        parse_name, Annotated[str, Field(min_length=1, max_length=NAME_MAX, pattern=SOME_TEXT)] | None
    ),
]
MetadataMap = Annotated[dict[str, str], domain_rule(parse_metadata_map, Metadata | None)]


class WorkOrderCreate(ResourceBody):
    """A new, empty work order. Unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")

    name: Name = omittable("A label")
    client_reference: Annotated[
        str | None,
        domain_rule(
            parse_client_reference,
            Annotated[str, Field(min_length=1, max_length=CLIENT_REFERENCE_MAX, pattern=SOME_TEXT)] | None,
        ),
    ] = omittable(_REFERENCE)
    metadata: MetadataMap = omittable("Key-value pairs, as on a batch")

    _request_hash: str = PrivateAttr("")

    @model_validator(mode="wrap")
    @classmethod
    def _hashed_as_sent(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        body = handler(data)
        body._request_hash = request_hash(data)
        return body

    def command(self) -> CreateWorkOrder:
        return CreateWorkOrder(
            request_hash=self._request_hash,
            name=self.name,
            client_reference=self.client_reference,
            metadata=self.metadata or {},
        )


class WorkOrderUpdate(ResourceBody):
    """Only the fields given change. Closing is final: no member joins a closed work order."""

    model_config = ConfigDict(extra="forbid")

    name: Name = omittable("A label; null clears it")
    metadata: MetadataMap = omittable("Replaces the whole map")
    closed: Annotated[Literal[True], domain_rule(parse_closed, Literal[True])] = omittable(
        "true closes the work order"
    )

    def command(self) -> UpdateWorkOrder:
        return UpdateWorkOrder(
            given=require_changes(frozenset(self.given())),
            name=self.name,
            metadata=self.metadata or {},
            closed=self.closed is True,
        )


class WorkOrderMemberAdd(ResourceBody):
    """An existing batch or queued chat job of the org, not yet in a work order: exactly one
    of the two ids."""

    model_config = ConfigDict(extra="forbid")

    batch_id: str | None = omittable("batch_...")
    chat_job_id: str | None = omittable("chatjob_...")

    def command(self) -> AddMember:
        kind, member_id = member_of(self.batch_id, self.chat_job_id)
        return AddMember(kind, member_id)


class WorkOrderMembersCount(BaseModel):
    total: int
    in_progress: int = Field(description="Members not settled yet")
    completed: int
    failed: int
    canceled: int
    expired: int
    limit: int = Field(description=f"Members a work order may hold ({MAX_MEMBERS})")


class WorkOrderItems(BaseModel):
    total: int
    pending: int = Field(description="Items of members still in progress")
    completed: int
    failed: int
    canceled: int = Field(description="Items of settled members that neither completed nor failed")


class WorkOrderCost(BaseModel):
    reserved: MoneyOut = Field(description="Credit still reserved by members in progress")
    charged: MoneyOut = Field(description="Credit charged by settled members")


class WorkOrderOut(BaseModel):
    """(beta) A work order: status and totals derived from its members."""

    id: str = Field(description="wo_...")
    object: Literal["work_order"]
    name: str | None
    client_reference: str | None
    metadata: dict[str, str]
    status: WorkOrderStatus = Field(description="Derived from the members (docs/work-orders.md, Status)")
    closed: bool
    closed_at: str | None
    created_at: str
    updated_at: str
    members: WorkOrderMembersCount
    items: WorkOrderItems
    cost: WorkOrderCost


class WorkOrderList(BaseModel):
    object: Literal["list"]
    data: list[WorkOrderOut]
    next_cursor: str | None = Field(description="null at the end")


class WorkOrderMemberOut(BaseModel):
    batch_id: str
    kind: Literal["batch", "chat_job"]
    chat_job_id: str | None
    joined_at: str
    items: int
    reserved: MoneyOut = Field(description="What the member reserved when it joined")
    settled_at: str | None
    outcome: Literal["completed", "failed", "canceled", "expired"] | None


class WorkOrderMemberList(BaseModel):
    object: Literal["list"]
    data: list[WorkOrderMemberOut]
    next_cursor: str | None


class WorkOrderMemberAdded(BaseModel):
    work_order: WorkOrderOut
    member: WorkOrderMemberOut
