"""Work orders in the `controls` table (docs/work-orders.md).

| Item | pk / sk |
|---|---|
| work order (fields and counters) | `ORG#<org>` / `WORKORDER#<wo_id>` |
| member marker | `ORG#<org>` / `WOMEMBER#<wo_id>#<batch_id>` |
| create idempotency record (TTL 24 h) | `ORG#<org>` / `WOIDEMP#<key>` |

A member joins in ONE transaction with the work order's counters, conditional on the work
order existing, open and under `MAX_MEMBERS`: inside the batch create transaction
(`join_items`), or with the batch's own `work_order` field when an existing batch is attached
(`attach`). Its settlement moves the counters once: the marker's `settled_at` is the
condition (`settle_member`), so a repeated Settle message counts nothing twice. An org's
work orders are one `Query` on `begins_with(sk, "WORKORDER#")`, newest first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from botocore.exceptions import ClientError

from batchroute.adapters.dynamo.batch_records import batch_key
from batchroute.adapters.dynamo.codec import (
    EXISTS,
    from_item,
    org_item,
    org_key,
    org_pk,
    plain,
    to_value,
    update_request,
)
from batchroute.adapters.dynamo.reads import pages, prefix_query
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.adapters.dynamo.writes import (
    conditional_transaction,
    first_refused,
    put_new,
    put_unless_live,
)
from batchroute.clock import epoch_seconds
from batchroute.domain.stored import from_counters, from_stored
from batchroute.domain.work_orders.work_orders import (
    MAX_MEMBERS,
    Attachment,
    CounterMove,
    MemberRefused,
    Tallies,
    WorkOrder,
    WorkOrderChange,
    WorkOrderIdempotency,
    WorkOrderMember,
)
from batchroute.transactions import TransactItem

PREFIX = "WORKORDER#"
MEMBER_PREFIX = "WOMEMBER#"
IDEMPOTENCY_PREFIX = "WOIDEMP#"
_NOT_SETTLED = "attribute_exists(pk) AND attribute_not_exists(settled_at)"


class WorkOrderStore(DynamoStore):
    def __init__(self, table_name: str, batches_table: str, dynamodb: Any | None = None) -> None:
        super().__init__(table_name, dynamodb)
        self.batches_table = batches_table

    # -- the work order ------------------------------------------------------------------------
    def create(self, order: WorkOrder, *, idempotency: WorkOrderIdempotency | None = None) -> bool:
        """Write a new work order (and, given, its idempotency record); False when that
        record exists already (a concurrent request with the same key won)."""
        order_item = {
            "pk": org_pk(order.org_id),
            "sk": f"{PREFIX}{order.work_order_id}",
            **_work_order_values(order),
        }
        items: list[TransactItem] = [put_new(self.table_name, order_item)]
        if idempotency is not None:
            record = {
                "pk": org_pk(order.org_id),
                "sk": f"{IDEMPOTENCY_PREFIX}{idempotency.key}",
                "request_hash": idempotency.request_hash,
                "body": idempotency.body,
                "work_order_id": idempotency.work_order_id,
                "ttl": idempotency.ttl,
            }
            items.append(put_unless_live(self.table_name, record, now=epoch_seconds(order.created_at)))
        return self.transact(items)

    def idempotency_record(self, org_id: str, key: str) -> WorkOrderIdempotency | None:
        item = self.item_at(org_key(org_id, f"{IDEMPOTENCY_PREFIX}{key}"))
        if item is None:
            return None
        return WorkOrderIdempotency(
            key=key,
            request_hash=str(item.get("request_hash") or ""),
            body=str(item["body"]),
            work_order_id=str(item.get("work_order_id") or ""),
            ttl=int(item.get("ttl") or 0),
        )

    def get(self, org_id: str, work_order_id: str) -> WorkOrder | None:
        return self.read_at(org_key(org_id, f"{PREFIX}{work_order_id}"), _work_order)

    def page(
        self, org_id: str, *, start_after: str | None, limit: int, client_reference: str | None = None
    ) -> tuple[list[WorkOrder], bool]:
        """Up to `limit` work orders newest first after the id `start_after`; True when more
        may follow (the caller pages on from the last id it read)."""
        start = None if start_after is None else f"{PREFIX}{start_after}"
        kwargs = prefix_query(  # one more than the page: True only when an order follows it
            self.table_name, org_pk(org_id), PREFIX, start_sk=start, ScanIndexForward=False, Limit=limit + 1
        )
        if client_reference is not None:
            kwargs["FilterExpression"] = "client_reference = :ref"
            kwargs["ExpressionAttributeValues"][":ref"] = to_value(client_reference)
        orders: list[WorkOrder] = []
        for response in pages(self.dynamodb.query, kwargs):
            orders.extend(_work_order(from_item(i)) for i in response.get("Items", []))
            if len(orders) > limit:
                return orders[:limit], True
        return orders, False

    def update(self, org_id: str, work_order_id: str, change: WorkOrderChange) -> bool:
        """SET the given plain fields (name, metadata, closed_at, updated_at; a None value is
        REMOVEd); False when the work order does not exist."""
        changes = change.to_item()
        names = {f"#f{i}": name for i, name in enumerate(changes)}
        sets = [f"#f{i} = :f{i}" for i, v in enumerate(changes.values()) if v is not None]
        removes = [f"#f{i}" for i, v in enumerate(changes.values()) if v is None]
        values = {f":f{i}": v for i, v in enumerate(changes.values()) if v is not None}
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        return self.update_where(
            org_key(org_id, f"{PREFIX}{work_order_id}"),
            expression,
            condition=EXISTS,
            names=names,
            values=values,
        )

    # -- members -------------------------------------------------------------------------------
    def join_items(self, move: CounterMove, member: WorkOrderMember) -> list[TransactItem]:
        """The two items that make `member` (its marker's values: batch_id, kind, ...) join:
        the marker (new) and the counters' `move`, conditional on the work order existing,
        open and under the member limit. Written inside another transaction (batch create)
        or by `attach`."""
        sk = f"{MEMBER_PREFIX}{move.work_order_id}#{member.batch_id}"
        marker = {**org_item(move.org_id, sk, "work_order_member"), **asdict(member)}
        return [
            put_new(self.table_name, marker),
            _counters_update(
                self.table_name,
                move,
                condition="attribute_exists(pk) AND attribute_not_exists(closed_at) AND members < :max",
                condition_values={":max": MAX_MEMBERS},
            ),
        ]

    def attach(self, attachment: Attachment) -> None:
        """Attach an existing batch (`Attachment`): the join items and the batch's
        `work_order` field in one transaction, on the attachment's conditions. Raises
        MemberRefused."""
        member, held_micros = attachment.member, attachment.overage_held_micros
        items = self.join_items(attachment.move, member)
        settlement = (
            "attribute_exists(settled_at)" if attachment.settled else "attribute_not_exists(settled_at)"
        )
        held = "overage_held_micros = :held"
        if not held_micros:
            held = "attribute_not_exists(overage_held_micros)"
        condition = f"attribute_exists(pk) AND attribute_not_exists(work_order) AND {settlement} AND {held}"
        values: dict[str, object] = {":ref": attachment.reference.to_mapping()}
        if held_micros:
            values[":held"] = held_micros
        batch = batch_key(member.batch_id)
        items.append(
            {
                "Update": update_request(
                    self.batches_table, batch, "SET work_order = :ref", condition=condition, values=values
                )
            }
        )
        try:
            self.dynamodb.transact_write_items(TransactItems=items)
        except ClientError as exc:
            refused = first_refused(exc, ("member", "work_order", "batch"))
            if refused is None:
                raise
            raise MemberRefused(refused) from exc

    def hold_items(self, move: CounterMove, batch_id: str) -> list[TransactItem]:
        """A member's rescue overage hold (written in the hold's transaction): the counters'
        `move` and the member marker's `reserved_micros`, while the member is unsettled."""
        marker = {
            "Update": update_request(
                self.table_name,
                org_key(move.org_id, f"{MEMBER_PREFIX}{move.work_order_id}#{batch_id}"),
                "ADD reserved_micros :amount",
                condition=_NOT_SETTLED,
                values={":amount": move.deltas["reserved_micros"]},
            )
        }
        return [marker, _counters_update(self.table_name, move, condition="attribute_exists(pk)")]

    def settle_member(self, move: CounterMove, batch_id: str, *, outcome: str) -> bool:
        """Count a member's settlement once: its marker gets `settled_at` (conditional on not
        having it) and the counters `move`, in one transaction. False when it was counted
        already (a repeated Settle) or is no member."""
        return conditional_transaction(
            self.dynamodb,
            TransactItems=[
                {
                    "Update": update_request(
                        self.table_name,
                        org_key(move.org_id, f"{MEMBER_PREFIX}{move.work_order_id}#{batch_id}"),
                        "SET settled_at = :at, outcome = :outcome",
                        condition=_NOT_SETTLED,
                        values={":at": move.at, ":outcome": outcome},
                    )
                },
                _counters_update(self.table_name, move, condition="attribute_exists(pk)"),
            ],
        )

    def members(
        self, org_id: str, work_order_id: str, *, start_after: str | None, limit: int
    ) -> tuple[list[WorkOrderMember], str | None]:
        """The member markers in join... id order (batch ids are time-sorted), a page."""
        prefix = f"{MEMBER_PREFIX}{work_order_id}#"
        start = None if start_after is None else f"{prefix}{start_after}"
        request = prefix_query(  # one more than the page: a cursor only when a member follows it
            self.table_name, org_pk(org_id), prefix, start_sk=start, Limit=limit + 1, ConsistentRead=True
        )
        rows: list[WorkOrderMember] = []
        for response in pages(self.dynamodb.query, request):
            rows.extend(from_stored(WorkOrderMember, plain(from_item(i))) for i in response.get("Items", []))
            if len(rows) > limit:
                return rows[:limit], rows[limit - 1].batch_id
        return rows, None


