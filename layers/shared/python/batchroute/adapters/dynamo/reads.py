"""Reading a Query or a Scan page after page: the one loop that follows `LastEvaluatedKey`.

`prefix_query` and `index_before` build the usual requests (a partition's items under a
sort-key prefix; a sparse index's entries due before a time);
`pages(read, request)` answers each response of `read(**request)` (the client's `query` or
`scan`) and asks for the next page only when the caller goes on, so a caller that has read
enough stops there; `every_item` reads to the last page and answers the items as plain values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from batchroute.adapters.dynamo.codec import from_item, to_value


def prefix_query(
    table_name: str,
    pk: str,
    prefix: str,
    *,
    start_sk: str | None = None,
    index: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """The Query of partition `pk`'s items whose sort key begins with `prefix`, from after the
    item `start_sk` when given; of an index's (`gsi1`: its `gsi1pk` and `gsi1sk`) when `index`
    is named; `options` complete it (ScanIndexForward, Limit, ConsistentRead, Select)."""
    keys = index or ""
    request: dict[str, Any] = {
        "TableName": table_name,
        "KeyConditionExpression": f"{keys}pk = :pk AND begins_with({keys}sk, :prefix)",
        "ExpressionAttributeValues": {":pk": to_value(pk), ":prefix": to_value(prefix)},
        **options,
    }
    if index is not None:
        if start_sk is not None:
            raise ValueError("an index's page starts from the table's key too: not a start_sk")
        request["IndexName"] = index
    if start_sk is not None:
        request["ExclusiveStartKey"] = {"pk": to_value(pk), "sk": to_value(start_sk)}
    return request


def day_range_query(
    table_name: str, pk: str, prefix: str, first_day: str, last_day: str, **options: Any
) -> dict[str, Any]:
    """The Query of partition `pk`'s items keyed `prefix` + a day (yyyy-mm-dd...), from
    `first_day` to `last_day` inclusive; `options` complete it (ConsistentRead)."""
    return {
        "TableName": table_name,
        "KeyConditionExpression": "pk = :pk AND sk BETWEEN :first AND :last",
        "ExpressionAttributeValues": {
            ":pk": to_value(pk),
            ":first": to_value(f"{prefix}{first_day}"),
            # "$" sorts right after "#": every item of the last day, nothing after it.
            ":last": to_value(f"{prefix}{last_day}$"),
        },
        **options,
    }


def index_before(table_name: str, index: str, partition: str, before: str, **options: Any) -> dict[str, Any]:
    """The Query of a sparse index's (`gsi1`, `gsi2`) entries in `partition` whose sort key is
    before `before`, oldest first; `options` complete it (Limit...)."""
    return {
        "TableName": table_name,
        "IndexName": index,
        "KeyConditionExpression": f"{index}pk = :p AND {index}sk < :before",
        "ExpressionAttributeValues": {":p": to_value(partition), ":before": to_value(before)},
        **options,
    }


def index_due(table_name: str, index: str, partition: str, now_iso: str, **options: Any) -> dict[str, Any]:
    """The Query of a sparse due index's entries in `partition` (sort key `<when>#<id>`) due at
    or before `now_iso`, the earliest first: those before `<now_iso>#~`, which sorts after
    every id."""
    return index_before(table_name, index, partition, f"{now_iso}#~", **options)


def pages(read: Callable[..., Any], request: dict[str, Any]) -> Iterator[Any]:
    """Each response of one Query or Scan, from the request's own start key on."""
    request = dict(request)
    while True:
        response = read(**request)
        yield response
        if "LastEvaluatedKey" not in response:
            return
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def raw_items(read: Callable[..., Any], request: dict[str, Any]) -> Iterator[Any]:
    """Every item of one Query or Scan as DynamoDB answers it, page after page."""
    for response in pages(read, request):
        yield from response.get("Items", [])


def every_item(read: Callable[..., Any], request: dict[str, Any]) -> list[dict[str, Any]]:
    """Every item of one Query or Scan as plain values, page after page (a page ends at 1 MB)."""
    return [from_item(item) for item in raw_items(read, request)]
