"""DynamoDB transactions on the local moto server: rolled back item by item, one at a time;
and its update expressions parsed once each.

moto's `TransactWriteItems` deep-copies every table a transaction names before it starts,
so it can put the copy back if a condition fails. The copy costs time in proportion to the
table (about 0.08 ms an item here), and the local stack's tables only grow: after a few
hundred chat requests a hold transaction spent most of its time copying `ledger`, `batches`
and `controls` (bench/RESULTS.md, "Chat overhead"). DynamoDB has no such cost.

`install()` keeps moto's transaction code (its checks, errors and writes) and changes only
the rollback: before the transaction, the items it names (at most 100) are copied; if it
fails they are put back as they were (or removed, if they did not exist), and moto's
whole-table copies are skipped. A transaction only writes the items it names, so putting
those back restores exactly what the table copy would have. Transactions also run one at
a time, as DynamoDB isolates them (moto's threaded server would otherwise interleave two),
and so do single-item writes (`PutItem`, `UpdateItem`, `DeleteItem`, and `BatchWriteItem`'s
through them): DynamoDB makes each atomic and isolates transactions from them. Without it a
write landing between a failing transaction's save and its rollback was undone by the
rollback (a batch's `settled_at` and `completed_at` lost this way were seen in an e2e run).
Reads are isolated from writes as well (`isolated_requests`): every DynamoDB request is
handled whole, its answer written, under the same lock. moto applies an update's actions to
the stored item one by one and writes a read's answer from the live item afterwards, so a
read beside a write could see it half applied, which DynamoDB never shows (an e2e run saw a
batch `completed` whose `completed_at` was not there yet).

Update expressions are parsed once each: moto parses a write's `UpdateExpression` twice per
request (to check the names and values it uses, then to apply it), ~6 % of the moto
process's CPU in the pipeline bench, whose chunk writes repeat a handful of expressions with
other values. moto only reads the parsed tree (its validator works on a deep copy), so the
same tree serves every request with that expression.

moto's own modules are listed once: its server's dispatcher asked which modules moto has
(`moto.backends.list_of_moto_modules`: its package's ~150 folders, a `stat` each) on every
request, holding a lock all the server's threads share (~8 % of the moto process's CPU in the
pipeline bench); the answer never changes while the process runs.

Only the local stack's moto server installs it (`make_moto_server`, in the moto process);
the test suites' in-process moto is left as moto ships it.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import moto.dynamodb.models as dynamodb_models
from moto import backends as moto_backends
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table
from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

_OPERATIONS = ("ConditionCheck", "Put", "Delete", "Update")
_lock = threading.RLock()
_inside = threading.local()
_SINGLE_ITEM_WRITES = ("put_item", "update_item", "delete_item")
# Every attribute `install` replaced: (its owner, its name, what the owner held), for `uninstall`.
_patched: list[tuple[object, str, object]] = []


def _patch(owner: object, name: str, value: object) -> None:
    _patched.append((owner, name, vars(owner)[name]))
    setattr(owner, name, value)


class _CopyWithoutTables:
    """moto.dynamodb.models' `copy` module, except that inside a patched transaction a
    Table's deep copy is the table itself (the items are restored one by one instead)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    @staticmethod
    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        if isinstance(value, Table) and getattr(_inside, "active", False):
            return value
        return copy.deepcopy(value, memo)


@dataclass
class _Saved:
    table: Table
    hash_value: DynamoType
    range_value: DynamoType | None
    item: Any  # moto's Item, deep-copied, or None when absent
    bucket_existed: bool  # range tables: whether the hash key had any item
    stream_records: int | None


def _key_of(table: Table, operation: str, body: dict[str, Any]) -> tuple[DynamoType, DynamoType | None]:
    key = body["Item"] if operation == "Put" else body["Key"]
    hash_value = DynamoType(key[table.hash_key_attr])
    range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
    return hash_value, range_value


