"""The batches table's batch records (`domain/batches/record.py`): the batch's META and PLAN
items, its step journal, its create transaction and its idempotency records.

A batch is two items under `BATCH#<id>`: `META` (state, counts, billing: small, rewritten
as work lands) and `PLAN` (the quote's routing plan, the per-chunk model counts, the input
file's intake and the request's routing fields: written at create, updated by Intake only).
DynamoDB bills every write by the size of the whole item, and the META item is updated
twice per chunk per lane, so the large immutable parts live apart: see bench/RESULTS.md
(pipeline) for what that saves. `batch_values` and `batch_from_items` are the one
conversion between a `BatchRecord` and those items.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, cast

from botocore.exceptions import ClientError

from batchroute.adapters.dynamo.codec import (
    decimals,
    delete_request,
    from_item,
    plain,
    set_update,
    to_value,
    update_request,
)
from batchroute.adapters.dynamo.lane_records import lane_from_item, lane_item
from batchroute.adapters.dynamo.ledger import (
    is_transaction_conflict,
    reservation_failure,
)
from batchroute.adapters.dynamo.limit_checks import SpendingLimitChecks
from batchroute.adapters.dynamo.reads import index_before, pages, prefix_query
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.adapters.dynamo.writes import (
    cancellation_codes,
    condition_failed_at,
    conditional_update,
    put_new,
    put_unless_live,
)
from batchroute.clock import epoch_seconds
from batchroute.domain.batches.record import (
    BatchChanges,
    BatchRecord,
    DuplicateIdempotencyKey,
    ExtraItemRefused,
    FundingMoved,
    IdempotencyRecord,
    OverageHold,
    OverageRefused,
    PlanChanges,
    WorkOrderRef,
    WorkOrderRefItem,
)
from batchroute.domain.batches.states import BatchState, allowed_sources
from batchroute.domain.billing.ledger import DuplicateReservation
from batchroute.domain.routing.lane_plan import LaneRecord
from batchroute.domain.stored import from_stored, sparse
from batchroute.domain.workflow.finalize_cursor import CursorChanges, FinalizeCursor, stored_parts
from batchroute.domain.workflow.results import MergeTally
from batchroute.transactions import TransactItem

DEADLINE_PARTITION = "DEADLINE"
RECLAIM_PARTITION = "RECLAIM"  # retention GC (docs/retention.md): `BATCH#<id>`/`RECLAIM` items
# ... while the entry is a kept batch's re-check, not its reclaim time: a sweep serves it after
# the due reclaims, so no number of kept batches delays another's bytes going.
REVIEW_PARTITION = "RECLAIM_REVIEW"
# A created batch whose workflow has not been seen to start: `BATCH#<id>`/`START` on gsi2
# under `START`, sorted by creation, written by the create transaction and removed once the
# start is recorded (the sweeper starts what is left: services/batches/launch.py).
START_PARTITION = "START"
PLAN_FIELDS = ("plan", "chunk_models", "intake", "routing_fields", "fees")
_NOT_RECLAIMED = "attribute_exists(pk) AND attribute_not_exists(artifacts_reclaimed_at)"


def batch_key(batch_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"BATCH#{batch_id}"}, "sk": {"S": "META"}}


def _reclaim_key(batch_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"BATCH#{batch_id}"}, "sk": {"S": "RECLAIM"}}


def _reclaim_entry(batch_id: str, review_at: str) -> dict[str, Any]:
    """The batch's entry on the reclaim index, to be looked at `review_at`."""
    return {
        "pk": f"BATCH#{batch_id}",
        "sk": "RECLAIM",
        "kind": "reclaim",
        "gsi2pk": RECLAIM_PARTITION,
        "gsi2sk": f"{review_at}#{batch_id}",
    }


def lane_values(batch_id: str, lane: LaneRecord) -> dict[str, Any]:
    """A lane record as its item `BATCH#<id>`/`LANE#<lane key>`."""
    return {"pk": f"BATCH#{batch_id}", "sk": f"LANE#{lane.lane_key}", "kind": "lane", **lane_item(lane)}


