"""Issue 18, point 1: a batch created over an input file WITHOUT a quote answers without
reading the file when the file's checks left a usable item profile (docs/files.md, Item
profile): it opens no item stream, reserves what the streamed path reserves, and the
workflow's Intake step still reads the file and finds the priced count and digest. A file
checked before profiles existed (no profile on its record) is priced by streaming, as before.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.files import FileStore
from batchroute.config import get_settings
from batchroute.domain.batches.files import profile_key
from batchroute.domain.batches.item_profile import ItemProfile
from batchroute.money import Money
from batchroute.services.batches.files import FileService
from batchroute_tools.local.provision import LocalStack
from functions.api.deps import get_clock, get_wiring
from tests.integration.batch_pipeline_support import GPT, run_until_done
from tests.integration.principals import TestOrg
from tests.integration.test_batch_intake import _create, _upload
from tests.integration.test_batch_intake import client as client  # the fixtures
from tests.integration.test_batch_intake import org as org
from tests.integration.test_batch_pipeline import _batch, _ledger
from tests.integration.test_quotes import _item


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files whose items were opened (FileService.open_items), in order."""
    seen: list[str] = []
    real_open = FileService.open_items

    def counting_open(self: FileService, org_id: str, file_id: str) -> Any:
        seen.append(file_id)
        return real_open(self, org_id, file_id)

    monkeypatch.setattr(FileService, "open_items", counting_open)
    return seen


def _items() -> list[dict[str, Any]]:
    long_text = "Summarize the quarterly report in detail. " * 40
    return [_item(n) for n in range(6)] + [_item(6, GPT), _item(7, text=long_text)]


def _store() -> FileStore:
    return FileStore(get_settings().table_name("batches"))


def _forget_profile(file_id: str) -> None:
    """The file as a file checked before profiles existed: no profile on its record."""
    record = _store().get(file_id)
    assert record is not None and record.item_profile is not None
    assert _store().replace(replace(record, item_profile=None), expected_status="processed")


def _ageless(value: Any) -> Any:
    """`value` without the lanes' heartbeat ages (seconds on the system clock between calls)."""
    if isinstance(value, dict):
        return {k: _ageless(v) for k, v in value.items() if k != "heartbeat_age_seconds"}
    if isinstance(value, list):
        return [_ageless(v) for v in value]
    return value


def _run_and_check_settled(stack: LocalStack, org: TestOrg, batch_id: str) -> None:
    arn = _batch(batch_id).execution_arn
    assert arn is not None
    assert run_until_done(stack, arn, budget_seconds=60)["status"] == "SUCCEEDED"
    done = _batch(batch_id)
    assert done.state == "completed" and done.intake is not None and done.intake.done is True
    reservation = _ledger().reservation(org.org_id, str(done.reservation_id))
    assert reservation is not None and reservation.status == "settled"
    assert reservation.charged + reservation.released == reservation.amount


def test_a_direct_upload_is_profiled_and_the_file_object_does_not_show_it(
    client: TestClient, org: TestOrg
) -> None:
    file_id = _upload(client, org, _items())
    record = _store().get(file_id)
    assert record is not None
    profile = ItemProfile.from_json(record.item_profile)
    assert profile is not None and profile.usable and profile.item_count == 8
    assert {m.model for m in profile.models} == {_item(0)["model"], GPT}
    shown = client.get(f"/v1/files/{file_id}", headers=org.key_headers()).json()
    assert "item_profile" not in json.dumps(shown)


def test_create_without_a_quote_over_a_profiled_file_reads_no_item_and_reserves_the_streamed_amount(
    client: TestClient, org: TestOrg, stack: LocalStack, opened: list[str]
) -> None:
    # Given two uploads of the same items; the second as if checked before profiles existed
    profiled = _upload(client, org, _items())
    unprofiled = _upload(client, org, _items())
    _forget_profile(unprofiled)
    # When a batch is created over each without a quote
    fast = _create(client, org, {"input_file_id": profiled}, "profile-create-1")
    assert opened == []  # the profiled file: no item stream opened
    slow = _create(client, org, {"input_file_id": unprofiled}, "profile-create-2")
    assert opened == [unprofiled]  # the file without a profile: streamed, as before
    # Then both reserve the same amount for the same count and digest
    fast_record, slow_record = _batch(fast["id"]), _batch(slow["id"])
    assert fast_record.reserved_micros == slow_record.reserved_micros > 0
    assert fast_record.intake is not None and slow_record.intake is not None
    assert fast_record.intake.digest == slow_record.intake.digest
    assert fast_record.intake.item_count == slow_record.intake.item_count == 8
    assert _ageless(fast_record.plan) == _ageless(slow_record.plan)
    assert _ledger().state(org.org_id).reserved == Money(
        fast_record.reserved_micros + slow_record.reserved_micros
    )
    # And the workflow's Intake step reads each file, finds the priced digest, and both complete
    _run_and_check_settled(stack, org, fast["id"])
    _run_and_check_settled(stack, org, slow["id"])


