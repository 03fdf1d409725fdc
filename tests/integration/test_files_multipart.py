"""Issue 18: a large signed upload goes up as an S3 multipart upload (signed UploadPart URLs),
is completed with its parts' numbers and ETags, and is checked off the request path by the
router (a `check_file` message on the route queue); until then it is `uploaded` and batch
create answers 409 `file_not_ready`. On moto, with 5 MiB parts (S3's minimum)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
import requests
from fastapi.testclient import TestClient

from batchroute.adapters.aws import client as aws_client
from batchroute.config import get_settings
from batchroute_tools.local.poller import QueuePoller
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.batch_pipeline_support import pollers
from tests.integration.principals import TestOrg, new_org
from tests.integration.test_files_api import org as org  # the fixture: a fresh org

MIB = 1024 * 1024
LINE = {"customer_item_id": "q", "operation": "responses", "model": "m", "input": {"messages": []}}


def jsonl(size_at_least: int, *, bad_line: bool = False) -> bytes:
    line = (json.dumps(LINE) + "\n").encode()
    body = line * (size_at_least // len(line) + 1)
    return body + b"not json\n" if bad_line else body


@pytest.fixture
def client(local_aws: LocalStack) -> TestClient:
    identity_store.cache_clear()
    settings = get_settings().model_copy(
        update={"file_multipart_threshold_bytes": 5 * MIB, "file_part_bytes": 5 * MIB}
    )
    return TestClient(create_app(settings), raise_server_exceptions=False)


@pytest.fixture
def router(local_aws: LocalStack) -> QueuePoller:
    (route,) = [p for p in pollers(local_aws) if p.queue.key == "route"]
    return route


def start(client: TestClient, auth: dict[str, str], size: int) -> dict[str, Any]:
    answer = client.post("/v1/files/uploads", json={"filename": "big.jsonl", "bytes": size}, headers=auth)
    assert answer.status_code == 201, answer.text
    started: dict[str, Any] = answer.json()
    return started


def put_parts(plan: dict[str, Any], body: bytes) -> list[dict[str, Any]]:
    parts = []
    for part in plan["parts"]:
        chunk = body[part["offset"] : part["offset"] + part["bytes"]]
        put = requests.put(part["url"], data=chunk, timeout=30)
        assert put.status_code == 200, put.text
        parts.append({"part_number": part["part_number"], "etag": put.headers["ETag"]})
    return parts


def staged_keys(stack: LocalStack, org: TestOrg) -> list[str]:
    listed = aws_client("s3").list_objects_v2(
        Bucket=stack.buckets["uploads"], Prefix=f"staging/{org.org_id}/"
    )
    return [entry["Key"] for entry in listed.get("Contents", [])]


def test_a_multipart_upload_is_completed_then_checked_by_the_router(
    client: TestClient, org: TestOrg, router: QueuePoller, local_aws: LocalStack
) -> None:
    auth = org.key_headers("member")
    body = jsonl(11 * MIB)
    # Given a started upload over the threshold: a plan of 3 parts of 5 MiB, with signed URLs
    started = start(client, auth, len(body))
    file, plan = started["file"], started["multipart"]
    assert file["status"] == "uploading" and "upload_id" not in json.dumps(started)
    assert plan["part_bytes"] == 5 * MIB and plan["part_count"] == 3
    assert [p["part_number"] for p in plan["parts"]] == [1, 2, 3]
    assert [p["bytes"] for p in plan["parts"]] == [5 * MIB, 5 * MIB, len(body) - 10 * MIB]
    assert all("uploadId=" in p["url"] and "X-Amz-Signature=" in p["url"] for p in plan["parts"])
    # And fresh URLs for one part can be asked for
    again = client.post(f"/v1/files/{file['id']}/parts", json={"part_numbers": [2]}, headers=auth)
    assert again.status_code == 200 and [p["part_number"] for p in again.json()["multipart"]["parts"]] == [2]
    # When the parts are PUT and the upload completed with their ETags
    parts = put_parts(plan, body)
    done = client.post(f"/v1/files/{file['id']}/complete", json={"parts": parts}, headers=auth)
    # Then the answer comes before the checks: `uploaded`, nothing counted yet
    assert done.status_code == 200, done.text
    assert done.json()["file"]["status"] == "uploaded" and done.json()["file"]["line_count"] == 0
    # And a batch over it is refused until it is processed
    early = client.post(
        "/v1/batches", json={"input_file_id": file["id"]}, headers={**auth, "Idempotency-Key": "mp-early"}
    )
    assert early.status_code == 409 and early.json()["error"]["code"] == "file_not_ready", early.text
    # When the router takes the queued check
    outcome = router.poll_once()
    assert outcome.received == 1 and outcome.deleted == 1
    # Then the file is processed, counted, and its bytes moved out of staging
    checked = client.get(f"/v1/files/{file['id']}", headers=auth).json()["file"]
    assert checked["status"] == "processed" and checked["line_count"] == body.count(b"\n")
    assert checked["bytes"] == len(body) and checked["sha256"]
    assert staged_keys(local_aws, org) == []
    # And completing again answers the processed file
    repeat = client.post(f"/v1/files/{file['id']}/complete", json={"parts": parts}, headers=auth)
    assert repeat.status_code == 200 and repeat.json()["file"] == checked


def test_a_file_with_a_bad_line_ends_error_after_the_check(
    client: TestClient, org: TestOrg, router: QueuePoller
) -> None:
    auth = org.key_headers("member")
    body = jsonl(6 * MIB, bad_line=True)
    started = start(client, auth, len(body))
    parts = put_parts(started["multipart"], body)
    done = client.post(f"/v1/files/{started['file']['id']}/complete", json={"parts": parts}, headers=auth)
    assert done.json()["file"]["status"] == "uploaded"
    router.poll_once()
    checked = client.get(f"/v1/files/{started['file']['id']}", headers=auth).json()["file"]
    assert checked["status"] == "error" and checked["error"]["code"] == "invalid_lines"
    assert checked["error_count"] == 1 and checked["errors"][0]["code"] == "invalid_json"


def test_a_tampered_part_list_is_refused_and_the_upload_stays_open(
    client: TestClient, org: TestOrg, router: QueuePoller
) -> None:
    auth = org.key_headers("member")
    body = jsonl(6 * MIB)
    started = start(client, auth, len(body))
    file_id = started["file"]["id"]
    parts = put_parts(started["multipart"], body)
    path = f"/v1/files/{file_id}/complete"
    # a wrong ETag, a missing part, parts out of order: 400 invalid_parts
    wrong_etag = [parts[0], {**parts[1], "etag": '"0123456789abcdef0123456789abcdef"'}]
    for tampered in (wrong_etag, parts[:1], list(reversed(parts))):
        answer = client.post(path, json={"parts": tampered}, headers=auth)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_parts", answer.text
    assert client.get(f"/v1/files/{file_id}", headers=auth).json()["file"]["status"] == "uploading"
    # the true list still completes it
    assert client.post(path, json={"parts": parts}, headers=auth).json()["file"]["status"] == "uploaded"


def test_another_org_can_neither_complete_sign_nor_cancel(client: TestClient, org: TestOrg) -> None:
    auth = org.key_headers("member")
    body = jsonl(6 * MIB)
    started = start(client, auth, len(body))
    file_id = started["file"]["id"]
    parts = put_parts(started["multipart"], body)
    stranger = new_org().key_headers("member")
    assert (
        client.post(f"/v1/files/{file_id}/complete", json={"parts": parts}, headers=stranger).status_code
        == 403
    )
    assert client.post(f"/v1/files/{file_id}/parts", headers=stranger).status_code == 403
    assert client.post(f"/v1/files/{file_id}/cancel", headers=stranger).status_code == 403
    assert client.get(f"/v1/files/{file_id}", headers=auth).json()["file"]["status"] == "uploading"


def test_cancel_aborts_the_multipart_upload(client: TestClient, org: TestOrg, local_aws: LocalStack) -> None:
    auth = org.key_headers("member")
    body = jsonl(6 * MIB)
    started = start(client, auth, len(body))
    file_id = started["file"]["id"]
    put_parts(started["multipart"], body)
    s3 = boto3.client("s3", region_name=local_aws.region)
    bucket = local_aws.buckets["uploads"]
    key = f"staging/{org.org_id}/{file_id}"
    assert [u["Key"] for u in s3.list_multipart_uploads(Bucket=bucket, Prefix=key).get("Uploads", [])] == [
        key
    ]
    cancelled = client.post(f"/v1/files/{file_id}/cancel", headers=auth)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["file"]["status"] == "error"
    assert cancelled.json()["file"]["error"]["code"] == "upload_cancelled"
    assert s3.list_multipart_uploads(Bucket=bucket, Prefix=key).get("Uploads", []) == []
    # cancelling again answers the same; completing or signing parts is over
    assert client.post(f"/v1/files/{file_id}/cancel", headers=auth).json() == cancelled.json()
    assert client.post(f"/v1/files/{file_id}/parts", headers=auth).status_code == 409


def test_small_signed_uploads_are_still_checked_in_the_confirm_call(client: TestClient, org: TestOrg) -> None:
    auth = org.key_headers("member")
    body = jsonl(64 * 1024)
    started = start(client, auth, len(body))
    assert started["multipart"] is None
    put = requests.put(started["upload"]["url"], data=body, headers=started["upload"]["headers"], timeout=10)
    assert put.status_code == 200
    done = client.post(f"/v1/files/{started['file']['id']}/complete", headers=auth)
    assert done.status_code == 200 and done.json()["file"]["status"] == "processed"
    # a single PUT's file cannot be completed with parts
    other = start(client, auth, len(body))
    refused = client.post(
        f"/v1/files/{other['file']['id']}/complete",
        json={"parts": [{"part_number": 1, "etag": '"x"'}]},
        headers=auth,
    )
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "not_multipart"
