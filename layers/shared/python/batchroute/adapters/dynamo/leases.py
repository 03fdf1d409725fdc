"""Attempt leases shared by the delivery stores (batch webhooks, billing alert webhooks and
bucket deliveries): a delivery owing an attempt sits in a sparse due index (`gsi1`, sort key
`<when>#<id>`); a worker claims attempt n by one conditional update (pending|failed ->
delivering, only if attempt n-1 was the last and it is due), which also moves the index
entry to the lease's end so a worker that died is noticed by the next sweep."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from batchroute.adapters.dynamo.codec import update_request
from batchroute.adapters.dynamo.reads import index_due
from batchroute.adapters.dynamo.store import DynamoStore


def due_sort_key(when_iso: str, owner_id: str) -> str:
    return f"{when_iso}#{owner_id}"


@dataclass(frozen=True, slots=True)
class DueIndex:
    """A store's share of the due index: its partition, and what its items call their state
    and their attempt count."""

    partition: str
    state_field: str
    count_field: str


@dataclass(frozen=True, slots=True)
class AttemptEnd:
    """What ending an attempt writes besides its outcome: the lease let go, and the delivery
    moved on the due index to its next attempt or taken off it; and the condition that it is
    still in that attempt (for a recovery, also that the attempt's lease ran out)."""

    sets: list[str]
    removes: list[str]
    names: dict[str, str]
    values: dict[str, object]  # plain
    condition: str

    def update(
        self,
        table_name: str,
        key: Mapping[str, Any],
        *,
        sets: Sequence[str],
        removes: Sequence[str],
        names: Mapping[str, str] | None = None,
        values: Mapping[str, object],
    ) -> dict[str, Any]:
        """The update that ends the attempt with the outcome's own `sets` and `removes` (and
        the `names` and plain `values` they use) beside the attempt end's."""
        return update_request(
            table_name,
            key,
            f"SET {', '.join([*sets, *self.sets])} REMOVE {', '.join([*removes, *self.removes])}",
            condition=self.condition,
            names={**self.names, **(names or {})},
            values={**self.values, **values},
        )


class LeasedStore(DynamoStore):
    """A store of deliveries made by attempts under a lease, on the due index `due_index`."""

    due_index: ClassVar[DueIndex]

    def due_items(self, now_iso: str, limit: int) -> list[dict[str, Any]]:
        """Raw index items owing an attempt at or before `now_iso`, oldest first (the index
        is eventually consistent: claims re-check)."""
        request = index_due(self.table_name, "gsi1", self.due_index.partition, now_iso, Limit=limit)
        return list(self.dynamodb.query(**request).get("Items", []))

    def claim_attempt(
        self, key: dict[str, Any], owner_id: str, *, attempt: int, now_iso: str, lease_until_iso: str
    ) -> bool:
        """pending|failed -> delivering for attempt number `attempt`, only if it is due and
        nobody claimed it yet; False otherwise (nothing written)."""
        index = self.due_index
        count_field = index.count_field
        return self.update_where(
            key,
            f"SET #state = :delivering, {count_field} = :n, last_attempt_at = :now, "
            "updated_at = :now, lease_until = :lease, gsi1pk = :due, gsi1sk = :due_sk "
            "REMOVE next_attempt_at",
            condition=f"attribute_exists(pk) AND {count_field} = :prev "
            "AND #state IN (:pending, :failed) AND next_attempt_at <= :now",
            names={"#state": index.state_field},
            values={
                ":delivering": "delivering",
                ":pending": "pending",
                ":failed": "failed",
                ":n": attempt,
                ":prev": attempt - 1,
                ":now": now_iso,
                ":lease": lease_until_iso,
                ":due": index.partition,
                ":due_sk": due_sort_key(lease_until_iso, owner_id),
            },
        )

    def attempt_end(
        self, owner_id: str, *, attempt: int, next_attempt_at: str | None, lease_expired_before: str | None
    ) -> AttemptEnd:
        """The shared part of ending attempt number `attempt` (`#state` names the state field)."""
        index = self.due_index
        values: dict[str, object] = {":delivering": "delivering", ":n": attempt}
        sets: list[str] = []
        removes = ["lease_until"]
        if next_attempt_at is not None:
            values[":due"] = index.partition
            values[":due_sk"] = due_sort_key(next_attempt_at, owner_id)
            sets += ["gsi1pk = :due", "gsi1sk = :due_sk"]
        else:
            removes += ["gsi1pk", "gsi1sk"]
        condition = f"attribute_exists(pk) AND #state = :delivering AND {index.count_field} = :n"
        if lease_expired_before is not None:
            condition += " AND lease_until < :stale"
            values[":stale"] = lease_expired_before
        names = {"#state": index.state_field}
        return AttemptEnd(sets, removes, names, values, condition)
