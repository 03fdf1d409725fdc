"""Model-input files: direct uploads, signed-URL uploads confirmed by a second call, and the
streaming reader quotes and batches use (`open_items`).

Every path streams: bytes are checked (file type, lines, size, sha256) as they pass and are
never held whole, so memory stays flat whatever the file size. See docs/files.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import KW_ONLY, dataclass, replace
from datetime import timedelta
from typing import Literal, NotRequired, Protocol, TypedDict

from batchroute.clock import Clock, isoformat
from batchroute.domain.batches.files import (
    DEFAULT_CONTENT_TYPE,
    DEFAULT_PURPOSE,
    MAX_FILENAME_CHARS,
    PURPOSES,
    SNIFF_BYTES,
    CompletedPart,
    FileRecord,
    FileStatus,
    FileView,
    PartsRefused,
    Purpose,
    file_type_issue,
    final_key,
    media_type,
    part_count,
    part_range,
    part_size,
    profile_key,
    staging_key,
    unsupported_file_type,
)
from batchroute.domain.batches.item_profile import (
    RECORD_PROFILE_BYTES,
    ItemProfile,
    ItemProfileBuilder,
    apart_key,
    stored_apart,
)
from batchroute.domain.batches.jsonl import (
    MAX_LINE_BYTES,
    JsonlScan,
    LineError,
    ParsedLine,
    ScanResult,
    parse_jsonl,
)
from batchroute.domain.batches.preflight import IssueView, PreflightFailed
from batchroute.domain.views import view_of
from batchroute.errors import Conflict, Forbidden, Gone, InvalidRequest, NotFound, PayloadTooLarge
from batchroute.ids import has_prefix, new_id
from batchroute.observability import logger
from batchroute.services.batches.ports import ObjectStore, ObjectWriter, SignedDownloads
from batchroute.workflow.queues import TaskSender
from batchroute.workflow.tasks import unwaited_task

STAGING_LIFETIME = timedelta(days=2)  # the uploads bucket's `staging/` expiry (resources.py)
DEFAULT_FILENAME = "upload.jsonl"


class FileRecords(Protocol):
    def create(self, record: FileRecord, *, ttl: int | None = None) -> None: ...

    def get(self, file_id: str) -> FileRecord | None: ...

    def replace(self, record: FileRecord, *, expected_status: FileStatus) -> bool: ...


class FileObjects(ObjectStore, SignedDownloads, Protocol):
    def presigned_put(self, key: str, *, content_type: str, expires_in: int) -> str: ...

    def copy(self, source_key: str, target_key: str) -> None: ...

    def delete(self, key: str) -> None: ...

    def start_multipart(self, key: str, *, content_type: str) -> str: ...

    def presigned_part(self, key: str, upload_id: str, number: int, *, expires_in: int) -> str: ...

    def complete_multipart(self, key: str, upload_id: str, parts: list[CompletedPart]) -> None: ...

    def abort_multipart(self, key: str, upload_id: str) -> None: ...


@dataclass(frozen=True)
class FileLimits:
    max_direct_upload_bytes: int = 4 * 1024 * 1024
    max_file_bytes: int = 2 * 1024 * 1024 * 1024  # a 1M-item file of 600-byte lines is ~600 MB
    upload_url_seconds: int = 900
    # A signed upload declared above this is a multipart upload (parts of `part_bytes`, grown
    # when 10,000 would not hold the file) checked off the request path when a checker is wired.
    multipart_threshold_bytes: int = 64 * 1024 * 1024
    part_bytes: int = 64 * 1024 * 1024
    max_line_bytes: int = MAX_LINE_BYTES
    # A download larger than this is answered with a redirect to a signed URL that S3
    # serves, valid for `download_url_seconds` (docs/files.md, Downloads).
    download_redirect_bytes: int = 4 * 1024 * 1024
    download_url_seconds: int = 300
    # An item profile larger than this is an S3 object next to the file, not on its record.
    record_profile_bytes: int = RECORD_PROFILE_BYTES


class FilePreflightFailed(PreflightFailed):
    """400 `batch_preflight_failed` with one `file_type` issue in `details.preflight`."""

    def __init__(self, issue: IssueView) -> None:
        super().__init__(issue["message"], [issue])
        self.issue = issue


class UploadTooLarge(PayloadTooLarge):
    """A direct upload over the limit: the API answers 413 `payload_too_large`."""


def too_large(limit: int) -> UploadTooLarge:
    return UploadTooLarge(
        f"A direct upload may hold at most {limit} bytes; upload larger files with a signed URL "
        "(POST /v1/files/uploads, then POST /v1/files/{file_id}/complete).",
        details={"max_bytes": limit, "signed_upload_path": "/v1/files/uploads"},
    )


class PartUrlView(TypedDict):
    part_number: int
    url: str
    offset: int
    bytes: int


class MultipartView(TypedDict):
    method: Literal["PUT"]
    part_bytes: int
    part_count: int
    parts: list[PartUrlView]
    expires_at: str


class UploadTargetView(TypedDict):
    url: str
    method: str
    headers: dict[str, str]
    expires_at: str


class SignedUploadView(TypedDict):
    """A signed upload's answer: the file, where to PUT its bytes, and the parts' URLs."""

    file: FileView
    upload: UploadTargetView
    multipart: NotRequired[MultipartView]


@dataclass(frozen=True)
class PartUrl:
    number: int
    url: str
    start: int  # the part's bytes in the file: [start, end)
    end: int

    def to_api(self) -> PartUrlView:
        return {
            "part_number": self.number,
            "url": self.url,
            "offset": self.start,
            "bytes": self.end - self.start,
        }


@dataclass(frozen=True)
class MultipartPlan:
    part_bytes: int
    part_count: int
    parts: tuple[PartUrl, ...]
    expires_at: str

    def to_api(self) -> MultipartView:
        return view_of(self, MultipartView, method="PUT", parts=[part.to_api() for part in self.parts])


@dataclass(frozen=True)
class UploadedPart:
    """One part as the client reports it on complete: its number and the ETag S3 answered."""

    number: int
    etag: str


@dataclass(frozen=True)
class SignedUpload:
    file: FileRecord
    url: str
    headers: dict[str, str]
    expires_at: str
    method: str = "PUT"
    multipart: MultipartPlan | None = None

    def to_api(self) -> SignedUploadView:
        answer: SignedUploadView = {
            "file": self.file.to_api(),
            "upload": {
                "url": self.url,
                "method": self.method,
                "headers": self.headers,
                "expires_at": self.expires_at,
            },
        }
        if self.multipart is not None:
            answer["multipart"] = self.multipart.to_api()
        return answer


class _Intake:
    """One file's bytes in order: the first SNIFF_BYTES are held until the file type is
    checked, then every chunk is scanned and handed on to `sink` (if any). With `profile`,
    the parsed lines also build the file's item profile (docs/files.md, Item profile)."""

    def __init__(
        self,
        *,
        content_type: str,
        filename: str,
        max_line_bytes: int,
        max_bytes: int | None = None,
        sink: ObjectWriter | None = None,
        profile: bool = False,
    ) -> None:
        self._content_type = content_type
        self._filename = filename
        self._max_bytes = max_bytes
        self._sink = sink
        self._head: bytearray | None = bytearray()
        self._profile = ItemProfileBuilder() if profile else None
        on_lines = self._profile.add_lines if self._profile is not None else None
        self._scan = JsonlScan(max_line_bytes=max_line_bytes, on_lines=on_lines)

    def profile(self) -> str | None:
        """The item profile's JSON text once finished, None when not built."""
        return self._profile.finish().to_json() if self._profile is not None else None

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        if self._head is not None:
            self._head += chunk
            if len(self._head) < SNIFF_BYTES:
                return
            chunk = self._release_head()
        self._pass(chunk)

    def check_type(self) -> None:
        """The file type checked now on the bytes so far (a file shorter than SNIFF_BYTES is
        otherwise checked at `finish`)."""
        if self._head is not None:
            self._pass(self._release_head())

    def finish(self) -> ScanResult:
        self.check_type()
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
            profile=True,  # the purpose comes last (a form field): kept for `batch_input` only
        )

    def write(self, chunk: bytes) -> None:
        self._intake.feed(chunk)

    def check_type(self) -> None:
        """Once every byte was written: FilePreflightFailed for a file that is not JSON Lines."""
        self._intake.check_type()

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
            profile=self._service.keep_profile(self.org_id, self.file_id, scanned.sha256, self._intake)
            if chosen == DEFAULT_PURPOSE
            else None,
        )
        self._service.records.create(record)
        return record

    def abort(self) -> None:
        self._sink.abort()


