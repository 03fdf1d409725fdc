"""DynamoDB request units of one request, as AWS would bill it, sized from moto's own tables:
what turns the pipeline bench's DynamoDB request counts into write and read units, and so
into dollars (bench/RESULTS.md, "Method notes").

Writes: the item's size before and after the request (1 KB units, at least 1; transactions
2x, ConditionChecks included), plus one write per `ALL`-projecting GSI holding the item (two
when its index key changes), and a `KEYS_ONLY` GSI only when the item enters, leaves or moves
in it. Reads: from the items returned (4 KB units, eventually consistent 0.5, transactions
2x). Item size per AWS's rules: names + values, numbers ~1 byte per 2 digits. Runs inside
moto's process (the request counter calls it around each request).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bench.stack import ACCOUNT, REGION


def _av_size(value: dict[str, Any]) -> int:
    """Approximate DynamoDB size of one attribute value (DynamoDB JSON)."""
    kind, inner = next(iter(value.items()))
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        digits = len(inner.strip("-").replace(".", "").strip("0")) or 1
        return (digits + 1) // 2 + 1
    if kind == "B":
        return len(inner) * 3 // 4
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(_av_size({kind[0]: v}) for v in inner)
    if kind == "L":
        return 3 + sum(1 + _av_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _av_size(v) for k, v in inner.items())
    return 1


def item_size(attributes: dict[str, Any] | None) -> int:
    if not attributes:
        return 0
    return sum(len(name.encode()) + _av_size(value) for name, value in attributes.items())


def moto_tables() -> Any:
    """moto's DynamoDB backend of the local stack's account and region (this process's)."""
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends[ACCOUNT][REGION]


@dataclass
class Write:
    table: str
    key: dict[str, Any]
    transactional: bool
    condition_only: bool = False
    before: tuple[int, dict[str, Any]] | None = None  # size, GSI key values


class DynamoSizer:
    """Write and read request units of one DynamoDB request, from moto's own tables."""

    def __init__(self) -> None:
        self._schemas: dict[str, tuple[list[str], list[tuple[list[str], bool]]]] = {}

    def _schema(self, table_name: str) -> tuple[list[str], list[tuple[list[str], bool]]]:
        schema = self._schemas.get(table_name)
        if schema is None:
            table = moto_tables().get_table(table_name)
            keys = [a for a in (table.hash_key_attr, table.range_key_attr) if a]
            indexes = [
                (
                    [k["AttributeName"] for k in index.schema],
                    (index.projection or {}).get("ProjectionType") == "KEYS_ONLY",
                )
                for index in table.global_indexes
            ]
            schema = self._schemas[table_name] = (keys, indexes)
        return schema

    def writes(self, op: str, body: dict[str, Any]) -> list[Write]:
        found: list[Write] = []

        def add(
            table: str, key_or_item: dict[str, Any], transactional: bool, condition: bool = False
        ) -> None:
            keys, _ = self._schema(table)
            found.append(
                Write(table, {k: key_or_item[k] for k in keys if k in key_or_item}, transactional, condition)
            )

        if op == "PutItem":
            add(body["TableName"], body["Item"], False)
        elif op in ("UpdateItem", "DeleteItem"):
            add(body["TableName"], body["Key"], False)
        elif op == "BatchWriteItem":
            for table, requests in body.get("RequestItems", {}).items():
                for request in requests:
                    if "PutRequest" in request:
                        add(table, request["PutRequest"]["Item"], False)
                    elif "DeleteRequest" in request:
                        add(table, request["DeleteRequest"]["Key"], False)
        elif op == "TransactWriteItems":
            for entry in body.get("TransactItems", []):
                for kind, action in entry.items():
                    key = action.get("Item") if kind == "Put" else action.get("Key")
                    add(action["TableName"], key or {}, True, kind == "ConditionCheck")
        return found

    def _state(self, write: Write) -> tuple[int, dict[str, Any]] | None:
        for _ in range(3):
            try:
                found = moto_tables().get_item(write.table, write.key)
                if found is None:
                    return None
                attrs = found.to_json()["Attributes"]
                _, indexes = self._schema(write.table)
                gsi = {
                    "|".join(names): ([attrs.get(n) for n in names], keys_only)
                    for names, keys_only in indexes
                    if all(n in attrs for n in names)
                }
                return item_size(attrs), gsi
            except RuntimeError:  # changed under us by a concurrent request: read it again
                continue
        return None

    def before(self, writes: list[Write]) -> None:
        for write in writes:
            write.before = self._state(write)

    def write_units(self, writes: list[Write], succeeded: bool) -> float:
        total = 0.0
        for write in writes:
            before = write.before
            after = before if (write.condition_only or not succeeded) else self._state(write)
            size_before = before[0] if before else 0
            size_after = after[0] if after else 0
            units = max(1, math.ceil(max(size_before, size_after) / 1024))
            total += units * (2 if write.transactional else 1)
            if write.condition_only or not succeeded:
                continue
            gsi_before = before[1] if before else {}
            gsi_after = after[1] if after else {}
            for index in set(gsi_before) | set(gsi_after):
                keys_only = (gsi_after.get(index) or gsi_before[index])[1]
                if keys_only:
                    # a keys-only index is written only when the item enters, leaves or moves
                    # in it (its entry: the keys, under 1 KB)
                    if index in gsi_before and index in gsi_after:
                        total += 0 if gsi_before[index][0] == gsi_after[index][0] else 2
                    else:
                        total += 1
                    continue
                if index in gsi_before and index in gsi_after:
                    same = gsi_before[index] == gsi_after[index]
                    total += math.ceil(size_after / 1024) + (0 if same else math.ceil(size_before / 1024))
                elif index in gsi_after:
                    total += math.ceil(size_after / 1024)
                else:
                    total += math.ceil(size_before / 1024)
        return total

    @staticmethod
    def read_units(op: str, body: dict[str, Any], answer: dict[str, Any]) -> float:
        def units(items: Iterable[dict[str, Any]], consistent: bool, factor: float = 1.0) -> float:
            size = sum(item_size(i) for i in items)
            return max(1, math.ceil(size / 4096)) * (1.0 if consistent else 0.5) * factor

        if op == "GetItem":
            return units([answer.get("Item") or {}], bool(body.get("ConsistentRead")))
        if op in ("Query", "Scan"):
            return units(answer.get("Items") or [], bool(body.get("ConsistentRead")))
        if op == "BatchGetItem":
            total = 0.0
            for table, items in (answer.get("Responses") or {}).items():
                consistent = bool(body.get("RequestItems", {}).get(table, {}).get("ConsistentRead"))
                total += sum(units([i], consistent) for i in items)
            return total
        if op == "TransactGetItems":
            return sum(units([r.get("Item") or {}], True, 2.0) for r in answer.get("Responses") or [])
        return 0.0
