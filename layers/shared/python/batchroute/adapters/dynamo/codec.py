"""Plain Python values <-> DynamoDB attribute values (Decimal for numbers, never float)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(v) for k, v in values.items() if v is not None}


def from_item(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def decimals(value: Any) -> Any:
    """Floats (a threshold, a score, an alert's detail) as Decimal, in maps and lists at any
    depth: DynamoDB takes no float. `plain` reads them back."""
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, Mapping):
        return {str(k): decimals(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [decimals(v) for v in value]
    return value


def plain(value: Any) -> Any:
    """DynamoDB numbers back as int (whole) or float, in maps and lists at any depth, so a value
    read back equals the one written through `decimals`."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


# The golden-set shares kept as floats (a score, a threshold, a numeric scorer's tolerance):
# DynamoDB keeps no number's type, so a whole one comes back an int (`plain`); `with_floats`
# reads them back as the floats they were written as (a score of 1.0, not 1).
SHARES: Final = frozenset({"score", "threshold", "tolerance"})


def with_floats(value: Any, keys: frozenset[str] = SHARES) -> Any:
    """`value` with each int stored under one of `keys` (at any depth) a float again."""
    if isinstance(value, Mapping):
        return {
            str(k): float(v)
            if k in keys and isinstance(v, int) and not isinstance(v, bool)
            else with_floats(v, keys)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [with_floats(v, keys) for v in value]
    return value


def to_value(value: Any) -> dict[str, Any]:
    return dict(_serializer.serialize(value))


def is_condition_failure(exc: Exception) -> bool:
    response = getattr(exc, "response", None) or {}
    return response.get("Error", {}).get("Code") in {
        "ConditionalCheckFailedException",
        "TransactionCanceledException",
    }


def _set_parts(changes: Mapping[str, object]) -> tuple[str, dict[str, str], dict[str, object]]:
    names = {f"#f{i}": name for i, name in enumerate(changes)}
    values = {f":f{i}": value for i, value in enumerate(changes.values())}
    return "SET " + ", ".join(f"#f{i} = :f{i}" for i in range(len(changes))), names, values


EXISTS = "attribute_exists(pk)"  # the item is there (an update never creates one)


def update_request(
    table_name: str,
    key: Mapping[str, Any],
    expression: str,
    *,
    condition: str | None = None,
    names: Mapping[str, str] | None = None,
    values: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """The one way an UpdateItem request (or a transaction's `Update`) is built: `values`
    are plain (encoded here), `condition` None for an unconditional write."""
    request = {"TableName": table_name, "Key": dict(key), "UpdateExpression": expression}
    return request | _conditions(condition, names, values)


def condition_check(
    table_name: str,
    key: Mapping[str, Any],
    condition: str,
    *,
    names: Mapping[str, str] | None = None,
    values: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """The one way a transaction's `ConditionCheck` is built: `condition` must hold on the
    item at `key` for the transaction to commit (`values` plain, encoded here)."""
    check = {"TableName": table_name, "Key": dict(key)} | _conditions(condition, names, values)
    return {"ConditionCheck": check}


NEW = "attribute_not_exists(pk)"  # no item is there yet (a put never overwrites one)


def put_request(
    table_name: str,
    item: Mapping[str, Any],
    *,
    condition: str | None = None,
    names: Mapping[str, str] | None = None,
    values: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """The one way a PutItem request (or a transaction's `Put`) is built, as `update_request`
    builds an update: `item` encoded (`to_item`), `values` plain (encoded here), `condition`
    None for an unconditional write."""
    return {"TableName": table_name, "Item": dict(item)} | _conditions(condition, names, values)


def delete_request(
    table_name: str,
    key: Mapping[str, Any],
    *,
    condition: str | None = None,
    values: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """The one way a DeleteItem request (or a transaction's `Delete`) is built, as
    `update_request` builds an update: `values` plain (encoded here)."""
    return {"TableName": table_name, "Key": dict(key)} | _conditions(condition, None, values)


def _conditions(
    condition: str | None, names: Mapping[str, str] | None, values: Mapping[str, object] | None
) -> dict[str, Any]:
    """A request's condition and the names and values (encoded here) its expressions use."""
    request: dict[str, Any] = {}
    if condition is not None:
        request["ConditionExpression"] = condition
    if names:
        request["ExpressionAttributeNames"] = dict(names)
    if values:
        request["ExpressionAttributeValues"] = {name: to_value(value) for name, value in values.items()}
    return request


def set_update(
    table_name: str,
    key: Mapping[str, Any],
    changes: Mapping[str, object],
    *,
    condition: str | None = EXISTS,
    names: Mapping[str, str] | None = None,
    values: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """The update that SETs `changes` on the item at `key` under `condition` (by default:
    the item exists); `names` and `values` are the condition's own."""
    expression, set_names, set_values = _set_parts(changes)
    return update_request(
        table_name,
        key,
        expression,
        condition=condition,
        names={**set_names, **(names or {})},
        values={**set_values, **(values or {})},
    )


def org_pk(org_id: str) -> str:
    """The partition of an org's own items (its controls, payments, work orders...)."""
    return f"ORG#{org_id}"


def org_item(org_id: str, sk: str, kind: str) -> dict[str, str]:
    """Where an org's item `sk` lives and what it is: the first values of every org item."""
    return {"pk": org_pk(org_id), "sk": sk, "kind": kind}


def org_key(org_id: str, sk: str) -> dict[str, Any]:
    """The key of the org's item `sk`, as DynamoDB takes it."""
    return {"pk": {"S": org_pk(org_id)}, "sk": {"S": sk}}
