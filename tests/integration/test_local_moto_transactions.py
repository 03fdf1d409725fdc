"""The local stack's moto server rolls a failed DynamoDB transaction back item by item: what
the transaction wrote is undone exactly, and no table is copied (moto's stock rollback copies
every table a transaction names, which grows with the table; see moto_transactions.py)."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import backends as moto_backends
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.parsing import executors, expressions

from batchroute_tools.local import moto_transactions
from batchroute_tools.local.moto_server import make_moto_server

REGION = "us-east-1"


@pytest.fixture
def dynamodb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    # The local stack's moto server, in this process so the test can look into its tables.
    server = make_moto_server("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host, port = server.server_address[:2]
        client = boto3.session.Session().client(
            "dynamodb", region_name=REGION, endpoint_url=f"http://{host!s}:{port}"
        )
        for name, keys in {"ranged": ("pk", "sk"), "hashed": ("pk",)}.items():
            client.create_table(
                TableName=name,
                KeySchema=[
                    {"AttributeName": key, "KeyType": kind}
                    for key, kind in zip(keys, ("HASH", "RANGE"), strict=False)
                ],
                AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"} for key in keys],
                BillingMode="PAY_PER_REQUEST",
            )
        yield client
    finally:
        server.shutdown()
        server.server_close()
        moto_transactions.uninstall()  # this test process's other suites use moto as it ships
        dynamodb_backends[DEFAULT_ACCOUNT_ID].pop(REGION, None)


def _key(pk: str, sk: str | None = "META") -> dict[str, Any]:
    return {"pk": {"S": pk}, **({"sk": {"S": sk}} if sk is not None else {})}


def _item(client: Any, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
    found: dict[str, Any] | None = client.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
    return found


def _tables() -> dict[str, Any]:
    return dict(dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].tables)


def test_failed_transaction_undoes_its_writes_without_copying_tables(dynamodb: Any) -> None:
    # Given an item to update, one to delete, and many others
    dynamodb.put_item(TableName="ranged", Item={**_key("a"), "v": {"N": "1"}, "tags": {"SS": ["x"]}})
    dynamodb.put_item(TableName="ranged", Item={**_key("b"), "v": {"N": "1"}})
    for n in range(50):
        dynamodb.put_item(TableName="ranged", Item={**_key(f"other-{n}"), "v": {"N": str(n)}})
    tables = _tables()
    before = {pk: _item(dynamodb, "ranged", _key(pk)) for pk in ("a", "b", "c")}
    # When a transaction updates, deletes and puts, then fails its last condition
    with pytest.raises(ClientError) as refused:
        dynamodb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": "ranged",
                        "Key": _key("a"),
                        "UpdateExpression": "SET v = :two ADD tags :y",
                        "ExpressionAttributeValues": {":two": {"N": "2"}, ":y": {"SS": ["y"]}},
                    }
                },
                {"Delete": {"TableName": "ranged", "Key": _key("b")}},
                {"Put": {"TableName": "ranged", "Item": {**_key("c"), "v": {"N": "3"}}}},
                {"Put": {"TableName": "hashed", "Item": {**_key("h", None), "v": {"N": "3"}}}},
                {
                    "ConditionCheck": {
                        "TableName": "ranged",
                        "Key": _key("missing"),
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        )
    assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"
    # Then every item is as it was, the new ones do not exist, and no table was replaced by a copy
    assert {pk: _item(dynamodb, "ranged", _key(pk)) for pk in ("a", "b", "c")} == before
    assert before["c"] is None and _item(dynamodb, "hashed", _key("h", None)) is None
    assert dynamodb.scan(TableName="ranged")["Count"] == 52
    assert dynamodb.scan(TableName="hashed")["Count"] == 0
    assert all(_tables()[name] is table for name, table in tables.items())


def test_transaction_naming_one_item_twice_is_refused_and_writes_nothing(dynamodb: Any) -> None:
    dynamodb.put_item(TableName="ranged", Item={**_key("a"), "v": {"N": "1"}})
    with pytest.raises(ClientError) as refused:
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "ranged", "Item": {**_key("a"), "v": {"N": "5"}}}},
                {"Delete": {"TableName": "ranged", "Key": _key("a")}},
            ]
        )
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert _item(dynamodb, "ranged", _key("a")) == {**_key("a"), "v": {"N": "1"}}


def test_successful_transaction_commits_every_write(dynamodb: Any) -> None:
    dynamodb.put_item(TableName="ranged", Item={**_key("a"), "v": {"N": "1"}})
    tables = _tables()
    dynamodb.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": "ranged",
                    "Key": _key("a"),
                    "UpdateExpression": "SET v = :two",
                    "ConditionExpression": "v = :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}, ":two": {"N": "2"}},
                }
            },
            {"Put": {"TableName": "hashed", "Item": {**_key("h", None), "v": {"N": "3"}}}},
        ]
    )
    assert _item(dynamodb, "ranged", _key("a")) == {**_key("a"), "v": {"N": "2"}}
    assert _item(dynamodb, "hashed", _key("h", None)) == {**_key("h", None), "v": {"N": "3"}}
    assert all(_tables()[name] is table for name, table in tables.items())


def test_a_write_during_a_failing_transaction_is_not_undone_by_its_rollback(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an item, and a transaction on it held between saving what it names and running
    dynamodb.put_item(TableName="hashed", Item={**_key("a", None), "v": {"N": "1"}})
    saved, go = threading.Event(), threading.Event()
    real_save = moto_transactions._save

    def held_save(backend: Any, items: list[dict[str, Any]]) -> Any:
        kept = real_save(backend, items)
        saved.set()
        go.wait(timeout=30)
        return kept

    monkeypatch.setattr(moto_transactions, "_save", held_save)
    failing = {
        "Update": {
            "TableName": "hashed",
            "Key": _key("a", None),
            "UpdateExpression": "SET v = :nine",
            "ConditionExpression": "v = :zero",
            "ExpressionAttributeValues": {":nine": {"N": "9"}, ":zero": {"N": "0"}},
        }
    }
    refused: list[BaseException] = []

    def transact() -> None:
        try:
            dynamodb.transact_write_items(TransactItems=[failing])
        except ClientError as exc:
            refused.append(exc)

    transaction = threading.Thread(target=transact)
    transaction.start()
    assert saved.wait(timeout=30)
    # When another caller updates the item meanwhile, then the transaction fails its condition
    writer = threading.Thread(
        target=dynamodb.update_item,
        kwargs={
            "TableName": "hashed",
            "Key": _key("a", None),
            "UpdateExpression": "SET w = :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        },
    )
    writer.start()
    writer.join(timeout=0.5)  # on DynamoDB it waits for the transaction; unpatched moto does not
    go.set()
    transaction.join(timeout=30)
    writer.join(timeout=30)
    # Then the transaction was refused and the other write is kept, not rolled back with it
    assert len(refused) == 1
    assert _item(dynamodb, "hashed", _key("a", None)) == {**_key("a", None), "v": {"N": "1"}, "w": {"N": "1"}}


def test_the_server_lists_motos_modules_once_not_on_every_request(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a server that has answered the fixture's DynamoDB requests
    listed: list[str] = []
    listdir = os.listdir

    def counted(path: Any = ".") -> list[str]:
        listed.append(str(path))
        return listdir(path)

    monkeypatch.setattr(os, "listdir", counted)
    # When more requests come
    dynamodb.put_item(TableName="hashed", Item=_key("a", None))
    for _ in range(5):
        assert _item(dynamodb, "hashed", _key("a", None)) == _key("a", None)
    # Then they are answered without moto listing its package's folders again
    moto_folder = os.path.dirname(moto_backends.__file__)
    assert [path for path in listed if path == moto_folder] == []


def test_an_update_expression_is_parsed_once_however_often_it_is_used(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a server that counts the update expressions moto tokenizes
    tokenized: list[str] = []
    make_list = expressions.ExpressionTokenizer.make_list

    def counted(expression: str) -> Any:
        tokenized.append(expression)
        return make_list(expression)

    monkeypatch.setattr(expressions.ExpressionTokenizer, "make_list", staticmethod(counted))
    # When the same update (an expression this process has not seen) is written five times
    name = f"n{uuid.uuid4().hex}"
    update = f"SET {name} = if_not_exists({name}, :zero) + :one"
    for _ in range(5):
        dynamodb.update_item(
            TableName="hashed",
            Key=_key("counter", None),
            UpdateExpression=update,
            ExpressionAttributeValues={":zero": {"N": "0"}, ":one": {"N": "1"}},
        )
    # Then it was tokenized once, and every write applied: the counter is 5
    assert tokenized.count(update) == 1
    item = _item(dynamodb, "hashed", _key("counter", None))
    assert item is not None and item[name] == {"N": "5"}


def test_a_read_beside_an_update_sees_the_item_before_or_after_it_never_half_applied(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an item, and an update of two attributes held after moto applied its first action
    dynamodb.put_item(TableName="hashed", Item={**_key("b", None), "state": {"S": "running"}})
    applied, go = threading.Event(), threading.Event()
    real_set = executors.SetExecutor.execute

    def held_set(self: Any, item: Any) -> None:
        real_set(self, item)
        if not applied.is_set():
            applied.set()
            go.wait(timeout=30)

    monkeypatch.setattr(executors.SetExecutor, "execute", held_set)
    update = threading.Thread(
        target=dynamodb.update_item,
        kwargs={
            "TableName": "hashed",
            "Key": _key("b", None),
            "UpdateExpression": "SET #state = :done, completed_at = :at",
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": {":done": {"S": "completed"}, ":at": {"S": "t"}},
        },
    )
    update.start()
    assert applied.wait(timeout=30)
    # When the item is read meanwhile
    seen: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: seen.append(_item(dynamodb, "hashed", _key("b", None))))
    reader.start()
    reader.join(timeout=0.5)  # on DynamoDB it sees the item before or after; unpatched moto, half
    go.set()
    update.join(timeout=30)
    reader.join(timeout=30)
    # Then it saw the whole update (it waited for it), never the state without its time
    assert seen == [{**_key("b", None), "state": {"S": "completed"}, "completed_at": {"S": "t"}}]
