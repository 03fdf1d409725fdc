"""Model-input files: direct uploads, signed-URL uploads confirmed by a second call, and the
streaming reader quotes and batches use (`open_items`).

Every path streams: bytes are checked (file type, lines, size, sha256) as they pass and are
never held whole, so memory stays flat whatever the file size. See docs/files.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.files import (
    DEFAULT_CONTENT_TYPE,
    DEFAULT_PURPOSE,
    MAX_FILENAME_CHARS,
    PURPOSES,
    SNIFF_BYTES,
    FileRecord,
    FileStatus,
    Purpose,
    file_type_issue,
    final_key,
    media_type,
    staging_key,
    unsupported_file_type,
)
from batchroute.domain.jsonl import MAX_LINE_BYTES, JsonlScan, LineError, ParsedLine, ScanResult, parse_jsonl
from batchroute.errors import Conflict, Forbidden, Gone, InvalidRequest, NotFound, PayloadTooLarge
from batchroute.ids import has_prefix, new_id

STAGING_LIFETIME = timedelta(days=2)  # the uploads bucket's `staging/` expiry (resources.py)
DEFAULT_FILENAME = "upload.jsonl"


class FileRecords(Protocol):
    def create(self, record: FileRecord, *, ttl: int | None = None) -> None: ...

    def get(self, file_id: str) -> FileRecord | None: ...

    def replace(self, record: FileRecord, *, expected_status: FileStatus) -> bool: ...


class ObjectSink(Protocol):
    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


class FileObjects(Protocol):
    def writer(self, key: str, *, content_type: str) -> ObjectSink: ...

    def size(self, key: str) -> int | None: ...

    def chunks(self, key: str) -> Iterator[bytes]: ...

    def presigned_put(self, key: str, *, content_type: str, expires_in: int) -> str: ...

    def presigned_get(self, key: str, *, expires_in: int, filename: str, content_type: str) -> str: ...

    def copy(self, source_key: str, target_key: str) -> None: ...

    def delete(self, key: str) -> None: ...


@dataclass(frozen=True)
class FileLimits:
    max_direct_upload_bytes: int = 4 * 1024 * 1024
    max_file_bytes: int = 2 * 1024 * 1024 * 1024  # a 1M-item file of 600-byte lines is ~600 MB
    upload_url_seconds: int = 900
    max_line_bytes: int = MAX_LINE_BYTES
    # A download larger than this is answered with a redirect to a signed URL that S3
    # serves, valid for `download_url_seconds` (docs/files.md, Downloads).
    download_redirect_bytes: int = 4 * 1024 * 1024
    download_url_seconds: int = 300


class FilePreflightFailed(InvalidRequest):
    """400 `batch_preflight_failed` with one `file_type` issue in `details.preflight`."""

    default_code = "batch_preflight_failed"

    def __init__(self, issue: dict[str, Any]) -> None:
        super().__init__(
            issue["message"], details={"preflight": {"ok": False, "errors": [issue], "warnings": []}}
        )
        self.issue = issue


class UploadTooLarge(PayloadTooLarge):
    """A direct upload over the limit: the API answers 413 `payload_too_large`."""


def too_large(limit: int) -> UploadTooLarge:
    return UploadTooLarge(
        f"A direct upload may hold at most {limit} bytes; upload larger files with a signed URL "
        "(POST /v1/files/uploads, then POST /v1/files/{file_id}/complete).",
        details={"max_bytes": limit, "signed_upload_path": "/v1/files/uploads"},
    )


@dataclass(frozen=True)
class SignedUpload:
    file: FileRecord
    url: str
    headers: dict[str, str]
    expires_at: str
    method: str = "PUT"

    def to_api(self) -> dict[str, Any]:
        return {
            "file": self.file.to_api(),
            "upload": {
                "url": self.url,
                "method": self.method,
                "headers": self.headers,
                "expires_at": self.expires_at,
            },
        }


class _Intake:
    """One file's bytes in order: the first SNIFF_BYTES are held until the file type is
    checked, then every chunk is scanned and handed on to `sink` (if any)."""

    def __init__(
        self,
        *,
        content_type: str,
        filename: str,
        max_line_bytes: int,
        max_bytes: int | None = None,
        sink: ObjectSink | None = None,
    ) -> None:
        self._content_type = content_type
        self._filename = filename
        self._max_bytes = max_bytes
        self._sink = sink
        self._head: bytearray | None = bytearray()
        self._scan = JsonlScan(max_line_bytes=max_line_bytes)

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        if self._head is not None:
            self._head += chunk
            if len(self._head) < SNIFF_BYTES:
                return
            chunk = self._release_head()
        self._pass(chunk)

    def finish(self) -> ScanResult:
        if self._head is not None:
            self._pass(self._release_head())
        return self._scan.finish()

    def _release_head(self) -> bytes:
        assert self._head is not None
        head, self._head = bytes(self._head), None
        issue = file_type_issue(
            content_type=self._content_type, filename=self._filename, head=head[:SNIFF_BYTES]
        )
        if issue is not None:
            raise FilePreflightFailed(issue)
        return head

    def _pass(self, chunk: bytes) -> None:
        if self._max_bytes is not None and self._scan.bytes_seen + len(chunk) > self._max_bytes:
            raise too_large(self._max_bytes)
        self._scan.feed(chunk)
        if self._sink is not None:
            self._sink.write(chunk)


class DirectUpload:
    """A direct upload in progress (push): `write()` each chunk as it arrives, then `finish()`.

    Bytes go to S3 as they come (one multipart part buffered at most); the record is written
    only at the end, so an aborted or refused upload leaves no file behind."""

    def __init__(self, service: FileService, org_id: str, *, filename: str, content_type: str) -> None:
        self._service = service
        self.org_id = org_id
        self.file_id = new_id("file", service.clock.now())
        self.filename = filename
        self.content_type = content_type
        self._sink = service.objects.writer(final_key(org_id, self.file_id), content_type=content_type)
        self._intake = _Intake(
            content_type=content_type,
            filename=filename,
            max_line_bytes=service.limits.max_line_bytes,
            max_bytes=service.limits.max_direct_upload_bytes,
            sink=self._sink,
        )

    def write(self, chunk: bytes) -> None:
        self._intake.feed(chunk)

    def finish(self, *, purpose: str | None = None) -> FileRecord:
        chosen = check_purpose(purpose)
        scanned = self._intake.finish()
        self._sink.close()
        now = isoformat(self._service.clock.now())
        record = _scanned(
            FileRecord(
                file_id=self.file_id,
                org_id=self.org_id,
                filename=self.filename,
                purpose=chosen,
                content_type=self.content_type,
                bytes=scanned.bytes,
                status="uploaded",
                created_at=now,
                s3_key=final_key(self.org_id, self.file_id),
            ),
            scanned,
            at=now,
        )
        self._service.records.create(record)
        return record

    def abort(self) -> None:
        self._sink.abort()


class FileService:
    def __init__(self, records: FileRecords, objects: FileObjects, clock: Clock, limits: FileLimits) -> None:
        self.records = records
        self.objects = objects
        self.clock = clock
        self.limits = limits

    # -- direct upload -------------------------------------------------------------------

    def begin_upload(self, org_id: str, *, filename: str | None, content_type: str | None) -> DirectUpload:
        """Check what the caller declared (content type, filename), then take bytes."""
        name = check_filename(filename or DEFAULT_FILENAME)
        kind = media_type(content_type) or DEFAULT_CONTENT_TYPE
        issue = file_type_issue(content_type=kind, filename=name, head=None)
        if issue is not None:
            raise FilePreflightFailed(issue)
        return DirectUpload(self, org_id, filename=name, content_type=kind)

    # -- signed-URL upload ---------------------------------------------------------------

    def start_upload(
        self,
        org_id: str,
        *,
        filename: str,
        declared_bytes: int,
        content_type: str | None = None,
        purpose: str | None = None,
    ) -> SignedUpload:
        """Create an `uploading` file and a short-lived URL to PUT its bytes to."""
        name = check_filename(filename)
        chosen = check_purpose(purpose)
        if not 1 <= declared_bytes <= self.limits.max_file_bytes:
            raise InvalidRequest(
                f"A file may hold 1 to {self.limits.max_file_bytes} bytes.",
                code="file_too_large" if declared_bytes > 0 else "invalid_request",
                details={"max_bytes": self.limits.max_file_bytes, "bytes": declared_bytes},
            )
        kind = media_type(content_type) or DEFAULT_CONTENT_TYPE
        issue = file_type_issue(content_type=kind, filename=name, head=None)
        if issue is not None:
            raise FilePreflightFailed(issue)
        now = self.clock.now()
        file_id = new_id("file", now)
        expires_at = isoformat(now + timedelta(seconds=self.limits.upload_url_seconds))
        record = FileRecord(
            file_id=file_id,
            org_id=org_id,
            filename=name,
            purpose=chosen,
            content_type=kind,
            bytes=declared_bytes,
            status="uploading",
            created_at=isoformat(now),
            s3_key=final_key(org_id, file_id),
            upload_expires_at=expires_at,
        )
        self.records.create(record, ttl=int((now + STAGING_LIFETIME).timestamp()))
        url = self.objects.presigned_put(
            staging_key(org_id, file_id), content_type=kind, expires_in=self.limits.upload_url_seconds
        )
        return SignedUpload(file=record, url=url, headers={"Content-Type": kind}, expires_at=expires_at)

    def complete_upload(self, org_id: str, file_id: str) -> FileRecord:
        """Confirm a signed upload: check the bytes landed whole, stream them through the
        checks, move them to the file's key. Completing again answers the same file."""
        record = self.file(org_id, file_id)
        if record.status not in ("uploading", "uploaded"):
            if record.error and record.error.get("code") == "unsupported_file_type":
                raise FilePreflightFailed(_file_type_issue_of(record))
            return record
        staged = staging_key(org_id, file_id)
        size = self.objects.size(staged)
        if size is None:
            raise Conflict(
                "No bytes have arrived for this file yet: PUT them to the upload URL, then complete.",
                code="upload_incomplete",
            )
        if size != record.bytes:
            raise InvalidRequest(
                f"The upload holds {size} bytes but {record.bytes} were declared.",
                code="upload_size_mismatch",
                details={"declared_bytes": record.bytes, "received_bytes": size},
            )
        intake = _Intake(
            content_type=record.content_type,
            filename=record.filename,
            max_line_bytes=self.limits.max_line_bytes,
        )
        now = isoformat(self.clock.now())
        # The server-side copy to the file's key runs while the bytes are scanned: on a large
        # file each takes seconds, and the confirm call has the API's 29 s.
        with ThreadPoolExecutor(max_workers=1) as pool:
            copying = pool.submit(self.objects.copy, staged, record.s3_key)
            try:
                for chunk in self.objects.chunks(staged):
                    intake.feed(chunk)
                scanned = intake.finish()
            except FilePreflightFailed as refused:
                copying.exception()  # wait for it, then undo it
                self.objects.delete(record.s3_key)
                self.objects.delete(staged)
                self._settle(
                    record,
                    replace(
                        record,
                        status="error",
                        updated_at=now,
                        error={"code": "unsupported_file_type", "message": refused.issue["message"]},
                    ),
                )
                raise
            copying.result()
        settled = self._settle(record, _scanned(record, scanned, at=now))
        self.objects.delete(staged)
        return settled

    def _settle(self, current: FileRecord, updated: FileRecord) -> FileRecord:
        if self.records.replace(updated, expected_status=current.status):
            return updated
        # Another confirm call finished first: its answer is the answer.
        return self.file(current.org_id, current.file_id)

    # -- reading ---------------------------------------------------------------------------

    def file(self, org_id: str, file_id: str) -> FileRecord:
        """The caller's file: NotFound for an unknown id, Forbidden for another org's."""
        record = self.records.get(file_id) if has_prefix(file_id, "file") else None
        if record is None:
            raise NotFound("No such file.", code="file_not_found")
        if record.org_id != org_id:
            raise Forbidden("This file belongs to another organization.", code="forbidden")
        return record

    def open_items(self, org_id: str, file_id: str) -> Iterator[ParsedLine]:
        """Every non-blank line of a stored file as `(line_no, object | LineError)`, streamed from
        S3 (never the whole file in memory). Checks ownership and readiness before the first line:
        an `uploading` file is a Conflict (`file_not_ready`), an `expired` one Gone, one refused as
        an unsupported type the preflight `file_type` failure. A file with malformed lines (status
        `error`) still streams, so the caller's preflight can report its `jsonl_shape` errors."""
        record = self.file_ready(org_id, file_id)
        return parse_jsonl(self.objects.chunks(record.s3_key), max_line_bytes=self.limits.max_line_bytes)

    def file_ready(self, org_id: str, file_id: str) -> FileRecord:
        """The file's record once its items can be read (the checks of `open_items`, without
        reading a byte): batch create checks an input file this way before reserving."""
        record = self.file(org_id, file_id)
        if record.status == "expired":
            raise Gone("This file's bytes were reclaimed by retention.", code="file_expired")
        if record.status in ("uploading", "uploaded"):
            raise Conflict(
                "This file's upload has not been completed (POST /v1/files/{file_id}/complete).",
                code="file_not_ready",
            )
        if record.error and record.error.get("code") == "unsupported_file_type":
            raise FilePreflightFailed(_file_type_issue_of(record))
        return record


