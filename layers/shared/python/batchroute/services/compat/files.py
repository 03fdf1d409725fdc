"""Files on the vendor-compatible surface (docs/compat.md).

Input files are ordinary files (services/batches/files.py) with purpose `batch`, uploaded through
the same streaming pipeline; on the way their rows are checked as the vendor's
`{custom_id, method, url, body}` requests, and a file with a bad row is refused (nothing
is kept) with the line named. A compat batch's output and error files are views of its
result artifacts: on a file's first read its lines are rendered, in the body format asked
for, into an object beside the artifacts, streamed on the way; later reads stream that
object, or, past `FileLimits.download_redirect_bytes`, storage serves it from a signed URL.
Neither the upload nor the download ever holds a whole file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol, cast

from batchroute.clock import isoformat
from batchroute.domain.accounts.access import Principal, authorize, require_same_org
from batchroute.domain.batches.artifact_keys import JSONL, errors_key, rendering_key, results_key
from batchroute.domain.batches.files import FileRecord
from batchroute.domain.batches.item_profile import apart_key
from batchroute.domain.batches.jsonl import artifact_lines
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.billing.retention import keep_until
from batchroute.domain.compat.batches import (
    BODY_FORMATS,
    DEFAULT_BODY_FORMAT,
    FILE_LIST_PURPOSES,
    FILE_PAGE_MAX,
    BodyFormat,
    OutputFile,
    RowCheck,
    VendorFileDeletedView,
    VendorFileListView,
    VendorFileView,
    file_status,
    output_files,
    output_line,
    unix,
    vendor_list,
)
from batchroute.domain.workflow.results import ArtifactRow
from batchroute.errors import Conflict, Gone, InvalidRequest, NotFound, ServiceError
from batchroute.ids import has_prefix
from batchroute.services.batches.files import DirectUpload, FilePreflightFailed, FileService
from batchroute.services.batches.ports import BatchReader, ObjectStore, SignedDownloads
from batchroute.services.batches.reads import RetentionTerms
from batchroute.services.workflow.retention_gc import ReclaimMarks

COMPAT_PURPOSE = "batch"
# A batch whose Intake has not read its input file yet is younger than this: past its 24 h
# deadline the sweeper expires it (services/workflow/sweeper.py); the rest is slack.
INTAKE_HORIZON = timedelta(hours=48)


class OutputFileRecords(Protocol):
    def output_file(self, file_id: str) -> OutputFile | None: ...

    def remember_bytes(self, file_id: str, body_format: str, size: int) -> None: ...


class ResultObjects(ObjectStore, SignedDownloads, Protocol):
    """adapters/s3_objects.py:S3Objects over the artifacts bucket: the batches' result
    artifacts, and the renderings of their output and error files."""


@dataclass(frozen=True)
class FileContent:
    """A file's bytes as the content route answers them: streamed (`chunks`), or served by
    storage from a short-lived signed URL (`url`); `body_format` the format they are in (None
    for an input file served by storage: its bytes are the same in any format)."""

    body_format: BodyFormat | None
    chunks: Iterator[bytes] | None = None
    url: str | None = None


class CompatFileRecords(OutputFileRecords, Protocol):
    """adapters/dynamo/compat.py:CompatStore: listing and deleting the surface's files."""

    def files(
        self, org_id: str, *, after: str | None, descending: bool, purpose: str | None
    ) -> Iterator[FileRecord | tuple[str, OutputFile]]: ...

    def delete_output_file(self, file_id: str, *, at: str) -> bool: ...

    def delete_input_file(self, file_id: str) -> bool: ...

    def validating_batch_ids(self, org_id: str, *, created_since: datetime) -> list[str]: ...


class InvalidRows(InvalidRequest):
    """400: an input row is not a usable request; the message names the (first) line."""

    default_code = "invalid_jsonl_line"

    def __init__(self, check: RowCheck) -> None:
        first = check.problems[0]
        super().__init__(
            check.message(),
            details={
                "param": first.param,
                "line": first.line,
                "invalid_lines": check.problem_count,
                "errors": [{"line": p.line, "param": p.param, "message": p.message} for p in check.problems],
            },
        )


