"""Rate-limit counters in the `controls` table, shared by every Lambda instance.

One item per scope and window length: `RATE#<scope>#<seconds>s` / `COUNTER`. Each counter of
each fixed window is its own top-level number attribute named `<counter>@<window index>`,
so a single UpdateItem

    ADD <counter>@<now window> :one, ...   (ADD creates a missing attribute: no condition)
    SET ttl = ...                           (an idle scope disappears)
    REMOVE <stale attributes>              (windows older than the previous one)

with ReturnValues=ALL_NEW counts this request in every counter of the scope and returns the
current and previous window counts: one round trip, no read-before-write, no condition to
fail on a window boundary. Stale attributes seen in an answer are removed by this
process's next write to the scope (any instance that sees them does the same).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from batchroute.adapters.dynamo.codec import is_condition_failure, to_value
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.domain.rate_limits import WindowCounts, expires_at_epoch
from batchroute.errors import TransientError

_MAX_REMEMBERED_SCOPES = 10_000


def _key(scope: str, window_seconds: int) -> dict[str, Any]:
    return {"pk": {"S": f"RATE#{scope}#{window_seconds}s"}, "sk": {"S": "COUNTER"}}


def attribute_name(counter: str, index: int) -> str:
    return f"{counter}@{index}"


class RateCounterStore(DynamoStore):
    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        super().__init__(table_name, dynamodb)
        # scope key -> attribute names of windows too old to matter, seen in the last answer
        self._stale: dict[str, set[str]] = {}

    def hit(
        self, scope: str, *, window_seconds: int, index: int, counters: Sequence[str]
    ) -> dict[str, WindowCounts]:
        """Count one request in each counter of the scope; their current and previous counts."""
        scope_key = f"{scope}#{window_seconds}"
        names: dict[str, str] = {"#ttl": "ttl"}
        adds = []
        for i, counter in enumerate(counters):
            names[f"#c{i}"] = attribute_name(counter, index)
            adds.append(f"#c{i} :one")
        removes = []
        for i, stale in enumerate(sorted(self._stale.pop(scope_key, set()))):
            names[f"#r{i}"] = stale
            removes.append(f"#r{i}")
        expression = "ADD " + ", ".join(adds) + " SET #ttl = :ttl"
        if removes:
            expression += " REMOVE " + ", ".join(removes)
        try:
            response = self.dynamodb.update_item(
                TableName=self.table_name,
                Key=_key(scope, window_seconds),
                UpdateExpression=expression,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={
                    ":one": to_value(1),
                    ":ttl": to_value(expires_at_epoch(index, window_seconds)),
                },
                ReturnValues="ALL_NEW",
            )
        except (ClientError, BotoCoreError) as exc:
            raise TransientError(f"rate-limit counter update failed: {exc}") from exc
        item = response.get("Attributes", {})
        self._remember_stale(scope_key, item, index)
        return {
            counter: WindowCounts(
                current=_number(item, attribute_name(counter, index)),
                previous=_number(item, attribute_name(counter, index - 1)),
            )
            for counter in counters
        }

    def give_back(self, scope: str, *, window_seconds: int, index: int, counters: Sequence[str]) -> None:
        """Uncount a refused request, so it does not use up the caller's or its account's room."""
        names = {f"#c{i}": attribute_name(counter, index) for i, counter in enumerate(counters)}
        try:
            self.dynamodb.update_item(
                TableName=self.table_name,
                Key=_key(scope, window_seconds),
                UpdateExpression="ADD " + ", ".join(f"{name} :minus" for name in names),
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={":minus": to_value(-1)},
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return  # the item expired meanwhile: nothing left to give back to
            raise TransientError(f"rate-limit counter give-back failed: {exc}") from exc
        except BotoCoreError as exc:
            raise TransientError(f"rate-limit counter give-back failed: {exc}") from exc

    def _remember_stale(self, scope_key: str, item: dict[str, Any], index: int) -> None:
        stale = set()
        for name in item:
            counter, at, window = name.rpartition("@")
            if at and counter and window.lstrip("-").isdigit() and int(window) < index - 1:
                stale.add(name)
        if not stale:
            return
        if len(self._stale) >= _MAX_REMEMBERED_SCOPES:
            self._stale.clear()  # a cache of chores: forgetting only delays a clean-up
        self._stale[scope_key] = stale


def _number(item: dict[str, Any], name: str) -> int:
    value = item.get(name)
    return int(value["N"]) if value and "N" in value else 0
