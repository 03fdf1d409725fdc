"""The vendor-compatible surface over HTTP on moto: input rows become native items, batches
are ordinary batches (same credits, native API) run by the real workflow, the vendor's
Batch statuses and output lines, errors in the vendor's shape, retention, and the Uploads API."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import openai
import pytest
import yaml
from fastapi.testclient import TestClient
from openai import OpenAI
from openai.types import Batch as OpenAIBatch
from openai.types.responses import Response

from batchroute.adapters.aws import client as aws_client
from batchroute.adapters.batch_artifacts import results_key
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.compat import CompatStore
from batchroute.adapters.dynamo.files import FileStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.clock import SystemClock
from batchroute.config import get_settings
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.compat.batches import BodyFormat, OutputFile
from batchroute.money import Money
from batchroute.services.compat.files import CompatFiles
from batchroute.wiring import wiring_for
from batchroute_tools.contracts.openai import answer_violations
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.batch_pipeline_support import heartbeat_all_lanes, run_until_done
from tests.integration.principals import TestOrg, new_org

CHAT = "/v1/chat/completions"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"  # sync lanes: runs within the test
BGE = "BAAI/bge-large-en-v1.5"
DIRECT_LIMIT = 64 * 1024
BASE = "/v1/compat/v1"


@pytest.fixture
def client(local_aws: LocalStack) -> TestClient:
    identity_store.cache_clear()
    heartbeat_all_lanes()
    settings = get_settings().model_copy(update={"max_direct_upload_bytes": DIRECT_LIMIT})
    return TestClient(create_app(settings), raise_server_exceptions=False)


@pytest.fixture
def org(client: TestClient) -> TestOrg:
    return new_org(credit_usd="10")


@pytest.fixture
def auth(org: TestOrg) -> dict[str, str]:
    return org.key_headers("member")


def row(
    n: int, *, url: str = CHAT, model: str = LLAMA, text: str | None = None, **body: Any
) -> dict[str, Any]:
    if url == "/v1/embeddings":
        payload: dict[str, Any] = {"model": model, "input": text or f"text {n}"}
    elif url == "/v1/responses":
        payload = {"model": model, "input": text or f"Question {n}", "max_output_tokens": 32}
    else:
        content = text or f"Question {n}: what is routing?"
        payload = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 32}
    return {"custom_id": f"req-{n}", "method": "POST", "url": url, "body": {**payload, **body}}


def jsonl(rows: Sequence[Mapping[str, Any] | str]) -> bytes:
    return b"".join((r if isinstance(r, str) else json.dumps(r)).encode() + b"\n" for r in rows)


def upload(client: TestClient, auth: dict[str, str], data: bytes, purpose: str | None = "batch") -> Any:
    form = {"purpose": purpose} if purpose is not None else {}
    return client.post(
        f"{BASE}/files", files={"file": ("input.jsonl", data, "application/jsonl")}, data=form, headers=auth
    )


def uploaded(client: TestClient, auth: dict[str, str], rows: Sequence[Mapping[str, Any]]) -> str:
    response = upload(client, auth, jsonl(rows))
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


def create(client: TestClient, auth: dict[str, str], file_id: str, endpoint: str = CHAT, **extra: Any) -> Any:
    body = {"input_file_id": file_id, "endpoint": endpoint, "completion_window": "24h", **extra}
    return client.post(f"{BASE}/batches", json=body, headers=auth)


def vendor_error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == {"type", "message", "param", "code"}, error
    return error


def run(stack: LocalStack, batch_id: str) -> None:
    batch = BatchRecords(get_settings().table_name("batches")).get(batch_id)
    assert batch is not None and batch.execution_arn, batch
    result = run_until_done(stack, batch.execution_arn)
    assert result["status"] == "SUCCEEDED", result


def finished(
    client: TestClient, auth: dict[str, str], stack: LocalStack, rows: Sequence[Mapping[str, Any]]
) -> Any:
    """A compat batch of `rows` run to its end: the vendor's Batch object (with its file ids)."""
    batch = create(client, auth, uploaded(client, auth, rows)).json()
    run(stack, batch["id"])
    return client.get(f"{BASE}/batches/{batch['id']}", headers=auth).json()


def after_first_line(monkeypatch: pytest.MonkeyPatch, then: Callable[[], object]) -> Any:
    """Output files rendered with `then` run after their first line is written (a function
    that dies, another call meanwhile); the renderer as it was."""
    render = CompatFiles._render

    def interrupted(
        self: CompatFiles, output: OutputFile, batch: BatchRecord, body_format: BodyFormat
    ) -> Any:
        lines = render(self, output, batch, body_format)
        yield next(lines)
        then()
        yield from lines

    monkeypatch.setattr(CompatFiles, "_render", interrupted)
    return render


def lines(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.content.splitlines()]


def uploads_keys(stack: LocalStack, prefix: str) -> list[str]:
    listed = aws_client("s3").list_objects_v2(Bucket=stack.buckets["uploads"], Prefix=prefix)
    return [entry["Key"] for entry in listed.get("Contents", [])]


# -- files -------------------------------------------------------------------------------------
def test_an_input_file_is_a_vendor_file_object(
    client: TestClient, auth: dict[str, str], org: TestOrg
) -> None:
    data = jsonl([row(0), row(1)])
    # When a JSONL file of vendor requests is uploaded with purpose batch
    response = upload(client, auth, data)
    # Then the answer is the vendor's File object
    assert response.status_code == 200, response.text
    file = response.json()
    assert file["id"].startswith("file_") and file["object"] == "file"
    assert file["bytes"] == len(data) and file["purpose"] == "batch" and file["status"] == "processed"
    assert file["filename"] == "input.jsonl" and isinstance(file["created_at"], int)
    # And it reads back the same, and its content is the bytes uploaded
    assert client.get(f"{BASE}/files/{file['id']}", headers=auth).json() == file
    content = client.get(f"{BASE}/files/{file['id']}/content", headers=auth)
    assert content.status_code == 200 and content.content == data
    # And it is an ordinary file of the native API too
    native = client.get(f"/v1/files/{file['id']}", headers=auth).json()["file"]
    assert native["purpose"] == "batch" and native["item_count"] == 2


def test_a_large_input_file_is_downloaded_from_a_short_lived_signed_url(
    local_aws: LocalStack, auth: dict[str, str], org: TestOrg
) -> None:
    # Given an API whose downloads above 1 KiB are served by storage, and a 3 KiB input file
    settings = get_settings().model_copy(
        update={"file_download_redirect_bytes": 1024, "file_download_url_seconds": 120}
    )
    client = TestClient(create_app(settings), raise_server_exceptions=False)
    data = jsonl([row(n, text="x" * 200) for n in range(10)])
    assert len(data) > 1024
    file = upload(client, auth, data).json()
    # When its content is asked for
    answer = client.get(f"{BASE}/files/{file['id']}/content", headers=auth, follow_redirects=False)
    # Then the answer is a redirect to a signed GET of its object, valid two minutes, and no body
    assert answer.status_code == 307, answer.text
    assert answer.content == b"" and answer.headers["cache-control"] == "no-store"
    location = answer.headers["location"]
    assert "X-Amz-Signature=" in location and "X-Amz-Expires=120" in location
    assert f"files/{org.org_id}/{file['id']}" in location
    # naming the object that holds the bytes uploaded
    bucket = local_aws.buckets["uploads"]
    path = unquote(urlparse(location).path).lstrip("/")
    key = path.removeprefix(f"{bucket}/")
    assert bucket in location
    assert aws_client("s3").get_object(Bucket=bucket, Key=key)["Body"].read() == data
    # And a small file is streamed, and another org's file is refused as before (no URL)
    small = upload(client, auth, jsonl([row(0)])).json()
    assert client.get(f"{BASE}/files/{small['id']}/content", headers=auth).status_code == 200
    other = new_org(credit_usd="1").key_headers("member")
    refused = client.get(f"{BASE}/files/{file['id']}/content", headers=other, follow_redirects=False)
    assert refused.status_code == 403 and "location" not in refused.headers


