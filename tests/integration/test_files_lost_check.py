"""Issue 18: a confirmed large upload is `uploaded` until the router's `check_file` message
checks it. A lost message (the send failed after the confirm, or it went to the DLQ) must
not leave it there: the confirm puts the file on the sparse `gsi2` (`FILECHECK`), and the
sweeper re-sends the check of a file `uploaded` for longer than CHECK_RESEND_SECONDS (by
the injected clock). The check is idempotent: twice ends the same, a processed file's is a
no-op. On moto, with the local route queue and its poller."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.aws import client as aws_client
from batchroute.clock import FixedClock
from batchroute.config import Settings, get_settings
from batchroute.services.batches.files import CHECK_RESEND_SECONDS, check_message
from batchroute.wiring import Wiring
from batchroute_tools.local.poller import QueuePoller
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.principals import TestOrg
from tests.integration.test_files_api import org as org  # the fixture: a fresh org
from tests.integration.test_files_multipart import MIB, jsonl, put_parts, router, start

__all__ = ["org", "router"]


@pytest.fixture
def settings(local_aws: LocalStack) -> Settings:
    identity_store.cache_clear()
    return get_settings().model_copy(
        update={"file_multipart_threshold_bytes": 5 * MIB, "file_part_bytes": 5 * MIB}
    )


@pytest.fixture
def client(settings: Settings) -> TestClient:
    return TestClient(create_app(settings), raise_server_exceptions=False)


def confirmed(client: TestClient, auth: dict[str, str], body: bytes) -> str:
    """A large upload, PUT and completed: `uploaded`, its check queued."""
    started = start(client, auth, len(body))
    file_id = str(started["file"]["id"])
    parts = put_parts(started["multipart"], body)
    done = client.post(f"/v1/files/{file_id}/complete", json={"parts": parts}, headers=auth)
    assert done.status_code == 200 and done.json()["file"]["status"] == "uploaded", done.text
    return file_id


def lose_queued_messages(router: QueuePoller) -> int:
    """What a failed send or a DLQ leaves: the message is gone, the file still `uploaded`."""
    sqs = aws_client("sqs")
    lost = 0
    while True:
        received = sqs.receive_message(QueueUrl=router.queue_url, MaxNumberOfMessages=10)
        messages = received.get("Messages", [])
        if not messages:
            return lost
        for message in messages:
            sqs.delete_message(QueueUrl=router.queue_url, ReceiptHandle=message["ReceiptHandle"])
            lost += 1


def file_item(settings: Settings, file_id: str) -> dict[str, Any]:
    item: dict[str, Any] = aws_client("dynamodb").get_item(
        TableName=settings.table_name("batches"),
        Key={"pk": {"S": f"FILE#{file_id}"}, "sk": {"S": "META"}},
        ConsistentRead=True,
    )["Item"]
    return item


def test_a_lost_check_is_resent_by_the_sweeper_and_the_file_ends_processed(
    client: TestClient, org: TestOrg, router: QueuePoller, settings: Settings
) -> None:
    auth = org.key_headers("member")
    body = jsonl(6 * MIB)
    # Given a confirmed large upload whose check message was lost
    file_id = confirmed(client, auth, body)
    assert lose_queued_messages(router) == 1
    assert file_item(settings, file_id)["gsi2pk"] == {"S": "FILECHECK"}
    clock = FixedClock(datetime.now(UTC))
    sweeper = Wiring(settings, clock).sweeper
    # When the sweeper runs before the documented age: nothing is re-sent
    clock.advance(seconds=60)
    assert sweeper.sweep()["file_checks_resent"] == []
    assert router.poll_once().received == 0
    # and batch create still answers file_not_ready
    early = client.post(
        "/v1/batches", json={"input_file_id": file_id}, headers={**auth, "Idempotency-Key": "lost-early"}
    )
    assert early.status_code == 409 and early.json()["error"]["code"] == "file_not_ready"
    # When it runs once the file has been `uploaded` longer than CHECK_RESEND_SECONDS
    clock.advance(seconds=CHECK_RESEND_SECONDS)
    assert sweeper.sweep()["file_checks_resent"] == [file_id]
    # Then the check is re-sent once (a sweep a minute later does not send it again)
    clock.advance(seconds=60)
    assert sweeper.sweep()["file_checks_resent"] == []
    # And the router's check settles the file processed, off the index
    outcome = router.poll_once()
    assert outcome.received == 1 and outcome.deleted == 1
    checked = client.get(f"/v1/files/{file_id}", headers=auth).json()["file"]
    assert checked["status"] == "processed" and checked["line_count"] == body.count(b"\n")
    assert "gsi2pk" not in file_item(settings, file_id)
    clock.advance(seconds=CHECK_RESEND_SECONDS * 2)
    assert sweeper.sweep()["file_checks_resent"] == []
    # And batch create no longer answers file_not_ready: it reads the file (whose test
    # lines are not valid items, so its preflight reports them)
    late = client.post(
        "/v1/batches", json={"input_file_id": file_id}, headers={**auth, "Idempotency-Key": "lost-late"}
    )
    assert late.status_code == 400 and late.json()["error"]["code"] == "batch_preflight_failed"


def test_a_check_delivered_twice_ends_the_same_and_a_late_one_is_a_no_op(
    client: TestClient, org: TestOrg, router: QueuePoller, settings: Settings
) -> None:
    auth = org.key_headers("member")
    body = jsonl(6 * MIB, bad_line=True)
    # Given a confirmed upload whose check is queued, and re-sent by the sweeper too
    file_id = confirmed(client, auth, body)
    clock = FixedClock(datetime.now(UTC))
    clock.advance(seconds=CHECK_RESEND_SECONDS + 1)
    assert Wiring(settings, clock).sweeper.sweep()["file_checks_resent"] == [file_id]
    # When the router takes both messages
    handled = 0
    while (outcome := router.poll_once()).received:
        assert outcome.deleted == outcome.received
        handled += outcome.received
    assert handled == 2
    # Then the file was checked as once: one settled record
    once = client.get(f"/v1/files/{file_id}", headers=auth).json()["file"]
    assert once["status"] == "error" and once["line_count"] == body.count(b"\n")
    assert once["error_count"] == 1
    item = file_item(settings, file_id)
    # And a check arriving after that (a late redelivery) changes nothing
    aws_client("sqs").send_message(QueueUrl=router.queue_url, MessageBody=check_message(file_id))
    outcome = router.poll_once()
    assert outcome.received == 1 and outcome.deleted == 1
    assert client.get(f"/v1/files/{file_id}", headers=auth).json()["file"] == once
    assert file_item(settings, file_id) == item
