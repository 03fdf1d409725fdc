"""FileService with in-memory fakes: direct uploads, signed uploads and their confirm call,
ownership, the streaming reader, and memory that stays flat with a ~30 MB file."""

from __future__ import annotations

import hashlib
import json
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pytest

from batchroute.clock import FixedClock
from batchroute.domain.batches.files import FileRecord, FileStatus, PartsRefused, final_key, staging_key
from batchroute.domain.batches.jsonl import LineError
from batchroute.errors import Conflict, Forbidden, Gone, InvalidRequest, NotFound
from batchroute.services.batches.files import FileLimits, FilePreflightFailed, FileService, UploadTooLarge

ORG = "org_a"
OTHER_ORG = "org_b"
GOOD = b'{"customer_item_id": "1", "operation": "responses", "model": "m", "input": {}}\n'


@dataclass
class FakeRecords:
    items: dict[str, FileRecord] = field(default_factory=dict)
    ttls: dict[str, int | None] = field(default_factory=dict)

    def create(self, record: FileRecord, *, ttl: int | None = None) -> None:
        assert record.file_id not in self.items
        self.items[record.file_id] = record
        self.ttls[record.file_id] = ttl

    def get(self, file_id: str) -> FileRecord | None:
        return self.items.get(file_id)

    def replace(self, record: FileRecord, *, expected_status: FileStatus) -> bool:
        if self.items[record.file_id].status != expected_status:
            return False
        self.items[record.file_id] = record
        self.ttls[record.file_id] = None
        return True


class FakeWriter:
    def __init__(self, objects: FakeObjects, key: str) -> None:
        self.objects, self.key, self.data = objects, key, bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self) -> None:
        self.objects.store(self.key, bytes(self.data))

    def abort(self) -> None:
        self.objects.aborted.append(self.key)


@dataclass
class FakeObjects:
    """Objects are chunk factories, so a generated object is never held whole."""

    sources: dict[str, tuple[int, Callable[[], Iterator[bytes]]]] = field(default_factory=dict)
    aborted: list[str] = field(default_factory=list)
    copies: list[tuple[str, str]] = field(default_factory=list)
    signed: list[tuple[str, str, int]] = field(default_factory=list)
    # multipart uploads: upload id -> (key, {part number: bytes}); ids aborted
    multipart: dict[str, tuple[str, dict[int, bytes]]] = field(default_factory=dict)
    aborted_uploads: list[str] = field(default_factory=list)

    def store(self, key: str, data: bytes) -> None:
        self.sources[key] = (
            len(data),
            lambda: iter([data[i : i + 65536] for i in range(0, len(data), 65536)]),
        )

    def writer(self, key: str, *, content_type: str) -> FakeWriter:
        return FakeWriter(self, key)

    def size(self, key: str) -> int | None:
        return self.sources[key][0] if key in self.sources else None

    def chunks(self, key: str) -> Iterator[bytes]:
        return self.sources[key][1]()

    def presigned_put(self, key: str, *, content_type: str, expires_in: int) -> str:
        self.signed.append((key, content_type, expires_in))
        return f"https://uploads.example/{key}?sig=x"

    def copy(self, source_key: str, target_key: str) -> None:
        self.copies.append((source_key, target_key))
        self.sources[target_key] = self.sources[source_key]

    def delete(self, key: str) -> None:
        self.sources.pop(key, None)

    def start_multipart(self, key: str, *, content_type: str) -> str:
        upload_id = f"up{len(self.multipart) + 1}"
        self.multipart[upload_id] = (key, {})
        return upload_id

    def presigned_part(self, key: str, upload_id: str, number: int, *, expires_in: int) -> str:
        return f"https://uploads.example/{key}?uploadId={upload_id}&partNumber={number}&expires={expires_in}"

    def put_part(self, upload_id: str, number: int, data: bytes) -> str:
        """What a client's PUT to a part URL does; the ETag S3 answers."""
        self.multipart[upload_id][1][number] = data
        return f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"'

    def complete_multipart(self, key: str, upload_id: str, parts: list[dict[str, Any]]) -> None:
        if upload_id not in self.multipart:
            raise PartsRefused("NoSuchUpload")
        sent = self.multipart[upload_id][1]
        for part in parts:
            data = sent.get(part["PartNumber"])
            if data is None or part["ETag"] != f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"':
                raise PartsRefused("InvalidPart")
        self.store(key, b"".join(sent[part["PartNumber"]] for part in parts))
        del self.multipart[upload_id]

    def abort_multipart(self, key: str, upload_id: str) -> None:
        self.multipart.pop(upload_id, None)
        self.aborted_uploads.append(upload_id)


