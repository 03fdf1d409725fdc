"""Lane live state in the `controls` table: remaining capacity, the last heartbeat, and
whether the service marked the lane unavailable.

Every lane's item sits in ONE partition, `LANES` / `LANE#<provider>#<model>`, so the whole
live state of the catalog (a few dozen small items) is one Query. Writes are small
UpdateItems: a heartbeat every sweep per lane, and a conditional decrement when a batch
takes capacity. A heartbeat never moves `last_heartbeat_at` backward, so a late writer
cannot make a lane look older than it is.

A lane marked unavailable (`mark_unavailable`: its vendor account is out of credit) loses
its heartbeat at once, so routing leaves it (`stale_heartbeat`, with the reason), and takes
no heartbeat before `unavailable_until`; the first one after it clears the mark.
"""

from __future__ import annotations

from typing import Any

from batchroute.adapters.dynamo.codec import update_request
from batchroute.adapters.dynamo.reads import prefix_query
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.domain.catalog.catalog import LaneLive

PARTITION = "LANES"
SK_PREFIX = "LANE#"
_KIND = "lane_live"
_NOT_BACKWARD = (
    "(attribute_not_exists(last_heartbeat_at) OR last_heartbeat_at <= :at) "
    "AND (attribute_not_exists(unavailable_until) OR unavailable_until <= :at)"
)
_CLEAR_MARK = " REMOVE unavailable_code, unavailable_reason, unavailable_until"


def lane_key(lane_id: str) -> dict[str, Any]:
    """`provider/model` -> the item key. Provider slugs hold no `/`; model ids may."""
    provider, _, model = lane_id.partition("/")
    if not provider or not model:
        raise ValueError(f"not a lane id: {lane_id!r}")
    return {"pk": {"S": PARTITION}, "sk": {"S": f"{SK_PREFIX}{provider}#{model}"}}


class LaneStateStore(DynamoStore):
    def live_states(self, *, consistent: bool = False) -> dict[str, LaneLive]:
        """Every lane's live record, by lane id (one Query; pages only past 1 MB)."""
        request = prefix_query(self.table_name, PARTITION, SK_PREFIX, ConsistentRead=consistent)
        return {
            item["lane_id"]: LaneLive(
                lane_id=item["lane_id"],
                remaining_capacity_items=int(item.get("remaining_capacity_items", 0)),
                last_heartbeat_at=item.get("last_heartbeat_at", ""),
                unavailable_reason=str(item.get("unavailable_reason") or ""),
            )
            for item in self.query_all(request)
        }

    def heartbeat(self, lane_id: str, remaining_capacity_items: int, at: str) -> bool:
        """A lane reports itself alive with the capacity it has left. False if a newer
        heartbeat was already recorded."""
        return self._update(
            lane_id,
            "SET lane_id = :lane, #kind = :kind, remaining_capacity_items = :remaining, "
            "last_heartbeat_at = :at, updated_at = :at" + _CLEAR_MARK,
            {":remaining": max(0, remaining_capacity_items)},
            condition=_NOT_BACKWARD,
            at=at,
        )

    def heartbeat_with_daily_reset(
        self, lane_id: str, *, at: str, day: str, daily_capacity_items: int
    ) -> bool:
        """A heartbeat for a lane whose capacity is counted here rather than reported: the
        first heartbeat of a UTC day resets remaining capacity to the daily capacity; later
        ones only refresh the heartbeat. Returns whether capacity was reset."""
        reset = self._update(
            lane_id,
            "SET lane_id = :lane, #kind = :kind, remaining_capacity_items = :daily, capacity_day = :day, "
            "last_heartbeat_at = :at, updated_at = :at" + _CLEAR_MARK,
            {":daily": daily_capacity_items, ":day": day},
            condition=f"(attribute_not_exists(capacity_day) OR capacity_day <> :day) AND {_NOT_BACKWARD}",
            at=at,
        )
        if not reset:
            self._update(
                lane_id,
                "SET last_heartbeat_at = :at, updated_at = :at" + _CLEAR_MARK,
                {},
                condition=f"attribute_exists(pk) AND {_NOT_BACKWARD}",
                at=at,
                with_identity=False,
            )
        return reset

    def mark_unavailable(self, lane_id: str, *, code: str, reason: str, until: str, at: str) -> None:
        """The lane cannot serve (e.g. its vendor account is out of credit): its heartbeat is
        removed now, so routing stops choosing it, and no heartbeat is taken before `until`."""
        request = update_request(
            self.table_name,
            lane_key(lane_id),
            (
                "SET lane_id = :lane, #kind = :kind, unavailable_code = :code, unavailable_reason = :reason, "
                "unavailable_until = :until, updated_at = :at, "
                "remaining_capacity_items = if_not_exists(remaining_capacity_items, :zero) "
                "REMOVE last_heartbeat_at"
            ),
            names={"#kind": "kind"},
            values={
                ":lane": lane_id,
                ":kind": _KIND,
                ":code": code,
                ":reason": reason[:500],
                ":until": until,
                ":at": at,
                ":zero": 0,
            },
        )
        self.dynamodb.update_item(**request)

    def consume_capacity(self, lane_id: str, items: int, *, at: str | None = None) -> bool:
        """Take `items` of today's capacity: all or nothing, never below zero. False when the
        lane has no live record or not enough left."""
        if items <= 0:
            raise ValueError("items must be positive")
        values: dict[str, object] = {":n": items}
        expression = "SET remaining_capacity_items = remaining_capacity_items - :n"
        if at is not None:
            expression += ", updated_at = :updated"
            values[":updated"] = at
        return self.update_where(
            lane_key(lane_id), expression, condition="remaining_capacity_items >= :n", values=values
        )

    def exhaust_capacity(self, lane_id: str, *, at: str) -> bool:
        """The lane has nothing left today (a batch ran more items than it had left since its
        quote): remaining capacity 0, so routing sees it full until the next daily reset.
        False when the lane has no live record."""
        return self.update_where(
            lane_key(lane_id),
            "SET remaining_capacity_items = :zero, updated_at = :at",
            condition="attribute_exists(pk)",
            values={":zero": 0, ":at": at},
        )

    def _update(
        self,
        lane_id: str,
        expression: str,
        values: dict[str, object],
        *,
        condition: str,
        at: str,
        with_identity: bool = True,
    ) -> bool:
        identity = {":lane": lane_id, ":kind": _KIND} if with_identity else {}
        return self.update_where(
            lane_key(lane_id),
            expression,
            condition=condition,
            names={"#kind": "kind"} if with_identity else None,
            values={**values, ":at": at, **identity},
        )
