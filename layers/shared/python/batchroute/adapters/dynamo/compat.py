"""The vendor-compatible surface's records in the batches table (docs/compat.md):

- `CFILE#<file_id>` / `META`: an output or error file of a compat batch, `{file_id, org_id,
  batch_id, role: output|error}`, plus the measured `bytes_<format>` once computed, and
  `deleted_at` once `DELETE /files/{id}` took it off the surface; on gsi1 under
  `ORG#<org_id>` / `FILE#<file_id>` next to the org's file records (`FILE#<file_id>` /
  `META`, adapters/dynamo/files.py) until deleted, so one Query lists both in id order;
- `COMPAT#ORG#<org_id>` / `BATCH#<batch_id>`: the org's compat batches, newest first (ids are
  ULIDs), for the vendor's cursor-paginated list;
- `UPLOAD#<upload_id>` / `META` and `UPLOAD#<upload_id>` / `PART#<part_id>`: an Uploads API
  upload and its parts (TTL 2 days: the parts' bytes expire with the `staging/` prefix);
  while one `complete` call assembles the upload, its META holds that call's claim
  (`assembling_file`, the file it stores; `assembling_until`, when the claim lapses).

The first two are written in the batch's create transaction (`batch_items`), so a compat
batch, its file ids and its list entry exist together or not at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from datetime import datetime
from typing import Any

from ulid import ULID

from batchroute.adapters.dynamo.codec import from_item, plain, set_update, to_value, update_request
from batchroute.adapters.dynamo.files import file_key, file_record
from batchroute.adapters.dynamo.reads import pages, prefix_query
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.adapters.dynamo.writes import put_new, written
from batchroute.domain.batches.files import FileRecord
from batchroute.domain.compat.batches import BODY_FORMATS, OutputFile
from batchroute.domain.compat.uploads import UploadPart, UploadRecord
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
# An upload's assembly claim (`assembling_file`, `assembling_until`): none, or expired at `:now`.
_NO_LIVE_CLAIM = "(attribute_not_exists(assembling_until) OR assembling_until <= :now)"
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
        return self.read_at(_file_key(file_id), _output_file)

    def remember_bytes(self, file_id: str, body_format: str, size: int) -> None:
        """The measured size of an output file in one body format (computed once)."""
        self.dynamodb.update_item(
            **set_update(self.table_name, _file_key(file_id), {f"bytes_{body_format}": size})
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
        return self.delete_where(file_key(file_id))

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
        self.insert({**_upload_values(record), "ttl": ttl})

    def upload(self, upload_id: str) -> UploadRecord | None:
        return self.read_at(_upload_key(upload_id), _upload)

    def claim_upload(self, upload_id: str, *, file_id: str, now: int, until: int) -> tuple[bool, str | None]:
        """Claim a `pending` upload for the one call that assembles it into `file_id`, until
        `until` (unix seconds), unless another call's claim is live at `now`. Answers whether
        this call holds the claim, and the file an expired claim named (its call died or timed
        out; what it may have stored is the caller's to delete)."""
        return self._take_unclaimed(
            upload_id,
            "SET assembling_file = :file, assembling_until = :until",
            now,
            {":file": file_id, ":until": until},
        )

    def release_upload(self, upload_id: str, *, file_id: str) -> None:
        """Give up the claim naming `file_id` (its assembly was refused): the upload is
        `pending` and free to complete again at once."""
        self.update_where(
            _upload_key(upload_id),
            "REMOVE assembling_file, assembling_until",
            condition="#status = :pending AND assembling_file = :file",
            names={"#status": "status"},
            values={":pending": "pending", ":file": file_id},
        )

    def settle_upload(self, upload_id: str, *, file_id: str) -> bool:
        """Move a `pending` upload to `completed` with `file_id`, only while the claim that
        named that file stands (no other call took it over); False otherwise."""
        return self.update_where(
            _upload_key(upload_id),
            "SET #status = :completed, file_id = :file REMOVE assembling_file, assembling_until",
            condition="#status = :pending AND assembling_file = :file",
            names={"#status": "status"},
            values={":completed": "completed", ":pending": "pending", ":file": file_id},
        )

    def cancel_upload(self, upload_id: str, *, now: int) -> tuple[bool, str | None]:
        """Move a `pending` upload that no call is assembling (no claim live at `now`) to
        `cancelled`. Answers whether it moved, and the file an expired claim named (to delete)."""
        return self._take_unclaimed(
            upload_id,
            "SET #status = :cancelled REMOVE assembling_file, assembling_until",
            now,
            {":cancelled": "cancelled"},
        )

    def _take_unclaimed(
        self, upload_id: str, update: str, now: int, values: dict[str, object]
    ) -> tuple[bool, str | None]:
        """Apply `update` to a `pending` upload with no claim live at `now`: whether it applied,
        and the file the expired claim it replaced named, if any."""
        answer = written(
            self.dynamodb.update_item,
            **update_request(
                self.table_name,
                _upload_key(upload_id),
                update,
                condition=f"#status = :pending AND {_NO_LIVE_CLAIM}",
                names={"#status": "status"},
                values={**values, ":now": now, ":pending": "pending"},
            ),
            ReturnValues="UPDATED_OLD",
        )
        if answer is None:
            return False, None
        return True, _claimed_file(answer)

    def add_part(self, part: UploadPart, *, ttl: int) -> None:
        self.insert(
            {
                "pk": f"UPLOAD#{part.upload_id}",
                "sk": f"PART#{part.part_id}",
                "kind": "upload_part",
                **asdict(part),
                "ttl": ttl,
            }
        )

    def parts(self, upload_id: str) -> dict[str, UploadPart]:
        """Every part of an upload, by id (a few hundred at most: one query page or a few)."""
        request = prefix_query(self.table_name, f"UPLOAD#{upload_id}", "PART#", ConsistentRead=True)
        return {
            values["part_id"]: from_stored(UploadPart, plain(values)) for values in self.query_all(request)
        }


def _claimed_file(answer: dict[str, Any]) -> str | None:
    """The file a replaced claim named, from an UpdateItem's `UPDATED_OLD` attributes."""
    old = from_item(answer.get("Attributes") or {})
    return str(old["assembling_file"]) if old.get("assembling_file") else None


def _upload_values(record: UploadRecord) -> dict[str, Any]:
    return {"pk": f"UPLOAD#{record.upload_id}", "sk": "META", "kind": "upload", **asdict(record)}


def _upload(values: dict[str, Any]) -> UploadRecord:
    return from_stored(UploadRecord, plain(values))