def test_a_quote_over_a_profiled_file_reads_no_item_and_equals_the_streamed_quote(
    client: TestClient, org: TestOrg, opened: list[str]
) -> None:
    profiled = _upload(client, org, _items())
    unprofiled = _upload(client, org, _items())
    _forget_profile(unprofiled)
    headers = org.key_headers()
    fast = client.post("/v1/quotes/model", json={"input_file_id": profiled}, headers=headers)
    assert fast.status_code == 200, fast.text
    assert opened == []
    slow = client.post("/v1/quotes/model", json={"input_file_id": unprofiled}, headers=headers)
    assert slow.status_code == 200, slow.text
    assert opened == [unprofiled]
    same = ("item_count", "pricing_estimate", "quote_lanes", "preflight", "customer_explanation")
    assert _ageless({k: fast.json()[k] for k in same}) == _ageless({k: slow.json()[k] for k in same})


def test_a_profile_made_under_another_estimator_is_built_again_once_and_kept(
    client: TestClient, org: TestOrg, opened: list[str]
) -> None:
    # Given a profiled file whose profile a deploy made stale (another item-facts revision)
    file_id = _upload(client, org, _items())
    record = _store().get(file_id)
    assert record is not None and record.item_profile is not None
    fresh = record.item_profile
    stale = json.dumps({**json.loads(fresh), "facts": "0:older-estimator"})
    assert ItemProfile.from_json(stale) is None
    assert _store().replace(replace(record, item_profile=stale), expected_status="processed")
    headers = org.key_headers()
    # When it is quoted, twice
    first = client.post("/v1/quotes/model", json={"input_file_id": file_id}, headers=headers)
    second = client.post("/v1/quotes/model", json={"input_file_id": file_id}, headers=headers)
    assert first.status_code == second.status_code == 200, first.text
    # Then the first quote built the profile again from the file and kept it (as its check
    # made it), so neither quote streamed the items through the preflight
    kept = _store().get(file_id)
    assert kept is not None and kept.item_profile == fresh
    assert opened == []
    same = ("item_count", "pricing_estimate", "quote_lanes")
    assert _ageless({k: first.json()[k] for k in same}) == _ageless({k: second.json()[k] for k in same})


def test_a_profiled_file_with_an_item_no_lane_fits_answers_the_streamed_400(
    client: TestClient, org: TestOrg, opened: list[str]
) -> None:
    # Given a clean file (profiled) with one item larger than every context window
    huge = _item(2, text="word " * 100_000)  # ~167k tokens, in a line under 1 MiB
    file_id = _upload(client, org, [_item(0), _item(1), huge])
    record = _store().get(file_id)
    assert record is not None and '"usable":true' in (record.item_profile or "")
    # When a batch is created over it without a quote
    answer = client.post(
        "/v1/batches",
        json={"input_file_id": file_id},
        headers={**org.key_headers(), "Idempotency-Key": "profile-create-huge"},
    )
    # Then the file was streamed and the answer names the item and its line, as before
    assert opened == [file_id]
    assert answer.status_code == 400, answer.text
    errors = answer.json()["error"]["details"]["preflight"]["errors"]
    assert [(e["code"], e["path"], e.get("line")) for e in errors] == [
        ("preflight_context_window_exceeded", "items[2].input", 3)
    ]


def test_a_body_preset_sends_the_quote_down_the_streamed_path(
    client: TestClient, org: TestOrg, opened: list[str]
) -> None:
    # Given a profiled file, and a preset that fills every item (a system prompt)
    file_id = _upload(client, org, _items())
    preset = {
        "name": "house-style",
        "model": _item(0)["model"],
        "operation": "responses",
        "system_prompt": "Answer in one short line.",
    }
    made = client.post("/v1/presets", json=preset, headers=org.key_headers())
    assert made.status_code == 201, made.text
    # When the file is quoted naming the preset for the whole body
    headers = org.key_headers()
    answer = client.post(
        "/v1/quotes/model", json={"input_file_id": file_id, "preset": "house-style"}, headers=headers
    )
    # Then the items were read (the preset rewrites them), and priced with the system prompt
    assert answer.status_code == 200, answer.text
    assert opened == [file_id]
    plain = client.post("/v1/quotes/model", json={"input_file_id": file_id}, headers=headers).json()
    assert opened == [file_id]
    assert answer.json()["pricing_estimate"] != plain["pricing_estimate"]


def test_a_profile_kept_apart_from_the_record_stands_in_the_same_way(
    client: TestClient, org: TestOrg, monkeypatch: pytest.MonkeyPatch, opened: list[str]
) -> None:
    # Given one file whose profile is on its record, and one whose profile the checks kept
    # as an S3 object next to the file (as a profile over 16 KiB is)
    on_record = _upload(client, org, _items())
    files = get_wiring(get_settings(), get_clock()).files  # the API's own FileService
    monkeypatch.setattr(files, "limits", replace(files.limits, record_profile_bytes=100))
    apart = _upload(client, org, _items())
    record = _store().get(apart)
    assert record is not None and record.sha256 is not None
    assert record.item_profile == json.dumps(
        {"apart": profile_key(org.org_id, apart, record.sha256)}, separators=(",", ":")
    )
    # When a batch is created over each without a quote
    first = _create(client, org, {"input_file_id": on_record}, "profile-apart-1")
    second = _create(client, org, {"input_file_id": apart}, "profile-apart-2")
    # Then neither read an item, and both reserved the same for the same count and digest
    assert opened == []
    one, other = _batch(first["id"]), _batch(second["id"])
    assert one.reserved_micros == other.reserved_micros > 0
    assert one.intake is not None and other.intake is not None
    assert (one.intake.item_count, one.intake.digest) == (
        other.intake.item_count,
        other.intake.digest,
    )