def test_a_large_output_file_is_rendered_once_and_served_from_a_short_lived_signed_url(
    local_aws: LocalStack, auth: dict[str, str], org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an API whose downloads above 1 KiB are served by storage, and a finished compat
    # batch whose output file is larger than that
    settings = get_settings().model_copy(
        update={"file_download_redirect_bytes": 1024, "file_download_url_seconds": 120}
    )
    client = TestClient(create_app(settings), raise_server_exceptions=False)
    rows = [row(n) for n in range(6)]
    rows[5] = row(5, text="Question 5 [simulate:fail]")
    batch = finished(client, auth, local_aws, rows)
    output_id, error_id = batch["output_file_id"], batch["error_file_id"]
    renders: list[str] = []  # each rendering of a file's lines, as "<role>.<body format>"
    render = CompatFiles._render

    def counted(self: CompatFiles, output: OutputFile, batch: BatchRecord, body_format: BodyFormat) -> Any:
        renders.append(f"{output.role}.{body_format}")
        return render(self, output, batch, body_format)

    monkeypatch.setattr(CompatFiles, "_render", counted)
    # When its content is asked for
    answer = client.get(f"{BASE}/files/{output_id}/content", headers=auth, follow_redirects=False)
    # Then the answer is a redirect to a signed GET of its rendering, valid two minutes, no body
    assert answer.status_code == 307, answer.text
    assert answer.content == b"" and answer.headers["cache-control"] == "no-store"
    assert answer.headers["x-service-body-format"] == "normalized"
    location = answer.headers["location"]
    assert "X-Amz-Signature=" in location and "X-Amz-Expires=120" in location
    rendering = f"batches/{batch['id']}/compat/output.normalized.jsonl"
    assert rendering in location
    # whose bytes are the vendor's output lines, the same a streamed download gives
    stored = aws_client("s3").get_object(Bucket=local_aws.buckets["artifacts"], Key=rendering)["Body"].read()
    streamed = TestClient(create_app(get_settings()), raise_server_exceptions=False)
    assert lines(streamed.get(f"{BASE}/files/{output_id}/content", headers=auth)) == [
        json.loads(line) for line in stored.splitlines()
    ]
    assert [json.loads(line)["custom_id"] for line in stored.splitlines()] == [f"req-{n}" for n in range(5)]
    assert len(stored) > 1024
    # And the File object's size is the rendering's, which is rendered once, whatever reads it
    assert client.get(f"{BASE}/files/{output_id}", headers=auth).json()["bytes"] == len(stored)
    assert (
        client.get(f"{BASE}/files/{output_id}/content", headers=auth, follow_redirects=False).status_code
        == 307
    )
    assert renders == ["output.normalized"]
    # And each body format has its own rendering, and a small file is streamed from its own
    raw = client.get(
        f"{BASE}/files/{output_id}/content?body_format=raw", headers=auth, follow_redirects=False
    )
    assert raw.status_code == 307 and raw.headers["x-service-body-format"] == "raw"
    assert "compat/output.raw.jsonl" in raw.headers["location"]
    errors = client.get(f"{BASE}/files/{error_id}/content", headers=auth)
    assert [line["custom_id"] for line in lines(errors)] == ["req-5"]
    assert renders == ["output.normalized", "output.raw", "error.normalized"]
    # And another org is refused as before, with no URL
    other = new_org(credit_usd="1").key_headers("member")
    refused = client.get(f"{BASE}/files/{output_id}/content", headers=other, follow_redirects=False)
    assert refused.status_code == 403 and "location" not in refused.headers
    # When the output file is deleted / Then its renderings go with it; the error file's stays
    assert client.delete(f"{BASE}/files/{output_id}", headers=auth).status_code == 200
    assert renderings(local_aws, batch["id"]) == [f"batches/{batch['id']}/compat/error.normalized.jsonl"]


def test_a_rendering_that_dies_halfway_leaves_nothing_and_the_next_read_renders_it_whole(
    client: TestClient, auth: dict[str, str], local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a finished compat batch, and a first read whose rendering dies after its first line
    batch = finished(client, auth, local_aws, [row(n) for n in range(3)])
    output_id = batch["output_file_id"]

    def dies() -> None:
        raise RuntimeError("the function died mid-rendering")

    render = after_first_line(monkeypatch, dies)
    # When it is read / Then the read fails whole (no partial body) and no rendering is kept
    failed = client.get(f"{BASE}/files/{output_id}/content", headers=auth)
    assert failed.status_code == 500 and failed.json()["error"]["code"] == "internal_error"
    assert renderings(local_aws, batch["id"]) == []
    # When the function lives again / Then the next read renders the file whole, once
    monkeypatch.setattr(CompatFiles, "_render", render)
    content = client.get(f"{BASE}/files/{output_id}/content", headers=auth)
    assert [line["custom_id"] for line in lines(content)] == ["req-0", "req-1", "req-2"]
    key = f"batches/{batch['id']}/compat/output.normalized.jsonl"
    stored = aws_client("s3").get_object(Bucket=local_aws.buckets["artifacts"], Key=key)["Body"].read()
    assert stored == content.content
    assert client.get(f"{BASE}/files/{output_id}", headers=auth).json()["bytes"] == len(stored)


@pytest.mark.parametrize(
    ("meanwhile", "status", "code"), [("deleted", 404, "file_not_found"), ("reclaimed", 410, "file_expired")]
)
def test_a_rendering_finished_after_its_file_went_is_not_kept(
    client: TestClient,
    auth: dict[str, str],
    local_aws: LocalStack,
    monkeypatch: pytest.MonkeyPatch,
    meanwhile: str,
    status: int,
    code: str,
) -> None:
    # Given a finished compat batch whose output file goes while its first read is rendering
    # it: deleted by another call (after the delete took the renderings there were), or its
    # batch marked reclaimed by retention (whose sweep then deletes what the batch's prefix
    # holds, which a rendering still being written is not yet part of)
    batch = finished(client, auth, local_aws, [row(n) for n in range(3)])
    output_id = batch["output_file_id"]
    other = TestClient(create_app(get_settings()), raise_server_exceptions=False)
    records = BatchRecords(get_settings().table_name("batches"))

    def goes() -> None:
        if meanwhile == "deleted":
            assert other.delete(f"{BASE}/files/{output_id}", headers=auth).status_code == 200
        else:
            records.mark_reclaimed(batch["id"], at="2026-12-05T00:00:00+00:00")

    after_first_line(monkeypatch, goes)
    # When the read finishes writing its rendering
    answer = client.get(f"{BASE}/files/{output_id}/content", headers=auth)
    # Then it answers that the file is gone (404) or its bytes reclaimed (410), and takes what
    # it wrote with it
    assert answer.status_code == status and answer.json()["error"]["code"] == code, answer.text
    assert renderings(local_aws, batch["id"]) == []


def test_a_rendering_written_between_a_deletes_two_steps_goes_with_the_file(
    client: TestClient, auth: dict[str, str], local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a finished compat batch with an output and an error file, and a first read of
    # the output file that renders it whole after its delete took the renderings there were
    # and before the delete marked it deleted
    batch = finished(client, auth, local_aws, [row(0), row(1, text="[simulate:fail] no")])
    output_id = batch["output_file_id"]
    assert batch["error_file_id"]
    mark = CompatStore.delete_output_file
    other = TestClient(create_app(get_settings()), raise_server_exceptions=False)

    def read_first(self: CompatStore, file_id: str, *, at: str) -> bool:
        assert [
            line["custom_id"] for line in lines(other.get(f"{BASE}/files/{file_id}/content", headers=auth))
        ] == ["req-0"]
        return mark(self, file_id, at=at)

    monkeypatch.setattr(CompatStore, "delete_output_file", read_first)
    # When the output file is deleted
    assert client.delete(f"{BASE}/files/{output_id}", headers=auth).status_code == 200
    # Then the rendering that read wrote is gone with it, and the batch's results stay for
    # its error file
    assert renderings(local_aws, batch["id"]) == []
    assert results_key(batch["id"]) in artifact_keys(local_aws, batch["id"])


@pytest.mark.parametrize(
    ("bad", "line", "param", "words"),
    [
        ({"method": "POST", "url": CHAT, "body": {"model": LLAMA}}, 2, "custom_id", "custom_id"),
        ({**row(1), "method": "GET"}, 2, "method", "POST"),
        ({**row(1), "url": "/v1/images/generations"}, 2, "url", "url must be one of"),
        ({**row(1), "body": {"messages": []}}, 2, "body.model", "body.model"),
        ({**row(1), "body": "text"}, 2, "body", "body must be"),
        ("{not json", 2, None, "not JSON"),
        ("[1, 2]", 2, None, "not a JSON object"),
    ],
)
def test_an_invalid_row_is_refused_naming_its_line(
    client: TestClient,
    auth: dict[str, str],
    org: TestOrg,
    local_aws: LocalStack,
    bad: Any,
    line: int,
    param: str | None,
    words: str,
) -> None:
    # When a file whose second line is not a usable request is uploaded
    response = upload(client, auth, jsonl([row(0), bad, row(2)]))
    # Then it is refused in the vendor's error shape, naming the line and the field
    error = vendor_error(response, 400)
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_jsonl_line"
    assert error["message"].startswith(f"Line {line}:") and words in error["message"], error
    assert error["param"] == param
    # And nothing is kept
    assert uploads_keys(local_aws, f"files/{org.org_id}/") == []


def test_other_refused_uploads_answer_in_the_vendor_shape(client: TestClient, auth: dict[str, str]) -> None:
    several = vendor_error(upload(client, auth, jsonl([row(0), {"custom_id": "x"}, "{", row(3)])), 400)
    assert several["message"].startswith("Line 2:") and "2 invalid lines" in several["message"]
    assert vendor_error(upload(client, auth, jsonl([row(0)]), purpose=None), 400)["param"] == "purpose"
    assert vendor_error(upload(client, auth, jsonl([row(0)]), purpose="fine-tune"), 400)["param"] == "purpose"
    assert vendor_error(upload(client, auth, b"\n\n"), 400)["code"] == "empty_file"
    pdf = client.post(
        f"{BASE}/files",
        files={"file": ("scan.pdf", b"%PDF-1.7\n", "application/pdf")},
        data={"purpose": "batch"},
        headers=auth,
    )
    refused = vendor_error(pdf, 400)
    assert "not supported" in refused["message"]
    # (named as the Uploads API names the same problem: one code, the field concerned)
    assert (refused["code"], refused["param"]) == ("unsupported_file_type", "file")
    sniffed = client.post(  # a JSON Lines name and type over a PDF's bytes
        f"{BASE}/files",
        files={"file": ("a.jsonl", b"%PDF-1.7\n" + b"x" * 600, "application/jsonl")},
        data={"purpose": "batch"},
        headers=auth,
    )
    assert (vendor_error(sniffed, 400)["code"], vendor_error(sniffed, 400)["param"]) == (
        "unsupported_file_type",
        "file",
    )
    big = jsonl([row(n, text="x" * 500) for n in range(200)])
    too_large = vendor_error(upload(client, auth, big), 413)
    assert "uploads" in too_large["message"]
    assert (
        vendor_error(client.get(f"{BASE}/files/file_01jzzzzzzzzzzzzzzzzzzzzzzz", headers=auth), 404)["code"]
        == "file_not_found"
    )
    assert (
        vendor_error(client.get(f"{BASE}/nothing-here", headers=auth), 404)["type"] == "invalid_request_error"
    )
    assert vendor_error(client.get(f"{BASE}/files/x"), 401)["type"] == "authentication_error"


def test_a_reclaimed_input_file_is_expired_and_its_content_gone(
    client: TestClient, auth: dict[str, str]
) -> None:
    file_id = uploaded(client, auth, [row(0)])
    # Given retention reclaimed the file's bytes (the record says so)
    store = FileStore(get_settings().table_name("batches"))
    record = store.get(file_id)
    assert record is not None
    assert store.replace(replace(record, status="expired"), expected_status="processed")
    # Then the File object says expired, and its content is 410 (404 is for never-existing files)
    assert client.get(f"{BASE}/files/{file_id}", headers=auth).json()["status"] == "expired"
    assert (
        vendor_error(client.get(f"{BASE}/files/{file_id}/content", headers=auth), 410)["code"]
        == "file_expired"
    )
    # And a batch cannot be made from it
    assert vendor_error(create(client, auth, file_id), 410)["code"] == "file_expired"


# -- batches -----------------------------------------------------------------------------------
def test_a_compat_batch_is_an_ordinary_batch_with_vendor_output_files(
    client: TestClient, auth: dict[str, str], org: TestOrg, local_aws: LocalStack
) -> None:
    rows = [row(n) for n in range(4)]
    rows[2] = row(2, text="Question 2 [simulate:fail]")
    file_id = uploaded(client, auth, rows)
    # When a batch is created from the file
    created = create(client, auth, file_id, metadata={"team": "search"})
    # Then the answer is a bare vendor Batch object, validating, with its credits reserved
    assert created.status_code == 200, created.text
    batch = created.json()
    batch_id = batch["id"]
    assert batch_id.startswith("batch_") and batch["object"] == "batch"
    assert batch["status"] == "validating" and batch["endpoint"] == CHAT
    assert batch["input_file_id"] == file_id and batch["completion_window"] == "24h"
    assert batch["request_counts"] == {"total": 4, "completed": 0, "failed": 0}
    assert batch["output_file_id"] is None and batch["error_file_id"] is None
    assert batch["metadata"] == {"team": "search"} and batch["body_format"] == "normalized"
    assert batch["expires_at"] - batch["created_at"] == 24 * 3600
    assert batch["model"] == LLAMA and batch["usage"] is None  # no answer counted yet
    state = LedgerStore(get_settings().table_name("ledger")).state(org.org_id)
    assert state.reserved > Money.zero()
    # And the native API shows the same batch, whose items are the rows
    native = client.get(f"/v1/batches/{batch_id}", headers=auth).json()["batch"]
    assert native["source"] == "compat" and native["state"] == "priced" and native["counts"]["total"] == 4
    items = client.get(f"/v1/batches/{batch_id}/items", headers=auth).json()["data"]
    assert [(i["customer_item_id"], i["operation"], i["model"]) for i in items] == [
        (f"req-{n}", "responses", LLAMA) for n in range(4)
    ]
    assert batch_id in {b["id"] for b in client.get("/v1/batches", headers=auth).json()["data"]}

    # When the workflow runs to the end
    run(local_aws, batch_id)
    done = client.get(f"{BASE}/batches/{batch_id}", headers=auth).json()
    # Then it is completed, with its counts and timestamps filled as the vendor does
    assert done["status"] == "completed", done
    assert done["request_counts"] == {"total": 4, "completed": 3, "failed": 1}
    for stamp in ("in_progress_at", "finalizing_at", "completed_at"):
        assert isinstance(done[stamp], int) and done[stamp] >= done["created_at"], stamp
    assert done["failed_at"] is None and done["cancelled_at"] is None
    assert done["output_file_id"] and done["error_file_id"]
    # And the native view of the same batch names the same files (the spec: file ids on the summary)
    native = client.get(f"/v1/batches/{batch_id}", headers=auth).json()["batch"]
    assert (native["output_file_id"], native["error_file_id"]) == (
        done["output_file_id"],
        done["error_file_id"],
    )
    # And the output file holds the successes, line by line, in the vendor's shape
    output = client.get(f"{BASE}/files/{done['output_file_id']}/content", headers=auth)
    assert output.headers["x-service-body-format"] == "normalized"
    out = lines(output)
    assert [line["custom_id"] for line in out] == ["req-0", "req-1", "req-3"]
    for line in out:
        assert line["id"].startswith("batch_req_") and line["error"] is None
        assert line["response"]["status_code"] == 200 and line["response"]["request_id"]
        body = line["response"]["body"]  # what the vendor's /v1/chat/completions answers
        assert body["object"] == "chat.completion" and body["model"] == LLAMA
        assert LLAMA in body["choices"][0]["message"]["content"] and body["usage"]["total_tokens"] > 0
    # And the Batch object's usage is the output lines' tokens, as the SDK's type reads it
    usage = OpenAIBatch.model_validate(done).usage
    assert usage is not None and done["model"] == LLAMA
    prompt = sum(line["response"]["body"]["usage"]["prompt_tokens"] for line in out)
    completion = sum(line["response"]["body"]["usage"]["completion_tokens"] for line in out)
    assert (usage.input_tokens, usage.output_tokens) == (prompt, completion) and prompt and completion
    assert usage.total_tokens == prompt + completion
    assert (usage.input_tokens_details.cached_tokens, usage.output_tokens_details.reasoning_tokens) == (0, 0)
    # And the raw body format gives the provider's own bodies, per download
    raw = client.get(f"{BASE}/files/{done['output_file_id']}/content?body_format=raw", headers=auth)
    assert raw.headers["x-service-body-format"] == "raw"
    assert [line["response"]["body"] for line in lines(raw)] != [line["response"]["body"] for line in out]
    # And the failure is in the error file
    errors = lines(client.get(f"{BASE}/files/{done['error_file_id']}/content", headers=auth))
    assert [(e["custom_id"], e["response"], e["error"]["code"]) for e in errors] == [
        ("req-2", None, "simulated_failure")
    ]
    # And both are File objects of purpose batch_output whose size is what the download gives
    meta = client.get(f"{BASE}/files/{done['output_file_id']}", headers=auth).json()
    assert meta["purpose"] == "batch_output" and meta["status"] == "processed"
    assert meta["bytes"] == len(output.content)
    # And the native results are the same items
    results = client.get(f"/v1/batches/{batch_id}/results", headers=auth).json()["data"]
    assert [r["status"] for r in results] == ["completed", "completed", "failed", "completed"]

    # When retention reclaims the results, the output file is expired and its content gone
    aws_client("s3").delete_object(Bucket=local_aws.buckets["artifacts"], Key=results_key(batch_id))
    assert client.get(f"{BASE}/files/{done['output_file_id']}", headers=auth).json()["status"] == "expired"
    gone = client.get(f"{BASE}/files/{done['output_file_id']}/content", headers=auth)
    assert vendor_error(gone, 410)["code"] == "file_expired"


def test_urls_pick_the_operation_and_the_rest_of_the_body_is_the_input(
    client: TestClient, auth: dict[str, str], local_aws: LocalStack
) -> None:
    embed = uploaded(
        client, auth, [row(0, url="/v1/embeddings", model=BGE), row(1, url="/v1/embeddings", model=BGE)]
    )
    responses = uploaded(client, auth, [row(0, url="/v1/responses", instructions="Be brief.")])
    first = create(client, auth, embed, endpoint="/v1/embeddings", body_format="raw")
    second = create(client, auth, responses, endpoint="/v1/responses")
    assert first.status_code == 200 and second.status_code == 200, (first.text, second.text)
    embed_items = client.get(f"/v1/batches/{first.json()['id']}/items", headers=auth).json()["data"]
    assert {(i["operation"], i["model"]) for i in embed_items} == {("embeddings", BGE)}
    # The stored item: the model taken out of the body, the rest of the body as the input
    key = f"batches/{second.json()['id']}/input/00000.jsonl"
    stored = json.loads(
        aws_client("s3").get_object(Bucket=local_aws.buckets["artifacts"], Key=key)["Body"].read()
    )
    assert stored["item"] == {
        "customer_item_id": "req-0",
        "operation": "responses",
        "model": LLAMA,
        "input": {"input": "Question 0", "max_output_tokens": 32, "instructions": "Be brief."},
    }
    # And an embeddings batch with body_format raw defaults its downloads to raw
    run(local_aws, first.json()["id"])
    done = client.get(f"{BASE}/batches/{first.json()['id']}", headers=auth).json()
    assert done["status"] == "completed" and done["body_format"] == "raw" and done["error_file_id"] is None
    content = client.get(f"{BASE}/files/{done['output_file_id']}/content", headers=auth)
    assert content.headers["x-service-body-format"] == "raw"
    normalized = lines(
        client.get(f"{BASE}/files/{done['output_file_id']}/content?body_format=normalized", headers=auth)
    )
    body = normalized[0]["response"]["body"]
    assert body["object"] == "list" and body["model"] == BGE
    assert body["data"][0]["object"] == "embedding" and len(body["data"][0]["embedding"]) > 0


def test_batch_create_errors_are_in_the_vendor_shape(client: TestClient, auth: dict[str, str]) -> None:
    file_id = uploaded(client, auth, [row(0), row(1, model="no-such-model")])
    # A row whose model is not in the catalog: the native preflight, reported by line and field
    unknown = vendor_error(create(client, auth, file_id), 400)
    assert unknown["message"].startswith("Line 2:") and unknown["param"] == "body.model", unknown
    # A Responses row without its input: the field its endpoint names, not the chat name
    bare = {**row(0, url="/v1/responses"), "body": {"model": LLAMA, "max_output_tokens": 32}}
    no_input = vendor_error(
        create(client, auth, uploaded(client, auth, [bare]), endpoint="/v1/responses"), 400
    )
    assert no_input["param"] == "body.input", no_input
    # A row whose url is not the batch's endpoint
    mixed = uploaded(client, auth, [row(0), row(1, url="/v1/responses")])
    mismatch = vendor_error(create(client, auth, mixed), 400)
    assert mismatch["code"] == "endpoint_mismatch" and mismatch["message"].startswith("Line 2:")
    ok = uploaded(client, auth, [row(0)])
    assert vendor_error(create(client, auth, ok, endpoint="/v1/images"), 400)["param"] == "endpoint"
    window = client.post(
        f"{BASE}/batches",
        json={"input_file_id": ok, "endpoint": CHAT, "completion_window": "48h"},
        headers=auth,
    )
    assert vendor_error(window, 400)["param"] == "completion_window"
    missing = client.post(f"{BASE}/batches", json={"input_file_id": ok}, headers=auth)
    assert vendor_error(missing, 400)["param"] == "endpoint"
    never = create(client, auth, "file_01jzzzzzzzzzzzzzzzzzzzzzzz")
    assert vendor_error(never, 404)["code"] == "file_not_found"
    native = client.post(
        "/v1/files",
        files={"file": ("n.jsonl", b'{"customer_item_id": "a"}\n', "application/jsonl")},
        headers=auth,
    ).json()["file"]["id"]
    assert vendor_error(create(client, auth, native), 400)["param"] == "input_file_id"
    # An unknown batch id is the same 404 whether or not it is well formed
    for unknown in ("batch_01jzzzzzzzzzzzzzzzzzzzzzzz", "batch_nope"):
        missing = vendor_error(client.get(f"{BASE}/batches/{unknown}", headers=auth), 404)
        assert (missing["code"], missing["param"], missing["message"]) == (
            "batch_not_found",
            "batch_id",
            f"No such batch: {unknown}.",
        )
    # Nothing was created by any of these
    assert client.get(f"{BASE}/batches", headers=auth).json()["data"] == []


def test_insufficient_funds_is_429_insufficient_quota(client: TestClient) -> None:
    poor = new_org(credit_usd="0")
    auth = poor.key_headers()
    file_id = uploaded(client, auth, [row(n) for n in range(3)])
    response = create(client, auth, file_id)
    error = vendor_error(response, 429)
    assert error["type"] == "insufficient_quota" and error["code"] == "insufficient_quota"
    assert response.headers["x-should-retry"] == "false"  # the SDK must not retry it
    assert client.get(f"{BASE}/batches", headers=auth).json()["data"] == []
    assert LedgerStore(get_settings().table_name("ledger")).state(poor.org_id).reserved == Money.zero()


def test_the_list_pages_with_the_vendor_cursor(client: TestClient, auth: dict[str, str]) -> None:
    file_id = uploaded(client, auth, [row(0)])
    ids = [create(client, auth, file_id).json()["id"] for _ in range(3)]
    # A native batch is not a compat batch: not in this list
    native = client.post(
        "/v1/batches",
        json={
            "items": [
                {
                    "customer_item_id": "a",
                    "operation": "responses",
                    "model": LLAMA,
                    "input": {"messages": [{"role": "user", "content": "hi"}]},
                }
            ]
        },
        headers={**auth, "Idempotency-Key": "native-batch-1"},
    )
    assert native.status_code == 202, native.text
    first = client.get(f"{BASE}/batches", params={"limit": 2}, headers=auth).json()
    assert first["object"] == "list" and [b["id"] for b in first["data"]] == ids[::-1][:2]
    assert first["has_more"] is True and first["first_id"] == ids[2] and first["last_id"] == ids[1]
    rest = client.get(f"{BASE}/batches", params={"limit": 2, "after": first["last_id"]}, headers=auth).json()
    assert [b["id"] for b in rest["data"]] == [ids[0]] and rest["has_more"] is False
    assert vendor_error(client.get(f"{BASE}/batches/{native.json()['batch']['id']}", headers=auth), 404)
    assert (
        vendor_error(client.get(f"{BASE}/batches", params={"after": "x"}, headers=auth), 400)["param"]
        == "after"
    )
    # Another org sees none of them
    stranger = new_org().key_headers()
    assert client.get(f"{BASE}/batches", headers=stranger).json()["data"] == []
    assert (
        vendor_error(client.get(f"{BASE}/batches/{ids[0]}", headers=stranger), 403)["type"]
        == "permission_error"
    )


def test_cancel_is_cancelling_until_finalized_then_cancelled(
    client: TestClient, auth: dict[str, str], local_aws: LocalStack
) -> None:
    file_id = uploaded(client, auth, [row(n) for n in range(3)])
    batch_id = create(client, auth, file_id).json()["id"]
    # When it is cancelled before it runs
    cancelled = client.post(f"{BASE}/batches/{batch_id}/cancel", headers=auth)
    assert cancelled.status_code == 200, cancelled.text
    # Then it is cancelling (the native batch is canceled; its artifacts are not written yet)
    assert cancelled.json()["status"] == "cancelling" and isinstance(cancelled.json()["cancelling_at"], int)
    assert client.get(f"/v1/batches/{batch_id}", headers=auth).json()["batch"]["state"] == "canceled"
    # And once the workflow finalized it: cancelled, every request in the error file
    run(local_aws, batch_id)
    done = client.get(f"{BASE}/batches/{batch_id}", headers=auth).json()
    assert done["status"] == "cancelled" and isinstance(done["cancelled_at"], int)
    assert done["request_counts"] == {"total": 3, "completed": 0, "failed": 3}
    assert done["output_file_id"] is None and done["error_file_id"]
    native = client.get(f"/v1/batches/{batch_id}", headers=auth).json()["batch"]
    assert (native["output_file_id"], native["error_file_id"]) == (None, done["error_file_id"])
    errors = lines(client.get(f"{BASE}/files/{done['error_file_id']}/content", headers=auth))
    assert [e["error"]["code"] for e in errors] == ["canceled"] * 3
    # And cancelling again is refused
    assert vendor_error(client.post(f"{BASE}/batches/{batch_id}/cancel", headers=auth), 409)


def test_an_idempotency_key_replays_the_same_batch(client: TestClient, auth: dict[str, str]) -> None:
    file_id = uploaded(client, auth, [row(0)])
    headers = {**auth, "Idempotency-Key": "compat-key-0001"}
    body = {"input_file_id": file_id, "endpoint": CHAT, "completion_window": "24h"}
    first = client.post(f"{BASE}/batches", json=body, headers=headers)
    again = client.post(f"{BASE}/batches", json=body, headers=headers)
    assert first.status_code == again.status_code == 200 and first.json()["id"] == again.json()["id"]
    other = client.post(f"{BASE}/batches", json={**body, "body_format": "raw"}, headers=headers)
    assert vendor_error(other, 409)["code"] == "idempotency_conflict"
    assert len(client.get(f"{BASE}/batches", headers=auth).json()["data"]) == 1


# -- uploads -----------------------------------------------------------------------------------
def start_upload(client: TestClient, auth: dict[str, str], size: int, **extra: Any) -> dict[str, Any]:
    body = {
        "bytes": size,
        "filename": "big.jsonl",
        "mime_type": "application/jsonl",
        "purpose": "batch",
        **extra,
    }
    response = client.post(f"{BASE}/uploads", json=body, headers=auth)
    assert response.status_code == 200, response.text
    upload: dict[str, Any] = response.json()
    return upload


def add_part(client: TestClient, auth: dict[str, str], upload_id: str, data: bytes) -> Any:
    return client.post(
        f"{BASE}/uploads/{upload_id}/parts",
        files={"data": ("blob", data, "application/octet-stream")},
        headers=auth,
    )


def test_parts_are_assembled_in_the_order_given_into_a_file(
    client: TestClient, auth: dict[str, str], org: TestOrg, local_aws: LocalStack
) -> None:
    data = jsonl([row(n) for n in range(300)])
    pieces = [data[i : i + 20_000] for i in range(0, len(data), 20_000)]
    upload = start_upload(client, auth, len(data))
    assert upload["object"] == "upload" and upload["status"] == "pending" and upload["file"] is None
    assert upload["expires_at"] - upload["created_at"] == 3600
    # Parts sent out of order, named in order at completion (split mid-line)
    sent = {}
    for index in reversed(range(len(pieces))):
        part = add_part(client, auth, upload["id"], pieces[index])
        assert part.status_code == 200, part.text
        assert part.json()["object"] == "upload.part" and part.json()["upload_id"] == upload["id"]
        sent[index] = part.json()["id"]
    part_ids = [sent[i] for i in range(len(pieces))]
    wrong_md5 = client.post(
        f"{BASE}/uploads/{upload['id']}/complete", json={"part_ids": part_ids, "md5": "0" * 32}, headers=auth
    )
    assert vendor_error(wrong_md5, 400)["param"] == "md5"
    short = client.post(
        f"{BASE}/uploads/{upload['id']}/complete", json={"part_ids": part_ids[:-1]}, headers=auth
    )
    assert vendor_error(short, 400)["code"] == "upload_size_mismatch"
    done = client.post(
        f"{BASE}/uploads/{upload['id']}/complete",
        json={"part_ids": part_ids, "md5": hashlib.md5(data, usedforsecurity=False).hexdigest()},
        headers=auth,
    )
    assert done.status_code == 200, done.text
    completed = done.json()
    assert completed["status"] == "completed" and completed["file"]["status"] == "processed"
    assert completed["file"]["bytes"] == len(data) and completed["file"]["purpose"] == "batch"
    content = client.get(f"{BASE}/files/{completed['file']['id']}/content", headers=auth)
    assert content.content == data
    # Completing again answers the same; the parts' bytes are gone; no more parts are taken
    again = client.post(f"{BASE}/uploads/{upload['id']}/complete", json={"part_ids": part_ids}, headers=auth)
    assert again.json() == completed
    assert uploads_keys(local_aws, f"staging/{org.org_id}/{upload['id']}/") == []
    assert vendor_error(add_part(client, auth, upload["id"], b"{}\n"), 409)["code"] == "upload_not_pending"
    # And the file makes a batch
    assert create(client, auth, completed["file"]["id"]).json()["request_counts"]["total"] == 300


def test_upload_refusals(
    client: TestClient, auth: dict[str, str], org: TestOrg, local_aws: LocalStack
) -> None:
    bad = jsonl([row(0), {"custom_id": "x", "method": "POST"}])
    upload = start_upload(client, auth, len(bad))
    part = add_part(client, auth, upload["id"], bad).json()["id"]
    # An assembled file with a bad row is refused naming the line; nothing is kept
    refused = client.post(f"{BASE}/uploads/{upload['id']}/complete", json={"part_ids": [part]}, headers=auth)
    assert vendor_error(refused, 400)["message"].startswith("Line 2:")
    assert uploads_keys(local_aws, f"files/{org.org_id}/") == []
    # A part over one request's worth is 413; unknown parts and uploads are refused
    assert (
        vendor_error(add_part(client, auth, upload["id"], b"x" * (DIRECT_LIMIT + 1)), 413)["param"] == "data"
    )
    unknown = client.post(
        f"{BASE}/uploads/{upload['id']}/complete", json={"part_ids": ["part_x"]}, headers=auth
    )
    assert vendor_error(unknown, 400)["code"] == "part_not_found"
    assert vendor_error(add_part(client, auth, "upload_nope", b"{}"), 404)["code"] == "upload_not_found"
    purpose = client.post(
        f"{BASE}/uploads",
        json={"bytes": 10, "filename": "a.jsonl", "mime_type": "application/jsonl", "purpose": "assistants"},
        headers=auth,
    )
    assert vendor_error(purpose, 400)["param"] == "purpose"
    # Cancel: no more parts, no completion; the parts' bytes are deleted
    cancelled = client.post(f"{BASE}/uploads/{upload['id']}/cancel", headers=auth)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert uploads_keys(local_aws, f"staging/{org.org_id}/{upload['id']}/") == []
    assert vendor_error(add_part(client, auth, upload["id"], b"{}"), 409)["code"] == "upload_not_pending"
    # Another org may not touch it
    stranger = new_org().key_headers()
    assert vendor_error(client.post(f"{BASE}/uploads/{upload['id']}/cancel", headers=stranger), 403)


# -- vendor lines in a native quote (services/compat/vendor_lines.py) --------------------------
VENDOR_LINES = Path(__file__).parents[1] / "fixtures" / "vendor_lines.jsonl"


def native_upload(client: TestClient, auth: dict[str, str], data: bytes, purpose: str) -> str:
    """A file through the native `POST /v1/files` (as the console sends a paste)."""
    response = client.post(
        "/v1/files",
        params={"purpose": purpose},
        content=data,
        headers={**auth, "Content-Type": "application/jsonl"},
    )
    assert response.status_code == 201, response.text
    file_id: str = response.json()["file"]["id"]
    return file_id


def native_quote(client: TestClient, auth: dict[str, str], file_id: str) -> Any:
    return client.post("/v1/quotes/model", json={"input_file_id": file_id}, headers=auth)


def test_a_batch_file_of_vendor_lines_is_quoted_and_created_natively(
    client: TestClient, auth: dict[str, str]
) -> None:
    # Given the shared fixture (three vendor lines, one native item) uploaded with purpose batch
    file_id = native_upload(client, auth, VENDOR_LINES.read_bytes(), "batch")
    # When it is quoted natively / Then every line is an item, the vendor lines converted
    quote = native_quote(client, auth, file_id)
    assert quote.status_code == 200, quote.text
    assert quote.json()["item_count"] == 4
    # And a batch is created from the quote with the converted items
    created = client.post(
        "/v1/batches",
        json={"quote_id": quote.json()["quote_id"]},
        headers={**auth, "Idempotency-Key": "key-vendor-lines"},
    )
    assert created.status_code == 202, created.text
    assert created.json()["batch"]["counts"]["total"] == 4


def test_a_bad_vendor_line_is_a_preflight_error_on_its_line_and_batch_input_is_unchanged(
    client: TestClient, auth: dict[str, str]
) -> None:
    # A vendor line without a model is an error naming its line and the vendor field
    bad = jsonl([row(0), {**row(1), "body": {"messages": [{"role": "user", "content": "Hi"}]}}])
    refused = native_quote(client, auth, native_upload(client, auth, bad, "batch"))
    assert refused.status_code == 400
    (issue,) = refused.json()["error"]["details"]["preflight"]["errors"]
    assert (issue["line"], issue["path"], issue["code"]) == (2, "body.model", "invalid_field")
    # A batch_input file is read as native items, as before: vendor lines are not items there
    native = native_quote(client, auth, native_upload(client, auth, VENDOR_LINES.read_bytes(), "batch_input"))
    assert native.status_code == 400
    codes = {issue["code"] for issue in native.json()["error"]["details"]["preflight"]["errors"]}
    assert codes == {"missing_field"}


# -- the contract as the official `openai` SDK reads it ------------------------------------------
OPENAI_DOCUMENT = Path(__file__).parents[1] / "fixtures" / "vendors" / "openai" / "openapi.yaml"


def sdk(client: TestClient, auth: dict[str, str], **options: Any) -> OpenAI:
    """The official SDK over the test app (its defaults: two retries)."""
    key = auth["Authorization"].split()[-1]
    return OpenAI(api_key=key, base_url=f"http://testserver{BASE}", http_client=client, **options)


@contextmanager
def requests_sent(client: TestClient) -> Iterator[list[str]]:
    """The paths of the requests the SDK sends meanwhile (its retries included)."""
    sent: list[str] = []
    client.event_hooks = {"request": [lambda request: sent.append(request.url.path)], "response": []}
    try:
        yield sent
    finally:
        client.event_hooks = {"request": [], "response": []}


@cache
def openai_document() -> dict[str, Any]:
    with OPENAI_DOCUMENT.open(encoding="utf-8") as handle:
        document: dict[str, Any] = yaml.load(handle, Loader=yaml.CSafeLoader)
    return document


def test_a_conflict_no_retry_can_settle_is_sent_once(client: TestClient, auth: dict[str, str]) -> None:
    vendor = sdk(client, auth)  # max_retries=2: the SDK retries a 409 unless told not to
    file = vendor.files.create(file=("a.jsonl", jsonl([row(0)])), purpose="batch")
    key = {"Idempotency-Key": "compat-sdk-key-1"}
    vendor.batches.create(input_file_id=file.id, endpoint=CHAT, completion_window="24h", extra_headers=key)
    # An Idempotency-Key used again with another body
    with requests_sent(client) as sent, pytest.raises(openai.ConflictError) as conflict:
        vendor.batches.create(
            input_file_id=file.id,
            endpoint=CHAT,
            completion_window="24h",
            extra_headers=key,
            extra_body={"body_format": "raw"},
        )
    assert conflict.value.code == "idempotency_conflict" and len(sent) == 1, sent
    assert conflict.value.response.headers["x-should-retry"] == "false"
    # A part for a cancelled upload
    upload = vendor.uploads.create(
        bytes=3, filename="a.jsonl", mime_type="application/jsonl", purpose="batch"
    )
    vendor.uploads.cancel(upload.id)
    with requests_sent(client) as sent, pytest.raises(openai.ConflictError) as conflict:
        vendor.uploads.parts.create(upload.id, data=b"{}\n")
    assert conflict.value.code == "upload_not_pending" and len(sent) == 1, sent


def test_a_responses_batch_answers_openai_response_objects(
    client: TestClient, auth: dict[str, str], local_aws: LocalStack
) -> None:
    vendor = sdk(client, auth)
    rows = [
        row(0, url="/v1/responses", max_output_tokens=4),
        row(1, url="/v1/responses", max_output_tokens=500),
    ]
    file = vendor.files.create(file=("a.jsonl", jsonl(rows)), purpose="batch")
    batch = vendor.batches.create(input_file_id=file.id, endpoint="/v1/responses", completion_window="24h")
    run(local_aws, batch.id)
    batch = vendor.batches.retrieve(batch.id)
    assert batch.status == "completed" and batch.output_file_id, batch
    bodies = [
        json.loads(line)["response"]["body"]
        for line in vendor.files.content(batch.output_file_id).text.splitlines()
    ]
    # Then each body is a `Response` of OpenAI's document, every required field there
    for body in bodies:
        assert answer_violations(openai_document(), "Response", body) == [], body
    cut, whole = (Response.model_validate(body) for body in bodies)
    # And the one cut at max_output_tokens is incomplete, says why, and so does its message
    assert cut.status == "incomplete" and cut.incomplete_details is not None
    assert cut.incomplete_details.reason == "max_output_tokens" and cut.output[0].status == "incomplete"
    assert whole.status == "completed" and whole.incomplete_details is None
    assert whole.output[0].status == "completed" and whole.error is None and whole.output_text

    # A completed batch cannot be cancelled: the SDK asks once
    with requests_sent(client) as sent, pytest.raises(openai.ConflictError) as conflict:
        vendor.batches.cancel(batch.id)
    assert conflict.value.code == "batch_not_cancellable" and len(sent) == 1, sent

    # An output file is no input file: 400 on input_file_id, naming its purpose
    with pytest.raises(openai.BadRequestError) as refused:
        vendor.batches.create(
            input_file_id=batch.output_file_id, endpoint="/v1/responses", completion_window="24h"
        )
    assert refused.value.param == "input_file_id" and refused.value.code == "invalid_input_file"
    assert "batch_output" in refused.value.message and "purpose batch" in refused.value.message
    # And a file that never existed is a 404 on input_file_id
    with pytest.raises(openai.NotFoundError) as missing:
        vendor.batches.create(
            input_file_id="file_01jzzzzzzzzzzzzzzzzzzzzzzz", endpoint="/v1/responses", completion_window="24h"
        )
    assert missing.value.param == "input_file_id" and missing.value.code == "file_not_found"


def test_a_validation_error_names_the_whole_param(client: TestClient, auth: dict[str, str]) -> None:
    vendor = sdk(client, auth, max_retries=0)

    def refused(call: Callable[[], object]) -> openai.BadRequestError:
        with pytest.raises(openai.BadRequestError) as error:
            call()
        return error.value

    assert refused(lambda: vendor.batches.list(limit=0)).param == "limit"
    assert refused(lambda: vendor.batches.list(limit=101)).param == "limit"
    long_value = refused(
        lambda: vendor.batches.create(
            input_file_id="file_x", endpoint=CHAT, completion_window="24h", metadata={"k": "v" * 513}
        )
    )
    assert long_value.param == "metadata.k"
    part = refused(lambda: vendor.uploads.complete("upload_x", part_ids=[{"no": "id"}]))  # type: ignore[list-item]
    assert part.param == "part_ids[0]"
    # A body that is not JSON names no field
    not_json = client.post(
        f"{BASE}/batches", content=b"{not json", headers={**auth, "Content-Type": "application/json"}
    )
    assert vendor_error(not_json, 400)["param"] is None


def test_cancelling_a_cancelling_batch_answers_the_batch(
    client: TestClient, auth: dict[str, str], local_aws: LocalStack
) -> None:
    vendor = sdk(client, auth)
    file = vendor.files.create(file=("a.jsonl", jsonl([row(0), row(1)])), purpose="batch")
    batch = vendor.batches.create(input_file_id=file.id, endpoint=CHAT, completion_window="24h")
    first = vendor.batches.cancel(batch.id)
    # When it is cancelled again while cancelling / Then the same cancelling batch, in one request
    with requests_sent(client) as sent:
        again = vendor.batches.cancel(batch.id)
    assert len(sent) == 1 and again.status == "cancelling" and again.cancelling_at == first.cancelling_at
    # And once finalized (cancelled) it is finished: refused, in one request
    run(local_aws, batch.id)
    with requests_sent(client) as sent, pytest.raises(openai.ConflictError) as conflict:
        vendor.batches.cancel(batch.id)
    assert conflict.value.code == "batch_not_cancellable" and len(sent) == 1, sent
    assert vendor.batches.retrieve(batch.id).status == "cancelled"


def test_an_upload_of_a_type_no_batch_file_has_is_refused_at_create(
    client: TestClient, auth: dict[str, str]
) -> None:
    vendor = sdk(client, auth, max_retries=0)
    # When an upload declares a type that complete would refuse / Then 400 on mime_type, at once
    with pytest.raises(openai.BadRequestError) as refused:
        vendor.uploads.create(bytes=10, filename="a.jsonl", mime_type="text/csv", purpose="batch")
    assert refused.value.param == "mime_type" and refused.value.code == "unsupported_file_type"
    assert "application/jsonl" in refused.value.message
    # And the JSON Lines types are taken, as before
    for mime_type in ("application/jsonl", "text/jsonl", "application/jsonl; charset=utf-8"):
        upload = vendor.uploads.create(bytes=10, filename="a.jsonl", mime_type=mime_type, purpose="batch")
        assert upload.status == "pending"


def test_a_metadata_work_order_id_that_is_no_wo_id_is_the_customers_own_tag(
    client: TestClient, auth: dict[str, str]
) -> None:
    vendor = sdk(client, auth, max_retries=0)
    file = vendor.files.create(file=("a.jsonl", jsonl([row(0)])), purpose="batch")
    # When the metadata carries the customer's own `work_order_id` (free-form, as the vendor's is)
    batch = vendor.batches.create(
        input_file_id=file.id,
        endpoint=CHAT,
        completion_window="24h",
        metadata={"work_order_id": "WO-2024-17"},
    )
    # Then the batch is created with it as plain metadata, in no work order
    assert batch.metadata == {"work_order_id": "WO-2024-17"}
    detail = client.get(f"/v1/batches/{batch.id}?include_details=true", headers=auth).json()["batch"]
    assert detail["details"]["work_order"] is None
    # And a wo_ id still names a work order: an unknown one is refused, as before
    with pytest.raises(openai.NotFoundError) as missing:
        vendor.batches.create(
            input_file_id=file.id,
            endpoint=CHAT,
            completion_window="24h",
            metadata={"work_order_id": "wo_01jzzzzzzzzzzzzzzzzzzzzzzz"},
        )
    assert missing.value.code == "work_order_not_found"
    assert missing.value.param == "metadata.work_order_id"  # the field's whole path, as docs/compat.md says
    # And a closed one names the same path
    order = client.post("/v1/work-orders", json={"name": "closed"}, headers=auth).json()
    assert (
        client.patch(f"/v1/work-orders/{order['id']}", json={"closed": True}, headers=auth).status_code == 200
    )
    with pytest.raises(openai.ConflictError) as closed:
        vendor.batches.create(
            input_file_id=file.id,
            endpoint=CHAT,
            completion_window="24h",
            metadata={"work_order_id": order["id"]},
        )
    assert closed.value.code == "work_order_closed" and closed.value.param == "metadata.work_order_id"


# -- listing and deleting files ------------------------------------------------------------------
def test_files_are_listed_by_id_with_the_vendor_cursor(client: TestClient, auth: dict[str, str]) -> None:
    vendor = sdk(client, auth, max_retries=0)
    first, second = (
        vendor.files.create(file=(f"{n}.jsonl", jsonl([row(n)])), purpose="batch") for n in range(2)
    )
    native_upload(client, auth, jsonl([{"model": LLAMA, "input": "Hi"}]), "batch_input")  # not listed
    # When the files are listed / Then the org's batch files, newest first, as ListFilesResponse
    page = vendor.files.list()
    assert [f.id for f in page.data] == [second.id, first.id]
    assert (page.first_id, page.last_id, page.has_more) == (second.id, first.id, False)
    assert page.data[0] == vendor.files.retrieve(second.id)
    # And the cursor pages them (the SDK follows it), in either order
    one = vendor.files.list(order="asc", limit=1)
    assert [f.id for f in one.data] == [first.id] and one.has_more
    assert [f.id for f in vendor.files.list(order="asc", limit=1)] == [first.id, second.id]
    assert [f.id for f in vendor.files.list(after=second.id)] == [first.id]
    # And by purpose: no batch has output files yet, and another purpose lists nothing
    assert vendor.files.list(purpose="batch_output").data == []
    assert [f.id for f in vendor.files.list(purpose="batch")] == [second.id, first.id]
    assert vendor.files.list(purpose="fine-tune").data == []
    # And the limits are the vendor's (1-10,000), a cursor must be a file id
    for bad in ({"limit": 0}, {"limit": 10001}, {"order": "up"}):
        with pytest.raises(openai.BadRequestError) as refused:
            vendor.files.list(**bad)  # type: ignore[arg-type]
        assert refused.value.param == next(iter(bad))
    with pytest.raises(openai.BadRequestError) as refused:
        vendor.files.list(after="batch_x")
    assert (refused.value.param, refused.value.code) == ("after", "invalid_cursor")


def test_a_deleted_input_file_is_gone_and_a_batch_made_from_it_runs_on(
    client: TestClient, auth: dict[str, str], org: TestOrg, local_aws: LocalStack
) -> None:
    vendor = sdk(client, auth, max_retries=0)
    file = vendor.files.create(file=("a.jsonl", jsonl([row(0), row(1)])), purpose="batch")
    batch = vendor.batches.create(input_file_id=file.id, endpoint=CHAT, completion_window="24h")
    assert uploads_keys(local_aws, f"files/{org.org_id}/{file.id}")
    # When the input file is deleted (the batch copied its rows when it was created)
    deleted = vendor.files.delete(file.id)
    # Then the answer is the vendor's DeleteFileResponse, and the file is gone everywhere
    assert (deleted.id, deleted.object, deleted.deleted) == (file.id, "file", True)
    for call in (
        lambda: vendor.files.retrieve(file.id),
        lambda: vendor.files.content(file.id),
        lambda: vendor.files.delete(file.id),  # deleting twice: 404, as the vendor answers
    ):
        with pytest.raises(openai.NotFoundError) as missing:
            call()
        assert missing.value.code == "file_not_found"
    assert file.id not in [f.id for f in vendor.files.list()]
    assert client.get(f"/v1/files/{file.id}", headers=auth).status_code == 404
    assert uploads_keys(local_aws, f"files/{org.org_id}/{file.id}") == []
    # And the batch runs to the end regardless
    run(local_aws, batch.id)
    done = vendor.batches.retrieve(batch.id)
    assert done.status == "completed" and done.request_counts is not None
    assert done.request_counts.completed == 2 and done.input_file_id == file.id
    # And a new batch cannot be made from it
    with pytest.raises(openai.NotFoundError) as missing:
        vendor.batches.create(input_file_id=file.id, endpoint=CHAT, completion_window="24h")
    assert missing.value.param == "input_file_id"


def test_deleting_the_output_files_reclaims_the_batchs_results(
    client: TestClient, auth: dict[str, str], local_aws: LocalStack
) -> None:
    vendor = sdk(client, auth, max_retries=0)
    rows = [row(0), row(1, text="Question 1 [simulate:fail]")]
    file = vendor.files.create(file=("a.jsonl", jsonl(rows)), purpose="batch")
    batch = vendor.batches.create(input_file_id=file.id, endpoint=CHAT, completion_window="24h")
    run(local_aws, batch.id)
    done = vendor.batches.retrieve(batch.id)
    assert done.output_file_id and done.error_file_id
    # The output and error files are listed with the input file (ids follow creation)
    assert [f.id for f in vendor.files.list(purpose="batch_output", order="asc")] == sorted(
        [done.output_file_id, done.error_file_id]
    )
    listed = {f.id: f for f in vendor.files.list()}
    assert listed[done.output_file_id] == vendor.files.retrieve(done.output_file_id)
    assert set(listed) == {file.id, done.output_file_id, done.error_file_id}
    # When the output file is deleted / Then it is gone, the error file and the results stay
    assert vendor.files.delete(done.output_file_id).deleted
    for call in (
        lambda: vendor.files.retrieve(done.output_file_id or ""),
        lambda: vendor.files.content(done.output_file_id or ""),
        lambda: vendor.files.delete(done.output_file_id or ""),
    ):
        with pytest.raises(openai.NotFoundError):
            call()
    assert [f.id for f in vendor.files.list(purpose="batch_output")] == [done.error_file_id]
    assert vendor.files.content(done.error_file_id).text
    assert client.get(f"/v1/batches/{batch.id}/results", headers=auth).status_code == 200
    with pytest.raises(openai.NotFoundError) as missing:  # and it is no input file to name
        vendor.batches.create(input_file_id=done.output_file_id, endpoint=CHAT, completion_window="24h")
    assert missing.value.param == "input_file_id"
    # When the error file goes too / Then the batch's result bytes are reclaimed as retention does
    vendor.files.delete(done.error_file_id)
    assert vendor.files.list(purpose="batch_output").data == []
    gone = client.get(f"/v1/batches/{batch.id}/results", headers=auth)
    assert gone.status_code == 410 and gone.json()["error"]["code"] == "results_expired"
    assert vendor.batches.retrieve(batch.id).output_file_id == done.output_file_id  # as the vendor's
    collector = wiring_for(get_settings(), SystemClock()).retention_gc
    for _ in range(20):  # a sweep takes the oldest due entries first (other tests' too)
        if batch.id in collector.collect().reclaimed or not artifact_keys(local_aws, batch.id):
            break
    assert artifact_keys(local_aws, batch.id) == [f"batches/{batch.id}/receipt.json"]


def artifact_keys(stack: LocalStack, batch_id: str) -> list[str]:
    listed = aws_client("s3").list_objects_v2(
        Bucket=stack.buckets["artifacts"], Prefix=f"batches/{batch_id}/"
    )
    return sorted(entry["Key"] for entry in listed.get("Contents", []))


def renderings(stack: LocalStack, batch_id: str) -> list[str]:
    """The keys of the batch's output and error file renderings."""
    return [key for key in artifact_keys(stack, batch_id) if "/compat/" in key]


def test_deleting_refusals(
    client: TestClient, auth: dict[str, str], org: TestOrg, local_aws: LocalStack
) -> None:
    vendor = sdk(client, auth)  # two retries: a refusal no retry settles is asked once
    # A file a native batch has not read yet (its Intake step is due): 409, not retried
    file_id = native_upload(client, auth, jsonl([row(0)]), "batch")
    created = client.post(
        "/v1/batches",
        json={"input_file_id": file_id},
        headers={**auth, "Idempotency-Key": "key-delete-in-use"},
    )
    assert created.status_code == 202, created.text
    batch_id = created.json()["batch"]["id"]
    with requests_sent(client) as sent, pytest.raises(openai.ConflictError) as in_use:
        vendor.files.delete(file_id)
    assert in_use.value.code == "file_in_use" and batch_id in in_use.value.message and len(sent) == 1
    assert in_use.value.response.headers["x-should-retry"] == "false"
    # Once the batch has read it, it may go
    run(local_aws, batch_id)
    assert vendor.files.delete(file_id).deleted
    # A native batch_input file: the native API deletes no file
    native = native_upload(client, auth, jsonl([{"model": LLAMA, "input": "Hi"}]), "batch_input")
    with pytest.raises(openai.BadRequestError) as refused:
        vendor.files.delete(native)
    assert (refused.value.code, refused.value.param) == ("invalid_file_purpose", "file_id")
    # Another org's file: 403, as retrieve answers; it stays
    other = sdk(client, new_org(credit_usd="1").key_headers("member"), max_retries=0)
    theirs = other.files.create(file=("a.jsonl", jsonl([row(0)])), purpose="batch")
    with pytest.raises(openai.PermissionDeniedError):
        vendor.files.retrieve(theirs.id)
    with pytest.raises(openai.PermissionDeniedError):
        vendor.files.delete(theirs.id)
    assert other.files.retrieve(theirs.id).status == "processed"
    # A key that may read batches but not create them lists files, and deletes none
    mine = vendor.files.create(file=("a.jsonl", jsonl([row(0)])), purpose="batch")
    reader = sdk(client, org.key_headers("billing"), max_retries=0)
    assert [f.id for f in reader.files.list()] == [mine.id]
    with pytest.raises(openai.PermissionDeniedError):
        reader.files.delete(mine.id)


def test_expiration_policies_are_checked_then_refused_naming_the_retention_settings(
    client: TestClient, auth: dict[str, str]
) -> None:
    vendor = sdk(client, auth, max_retries=0)
    file = vendor.files.create(file=("a.jsonl", jsonl([row(0)])), purpose="batch")
    policy: Any = {"anchor": "created_at", "seconds": 3600}
    calls: dict[str, Callable[[Any], object]] = {
        "expires_after": lambda p: vendor.files.create(
            file=("b.jsonl", jsonl([row(0)])), purpose="batch", expires_after=p
        ),
        "expires_after ": lambda p: vendor.uploads.create(
            bytes=10, filename="a.jsonl", mime_type="application/jsonl", purpose="batch", expires_after=p
        ),
        "output_expires_after": lambda p: vendor.batches.create(
            input_file_id=file.id, endpoint=CHAT, completion_window="24h", output_expires_after=p
        ),
    }
    for name, call in calls.items():
        param = name.strip()

        def refused(value: Any, call: Callable[[Any], object] = call) -> openai.BadRequestError:
            with pytest.raises(openai.BadRequestError) as error:
                call(value)
            return error.value

        # Out of the vendor's bounds: 400 on the field at fault, the same on every route
        for value, at in (
            ({"anchor": "created_at", "seconds": 3599}, "seconds"),
            ({"anchor": "created_at", "seconds": 2592001}, "seconds"),
            ({"anchor": "last_active_at", "seconds": 3600}, "anchor"),
            ({"seconds": 3600}, "anchor"),
        ):
            error = refused(value)
            assert (error.param, error.code) == (f"{param}.{at}", "invalid_request"), (name, value)
        # Within them: refused too (nothing expires on request), saying what keeps files instead
        error = refused(policy)
        assert (error.param, error.code) == (param, "expiration_not_supported"), name
        assert "/v1/retention-settings" in error.message and "DELETE" in error.message
    # And nothing was kept: the one file is the first one
    assert [f.id for f in vendor.files.list()] == [file.id]
    assert vendor.batches.list().data == []
