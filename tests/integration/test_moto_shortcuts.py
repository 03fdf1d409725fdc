"""Two shortcuts past moto's slow paths give what the slow paths give: DynamoDB answers
written from their wire form (batchroute_tools/local/moto_answers.py, in the local stack and
the test suites) read back as moto's own serializer writes them, and the lane heartbeats
replayed on a fresh stack (batch_pipeline_support.heartbeat_all_lanes) are the rows the
lane-health refresh writes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto.core.serialize import BaseJSONSerializer

from batchroute.adapters.dynamo.lanes import LaneStateStore
from batchroute.catalog import builtin_catalog
from batchroute.clock import FixedClock
from batchroute.config import get_settings
from batchroute.services.catalog.lane_health import SimulatedProviderHealth, refresh_lane_heartbeats
from batchroute_tools.local import moto_answers
from batchroute_tools.local.provision import LOCAL_REGION, LocalStack
from tests.integration.batch_pipeline_support import _lane_rows, heartbeat_all_lanes

EVERY_KIND: dict[str, Any] = {
    "pk": {"S": "SHORTCUT"},
    "sk": {"S": "ITEM#1"},
    "text": {"S": ""},
    "number": {"N": "12.50"},
    "blob": {"B": b"\x00\xffbytes"},
    "strings": {"SS": ["a", "b"]},
    "numbers": {"NS": ["1", "2.5"]},
    "blobs": {"BS": [b"\x01", b"\x02"]},
    "nothing": {"NULL": True},
    "yes": {"BOOL": True},
    "no": {"BOOL": False},
    "empty_map": {"M": {}},
    "empty_list": {"L": []},
    "touched": {"N": "1"},  # what the UpdateItem read sets: every read sees the same item
    "nested": {"M": {"list": {"L": [{"S": "x"}, {"N": "3"}, {"M": {"b": {"B": b"\x07"}}}, {"NULL": True}]}}},
}


def _answers(table: str) -> list[dict[str, Any]]:
    dynamodb = boto3.client("dynamodb", region_name=LOCAL_REGION)
    key = {"pk": EVERY_KIND["pk"], "sk": EVERY_KIND["sk"]}
    query = {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": EVERY_KIND["pk"]},
    }
    return [
        dynamodb.get_item(TableName=table, Key=key)["Item"],
        dynamodb.query(**query)["Items"][0],
        dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET touched = :t",
            ExpressionAttributeValues={":t": {"N": "1"}},
            ReturnValues="ALL_NEW",
        )["Attributes"],
    ]


def test_dynamodb_answers_written_from_their_wire_form_read_as_motos_own(
    local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an item holding every kind of attribute value, nested ones too
    table = get_settings().table_name("controls")
    boto3.client("dynamodb", region_name=LOCAL_REGION).put_item(TableName=table, Item=EVERY_KIND)
    # When it is read (GetItem, Query, UpdateItem's ALL_NEW) through the shortcut and through
    # moto's own serializer
    shortcut = _answers(table)
    monkeypatch.setattr(
        BaseJSONSerializer, "_serialize_type_structure", moto_answers.moto_serialize_structure
    )
    own = _answers(table)
    # Then the answers are the same, and they are the item written
    assert shortcut == own
    assert shortcut[0] == EVERY_KIND
    assert BaseJSONSerializer._serialize_type_structure is moto_answers.moto_serialize_structure


def test_lane_heartbeats_replayed_on_a_fresh_stack_are_the_rows_the_refresh_writes(
    local_aws: LocalStack,
) -> None:
    # Given a first fresh stack's refresh kept (any earlier test of this process may have kept it)
    store = LaneStateStore(get_settings().table_name("controls"))
    heartbeat_all_lanes(FixedClock(datetime(2026, 3, 1, 23, 59, 30, tzinfo=UTC)))
    for row in _lane_rows(store):
        store.dynamodb.delete_item(TableName=store.table_name, Key={"pk": row["pk"], "sk": row["sk"]})
    # When the lanes of a fresh stack are heartbeated at another time and day
    later = FixedClock(datetime(2026, 3, 2, 8, 0, 0, tzinfo=UTC))
    heartbeat_all_lanes(later)
    replayed = _lane_rows(store)
    for row in replayed:
        store.dynamodb.delete_item(TableName=store.table_name, Key={"pk": row["pk"], "sk": row["sk"]})
    refresh_lane_heartbeats(builtin_catalog(), store, SimulatedProviderHealth(), later)
    # Then they are the rows the service's refresh writes at that time
    assert replayed == _lane_rows(store)
    assert {row["capacity_day"]["S"] for row in replayed} == {"2026-03-02"}
    assert len(replayed) == len(store.live_states())
