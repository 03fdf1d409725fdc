"""A create whose first answer is lost, through the client's generic `request` and its upload
calls, against the real app in-process (moto): the app acts on the first POST, its answer never
arrives (a read time-out, a gateway's 502), and the client decides whether to repeat it. A
compat batch create (`POST /v1/compat/v1/batches`, which honours an Idempotency-Key) is
repeated with the key the client generated, so the service replays the first batch: one batch,
one credit reservation. A direct upload (`POST /v1/files`, no idempotency) is not repeated."""

from __future__ import annotations

import json

import httpx
import pytest
from batchroute_client import APIConnectionError, Client, InternalServerError
from fastapi.testclient import TestClient

from tests.integration.principals import TestOrg
from tests.integration.test_client_api import http as http  # the fixtures
from tests.integration.test_client_api import org as org
from tests.integration.test_quotes import LLAMA, _item


class LoseFirstAnswer(httpx.BaseTransport):
    """Forwards every request to the app; the answer to the first POST to `path` is lost
    after the app has acted on it, as `lost` says: a read time-out or a gateway's 502. Records
    the Idempotency-Key of every POST to `path`."""

    def __init__(self, app: httpx.BaseTransport, path: str, lost: str) -> None:
        self.app, self.path, self.lost = app, path, lost
        self.keys: list[str | None] = []
        self.answers: list[httpx.Response] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.app.handle_request(request)
        body = response.read()
        answer = httpx.Response(response.status_code, headers=response.headers, content=body)
        if request.method != "POST" or request.url.path != self.path:
            return answer
        self.keys.append(request.headers.get("idempotency-key"))
        self.answers.append(answer)
        if len(self.keys) == 1 and self.lost == "timeout":
            raise httpx.ReadTimeout("the answer was lost", request=request)
        if len(self.keys) == 1:
            return httpx.Response(502, text="<html>Bad Gateway</html>", headers={"content-type": "text/html"})
        return answer


def _lossy(http: TestClient, org: TestOrg, path: str, lost: str) -> tuple[Client, LoseFirstAnswer]:
    transport = LoseFirstAnswer(http._transport, path, lost)
    lossy = httpx.Client(transport=transport, base_url="http://testserver")
    return Client(api_key=org.api_key(), http_client=lossy, sleep=lambda _: None), transport


def _vendor_input_file(http: TestClient, org: TestOrg) -> str:
    row = {
        "custom_id": "req-0",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": LLAMA, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16},
    }
    uploaded = http.post(
        "/v1/compat/v1/files",
        files={"file": ("input.jsonl", json.dumps(row).encode() + b"\n", "application/jsonl")},
        data={"purpose": "batch"},
        headers=org.key_headers(),
    )
    assert uploaded.status_code == 200, uploaded.text
    return str(uploaded.json()["id"])


def _reserved(http: TestClient, org: TestOrg) -> str:
    return str(http.get("/v1/usage", headers=org.key_headers()).json()["reserved"]["amount"])


@pytest.mark.parametrize("lost", ["timeout", "502"])
def test_a_compat_batch_create_through_request_whose_answer_was_lost_makes_one_batch_and_one_reservation(
    http: TestClient, org: TestOrg, lost: str
) -> None:
    # Given a vendor input file and a client whose first compat create answer is lost
    file_id = _vendor_input_file(http, org)
    sdk, transport = _lossy(http, org, "/v1/compat/v1/batches", lost)
    body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    created = sdk.request("POST", "/v1/compat/v1/batches", json=body)
    # Then the organization has one batch, the one the first (lost) attempt created
    listed = http.get("/v1/batches", headers=org.key_headers()).json()["data"]
    assert [b["id"] for b in listed] == [created["id"]] == [transport.answers[0].json()["id"]]
    # And the retry carried the same generated key, so the service replayed the first answer
    assert len(transport.keys) == 2 and transport.keys[0] == transport.keys[1]
    assert transport.keys[0] is not None and transport.keys[0].startswith("br-")
    assert transport.answers[1].json()["id"] == created["id"]
    # And one reservation: the same key once more reserves nothing more
    one = _reserved(http, org)
    sdk.request("POST", "/v1/compat/v1/batches", json=body, headers={"Idempotency-Key": transport.keys[0]})
    assert _reserved(http, org) == one


@pytest.mark.parametrize("lost", ["timeout", "502"])
def test_a_direct_upload_whose_answer_was_lost_is_not_repeated(
    http: TestClient, org: TestOrg, lost: str
) -> None:
    # Given a client whose first direct upload answer is lost
    sdk, transport = _lossy(http, org, "/v1/files", lost)
    with pytest.raises((APIConnectionError, InternalServerError)):
        sdk.files.create((json.dumps(_item(0)) + "\n").encode(), purpose="batch_input")
    # Then the upload reached the app once: no second file was stored
    assert len(transport.answers) == 1 and transport.answers[0].status_code == 201


def test_a_signed_upload_start_whose_answer_was_lost_is_not_repeated(http: TestClient, org: TestOrg) -> None:
    # Given a client whose first signed-upload start answer is lost
    sdk, transport = _lossy(http, org, "/v1/files/uploads", "timeout")
    with pytest.raises(APIConnectionError):
        sdk.files.start_upload(filename="a.jsonl", size=100)
    # Then the start reached the app once: no second file record was made
    assert len(transport.answers) == 1 and transport.answers[0].status_code == 201
