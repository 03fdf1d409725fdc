"""The Query requests the DynamoDB adapters build (adapters/dynamo/reads.py)."""

from __future__ import annotations

import pytest

from batchroute.adapters.dynamo.reads import prefix_query


def test_a_prefix_query_reads_a_partitions_items_under_a_sort_key_prefix() -> None:
    request = prefix_query("t", "ORG#o1", "EVENT#", ScanIndexForward=False, Limit=3)
    assert request == {
        "TableName": "t",
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
        "ExpressionAttributeValues": {":pk": {"S": "ORG#o1"}, ":prefix": {"S": "EVENT#"}},
        "ScanIndexForward": False,
        "Limit": 3,
    }


def test_a_prefix_query_starts_after_the_item_named() -> None:
    request = prefix_query("t", "ORG#o1", "EVENT#", start_sk="EVENT#2026")
    assert request["ExclusiveStartKey"] == {"pk": {"S": "ORG#o1"}, "sk": {"S": "EVENT#2026"}}


def test_a_prefix_query_of_an_index_names_it_and_its_keys() -> None:
    request = prefix_query("t", "ORG#o1", "BATCH#", index="gsi1", Select="COUNT")
    assert request["IndexName"] == "gsi1"
    assert request["KeyConditionExpression"] == "gsi1pk = :pk AND begins_with(gsi1sk, :prefix)"
    assert request["Select"] == "COUNT" and "ExclusiveStartKey" not in request


def test_an_index_query_is_not_started_from_a_sort_key_alone() -> None:
    # an index page's start key holds the table's key as well as the index's
    with pytest.raises(ValueError, match="start_sk"):
        prefix_query("t", "ORG#o1", "BATCH#", index="gsi1", start_sk="BATCH#b1")