def check_purpose(purpose: str | None) -> Purpose:
    if purpose is None or purpose == "":
        return DEFAULT_PURPOSE
    for known in PURPOSES:
        if purpose == known:
            return known
    raise InvalidRequest(
        f"Unknown purpose {purpose[:40]!r}; use one of: {', '.join(PURPOSES)}.",
        code="invalid_purpose",
        details={"allowed": list(PURPOSES)},
    )


def check_filename(filename: str) -> str:
    name = filename.strip().replace("\\", "/").rsplit("/", 1)[-1]
    if not name or len(name) > MAX_FILENAME_CHARS or any(ord(c) < 32 for c in name):
        raise InvalidRequest(
            f"A filename has 1 to {MAX_FILENAME_CHARS} printable characters.", code="invalid_filename"
        )
    return name


def _scanned(record: FileRecord, scanned: ScanResult, *, at: str) -> FileRecord:
    """The record once its bytes were checked: `processed`, or `error` with the reasons."""
    error = None
    if scanned.error_count:
        error = {
            "code": "invalid_lines",
            "message": f"{scanned.error_count} line(s) are not valid JSON objects; "
            f"the first {len(scanned.errors)} are listed in errors.",
        }
    elif scanned.item_count == 0:
        error = {"code": "empty_file", "message": "The file holds no JSON lines."}
    return replace(
        record,
        status="error" if error else "processed",
        bytes=scanned.bytes,
        sha256=scanned.sha256,
        line_count=scanned.line_count,
        item_count=scanned.item_count,
        error_count=scanned.error_count,
        errors=scanned.errors,
        error=error,
        updated_at=at,
        upload_expires_at=None,
    )


def _file_type_issue_of(record: FileRecord) -> dict[str, Any]:
    return unsupported_file_type((record.error or {}).get("message", "Unsupported file."))


__all__ = [
    "DirectUpload",
    "FileLimits",
    "FilePreflightFailed",
    "FileService",
    "LineError",
    "SignedUpload",
    "UploadTooLarge",
]
