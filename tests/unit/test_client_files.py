"""File uploads through the client against `httpx.MockTransport`, sync and async: a direct
upload up to 4 MiB (the raw JSONL body), a signed-URL upload above (start, PUT to the URL with
exactly its headers and never the API key, complete), progress callbacks that restart with a
retried PUT, and `input_file_id` quotes. An injected sleeper records the waits."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from batchroute_client import BadRequestError, File, InternalServerError, PermissionDeniedError
from batchroute_client._upload import DIRECT_UPLOAD_MAX_BYTES, upload_source, use_direct

from tests.unit.test_client_async import make as make_async
from tests.unit.test_client_sdk import Recorder, error, make

UPLOAD_URL = "http://s3.test/uploads/staging/org_1/file_1?X-Amz-Signature=abc"


def file_row(status: str = "processed", size: int = 10, **extra: Any) -> dict[str, Any]:
    return {
        "id": "file_1",
        "object": "file",
        "filename": "items.jsonl",
        "purpose": "batch_input",
        "content_type": "application/jsonl",
        "bytes": size,
        "status": status,
        "created_at": "2026-03-01T10:00:00.000Z",
        "line_count": 2,
        "item_count": 2,
        "error_count": 0,
        "errors": [],
        "error": None,
        "sha256": None if status == "uploading" else "ab" * 32,
        **extra,
    }


def signed(size: int) -> httpx.Response:
    return httpx.Response(
        201,
        json={
            "file": file_row("uploading", size),
            "upload": {
                "url": UPLOAD_URL,
                "method": "PUT",
                "headers": {"Content-Type": "application/jsonl"},
                "expires_at": "2026-03-01T10:15:00.000Z",
            },
        },
    )


LINES = b'{"customer_item_id": "a"}\n{"customer_item_id": "b"}\n'


def test_a_small_file_is_uploaded_directly_as_the_raw_body(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_bytes(LINES)
    recorder = Recorder(httpx.Response(201, json={"file": file_row(size=len(LINES))}))
    progress: list[tuple[int, int]] = []
    got = make(recorder, []).files.upload(
        path, on_progress=lambda sent, total: progress.append((sent, total))
    )
    assert isinstance(got, File) and got.usable and got.item_count == 2
    (request,) = recorder.requests
    assert (request.method, request.url.path) == ("POST", "/v1/files")
    assert request.content == LINES
    assert request.headers["content-type"] == "application/jsonl"
    assert request.headers["content-length"] == str(len(LINES))
    assert 'filename="items.jsonl"' in request.headers["content-disposition"]
    assert request.headers["authorization"] == "Bearer sk-test-secret"
    assert progress == [(0, len(LINES)), (len(LINES), len(LINES))]


def test_a_non_ascii_filename_is_sent_as_an_ascii_fallback_keeping_its_extension(tmp_path: Path) -> None:
    path = tmp_path / 'données-août "v2".jsonl'
    path.write_bytes(LINES)
    recorder = Recorder(httpx.Response(201, json={"file": file_row(size=len(LINES))}))
    assert make(recorder, []).files.upload(path).usable
    (request,) = recorder.requests
    assert request.headers["content-disposition"] == 'attachment; filename="donn_es-ao_t _v2_.jsonl"'
    assert request.content == LINES
    # the signed upload names the file in its JSON body: the name is kept whole there
    recorder = Recorder(httpx.Response(400, json={"error": {"code": "stop", "message": "stop"}}))
    with pytest.raises(BadRequestError):
        make(recorder, []).files.upload(path, method="signed")
    assert json.loads(recorder.requests[0].content)["filename"] == path.name


def test_a_large_file_goes_through_the_signed_url_and_a_failed_put_restarts(tmp_path: Path) -> None:
    size = DIRECT_UPLOAD_MAX_BYTES + 1
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"x" * size)
    recorder = Recorder(
        signed(size),
        httpx.Response(503, text="<Error>SlowDown</Error>"),
        httpx.Response(200),
        httpx.Response(200, json={"file": file_row(size=size)}),
    )
    sleeps: list[float] = []
    progress: list[tuple[int, int]] = []
    got = make(recorder, sleeps).files.upload(
        path, purpose="batch_input", on_progress=lambda sent, total: progress.append((sent, total))
    )
    assert got.status == "processed"
    start, put1, put2, complete = recorder.requests
    assert json.loads(start.content) == {"filename": "big.jsonl", "bytes": size, "purpose": "batch_input"}
    assert (put1.method, str(put1.url)) == ("PUT", UPLOAD_URL)
    assert put2.content == b"x" * size and put2.headers["content-type"] == "application/jsonl"
    assert put2.headers["content-length"] == str(size)
    assert "authorization" not in put1.headers and "authorization" not in put2.headers
    assert (complete.method, complete.url.path) == ("POST", "/v1/files/file_1/complete")
    assert sleeps == [0.5]
    # Two attempts, each reported from 0 to the whole size in 256 KiB chunks.
    starts = [i for i, (sent, _) in enumerate(progress) if sent == 0]
    assert len(starts) == 2 and progress[-1] == (size, size) and progress[starts[1] - 1] == (size, size)


def test_a_put_that_keeps_failing_raises_the_typed_error() -> None:
    recorder = Recorder(signed(5), httpx.Response(500, text="<Error/>"))
    with pytest.raises(InternalServerError) as raised:
        make(recorder, [], max_retries=1).files.upload(b"12345", method="signed")
    assert raised.value.code == "http_500"
    assert [r.method for r in recorder.requests] == ["POST", "PUT", "PUT"]


def test_the_method_choice_and_the_threshold() -> None:
    assert use_direct("auto", DIRECT_UPLOAD_MAX_BYTES) and not use_direct("auto", DIRECT_UPLOAD_MAX_BYTES + 1)
    assert use_direct("direct", 10**9) and not use_direct("signed", 1)
    with pytest.raises(ValueError, match="auto, direct or signed"):
        use_direct("ftp", 1)  # type: ignore[arg-type]
    assert upload_source(b"abc").filename == "upload.jsonl"


def test_quote_by_input_file_id_sends_no_items() -> None:
    quote = {
        "quote_id": "qlock_1",
        "expires_at": "2026-03-01T10:10:00.000Z",
        "item_count": 2,
        "pricing_estimate": {
            name: {"currency": "usd", "amount": "0.01"}
            for name in ("provider_subtotal", "service_fee", "customer_discount", "total")
        },
        "quote_lanes": [],
        "customer_explanation": "",
    }
    recorder = Recorder(httpx.Response(200, json=quote))
    make(recorder, []).quotes.model(input_file_id="file_1", routing_mode="cheapest")
    assert json.loads(recorder.requests[0].content) == {"input_file_id": "file_1", "routing_mode": "cheapest"}


def test_async_uploads_direct_and_signed_with_progress(tmp_path: Path) -> None:
    size = DIRECT_UPLOAD_MAX_BYTES + 10
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"y" * size)
    recorder = Recorder(
        httpx.Response(201, json={"file": file_row(size=len(LINES))}),
        signed(size),
        httpx.ConnectError("reset"),
        httpx.Response(200),
        httpx.Response(200, json={"file": file_row(size=size)}),
    )
    sleeps: list[float] = []
    progress: list[tuple[int, int]] = []

    async def run() -> tuple[File, File]:
        client = make_async(recorder, sleeps)
        small = await client.files.upload(LINES, filename="a.jsonl")
        large = await client.files.upload(big, on_progress=lambda s, t: progress.append((s, t)))
        return small, large

    small, large = asyncio.run(run())
    assert small.usable and large.bytes == size
    direct, start, put1, put2, complete = recorder.requests
    assert put1.method == "PUT"
    assert direct.url.path == "/v1/files" and direct.content == LINES
    assert 'filename="a.jsonl"' in direct.headers["content-disposition"]
    assert start.url.path == "/v1/files/uploads" and put2.content == b"y" * size
    assert "authorization" not in put2.headers and complete.url.path == "/v1/files/file_1/complete"
    assert sleeps == [0.5] and progress[-1] == (size, size)


def test_an_upload_error_is_reported_with_its_code() -> None:
    recorder = Recorder(error(400, "batch_preflight_failed"))
    with pytest.raises(BadRequestError) as raised:
        make(recorder, []).files.upload(b"%PDF-1.4", method="direct")
    assert raised.value.code == "batch_preflight_failed" and raised.value.status == 400


def test_the_results_artifact_streams_to_a_file_sync_and_async() -> None:
    artifact = b'{"customer_item_id": "a"}\n{"customer_item_id": "b"}\n'
    signed_url = "http://s3.test/results/batch_1.jsonl?X-Amz-Signature=x"

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/batches/batch_1/artifact-url":
            return httpx.Response(200, json={"batch_id": "batch_1", "url": signed_url, "expires_in": 900})
        assert "authorization" not in request.headers  # the signed URL carries its own credentials
        return httpx.Response(200, content=artifact)

    recorder = Recorder(answer)
    out = io.BytesIO()
    assert make(recorder, []).batches.download_artifact("batch_1", out) == len(artifact)
    assert out.getvalue() == artifact and str(recorder.requests[-1].url) == signed_url

    async_out = io.BytesIO()

    async def run() -> int:
        return await make_async(recorder, []).batches.download_artifact("batch_1", async_out)

    assert asyncio.run(run()) == len(artifact) and async_out.getvalue() == artifact

    expired = Recorder(
        httpx.Response(200, json={"batch_id": "batch_1", "url": signed_url, "expires_in": 900}),
        httpx.Response(403, text="<Error>AccessDenied</Error>"),
    )
    with pytest.raises(PermissionDeniedError):
        make(expired, []).batches.download_artifact("batch_1", io.BytesIO())
