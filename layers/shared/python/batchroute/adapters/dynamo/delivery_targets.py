"""Delivery targets in the `controls` table (docs/delivery-targets.md).

| Item | pk / sk |
|---|---|
| target | `ORG#<org>` / `TARGET#<target_id>` |
| the org's target count | `ORG#<org>` / `TARGETS` (`count`) |

A target carries its fields and `secret_sealed` (the KMS ciphertext of the secret access
key; never the secret). Creating a target and raising the count are one transaction
conditional on the count staying under the limit, and deleting one lowers it in the same
transaction, so concurrent creates cannot pass the per-org limit. An org's targets are one
`Query` on `begins_with(sk, "TARGET#")`.
"""

from __future__ import annotations

from typing import Any

from batchroute.adapters.dynamo.codec import EXISTS, from_item, to_item, to_value
from batchroute.adapters.dynamo.reads import prefix_query
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.adapters.dynamo.writes import conditional_put, put_new
from batchroute.domain.delivery.targets import DeliveryTarget, LastTest

TARGET_PREFIX = "TARGET#"
COUNT_SK = "TARGETS"


def _key(org_id: str, target_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"ORG#{org_id}"}, "sk": {"S": f"{TARGET_PREFIX}{target_id}"}}


def _count_key(org_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"ORG#{org_id}"}, "sk": {"S": COUNT_SK}}


class DeliveryTargetStore(DynamoStore):
    def create(self, target: DeliveryTarget, *, limit: int) -> bool:
        """Write a new target if the org has fewer than `limit`; False at the limit."""
        return self.transact(
            [
                self.count_up(_count_key(target.org_id), limit=limit),
                put_new(self.table_name, _target_item(target)),
            ]
        )

    def list(self, org_id: str) -> list[DeliveryTarget]:
        """Every target of the org, oldest first (ids are time-sorted)."""
        request = prefix_query(self.table_name, f"ORG#{org_id}", TARGET_PREFIX, ConsistentRead=True)
        return [target_from_item(item) for item in self.query_all(request)]

    def get(self, org_id: str, target_id: str) -> DeliveryTarget | None:
        response = self.dynamodb.get_item(
            TableName=self.table_name, Key=_key(org_id, target_id), ConsistentRead=True
        )
        return target_from_item(from_item(response["Item"])) if "Item" in response else None

    def replace(self, target: DeliveryTarget, *, expected_updated_at: str) -> bool:
        """Overwrite an existing target, only if nobody changed it since it was read."""
        return conditional_put(
            self.dynamodb,
            TableName=self.table_name,
            Item=to_item(_target_item(target)),
            ConditionExpression="attribute_exists(pk) AND updated_at = :seen",
            ExpressionAttributeValues={":seen": to_value(expected_updated_at)},
        )

    def record_test(self, org_id: str, target_id: str, test: LastTest) -> None:
        """Keep the outcome of the latest test on the target (if it still exists)."""
        self.update_where(
            _key(org_id, target_id),
            "SET last_test = :test",
            condition=EXISTS,
            values={":test": _test_item(test)},
        )

    def delete(self, org_id: str, target_id: str) -> bool:
        """Remove the target and lower the count; False when there is no such target."""
        return self.transact(
            [
                {
                    "Delete": {
                        "TableName": self.table_name,
                        "Key": _key(org_id, target_id),
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
                self.count_down(_count_key(org_id)),
            ]
        )


def _target_item(target: DeliveryTarget) -> dict[str, Any]:
    return {
        "pk": f"ORG#{target.org_id}",
        "sk": f"{TARGET_PREFIX}{target.target_id}",
        "kind": "delivery_target",
        "target_id": target.target_id,
        "org_id": target.org_id,
        "name": target.name,
        "endpoint_url": target.endpoint_url,
        "region": target.region,
        "bucket": target.bucket,
        "prefix": target.prefix,
        "access_key_id": target.access_key_id,
        "secret_sealed": target.secret_sealed,
        "enabled": target.enabled,
        "created_at": target.created_at,
        "updated_at": target.updated_at,
        "last_test": _test_item(target.last_test) if target.last_test else None,
    }


def _test_item(test: LastTest) -> dict[str, Any]:
    return {
        "ok": test.ok,
        "at": test.at,
        "key": test.key,
        "error_code": test.error_code,
        "error_message": test.error_message,
    }


def target_from_item(item: dict[str, Any]) -> DeliveryTarget:
    test = item.get("last_test")
    return DeliveryTarget(
        target_id=str(item["target_id"]),
        org_id=str(item["org_id"]),
        name=str(item["name"]),
        bucket=str(item["bucket"]),
        access_key_id=str(item["access_key_id"]),
        secret_sealed=str(item["secret_sealed"]),
        endpoint_url=item.get("endpoint_url"),
        region=item.get("region"),
        prefix=str(item.get("prefix") or ""),
        enabled=bool(item.get("enabled", True)),
        created_at=str(item.get("created_at") or ""),
        updated_at=str(item.get("updated_at") or ""),
        last_test=(
            LastTest(
                ok=bool(test.get("ok")),
                at=str(test.get("at") or ""),
                key=str(test.get("key") or ""),
                error_code=test.get("error_code"),
                error_message=test.get("error_message"),
            )
            if isinstance(test, dict)
            else None
        ),
    )
