"""A batch's bucket delivery, in the batches table beside its batch (docs/delivery-targets.md).

| Item | pk / sk |
|---|---|
| delivery | `BATCH#<batch_id>` / `DELIVERY#BUCKET` |

The due index is sparse `gsi1`: `gsi1pk = BUCKET#DUE`, `gsi1sk = <when>#<batch_id>`, present
only while an attempt is owed: `<when>` is `next_attempt_at` for a pending or failed
delivery (pushed back by `mark_enqueued` while a queued retry waits for its worker), and the
claim's `lease_until` while one is `delivering` (so a worker that died is noticed).
Delivered deliveries, and failed ones whose schedule is spent, leave the index.

Every state change is conditional on the state and `attempts` it expects, so a repeated SQS
message or a concurrent sweeper never claims (and pushes) the same attempt twice.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from batchroute.adapters.dynamo.codec import NEW, plain, to_item, to_value
from batchroute.adapters.dynamo.leases import DueIndex, LeasedStore, due_sort_key
from batchroute.adapters.dynamo.writes import conditional_update
from batchroute.domain.delivery.buckets import DeliveryError, DeliveryRecord, TargetDelivery
from batchroute.domain.stored import from_stored

DUE_PARTITION = "BUCKET#DUE"
DELIVERY_SK = "DELIVERY#BUCKET"


def _key(batch_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"BATCH#{batch_id}"}, "sk": {"S": DELIVERY_SK}}


class BucketDeliveries(LeasedStore):
    due_index = DueIndex(DUE_PARTITION, state_field="state", count_field="attempts")

    def get(self, batch_id: str) -> DeliveryRecord | None:
        return self.read_at(_key(batch_id), lambda item: delivery_from_item(plain(item)))

    def start_round(self, record: DeliveryRecord, *, replacing: DeliveryRecord | None) -> bool:
        """Write the delivery at the start of a round (pending, due at `next_attempt_at`):
        new (`replacing` None) or in place of `replacing`, as the caller read it: same state
        and attempt count. False when the delivery is not what the caller saw (a concurrent
        step, retry or redeliver won; its attempt count is never written back)."""
        item = {**to_item(asdict(record)), **_key(record.batch_id)}
        if record.next_attempt_at is not None:
            item["gsi1pk"] = to_value(DUE_PARTITION)
            item["gsi1sk"] = to_value(due_sort_key(record.next_attempt_at, record.batch_id))
        if replacing is None:
            return self.put_where(item, condition=NEW)
        return self.put_where(
            item,
            condition="#state = :previous AND attempts = :attempts",
            names={"#state": "state"},
            values={":previous": replacing.state, ":attempts": replacing.attempts},
        )

    def claim(self, batch_id: str, *, attempt: int, now_iso: str, lease_until_iso: str) -> bool:
        """pending|failed -> delivering for attempt number `attempt` (`LeasedStore.claim_attempt`)."""
        return self.claim_attempt(
            _key(batch_id), batch_id, attempt=attempt, now_iso=now_iso, lease_until_iso=lease_until_iso
        )

    def complete(
        self, record: DeliveryRecord, *, attempt: int, lease_expired_before: str | None = None
    ) -> bool:
        """Record the outcome of attempt `attempt` (`record` holds the new state, targets,
        error and next attempt) and leave `delivering`. `lease_expired_before` makes it the
        recovery of an attempt whose worker stopped: it applies only if that attempt's lease
        ran out before then. False when the delivery is no longer in that attempt."""
        kept = ("batch_id", "org_id", "attempts", "lease_until")  # the key, the claim's own
        values = {name: value for name, value in asdict(record).items() if name not in kept}
        end = self.attempt_end(
            record.batch_id,
            attempt=attempt,
            next_attempt_at=record.next_attempt_at,
            lease_expired_before=lease_expired_before,
        )
        sets: list[str] = []
        removes: list[str] = []
        names: dict[str, str] = {}
        expression_values: dict[str, object] = {}
        for index, (name, value) in enumerate(values.items()):
            if name == "state":
                sets.append("#state = :v_state")
                expression_values[":v_state"] = value
            elif value is None:
                removes.append(name)
            else:
                names[f"#a{index}"] = name
                expression_values[f":v{index}"] = value
                sets.append(f"#a{index} = :v{index}")
        request = end.update(
            self.table_name,
            _key(record.batch_id),
            sets=sets,
            removes=removes,
            names=names,
            values=expression_values,
        )
        return conditional_update(self.dynamodb, **request)

    def due(self, now_iso: str, limit: int = 100) -> list[str]:
        """Batch ids whose delivery owes an attempt (or whose attempt's lease ran out) at or
        before `now_iso`, oldest first."""
        return [str(item["batch_id"]["S"]) for item in self.due_items(now_iso, limit)]

    def mark_enqueued(self, batch_id: str, *, next_attempt_at: str, recheck_at: str) -> bool:
        """A retry message is on the deliver queue: look at the delivery again only at
        `recheck_at` (so the next sweep does not queue it twice; a lost message is re-queued
        then). Conditional on the attempt it queued still being owed."""
        return self.update_where(
            _key(batch_id),
            "SET gsi1sk = :sk",
            condition="attribute_exists(gsi1pk) AND #state IN (:pending, :failed) "
            "AND next_attempt_at = :next",
            names={"#state": "state"},
            values={
                ":sk": due_sort_key(recheck_at, batch_id),
                ":pending": "pending",
                ":failed": "failed",
                ":next": next_attempt_at,
            },
        )


def delivery_from_item(values: dict[str, Any]) -> DeliveryRecord:
    """A delivery read back (`dataclasses.asdict` of it was written; an older share may lack
    its `name`: it is the bucket's)."""
    targets = tuple(
        from_stored(
            TargetDelivery,
            share,
            name=share.get("name") or share["bucket"],
            last_error=_error(share.get("last_error")),
            objects=tuple(share.get("objects") or ()),
        )
        for share in values.get("targets") or ()
    )
    return from_stored(DeliveryRecord, values, targets=targets, last_error=_error(values.get("last_error")))


def _error(value: object) -> DeliveryError | None:
    return from_stored(DeliveryError, value) if isinstance(value, dict) else None
