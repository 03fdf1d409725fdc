"""JSON depth measured on raw bytes, and the guard that applies it (and the size cap) to
every JSON request body before a route runs, whether or not the client declared a length."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchroute.domain.batches.json_limits import MAX_JSON_DEPTH, nests_deeper_than
from functions.api.middleware import JsonBodyGuard


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


@pytest.mark.parametrize(
    ("raw", "limit", "deeper"),
    [
        (b"[]", 1, False),
        (b"[[]]", 1, True),
        (b'{"a": {"b": [1, 2]}}', 3, False),
        (b'{"a": {"b": [1, 2]}}', 2, True),
        (b'["[[[[[[[[", "{{{{{{{{"]', 1, False),  # brackets in strings never count
        (b'["\\"[[[[[["]', 1, False),  # nor after an escaped quote
        (b"[" * 100_000, MAX_JSON_DEPTH, True),  # unbalanced: still measured, never parsed
        (b"]]]][[", 1, True),
    ],
)
def test_depth_on_raw_bytes(raw: bytes, limit: int, deeper: bool) -> None:
    assert nests_deeper_than(raw, limit) is deeper


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab'),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=30,
)


@given(value=JSON, limit=st.integers(0, 8))
def test_depth_agrees_with_the_parsed_document(value: Any, limit: int) -> None:
    raw = json.dumps(value).encode()
    assert nests_deeper_than(raw, limit) is (_depth(value) > limit)


class _App:
    def __init__(self) -> None:
        self.body = b""
        self.called = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.called = True
        more = True
        while more:
            message = await receive()
            self.body += message.get("body", b"")
            more = message.get("more_body", False)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def _run(
    guard: JsonBodyGuard, chunks: list[bytes], headers: list[tuple[bytes, bytes]], path: str = "/v1/batches"
) -> list[Any]:
    scope = {"type": "http", "method": "POST", "path": path, "headers": headers}
    pending = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)
    ]
    sent: list[Any] = []

    async def receive() -> Any:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    asyncio.run(guard(scope, receive, send))
    return sent


def test_a_streamed_body_without_a_length_is_counted_as_it_arrives() -> None:
    app = _App()
    sent = _run(JsonBodyGuard(app, max_bytes=10), [b'{"a":', b' "0123', b'456789"}'], [])
    assert sent[0]["status"] == 413 and not app.called
    assert json.loads(sent[1]["body"])["error"]["code"] == "payload_too_large"


def test_a_declared_length_over_the_cap_is_refused_unread() -> None:
    app = _App()
    sent = _run(JsonBodyGuard(app, max_bytes=10), [b"{}"], [(b"content-length", b"11")])
    assert sent[0]["status"] == 413 and not app.called


def test_a_good_body_reaches_the_app_whole_and_uploads_pass_untouched() -> None:
    app = _App()
    sent = _run(JsonBodyGuard(app, max_bytes=100), [b'{"a":', b" [1]}"], [])
    assert sent[0]["status"] == 204 and app.body == b'{"a": [1]}'
    headers = [(b"content-type", b"multipart/form-data; boundary=x")]
    for path in ("/v1/files", "/v1/compat/v1/files", "/v1/compat/v1/uploads/upload_1/parts"):
        upload = _App()
        _run(JsonBodyGuard(upload, max_bytes=1), [b"[" * 500], headers, path)
        assert upload.body == b"[" * 500, path  # the upload route's own to check
    # a file's type sent to a route that takes no file is still a body to check
    elsewhere = _App()
    sent = _run(JsonBodyGuard(elsewhere, max_bytes=1), [b"[" * 500], headers)
    assert sent[0]["status"] == 413 and not elsewhere.called


def test_too_deep_is_invalid_json_before_the_app() -> None:
    app = _App()
    sent = _run(JsonBodyGuard(app, max_bytes=10_000), [b"[" * (MAX_JSON_DEPTH + 1)], [])
    assert sent[0]["status"] == 400 and not app.called
    assert json.loads(sent[1]["body"])["error"]["code"] == "invalid_json"
