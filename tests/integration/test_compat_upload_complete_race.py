"""Overlapping calls on one Uploads API upload (docs/compat.md, Uploads API): one upload
makes exactly one File, a cancelled one none. A `complete` claims the upload before it
assembles; another `complete`, or a `cancel`, while it assembles is a retryable 409
`concurrent_update`. A claim lapses after the streaming function's time-out (by the injected clock): a call
that died is taken over by the next `complete` or `cancel`, and nothing it stored is kept.

The overlap is made by a second call sent from inside the first one's assembly, once it has
read its first part (as an SDK retry after a time-out, or a cancel, would land)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.aws import client as aws_client
from batchroute.adapters.dynamo.compat import CompatStore
from batchroute.adapters.s3_objects import S3Objects
from batchroute.clock import FixedClock
from batchroute.services.compat.uploads import ASSEMBLY_CLAIM
from batchroute_tools.local.provision import LocalStack
from tests.integration.principals import TestOrg
from tests.integration.principals import clocked_client as clocked_client  # the fixtures
from tests.integration.principals import fixed_clock as fixed_clock
from tests.integration.principals import org as org
from tests.integration.test_compat_api import BASE, add_part, jsonl, row, start_upload, vendor_error

LAPSED = ASSEMBLY_CLAIM.total_seconds() + 1  # past a claim (services/compat/uploads.py)


@pytest.fixture
def auth(org: TestOrg) -> dict[str, str]:
    return org.key_headers("member")


def ready_upload(client: TestClient, auth: dict[str, str]) -> tuple[str, list[str]]:
    """A pending upload holding one part of two vendor requests: its id and part ids."""
    data = jsonl([row(0), row(1)])
    upload = start_upload(client, auth, len(data))
    part = add_part(client, auth, upload["id"], data)
    assert part.status_code == 200, part.text
    return str(upload["id"]), [str(part.json()["id"])]


def during_assembly(monkeypatch: pytest.MonkeyPatch, action: Callable[[], Any]) -> list[Any]:
    """Run `action` once, when the first `complete` has read its first part; what it answered."""
    answered: list[Any] = []
    original = S3Objects.chunks

    def chunks(self: S3Objects, key: str, **options: Any) -> Iterator[bytes]:
        yield from original(self, key, **options)
        if key.startswith("staging/") and not answered:
            answered.append(None)
            answered[0] = action()

    monkeypatch.setattr(S3Objects, "chunks", chunks)
    return answered


def complete(client: TestClient, auth: dict[str, str], upload_id: str, part_ids: list[str]) -> Any:
    return client.post(f"{BASE}/uploads/{upload_id}/complete", json={"part_ids": part_ids}, headers=auth)


def cancel(client: TestClient, auth: dict[str, str], upload_id: str) -> Any:
    return client.post(f"{BASE}/uploads/{upload_id}/cancel", headers=auth)


def listed_files(client: TestClient, auth: dict[str, str]) -> list[str]:
    response = client.get(f"{BASE}/files", headers=auth)
    assert response.status_code == 200, response.text
    return [file["id"] for file in response.json()["data"]]


def stored_files(stack: LocalStack, org: TestOrg) -> list[str]:
    """The file objects of the org in the uploads bucket."""
    listed = aws_client("s3").list_objects_v2(Bucket=stack.buckets["uploads"], Prefix=f"files/{org.org_id}/")
    return [entry["Key"].rsplit("/", 1)[-1] for entry in listed.get("Contents", [])]


def staged_parts(stack: LocalStack, org: TestOrg, upload_id: str) -> list[str]:
    listed = aws_client("s3").list_objects_v2(
        Bucket=stack.buckets["uploads"], Prefix=f"staging/{org.org_id}/{upload_id}/"
    )
    return [entry["Key"] for entry in listed.get("Contents", [])]


def retryable_conflict(response: Any) -> None:
    """409 `concurrent_update`, which the SDK retries (no `x-should-retry: false`)."""
    assert vendor_error(response, 409)["code"] == "concurrent_update"
    assert response.headers.get("x-should-retry") != "false"


def test_a_complete_while_another_assembles_is_a_retryable_409_and_one_file_is_made(
    client: TestClient,
    auth: dict[str, str],
    org: TestOrg,
    local_aws: LocalStack,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given an upload with its part, and a second complete (an SDK retry) sent while the
    # first one assembles
    upload_id, part_ids = ready_upload(client, auth)
    second = during_assembly(monkeypatch, lambda: complete(client, auth, upload_id, part_ids))
    # When the first complete finishes
    first = complete(client, auth, upload_id, part_ids)
    # Then the upload is completed with its File, the org's only one, listed and stored once
    assert first.status_code == 200, first.text
    file_id = first.json()["file"]["id"]
    assert first.json()["status"] == "completed"
    assert listed_files(client, auth) == [file_id]
    assert stored_files(local_aws, org) == [file_id]
    assert staged_parts(local_aws, org, upload_id) == []
    # And the second complete was refused, retryable: it assembled nothing
    retryable_conflict(second[0])
    # And the retry, once the first is done, answers the same upload
    assert complete(client, auth, upload_id, part_ids).json() == first.json()


def test_a_cancel_while_complete_assembles_is_a_retryable_409_and_the_upload_completes(
    client: TestClient,
    auth: dict[str, str],
    org: TestOrg,
    local_aws: LocalStack,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given an upload with its part, and a cancel sent while a complete assembles it
    upload_id, part_ids = ready_upload(client, auth)
    cancelled = during_assembly(monkeypatch, lambda: cancel(client, auth, upload_id))
    # When the complete finishes
    completed = complete(client, auth, upload_id, part_ids)
    # Then the cancel was refused, retryable, and the upload is completed with its one File
    retryable_conflict(cancelled[0])
    assert completed.status_code == 200, completed.text
    assert completed.json()["status"] == "completed"
    assert listed_files(client, auth) == [completed.json()["file"]["id"]]
    assert stored_files(local_aws, org) == [completed.json()["file"]["id"]]
    # And a cancel from then on is refused for good: the upload is completed
    assert vendor_error(cancel(client, auth, upload_id), 409)["code"] == "upload_not_pending"


def test_a_complete_whose_claim_lapsed_and_was_taken_over_keeps_no_file(
    client: TestClient,
    auth: dict[str, str],
    org: TestOrg,
    local_aws: LocalStack,
    clock: FixedClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a complete still assembling past its claim, and a second complete then
    upload_id, part_ids = ready_upload(client, auth)

    def late_retry() -> Any:
        clock.advance(seconds=LAPSED)
        return complete(client, auth, upload_id, part_ids)

    second = during_assembly(monkeypatch, late_retry)
    # When the first one finishes
    first = complete(client, auth, upload_id, part_ids)
    # Then the second took the upload over and made its File; the first answers that File
    assert second[0].status_code == 200, second[0].text
    assert first.status_code == 200, first.text
    assert first.json() == second[0].json()
    # And the first's own file is deleted: one File listed, one stored
    file_id = second[0].json()["file"]["id"]
    assert listed_files(client, auth) == [file_id]
    assert stored_files(local_aws, org) == [file_id]


def test_a_cancel_after_the_claim_lapsed_cancels_and_the_complete_keeps_no_file(
    client: TestClient,
    auth: dict[str, str],
    org: TestOrg,
    local_aws: LocalStack,
    clock: FixedClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a complete still assembling past its claim, and a cancel then
    upload_id, part_ids = ready_upload(client, auth)

    def late_cancel() -> Any:
        clock.advance(seconds=LAPSED)
        return cancel(client, auth, upload_id)

    cancelled = during_assembly(monkeypatch, late_cancel)
    # When the complete finishes
    completed = complete(client, auth, upload_id, part_ids)
    # Then the upload is cancelled, the complete says so, and no File is left of it
    assert cancelled[0].status_code == 200 and cancelled[0].json()["status"] == "cancelled"
    assert vendor_error(completed, 409)["code"] == "upload_not_pending"
    assert listed_files(client, auth) == []
    assert stored_files(local_aws, org) == []
    assert staged_parts(local_aws, org, upload_id) == []


@pytest.mark.parametrize("then", ["complete", "cancel"])
def test_a_complete_that_died_before_settling_is_taken_over_once_its_claim_lapses(
    client: TestClient,
    auth: dict[str, str],
    org: TestOrg,
    local_aws: LocalStack,
    clock: FixedClock,
    monkeypatch: pytest.MonkeyPatch,
    then: str,
) -> None:
    # Given a complete that stored its File and died before settling the upload
    upload_id, part_ids = ready_upload(client, auth)
    original = CompatStore.settle_upload
    died: list[bool] = []

    def dies_once(self: CompatStore, *args: Any, **kwargs: Any) -> Any:
        if not died:
            died.append(True)
            raise RuntimeError("the function timed out")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CompatStore, "settle_upload", dies_once)
    assert complete(client, auth, upload_id, part_ids).status_code == 500
    # When the call is retried at once / Then the upload is still claimed: a retryable 409
    retryable_conflict(complete(client, auth, upload_id, part_ids))
    retryable_conflict(cancel(client, auth, upload_id))
    # When it is retried, or cancelled, once the claim lapsed
    clock.advance(seconds=LAPSED)
    if then == "complete":
        answer = complete(client, auth, upload_id, part_ids)
        # Then one File is made, and the dead call's file is gone
        assert answer.status_code == 200, answer.text
        file_id = answer.json()["file"]["id"]
        assert listed_files(client, auth) == [file_id]
        assert stored_files(local_aws, org) == [file_id]
    else:
        answer = cancel(client, auth, upload_id)
        # Then the upload is cancelled, and nothing of the dead call's file is kept
        assert answer.status_code == 200 and answer.json()["status"] == "cancelled", answer.text
        assert listed_files(client, auth) == []
        assert stored_files(local_aws, org) == []
    assert staged_parts(local_aws, org, upload_id) == []
