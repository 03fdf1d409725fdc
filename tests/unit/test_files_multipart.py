"""Multipart signed uploads in the service, on in-memory fakes: part arithmetic and limits,
the plan, completing with parts (tampered lists refused), cancel, and checks queued off the
request path (`uploaded` until the worker's `check_queued` settles the file)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from batchroute.clock import FixedClock
from batchroute.domain.batches.files import MAX_PARTS, MIB, MIN_PART_BYTES, part_count, part_range, part_size
from batchroute.errors import Conflict, Forbidden, InvalidRequest
from batchroute.services.batches.files import FileLimits, FileService, UploadedPart
from tests.unit.test_files_service import GOOD, ORG, OTHER_ORG, FakeObjects, FakeRecords

LIMITS = FileLimits(multipart_threshold_bytes=6 * MIB, part_bytes=5 * MIB)


def test_parts_are_the_preferred_size_until_ten_thousand_would_not_hold_the_file() -> None:
    assert part_size(1024**3) == 64 * MIB and part_count(1024**3, 64 * MIB) == 16
    assert part_size(2 * 1024**3) == 64 * MIB and part_count(2 * 1024**3, 64 * MIB) == 32
    assert part_size(100, preferred=1) == MIN_PART_BYTES  # S3's 5 MiB minimum
    # 5 GiB in 5 MiB parts is 1,024 parts; 100 GB in 5 MiB parts would be 19,074: grown in whole MiB
    grown = part_size(100 * 10**9, preferred=5 * MIB)
    assert grown % MIB == 0 and part_count(100 * 10**9, grown) <= MAX_PARTS
    assert part_count(100 * 10**9, grown - MIB) > MAX_PARTS
    with pytest.raises(ValueError, match="at least one byte"):
        part_size(0)


def test_part_ranges_cover_the_file_once() -> None:
    total = 11 * MIB + 3
    ranges = [part_range(n, total, 5 * MIB) for n in range(1, part_count(total, 5 * MIB) + 1)]
    assert ranges == [(0, 5 * MIB), (5 * MIB, 10 * MIB), (10 * MIB, total)]
    for outside in (0, 4):
        with pytest.raises(ValueError, match="outside"):
            part_range(outside, total, 5 * MIB)


def make(*, queued: list[tuple[str, str]] | None = None) -> tuple[FileService, FileRecords, FakeObjects]:
    records, objects = FakeRecords(), FakeObjects()
    clock = FixedClock(datetime(2026, 3, 1, tzinfo=UTC))
    request_check = (lambda org, file_id: queued.append((org, file_id))) if queued is not None else None
    return FileService(records, objects, clock, LIMITS, request_check=request_check), records, objects


FileRecords = FakeRecords
BODY = GOOD * (11 * MIB // len(GOOD) + 1)


def send(objects: FakeObjects, service: FileService, file_id: str, upload_id: str) -> list[UploadedPart]:
    plan = service.part_urls(ORG, file_id)
    return [
        UploadedPart(p.number, objects.put_part(upload_id, p.number, BODY[p.start : p.end]))
        for p in plan.parts
    ]


def test_a_large_upload_gets_a_plan_and_completes_from_its_parts() -> None:
    service, records, objects = make()
    started = service.start_upload(ORG, filename="big.jsonl", declared_bytes=len(BODY))
    plan = started.multipart
    assert plan is not None and plan.part_count == 3 and plan.part_bytes == 5 * MIB
    assert [(p.start, p.end) for p in plan.parts][-1] == (10 * MIB, len(BODY))
    record = records.items[started.file.file_id]
    # the id is kept on the record (the complete call uses it, never one the client sends)
    assert record.upload_id == "up1" and "up1" not in str(started.to_api()["file"])
    parts = send(objects, service, record.file_id, "up1")
    done = service.complete_upload(ORG, record.file_id, parts)
    # no checker wired: checked in the call, as before
    assert done.status == "processed" and done.line_count == BODY.count(b"\n")
    assert objects.aborted_uploads == ["up1"]  # the finished upload is gone: abort is a no-op


def test_tampered_or_incomplete_part_lists_are_refused() -> None:
    service, records, objects = make()
    file_id = service.start_upload(ORG, filename="big.jsonl", declared_bytes=len(BODY)).file.file_id
    parts = send(objects, service, file_id, "up1")
    tampered = [parts[0], UploadedPart(2, '"feed"'), parts[2]]
    for wrong in (tampered, parts[:2], [parts[1], parts[0], parts[2]], [*parts, UploadedPart(4, '"x"')]):
        with pytest.raises(InvalidRequest) as refused:
            service.complete_upload(ORG, file_id, wrong)
        assert refused.value.code == "invalid_parts"
    assert records.items[file_id].status == "uploading"
    with pytest.raises(Forbidden):
        service.complete_upload(OTHER_ORG, file_id, parts)
    with pytest.raises(InvalidRequest) as bad_numbers:
        service.part_urls(ORG, file_id, [0, 4])
    assert bad_numbers.value.code == "invalid_parts"


def test_the_size_limit_holds_and_small_uploads_are_one_put() -> None:
    service, _, _ = make()
    with pytest.raises(InvalidRequest) as too_big:
        service.start_upload(ORG, filename="a.jsonl", declared_bytes=2 * 1024**3 + 1)
    assert too_big.value.code == "file_too_large"
    small = service.start_upload(ORG, filename="a.jsonl", declared_bytes=6 * MIB)
    assert small.multipart is None and "multipart" not in small.to_api()
    with pytest.raises(InvalidRequest) as single:
        service.part_urls(ORG, small.file.file_id)
    assert single.value.code == "not_multipart"


def test_large_uploads_are_checked_off_the_request_path() -> None:
    queued: list[tuple[str, str]] = []
    service, records, objects = make(queued=queued)
    file_id = service.start_upload(ORG, filename="big.jsonl", declared_bytes=len(BODY)).file.file_id
    parts = send(objects, service, file_id, "up1")
    # a check message for an upload not confirmed yet does nothing
    assert service.check_queued(file_id).status == "uploading"  # type: ignore[union-attr]
    # confirm answers `uploaded` and queues the check; nothing was read
    answered = service.complete_upload(ORG, file_id, parts)
    assert answered.status == "uploaded" and answered.line_count == 0 and queued == [(ORG, file_id)]
    assert records.ttls[file_id] is None  # no longer an abandoned upload
    with pytest.raises(Conflict) as not_ready:
        service.file_ready(ORG, file_id)
    assert not_ready.value.code == "file_not_ready"
    # confirming again re-queues (a lost message), still `uploaded`
    assert service.complete_upload(ORG, file_id, parts).status == "uploaded" and len(queued) == 2
    # the worker settles it; a repeated message is harmless
    assert service.check_queued(file_id).status == "processed"  # type: ignore[union-attr]
    assert service.check_queued(file_id).status == "processed"  # type: ignore[union-attr]
    assert service.check_queued("file_unknown") is None
    assert service.file_ready(ORG, file_id).item_count == BODY.count(b"\n")


def test_a_refused_file_type_settles_error_on_the_worker() -> None:
    queued: list[tuple[str, str]] = []
    service, _, objects = make(queued=queued)
    body = b"%PDF-1.7" + b"\x00" * (7 * MIB)
    file_id = service.start_upload(ORG, filename="big.jsonl", declared_bytes=len(body)).file.file_id
    objects.store(f"staging/{ORG}/{file_id}", body)  # one PUT instead of parts
    assert service.complete_upload(ORG, file_id).status == "uploaded"
    settled = service.check_queued(file_id)
    assert settled is not None and settled.status == "error"
    assert settled.error is not None and settled.error["code"] == "unsupported_file_type"


def test_cancel_aborts_the_parts_and_ends_the_file() -> None:
    service, _, objects = make()
    file_id = service.start_upload(ORG, filename="big.jsonl", declared_bytes=len(BODY)).file.file_id
    send(objects, service, file_id, "up1")
    cancelled = service.cancel_upload(ORG, file_id)
    assert cancelled.status == "error" and cancelled.error == {
        "code": "upload_cancelled",
        "message": "The upload was cancelled.",
    }
    assert "up1" not in objects.multipart and service.cancel_upload(ORG, file_id) == cancelled
    with pytest.raises(Conflict):
        service.part_urls(ORG, file_id)
