"""File records in the batches table: `FILE#<file_id>`/`META`; an org's files via gsi1
(`ORG#<org_id>` / `FILE#<file_id>`, oldest first: ids are ULIDs).

A record still `uploading` carries a TTL (the staging object's lifetime), so an upload that
is never confirmed leaves nothing behind; confirming rewrites the record without it.

A file `uploaded` (a confirmed large upload whose `check_file` message the router has not
yet handled) is on the sparse `gsi2` (`FILECHECK` / `<since>#<file_id>`, keys only; the
same index as the SLA sweep's `DEADLINE` and retention's `RECLAIM`): the sweeper re-sends
the check of a file there too long (docs/files.md, "A lost check"). Any write that moves the
file on (`processed`, `error`, `expired`) drops it from the index.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from batchroute.adapters.dynamo.codec import plain, to_item
from batchroute.adapters.dynamo.reads import index_before
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.domain.batches.files import FileRecord, FileStatus
from batchroute.domain.batches.jsonl import LineError
from batchroute.domain.stored import from_stored

CHECK_PARTITION = "FILECHECK"


def _key(file_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"FILE#{file_id}"}, "sk": {"S": "META"}}


class FileStore(DynamoStore):
    def create(self, record: FileRecord, *, ttl: int | None = None) -> None:
        self.insert({**_values(record), "ttl": ttl})

    def get(self, file_id: str) -> FileRecord | None:
        return self.read_at(_key(file_id), _record)

    def replace(self, record: FileRecord, *, expected_status: FileStatus) -> bool:
        """Write `record` only if the stored one is still `expected_status`; False if it moved on."""
        return self.put_where(
            to_item(_values(record)),
            condition="#status = :expected",
            names={"#status": "status"},
            values={":expected": expected_status},
        )

    def awaiting_check(self, before: str, *, limit: int = 100) -> list[str]:
        """Ids of files `uploaded` since before `before` (ISO time), oldest first (sparse gsi2)."""
        response = self.dynamodb.query(
            **index_before(self.table_name, "gsi2", CHECK_PARTITION, before, Limit=limit)
        )
        return [str(item["gsi2sk"]["S"]).rsplit("#", 1)[1] for item in response.get("Items", [])]

    def check_sent(self, file_id: str, at: str) -> bool:
        """Move a file still `uploaded` to `at` on the index (its check was just re-sent);
        False if it has moved on meanwhile."""
        return self.update_where(
            _key(file_id),
            "SET gsi2sk = :sk",
            condition="#status = :uploaded",
            names={"#status": "status"},
            values={":sk": f"{at}#{file_id}", ":uploaded": "uploaded"},
        )


def _values(record: FileRecord) -> dict[str, Any]:
    awaiting = record.status == "uploaded"
    return {
        "gsi2pk": CHECK_PARTITION if awaiting else None,
        "gsi2sk": f"{record.updated_at or record.created_at}#{record.file_id}" if awaiting else None,
        "pk": f"FILE#{record.file_id}",
        "sk": "META",
        "kind": "file",
        "gsi1pk": f"ORG#{record.org_id}",
        "gsi1sk": f"FILE#{record.file_id}",
        **asdict(record),
        # The first line errors (at most 100, short messages), kept as one JSON string.
        "errors": json.dumps([[e.line_no, e.code, e.message] for e in record.errors])
        if record.errors
        else None,
    }


def file_key(file_id: str) -> dict[str, Any]:
    """The key of a file's record (the compat surface deletes it: adapters/dynamo/compat.py)."""
    return _key(file_id)


def file_record(values: dict[str, Any]) -> FileRecord:
    """A file record from its stored values (plain or as DynamoDB answers them)."""
    return _record(values)


def _record(values: dict[str, Any]) -> FileRecord:
    errors = tuple(
        LineError(int(n), code, message) for n, code, message in json.loads(values.get("errors") or "[]")
    )
    return from_stored(FileRecord, plain(values), errors=errors)
