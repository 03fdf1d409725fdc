"""The vendor-compatible surface driven by the official `openai` SDK against the local stack
(`make run`): only `base_url` and the key change. Files, batches run to completion, output
and error files, list pagination, cancel, the SDK's typed errors, and a chunked upload of a
file larger than 10 MB through the Uploads API."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI
from openai.types import Batch
from openai.types.chat import ChatCompletion

from tests.e2e.local_stack import RunningStack

pytestmark = pytest.mark.e2e

LLAMA = "meta-llama/Llama-3.3-70B-Instruct"
SONNET = "claude-sonnet-4"
BATCH_TIMEOUT_SECONDS = 90.0
POLL_SECONDS = 0.25
TERMINAL = {"completed", "failed", "expired", "cancelled"}
PART_BYTES = 4 * 1024 * 1024  # one request's worth: the service's direct-upload limit


def _request(n: int, text: str, *, model: str = LLAMA, max_tokens: int = 64) -> dict[str, Any]:
    return {
        "custom_id": f"request-{n}",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens},
    }


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


@pytest.fixture
def client(local_stack: RunningStack, api: httpx.Client) -> OpenAI:
    address = f"compat-{uuid.uuid4().hex[:10]}@example.com"
    created = api.post(
        "/v1/auth/agent-register", json={"email": address, "password": "correct horse battery"}
    )
    assert created.status_code == 200, created.text
    return OpenAI(api_key=created.json()["api_key"], base_url=f"{local_stack.base_url}/v1/compat/v1")


def _wait(client: OpenAI, batch_id: str, done: Callable[[Batch], bool]) -> Batch:
    deadline = time.monotonic() + BATCH_TIMEOUT_SECONDS
    while not done(batch := client.batches.retrieve(batch_id)):
        assert time.monotonic() < deadline, f"batch not done within {BATCH_TIMEOUT_SECONDS}s: {batch}"
        time.sleep(POLL_SECONDS)
    return batch


def test_a_batch_runs_end_to_end_with_the_official_sdk(client: OpenAI, api: httpx.Client) -> None:
    rows = [_request(n, f"Question {n}: what is a routing lane?") for n in range(6)]
    rows[4] = _request(4, "Question 4 [simulate:fail]")
    # When the input file is uploaded with files.create
    file = client.files.create(file=("requests.jsonl", _jsonl(rows), "application/jsonl"), purpose="batch")
    assert file.id.startswith("file_") and file.purpose == "batch" and file.status == "processed"
    assert client.files.retrieve(file.id).bytes == len(_jsonl(rows))
    # And a batch is created from it
    batch = client.batches.create(
        input_file_id=file.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"run": "e2e"},
    )
    assert batch.status == "validating" and batch.input_file_id == file.id
    assert batch.request_counts is not None and batch.request_counts.total == 6
    # Then polling batches.retrieve reaches completed
    done = _wait(client, batch.id, lambda b: b.status in TERMINAL)
    assert done.status == "completed", done
    assert done.request_counts is not None
    assert (done.request_counts.completed, done.request_counts.failed) == (5, 1)
    assert (
        done.completed_at and done.in_progress_at and done.finalizing_at and done.metadata == {"run": "e2e"}
    )
    assert done.output_file_id and done.error_file_id
    # And the output file's lines are the successes, in the vendor's shape
    output = client.files.content(done.output_file_id)
    lines = [json.loads(line) for line in output.text.splitlines()]
    assert [line["custom_id"] for line in lines] == [f"request-{n}" for n in (0, 1, 2, 3, 5)]
    for line in lines:
        assert line["error"] is None and line["response"]["status_code"] == 200
        completion = ChatCompletion.model_validate(line["response"]["body"])  # the vendor's body
        # answered by the vendor (emulator) under its own name for the model
        assert (completion.choices[0].message.content or "").startswith("Simulated answer from ")
        assert completion.usage is not None
    assert output.response.headers["x-service-body-format"] == "normalized"
    raw = client.files.content(done.output_file_id, extra_query={"body_format": "raw"})
    assert raw.response.headers["x-service-body-format"] == "raw"
    assert len(raw.text.splitlines()) == 5
    # And the error file holds the failure
    errors = [json.loads(line) for line in client.files.content(done.error_file_id).text.splitlines()]
    assert [(e["custom_id"], e["response"], e["error"]["code"]) for e in errors] == [
        ("request-4", None, "provider_rejected")
    ]
    assert "simulated permanent failure" in errors[0]["error"]["message"]
    assert client.files.retrieve(done.output_file_id).purpose == "batch_output"
    # And it is an ordinary batch of the native API, paid from the same credits
    native = api.get(f"/v1/batches/{batch.id}", headers={"Authorization": f"Bearer {client.api_key}"})
    assert native.status_code == 200 and native.json()["batch"]["source"] == "compat"
    assert native.json()["batch"]["state"] == "completed" and native.json()["batch"]["settled_at"]

    # The SDK's typed errors: 404 for what never existed
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_01jzzzzzzzzzzzzzzzzzzzzzzz")
    with pytest.raises(openai.NotFoundError) as missing:
        client.files.retrieve("file_01jzzzzzzzzzzzzzzzzzzzzzzz")
    assert missing.value.code == "file_not_found" and missing.value.type == "invalid_request_error"
    # And a bad row is a BadRequestError naming its line
    bad = _jsonl([rows[0], {"custom_id": "x", "method": "POST", "url": "/v1/chat/completions"}])
    with pytest.raises(openai.BadRequestError) as refused:
        client.files.create(file=("bad.jsonl", bad, "application/jsonl"), purpose="batch")
    assert refused.value.body["message"].startswith("Line 2:")  # type: ignore[index]
    assert refused.value.param == "body" and refused.value.code == "invalid_jsonl_line"


def test_list_pagination_and_cancel(client: OpenAI) -> None:
    small = client.files.create(
        file=("one.jsonl", _jsonl([_request(0, "Hello")]), "application/jsonl"), purpose="batch"
    )
    created = [
        client.batches.create(
            input_file_id=small.id, endpoint="/v1/chat/completions", completion_window="24h"
        ).id
        for _ in range(3)
    ]
    # batches.list pages with the vendor's cursor: newest first, `after` the last id
    first = client.batches.list(limit=2)
    assert [b.id for b in first.data] == created[::-1][:2] and first.has_more is True
    assert first.has_next_page()
    second = first.get_next_page()
    assert [b.id for b in second.data] == [created[0]] and second.has_more is False
    assert [b.id for b in client.batches.list(limit=2)] == created[::-1]  # auto-pagination

    # batches.cancel: cancelling at once, then cancelled once finalized
    many = _jsonl([_request(n, f"Long question {n}") for n in range(300)])
    file = client.files.create(file=("many.jsonl", many, "application/jsonl"), purpose="batch")
    batch = client.batches.create(
        input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    try:
        cancelled = client.batches.cancel(batch.id)
    except openai.ConflictError:  # it finished first: a finished batch is not cancellable
        assert client.batches.retrieve(batch.id).status in TERMINAL
        return
    assert cancelled.status in ("cancelling", "cancelled") and cancelled.cancelling_at
    done = _wait(client, batch.id, lambda b: b.status in TERMINAL)
    assert done.status == "cancelled" and done.cancelled_at and done.error_file_id
    counts = done.request_counts
    assert counts is not None and counts.total == 300 and counts.completed + counts.failed == 300
    codes = {
        json.loads(line)["error"]["code"]
        for line in client.files.content(done.error_file_id).text.splitlines()
    }
    assert "canceled" in codes
    with pytest.raises(openai.ConflictError):
        client.batches.cancel(batch.id)


def test_insufficient_quota_is_a_rate_limit_error_of_type_insufficient_quota(client: OpenAI) -> None:
    # Given a batch whose estimate exceeds the $25 a new local wallet holds
    rows = [_request(n, f"Write a long essay {n}", model=SONNET, max_tokens=64_000) for n in range(100)]
    file = client.files.create(file=("costly.jsonl", _jsonl(rows), "application/jsonl"), purpose="batch")
    with pytest.raises(openai.RateLimitError) as refused:
        client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")
    # Then the SDK raises RateLimitError with the vendor's type
    assert refused.value.status_code == 429
    assert refused.value.type == "insufficient_quota" and refused.value.code == "insufficient_quota"
    # And tells the SDK not to retry: more credit, not another try, is what helps
    assert refused.value.response.headers["x-should-retry"] == "false"
    assert client.batches.list().data == []


def test_a_file_larger_than_10_mb_goes_through_upload_file_chunked(client: OpenAI, tmp_path: Path) -> None:
    # Given a JSONL file over 10 MB: more than one request can carry
    path = tmp_path / "large.jsonl"
    filler = "lorem ipsum " * 80
    with path.open("wb") as out:
        n = 0
        while out.tell() <= 10 * 1024 * 1024 + 4096:
            out.write(json.dumps(_request(n, f"{n} {filler}")).encode() + b"\n")
            n += 1
    size = path.stat().st_size
    # When it is sent with the SDK's chunked upload, in parts of one request's worth
    upload = client.uploads.upload_file_chunked(
        file=path, mime_type="application/jsonl", purpose="batch", part_size=PART_BYTES
    )
    # Then the upload is completed into a processed File of the same bytes
    assert upload.status == "completed" and upload.file is not None
    assert upload.file.bytes == size and upload.file.status == "processed"
    stored = client.files.retrieve(upload.file.id)
    assert stored.bytes == size and stored.purpose == "batch"
    content = client.files.content(upload.file.id)
    assert len(content.content) == size and content.content == path.read_bytes()
    # And a part larger than one request is refused with the part size to use
    with pytest.raises(openai.APIStatusError) as too_large:
        client.uploads.upload_file_chunked(file=path, mime_type="application/jsonl", purpose="batch")
    assert too_large.value.status_code == 413 and "part_size" in too_large.value.message
