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

from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from batchroute.adapters.dynamo.codec import EXISTS, to_value, update_request
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.adapters.dynamo.writes import conditional
from batchroute.domain.billing.rate_limits import CallerGate, WindowCounts, expires_at_epoch
from batchroute.errors import TransientError

_MAX_REMEMBERED_SCOPES = 10_000


def _key(scope: str, window_seconds: int) -> dict[str, Any]:
    return {"pk": {"S": f"RATE#{scope}#{window_seconds}s"}, "sk": {"S": "COUNTER"}}


def attribute_name(counter: str, index: int) -> str:
    return f"{counter}@{index}"


def _transient(what: str, call: Callable[..., Any], *args: Any, **request: Any) -> Any:
    """`call(*args, **request)`; any DynamoDB failure is a TransientError naming `what`."""
    try:
        return call(*args, **request)
    except (ClientError, BotoCoreError) as exc:
        raise TransientError(f"{what} failed: {exc}") from exc


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
        expression, names = self._counting(scope_key, counters, index)
        response = _transient(
            "rate-limit counter update",
            self.dynamodb.update_item,
            **update_request(
                self.table_name,
                _key(scope, window_seconds),
                expression,
                names=names,
                values={":one": 1, ":ttl": expires_at_epoch(index, window_seconds)},
            ),
            ReturnValues="ALL_NEW",
        )
        item = response.get("Attributes", {})
        self._remember_stale(scope_key, item, index)
        return counts_of(item, counters, index)

    def read(
        self, scope: str, *, window_seconds: int, index: int, counters: Sequence[str]
    ) -> dict[str, WindowCounts]:
        """The counters' current and previous counts (consistent), counting nothing."""
        response = _transient(
            "rate-limit counter read",
            self.dynamodb.get_item,
            TableName=self.table_name,
            Key=_key(scope, window_seconds),
            ConsistentRead=True,
        )
        return counts_of(response.get("Item", {}), counters, index)

    def gated_hit(self, gate: CallerGate) -> dict[str, Any]:
        """`hit` as an Update for a transaction, conditioned on the gate's maxima: the count
        and the decision in one write. A refusal returns the item (ALL_OLD), which
        `counts_of` reads for `RateLimiter.recheck`."""
        scope_key = f"{gate.scope}#{gate.window_seconds}"
        expression, names = self._counting(scope_key, gate.counters, gate.index)
        values: dict[str, object] = {":one": 1, ":ttl": expires_at_epoch(gate.index, gate.window_seconds)}
        conditions = []
        for i, counter in enumerate(gate.counters):
            most = gate.maxima[counter]
            if most >= 0:
                values[f":m{i}"] = most
                conditions.append(f"(attribute_not_exists(#c{i}) OR #c{i} <= :m{i})")
            else:  # nothing fits unless nothing was ever counted (the item is absent)
                names["#pk"] = "pk"
                conditions.append("attribute_not_exists(#pk)")
        request = update_request(
            self.table_name,
            _key(gate.scope, gate.window_seconds),
            expression,
            condition=" AND ".join(conditions),
            names=names,
            values=values,
        )
        return {"Update": {**request, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}

    def refused_counts(self, gate: CallerGate, item: dict[str, Any]) -> dict[str, WindowCounts]:
        """The counts of a gated hit's refusal (its ALL_OLD item); remembers its stale windows."""
        self._remember_stale(f"{gate.scope}#{gate.window_seconds}", item, gate.index)
        return counts_of(item, gate.counters, gate.index)

    def give_back(self, scope: str, *, window_seconds: int, index: int, counters: Sequence[str]) -> None:
        """Uncount a refused request, so it does not use up the caller's or its account's room."""
        names = {f"#c{i}": attribute_name(counter, index) for i, counter in enumerate(counters)}
        # A failed condition: the item expired meanwhile, nothing left to give back to.
        _transient(
            "rate-limit counter give-back",
            conditional,
            self.dynamodb.update_item,
            **update_request(
                self.table_name,
                _key(scope, window_seconds),
                "ADD " + ", ".join(f"{name} :minus" for name in names),
                condition=EXISTS,
                names=names,
                values={":minus": -1},
            ),
        )

    def _counting(self, scope_key: str, counters: Sequence[str], index: int) -> tuple[str, dict[str, str]]:
        """The update that counts one in each counter (`:one`), refreshes the TTL (`:ttl`) and
        `REMOVE`s the stale windows last seen, and the attribute names it uses."""
        names = {"#ttl": "ttl", **{f"#c{i}": attribute_name(c, index) for i, c in enumerate(counters)}}
        expression = "ADD " + ", ".join(f"#c{i} :one" for i in range(len(counters))) + " SET #ttl = :ttl"
        stale = sorted(self._stale.pop(scope_key, set()))
        if stale:
            names.update({f"#r{i}": name for i, name in enumerate(stale)})
            expression += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(stale)))
        return expression, names

    def _remember_stale(self, scope_key: str, item: dict[str, Any], index: int) -> None:
        stale = set()
        for name in item:
            counter, at, window = name.rpartition("@")
            if at and counter and window.lstrip("-").isdecimal() and int(window) < index - 1:
                stale.add(name)
        if not stale:
            return
        if len(self._stale) >= _MAX_REMEMBERED_SCOPES:
            self._stale.clear()  # a cache of chores: forgetting only delays a clean-up
        self._stale[scope_key] = stale


def counts_of(item: dict[str, Any], counters: Sequence[str], index: int) -> dict[str, WindowCounts]:
    return {
        counter: WindowCounts(
            current=_number(item, attribute_name(counter, index)),
            previous=_number(item, attribute_name(counter, index - 1)),
        )
        for counter in counters
    }


def _number(item: dict[str, Any], name: str) -> int:
    value = item.get(name)
    return int(value["N"]) if value and "N" in value else 0


class LoginLockStore(DynamoStore):
    """Per-account sign-in locks in the `controls` table (docs/rate-limits.md, "Account
    lockout"): `LOGINLOCK#<address digest>` / `LOCK` with `until` (epoch seconds) and a TTL.
    Taking a lock is one conditional put, so among concurrent failures exactly one takes it
    (and sends the one email)."""

    @staticmethod
    def _key(account: str) -> dict[str, Any]:
        return {"pk": {"S": f"LOGINLOCK#{account}"}, "sk": {"S": "LOCK"}}

    def lock(self, account: str, *, now: int, until: int) -> bool:
        """Lock until `until` unless a lock still holds at `now`; True when this call took it."""
        return bool(
            _transient(
                "login lock write",
                conditional,
                self.dynamodb.put_item,
                TableName=self.table_name,
                Item={**self._key(account), "until": to_value(until), "ttl": to_value(until + 60)},
                ConditionExpression="attribute_not_exists(pk) OR #until <= :now",
                ExpressionAttributeNames={"#until": "until"},
                ExpressionAttributeValues={":now": to_value(now)},
            )
        )

    def locked_until(self, account: str) -> int | None:
        """The lock's end (epoch seconds), or None; a lock past its end may still be returned."""
        item = _transient(
            "login lock read",
            self.dynamodb.get_item,
            TableName=self.table_name,
            Key=self._key(account),
            ConsistentRead=True,
        ).get("Item")
        return _number(item, "until") if item else None
