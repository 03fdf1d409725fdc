"""File records in the batches table: `FILE#<file_id>`/`META`; an org's files via gsi1
(`ORG#<org_id>` / `FILE#<file_id>`, oldest first: ids are ULIDs).

A record still `uploading` carries a TTL (the staging object's lifetime), so an upload that
is never confirmed leaves nothing behind; confirming rewrites the record without it.
"""

from __future__ import annotations

import json
from typing import Any

from batchroute.adapters.dynamo.codec import from_item, is_condition_failure, to_item
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.domain.files import FileRecord, FileStatus
from batchroute.domain.jsonl import LineError


def _key(file_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"FILE#{file_id}"}, "sk": {"S": "META"}}


class FileStore(DynamoStore):
    def create(self, record: FileRecord, *, ttl: int | None = None) -> None:
        self.dynamodb.put_item(
            TableName=self.table_name,
            Item=to_item({**_values(record), "ttl": ttl}),
            ConditionExpression="attribute_not_exists(pk)",
        )

    def get(self, file_id: str) -> FileRecord | None:
        response = self.dynamodb.get_item(TableName=self.table_name, Key=_key(file_id), ConsistentRead=True)
        if "Item" not in response:
            return None
        return _record(from_item(response["Item"]))

    def replace(self, record: FileRecord, *, expected_status: FileStatus) -> bool:
        """Write `record` only if the stored one is still `expected_status`; False if it moved on."""
        try:
            self.dynamodb.put_item(
                TableName=self.table_name,
                Item=to_item(_values(record)),
                ConditionExpression="#status = :expected",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={":expected": {"S": expected_status}},
            )
        except Exception as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True


def _values(record: FileRecord) -> dict[str, Any]:
    return {
        "pk": f"FILE#{record.file_id}",
        "sk": "META",
        "kind": "file",
        "gsi1pk": f"ORG#{record.org_id}",
        "gsi1sk": f"FILE#{record.file_id}",
        "file_id": record.file_id,
        "org_id": record.org_id,
        "filename": record.filename,
        "purpose": record.purpose,
        "content_type": record.content_type,
        "bytes": record.bytes,
        "status": record.status,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "s3_key": record.s3_key,
        "line_count": record.line_count,
        "item_count": record.item_count,
        "error_count": record.error_count,
        # The first line errors (at most 100, short messages), kept as one JSON string.
        "errors": json.dumps([[e.line_no, e.code, e.message] for e in record.errors])
        if record.errors
        else None,
        "error": record.error,
        "sha256": record.sha256,
        "upload_expires_at": record.upload_expires_at,
        "upload_id": record.upload_id,
        "part_bytes": record.part_bytes,
    }


def _record(values: dict[str, Any]) -> FileRecord:
    errors = tuple(
        LineError(int(n), code, message) for n, code, message in json.loads(values.get("errors", "[]"))
    )
    error = values.get("error")
    return FileRecord(
        file_id=values["file_id"],
        org_id=values["org_id"],
        filename=values["filename"],
        purpose=values["purpose"],
        content_type=values["content_type"],
        bytes=int(values["bytes"]),
        status=values["status"],
        created_at=values["created_at"],
        s3_key=values["s3_key"],
        updated_at=values.get("updated_at"),
        line_count=int(values.get("line_count", 0)),
        item_count=int(values.get("item_count", 0)),
        error_count=int(values.get("error_count", 0)),
        errors=errors,
        error={str(k): str(v) for k, v in error.items()} if error else None,
        sha256=values.get("sha256"),
        upload_expires_at=values.get("upload_expires_at"),
        upload_id=values.get("upload_id"),
        part_bytes=int(values["part_bytes"]) if values.get("part_bytes") else None,
    )