def batch_values(batch: BatchRecord, *, deadline_index: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
    """The META and PLAN items of a batch (plain values, keys included). `deadline_index`
    puts META on the sparse SLA index (gsi2: swept at `deadline_at`) until it is terminal."""
    values = decimals(batch.to_mapping())  # a float (a plan's gate detail: a score) as Decimal
    pk = f"BATCH#{batch.batch_id}"
    meta = {
        "pk": pk,
        "sk": "META",
        "kind": "batch",
        "gsi1pk": f"ORG#{batch.org_id}",
        "gsi1sk": f"BATCH#{batch.batch_id}",
    }
    if deadline_index and batch.deadline_at is not None:
        meta.update(gsi2pk=DEADLINE_PARTITION, gsi2sk=f"{batch.deadline_at}#{batch.batch_id}")
    meta.update({k: v for k, v in values.items() if k not in PLAN_FIELDS})
    plan = {"pk": pk, "sk": "PLAN", "kind": "batch_plan"}
    plan.update({k: values[k] for k in PLAN_FIELDS if k in values})
    return meta, plan


def _start_entry(batch: BatchRecord) -> dict[str, Any]:
    return {
        "pk": f"BATCH#{batch.batch_id}",
        "sk": "START",
        "kind": "workflow_start",
        "gsi2pk": START_PARTITION,
        "gsi2sk": f"{batch.created_at}#{batch.batch_id}",
    }


def _start_key(batch_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"BATCH#{batch_id}"}, "sk": {"S": "START"}}


def batch_from_items(meta: Mapping[str, Any], plan: Mapping[str, Any] | None = None) -> BatchRecord:
    """The record of its stored META item (deserialized) and, when read, its PLAN item."""
    values = dict(meta)
    for name in PLAN_FIELDS:
        if plan is not None and name in plan:
            values[name] = plan[name]
    return BatchRecord.from_mapping(values)


