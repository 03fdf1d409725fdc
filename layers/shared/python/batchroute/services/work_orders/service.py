"""Work orders (beta): create, list, read, change and close, attach members; and the two hooks
the batch paths call: `joining` / `join_items` inside batch create (a batch or queued chat job
naming `work_order_id` joins in its own create transaction) and `member_settled` from the
workflow's Settle step (docs/work-orders.md; the rules in domain/work_orders/work_orders.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal, authorize, require_same_org
from batchroute.domain.batches.record import BatchRecord, batch_id_for
from batchroute.domain.chat.objects import CHAT_SOURCE
from batchroute.domain.request_fields import invalid
from batchroute.domain.work_orders.work_orders import (
    MAX_MEMBERS,
    WORK_ORDER_STATUSES,
    Attachment,
    CounterMove,
    MemberAddedView,
    MemberKind,
    MemberListView,
    MemberRefused,
    WorkOrder,
    WorkOrderChange,
    WorkOrderIdempotency,
    WorkOrderMember,
    member_outcome,
    settled_items,
)
from batchroute.errors import Conflict, InvalidRequest, NotFound, ServiceError
from batchroute.ids import new_id
from batchroute.money import Money
from batchroute.observability import logger
from batchroute.services.batches.create import IDEMPOTENCY_TTL, check_idempotency_key, replayed_body
from batchroute.services.batches.ports import BatchReader
from batchroute.services.work_orders.commands import AddMember, CreateWorkOrder, UpdateWorkOrder
from batchroute.transactions import TransactItem

# Pages of the store a filtered listing reads at most per request before it answers with
# what it found (and a cursor to go on from).
MAX_PAGES_PER_LISTING = 10


class WorkOrderStore(Protocol):
    def create(self, order: WorkOrder, *, idempotency: WorkOrderIdempotency | None = None) -> bool: ...

    def idempotency_record(self, org_id: str, key: str) -> WorkOrderIdempotency | None: ...

    def get(self, org_id: str, work_order_id: str) -> WorkOrder | None: ...

    def page(
        self, org_id: str, *, start_after: str | None, limit: int, client_reference: str | None = None
    ) -> tuple[list[WorkOrder], bool]: ...

    def update(self, org_id: str, work_order_id: str, change: WorkOrderChange) -> bool: ...

    def join_items(self, move: CounterMove, member: WorkOrderMember) -> list[TransactItem]: ...

    def attach(self, attachment: Attachment) -> None: ...

    def hold_items(self, move: CounterMove, batch_id: str) -> list[TransactItem]: ...

    def settle_member(self, move: CounterMove, batch_id: str, *, outcome: str) -> bool: ...

    def members(
        self, org_id: str, work_order_id: str, *, start_after: str | None, limit: int
    ) -> tuple[list[WorkOrderMember], str | None]: ...


@dataclass(frozen=True)
class CreatedWorkOrder:
    status_code: int
    body: bytes
    replayed: bool = False


def not_found() -> NotFound:
    return NotFound("No such work order.", code="work_order_not_found")


def _kind(batch: BatchRecord) -> MemberKind:
    return "chat_job" if batch.source == CHAT_SOURCE else "batch"


@dataclass(eq=False)
class WorkOrders:
    store: WorkOrderStore
    batches: BatchReader
    clock: Clock

    # -- the resource --------------------------------------------------------------------------
    def create(
        self, principal: Principal, command: CreateWorkOrder, idempotency_key: str | None
    ) -> CreatedWorkOrder:
        """A new, empty work order. An Idempotency-Key (optional) is honoured like batch
        create's: the same key and body replay the first answer, another body is 409."""
        authorize(principal, "batches:create")
        # optional: a blank header is no key (as on the vendor-compatible surface), not a refusal
        given = idempotency_key if idempotency_key and idempotency_key.strip() else None
        key = check_idempotency_key(given) if given is not None else None
        fingerprint = command.request_hash
        if key is not None:
            replay = self._replay(principal.org_id, key, fingerprint)
            if replay is not None:
                return replay
        now = self.clock.now()
        order = WorkOrder(
            work_order_id=new_id("wo", now),
            org_id=principal.org_id,
            name=command.name,
            client_reference=command.client_reference,
            metadata=command.metadata,
            created_at=isoformat(now),
            updated_at=isoformat(now),
            created_by=principal.user_id or principal.key_id,
        )
        answer = json.dumps(order.to_api(), separators=(",", ":")).encode()
        idempotency = None
        if key is not None:
            idempotency = WorkOrderIdempotency(
                key=key,
                request_hash=fingerprint,
                body=answer.decode(),
                work_order_id=order.work_order_id,
                ttl=int((now + IDEMPOTENCY_TTL).timestamp()),
            )
        if not self.store.create(order, idempotency=idempotency):
            replay = self._replay(principal.org_id, str(key), fingerprint) if key is not None else None
            if replay is None:
                raise Conflict("This work order could not be written; retry.", code="concurrent_update")
            return replay
        logger.info(
            "work order created", extra={"org_id": principal.org_id, "work_order_id": order.work_order_id}
        )
        return CreatedWorkOrder(201, answer)

    def _replay(self, org_id: str, key: str, fingerprint: str) -> CreatedWorkOrder | None:
        body = replayed_body(self.store.idempotency_record(org_id, key), fingerprint, now=self.clock.now())
        return None if body is None else CreatedWorkOrder(201, body, replayed=True)

    def get(self, principal: Principal, work_order_id: str) -> WorkOrder:
        authorize(principal, "batches:read")
        order = self.store.get(principal.org_id, work_order_id) if work_order_id.startswith("wo_") else None
        if order is None:
            raise not_found()
        return order

    def listing(
        self,
        principal: Principal,
        *,
        status: str | None,
        client_reference: str | None,
        cursor: str | None,
        limit: int,
    ) -> tuple[list[WorkOrder], str | None]:
        """Newest first; `status` and `client_reference` filter. A filtered page reads at most
        MAX_PAGES_PER_LISTING store pages and may come back short with a cursor."""
        authorize(principal, "batches:read")
        if status is not None and status not in WORK_ORDER_STATUSES:
            raise invalid("status", f"status must be one of {', '.join(WORK_ORDER_STATUSES)}.")
        if cursor is not None and not cursor.startswith("wo_"):
            raise InvalidRequest("cursor must be a value returned as next_cursor.", code="invalid_cursor")
        found: list[WorkOrder] = []
        after = cursor
        for _ in range(MAX_PAGES_PER_LISTING):
            page, more = self.store.page(
                principal.org_id, start_after=after, limit=limit, client_reference=client_reference
            )
            for index, order in enumerate(page):
                after = order.work_order_id
                if status is None or order.status == status:
                    found.append(order)
                    if len(found) == limit:  # a cursor only when an order may follow
                        rest = page[index + 1 :]
                        follows = more or any(status is None or o.status == status for o in rest)
                        return found, after if follows else None
            if not more:
                return found, None
        return found, after

    def update(self, principal: Principal, work_order_id: str, command: UpdateWorkOrder) -> WorkOrder:
        """Apply the fields the command gives (each checked at the edge)."""
        authorize(principal, "batches:create")
        current = self.get(principal, work_order_id)
        at = isoformat(self.clock.now())
        change = WorkOrderChange(
            updated_at=at,
            name=command.name,
            renamed="name" in command.given,
            metadata=command.metadata if "metadata" in command.given else None,
            closed_at=at if command.closed and current.closed_at is None else None,
        )
        if not self.store.update(principal.org_id, work_order_id, change):
            raise not_found()
        return self.get(principal, work_order_id)

    # -- members -------------------------------------------------------------------------------
    def attach(self, principal: Principal, work_order_id: str, joining: AddMember) -> MemberAddedView:
        """Attach an existing batch or queued chat job of the org (not yet in a work order)."""
        authorize(principal, "batches:create")
        kind, given_id = joining.kind, joining.member_id
        order = self.get(principal, work_order_id)
        batch_id = batch_id_for(given_id) if kind == "chat_job" else given_id
        batch = self.batches.get(batch_id) if batch_id else None
        field_name = "chat_job_id" if kind == "chat_job" else "batch_id"
        # a batch_id names any batch of the org, a queued chat job's too (it joins as the job)
        if batch is None or (kind == "chat_job" and batch.source != CHAT_SOURCE):
            raise NotFound(
                f"No such {kind.replace('_', ' ')}.",
                code="batch_not_found" if kind == "batch" else "chat_job_not_found",
                details={"field": field_name},
            )
        require_same_org(principal, batch.org_id)
        if batch.source == "chat_direct":
            raise Conflict(
                "A direct chat request is not a job; only batches and queued chat jobs join.",
                code="not_attachable",
                details={"field": field_name},
            )
        if batch.work_order_id is not None:
            raise Conflict(
                "This batch belongs to a work order already.",
                code="already_in_work_order",
                details={"field": field_name, "work_order_id": batch.work_order_id},
            )
        self._check_open(order)
        at = isoformat(self.clock.now())
        settled = batch.settled_at is not None
        member = self._member(batch, at)
        if settled:
            member = replace(member, settled_at=batch.settled_at, outcome=member_outcome(batch.state))
        deltas = self._settled_deltas(batch, joining=True) if settled else self._join_deltas(batch)
        try:
            self.store.attach(
                Attachment(
                    CounterMove(principal.org_id, work_order_id, deltas, at),
                    member,
                    reference=order.reference,
                    settled=settled,
                    overage_held_micros=batch.overage_held_micros or 0,
                )
            )
        except MemberRefused as exc:
            raise self._refusal(principal.org_id, work_order_id, exc.what, field_name) from exc
        return {"work_order": self.get(principal, work_order_id).to_api(), "member": member.to_api()}

    def members(
        self, principal: Principal, work_order_id: str, *, cursor: str | None, limit: int
    ) -> MemberListView:
        self.get(principal, work_order_id)
        if cursor is not None and not cursor.startswith("batch_"):
            raise InvalidRequest("cursor must be a value returned as next_cursor.", code="invalid_cursor")
        rows, next_cursor = self.store.members(
            principal.org_id, work_order_id, start_after=cursor, limit=limit
        )
        return {
            "object": "list",
            "data": [member.to_api() for member in rows],
            "next_cursor": next_cursor,
        }

    # -- hooks of the batch paths --------------------------------------------------------------
    def joining(self, org_id: str, work_order_id: str) -> WorkOrder:
        """The open work order a batch being created names (404, or 409 closed / full)."""
        order = self.store.get(org_id, work_order_id)
        if order is None:
            raise NotFound(
                "No such work order.", code="work_order_not_found", details={"field": "work_order_id"}
            )
        self._check_open(order)
        return order

    def join_items(self, batch: BatchRecord) -> list[TransactItem]:
        """What batch create writes in its transaction so `batch` joins its work order."""
        work_order_id = batch.work_order_id
        if work_order_id is None:
            return []
        at = batch.created_at
        return self.store.join_items(
            CounterMove(batch.org_id, work_order_id, self._join_deltas(batch), at), self._member(batch, at)
        )

    def overage_items(self, batch: BatchRecord, amount_micros: int) -> list[TransactItem]:
        """What a rescue's overage hold writes in its transaction (services/workflow/overage.py)
        so the batch's work order, if any, counts the hold as reserved until Settle."""
        work_order_id = batch.work_order_id
        if work_order_id is None:
            return []
        move = CounterMove(
            batch.org_id, work_order_id, {"reserved_micros": amount_micros}, isoformat(self.clock.now())
        )
        return self.store.hold_items(move, batch.batch_id)

    def refused(self, org_id: str, work_order_id: str) -> ServiceError:
        """Why a create transaction's join was refused (it closed or filled meanwhile)."""
        return self._refusal(org_id, work_order_id, "work_order", "work_order_id")

    def member_settled(self, batch: BatchRecord, *, charged_micros: int) -> None:
        """Settle's hook: count a settled member once (a repeat counts nothing)."""
        work_order_id = batch.work_order_id
        if work_order_id is None:
            return
        outcome = member_outcome(batch.state)
        deltas = self._settled_deltas(batch, joining=False, charged_micros=charged_micros)
        counted = self.store.settle_member(
            CounterMove(batch.org_id, work_order_id, deltas, isoformat(self.clock.now())),
            batch.batch_id,
            outcome=outcome,
        )
        logger.info(
            "work order member settled",
            extra={
                "work_order_id": work_order_id,
                "batch_id": batch.batch_id,
                "outcome": outcome,
                "counted": counted,
            },
        )

    # -- rules ---------------------------------------------------------------------------------
    def _check_open(self, order: WorkOrder) -> None:
        if order.closed_at is not None:
            raise Conflict(
                "This work order is closed: no member may join.",
                code="work_order_closed",
                details={"field": "work_order_id"},
            )
        if order.tallies.members >= MAX_MEMBERS:
            raise Conflict(
                f"A work order holds at most {MAX_MEMBERS} members.",
                code="work_order_full",
                details={"field": "work_order_id", "limit": MAX_MEMBERS},
            )

    def _refusal(self, org_id: str, work_order_id: str, what: str, field_name: str) -> ServiceError:
        if what == "work_order":
            order = self.store.get(org_id, work_order_id)
            if order is None:
                return not_found()
            try:
                self._check_open(order)
            except Conflict as refused:
                return refused
        if what == "member":
            return Conflict(
                "This batch is a member already.", code="already_in_work_order", details={"field": field_name}
            )
        return Conflict(
            "The batch changed while it was attached; retry.",
            code="concurrent_update",
            details={"field": field_name},
        )

    @staticmethod
    def _member(batch: BatchRecord, at: str) -> WorkOrderMember:
        return WorkOrderMember(
            batch_id=batch.batch_id,
            member_kind=_kind(batch),
            joined_at=at,
            items_total=batch.item_count,
            reserved_micros=batch.held_micros,
        )

    @staticmethod
    def _join_deltas(batch: BatchRecord) -> dict[str, int]:
        return {
            "members": 1,
            "members_active": 1,
            "items_total": batch.item_count,
            "reserved_micros": batch.held_micros,
        }

    @staticmethod
    def _settled_deltas(
        batch: BatchRecord, *, joining: bool, charged_micros: int | None = None
    ) -> dict[str, int]:
        outcome = member_outcome(batch.state)
        if charged_micros is None:
            charged = batch.billing.get("credit_charged") if batch.billing else None
            amount = charged.get("amount") if charged else None
            charged_micros = Money.usd(str(amount or "0")).micros
        deltas = {f"members_{outcome}": 1, "charged_micros": charged_micros}
        deltas.update(settled_items(batch.counts, batch.item_count))
        if joining:
            deltas.update(members=1, items_total=batch.item_count)
        else:
            deltas.update(members_active=-1, reserved_micros=-batch.held_micros)
        return deltas