def _counters_update(
    table: str,
    move: CounterMove,
    *,
    condition: str,
    condition_values: Mapping[str, object] | None = None,
) -> TransactItem:
    """The work order's counters moved by `move.deltas` (a zero moves nothing), at `move.at`."""
    moved = {name: n for name, n in move.deltas.items() if n}
    expression = "SET updated_at = :at"
    if moved:
        expression += " ADD " + ", ".join(f"#t{i} :t{i}" for i in range(len(moved)))
    update = update_request(
        table,
        org_key(move.org_id, f"{PREFIX}{move.work_order_id}"),
        expression,
        condition=condition,
        names={f"#t{i}": name for i, name in enumerate(moved)},
        values={
            **{f":t{i}": n for i, n in enumerate(moved.values())},
            ":at": move.at,
            **(condition_values or {}),
        },
    )
    return {"Update": update}


def _work_order_values(order: WorkOrder) -> dict[str, Any]:
    """A work order's attributes: its counters flat beside its own fields."""
    values = asdict(order)
    del values["tallies"]
    return {"kind": "work_order", **values, "metadata": dict(order.metadata), **asdict(order.tallies)}


def _work_order(values: dict[str, Any]) -> WorkOrder:
    item = plain(values)
    return from_stored(
        WorkOrder,
        item,
        metadata={str(k): str(v) for k, v in (item.get("metadata") or {}).items()},
        updated_at=str(item.get("updated_at") or item["created_at"]),
        tallies=from_counters(Tallies, item),
    )
