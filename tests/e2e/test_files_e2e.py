"""Files as `make run` serves them: a direct upload over HTTP, and a signed-URL upload whose
bytes are PUT to the local moto endpoint, then confirmed."""

from __future__ import annotations

import json
import uuid
from urllib.parse import urlsplit

import httpx
import pytest

from tests.e2e.local_stack import RunningStack

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
