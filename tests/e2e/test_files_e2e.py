"""Files as `make run` serves them: a direct upload over HTTP, and a signed-URL upload whose
bytes are PUT to the local moto endpoint, then confirmed."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from batchroute_client import Client

from tests.e2e.local_stack import MULTIPART_BYTES, RunningStack

pytestmark = pytest.mark.e2e

LINES = b"".join(
    (
        json.dumps(
            {
                "customer_item_id": f"q{n}",
                "operation": "responses",
                "model": "example-model",
                "input": {"messages": [{"role": "user", "content": f"Question {n} ☃"}]},
            }
        )
        + "\n"
    ).encode()
    for n in range(200)
)


def _agent_key(api: httpx.Client) -> dict[str, str]:
    address = f"files-{uuid.uuid4().hex[:10]}@example.com"
    created = api.post(
        "/v1/auth/agent-register", json={"email": address, "password": "correct horse battery"}
    )
    assert created.status_code == 200, created.text
    return {"Authorization": f"Bearer {created.json()['api_key']}"}


def test_a_small_file_is_uploaded_directly(api: httpx.Client) -> None:
    key = _agent_key(api)
    # When an agent uploads a JSONL file as multipart/form-data
    response = api.post("/v1/files", files={"file": ("items.jsonl", LINES, "application/jsonl")}, headers=key)
    # Then it is processed at once and readable
    assert response.status_code == 201, response.text
    file = response.json()["file"]
    assert file["status"] == "processed" and file["item_count"] == 200 and file["bytes"] == len(LINES)
    assert api.get(f"/v1/files/{file['id']}", headers=key).json() == {"file": file}
    # And a PDF is refused by the file_type preflight
    pdf = api.post("/v1/files", files={"file": ("scan.pdf", b"%PDF-1.7\n", "application/pdf")}, headers=key)
    assert pdf.status_code == 400
    assert pdf.json()["error"]["details"]["preflight"]["errors"][0]["category"] == "file_type"


def test_a_large_file_goes_through_a_signed_url(local_stack: RunningStack, api: httpx.Client) -> None:
    key = _agent_key(api)
    # Given a signed upload for the file's exact size
    started = api.post("/v1/files/uploads", json={"filename": "big.jsonl", "bytes": len(LINES)}, headers=key)
    assert started.status_code == 201, started.text
    file, upload = started.json()["file"], started.json()["upload"]
    assert file["status"] == "uploading"
    # Then the URL points at the local moto endpoint, so a developer can `curl -T` to it
    moto = urlsplit(local_stack.describe()["endpoint_url"])
    assert urlsplit(upload["url"]).netloc == moto.netloc
    # When the bytes are PUT there, with the headers the answer names
    put = httpx.put(upload["url"], content=LINES, headers=upload["headers"], timeout=10)
    assert put.status_code == 200, put.text
    # And the upload is confirmed (twice: the same answer)
    done = api.post(f"/v1/files/{file['id']}/complete", headers=key)
    assert done.status_code == 200, done.text
    assert done.json()["file"]["status"] == "processed"
    assert done.json()["file"]["item_count"] == 200
    assert api.post(f"/v1/files/{file['id']}/complete", headers=key).json() == done.json()
    assert api.get(f"/v1/files/{file['id']}", headers=key).json() == done.json()


def test_a_file_over_the_multipart_threshold_goes_up_in_parts_and_is_checked_by_the_router(
    api: httpx.Client, tmp_path: Path
) -> None:
    key = _agent_key(api)
    # Given a JSONL file 1 MiB over the suite stack's multipart threshold (5 MiB, S3's smallest
    # part; 64 MiB by default): two parts, of 5 MiB and 1 MiB
    path = tmp_path / "big.jsonl"
    with path.open("wb") as out:
        while out.tell() <= MULTIPART_BYTES + 1024 * 1024:
            out.write(LINES)
    size, lines = path.stat().st_size, path.stat().st_size // len(LINES) * 200
    progress: list[int] = []
    # When the Python client uploads it (parts to moto, complete, then poll: the local SQS poller
    # hands the router the `check_file` message)
    with Client(
        api_key=key["Authorization"].removeprefix("Bearer "), base_url=str(api.base_url), timeout=60
    ) as client:
        signed = client.files.start_upload(filename="big.jsonl", size=size)
        assert signed.multipart is not None and signed.multipart.part_count == 2
        client.files.cancel(signed.file.id)  # a plan given up leaves an `error` file
        assert client.files.get(signed.file.id).error == {
            "code": "upload_cancelled",
            "message": "The upload was cancelled.",
        }
        file = client.files.upload(
            path, on_progress=lambda sent, _: progress.append(sent), poll_interval=0.2, timeout=120
        )
    # Then it is processed, every line counted, and progress reached the whole size
    assert file.status == "processed" and file.item_count == lines and file.bytes == size
    assert progress[-1] == size
