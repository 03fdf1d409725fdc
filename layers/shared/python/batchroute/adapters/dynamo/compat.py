"""The vendor-compatible surface's records in the batches table (docs/compat.md):

- `CFILE#<file_id>` / `META`: an output or error file of a compat batch, `{file_id, org_id,
  batch_id, role: output|error}`, plus the measured `bytes_<format>` once computed;
- `COMPAT#ORG#<org_id>` / `BATCH#<batch_id>`: the org's compat batches, newest first (ids are
  ULIDs), for the vendor's cursor-paginated list;
- `UPLOAD#<upload_id>` / `META` and `UPLOAD#<upload_id>` / `PART#<part_id>`: an Uploads API
  upload and its parts (TTL 2 days: the parts' bytes expire with the `staging/` prefix).

The first two are written in the batch's create transaction (`batch_items`), so a compat
batch, its file ids and its list entry exist together or not at all.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from batchroute.adapters.dynamo.codec import from_item, plain, to_item, to_value
from batchroute.adapters.dynamo.reads import pages, prefix_query
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.adapters.dynamo.writes import put_new
from batchroute.domain.compat.batches import BODY_FORMATS, OutputFile
from batchroute.domain.compat.uploads import UploadPart, UploadRecord, UploadStatus
from batchroute.domain.stored import from_stored


def _file_key(file_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"CFILE#{file_id}"}, "sk": {"S": "META"}}


def _upload_key(upload_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"UPLOAD#{upload_id}"}, "sk": {"S": "META"}}


def _put(table: str, values: dict[str, Any]) -> dict[str, Any]:
    return put_new(table, values)


def _output_file(item: dict[str, Any]) -> OutputFile:
    """An output file's record: whose, which of the two, its measured `bytes_<format>`."""
    sizes = {
        body_format: int(item[f"bytes_{body_format}"])
        for body_format in BODY_FORMATS
        if item.get(f"bytes_{body_format}") is not None
    }
    return OutputFile(str(item["org_id"]), str(item["batch_id"]), str(item["role"]), sizes)


class CompatStore(DynamoStore):
    # -- compat batches: output files and the org's list --------------------------------------------
    def batch_items(
        self, *, org_id: str, batch_id: str, output_file_id: str, error_file_id: str, created_at: str
    ) -> list[dict[str, Any]]:
        """The Puts that go into the batch's create transaction."""
        files = [
            _put(
                self.table_name,
                {
                    "pk": f"CFILE#{file_id}",
                    "sk": "META",
                    "kind": "compat_file",
                    "file_id": file_id,
                    "org_id": org_id,
                    "batch_id": batch_id,
                    "role": role,
                },
            )
            for file_id, role in ((output_file_id, "output"), (error_file_id, "error"))
        ]
        listed = _put(
            self.table_name,
            {
                "pk": f"COMPAT#ORG#{org_id}",
                "sk": f"BATCH#{batch_id}",
                "kind": "compat_batch",
                "batch_id": batch_id,
                "created_at": created_at,
            },
        )
        return [*files, listed]

    def output_file(self, file_id: str) -> OutputFile | None:
        response = self.dynamodb.get_item(
            TableName=self.table_name, Key=_file_key(file_id), ConsistentRead=True
        )
        return _output_file(from_item(response["Item"])) if "Item" in response else None

    def remember_bytes(self, file_id: str, body_format: str, size: int) -> None:
        """The measured size of an output file in one body format (computed once)."""
        self.dynamodb.update_item(
            TableName=self.table_name,
            Key=_file_key(file_id),
            UpdateExpression="SET #b = :b",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#b": f"bytes_{body_format}"},
            ExpressionAttributeValues={":b": to_value(size)},
        )

    def batch_ids(self, org_id: str, *, after: str | None, limit: int) -> tuple[list[str], bool]:
        """The org's compat batch ids, newest first, after the id `after`; and whether more follow."""
        condition = "pk = :pk AND begins_with(sk, :b)"
        values: dict[str, Any] = {":pk": to_value(f"COMPAT#ORG#{org_id}"), ":b": to_value("BATCH#")}
        if after:
            condition = "pk = :pk AND sk BETWEEN :b AND :after"
            values = {
                ":pk": to_value(f"COMPAT#ORG#{org_id}"),
                ":b": to_value("BATCH#"),
                ":after": to_value(f"BATCH#{after}"),
            }
        found: list[str] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        for response in pages(self.dynamodb.query, {**kwargs, "Limit": limit + 2}):
            found.extend(
                str(from_item(item)["batch_id"])
                for item in response.get("Items", [])
                if from_item(item)["batch_id"] != after
            )
            if len(found) > limit:
                break
        return found[:limit], len(found) > limit

    # -- uploads -----------------------------------------------------------------------------------
    def create_upload(self, record: UploadRecord, *, ttl: int) -> None:
        self.dynamodb.put_item(
            TableName=self.table_name,
            Item=to_item({**_upload_values(record), "ttl": ttl}),
            ConditionExpression="attribute_not_exists(pk)",
        )

    def upload(self, upload_id: str) -> UploadRecord | None:
        response = self.dynamodb.get_item(
            TableName=self.table_name, Key=_upload_key(upload_id), ConsistentRead=True
        )
        return _upload(from_item(response["Item"])) if "Item" in response else None

    def settle_upload(self, upload_id: str, *, status: UploadStatus, file_id: str | None = None) -> bool:
        """Move a `pending` upload to `status` (with its file); False if it already moved on."""
        sets = "#status = :status" + (", file_id = :file" if file_id else "")
        values: dict[str, object] = {":status": status, ":pending": "pending"}
        if file_id:
            values[":file"] = file_id
        return self.update_where(
            _upload_key(upload_id),
            f"SET {sets}",
            condition="#status = :pending",
            names={"#status": "status"},
            values=values,
        )

    def add_part(self, part: UploadPart, *, ttl: int) -> None:
        self.dynamodb.put_item(
            TableName=self.table_name,
            Item=to_item(
                {
                    "pk": f"UPLOAD#{part.upload_id}",
                    "sk": f"PART#{part.part_id}",
                    "kind": "upload_part",
                    **asdict(part),
                    "ttl": ttl,
                }
            ),
            ConditionExpression="attribute_not_exists(pk)",
        )

    def parts(self, upload_id: str) -> dict[str, UploadPart]:
        """Every part of an upload, by id (a few hundred at most: one query page or a few)."""
        request = prefix_query(self.table_name, f"UPLOAD#{upload_id}", "PART#", ConsistentRead=True)
        return {
            values["part_id"]: from_stored(UploadPart, plain(values)) for values in self.query_all(request)
        }


def _upload_values(record: UploadRecord) -> dict[str, Any]:
    return {"pk": f"UPLOAD#{record.upload_id}", "sk": "META", "kind": "upload", **asdict(record)}


def _upload(values: dict[str, Any]) -> UploadRecord:
    return from_stored(UploadRecord, plain(values))