@contextmanager
def file_type_named_as_uploads_name_it() -> Iterator[None]:
    """A type the native file check refuses (declared, or sniffed from the first bytes) is
    400 `unsupported_file_type` naming `file`, as the Uploads API names it, not the native
    `batch_preflight_failed`: one code for one problem."""
    try:
        yield
    except FilePreflightFailed as refused:
        raise InvalidRequest(
            refused.issue["message"], code="unsupported_file_type", details={"param": "file"}
        ) from refused


class CompatUpload:
    """A compat input file in progress: `write()` each chunk, then `finish()`. The bytes go
    through the native upload (file type, line checks, S3) and the row check side by side."""

    def __init__(self, upload: DirectUpload, *, max_line_bytes: int) -> None:
        self._upload = upload
        self._check = RowCheck(max_line_bytes=max_line_bytes)

    @property
    def file_id(self) -> str:
        """The id the file has once finished (its bytes go to `files/<org_id>/<file_id>`)."""
        return self._upload.file_id

    def write(self, chunk: bytes) -> None:
        with file_type_named_as_uploads_name_it():
            self._upload.write(chunk)
        self._check.feed(chunk)

    def finish(self) -> FileRecord:
        with file_type_named_as_uploads_name_it():
            self._upload.check_type()  # a file that is no JSON Lines is that, not bad rows
        self._check.finish()
        if self._check.problem_count:
            self._upload.abort()
            raise InvalidRows(self._check)
        if self._check.rows == 0:
            self._upload.abort()
            raise InvalidRequest("The file holds no requests.", code="empty_file", details={"param": "file"})
        with file_type_named_as_uploads_name_it():
            return self._upload.finish(purpose=COMPAT_PURPOSE)

    def abort(self) -> None:
        self._upload.abort()