@pytest.fixture
def records() -> FakeRecords:
    return FakeRecords()


@pytest.fixture
def objects() -> FakeObjects:
    return FakeObjects()


@pytest.fixture
def service(records: FakeRecords, objects: FakeObjects) -> FileService:
    clock = FixedClock(datetime(2026, 3, 1, tzinfo=UTC))
    return FileService(records, objects, clock, FileLimits(max_direct_upload_bytes=64 * 1024))


def upload(service: FileService, data: bytes, *, chunk: int = 1000, **kwargs: str) -> FileRecord:
    started = service.begin_upload(
        ORG, filename=kwargs.get("filename", "items.jsonl"), content_type=kwargs.get("content_type")
    )
    try:
        for start in range(0, len(data), chunk):
            started.write(data[start : start + chunk])
        return started.finish(purpose=kwargs.get("purpose"))
    except BaseException:
        started.abort()
        raise


# -- direct uploads --------------------------------------------------------------------------


def test_a_direct_upload_is_stored_checked_and_processed(
    service: FileService, records: FakeRecords, objects: FakeObjects
) -> None:
    # Given three good lines
    data = GOOD * 3
    # When uploaded directly in small chunks
    record = upload(service, data)
    # Then the bytes sit under the file's key and the record says processed
    assert objects.chunks(final_key(ORG, record.file_id)) is not None
    assert b"".join(objects.chunks(record.s3_key)) == data
    assert record.status == "processed" and record.usable
    assert (record.bytes, record.line_count, record.item_count) == (len(data), 3, 3)
    assert record.sha256 == hashlib.sha256(data).hexdigest()
    assert record.purpose == "batch_input" and record.content_type == "application/jsonl"
    assert records.get(record.file_id) == record
    assert record.to_api()["id"].startswith("file_") and record.to_api()["object"] == "file"


def test_malformed_lines_store_the_file_as_error_with_the_first_errors(service: FileService) -> None:
    # Given a file with two bad lines
    record = upload(service, GOOD + b"{not json\n" + GOOD + b"[1]\n")
    # Then it is kept, unusable, with both errors listed by line
    assert record.status == "error" and not record.usable
    assert record.error is not None and record.error["code"] == "invalid_lines"
    assert [(e.line_no, e.code) for e in record.errors] == [(2, "invalid_json"), (4, "not_an_object")]
    assert record.to_api()["errors"][0] == {
        "line": 2,
        "code": "invalid_json",
        "message": record.errors[0].message,
    }


def test_an_empty_file_is_an_error(service: FileService) -> None:
    record = upload(service, b"\n\n")
    assert record.status == "error" and record.error == {
        "code": "empty_file",
        "message": "The file holds no JSON lines.",
    }


def test_a_pdf_is_refused_before_anything_is_stored(
    service: FileService, records: FakeRecords, objects: FakeObjects
) -> None:
    # Given a PDF sent under a .jsonl name, larger than the sniffed head
    pdf = b"%PDF-1.7\n" + b"\x00binary" * 2000
    # When uploaded / Then the preflight file_type failure, and nothing kept
    with pytest.raises(FilePreflightFailed) as refused:
        upload(service, pdf)
    assert refused.value.code == "batch_preflight_failed"
    preflight = (refused.value.details or {})["preflight"]
    assert preflight["ok"] is False
    assert preflight["errors"][0]["category"] == "file_type"
    assert preflight["errors"][0]["code"] == "unsupported_file_type"
    assert records.items == {} and objects.sources == {}
    assert len(objects.aborted) == 1


def test_a_declared_content_type_or_name_is_refused_before_any_byte(service: FileService) -> None:
    with pytest.raises(FilePreflightFailed):
        service.begin_upload(ORG, filename="a.jsonl", content_type="application/pdf")
    with pytest.raises(FilePreflightFailed):
        service.begin_upload(ORG, filename="scan.zip", content_type=None)


def test_a_direct_upload_over_the_limit_is_too_large(service: FileService, objects: FakeObjects) -> None:
    with pytest.raises(UploadTooLarge) as caught:
        upload(service, GOOD * 2000)
    assert caught.value.code == "payload_too_large"
    assert (caught.value.details or {})["signed_upload_path"] == "/v1/files/uploads"
    assert objects.sources == {}


