"""Conditional writes and what a refused one says: the one place that tells a failed
condition from any other DynamoDB error.

`conditional_update` / `conditional_put` / `conditional_delete` make one write with its
`ConditionExpression` and answer False when the condition did not hold (every other error
raises as it came). A cancelled transaction names, per item in the order of its
`TransactItems`, why it was cancelled: `cancellation_codes` reads those reasons and
`condition_failed_at` says whether the item at a position is the one whose condition
refused it; `transact_unless_refused` writes one and answers False when the item refused at
one of the given positions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from batchroute.adapters.dynamo.codec import NEW, is_condition_failure, put_request, to_item, to_value

CONDITION_FAILED = "ConditionalCheckFailed"  # a cancellation reason's code


def written(write: Callable[..., Any], **request: Any) -> dict[str, Any] | None:
    """The response of `write(**request)`; None when its condition failed."""
    try:
        return write(**request) or {}
    except ClientError as exc:
        if is_condition_failure(exc):
            return None
        raise


def conditional(write: Callable[..., Any], **request: Any) -> bool:
    """Make `write(**request)`; False when its condition failed."""
    return written(write, **request) is not None


def conditional_update(dynamodb: Any, **request: Any) -> bool:
    """UpdateItem under its ConditionExpression; False when the condition failed."""
    return conditional(dynamodb.update_item, **request)


def conditional_put(dynamodb: Any, **request: Any) -> bool:
    """PutItem under its ConditionExpression; False when the condition failed."""
    return conditional(dynamodb.put_item, **request)


def conditional_delete(dynamodb: Any, **request: Any) -> bool:
    """DeleteItem under its ConditionExpression; False when the condition failed."""
    return conditional(dynamodb.delete_item, **request)


def cancellation_codes(exc: ClientError) -> list[str]:
    """The per-item reason codes of a cancelled transaction ("None" for the items that were
    fine), in the order of its TransactItems; empty for any other error."""
    reasons = exc.response.get("CancellationReasons") or []
    return [str(reason.get("Code", "None")) for reason in reasons]


def condition_failed_at(codes: Sequence[str], at: int) -> bool:
    """The transaction item at position `at` was refused by its own condition."""
    return 0 <= at < len(codes) and codes[at] == CONDITION_FAILED


def first_refused(exc: ClientError, names: Sequence[str]) -> str | None:
    """Of the transaction's first items, named in their order by `names`, the first whose own
    condition cancelled it; None when none of them did (or it was no cancellation)."""
    codes = cancellation_codes(exc)
    return next((name for at, name in enumerate(names) if condition_failed_at(codes, at)), None)


def refused_by(exc: ClientError, *positions: int, or_unnamed: bool = False) -> bool:
    """The transaction was cancelled by the condition of an item at one of `positions`; with
    `or_unnamed`, also by a failed condition that names no item (a single write's)."""
    codes = cancellation_codes(exc)
    if or_unnamed and not codes and is_condition_failure(exc):
        return True
    return any(condition_failed_at(codes, at) for at in positions)


def transact_unless_refused(
    dynamodb: Any, items: list[Any], *positions: int, or_unnamed: bool = False
) -> bool:
    """One TransactWriteItems; False when the condition of an item at one of `positions` (or,
    with `or_unnamed`, a failed condition that names no item) cancelled it. Any other refusal
    or error raises as it came."""
    try:
        dynamodb.transact_write_items(TransactItems=items)
    except ClientError as exc:
        if refused_by(exc, *positions, or_unnamed=or_unnamed):
            return False
        raise
    return True


def conditional_transaction(dynamodb: Any, TransactItems: list[Any]) -> bool:
    """One TransactWriteItems; False when a condition refused it."""
    return conditional(dynamodb.transact_write_items, TransactItems=TransactItems)


def at_version(expected: int | None) -> dict[str, Any]:
    """The condition of a write made on the item as read at version `expected` (optimistic
    concurrency: refused when someone saved it since); 0 or None: read as absent, so refused
    when someone created it since."""
    if not expected:
        return {"ConditionExpression": NEW}
    return {
        "ConditionExpression": "version = :version",
        "ExpressionAttributeValues": {":version": to_value(expected)},
    }


def version_check(table_name: str, key: dict[str, Any], version: int | None) -> dict[str, Any]:
    """A transaction's ConditionCheck that the item at `key` is still at `version` as read
    (`at_version`: 0 or None, that there is none yet); fails when it was saved since."""
    return {"ConditionCheck": {"TableName": table_name, "Key": key, **at_version(version)}}


def put_new(table_name: str, values: dict[str, Any]) -> dict[str, Any]:
    """A transaction item writing `values` as a new item: refused if its key exists."""
    return {"Put": put_request(table_name, to_item(values), condition=NEW)}


def put_unless_live(table_name: str, values: dict[str, Any], *, now: int) -> dict[str, Any]:
    """A transaction item writing `values` (an idempotency record) as a new item, or over one
    whose `ttl` (epoch seconds) has passed at `now`: DynamoDB deletes an expired item up to
    two days late, and until then it is no record any more. Refused if a live one is there."""
    condition = f"{NEW} OR #ttl <= :now"
    return {
        "Put": put_request(
            table_name, to_item(values), condition=condition, names={"#ttl": "ttl"}, values={":now": now}
        )
    }
