"""What every DynamoDB store shares: its table and a client (the cached one unless injected);
the one way each reads an item by key (`item_at`, `read_at`), writes one (`overwrite`) or a new one
(`insert`, `insert_once`), overwrites one as read at a version (`versioned_put`) and puts, updates or
deletes one under a condition (`put_where`, `update_where`, `delete_where`) or many by key
(`delete_keys`); and the pieces of the transactions several stores write: an org's per-kind
count kept under a limit, and a transaction whose refused condition is an answer, not an
error."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from batchroute.adapters.aws import shared_client
from batchroute.adapters.dynamo.codec import (
    EXISTS,
    NEW,
    delete_request,
    from_item,
    put_request,
    to_item,
    update_request,
)
from batchroute.adapters.dynamo.reads import every_item
from batchroute.adapters.dynamo.writes import (
    at_version,
    conditional_delete,
    conditional_put,
    conditional_transaction,
    conditional_update,
    put_new,
)

Record = TypeVar("Record")
BATCH_WRITE_MAX = 25  # DynamoDB's most requests in one BatchWriteItem


@dataclass(eq=False, repr=False)
class DynamoStore:
    table_name: str
    dynamodb: Any = shared_client("dynamodb")

    def item_at(self, key: dict[str, Any]) -> dict[str, Any] | None:
        """The item at `key`, read consistently, as plain values; None when there is none."""
        response = self.dynamodb.get_item(TableName=self.table_name, Key=key, ConsistentRead=True)
        return from_item(response["Item"]) if "Item" in response else None

    def overwrite(self, values: dict[str, Any]) -> None:
        """PutItem of `values`, in place of whatever item is at its key."""
        self.dynamodb.put_item(**put_request(self.table_name, to_item(values)))

    def insert(self, values: dict[str, Any]) -> None:
        """PutItem of `values` as a new item: its id is fresh, so an item already at its key
        is an error, and raises."""
        self.dynamodb.put_item(**put_new(self.table_name, values)["Put"])

    def insert_once(self, values: dict[str, Any]) -> bool:
        """PutItem of `values` as a new item; False when an item is at its key already (it
        stays: a repeated step)."""
        return self.put_where(to_item(values), condition=NEW)

    def versioned_put(self, values: dict[str, Any], expected_version: int | None) -> dict[str, Any]:
        """The PutItem request of `values` over the item as read at `expected_version`
        (`at_version`: refused when someone saved or created it since)."""
        return {**put_request(self.table_name, to_item(values)), **at_version(expected_version)}

    def read_at(self, key: dict[str, Any], record: Callable[[dict[str, Any]], Record]) -> Record | None:
        """`record` of the item at `key` (read consistently, as plain values); None when
        there is none."""
        item = self.item_at(key)
        return None if item is None else record(item)

    def update_where(
        self,
        key: dict[str, Any],
        expression: str,
        *,
        condition: str,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, object] | None = None,
    ) -> bool:
        """One UpdateItem (`update_request`: `values` plain) under `condition`; False when the
        condition did not hold."""
        request = update_request(
            self.table_name, key, expression, condition=condition, names=names, values=values
        )
        return conditional_update(self.dynamodb, **request)

    def put_where(
        self,
        item: dict[str, Any],
        *,
        condition: str,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, object] | None = None,
    ) -> bool:
        """One PutItem of `item` (encoded: `to_item`) under `condition` (`put_request`:
        `values` plain); False when the condition did not hold."""
        request = put_request(self.table_name, item, condition=condition, names=names, values=values)
        return conditional_put(self.dynamodb, **request)

    def delete_where(
        self, key: dict[str, Any], *, condition: str = EXISTS, values: Mapping[str, object] | None = None
    ) -> bool:
        """One DeleteItem of the item at `key` under `condition` (by default: that it is
        there); False when the condition did not hold."""
        request = delete_request(self.table_name, key, condition=condition, values=values)
        return conditional_delete(self.dynamodb, **request)

    def delete_keys(self, keys: list[dict[str, Any]]) -> int:
        """Delete the items at `keys`, 25 to a BatchWriteItem: how many DynamoDB left
        unprocessed (throttled). Those stay, for the caller's next pass (no retry here)."""
        left = 0
        for start in range(0, len(keys), BATCH_WRITE_MAX):
            chunk = [{"DeleteRequest": {"Key": key}} for key in keys[start : start + BATCH_WRITE_MAX]]
            response = self.dynamodb.batch_write_item(RequestItems={self.table_name: chunk})
            left += len(response.get("UnprocessedItems", {}).get(self.table_name, []))
        return left

    def query_all(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """Every item of one Query as plain values, page after page (a page ends at 1 MB)."""
        return every_item(self.dynamodb.query, request)

    def transact(self, items: list[dict[str, Any]]) -> bool:
        """One TransactWriteItems; False when a condition refused it (any other error raises)."""
        return conditional_transaction(self.dynamodb, TransactItems=items)

    def count_up(self, key: dict[str, Any], *, limit: int) -> dict[str, Any]:
        """A transaction item raising the `count` at `key`, refused at `limit`."""
        return self._count(
            key,
            "if_not_exists(#count, :zero) + :one",
            "attribute_not_exists(#count) OR #count < :limit",
            {":limit": limit},
        )

    def count_down(self, key: dict[str, Any]) -> dict[str, Any]:
        """A transaction item lowering the `count` at `key`, never below zero."""
        return self._count(key, "#count - :one", "#count > :zero")

    def _count(
        self, key: dict[str, Any], new_count: str, condition: str, values: Mapping[str, int] | None = None
    ) -> dict[str, Any]:
        request = update_request(
            self.table_name,
            key,
            f"SET #count = {new_count}",
            condition=condition,
            names={"#count": "count"},
            values={":zero": 0, ":one": 1, **(values or {})},
        )
        return {"Update": request}
