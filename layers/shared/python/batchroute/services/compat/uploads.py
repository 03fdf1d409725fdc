"""The vendor's Uploads API (docs/compat.md): create an Upload, add Parts, complete it into a
File. This is what `client.uploads.upload_file_chunked` drives, for inputs larger than one
request can carry.

Each part is its own object under `staging/` in the uploads bucket (a part is at most one
direct-upload body, below S3's 5 MiB multipart minimum, so parts cannot be S3 parts).
Completing streams the parts, in the order given, through the same checks as a direct
compat upload into the file's object (the multipart writer holds one 8 MiB part at most):
memory stays flat in the file size. Then the parts are deleted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal, authorize, require_same_org
from batchroute.domain.batches.files import DEFAULT_CONTENT_TYPE, file_type_issue, media_type
from batchroute.domain.compat.expiration import refuse_expiration
from batchroute.domain.compat.uploads import (
    MAX_PARTS,
    UPLOAD_LIFETIME,
    UploadPart,
    UploadPartView,
    UploadRecord,
    UploadStatus,
    UploadView,
    part_key,
)
from batchroute.errors import Conflict, InvalidRequest, NotFound
from batchroute.ids import new_id
from batchroute.services.batches.files import check_filename
from batchroute.services.batches.ports import Artifacts, ObjectWriter
from batchroute.services.compat.files import COMPAT_PURPOSE, CompatFiles, input_file_object

RECORD_LIFETIME = timedelta(days=2)  # the uploads bucket's `staging/` expiry


class UploadRecords(Protocol):
    def create_upload(self, record: UploadRecord, *, ttl: int) -> None: ...

    def upload(self, upload_id: str) -> UploadRecord | None: ...

    def settle_upload(self, upload_id: str, *, status: UploadStatus, file_id: str | None = None) -> bool: ...

    def add_part(self, part: UploadPart, *, ttl: int) -> None: ...

    def parts(self, upload_id: str) -> dict[str, UploadPart]: ...


class PartSink(ObjectWriter, Protocol):
    bytes_written: int


class PartObjects(Artifacts, Protocol):
    """adapters/s3_objects.py:S3Objects over the uploads bucket: parts written, read, dropped."""

    def writer(self, key: str, *, content_type: str) -> PartSink: ...

    def delete(self, key: str) -> None: ...


@dataclass(eq=False)
class CompatUploads:
    records: UploadRecords
    files: CompatFiles
    objects: PartObjects
    clock: Clock

    def create(
        self,
        principal: Principal,
        *,
        filename: str,
        purpose: str,
        bytes_: int,
        mime_type: str,
        expires_after: object = None,
    ) -> UploadView:
        authorize(principal, "batches:create")
        if purpose != COMPAT_PURPOSE:
            raise InvalidRequest(
                "purpose must be batch.", code="invalid_purpose", details={"param": "purpose"}
            )
        refuse_expiration(expires_after, "expires_after")
        # A type `complete` would refuse (the same check as every upload's) is refused now,
        # before any part is sent: the vendor's `mime_type` must suit the file's purpose.
        issue = file_type_issue(
            content_type=media_type(mime_type) or DEFAULT_CONTENT_TYPE, filename=None, head=None
        )
        if issue is not None:
            raise InvalidRequest(
                issue["message"], code="unsupported_file_type", details={"param": "mime_type"}
            )
        limit = self.files.files.limits.max_file_bytes
        if not 1 <= bytes_ <= limit:
            raise InvalidRequest(
                f"An upload holds 1 to {limit} bytes.", code="file_too_large", details={"param": "bytes"}
            )
        name = check_filename(filename)
        now = self.clock.now()
        record = UploadRecord(
            upload_id=new_id("upload", now),
            org_id=principal.org_id,
            filename=name,
            purpose=purpose,
            mime_type=mime_type,
            bytes=bytes_,
            status="pending",
            created_at=isoformat(now),
            expires_at=isoformat(now + UPLOAD_LIFETIME),
        )
        self.records.create_upload(record, ttl=int((now + RECORD_LIFETIME).timestamp()))
        return record.to_api(now)

    def open_for_parts(self, principal: Principal, upload_id: str) -> UploadRecord:
        """The caller's upload, still taking parts (409 otherwise)."""
        authorize(principal, "batches:create")
        record = self._owned(principal, upload_id)
        status = record.effective_status(self.clock.now())
        if status != "pending":
            raise Conflict(f"The upload is {status}; it takes no more parts.", code="upload_not_pending")
        return record

    def part_key(self, record: UploadRecord, part_id: str) -> str:
        return part_key(record.org_id, record.upload_id, part_id)

    def part_writer(self, record: UploadRecord, part_id: str) -> PartSink:
        """Where a part's bytes stream to (one put_object: a part fits in one S3 write part)."""
        return self.objects.writer(self.part_key(record, part_id), content_type="application/octet-stream")

    def add_part(self, record: UploadRecord, *, part_id: str, size: int) -> UploadPartView:
        """Record a part whose bytes are stored (the route streamed them to `part_key`)."""
        now = self.clock.now()
        part = UploadPart(
            part_id=part_id,
            upload_id=record.upload_id,
            bytes=size,
            created_at=isoformat(now),
            s3_key=self.part_key(record, part_id),
        )
        self.records.add_part(part, ttl=int((now + RECORD_LIFETIME).timestamp()))
        return part.to_api()

    def complete(
        self, principal: Principal, upload_id: str, *, part_ids: Sequence[str], md5: str | None = None
    ) -> UploadView:
        authorize(principal, "batches:create")
        record = self._owned(principal, upload_id)
        now = self.clock.now()
        if record.status == "completed" and record.file_id:
            return self._answer(record)  # completing again answers the same upload
        status = record.effective_status(now)
        if status != "pending":
            raise Conflict(f"The upload is {status}.", code="upload_not_pending")
        parts = self._ordered_parts(record, part_ids)
        total = sum(part.bytes for part in parts)
        if total != record.bytes:
            raise InvalidRequest(
                f"The parts hold {total} bytes but the upload declared {record.bytes}.",
                code="upload_size_mismatch",
                details={"param": "part_ids"},
            )
        upload = self.files.begin_upload(
            principal, filename=record.filename, content_type=record.mime_type, assembled=True
        )
        digest = hashlib.md5(usedforsecurity=False)
        try:
            for part in parts:
                for chunk in self.objects.chunks(part.s3_key):
                    digest.update(chunk)
                    upload.write(chunk)
            if md5 and md5.lower() != digest.hexdigest():
                raise InvalidRequest(
                    "The md5 of the assembled parts does not match.",
                    code="md5_mismatch",
                    details={"param": "md5"},
                )
            stored = upload.finish()
        except BaseException:
            upload.abort()
            raise
        if not self.records.settle_upload(upload_id, status="completed", file_id=stored.file_id):
            # Another complete call finished first: its file is the answer.
            return self._answer(self._owned(principal, upload_id))
        for part in self.records.parts(upload_id).values():
            self.objects.delete(part.s3_key)
        return self._answer(self._owned(principal, upload_id))

    def cancel(self, principal: Principal, upload_id: str) -> UploadView:
        authorize(principal, "batches:create")
        record = self._owned(principal, upload_id)
        if record.status == "cancelled":
            return record.to_api(self.clock.now())
        if not self.records.settle_upload(upload_id, status="cancelled"):
            current = self._owned(principal, upload_id)
            raise Conflict(f"The upload is {current.status}.", code="upload_not_pending")
        for part in self.records.parts(upload_id).values():
            self.objects.delete(part.s3_key)
        return self._owned(principal, upload_id).to_api(self.clock.now())

    # -- helpers ---------------------------------------------------------------------------------
    def _owned(self, principal: Principal, upload_id: str) -> UploadRecord:
        record = self.records.upload(upload_id) if upload_id.startswith("upload_") else None
        if record is None:
            raise NotFound(
                f"No such upload: {upload_id[:64]}.", code="upload_not_found", details={"param": "upload_id"}
            )
        require_same_org(principal, record.org_id)
        return record

    def _ordered_parts(self, record: UploadRecord, part_ids: Sequence[str]) -> list[UploadPart]:
        if not part_ids or len(part_ids) > MAX_PARTS:
            raise InvalidRequest(
                f"part_ids lists 1 to {MAX_PARTS} parts.",
                code="invalid_request",
                details={"param": "part_ids"},
            )
        if len(set(part_ids)) != len(part_ids):
            raise InvalidRequest(
                "part_ids names a part twice.", code="invalid_request", details={"param": "part_ids"}
            )
        known = self.records.parts(record.upload_id)
        unknown = [part_id for part_id in part_ids if part_id not in known]
        if unknown:
            raise InvalidRequest(
                f"No such part of this upload: {unknown[0][:64]}.",
                code="part_not_found",
                details={"param": "part_ids"},
            )
        return [known[part_id] for part_id in part_ids]

    def _answer(self, record: UploadRecord) -> UploadView:
        file = None
        if record.file_id:
            file = input_file_object(self.files.files.file(record.org_id, record.file_id))
        return record.to_api(self.clock.now(), file)