class CompatFiles:
    def __init__(
        self,
        files: FileService,
        *,
        outputs: CompatFileRecords,
        batches: BatchReader,
        artifacts: ResultObjects,
        reclaim: ReclaimMarks,
        retention: RetentionTerms,
        grace: timedelta = timedelta(hours=72),
    ) -> None:
        self.files = files
        self.outputs = outputs
        self.batches = batches
        self.artifacts = artifacts
        self.reclaim = reclaim
        self.retention = retention  # an output file's `expires_at`
        self.grace = grace
        # Assembled uploads (the Uploads API) may be as large as any stored file.
        self._assembler = FileService(
            files.records,
            files.objects,
            files.clock,
            replace(files.limits, max_direct_upload_bytes=files.limits.max_file_bytes),
        )

    # -- uploads ---------------------------------------------------------------------------------
    def begin_upload(
        self, principal: Principal, *, filename: str | None, content_type: str | None, assembled: bool = False
    ) -> CompatUpload:
        authorize(principal, "batches:create")
        service = self._assembler if assembled else self.files
        with file_type_named_as_uploads_name_it():
            upload = service.begin_upload(principal.org_id, filename=filename, content_type=content_type)
        return CompatUpload(upload, max_line_bytes=self.files.limits.max_line_bytes)

    # -- the File object -------------------------------------------------------------------------
    def file_object(self, principal: Principal, file_id: str) -> VendorFileView:
        authorize(principal, "batches:read")
        record = self.files.records.get(file_id) if has_prefix(file_id, "file") else None
        if record is not None:
            require_same_org(principal, record.org_id)
            return input_file_object(record)
        output, batch = self._output(principal, file_id)
        return self._output_object(file_id, output, batch)

    def _output_object(self, file_id: str, output: OutputFile, batch: BatchRecord) -> VendorFileView:
        expired = self._reclaimed(output, batch)
        body_format = _default_format(batch)
        size = output.sizes.get(body_format)
        if size is None and not expired:
            size = self._rendered(file_id, output, batch, body_format)
        return {
            "id": file_id,
            "object": "file",
            "bytes": int(size or 0),
            "created_at": unix(batch.finalized_at),
            "filename": _filename(output, batch),
            "purpose": "batch_output",
            "status": "expired" if expired else "processed",
            "status_details": None,
            "expires_at": self._expires_at(batch),
        }

    def _expires_at(self, batch: BatchRecord) -> int | None:
        """When retention reclaims the batch's result bytes, and so its output and error
        files (the detailed batch view's `artifacts.expires_at`); None when the org keeps them
        until deleted."""
        if not batch.finalized_at:
            return None
        until = keep_until(
            self.retention.get(batch.org_id),
            finalized_at=datetime.fromisoformat(batch.finalized_at),
            grace=self.grace,
        )
        return int(until.timestamp()) if until is not None else None

    # -- list ------------------------------------------------------------------------------------
    def list(
        self, principal: Principal, *, after: str | None, limit: int, descending: bool, purpose: str | None
    ) -> VendorFileListView:
        """The org's files of purpose batch and the output and error files its compat batches
        show, in id order (newest first unless ascending), after the file id `after`. A page
        holds at most `FILE_PAGE_MAX` files whatever `limit` asks; `has_more` says if more
        follow. Another purpose lists nothing."""
        authorize(principal, "batches:read")
        if after is not None and not has_prefix(after, "file"):
            raise InvalidRequest(
                "after must be a file id.", code="invalid_cursor", details={"param": "after"}
            )
        data: list[VendorFileView] = []
        has_more = False
        if purpose is None or purpose in FILE_LIST_PURPOSES:
            page = min(limit, FILE_PAGE_MAX)
            batches: dict[str, BatchRecord | None] = {}
            listed = self.outputs.files(principal.org_id, after=after, descending=descending, purpose=purpose)
            for entry in listed:
                view = self._listed(entry, batches)
                if view is not None and len(data) == page:
                    has_more = True
                    break
                if view is not None:
                    data.append(view)
        return vendor_list(data, has_more=has_more)

    def _listed(
        self, entry: FileRecord | tuple[str, OutputFile], batches: dict[str, BatchRecord | None]
    ) -> VendorFileView | None:
        """The File object of a listed entry; None for an output file its batch does not show."""
        if isinstance(entry, FileRecord):
            return input_file_object(entry)
        file_id, output = entry
        if output.batch_id not in batches:
            batches[output.batch_id] = self.batches.get(output.batch_id)
        batch = batches[output.batch_id]
        if batch is None or output.deleted_at or file_id not in output_files(batch):
            return None
        return self._output_object(file_id, output, batch)

    # -- delete ----------------------------------------------------------------------------------
    def delete(self, principal: Principal, file_id: str) -> VendorFileDeletedView:
        """Take a file off the surface for good (docs/compat.md, Deleting files): 404 from then
        on. An input file's record and bytes are deleted; an output or error file is hidden,
        and once every file its batch shows is deleted the batch's result bytes are reclaimed
        as retention does."""
        authorize(principal, "batches:create")
        record = self.files.records.get(file_id) if has_prefix(file_id, "file") else None
        if record is not None:
            require_same_org(principal, record.org_id)
            self._delete_input(record)
        else:
            self._delete_output(file_id, *self._output(principal, file_id))
        return {"id": file_id, "object": "file", "deleted": True}

    def _delete_input(self, record: FileRecord) -> None:
        if record.purpose != COMPAT_PURPOSE:
            raise InvalidRequest(
                f"File {record.file_id} has purpose {record.purpose} (a file of the native API, "
                "which deletes none); this surface deletes files of purpose batch and batch_output.",
                code="invalid_file_purpose",
                details={"param": "file_id"},
            )
        if record.status in ("uploading", "uploaded"):
            raise Conflict(
                "This file's upload has not been completed.",
                code="file_not_ready",
                details={"status": record.status, "param": "file_id"},
            )
        self._refuse_while_intake_due(record)
        # The bytes first: a delete that fails halfway is finished by asking again.
        for key in (record.s3_key, apart_key(record.item_profile)):
            if key:
                self.files.objects.delete(key)
        if not self.outputs.delete_input_file(record.file_id):
            raise _no_such_file(record.file_id)

    def _refuse_while_intake_due(self, record: FileRecord) -> None:
        """409 while a native batch created over the file has not read it yet (its Intake step
        is due: docs/files.md); a compat batch copied the rows when it was created."""
        since = max(datetime.fromisoformat(record.created_at), self.files.clock.now() - INTAKE_HORIZON)
        for batch_id in self.outputs.validating_batch_ids(record.org_id, created_since=since):
            batch = self.batches.get(batch_id)
            intake = batch.intake if batch is not None else None
            if intake and intake.file_id == record.file_id and not intake.done and intake.error is None:
                raise Conflict(
                    f"Batch {batch_id} has not read this file yet (its intake is due). Do not "
                    "retry at once: delete the file once that batch is dispatching or further "
                    f"(GET /v1/batches/{batch_id}); until then the answer stays 409.",
                    code="file_in_use",
                    details={"param": "file_id", "batch_id": batch_id},
                )

    def _delete_output(self, file_id: str, output: OutputFile, batch: BatchRecord) -> None:
        # Its renderings first: a delete that fails halfway is finished by asking again.
        self._delete_renderings(output, batch)
        at = isoformat(self.files.clock.now())
        if not self.outputs.delete_output_file(file_id, at=at):
            raise _no_such_file(file_id)
        # And again once it is deleted: a first read rendering it meanwhile may have written
        # one since (a read that finishes writing later sees the file deleted: `_rendered`).
        self._delete_renderings(output, batch)
        others = [self.outputs.output_file(f) for f in output_files(batch) if f and f != file_id]
        if batch.artifacts_reclaimed_at is None and all(o is None or o.deleted_at for o in others):
            # The files are views of the batch's results: with none left, they go.
            self.reclaim.mark_reclaimed(batch.batch_id, at=at)
            self.reclaim.reclaim_now(batch.batch_id, at=at)

    # -- content ---------------------------------------------------------------------------------
    def content(self, principal: Principal, file_id: str, body_format: BodyFormat | None) -> FileContent:
        """A file's bytes: an input file's as uploaded (the same in any body format), an output
        or error file's rendered in the body format asked for (its batch's by default). Bytes
        over `FileLimits.download_redirect_bytes` are served by storage from a short-lived
        signed URL, which the route answers with a redirect; the rest are streamed. 410 once
        retention reclaimed them, 404 for a file that never existed."""
        authorize(principal, "batches:read")
        record = self.files.records.get(file_id) if has_prefix(file_id, "file") else None
        if record is not None:
            return self._input_content(principal, record, body_format)
        output, batch = self._output(principal, file_id)
        if self._reclaimed(output, batch):
            raise _reclaimed()
        chosen = body_format or _default_format(batch)
        key = rendering_key(batch.batch_id, output.role, chosen)
        limits = self.files.limits
        if self._rendered(file_id, output, batch, chosen) <= limits.download_redirect_bytes:
            return FileContent(chosen, chunks=self.artifacts.chunks(key))
        url = self.artifacts.presigned_get(
            key, expires_in=limits.download_url_seconds, filename=_filename(output, batch), content_type=JSONL
        )
        return FileContent(chosen, url=url)

    def _input_content(
        self, principal: Principal, record: FileRecord, body_format: BodyFormat | None
    ) -> FileContent:
        require_same_org(principal, record.org_id)
        if record.status == "expired":
            raise _reclaimed()
        if record.status in ("uploading", "uploaded"):
            raise Conflict(  # `uploaded`: still being checked, so a retry may find it ready
                "This file's upload has not been completed.",
                code="file_not_ready",
                details={"status": record.status},
            )
        limits = self.files.limits
        if record.bytes <= limits.download_redirect_bytes:
            return FileContent(
                body_format or DEFAULT_BODY_FORMAT, chunks=self.files.objects.chunks(record.s3_key)
            )
        url = self.files.objects.presigned_get(
            record.s3_key,
            expires_in=limits.download_url_seconds,
            filename=record.filename,
            content_type=JSONL,
        )
        return FileContent(None, url=url)

    def _rendered(self, file_id: str, output: OutputFile, batch: BatchRecord, body_format: BodyFormat) -> int:
        """The size of the file's rendering in `body_format`, written to storage on its first
        read (`rendering_key`, under the batch's prefix) and only read from then on: a later
        read streams it or signs a URL of it without rendering again, whatever its size. Two
        first reads at once write the same bytes; a write that fails leaves nothing, and so
        does one whose file was deleted, or whose batch was reclaimed, while it wrote."""
        key = rendering_key(batch.batch_id, output.role, body_format)
        size = self.artifacts.size(key)
        if size is not None:
            return size
        writer = self.artifacts.writer(key, content_type=JSONL)
        size = 0
        try:
            for chunk in self._render(output, batch, body_format):
                writer.write(chunk)
                size += len(chunk)
            writer.close()
        except BaseException:
            writer.abort()
            raise
        gone = self._gone_meanwhile(file_id, batch.batch_id)
        if gone is not None:
            self.artifacts.delete(key)
            raise gone
        if output.sizes.get(body_format) != size:
            self.outputs.remember_bytes(file_id, body_format, size)
        return size

    def _gone_meanwhile(self, file_id: str, batch_id: str) -> ServiceError | None:
        """Why a rendering just written must go with its file: the file was deleted while it
        was rendered (`_delete_output` takes the renderings before and after marking it), or
        retention reclaimed the batch (its sweep lists the batch's objects after marking it)."""
        current = self.outputs.output_file(file_id)
        if current is None or current.deleted_at:
            return _no_such_file(file_id)
        batch = self.batches.get(batch_id)
        if batch is None or batch.artifacts_reclaimed_at:
            return _reclaimed()
        return None

    def _delete_renderings(self, output: OutputFile, batch: BatchRecord) -> None:
        for body_format in BODY_FORMATS:
            self.artifacts.delete(rendering_key(batch.batch_id, output.role, body_format))

    # -- helpers ---------------------------------------------------------------------------------
    def _output(self, principal: Principal, file_id: str) -> tuple[OutputFile, BatchRecord]:
        """An output or error file of a compat batch, once the batch shows it."""
        output = self.outputs.output_file(file_id) if has_prefix(file_id, "file") else None
        if output is None:
            raise _no_such_file(file_id)
        require_same_org(principal, output.org_id)
        batch = self.batches.get(output.batch_id)
        if batch is None or output.deleted_at or file_id not in output_files(batch):
            # Not written yet (the batch shows the id once it is terminal and finalized), or deleted.
            raise _no_such_file(file_id)
        return output, batch

    def _reclaimed(self, output: OutputFile, batch: BatchRecord) -> bool:
        """Retention marked the batch reclaimed (docs/retention.md), or its artifact is gone."""
        return (
            bool(batch.artifacts_reclaimed_at)
            or self.artifacts.size(self._artifact_key(output, batch)) is None
        )

    @staticmethod
    def _artifact_key(output: OutputFile, batch: BatchRecord) -> str:
        batch_id = batch.batch_id
        return results_key(batch_id) if output.is_output else errors_key(batch_id)

    def _render(self, output: OutputFile, batch: BatchRecord, body_format: BodyFormat) -> Iterator[bytes]:
        """The vendor lines, streamed: the completed rows of results.jsonl for the output
        file, the rows of errors.jsonl for the error file."""
        batch_id = batch.batch_id
        wanted = "completed" if output.is_output else "failed"
        endpoint = (batch.compat.endpoint if batch.compat else None) or "/v1/chat/completions"
        created = unix(batch.completed_at or batch.created_at) or 0
        key = self._artifact_key(output, batch)
        for row in artifact_lines(self.artifacts.chunks(key), key=key):
            if row.get("status") == wanted:
                line = output_line(
                    batch_id, cast(ArtifactRow, row), body_format, endpoint=endpoint, created=created
                )
                yield json.dumps(line, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def _filename(output: OutputFile, batch: BatchRecord) -> str:
    return f"{batch.batch_id}_{output.role}.jsonl"


def _no_such_file(file_id: str) -> NotFound:
    return NotFound(f"No such file: {file_id[:64]}.", code="file_not_found", details={"param": "file_id"})


def _reclaimed() -> Gone:
    return Gone("This file's bytes were reclaimed by retention.", code="file_expired")


def input_file_object(record: FileRecord) -> VendorFileView:
    """The vendor File object of a stored input file."""
    return {
        "id": record.file_id,
        "object": "file",
        "bytes": record.bytes,
        "created_at": unix(record.created_at),
        "filename": record.filename,
        "purpose": record.purpose,
        "status": file_status(record.status),
        "status_details": (record.error or {}).get("message"),
        "expires_at": None,
    }


def _default_format(batch: BatchRecord) -> BodyFormat:
    chosen = batch.compat.body_format if batch.compat else None
    return "raw" if chosen == "raw" else DEFAULT_BODY_FORMAT
