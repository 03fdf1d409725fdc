"""Files over HTTP on moto: direct uploads (multipart and raw JSONL), the file_type preflight,
413 beyond the direct limit, the signed-URL upload and its confirm call, ownership."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from fastapi.testclient import TestClient

from batchroute.adapters.aws import client as aws_client
from batchroute.config import get_settings
from batchroute.domain.batches.files import JSONL_MEDIA_TYPES
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.principals import TestOrg, new_org

DIRECT_LIMIT = 256 * 1024
LINE = {"customer_item_id": "q1", "operation": "responses", "model": "m", "input": {"messages": []}}
GOOD = (json.dumps(LINE) + "\n").encode() * 3


@pytest.fixture
def client(local_aws: LocalStack) -> TestClient:
    identity_store.cache_clear()
    settings = get_settings().model_copy(update={"max_direct_upload_bytes": DIRECT_LIMIT})
    return TestClient(create_app(settings), raise_server_exceptions=False)


@pytest.fixture
def org(local_aws: LocalStack) -> TestOrg:
    identity_store.cache_clear()
    return new_org()


@pytest.fixture
def auth(org: TestOrg) -> dict[str, str]:
    return org.key_headers("member")


def stored_keys(stack: LocalStack, prefix: str = "") -> list[str]:
    listed = aws_client("s3").list_objects_v2(Bucket=stack.buckets["uploads"], Prefix=prefix)
    return [entry["Key"] for entry in listed.get("Contents", [])]


def stored_bytes(stack: LocalStack, key: str) -> bytes:
    body: bytes = aws_client("s3").get_object(Bucket=stack.buckets["uploads"], Key=key)["Body"].read()
    return body


def preflight_issue(response: Any) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "batch_preflight_failed"
    assert error["details"]["preflight"]["ok"] is False
    issue: dict[str, Any] = error["details"]["preflight"]["errors"][0]
    assert issue["category"] == "file_type" and issue["code"] == "unsupported_file_type"
    return issue


# -- direct uploads --------------------------------------------------------------------------


def test_a_multipart_upload_is_stored_and_readable(
    client: TestClient, auth: dict[str, str], org: TestOrg, local_aws: LocalStack
) -> None:
    # When a member uploads a JSONL file as multipart/form-data
    response = client.post(
        "/v1/files", files={"file": ("items.jsonl", GOOD, "application/jsonl")}, headers=auth
    )
    # Then 201 with a file_ id that is processed and counted
    assert response.status_code == 201, response.text
    file = response.json()["file"]
    assert file["id"].startswith("file_") and file["object"] == "file"
    assert file["filename"] == "items.jsonl" and file["purpose"] == "batch_input"
    assert file["status"] == "processed"
    assert (file["bytes"], file["line_count"], file["item_count"]) == (len(GOOD), 3, 3)
    assert file["errors"] == [] and file["error"] is None
    # And the bytes sit in the uploads bucket under the org's prefix
    assert stored_bytes(local_aws, f"files/{org.org_id}/{file['id']}") == GOOD
    # And any reader of the org gets the same file back
    fetched = client.get(f"/v1/files/{file['id']}", headers=org.key_headers("billing"))
    assert fetched.status_code == 200 and fetched.json() == {"file": file}


def test_the_purpose_field_may_follow_the_file_part(client: TestClient, auth: dict[str, str]) -> None:
    response = client.post(
        "/v1/files",
        files=[("file", ("a.jsonl", GOOD, "application/octet-stream")), ("purpose", (None, b"batch"))],
        headers=auth,
    )
    assert response.status_code == 201, response.text
    assert response.json()["file"]["purpose"] == "batch"


def test_a_raw_jsonl_body_is_accepted_with_an_optional_filename(
    client: TestClient, auth: dict[str, str]
) -> None:
    # When the body is the file itself, named by Content-Disposition
    named = client.post(
        "/v1/files?purpose=batch_input",
        content=GOOD,
        headers={
            **auth,
            "Content-Type": "application/jsonl",
            "Content-Disposition": 'attachment; filename="night-run.jsonl"',
        },
    )
    # And as x-ndjson without a name
    unnamed = client.post("/v1/files", content=GOOD, headers={**auth, "Content-Type": "application/x-ndjson"})
    # Then both are files
    assert named.status_code == 201, named.text
    assert named.json()["file"]["filename"] == "night-run.jsonl"
    assert unnamed.status_code == 201, unnamed.text
    assert unnamed.json()["file"]["filename"] == "upload.jsonl"
    assert unnamed.json()["file"]["content_type"] == "application/x-ndjson"


@pytest.mark.parametrize("content_type", sorted(JSONL_MEDIA_TYPES))
def test_every_jsonl_type_the_upload_takes_is_checked_as_a_file(
    client: TestClient, auth: dict[str, str], content_type: str
) -> None:
    # Given a raw upload whose second line nests deeper than a JSON body may, in each JSON Lines
    # type the upload takes (the JSON body check held some of them as a whole JSON body)
    deep = b'{"a": ' + b"[" * 80 + b"]" * 80 + b"}\n"
    response = client.post("/v1/files", content=GOOD + deep, headers={**auth, "Content-Type": content_type})
    # Then it is the same file every time: stored, that line an error of its own
    assert response.status_code == 201, response.text
    file = response.json()["file"]
    assert file["status"] == "error" and [e["code"] for e in file["errors"]] == ["invalid_json"]


def test_malformed_lines_are_stored_as_an_error_file(client: TestClient, auth: dict[str, str]) -> None:
    body = GOOD + b"{broken\n" + b"[1, 2]\n"
    response = client.post("/v1/files", content=body, headers={**auth, "Content-Type": "application/jsonl"})
    assert response.status_code == 201, response.text
    file = response.json()["file"]
    assert file["status"] == "error" and file["error"]["code"] == "invalid_lines"
    assert [(e["line"], e["code"]) for e in file["errors"]] == [(4, "invalid_json"), (5, "not_an_object")]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"%PDF-1.4\n%\xc7\xec\x8f\xa2\n" + b"\x00" * 64, "PDF"),
        (b"PK\x03\x04\x14\x00\x08\x00" + b"\x00" * 64, "zip"),
        (bytes(range(256)) * 4, "binary"),
    ],
)
def test_binary_files_fail_the_file_type_preflight_and_nothing_is_kept(
    client: TestClient, auth: dict[str, str], local_aws: LocalStack, content: bytes, says: str
) -> None:
    response = client.post(
        "/v1/files", files={"file": ("items.jsonl", content, "application/jsonl")}, headers=auth
    )
    issue = preflight_issue(response)
    assert says in issue["message"] and issue["action"]
    assert stored_keys(local_aws, "files/") == []


@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Type": "application/pdf"},
        {"Content-Type": "application/x-www-form-urlencoded"},  # curl --data-binary without -H
        {"Content-Type": "application/jsonl", "Content-Disposition": 'attachment; filename="scan.zip"'},
    ],
)
def test_a_wrong_declared_type_fails_before_the_body_is_read(
    client: TestClient, auth: dict[str, str], headers: dict[str, str]
) -> None:
    preflight_issue(client.post("/v1/files", content=GOOD, headers={**auth, **headers}))


def test_a_multipart_file_part_of_a_wrong_type_fails(client: TestClient, auth: dict[str, str]) -> None:
    preflight_issue(
        client.post("/v1/files", files={"file": ("scan.pdf", GOOD, "application/pdf")}, headers=auth)
    )


def test_a_direct_body_over_the_limit_is_413_pointing_to_the_signed_upload(
    client: TestClient, auth: dict[str, str], local_aws: LocalStack
) -> None:
    big = GOOD * (DIRECT_LIMIT // len(GOOD) + 1)
    # When the size is declared up front
    declared = client.post("/v1/files", content=big, headers={**auth, "Content-Type": "application/jsonl"})

    # And when it streams in chunks without a Content-Length
    def chunks() -> Iterator[bytes]:
        for start in range(0, len(big), 10_000):
            yield big[start : start + 10_000]

    streamed = client.post(
        "/v1/files", content=chunks(), headers={**auth, "Content-Type": "application/jsonl"}
    )
    # Then both are 413 payload_too_large, naming the signed-URL path; nothing is kept
    for response in (declared, streamed):
        assert response.status_code == 413, response.text
        error = response.json()["error"]
        assert error["code"] == "payload_too_large"
        assert error["details"] == {"max_bytes": DIRECT_LIMIT, "signed_upload_path": "/v1/files/uploads"}
    assert stored_keys(local_aws) == []


def test_bad_forms_are_400(client: TestClient, auth: dict[str, str], local_aws: LocalStack) -> None:
    # A form without a file part
    no_file = client.post(
        "/v1/files", data={"purpose": "batch_input"}, files={"other": ("x", b"1")}, headers=auth
    )
    assert no_file.status_code == 400 and no_file.json()["error"]["code"] == "file_required"
    # A multipart body without a boundary
    no_boundary = client.post(
        "/v1/files", content=b"--x\r\n", headers={**auth, "Content-Type": "multipart/form-data"}
    )
    assert no_boundary.json()["error"]["code"] == "invalid_multipart"
    # A body cut short before its closing boundary (a client or proxy gave up at a line's
    # end): refused, not stored as a whole file of the lines that came
    head = b'--xx\r\nContent-Disposition: form-data; name="file"; filename="a.jsonl"\r\n\r\n'
    for cut in (head + GOOD, b"--xx\r\nbroken"):
        sent = {**auth, "Content-Type": "multipart/form-data; boundary=xx"}
        truncated = client.post("/v1/files", content=cut, headers=sent)
        assert truncated.status_code == 400, truncated.text
        assert truncated.json()["error"]["code"] == "invalid_multipart"
    assert stored_keys(local_aws) == []
    # Two file parts
    two = client.post(
        "/v1/files", files=[("file", ("a.jsonl", GOOD)), ("file", ("b.jsonl", GOOD))], headers=auth
    )
    assert two.status_code == 400 and two.json()["error"]["code"] == "multiple_files"
    # An unknown purpose
    odd = client.post("/v1/files?purpose=fine-tune", files={"file": ("a.jsonl", GOOD)}, headers=auth)
    assert odd.status_code == 400 and odd.json()["error"]["code"] == "invalid_purpose"


# -- signed-URL uploads ------------------------------------------------------------------------


def start(client: TestClient, auth: dict[str, str], size: int, **extra: Any) -> dict[str, Any]:
    response = client.post(
        "/v1/files/uploads", json={"filename": "big.jsonl", "bytes": size, **extra}, headers=auth
    )
    assert response.status_code == 201, response.text
    started: dict[str, Any] = response.json()
    return started


def test_a_signed_upload_is_put_then_confirmed_once(
    client: TestClient, auth: dict[str, str], org: TestOrg, local_aws: LocalStack
) -> None:
    # Given a started upload
    started = start(client, auth, len(GOOD))
    file, upload = started["file"], started["upload"]
    assert file["status"] == "uploading" and file["bytes"] == len(GOOD)
    # Then its URL is a 15-minute SigV4 PUT to the file's staging key, signing the content type
    url = urlsplit(upload["url"])
    query = parse_qs(url.query)
    assert url.path.endswith(f"/staging/{org.org_id}/{file['id']}")
    assert query["X-Amz-Expires"] == ["900"] and query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert "content-type" in query["X-Amz-SignedHeaders"][0]
    assert upload["method"] == "PUT" and upload["headers"] == {"Content-Type": "application/jsonl"}
    assert upload["expires_at"] > file["created_at"]
    # When the client PUTs the bytes to the URL (moto answers in-process) and confirms
    put = requests.put(upload["url"], data=GOOD, headers=upload["headers"], timeout=10)
    assert put.status_code == 200
    done = client.post(f"/v1/files/{file['id']}/complete", headers=auth)
    # Then the file is processed, its bytes moved from staging to the file's key
    assert done.status_code == 200, done.text
    assert done.json()["file"]["status"] == "processed" and done.json()["file"]["item_count"] == 3
    assert stored_keys(local_aws) == [f"files/{org.org_id}/{file['id']}"]
    # And confirming again answers the same file
    again = client.post(f"/v1/files/{file['id']}/complete", headers=auth)
    assert again.status_code == 200 and again.json() == done.json()
    assert client.get(f"/v1/files/{file['id']}", headers=auth).json() == done.json()


def test_confirming_without_bytes_or_with_the_wrong_size_is_refused(
    client: TestClient, auth: dict[str, str], org: TestOrg, local_aws: LocalStack
) -> None:
    file = start(client, auth, len(GOOD) + 1)["file"]
    path = f"/v1/files/{file['id']}/complete"
    early = client.post(path, headers=auth)
    assert early.status_code == 409 and early.json()["error"]["code"] == "upload_incomplete"
    # When the client PUTs fewer bytes than declared (simulated with the SDK)
    aws_client("s3").put_object(
        Bucket=local_aws.buckets["uploads"], Key=f"staging/{org.org_id}/{file['id']}", Body=GOOD
    )
    mismatch = client.post(path, headers=auth)
    assert mismatch.status_code == 400
    assert mismatch.json()["error"]["code"] == "upload_size_mismatch"
    assert mismatch.json()["error"]["details"] == {
        "declared_bytes": len(GOOD) + 1,
        "received_bytes": len(GOOD),
    }
    assert client.get(f"/v1/files/{file['id']}", headers=auth).json()["file"]["status"] == "uploading"


def test_a_signed_upload_of_a_pdf_fails_the_preflight_on_confirm(
    client: TestClient, auth: dict[str, str], org: TestOrg, local_aws: LocalStack
) -> None:
    pdf = b"%PDF-1.7\n" + b"\x00" * 100
    file = start(client, auth, len(pdf))["file"]
    aws_client("s3").put_object(
        Bucket=local_aws.buckets["uploads"], Key=f"staging/{org.org_id}/{file['id']}", Body=pdf
    )
    preflight_issue(client.post(f"/v1/files/{file['id']}/complete", headers=auth))
    preflight_issue(client.post(f"/v1/files/{file['id']}/complete", headers=auth))
    assert client.get(f"/v1/files/{file['id']}", headers=auth).json()["file"]["status"] == "error"
    assert stored_keys(local_aws) == []


def test_starting_an_upload_checks_size_and_type(client: TestClient, auth: dict[str, str]) -> None:
    too_big = client.post("/v1/files/uploads", json={"filename": "a.jsonl", "bytes": 2**40}, headers=auth)
    assert too_big.status_code == 400 and too_big.json()["error"]["code"] == "file_too_large"
    preflight_issue(
        client.post(
            "/v1/files/uploads",
            json={"filename": "a.jsonl", "bytes": 10, "content_type": "application/zip"},
            headers=auth,
        )
    )
    empty = client.post("/v1/files/uploads", json={"filename": "a.jsonl", "bytes": 0}, headers=auth)
    assert empty.status_code == 400


# -- access -------------------------------------------------------------------------------------------


def test_files_belong_to_their_org_and_need_the_right_role(
    client: TestClient, auth: dict[str, str], local_aws: LocalStack
) -> None:
    made = client.post("/v1/files", files={"file": ("a.jsonl", GOOD)}, headers=auth)
    file_id = made.json()["file"]["id"]
    stranger = new_org().key_headers("owner")
    # Another org's file is forbidden, not hidden
    assert client.get(f"/v1/files/{file_id}", headers=stranger).status_code == 403
    assert client.post(f"/v1/files/{file_id}/complete", headers=stranger).status_code == 403
    # Unknown ids are 404
    unknown = client.get("/v1/files/file_01jzzzzzzzzzzzzzzzzzzzzzzz", headers=auth)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "file_not_found"
    assert client.get("/v1/files/whatever", headers=auth).status_code == 404
    # No credentials: 401; the billing role reads but may not upload
    assert client.get(f"/v1/files/{file_id}").status_code == 401
    billing = new_org().key_headers("billing")
    refused = client.post("/v1/files", files={"file": ("a.jsonl", GOOD)}, headers=billing)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    assert (
        client.post(
            "/v1/files/uploads", json={"filename": "a.jsonl", "bytes": 5}, headers=billing
        ).status_code
        == 403
    )
