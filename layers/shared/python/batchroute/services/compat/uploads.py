"""The vendor's Uploads API (docs/compat.md): create an Upload, add Parts, complete it into a
File. This is what `client.uploads.upload_file_chunked` drives, for inputs larger than one
request can carry.

Each part is its own object under `staging/` in the uploads bucket (a part is at most one
direct-upload body, below S3's 5 MiB multipart minimum, so parts cannot be S3 parts).
Completing streams the parts, in the order given, through the same checks as a direct
compat upload into the file's object (the multipart writer holds one 8 MiB part at most):
memory stays flat in the file size. Then the parts are deleted.

One upload makes one File: `complete` claims the upload before it assembles (another
`complete` or a `cancel` meanwhile is a retryable 409), the claim lapses after the API's
time-out, and a file stored by a call whose claim was taken over is deleted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal, authorize, require_same_org
from batchroute.domain.batches.files import (
    DEFAULT_CONTENT_TYPE,
    FileRecord,
    file_type_issue,
    final_key,
    media_type,
)
from batchroute.domain.batches.item_profile import apart_key
from batchroute.domain.compat.expiration import refuse_expiration
from batchroute.domain.compat.uploads import (
    MAX_PARTS,
    UPLOAD_LIFETIME,
    UploadPart,
    UploadPartView,
    UploadRecord,
    UploadView,
    part_key,
)
from batchroute.errors import Conflict, InvalidRequest, NotFound, ServiceError
from batchroute.ids import new_id
from batchroute.resources import STREAM_TIMEOUT_SECONDS
from batchroute.services.batches.files import check_filename
from batchroute.services.batches.ports import Artifacts, ObjectWriter
from batchroute.services.compat.files import COMPAT_PURPOSE, CompatFiles, CompatUpload, input_file_object

RECORD_LIFETIME = timedelta(days=2)  # the uploads bucket's `staging/` expiry
# How long one `complete` call holds the upload while it assembles: the time-out of the function
# that serves the compat routes (resources.py), and a second. A claim that lapses was held by a
# call that died.
ASSEMBLY_CLAIM = timedelta(seconds=STREAM_TIMEOUT_SECONDS + 1)


class UploadRecords(Protocol):
    def create_upload(self, record: UploadRecord, *, ttl: int) -> None: ...

    def upload(self, upload_id: str) -> UploadRecord | None: ...

    def claim_upload(
        self, upload_id: str, *, file_id: str, now: int, until: int
    ) -> tuple[bool, str | None]: ...

    def release_upload(self, upload_id: str, *, file_id: str) -> None: ...

    def settle_upload(self, upload_id: str, *, file_id: str) -> bool: ...

    def cancel_upload(self, upload_id: str, *, now: int) -> tuple[bool, str | None]: ...

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
        """Assemble the parts into the upload's one File. One call at a time: the call claims
        the upload first (docs/compat.md, Uploads API), and another `complete` or a `cancel`
        meanwhile is a retryable 409 `concurrent_update`."""
        authorize(principal, "batches:create")
        record = self._owned(principal, upload_id)
        if record.status == "completed" and record.file_id:
            return self._answer(record)  # completing again answers the same upload
        status = record.effective_status(self.clock.now())
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
        if not self._claim(record, upload.file_id):
            upload.abort()
            return self._as_it_stands(principal, upload_id)
        stored = self._assemble(record, upload, parts, md5)
        if not self.records.settle_upload(upload_id, file_id=stored.file_id):
            # This call's claim lapsed and another call took the upload over, or cancelled it:
            # the file is not the upload's, and nothing of it stays.
            self._discard(record.org_id, stored.file_id)
            return self._as_it_stands(principal, upload_id)
        for part in self.records.parts(upload_id).values():
            self.objects.delete(part.s3_key)
        return self._answer(self._owned(principal, upload_id))

    def cancel(self, principal: Principal, upload_id: str) -> UploadView:
        """Cancel a pending upload; a retryable 409 `concurrent_update` while a `complete` call
        assembles it (that call makes its File, or gives the upload back on a refusal)."""
        authorize(principal, "batches:create")
        record = self._owned(principal, upload_id)
        if record.status == "cancelled":
            return record.to_api(self.clock.now())
        cancelled, abandoned = self.records.cancel_upload(upload_id, now=int(self.clock.now().timestamp()))
        if not cancelled:
            current = self._owned(principal, upload_id)
            if current.status == "pending":
                raise _being_completed()
            raise Conflict(f"The upload is {current.status}.", code="upload_not_pending")
        if abandoned:
            self._discard(record.org_id, abandoned)
        for part in self.records.parts(upload_id).values():
            self.objects.delete(part.s3_key)
        return self._owned(principal, upload_id).to_api(self.clock.now())

    # -- assembly --------------------------------------------------------------------------------
    def _claim(self, record: UploadRecord, file_id: str) -> bool:
        """Claim the upload for this call, which will store `file_id`; False while another
        call's claim is live (or the upload moved on). What a lapsed claim's call may have
        stored is deleted: that call died, and its file is no upload's."""
        now = self.clock.now()
        claimed, abandoned = self.records.claim_upload(
            record.upload_id,
            file_id=file_id,
            now=int(now.timestamp()),
            until=int((now + ASSEMBLY_CLAIM).timestamp()),
        )
        if abandoned:
            self._discard(record.org_id, abandoned)
        return claimed

    def _assemble(
        self, record: UploadRecord, upload: CompatUpload, parts: Sequence[UploadPart], md5: str | None
    ) -> FileRecord:
        """Stream the parts in order into the file and store it. A refusal (a bad row, the
        md5, the size) stores nothing and gives the claim back, so a corrected call may
        complete at once; any other failure keeps the claim until it lapses."""
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
            return upload.finish()
        except BaseException as exc:
            upload.abort()
            if isinstance(exc, ServiceError):
                self.records.release_upload(record.upload_id, file_id=upload.file_id)
            raise

    def _as_it_stands(self, principal: Principal, upload_id: str) -> UploadView:
        """The answer of a `complete` that did not make the upload's File: the upload once
        another call completed it; while another call assembles it, 409 `concurrent_update`."""
        record = self._owned(principal, upload_id)
        if record.status == "completed" and record.file_id:
            return self._answer(record)
        status = record.effective_status(self.clock.now())
        if status == "pending":
            raise _being_completed()
        raise Conflict(f"The upload is {status}.", code="upload_not_pending")

    def _discard(self, org_id: str, file_id: str) -> None:
        """Delete a file an assembly stored but did not complete the upload with: the bytes
        first, then the record, as deleting a file does. A call that died may have stored
        the bytes and no record, or nothing (an unfinished multipart upload is the bucket's
        abort-multipart rule's)."""
        files = self.files.files
        record = files.records.get(file_id)
        keys = (
            [final_key(org_id, file_id)]
            if record is None
            else [record.s3_key, apart_key(record.item_profile)]
        )
        for key in keys:
            if key:
                files.objects.delete(key)
        if record is not None:
            self.files.outputs.delete_input_file(file_id)

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


def _being_completed() -> Conflict:
    """409 while another call assembles the upload: retryable (the SDK retries it), and once
    that call is done completing answers the completed upload."""
    return Conflict(
        f"Another call is completing this upload (for {int(ASSEMBLY_CLAIM.total_seconds())} s at "
        "most); ask again shortly.",
        code="concurrent_update",
    )
