"""The batches table's workflow-facing records: the batch's META item and its step journal."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from batchroute.adapters.dynamo.codec import from_item, is_condition_failure, to_value
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.domain.batch_states import BatchState, allowed_sources

DEADLINE_PARTITION = "DEADLINE"


def batch_key(batch_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"BATCH#{batch_id}"}, "sk": {"S": "META"}}


class BatchRecords(DynamoStore):
    def get(self, batch_id: str) -> dict[str, Any] | None:
        item = self.dynamodb.get_item(TableName=self.table_name, Key=batch_key(batch_id), ConsistentRead=True)
        return from_item(item["Item"]) if "Item" in item else None

    def record_step(self, batch_id: str, step: str, at: str) -> bool:
        """Journal a finished workflow step; False when the batch does not exist."""
        try:
            self.dynamodb.update_item(
                TableName=self.table_name,
                Key=batch_key(batch_id),
                UpdateExpression="SET workflow_steps.#step = :at",
                ConditionExpression="attribute_exists(pk) AND attribute_type(workflow_steps, :map)",
                ExpressionAttributeNames={"#step": step},
                ExpressionAttributeValues={":at": to_value(at), ":map": to_value("M")},
            )
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise
            return self._start_journal(batch_id, step, at)
        return True

    def _start_journal(self, batch_id: str, step: str, at: str) -> bool:
        try:
            self.dynamodb.update_item(
                TableName=self.table_name,
                Key=batch_key(batch_id),
                UpdateExpression="SET workflow_steps = if_not_exists(workflow_steps, :steps)",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":steps": to_value({step: at})},
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def past_deadline(self, now_iso: str, limit: int = 100) -> list[str]:
        """Ids of non-terminal batches whose SLA deadline is before `now_iso` (sparse index gsi2)."""
        response = self.dynamodb.query(
            TableName=self.table_name,
            IndexName="gsi2",
            KeyConditionExpression="gsi2pk = :p AND gsi2sk < :now",
            ExpressionAttributeValues={":p": to_value(DEADLINE_PARTITION), ":now": to_value(now_iso)},
            Limit=limit,
        )
        return [from_item(item)["batch_id"] for item in response.get("Items", [])]

    def transition(
        self, batch_id: str, target: BatchState, *, at: str, extra: dict[str, Any] | None = None
    ) -> bool:
        """Move the batch to `target` only from a state that may legally precede it.

        Returns False (and writes nothing) when the batch is missing, already terminal,
        or past `target` — the conditional write makes out-of-order messages harmless.
        """
        sources = sorted(allowed_sources(target))
        names = {"#state": "state"}
        values: dict[str, Any] = {":target": to_value(target), ":at": to_value(at)}
        placeholders = []
        for i, source in enumerate(sources):
            values[f":s{i}"] = to_value(source)
            placeholders.append(f":s{i}")
        sets = ["#state = :target", "state_changed_at = :at"]
        for i, (name, value) in enumerate((extra or {}).items()):
            names[f"#x{i}"] = name
            values[f":x{i}"] = to_value(value)
            sets.append(f"#x{i} = :x{i}")
        update = "SET " + ", ".join(sets)
        if target in ("completed", "failed", "canceled", "expired"):
            update += " REMOVE gsi2pk, gsi2sk"
        try:
            self.dynamodb.update_item(
                TableName=self.table_name,
                Key=batch_key(batch_id),
                UpdateExpression=update,
                ConditionExpression=f"attribute_exists(pk) AND #state IN ({', '.join(placeholders)})",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True