@dataclass(eq=False)
class FileService:
    # `request_check(org_id, file_id)`: queues the checks of a confirmed large upload for a
    # worker (which calls `check_upload`); without it every confirm checks in the request.
    records: FileRecords
    objects: FileObjects
    clock: Clock
    limits: FileLimits
    _: KW_ONLY
    request_check: Callable[[str, str], None] | None = None

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
        staged = staging_key(org_id, file_id)
        upload_id = part_bytes = None
        if declared_bytes > self.limits.multipart_threshold_bytes:
            part_bytes = part_size(declared_bytes, self.limits.part_bytes)
            upload_id = self.objects.start_multipart(staged, content_type=kind)
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
            upload_id=upload_id,
            part_bytes=part_bytes,
        )
        self.records.create(record, ttl=int((now + STAGING_LIFETIME).timestamp()))
        url = self.objects.presigned_put(staged, content_type=kind, expires_in=self.limits.upload_url_seconds)
        plan = self._plan(record, None) if upload_id is not None else None
        return SignedUpload(
            file=record, url=url, headers={"Content-Type": kind}, expires_at=expires_at, multipart=plan
        )

    def part_urls(self, org_id: str, file_id: str, numbers: Sequence[int] | None = None) -> MultipartPlan:
        """Fresh signed URLs for parts of a multipart upload still `uploading` (all by default),
        for a client whose first URLs expired or that uploads a range at a time."""
        record = self.file(org_id, file_id)
        if record.upload_id is None:
            raise InvalidRequest("This upload is a single PUT, not a multipart upload.", code="not_multipart")
        if record.status != "uploading":
            raise Conflict("This upload was already completed or cancelled.", code="upload_not_open")
        return self._plan(record, numbers)

    def _plan(self, record: FileRecord, numbers: Sequence[int] | None) -> MultipartPlan:
        assert record.upload_id is not None and record.part_bytes is not None
        count = part_count(record.bytes, record.part_bytes)
        chosen = list(numbers) if numbers is not None else list(range(1, count + 1))
        if not chosen or any(not 1 <= number <= count for number in chosen):
            raise InvalidRequest(
                f"Part numbers run from 1 to {count}.", code="invalid_parts", details={"part_count": count}
            )
        seconds = self.limits.upload_url_seconds
        staged = staging_key(record.org_id, record.file_id)
        parts = tuple(
            PartUrl(
                number,
                self.objects.presigned_part(staged, record.upload_id, number, expires_in=seconds),
                *part_range(number, record.bytes, record.part_bytes),
            )
            for number in sorted(set(chosen))
        )
        expires_at = isoformat(self.clock.now() + timedelta(seconds=seconds))
        return MultipartPlan(
            part_bytes=record.part_bytes, part_count=count, parts=parts, expires_at=expires_at
        )

    def cancel_upload(self, org_id: str, file_id: str) -> FileRecord:
        """Give up a signed upload still `uploading`: S3 drops the parts sent, the staged bytes
        are deleted and the file ends `error` (`upload_cancelled`). Cancelling again answers it."""
        record = self.file(org_id, file_id)
        if record.status != "uploading":
            if record.error and record.error.get("code") == "upload_cancelled":
                return record
            raise Conflict("Only an upload still in progress can be cancelled.", code="upload_not_open")
        staged = staging_key(org_id, file_id)
        if record.upload_id is not None:
            self.objects.abort_multipart(staged, record.upload_id)
        self.objects.delete(staged)
        cancelled = replace(
            record,
            status="error",
            updated_at=isoformat(self.clock.now()),
            upload_expires_at=None,
            error={"code": "upload_cancelled", "message": "The upload was cancelled."},
        )
        return self._settle(record, cancelled)

    def complete_upload(
        self, org_id: str, file_id: str, parts: Sequence[UploadedPart] | None = None
    ) -> FileRecord:
        """Confirm a signed upload: join its parts (multipart), check the bytes landed whole,
        then check them, here or (a large upload, when a checker is wired) on a worker, which
        leaves the file `uploaded` until then. Completing again answers the same file."""
        record = self.file(org_id, file_id)
        if record.status not in ("uploading", "uploaded"):
            return _as_settled(record)
        if record.status == "uploading":
            staged = staging_key(org_id, file_id)
            if parts is not None:
                self._join(record, staged, parts)
            self._check_size(record, self.objects.size(staged))
        checked_later = (
            self.request_check is not None and record.bytes > self.limits.multipart_threshold_bytes
        )
        if not checked_later:
            return self.check_upload(org_id, file_id)
        if record.status == "uploading":
            marked = replace(
                record, status="uploaded", updated_at=isoformat(self.clock.now()), upload_expires_at=None
            )
            record = self._settle(record, marked)
            if record.status != "uploaded":
                return record
        assert self.request_check is not None
        # Again on every call while `uploaded`: a lost message is re-sent; checking twice is harmless.
        self.request_check(org_id, file_id)
        return record

    def _join(self, record: FileRecord, staged: str, parts: Sequence[UploadedPart]) -> None:
        if record.upload_id is None or record.part_bytes is None:
            raise InvalidRequest(
                "This upload is a single PUT: complete it without parts.", code="not_multipart"
            )
        count = part_count(record.bytes, record.part_bytes)
        if [part.number for part in parts] != list(range(1, count + 1)):
            raise InvalidRequest(
                f"Name every part once, in order: part numbers 1 to {count}, each with its ETag.",
                code="invalid_parts",
                details={"part_count": count},
            )
        try:
            self.objects.complete_multipart(
                staged, record.upload_id, [{"PartNumber": p.number, "ETag": p.etag} for p in parts]
            )
        except PartsRefused as refused:
            if str(refused) == "NoSuchUpload" and self.objects.size(staged) == record.bytes:
                return  # an earlier complete call joined them
            raise InvalidRequest(
                "S3 refused the part list: each part must be uploaded, with the ETag its PUT answered.",
                code="invalid_parts",
                details={"part_count": count, "reason": str(refused)},
            ) from refused

    def _check_size(self, record: FileRecord, size: int | None) -> None:
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

    def check_upload(self, org_id: str, file_id: str) -> FileRecord:
        """Stream a confirmed signed upload's bytes through the checks, move them to the file's
        key, and settle the file `processed` or `error`. A file already settled answers as is;
        the queued checks of a large upload run this on a worker."""
        record = self.file(org_id, file_id)
        if record.status not in ("uploading", "uploaded"):
            return _as_settled(record)
        staged = staging_key(org_id, file_id)
        intake = _Intake(
            content_type=record.content_type,
            filename=record.filename,
            max_line_bytes=self.limits.max_line_bytes,
            profile=record.purpose == DEFAULT_PURPOSE,  # compat files are converted at create
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
        profile = self.keep_profile(org_id, file_id, scanned.sha256, intake)
        settled = self._settle(record, _scanned(record, scanned, at=now, profile=profile))
        self.objects.delete(staged)
        if record.upload_id is not None:
            self.objects.abort_multipart(staged, record.upload_id)  # a single PUT was used instead
        return settled

    def check_queued(self, file_id: str) -> FileRecord | None:
        """The worker's side of a queued check (`check_file` on the route queue): the file's
        own org, from its record. A file gone (TTL) is nothing to do; a refused file type
        settles the file `error` and is not a failure of the message."""
        record = self.records.get(file_id)
        if record is None:
            return None
        if record.status == "uploading":  # only a confirmed upload is queued; its size not yet checked
            return record
        try:
            return self.check_upload(record.org_id, file_id)
        except FilePreflightFailed:
            return self.records.get(file_id)

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

    def item_profile(self, org_id: str, file_id: str) -> ItemProfile | None:
        """The usable item profile of a ready file (the checks of `file_ready`, one read of the
        record), None when it has none: checked before profiles existed, or not clean
        (docs/files.md, Item profile). A profile stored under another estimator (a deploy that
        changed the item facts) is built again from the file, once, and kept in its place."""
        record = self.file_ready(org_id, file_id)
        if not record.usable:
            return None
        stored, key = record.item_profile, apart_key(record.item_profile)
        if key is not None:  # a large profile, kept apart: one GET
            stored = b"".join(self.objects.chunks(key)).decode()
        profile = ItemProfile.from_json(stored)
        if profile is None and stored:  # stale: this read builds it anew
            profile = self._profile_again(record)
        return profile if profile is not None and profile.usable else None

    def _profile_again(self, record: FileRecord) -> ItemProfile:
        """The profile of a processed file's items, read from its object (what its check built,
        under today's estimator), kept on its record for the next quote: a lost race keeps
        the other reader's, the same profile; a file gone meanwhile keeps none."""
        builder = ItemProfileBuilder()
        builder.add_lines(
            parse_jsonl(self.objects.chunks(record.s3_key), max_line_bytes=self.limits.max_line_bytes)
        )
        profile = builder.finish()
        kept = self._kept_profile(record.org_id, record.file_id, record.sha256 or "", profile.to_json())
        if not self.records.replace(replace(record, item_profile=kept), expected_status="processed"):
            # The file was deleted or reclaimed meanwhile, and with it its profile: what this
            # read wrote apart would outlive it.
            apart = apart_key(kept)
            if apart is not None:
                self.objects.delete(apart)
        logger.info("file profile built again", extra={"file_id": record.file_id, "usable": profile.usable})
        return profile

    def keep_profile(self, org_id: str, file_id: str, sha256: str, intake: _Intake) -> str | None:
        """What the file record keeps of the profile `intake` built: its JSON text, or where
        it was written when larger than `record_profile_bytes`."""
        return self._kept_profile(org_id, file_id, sha256, intake.profile())

    def _kept_profile(self, org_id: str, file_id: str, sha256: str, text: str | None) -> str | None:
        if text is None or len(text) <= self.limits.record_profile_bytes:
            return text
        key = profile_key(org_id, file_id, sha256)
        sink = self.objects.writer(key, content_type="application/json")
        sink.write(text.encode())
        sink.close()
        return stored_apart(key)

    def file_ready(self, org_id: str, file_id: str) -> FileRecord:
        """The file's record once its items can be read (the checks of `open_items`, without
        reading a byte): batch create checks an input file this way before reserving."""
        record = self.file(org_id, file_id)
        if record.status == "expired":
            raise Gone("This file's bytes were reclaimed by retention.", code="file_expired")
        if record.status in ("uploading", "uploaded"):
            message = (
                "This file's upload has not been completed (POST /v1/files/{file_id}/complete)."
                if record.status == "uploading"
                else "This file is still being checked; retry once GET /v1/files/{file_id} shows processed."
            )
            raise Conflict(
                message, code="file_not_ready", details={"file_id": file_id, "status": record.status}
            )
        if record.error and record.error.get("code") == "unsupported_file_type":
            raise FilePreflightFailed(_file_type_issue_of(record))
        return record


# A file `uploaded` this long without its check having settled it gets the check again
# (docs/files.md, "A lost check"): beyond the route queue's own redeliveries (visibility
# 360 s), so a slow first check is rarely doubled, and doubling is harmless.
CHECK_RESEND_SECONDS = 900


class AwaitingChecks(Protocol):
    """adapters/dynamo/files.py:FileStore's sparse index of files awaiting their check."""

    def awaiting_check(self, before: str, *, limit: int = 100) -> list[str]: ...

    def check_sent(self, file_id: str, at: str) -> bool: ...


@dataclass
class FileCheckResender:
    """The sweeper's part: re-send the check of every file `uploaded` for longer than
    `resend_after_seconds` (by the injected clock), then move it on the index so it is
    re-sent again only after as long. Without a queue the check runs here."""

    files: FileService
    index: AwaitingChecks
    resend_after_seconds: float = CHECK_RESEND_SECONDS

    def resend_due(self, *, limit: int = 100) -> list[str]:
        now = self.files.clock.now()
        before = isoformat(now - timedelta(seconds=self.resend_after_seconds))
        sent: list[str] = []
        for file_id in self.index.awaiting_check(before, limit=limit):
            record = self.files.records.get(file_id)
            if record is None or record.status != "uploaded":
                continue
            try:
                if self.files.request_check is not None:
                    self.files.request_check(record.org_id, file_id)
                else:
                    self.files.check_queued(file_id)
            except Exception:  # the next sweep tries again
                logger.warning("file check re-send failed", extra={"file_id": file_id}, exc_info=True)
                continue
            self.index.check_sent(file_id, isoformat(now))
            sent.append(file_id)
        return sent


def queued_checks(queue: TaskSender | None) -> Callable[[str, str], None] | None:
    """How a confirmed large upload is checked: with the route queue, by the router (a
    `check_file` message); without one (None), in the confirm call itself."""
    if queue is None:
        return None

    def request_check(org_id: str, file_id: str) -> None:
        queue.send(check_message(file_id))

    return request_check


def check_message(file_id: str) -> str:
    """The route queue's message asking the router to check a confirmed upload."""
    return unwaited_task("check_file", file_id=file_id)


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


def _scanned(record: FileRecord, scanned: ScanResult, *, at: str, profile: str | None = None) -> FileRecord:
    """The record once its bytes were checked: `processed`, or `error` with the reasons;
    `profile` the item profile's JSON text when one was built."""
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
        item_profile=profile,
    )


def _as_settled(record: FileRecord) -> FileRecord:
    """A file whose upload settled, as it answers a repeated complete or check: as it stands,
    or, refused for its type, the preflight failure it was refused with."""
    if record.error and record.error.get("code") == "unsupported_file_type":
        raise FilePreflightFailed(_file_type_issue_of(record))
    return record


def _file_type_issue_of(record: FileRecord) -> IssueView:
    return unsupported_file_type((record.error or {}).get("message", "Unsupported file."))


__all__ = [
    "DirectUpload",
    "FileLimits",
    "FilePreflightFailed",
    "FileService",
    "LineError",
    "MultipartPlan",
    "SignedUpload",
    "UploadTooLarge",
    "UploadedPart",
]
