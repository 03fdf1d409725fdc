"""The one place that tells a failed DynamoDB condition from any other error
(adapters/dynamo/writes.py): conditional writes answer False, cancelled transactions are read
item by item, and every other error raises as it came."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from batchroute.adapters.dynamo.codec import (
    NEW,
    delete_request,
    put_request,
    set_update,
    to_item,
    update_request,
)
from batchroute.adapters.dynamo.writes import (
    cancellation_codes,
    condition_failed_at,
    conditional_delete,
    conditional_put,
    conditional_transaction,
    conditional_update,
    refused_by,
    written,
)


def _error(code: str, reasons: list[str] | None = None) -> ClientError:
    response: dict[str, Any] = {"Error": {"Code": code, "Message": code}}
    if reasons is not None:
        response["CancellationReasons"] = [{"Code": reason} for reason in reasons]
    return ClientError(response, "TransactWriteItems")  # type: ignore[arg-type]


class Table:
    """A DynamoDB client whose every write raises `error` (or answers `{"ok": True}`)."""

    def __init__(self, error: ClientError | None = None) -> None:
        self.error = error
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _write(self, name: str, request: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((name, request))
        if self.error is not None:
            raise self.error
        return {"ok": True}

    def update_item(self, **request: Any) -> dict[str, Any]:
        return self._write("update_item", request)

    def put_item(self, **request: Any) -> dict[str, Any]:
        return self._write("put_item", request)

    def delete_item(self, **request: Any) -> dict[str, Any]:
        return self._write("delete_item", request)

    def transact_write_items(self, **request: Any) -> dict[str, Any]:
        return self._write("transact_write_items", request)


ONE = {"TableName": "t", "ConditionExpression": "attribute_exists(pk)"}
WRITES = [
    (conditional_update, "update_item", ONE),
    (conditional_put, "put_item", ONE),
    (conditional_delete, "delete_item", ONE),
    (conditional_transaction, "transact_write_items", {"TransactItems": [{"Put": ONE}]}),
]


@pytest.mark.parametrize(("write", "name", "request_"), WRITES)
def test_a_write_that_holds_is_made_once_with_its_request(write: Any, name: str, request_: Any) -> None:
    table = Table()
    assert write(table, **request_) is True
    assert table.calls == [(name, request_)]


@pytest.mark.parametrize(("write", "name", "request_"), WRITES)
@pytest.mark.parametrize("code", ["ConditionalCheckFailedException", "TransactionCanceledException"])
def test_a_failed_condition_is_false(write: Any, name: str, request_: Any, code: str) -> None:
    table = Table(_error(code))
    assert write(table, **request_) is False
    assert [called for called, _ in table.calls] == [name]


@pytest.mark.parametrize(("write", "name", "request_"), WRITES)
def test_any_other_error_raises_as_it_came(write: Any, name: str, request_: Any) -> None:
    error = _error("ProvisionedThroughputExceededException")
    with pytest.raises(ClientError) as raised:
        write(Table(error), **request_)
    assert raised.value is error


def test_written_gives_the_response_or_none() -> None:
    assert written(Table().update_item, TableName="t") == {"ok": True}
    assert written(Table(_error("ConditionalCheckFailedException")).update_item, TableName="t") is None


def test_cancellation_codes_are_read_in_item_order() -> None:
    cancelled = _error(
        "TransactionCanceledException", ["None", "ConditionalCheckFailed", "TransactionConflict"]
    )
    codes = cancellation_codes(cancelled)
    assert codes == ["None", "ConditionalCheckFailed", "TransactionConflict"]
    assert [condition_failed_at(codes, at) for at in (-1, 0, 1, 2, 3)] == [False, False, True, False, False]
    assert cancellation_codes(_error("ConditionalCheckFailedException")) == []


def test_refused_by_names_the_item_whose_condition_refused() -> None:
    cancelled = _error("TransactionCanceledException", ["None", "ConditionalCheckFailed"])
    assert refused_by(cancelled, 1) and refused_by(cancelled, 0, 1)
    assert not refused_by(cancelled, 0)
    single = _error("ConditionalCheckFailedException")  # a failed condition that names no item
    assert not refused_by(single, 0)
    assert refused_by(single, 0, or_unnamed=True)
    assert not refused_by(_error("ValidationException"), 0, or_unnamed=True)


# -- the one UpdateItem builder (adapters/dynamo/codec.py) ---------------------------------------
def test_an_update_request_encodes_its_plain_values_and_leaves_out_what_it_was_not_given() -> None:
    key = {"pk": {"S": "BATCH#b1"}, "sk": {"S": "META"}}
    assert update_request("t", key, "SET a = :a", values={":a": 3}) == {
        "TableName": "t",
        "Key": key,
        "UpdateExpression": "SET a = :a",
        "ExpressionAttributeValues": {":a": {"N": "3"}},
    }
    assert update_request(
        "t",
        key,
        "SET #s = :s",
        condition="#s = :old",
        names={"#s": "status"},
        values={":s": "b", ":old": "a"},
    ) == {
        "TableName": "t",
        "Key": key,
        "UpdateExpression": "SET #s = :s",
        "ConditionExpression": "#s = :old",
        "ExpressionAttributeNames": {"#s": "status"},
        "ExpressionAttributeValues": {":s": {"S": "b"}, ":old": {"S": "a"}},
    }


# -- the one PutItem builder, the same way -----------------------------------------------------
def test_a_put_request_keeps_its_encoded_item_and_encodes_its_plain_values() -> None:
    item = to_item({"pk": "FILE#f1", "sk": "META", "status": "ready", "bytes": 12})
    assert put_request("t", item) == {"TableName": "t", "Item": item}
    assert put_request("t", item, condition=NEW) == {
        "TableName": "t",
        "Item": item,
        "ConditionExpression": "attribute_not_exists(pk)",
    }
    assert put_request(
        "t", item, condition="#s = :old", names={"#s": "status"}, values={":old": "uploaded"}
    ) == {
        "TableName": "t",
        "Item": item,
        "ConditionExpression": "#s = :old",
        "ExpressionAttributeNames": {"#s": "status"},
        "ExpressionAttributeValues": {":old": {"S": "uploaded"}},
    }


def test_a_delete_request_keeps_its_key_and_encodes_its_plain_values() -> None:
    key = {"pk": {"S": "BATCH#b1"}, "sk": {"S": "RECLAIM"}}
    assert delete_request("t", key) == {"TableName": "t", "Key": key}
    assert delete_request("t", key, condition="gsi2sk = :seen", values={":seen": "2026#b1"}) == {
        "TableName": "t",
        "Key": key,
        "ConditionExpression": "gsi2sk = :seen",
        "ExpressionAttributeValues": {":seen": {"S": "2026#b1"}},
    }


def test_a_set_update_sets_each_change_on_an_existing_item_with_the_condition_s_own_names() -> None:
    key = {"pk": {"S": "BATCH#b1"}, "sk": {"S": "CURSOR#finalize"}}
    assert set_update("t", key, {"state": "done", "position": 2}) == {
        "TableName": "t",
        "Key": key,
        "UpdateExpression": "SET #f0 = :f0, #f1 = :f1",
        "ConditionExpression": "attribute_exists(pk)",
        "ExpressionAttributeNames": {"#f0": "state", "#f1": "position"},
        "ExpressionAttributeValues": {":f0": {"S": "done"}, ":f1": {"N": "2"}},
    }
    advance = set_update(
        "t", key, {"position": 3}, condition="#p = :p", names={"#p": "position"}, values={":p": 2}
    )
    assert advance["ConditionExpression"] == "#p = :p"
    assert advance["ExpressionAttributeNames"] == {"#f0": "position", "#p": "position"}
    assert advance["ExpressionAttributeValues"] == {":f0": {"N": "3"}, ":p": {"N": "2"}}
    assert "ConditionExpression" not in set_update("t", key, {"state": "done"}, condition=None)
