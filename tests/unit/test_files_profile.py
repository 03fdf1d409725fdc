"""The file checks build the item profile (docs/files.md, Item profile): on a direct upload of
a `batch_input` file and on a confirmed signed upload (the path the queued `check_file` runs
too), never for the vendor-compatible surface's files; `FileService.item_profile` answers only
a usable one, after the same readiness checks as reading the file."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from batchroute.clock import FixedClock
from batchroute.domain.batches.files import FileRecord, FileStatus, profile_key, staging_key
from batchroute.domain.batches.item_profile import ItemProfile, apart_key, profile_items
from batchroute.errors import Conflict
from batchroute.services.batches.files import FileLimits, FileService
from batchroute.services.batches.quotes import items_digest
from tests.unit.catalog_fixtures import item
from tests.unit.test_files_service import ORG, FakeObjects, FakeRecords, upload
from tests.unit.test_files_service import objects as objects  # the fixtures
from tests.unit.test_files_service import records as records
from tests.unit.test_files_service import service as service

ITEMS = [item(n) for n in range(4)]
DATA = b"".join(json.dumps(i).encode() + b"\n" for i in ITEMS)


def test_a_direct_upload_gets_its_profile(service: FileService, records: FakeRecords) -> None:
    record = upload(service, DATA, chunk=37)  # lines split across chunks
    profile = ItemProfile.from_json(record.item_profile)
    assert profile is not None and profile.usable
    assert (profile.item_count, profile.digest) == (4, items_digest(ITEMS))
    assert service.item_profile(ORG, record.file_id) == profile
    assert "item_profile" not in record.to_api()


def test_a_compat_file_gets_none(service: FileService) -> None:
    record = upload(service, DATA, purpose="batch")
    assert record.status == "processed" and record.item_profile is None
    assert service.item_profile(ORG, record.file_id) is None


def test_a_file_with_a_bad_line_or_a_duplicate_has_no_usable_profile(service: FileService) -> None:
    bad_line = upload(service, DATA + b"{not json\n")
    assert bad_line.status == "error" and service.item_profile(ORG, bad_line.file_id) is None
    assert ItemProfile.from_json(bad_line.item_profile) == ItemProfile(usable=False, reason="line_error")
    duplicate = upload(service, DATA + json.dumps(item(1)).encode() + b"\n")
    assert duplicate.status == "processed" and service.item_profile(ORG, duplicate.file_id) is None


def test_a_signed_upload_gets_its_profile_when_checked(
    service: FileService, records: FakeRecords, objects: FakeObjects
) -> None:
    signed = service.start_upload(ORG, filename="items.jsonl", declared_bytes=len(DATA))
    with pytest.raises(Conflict):  # not ready: the same answer as reading it
        service.item_profile(ORG, signed.file.file_id)
    objects.store(staging_key(ORG, signed.file.file_id), DATA)
    done = service.complete_upload(ORG, signed.file.file_id)
    profile = service.item_profile(ORG, done.file_id)
    assert profile is not None and profile.item_count == 4 and profile.digest == items_digest(ITEMS)


def test_a_file_checked_before_profiles_has_none(service: FileService, records: FakeRecords) -> None:
    record = upload(service, DATA)
    records.replace(replace(record, item_profile=None), expected_status="processed")
    assert service.item_profile(ORG, record.file_id) is None


def test_a_large_upload_checked_by_the_router_gets_its_profile(
    records: FakeRecords, objects: FakeObjects
) -> None:
    # Given a file service whose large uploads are checked by a worker (`check_file`)
    queued: list[str] = []
    limits = FileLimits(multipart_threshold_bytes=len(DATA) - 1)
    clock = FixedClock(datetime(2026, 3, 1, tzinfo=UTC))
    service = FileService(
        records, objects, clock, limits, request_check=lambda _org, file_id: queued.append(file_id)
    )
    signed = service.start_upload(ORG, filename="items.jsonl", declared_bytes=len(DATA))
    objects.store(staging_key(ORG, signed.file.file_id), DATA)
    # When it is confirmed, then checked by the router's step
    confirmed = service.complete_upload(ORG, signed.file.file_id)
    assert confirmed.status == "uploaded" and confirmed.item_profile is None and queued == [confirmed.file_id]
    checked = service.check_queued(confirmed.file_id)
    # Then the checked file carries its profile
    assert checked is not None and checked.status == "processed"
    profile = service.item_profile(ORG, checked.file_id)
    assert profile is not None and profile.digest == items_digest(ITEMS)


def test_a_profile_too_large_for_the_record_is_kept_next_to_the_file(
    records: FakeRecords, objects: FakeObjects
) -> None:
    # Given a service that keeps profiles over 200 bytes apart from the record
    clock = FixedClock(datetime(2026, 3, 1, tzinfo=UTC))
    service = FileService(records, objects, clock, FileLimits(record_profile_bytes=200))
    # When a file whose profile is larger is uploaded (directly, then by a signed URL)
    direct = upload(service, DATA)
    signed = service.start_upload(ORG, filename="items.jsonl", declared_bytes=len(DATA))
    objects.store(staging_key(ORG, signed.file.file_id), DATA)
    confirmed = service.complete_upload(ORG, signed.file.file_id)
    for record in (direct, confirmed):
        # Then the record says where it is: next to the file's bytes, named by their checksum
        assert record.sha256 is not None
        key = profile_key(ORG, record.file_id, record.sha256)
        assert record.item_profile == json.dumps({"apart": key}, separators=(",", ":"))
        stored = b"".join(objects.chunks(key)).decode()
        assert len(stored) > 200
        # And it is read from there, equal to the profile of the items
        assert service.item_profile(ORG, record.file_id) == ItemProfile.from_json(stored)
        assert service.item_profile(ORG, record.file_id) == profile_items(ITEMS)


def test_a_profile_built_again_for_a_file_reclaimed_meanwhile_is_not_kept(
    records: FakeRecords, objects: FakeObjects, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a file whose profile is kept apart from its record, made stale by a deploy
    clock = FixedClock(datetime(2026, 3, 1, tzinfo=UTC))
    service = FileService(records, objects, clock, FileLimits(record_profile_bytes=200))
    record = upload(service, DATA)
    key = apart_key(record.item_profile)
    assert key is not None
    stale = json.loads(b"".join(objects.chunks(key)))
    objects.store(key, json.dumps({**stale, "facts": "0:older-estimator"}).encode())
    # and retention reclaiming the file (its record expired, its profile deleted) while a read
    # builds the profile again
    keep = records.replace

    def reclaimed_first(new: FileRecord, *, expected_status: FileStatus) -> bool:
        records.items[new.file_id] = replace(records.items[new.file_id], status="expired")
        return keep(new, expected_status=expected_status)

    monkeypatch.setattr(records, "replace", reclaimed_first)
    # When that read finishes / Then it answered the profile, and kept nothing of it
    assert service.item_profile(ORG, record.file_id) == profile_items(ITEMS)
    assert records.items[record.file_id].status == "expired" and objects.size(key) is None