def test_purpose_defaults_to_batch_input_and_unknown_ones_are_refused(service: FileService) -> None:
    assert upload(service, GOOD, purpose="batch").purpose == "batch"
    with pytest.raises(InvalidRequest) as caught:
        upload(service, GOOD, purpose="fine-tune")
    assert caught.value.code == "invalid_purpose"


# -- signed uploads ------------------------------------------------------------------------------


def test_a_signed_upload_is_confirmed_once_and_moved_to_its_key(
    service: FileService, records: FakeRecords, objects: FakeObjects
) -> None:
    data = GOOD * 5
    # Given a started upload
    signed = service.start_upload(ORG, filename="big.jsonl", declared_bytes=len(data))
    file_id = signed.file.file_id
    # Then the file is uploading, expires with the staging object, and the URL targets staging
    assert signed.file.status == "uploading"
    assert records.ttls[file_id] == int(datetime(2026, 3, 3, tzinfo=UTC).timestamp())
    assert objects.signed == [(staging_key(ORG, file_id), "application/jsonl", 900)]
    assert signed.headers == {"Content-Type": "application/jsonl"}
    assert signed.expires_at == "2026-03-01T00:15:00.000Z"
    assert signed.to_api()["upload"]["method"] == "PUT"
    # When confirmed before any byte arrived / Then 409 upload_incomplete
    with pytest.raises(Conflict) as early:
        service.complete_upload(ORG, file_id)
    assert early.value.code == "upload_incomplete"
    # When the client PUTs the bytes and confirms
    objects.store(staging_key(ORG, file_id), data)
    done = service.complete_upload(ORG, file_id)
    # Then the file is processed under its final key, staging is gone, the TTL removed
    assert done.status == "processed" and done.item_count == 5 and done.bytes == len(data)
    assert objects.copies == [(staging_key(ORG, file_id), final_key(ORG, file_id))]
    assert staging_key(ORG, file_id) not in objects.sources
    assert records.ttls[file_id] is None
    # And confirming again answers the same file without doing it again
    assert service.complete_upload(ORG, file_id) == done
    assert len(objects.copies) == 1


def test_a_size_mismatch_is_refused_and_the_upload_can_be_retried(
    service: FileService, objects: FakeObjects
) -> None:
    signed = service.start_upload(ORG, filename="a.jsonl", declared_bytes=len(GOOD) * 2)
    staged = staging_key(ORG, signed.file.file_id)
    objects.store(staged, GOOD)
    with pytest.raises(InvalidRequest) as caught:
        service.complete_upload(ORG, signed.file.file_id)
    assert caught.value.code == "upload_size_mismatch"
    assert caught.value.details == {"declared_bytes": len(GOOD) * 2, "received_bytes": len(GOOD)}
    # When the right bytes are PUT again / Then it completes
    objects.store(staged, GOOD * 2)
    assert service.complete_upload(ORG, signed.file.file_id).status == "processed"


def test_a_signed_upload_of_a_zip_fails_preflight_every_time(
    service: FileService, records: FakeRecords, objects: FakeObjects
) -> None:
    zipped = b"PK\x03\x04" + b"\x00" * 100
    signed = service.start_upload(ORG, filename="a.jsonl", declared_bytes=len(zipped))
    objects.store(staging_key(ORG, signed.file.file_id), zipped)
    for _ in range(2):
        with pytest.raises(FilePreflightFailed) as refused:
            service.complete_upload(ORG, signed.file.file_id)
        assert "zip" in refused.value.issue["message"]
    stored = records.items[signed.file.file_id]
    assert stored.status == "error" and stored.error is not None
    assert stored.error["code"] == "unsupported_file_type"
    assert objects.sources == {}  # the copy made while scanning is undone too


def test_declared_sizes_and_types_are_checked_when_the_upload_starts(service: FileService) -> None:
    with pytest.raises(InvalidRequest) as too_big:
        service.start_upload(ORG, filename="a.jsonl", declared_bytes=2 * 1024**3 + 1)
    assert too_big.value.code == "file_too_large"
    # a 1M-item file of 600-byte lines (~600 MB) and a 1 GB file fit the signed-URL path
    assert service.start_upload(ORG, filename="big.jsonl", declared_bytes=1024**3).file.bytes == 1024**3
    with pytest.raises(FilePreflightFailed):
        service.start_upload(ORG, filename="a.pdf", declared_bytes=10)
    with pytest.raises(InvalidRequest) as bad_name:
        service.start_upload(ORG, filename="a\x00.jsonl", declared_bytes=10)
    assert bad_name.value.code == "invalid_filename"


