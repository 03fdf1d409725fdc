"""Pure ASGI middleware: request ids, access log, read-only maintenance.

Pure ASGI rather than BaseHTTPMiddleware so streamed answers pass through unbuffered.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from batchroute.observability import logger
from functions.api.compat_envelope import COMPAT_PREFIX

MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
REQUEST_ID_HEADER = b"x-request-id"


def _request_id(scope: Scope) -> str:
    event: dict[str, Any] = scope.get("aws.event") or {}
    from_gateway = (event.get("requestContext") or {}).get("requestId")
    if from_gateway:
        return str(from_gateway)
    for name, value in scope.get("headers", []):
        if name == REQUEST_ID_HEADER and 8 <= len(value) <= 128:
            return str(value.decode("latin-1"))
    return uuid.uuid4().hex


class RequestContextMiddleware:
    """Gives each request an id (the correlation id of every log line) and logs one line per request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        scope.setdefault("state", {})["request_id"] = request_id
        logger.set_correlation_id(request_id)
        started = time.perf_counter()
        status_holder = {"status": 500}

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_holder["status"] = message["status"]
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER, request_id.encode("latin-1")))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            logger.info(
                "request",
                extra={
                    "method": scope["method"],
                    "path": scope["path"],
                    "status": status_holder["status"],
                    "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                },
            )


class ReadOnlyMiddleware:
    """READ_ONLY=1: every mutating request is answered 503 `read_only`; reads keep working."""

    def __init__(self, app: ASGIApp, *, enabled: bool) -> None:
        self.app = app
        self.enabled = enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not (self.enabled and scope["type"] == "http" and scope["method"] in MUTATING_METHODS):
            await self.app(scope, receive, send)
            return
        error: dict[str, Any] = {
            "code": "read_only",
            "message": "The service is in read-only maintenance; retry later.",
        }
        if str(scope["path"]).startswith(COMPAT_PREFIX):  # the vendor's error shape there
            error = {"type": "server_error", "param": None, **error}
        body = json.dumps({"error": error}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [(b"content-type", b"application/json"), (b"retry-after", b"60")],
            }
        )
        await send({"type": "http.response.body", "body": body})
