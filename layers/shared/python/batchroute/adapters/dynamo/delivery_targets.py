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

from dataclasses import asdict
from typing import Any

from batchroute.adapters.dynamo.codec import EXISTS, delete_request, to_item
from batchroute.adapters.dynamo.reads import prefix_query
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.adapters.dynamo.writes import put_new
from batchroute.domain.delivery.targets import DeliveryTarget, LastTest
from batchroute.domain.stored import from_stored

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
        return self.read_at(_key(org_id, target_id), target_from_item)

    def replace(self, target: DeliveryTarget, *, seen: DeliveryTarget) -> bool:
        """Overwrite an existing target, only if nobody changed it since it was read as `seen`:
        neither its settings (`updated_at`) nor its last test (recorded since, it would be
        overwritten with the one read)."""
        values: dict[str, object] = {":seen": seen.updated_at}
        if seen.last_test is None:
            tested = "attribute_not_exists(last_test)"
        else:
            tested, values[":tested"] = "last_test.#at = :tested", seen.last_test.at
        return self.put_where(
            to_item(_target_item(target)),
            condition=f"attribute_exists(pk) AND updated_at = :seen AND {tested}",
            names={"#at": "at"} if seen.last_test is not None else None,
            values=values,
        )

    def record_test(self, target: DeliveryTarget, test: LastTest) -> bool:
        """Keep the outcome of a test of `target` on it, if it is still there as it was tested
        (not changed since: a change may have moved it); False otherwise."""
        return self.update_where(
            _key(target.org_id, target.target_id),
            "SET last_test = :test",
            condition="attribute_exists(pk) AND updated_at = :tested",
            values={":test": asdict(test), ":tested": target.updated_at},
        )

    def delete(self, org_id: str, target_id: str) -> bool:
        """Remove the target and lower the count; False when there is no such target."""
        return self.transact(
            [
                {"Delete": delete_request(self.table_name, _key(org_id, target_id), condition=EXISTS)},
                self.count_down(_count_key(org_id)),
            ]
        )


def _target_item(target: DeliveryTarget) -> dict[str, Any]:
    return {
        "pk": f"ORG#{target.org_id}",
        "sk": f"{TARGET_PREFIX}{target.target_id}",
        "kind": "delivery_target",
        **asdict(target),
    }


def target_from_item(item: dict[str, Any]) -> DeliveryTarget:
    test = item.get("last_test")
    return from_stored(
        DeliveryTarget, item, last_test=from_stored(LastTest, test) if isinstance(test, dict) else None
    )
