"""Webhook deliveries and their attempts, in the batches table, beside their batch.

| Item | pk / sk |
|---|---|
| delivery | `BATCH#<batch_id>` / `WEBHOOK#<delivery_id>` |
| attempt | `BATCH#<batch_id>` / `WEBHOOK#<delivery_id>#ATTEMPT#<n:02d>` |

A delivery carries `delivery_id, batch_id, org_id, event_id, event_type, url, status,
attempt_count, last_attempt_at, next_attempt_at, last_response_status, last_error,
created_at, updated_at, payload` (the exact raw body, so every retry sends the same bytes),
`secret_source` (`batch` | `org`) and `secret_sealed` (the KMS ciphertext, never the secret).

The due index is sparse `gsi1`: `gsi1pk = WEBHOOK#DUE`, `gsi1sk = <when>#<delivery_id>`,
present only while an attempt is owed: `<when>` is `next_attempt_at` for a pending or failed
delivery, and the claim's `lease_until` while one is `delivering` (so a worker that died
mid-attempt is noticed). Succeeded and dead-lettered deliveries leave the index.

Every status change is conditional on the status and `attempt_count` it expects, so a
repeated SQS message or a concurrent sweeper never claims (and sends) the same attempt twice.

The same store keeps the org-level deliveries of billing alert events, in the `controls`
table beside their org (`WebhookDeliveries(table, owner=ORG_OWNER)`): `ORG#<org_id>` /
`WEBHOOK#<delivery_id>[#ATTEMPT#<n>]`, with that table's own sparse due index; there
`owner_id` arguments are org ids (docs/billing-alerts.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from batchroute.adapters.dynamo.codec import NEW, from_item, plain, to_item, to_value
from batchroute.adapters.dynamo.leases import DueIndex, LeasedStore, due_sort_key
from batchroute.adapters.dynamo.reads import prefix_query, raw_items
from batchroute.adapters.dynamo.writes import conditional_transaction, put_new
from batchroute.domain.delivery.webhooks import WebhookAttempt, WebhookDeliveryRecord
from batchroute.domain.stored import from_stored

DUE_PARTITION = "WEBHOOK#DUE"
_ATTEMPT_MARK = "#ATTEMPT#"


@dataclass(frozen=True)
class DeliveryOwner:
    """What a delivery belongs to: its partition prefix and the field naming the owner."""

    prefix: str
    field: str


BATCH_OWNER = DeliveryOwner("BATCH#", "batch_id")
ORG_OWNER = DeliveryOwner("ORG#", "org_id")


class WebhookDeliveries(LeasedStore):
    due_index = DueIndex(DUE_PARTITION, state_field="status", count_field="attempt_count")

    def __init__(
        self, table_name: str, dynamodb: Any | None = None, *, owner: DeliveryOwner = BATCH_OWNER
    ) -> None:
        super().__init__(table_name, dynamodb)
        self.owner = owner

    def _key(self, owner_id: str, delivery_id: str) -> dict[str, Any]:
        return {"pk": {"S": f"{self.owner.prefix}{owner_id}"}, "sk": {"S": f"WEBHOOK#{delivery_id}"}}

    def _attempt_key(self, owner_id: str, delivery_id: str, attempt: int) -> dict[str, Any]:
        return {
            "pk": {"S": f"{self.owner.prefix}{owner_id}"},
            "sk": {"S": f"WEBHOOK#{delivery_id}{_ATTEMPT_MARK}{attempt:02d}"},
        }

    def create(self, delivery: WebhookDeliveryRecord) -> bool:
        """Write a new delivery (status pending, first attempt due at `next_attempt_at`);
        False when it already exists (a repeated deliver step)."""
        item = {
            **to_item(asdict(delivery)),
            **self._key(delivery.owner_id(self.owner.field), delivery.delivery_id),
            "gsi1pk": to_value(DUE_PARTITION),
            "gsi1sk": to_value(due_sort_key(str(delivery.next_attempt_at), delivery.delivery_id)),
        }
        return self.put_where(item, condition=NEW)

    def get(self, batch_id: str, delivery_id: str) -> WebhookDeliveryRecord | None:
        return self.read_at(self._key(batch_id, delivery_id), _delivery)

    def get_many(self, owner_id: str, delivery_ids: list[str]) -> dict[str, WebhookDeliveryRecord]:
        """The deliveries of `owner_id` among `delivery_ids` that exist, by id (BatchGetItem,
        100 keys a call)."""
        found: dict[str, WebhookDeliveryRecord] = {}
        unique = list(dict.fromkeys(delivery_ids))
        for start in range(0, len(unique), 100):
            request: dict[str, Any] = {
                self.table_name: {
                    "Keys": [self._key(owner_id, d) for d in unique[start : start + 100]],
                    "ConsistentRead": True,
                }
            }
            while request:
                response = self.dynamodb.batch_get_item(RequestItems=request)
                for raw in response.get("Responses", {}).get(self.table_name, []):
                    delivery = _delivery(from_item(raw))
                    found[delivery.delivery_id] = delivery
                request = response.get("UnprocessedKeys") or {}
        return found

    def list_for_batch(self, batch_id: str) -> tuple[list[WebhookDeliveryRecord], list[WebhookAttempt]]:
        """(deliveries, attempts) of a batch, each in key order (attempts by delivery, then number)."""
        deliveries: list[WebhookDeliveryRecord] = []
        attempts: list[WebhookAttempt] = []
        request = prefix_query(
            self.table_name, f"{self.owner.prefix}{batch_id}", "WEBHOOK#", ConsistentRead=True
        )
        for raw in raw_items(self.dynamodb.query, request):
            if _ATTEMPT_MARK in raw["sk"]["S"]:
                attempts.append(from_stored(WebhookAttempt, plain(from_item(raw))))
            else:
                deliveries.append(_delivery(from_item(raw)))
        return deliveries, attempts

    def due(self, now_iso: str, limit: int = 100) -> list[tuple[str, str]]:
        """(batch_id, delivery_id) of deliveries with an attempt owed at or before `now_iso`,
        oldest first."""
        return [
            (str(item[self.owner.field]["S"]), str(item["delivery_id"]["S"]))
            for item in self.due_items(now_iso, limit)
        ]

    def claim(
        self, batch_id: str, delivery_id: str, *, attempt: int, now_iso: str, lease_until_iso: str
    ) -> bool:
        """pending|failed -> delivering for attempt number `attempt` (`LeasedStore.claim_attempt`)."""
        key = self._key(batch_id, delivery_id)
        return self.claim_attempt(
            key, delivery_id, attempt=attempt, now_iso=now_iso, lease_until_iso=lease_until_iso
        )

    def complete(
        self,
        batch_id: str,
        made: WebhookAttempt,
        *,
        status: str,
        next_attempt_at_iso: str | None,
        lease_expired_before: str | None = None,
    ) -> bool:
        """Record the attempt `made` and move the delivery out of `delivering` into `status`,
        in one transaction. `lease_expired_before` makes it a recovery of an attempt whose
        worker stopped: it applies only if that attempt's lease ran out before then. False
        when the delivery is no longer in that attempt (nothing written)."""
        delivery_id, attempt, at_iso = made.delivery_id, made.attempt, str(made.at)
        event = {
            "delivery_id": delivery_id,
            self.owner.field: batch_id,
            "attempt": attempt,
            "at": at_iso,
            "status_code": made.status_code,
            "error": made.error,
            "duration_ms": made.duration_ms,
        }
        attempt_put = put_new(self.table_name, event)  # the attempt's record, under its own key
        attempt_put["Put"]["Item"].update(self._attempt_key(batch_id, delivery_id, attempt))
        end = self.attempt_end(
            delivery_id,
            attempt=attempt,
            next_attempt_at=next_attempt_at_iso,
            lease_expired_before=lease_expired_before,
        )
        outcome = (status, made.status_code, made.error)
        sets, removes, values = _outcome(at_iso, outcome, next_attempt_at_iso)
        ended = end.update(
            self.table_name, self._key(batch_id, delivery_id), sets=sets, removes=removes, values=values
        )
        return conditional_transaction(self.dynamodb, TransactItems=[attempt_put, {"Update": ended}])


def _outcome(
    at_iso: str, outcome: tuple[str, int | None, str | None], next_attempt_at: str | None
) -> tuple[list[str], list[str], dict[str, object]]:
    """What an attempt's outcome SETs and REMOVEs on the delivery, and the plain values they
    use: the new status, the HTTP answer, the error, and the next attempt's due time (beside
    what every attempt's end writes: `AttemptEnd`)."""
    status, response_status, error = outcome
    values: dict[str, object] = {":status": status, ":at": at_iso}
    sets = ["#state = :status", "updated_at = :at"]
    removes: list[str] = []
    for name, value in (("last_response_status", response_status), ("last_error", error)):
        if value is None:
            removes.append(name)
        else:
            values[f":{name}"] = value
            sets.append(f"{name} = :{name}")
    if next_attempt_at is not None:
        values[":next"] = next_attempt_at
        sets.append("next_attempt_at = :next")
    else:
        removes.append("next_attempt_at")
    return sets, removes, values


def _delivery(item: dict[str, Any]) -> WebhookDeliveryRecord:
    return from_stored(WebhookDeliveryRecord, plain(item))