def _save(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> list[_Saved]:
    saved: list[_Saved] = []
    for entry in transact_items:
        if len(entry) != 1:
            continue  # moto refuses it before writing anything
        operation, body = next(iter(entry.items()))
        name = body.get("TableName") if isinstance(body, dict) else None
        table = backend.tables.get(name) if isinstance(name, str) else None
        if operation not in _OPERATIONS or operation == "ConditionCheck" or table is None:
            continue
        try:
            hash_value, range_value = _key_of(table, operation, body)
        except (KeyError, TypeError):
            continue  # a malformed key: moto refuses it before writing anything
        if range_value is None:
            bucket_existed = hash_value in table.items
            current = table.items.get(hash_value)
        else:
            bucket_existed = hash_value in table.items
            current = table.items[hash_value].get(range_value) if bucket_existed else None
        stream = table.stream_shard
        saved.append(
            _Saved(
                table=table,
                hash_value=hash_value,
                range_value=range_value,
                item=copy.deepcopy(current) if current is not None else None,
                bucket_existed=bucket_existed,
                stream_records=len(stream.items) if stream is not None else None,
            )
        )
    return saved


def _restore(saved: list[_Saved]) -> None:
    for entry in reversed(saved):  # an item named twice is refused, but be exact anyway
        items = entry.table.items
        if entry.range_value is None:
            if entry.item is None:
                items.pop(entry.hash_value, None)
            else:
                items[entry.hash_value] = entry.item
        else:
            if entry.item is not None:
                items[entry.hash_value][entry.range_value] = entry.item
            elif entry.hash_value in items:
                items[entry.hash_value].pop(entry.range_value, None)
                if not entry.bucket_existed and not items[entry.hash_value]:
                    del items[entry.hash_value]
        stream = entry.table.stream_shard
        if stream is not None and entry.stream_records is not None:
            del stream.items[entry.stream_records :]


def install() -> None:
    """Patch moto's DynamoDB backend in this process (idempotent)."""
    if _patched:
        return
    original: Callable[..., None] = DynamoDBBackend.transact_write_items

    def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        with _lock:
            saved = _save(self, transact_items) if len(transact_items) <= 100 else []
            _inside.active = True
            try:
                original(self, transact_items)
            except BaseException:
                _restore(saved)
                raise
            finally:
                _inside.active = False

    _patch(DynamoDBBackend, "transact_write_items", transact_write_items)
    _patch(dynamodb_models, "copy", _CopyWithoutTables())  # the module's `copy`
    for name in _SINGLE_ITEM_WRITES:
        _patch(DynamoDBBackend, name, _isolated(getattr(DynamoDBBackend, name)))
    modules = tuple(moto_backends.list_of_moto_modules())
    _patch(moto_backends, "list_of_moto_modules", lambda: modules)
    _patch(UpdateExpressionParser, "make", staticmethod(lru_cache(maxsize=512)(UpdateExpressionParser.make)))


def _isolated(write: Callable[..., Any]) -> Callable[..., Any]:
    def isolated(self: DynamoDBBackend, *args: Any, **kwargs: Any) -> Any:
        with _lock:
            return write(self, *args, **kwargs)

    return isolated


_DYNAMODB_TARGET = "DynamoDB_"  # the `X-Amz-Target` of every DynamoDB request


def isolated_requests(app: WSGIApplication) -> WSGIApplication:
    """`app` with each DynamoDB request handled whole, answer included, under the lock every
    write takes: a read sees an item as it was before a write or after it, never during."""

    def handle(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if not str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith(_DYNAMODB_TARGET):
            return app(environ, start_response)
        with _lock:
            answer = app(environ, start_response)
            try:
                return [b"".join(answer)]
            finally:
                close = getattr(answer, "close", None)
                if close is not None:
                    close()

    return handle


def uninstall() -> None:
    """Put moto back as it ships (tests)."""
    while _patched:
        owner, name, original = _patched.pop()
        setattr(owner, name, original)