# -- reading -----------------------------------------------------------------------------------------


def test_files_are_found_only_by_their_org(service: FileService) -> None:
    record = upload(service, GOOD)
    assert service.file(ORG, record.file_id) == record
    with pytest.raises(Forbidden):
        service.file(OTHER_ORG, record.file_id)
    with pytest.raises(NotFound):
        service.file(ORG, "file_01jzzzzzzzzzzzzzzzzzzzzzzz")
    with pytest.raises(NotFound):
        service.file(ORG, "not-a-file-id")


def test_open_items_streams_objects_and_line_errors(service: FileService) -> None:
    record = upload(service, GOOD + b"\n{oops\n" + GOOD)
    lines = list(service.open_items(ORG, record.file_id))
    assert [n for n, _ in lines] == [1, 3, 4]
    assert isinstance(lines[1][1], LineError) and lines[2][1] == json.loads(GOOD)
    with pytest.raises(Forbidden):
        service.open_items(OTHER_ORG, record.file_id)


def test_open_items_refuses_files_that_are_not_ready_or_expired(
    service: FileService, records: FakeRecords
) -> None:
    signed = service.start_upload(ORG, filename="a.jsonl", declared_bytes=10)
    with pytest.raises(Conflict) as pending:
        service.open_items(ORG, signed.file.file_id)
    assert pending.value.code == "file_not_ready"
    done = upload(service, GOOD)
    records.items[done.file_id] = replace(done, status="expired")
    with pytest.raises(Gone):
        service.open_items(ORG, done.file_id)


# -- memory -----------------------------------------------------------------------------------------

LINE_COUNT = 50_000
LINE_TEMPLATE = (
    json.dumps(
        {
            "customer_item_id": "item-%06d",
            "operation": "responses",
            "model": "example-model",
            "input": {"messages": [{"role": "user", "content": "Question %06d: " + "lorem ipsum " * 39}]},
        }
    )
    + "\n"
).encode()
LINE_BYTES = len(LINE_TEMPLATE % (0, 0))
FILE_BYTES = LINE_COUNT * LINE_BYTES


def generated_chunks() -> Iterator[bytes]:
    """~30 MB of JSONL in 256 KiB chunks, made as it is read."""
    pending = bytearray()
    for n in range(LINE_COUNT):
        pending += LINE_TEMPLATE % (n, n)
        if len(pending) >= 256 * 1024:
            yield bytes(pending)
            pending.clear()
    yield bytes(pending)


def test_confirming_and_reading_a_30_mb_file_keeps_memory_flat(
    service: FileService, objects: FakeObjects
) -> None:
    assert FILE_BYTES > 30_000_000
    # Given a ~30 MB upload sitting in staging (generated on read, never held whole)
    signed = service.start_upload(ORG, filename="big.jsonl", declared_bytes=FILE_BYTES)
    objects.sources[staging_key(ORG, signed.file.file_id)] = (FILE_BYTES, generated_chunks)
    # When it is confirmed (every line parsed, hashed, counted) under tracemalloc
    tracemalloc.start()
    try:
        done = service.complete_upload(ORG, signed.file.file_id)
        _, confirm_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        # And read back through the streaming reader
        read = sum(1 for _, item in service.open_items(ORG, done.file_id) if isinstance(item, dict))
        _, read_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Then every line counts, and the peak stays a small fraction of the file: about two
    # read chunks (256 KiB) and one partial line, whatever the file size; confirming also
    # builds the item profile, whose duplicate-id check keeps one 8-byte hash an item
    # (domain/batches/item_ids.py: 0.4 MB here, 8 MB at 1M)
    assert done.status == "processed" and done.item_count == LINE_COUNT == read
    assert done.item_profile is not None and '"usable":true' in done.item_profile
    peaks = f"{confirm_peak / 1e6:.2f} MB confirming, {read_peak / 1e6:.2f} MB reading"
    print(f"file {FILE_BYTES / 1e6:.1f} MB: peak {peaks}")
    assert confirm_peak < 3_000_000
    assert read_peak < 3_000_000
