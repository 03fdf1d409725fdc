"""Multipart uploads through the client against `httpx.MockTransport`, sync and async: each
part PUT to its own signed URL (never with the API key), a failed part retried alone, an
expired part URL signed again, `complete` with every part's ETag, then polling until the file
is `processed`; a part that keeps failing cancels the upload and raises."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from batchroute_client import InternalServerError
from batchroute_client._upload import complete_body, upload_source

from tests.unit.test_client_async import make as make_async
from tests.unit.test_client_files import file_row
from tests.unit.test_client_sdk import Recorder, make

DATA = b"0123456789"  # three parts of 4, 4 and 2 bytes


def part_url(number: int, fresh: bool = False) -> str:
    signature = "new" if fresh else "old"
    return f"http://s3.test/uploads/staging/org_1/file_1?uploadId=u&partNumber={number}&X-Amz-Signature={signature}"


def plan(numbers: list[int], fresh: bool = False) -> dict[str, Any]:
    sizes = {1: 4, 2: 4, 3: 2}
    return {
        "method": "PUT",
        "part_bytes": 4,
        "part_count": 3,
        "parts": [
            {"part_number": n, "url": part_url(n, fresh), "offset": (n - 1) * 4, "bytes": sizes[n]}
            for n in numbers
        ],
        "expires_at": "2026-03-01T10:15:00.000Z",
    }


def started() -> httpx.Response:
    upload = {
        "url": "http://s3.test/put",
        "method": "PUT",
        "headers": {},
        "expires_at": "2026-03-01T10:15:00.000Z",
    }
    body = {"file": file_row("uploading", len(DATA)), "upload": upload, "multipart": plan([1, 2, 3])}
    return httpx.Response(201, json=body)


def etag(value: str) -> httpx.Response:
    return httpx.Response(200, headers={"ETag": f'"{value}"'})


def test_parts_are_put_retried_resigned_completed_and_waited_for() -> None:
    recorder = Recorder(
        started(),
        etag("e1"),
        httpx.Response(503, text="<Error>SlowDown</Error>"),
        etag("e2"),
        httpx.Response(403, text="<Error>AccessDenied: Request has expired</Error>"),
        httpx.Response(200, json={"multipart": plan([3], fresh=True)}),
        etag("e3"),
        httpx.Response(200, json={"file": file_row("uploaded", len(DATA), line_count=0)}),
        httpx.Response(200, json={"file": file_row("uploaded", len(DATA), line_count=0)}),
        httpx.Response(200, json={"file": file_row("processed", len(DATA))}),
    )
    sleeps: list[float] = []
    progress: list[tuple[int, int]] = []
    got = make(recorder, sleeps).files.upload(
        DATA,
        method="signed",
        on_progress=lambda sent, total: progress.append((sent, total)),
        poll_interval=3.0,
    )
    assert got.status == "processed" and got.item_count == 2
    start, p1, p2a, p2b, p3a, resign, p3b, complete, poll1, poll2 = recorder.requests
    assert json.loads(start.content) == {"filename": "upload.jsonl", "bytes": len(DATA)}
    assert [(r.method, str(r.url)) for r in (p1, p2a, p2b, p3a, p3b)] == [
        ("PUT", part_url(1)),
        ("PUT", part_url(2)),
        ("PUT", part_url(2)),
        ("PUT", part_url(3)),
        ("PUT", part_url(3, fresh=True)),
    ]
    assert [p1.content, p2b.content, p3b.content] == [b"0123", b"4567", b"89"]
    assert all("authorization" not in r.headers for r in (p1, p2a, p2b, p3a, p3b))
    assert p3b.headers["content-length"] == "2"
    assert (resign.url.path, json.loads(resign.content)) == ("/v1/files/file_1/parts", {"part_numbers": [3]})
    assert complete.url.path == "/v1/files/file_1/complete"
    assert json.loads(complete.content) == {
        "parts": [
            {"part_number": 1, "etag": '"e1"'},
            {"part_number": 2, "etag": '"e2"'},
            {"part_number": 3, "etag": '"e3"'},
        ]
    }
    assert [poll1.url.path, poll2.url.path] == ["/v1/files/file_1"] * 2
    assert sleeps == [0.5, 3.0]  # the 503's backoff, then one poll interval
    # progress is the whole file's: a retried part reports again from its own start
    assert progress[0] == (0, 10) and progress[-1] == (10, 10)
    assert (4, 10) in progress and progress.count((4, 10)) >= 2


def test_a_part_that_keeps_failing_cancels_the_upload() -> None:
    recorder = Recorder(
        started(),
        httpx.Response(500, text="<Error/>"),
        httpx.Response(500, text="<Error/>"),
        httpx.Response(200, json={"file": file_row("error", len(DATA))}),
    )
    with pytest.raises(InternalServerError):
        make(recorder, [], max_retries=1).files.upload(DATA, method="signed")
    methods = [(r.method, r.url.path) for r in recorder.requests]
    assert (
        methods[-1] == ("POST", "/v1/files/file_1/cancel")
        and methods.count(("PUT", "/uploads/staging/org_1/file_1")) == 2
    )


def test_the_async_client_uploads_parts_and_waits() -> None:
    recorder = Recorder(
        started(),
        etag("a"),
        etag("b"),
        etag("c"),
        httpx.Response(200, json={"file": file_row("uploaded", len(DATA))}),
        httpx.Response(200, json={"file": file_row("processed", len(DATA))}),
    )
    sleeps: list[float] = []
    got = asyncio.run(make_async(recorder, sleeps).files.upload(DATA, method="signed"))
    assert got.status == "processed" and sleeps == []
    puts = [r for r in recorder.requests if r.method == "PUT"]
    assert [r.content for r in puts] == [b"0123", b"4567", b"89"]
    complete = recorder.requests[4]
    assert json.loads(complete.content)["parts"][2] == {"part_number": 3, "etag": '"c"'}


def test_without_waiting_the_upload_answers_the_file_as_completed() -> None:
    recorder = Recorder(
        started(),
        etag("a"),
        etag("b"),
        etag("c"),
        httpx.Response(200, json={"file": file_row("uploaded", 10)}),
    )
    got = make(recorder, []).files.upload(DATA, method="signed", wait=False)
    assert got.status == "uploaded" and len(recorder.requests) == 5


def test_part_ranges_of_a_file_and_the_complete_body(tmp_path: Any) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(DATA * 100_000)  # 1 MB: chunks of 256 KiB across a part boundary
    source = upload_source(path)
    assert b"".join(source.part_chunks(300_000, 400_000)) == (DATA * 100_000)[300_000:700_000]
    assert complete_body({2: '"b"', 1: '"a"'}) == {
        "parts": [{"part_number": 1, "etag": '"a"'}, {"part_number": 2, "etag": '"b"'}]
    }
