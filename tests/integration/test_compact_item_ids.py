"""An input file's `customer_item_id`s are checked by hash (8 B an item, domain/batches/item_ids.py);
the file is read a second time, with the exact check, only when an id may repeat (issue #18:
memory flat in N). The answers are those of the exact check on every path: quote, create
without a quote, and the Intake step."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.batch_artifacts import results_key
from batchroute.domain.batches import item_ids
from batchroute.money import Money
from batchroute.services.batches.create import BatchService
from batchroute_tools.local.provision import LocalStack
from tests.integration.principals import TestOrg
from tests.integration.test_batch_intake import (
    _assert_reservation_resolved_once,
    _create,
    _quote,
    _run,
    _upload,
)
from tests.integration.test_batch_intake import client as client  # the fixtures
from tests.integration.test_batch_intake import org as org
from tests.integration.test_batch_pipeline import _artifacts, _batch, _ledger
from tests.integration.test_file_profile import _forget_profile
from tests.integration.test_file_profile import opened as opened  # the fixture
from tests.integration.test_quotes import _item


@pytest.fixture
def colliding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every id hashes alike: the compact check answers "may repeat" for any two ids."""
    monkeypatch.setattr(item_ids, "hash", lambda _value: 7, raising=False)


def _duplicate_error(answer: Any) -> dict[str, Any]:
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "batch_preflight_failed"
    issues = error["details"]["preflight"]["errors"]
    assert [issue["code"] for issue in issues] == ["duplicate_customer_item_id"]
    return dict(issues[0])


def _upload_unprofiled(client: TestClient, org: TestOrg, items: list[dict[str, Any]]) -> str:
    """A file quotes stream (no item profile: docs/files.md, Item profile), whose ids the
    preflight checks by hash."""
    file_id = _upload(client, org, items)
    _forget_profile(file_id)
    return file_id


def test_a_clean_file_is_read_once_by_a_quote(client: TestClient, org: TestOrg, opened: list[str]) -> None:
    # Given a file of distinct ids, streamed by its quotes
    file_id = _upload_unprofiled(client, org, [_item(n) for n in range(5)])
    # When it is quoted
    _quote(client, org, file_id)
    # Then its items were read once
    assert opened == [file_id]


def test_a_repeated_id_in_a_file_is_named_with_its_line_and_first_item(
    client: TestClient, org: TestOrg, opened: list[str]
) -> None:
    # Given a file whose third item repeats the first one's id
    file_id = _upload(client, org, [_item(0), _item(1), _item(0, text="Another report.")])
    # When it is quoted
    answer = client.post("/v1/quotes/model", json={"input_file_id": file_id}, headers=org.key_headers())
    # Then the answer names the repeat exactly as the exact check does (item, line, first use)
    issue = _duplicate_error(answer)
    assert issue["path"] == "items[2].customer_item_id" and issue["line"] == 3
    assert issue["details"] == {"first_index": 0}
    assert "'item-0' is already used by items[0] (line 1)." in issue["message"]
    # And the file was read a second time to find it
    assert opened == [file_id, file_id]


def test_inline_items_keep_the_exact_check(client: TestClient, org: TestOrg) -> None:
    # Given inline items with a repeated id (no file to read again)
    items = [_item(0), _item(1), _item(1)]
    # When they are quoted
    answer = client.post("/v1/quotes/model", json={"items": items}, headers=org.key_headers())
    # Then the repeat is named at once
    issue = _duplicate_error(answer)
    assert issue["path"] == "items[2].customer_item_id" and issue["details"] == {"first_index": 1}


def test_a_hash_collision_without_a_repeat_prices_as_usual(
    client: TestClient, org: TestOrg, opened: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a clean file streamed by its quotes, quoted once with real hashes
    file_id = _upload_unprofiled(client, org, [_item(n) for n in range(4)])
    plain = _quote(client, org, file_id)
    # When it is quoted again while every id hashes alike
    monkeypatch.setattr(item_ids, "hash", lambda _value: 7, raising=False)
    collided = _quote(client, org, file_id)
    # Then the second read finds no repeat: same price, same items
    assert collided["pricing_estimate"] == plain["pricing_estimate"]
    assert opened == [file_id, file_id, file_id]


def test_create_without_a_quote_over_a_file_with_a_repeat_is_refused_and_reserves_nothing(
    client: TestClient, org: TestOrg, opened: list[str]
) -> None:
    # Given a file with a repeated id
    file_id = _upload(client, org, [_item(0), _item(0)])
    # When a batch is created over it without a quote
    answer = client.post(
        "/v1/batches",
        json={"input_file_id": file_id},
        headers={**org.key_headers(), "Idempotency-Key": "compact-ids-create-1"},
    )
    # Then 400 names the repeat, and no credit is held
    issue = _duplicate_error(answer)
    assert issue["path"] == "items[1].customer_item_id" and issue["line"] == 2
    assert _ledger().state(org.org_id).reserved == Money.zero()


@pytest.mark.usefixtures("colliding")
def test_intake_reads_a_colliding_file_twice_and_chunks_every_item_once(
    client: TestClient, org: TestOrg, stack: LocalStack, opened: list[str]
) -> None:
    # Given a batch created from a quote over a clean file, every id hashing alike
    file_id = _upload(client, org, [_item(n) for n in range(6)])
    quote = _quote(client, org, file_id)
    batch = _create(client, org, {"quote_id": quote["quote_id"], "input_file_id": file_id}, "compact-ids-2")
    opened.clear()
    # When the workflow runs (Intake reads the file, finds a possible repeat, reads it again)
    result = _run(stack, batch["id"])
    # Then the batch completes with every item once, and settles once
    assert result["status"] == "SUCCEEDED"
    done = _batch(batch["id"])
    assert done.state == "completed" and done.chunk_count == 1
    assert opened.count(file_id) == 2
    rows = _artifacts().lines(results_key(done.batch_id))
    assert sorted(r["customer_item_id"] for r in rows) == [f"item-{n}" for n in range(6)]
    _assert_reservation_resolved_once(org.org_id, done)


def test_intake_names_a_repeat_in_a_file_that_differs_from_the_quoted_one(
    client: TestClient, org: TestOrg, stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a quote over a clean file, and a batch created from it over a file with a repeat
    # (create refuses another file by its profile: taken here as a profile that did not match
    # its file would make it, to reach Intake's exact check behind that)
    good = _upload(client, org, [_item(0), _item(1)])
    bad = _upload(client, org, [_item(0), _item(0)])
    quote = _quote(client, org, good)
    monkeypatch.setattr(BatchService, "_check_quoted_file", lambda *_: None)
    batch = _create(client, org, {"quote_id": quote["quote_id"], "input_file_id": bad}, "compact-ids-3")
    # When the workflow runs
    result = _run(stack, batch["id"])
    # Then Intake fails the batch with the exact check's answer
    assert result["status"] == "FAILED"
    failed = _batch(batch["id"])
    assert failed.intake is not None
    errors = failed.intake.error.details["preflight"]["errors"]
    assert [(e["code"], e["path"], e["details"]) for e in errors] == [
        ("duplicate_customer_item_id", "items[1].customer_item_id", {"first_index": 0})
    ]
    _assert_reservation_resolved_once(org.org_id, failed)
