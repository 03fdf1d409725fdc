"""The vendor-compatible surface's records in the batches table (docs/compat.md):

- `CFILE#<file_id>` / `META`: an output or error file of a compat batch, `{file_id, org_id,
  batch_id, role: output|error}`, plus the measured `bytes_<format>` once computed, and
  `deleted_at` once `DELETE /files/{id}` took it off the surface; on gsi1 under
  `ORG#<org_id>` / `FILE#<file_id>` next to the org's file records (`FILE#<file_id>` /
  `META`, adapters/dynamo/files.py) until deleted, so one Query lists both in id order;
- `COMPAT#ORG#<org_id>` / `BATCH#<batch_id>`: the org's compat batches, newest first (ids are
  ULIDs), for the vendor's cursor-paginated list;
- `UPLOAD#<upload_id>` / `META` and `UPLOAD#<upload_id>` / `PART#<part_id>`: an Uploads API
  upload and its parts (TTL 2 days: the parts' bytes expire with the `staging/` prefix).

The first two are written in the batch's create transaction (`batch_items`), so a compat
batch, its file ids and its list entry exist together or not at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from datetime import datetime
from typing import Any

from ulid import ULID

from batchroute.adapters.dynamo.codec import from_item, plain, to_item, to_value
from batchroute.adapters.dynamo.files import file_key, file_record
from batchroute.adapters.dynamo.reads import pages, prefix_query
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.adapters.dynamo.writes import conditional_delete, put_new
from batchroute.domain.batches.files import FileRecord
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
    deleted = item.get("deleted_at")
    return OutputFile(
        str(item["org_id"]),
        str(item["batch_id"]),
        str(item["role"]),
        sizes,
        str(deleted) if deleted else None,
    )


# What `files()` lists per purpose: the org's input files of purpose batch, the output and
# error files of its compat batches (deleted ones are off the index), or both.
_LISTED = {
    "batch": "#kind = :file AND #purpose = :batch",
    "batch_output": "#kind = :cfile",
    None: "(#kind = :file AND #purpose = :batch) OR #kind = :cfile",
}
_VALIDATING = ("received", "validated", "priced", "queued")  # before Route: Intake may be due


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
                    "gsi1pk": f"ORG#{org_id}",
                    "gsi1sk": f"FILE#{file_id}",
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

    def delete_output_file(self, file_id: str, *, at: str) -> bool:
        """Take an output or error file off the surface (and off the list index); False when
        there is no such record or it was deleted already."""
        return self.update_where(
            _file_key(file_id),
            "SET deleted_at = :at REMOVE gsi1pk, gsi1sk",
            condition="attribute_exists(pk) AND attribute_not_exists(deleted_at)",
            values={":at": at},
        )

    def delete_input_file(self, file_id: str) -> bool:
        """Delete an input file's record; False when it is gone already."""
        return conditional_delete(
            self.dynamodb,
            TableName=self.table_name,
            Key=file_key(file_id),
            ConditionExpression="attribute_exists(pk)",
        )

    def files(
        self, org_id: str, *, after: str | None, descending: bool, purpose: str | None
    ) -> Iterator[FileRecord | tuple[str, OutputFile]]:
        """The org's listed files in id order after the id `after`: a `FileRecord` for an input
        file, `(file_id, OutputFile)` for an output or error file (shown or not yet: the caller
        checks its batch). Read page by page as the caller goes on."""
        low, high = "FILE#", "FILE#~"
        if after is not None:
            low, high = (low, f"FILE#{after}") if descending else (f"FILE#{after}", high)
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :p AND gsi1sk BETWEEN :low AND :high",
            "FilterExpression": _LISTED[purpose],
            "ExpressionAttributeNames": {"#kind": "kind", "#purpose": "purpose"},
            "ExpressionAttributeValues": {
                ":p": to_value(f"ORG#{org_id}"),
                ":low": to_value(low),
                ":high": to_value(high),
                ":file": to_value("file"),
                ":cfile": to_value("compat_file"),
                ":batch": to_value("batch"),
            },
            "ScanIndexForward": not descending,
            "Limit": 200,
        }
        if purpose == "batch_output":
            del request["ExpressionAttributeNames"]["#purpose"]
            for unused in (":file", ":batch"):
                del request["ExpressionAttributeValues"][unused]
        elif purpose == "batch":
            del request["ExpressionAttributeValues"][":cfile"]
        for response in pages(self.dynamodb.query, request):
            for raw in response.get("Items", []):
                item = from_item(raw)
                if item["file_id"] == after:
                    continue
                yield file_record(item) if item["kind"] == "file" else (item["file_id"], _output_file(item))

    def validating_batch_ids(self, org_id: str, *, created_since: datetime) -> list[str]:
        """The org's batches created since `created_since` that Route has not taken yet (so
        their Intake may still be due): few, one Query on gsi1 from that moment on."""
        floor = str(ULID.from_datetime(created_since)).lower()[:10] + "0" * 16
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :p AND gsi1sk BETWEEN :low AND :high",
            "FilterExpression": "#state IN (" + ", ".join(f":s{n}" for n in range(len(_VALIDATING))) + ")",
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": {
                ":p": to_value(f"ORG#{org_id}"),
                ":low": to_value(f"BATCH#batch_{floor}"),
                ":high": to_value("BATCH#batch_~"),
                **{f":s{n}": to_value(state) for n, state in enumerate(_VALIDATING)},
            },
            "ProjectionExpression": "batch_id",
        }
        return [str(item["batch_id"]) for item in self.query_all(request)]

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