class BatchRecords(DynamoStore):
    def get(self, batch_id: str) -> BatchRecord | None:
        """The whole batch: META with the PLAN item's fields, in one strongly consistent query."""
        response = self.dynamodb.query(
            TableName=self.table_name,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :meta AND :plan",
            ExpressionAttributeValues={
                ":pk": to_value(f"BATCH#{batch_id}"),
                ":meta": to_value("META"),
                ":plan": to_value("PLAN"),
            },
            ConsistentRead=True,
        )
        parts = {item["sk"]["S"]: from_item(item) for item in response.get("Items", [])}
        if "META" not in parts:
            return None
        return batch_from_items(parts["META"], parts.get("PLAN"))

    def state(self, batch_id: str) -> str | None:
        """Only the batch's state (the lane loop checks it before every chunk)."""
        response = self.dynamodb.get_item(
            TableName=self.table_name,
            Key=batch_key(batch_id),
            ProjectionExpression="#state",
            ExpressionAttributeNames={"#state": "state"},
            ConsistentRead=True,
        )
        item = response.get("Item")
        return str(from_item(item)["state"]) if item and "state" in item else None

    def record_step(self, batch_id: str, step: str, at: str) -> bool:
        """Journal a finished workflow step; False when the batch does not exist."""
        return self._update_meta(
            batch_id,
            "SET workflow_steps.#step = :at",
            "attribute_exists(pk) AND attribute_type(workflow_steps, :map)",
            {":at": at, ":map": "M"},
            names={"#step": step},
        ) or self._start_journal(batch_id, step, at)

    def _start_journal(self, batch_id: str, step: str, at: str) -> bool:
        return self._update_meta(
            batch_id,
            "SET workflow_steps = if_not_exists(workflow_steps, :steps)",
            "attribute_exists(pk)",
            {":steps": {step: at}},
        )

    def _update_meta(
        self,
        batch_id: str,
        update: str,
        condition: str,
        values: dict[str, object],
        *,
        names: dict[str, str] | None = None,
    ) -> bool:
        """One UpdateItem of the batch's META item; False when `condition` did not hold."""
        return self.update_where(batch_key(batch_id), update, condition=condition, names=names, values=values)

    def past_deadline(self, now_iso: str, limit: int = 100) -> list[str]:
        """Ids of non-terminal batches whose SLA deadline is before `now_iso` (sparse index gsi2)."""
        response = self.dynamodb.query(
            **index_before(self.table_name, "gsi2", DEADLINE_PARTITION, now_iso, Limit=limit)
        )
        # The index projects keys only: the id is the table key's suffix.
        return [item["pk"]["S"].removeprefix("BATCH#") for item in response.get("Items", [])]

    # -- retention GC (docs/retention.md) -------------------------------------------------------
    # A finished batch has one `BATCH#<id>`/`RECLAIM` item on the sparse gsi2 under `RECLAIM`,
    # sorted by when the sweeper should look at it next (`<review_at>#<batch_id>`). It is a
    # separate item because META's own gsi2 entry (the SLA deadline) is removed by the
    # terminal transition, whatever order Finalize and that transition run in.
    def schedule_reclaim(self, batch_id: str, *, review_at: str) -> bool:
        """Put the batch on the reclaim index once; False when it is there already (a
        repeated Finalize keeps the first schedule and whatever the sweeper made of it)."""
        return self.insert_once(_reclaim_entry(batch_id, review_at))

    def _drop_orphan_entry(self, batch_id: str) -> TransactItem:
        """The create transaction's removal of the entry put before the input chunks were
        written (`schedule_reclaim` by batch create): with the batch committed, its chunks are
        the batch's; without it, the entry leads retention to chunks no batch owns."""
        return {"Delete": delete_request(self.table_name, _reclaim_key(batch_id))}

    def reclaim_now(self, batch_id: str, *, at: str) -> None:
        """Put the batch's entry due at `at`, whatever it was (the vendor-compatible surface
        deleted its files: docs/compat.md). A sweep that read the old entry finds its
        conditional move or drop refused; the next one reclaims from the new entry."""
        self.overwrite(_reclaim_entry(batch_id, at))

    def reclaim_due(self, now_iso: str, limit: int) -> list[tuple[str, str]]:
        """`(batch_id, entry)` of the batches whose review time is before `now_iso`, at most
        `limit`: those due to be reclaimed first, oldest first, then re-checks of kept
        batches with the room left (a keys-only index Query each; `entry` is the sort key)."""
        due = self._due(RECLAIM_PARTITION, now_iso, limit)
        if len(due) < limit:
            due += self._due(REVIEW_PARTITION, now_iso, limit - len(due))
        return due

    def _due(self, partition: str, now_iso: str, limit: int) -> list[tuple[str, str]]:
        response = self.dynamodb.query(
            **index_before(self.table_name, "gsi2", partition, now_iso, Limit=limit)
        )
        return [
            (item["pk"]["S"].removeprefix("BATCH#"), item["gsi2sk"]["S"])
            for item in response.get("Items", [])
        ]

    def reschedule_reclaim(self, batch_id: str, *, seen: str, review_at: str, recheck: bool = False) -> bool:
        """Move the entry to `review_at` (a re-check of a kept batch's settings, `recheck`, or
        its reclaim time), only if it is still the `seen` one (concurrent sweeps)."""
        return self.update_where(
            _reclaim_key(batch_id),
            "SET gsi2sk = :next, gsi2pk = :lane",
            condition="gsi2sk = :seen",
            values={
                ":next": f"{review_at}#{batch_id}",
                ":seen": seen,
                ":lane": REVIEW_PARTITION if recheck else RECLAIM_PARTITION,
            },
        )

    def drop_reclaim(self, batch_id: str, *, seen: str) -> bool:
        """Take the batch off the reclaim index (its bytes are gone), if the entry is `seen`."""
        return self.delete_where(_reclaim_key(batch_id), condition="gsi2sk = :seen", values={":seen": seen})

    def mark_reclaimed(self, batch_id: str, *, at: str, unless: TransactItem | None = None) -> bool:
        """Record on META that the result bytes are being reclaimed (before any is deleted, so
        every read answers 410 rather than half a file); False when already marked, or when
        the ConditionCheck `unless` fails (the org's retention settings changed since the
        decision was made on them)."""
        update, condition = "SET artifacts_reclaimed_at = :at", _NOT_RECLAIMED
        values: dict[str, object] = {":at": at}
        if unless is None:
            return self._update_meta(batch_id, update, condition, values)
        mark = update_request(
            self.table_name, batch_key(batch_id), update, condition=condition, values=values
        )
        return self.transact([{"Update": mark}, unless])

    def claim_settle_resend(self, batch_id: str, *, at: str, not_since: str) -> bool:
        """Claim the sending of a stranded batch's `fail` step (services/workflow/stranded.py):
        False when the batch is missing or was claimed at `not_since` or later."""
        return self._update_meta(
            batch_id,
            "SET settle_resent_at = :at",
            "attribute_exists(pk) AND (attribute_not_exists(settle_resent_at) OR settle_resent_at < :since)",
            {":at": at, ":since": not_since},
        )

    # -- workflow start (services/batches/launch.py) -------------------------------------------
    def started(self, batch_id: str, execution_arn: str) -> None:
        """Record the workflow's execution on META, then take the batch off the start index."""
        self.update(batch_id, {"execution_arn": execution_arn})
        self.dynamodb.delete_item(TableName=self.table_name, Key=_start_key(batch_id))

    def unstarted(self, created_before: str, limit: int = 100) -> list[str]:
        """Ids of batches created before `created_before` whose start is not recorded, oldest
        first (one Query on the keys-only index)."""
        response = self.dynamodb.query(
            **index_before(self.table_name, "gsi2", START_PARTITION, created_before, Limit=limit)
        )
        return [item["pk"]["S"].removeprefix("BATCH#") for item in response.get("Items", [])]

    def transition(
        self, batch_id: str, target: BatchState, *, at: str, extra: BatchChanges | None = None
    ) -> bool:
        """Move the batch to `target` only from a state that may legally precede it.

        Returns False (and writes nothing) when the batch is missing, already terminal,
        or past `target` — the conditional write makes out-of-order messages harmless.
        """
        sources = sorted(allowed_sources(target))
        names = {"#state": "state"}
        values: dict[str, object] = {":target": target, ":at": at}
        placeholders = []
        for i, source in enumerate(sources):
            values[f":s{i}"] = source
            placeholders.append(f":s{i}")
        sets = ["#state = :target", "state_changed_at = :at"]
        for i, (name, value) in enumerate((extra or {}).items()):
            names[f"#x{i}"] = name
            values[f":x{i}"] = value
            sets.append(f"#x{i} = :x{i}")
        update = "SET " + ", ".join(sets)
        if target in ("completed", "failed", "canceled", "expired"):
            update += " REMOVE gsi2pk, gsi2sk"
        condition = f"attribute_exists(pk) AND #state IN ({', '.join(placeholders)})"
        return self._update_meta(batch_id, update, condition, values, names=names)

    # -- creation ---------------------------------------------------------------------------
    def create(
        self,
        batch: BatchRecord,
        *,
        reservation: Sequence[TransactItem],
        extra_items: Sequence[TransactItem] = (),
        limit_checks: Sequence[TransactItem] = (),
        idempotency: IdempotencyRecord | None = None,
    ) -> None:
        """Create the batch in ONE TransactWriteItems, in this order: the `reservation`
        (`LedgerStore.reserve_items`: the wallet item first, then the reservation), the
        batch's META and PLAN items (never overwritten), the caller's `extra_items`, the
        spending-limit `limit_checks` (`SpendingLimitChecks.items`) and, last, the
        `idempotency` record. A refusal becomes:

        - DuplicateIdempotencyKey: the idempotency record exists (a concurrent request with
          the same key committed first; answer as it did);
        - FundingMoved: the wallet or a limit check refused, or another transaction collided
          (decide the funding again on fresh reads);
        - DuplicateReservation: the reservation id is taken.

        Any other failure is raised as it came."""
        own = [self._create_once(values) for values in (*batch_values(batch), _start_entry(batch))]
        own.append(self._drop_orphan_entry(batch.batch_id))
        checks_at = len(reservation) + len(own) + len(extra_items)
        items = [*reservation, *own, *extra_items, *limit_checks]
        if idempotency is not None:
            at = epoch_seconds(idempotency.created_at)
            items.append(put_unless_live(self.table_name, _idempotency_values(idempotency), now=at))
        try:
            self.dynamodb.transact_write_items(TransactItems=items)
        except ClientError as exc:
            codes = cancellation_codes(exc)
            if not codes:
                raise
            if idempotency is not None and condition_failed_at(codes, len(codes) - 1):
                raise DuplicateIdempotencyKey(idempotency.key) from exc
            refused = reservation_failure(codes)
            if refused == "wallet" or SpendingLimitChecks.moved(codes, checks_at):
                raise FundingMoved("the funds, the limit's room, its spend or its controls moved") from exc
            if is_transaction_conflict(exc):
                raise FundingMoved("the create transaction collided with another") from exc
            if refused == "reservation":
                raise DuplicateReservation("A reservation with this id exists already.") from exc
            extra_at = len(reservation) + len(own)
            for index in range(extra_at, extra_at + len(extra_items)):
                if condition_failed_at(codes, index):
                    raise ExtraItemRefused(index - extra_at) from exc
            raise

    def hold_overage(self, hold: OverageHold) -> None:
        """A deadline rescue's overage hold (`OverageHold`) in ONE TransactWriteItems: the
        reservation, the batch's META, the limit's checks, then the work order's count. Raises
        FundingMoved (the wallet or the limit refused, or a collision), DuplicateReservation
        (this hold exists: a repeated rescue) or OverageRefused (the batch's condition)."""
        reservation = hold.reservation
        meta = {
            "Update": update_request(
                self.table_name,
                batch_key(hold.batch_id),
                "SET overage_hold_ids = list_append(if_not_exists(overage_hold_ids, :none), :ids) "
                "ADD overage_held_micros :amount",
                condition="#state = :running AND attribute_not_exists(settled_at) AND "
                "(attribute_not_exists(overage_held_micros) OR overage_held_micros <= :room)"
                + ("" if hold.membership else " AND attribute_not_exists(work_order)"),
                names={"#state": "state"},
                values={
                    ":none": [],
                    ":ids": [hold.hold_id],
                    ":amount": hold.amount.micros,
                    ":running": "running",
                    ":room": hold.cap.micros - hold.amount.micros,
                },
            )
        }
        items = [*reservation, meta, *hold.limit_checks, *hold.membership]
        try:
            self.dynamodb.transact_write_items(TransactItems=items)
        except ClientError as exc:
            codes = cancellation_codes(exc)
            refused = reservation_failure(codes)
            if refused == "reservation":
                raise DuplicateReservation("This overage hold exists already.") from exc
            if condition_failed_at(codes, len(reservation)):
                raise OverageRefused(hold.batch_id) from exc
            if codes and (
                refused == "wallet"
                or SpendingLimitChecks.moved(codes, len(reservation) + 1)
                or is_transaction_conflict(exc)
            ):
                raise FundingMoved("the funds, the limit's room, its spend or its controls moved") from exc
            raise

    def _create_once(self, values: dict[str, Any]) -> TransactItem:
        return put_new(self.table_name, values)

    def idempotency_record(self, org_id: str, key: str) -> IdempotencyRecord | None:
        stored = self.item_at({"pk": {"S": f"IDEMP#{org_id}#{key}"}, "sk": {"S": "META"}})
        if stored is None:
            return None
        return IdempotencyRecord(
            org_id=org_id,
            key=key,
            request_hash=str(stored["request_hash"]),
            status_code=int(stored["status_code"]),
            body=str(stored["body"]),
            batch_id=str(stored.get("batch_id") or ""),
            created_at=str(stored.get("created_at") or ""),
            ttl=int(stored.get("ttl") or 0),
        )

    # -- reads --------------------------------------------------------------------------------
    def list_for_org(
        self, org_id: str, *, limit: int, start_after: str | None, states: frozenset[str] | None
    ) -> tuple[list[BatchRecord], str | None]:
        """An org's batches newest first; `start_after` is the last batch id of the previous page."""
        found: list[BatchRecord] = []
        org = f"ORG#{org_id}"
        options: dict[str, Any] = {"ScanIndexForward": False, "Limit": max(limit * 2, 20)}
        if start_after:
            # below the previous page's last batch: nothing under ORG# sorts before BATCH#
            request = index_before(self.table_name, "gsi1", org, f"BATCH#{start_after}", **options)
        else:
            request = prefix_query(self.table_name, org, "BATCH#", index="gsi1", **options)
        for response in pages(self.dynamodb.query, request):
            for raw in response.get("Items", []):
                item = from_item(raw)
                if states is None or item.get("state") in states:
                    found.append(batch_from_items(item))
            if len(found) > limit:
                break
        page = found[:limit]
        next_cursor = page[-1].batch_id if len(found) > limit else None
        return page, next_cursor

    def count_for_org(self, org_id: str) -> int:
        request = prefix_query(self.table_name, f"ORG#{org_id}", "BATCH#", index="gsi1", Select="COUNT")
        return sum(int(response.get("Count", 0)) for response in pages(self.dynamodb.query, request))

    # -- updates ------------------------------------------------------------------------------
    def update(self, batch_id: str, changes: BatchChanges) -> bool:
        """SET the given fields; False when there is no such batch."""
        return conditional_update(self.dynamodb, **set_update(self.table_name, batch_key(batch_id), changes))

    def update_seeing_work_order(self, batch_id: str, changes: BatchChanges) -> WorkOrderRef | None:
        """SET the given fields and answer the batch's `work_order` as it stands after them, in
        the same UpdateItem (Settle writes `settled_at` so: an attach committed before is seen,
        one after is refused by its `settled_at` condition; docs/work-orders.md)."""
        response = self.dynamodb.update_item(
            **set_update(self.table_name, batch_key(batch_id), changes), ReturnValues="ALL_NEW"
        )
        work_order = from_item(response.get("Attributes", {})).get("work_order")
        return (
            WorkOrderRef.from_mapping(cast(WorkOrderRefItem, work_order))
            if isinstance(work_order, Mapping)
            else None
        )

    def update_plan(self, batch_id: str, changes: PlanChanges) -> None:
        """SET fields of the PLAN item (Intake writes the chunk model counts once)."""
        plan = {"pk": {"S": f"BATCH#{batch_id}"}, "sk": {"S": "PLAN"}}
        values: dict[str, object] = {**changes}
        if "intake" in changes:  # written field for field (read back by the record's `_intake`)
            values["intake"] = sparse(changes["intake"])
        self.dynamodb.update_item(**set_update(self.table_name, plan, values))

    # -- step cursors: a step that runs over several invocations (`BATCH#<id>`/`CURSOR#<step>`) --
    def cursor(self, batch_id: str, step: str) -> FinalizeCursor | None:
        return self.read_at({"pk": {"S": f"BATCH#{batch_id}"}, "sk": {"S": f"CURSOR#{step}"}}, _cursor)

    def start_cursor(self, batch_id: str, step: str, cursor: FinalizeCursor) -> bool:
        """Create the cursor once; False when another invocation created it first."""
        item = {
            "pk": f"BATCH#{batch_id}",
            "sk": f"CURSOR#{step}",
            "kind": "cursor",
            **asdict(cursor),
            **cursor.slice_changes(),  # its parts and tally in their stored shapes
        }
        return self.insert_once(item)

    def advance_cursor(self, batch_id: str, step: str, *, position: int, changes: CursorChanges) -> bool:
        """SET `changes` if the cursor is still at `position` (one writer advances it)."""
        request = set_update(
            self.table_name,
            {"pk": {"S": f"BATCH#{batch_id}"}, "sk": {"S": f"CURSOR#{step}"}},
            changes,
            condition="#position = :position",
            names={"#position": "position"},
            values={":position": position},
        )
        return conditional_update(self.dynamodb, **request)

    # -- lanes --------------------------------------------------------------------------------
    def put_lane(self, batch_id: str, lane: LaneRecord) -> None:
        """Create a lane record once (a repeated Route step keeps the first)."""
        self.insert_once(lane_values(batch_id, lane))

    def lanes(self, batch_id: str) -> list[LaneRecord]:
        request = prefix_query(self.table_name, f"BATCH#{batch_id}", "LANE#", ConsistentRead=True)
        return [lane_from_item(item) for item in self.query_all(request)]


def _cursor(item: dict[str, Any]) -> FinalizeCursor:
    values = plain(item)
    return from_stored(
        FinalizeCursor,
        values,
        results_parts=stored_parts(values["results_parts"]),
        errors_parts=stored_parts(values["errors_parts"]),
        offsets=tuple(values["offsets"]),
        tally=MergeTally.from_dict(values["tally"]),
    )


def _idempotency_values(record: IdempotencyRecord) -> dict[str, Any]:
    return {
        "pk": f"IDEMP#{record.org_id}#{record.key}",
        "sk": "META",
        "kind": "idempotency",
        "request_hash": record.request_hash,
        "status_code": record.status_code,
        "body": record.body,
        "batch_id": record.batch_id,
        "created_at": record.created_at,
        "ttl": record.ttl,
    }
