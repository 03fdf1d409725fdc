"""Pure ASGI middleware: request ids, access log, read-only maintenance, JSON body limits,
cross-site writes with the session cookie, `nosniff`.

Pure ASGI rather than BaseHTTPMiddleware so streamed answers pass through unbuffered.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from starlette.requests import Request, cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from batchroute.config import Settings
from batchroute.domain.accounts.accounts import SESSION_COOKIE
from batchroute.domain.batches.files import JSONL_MEDIA_TYPES
from batchroute.domain.batches.json_limits import MAX_JSON_DEPTH, has_lone_surrogate, nests_deeper_than
from batchroute.errors import Forbidden, InvalidRequest, PayloadTooLarge, ServiceError
from batchroute.observability import invocation_keys, logger
from functions.api.compat_envelope import COMPAT_PREFIX
from functions.api.envelope import REQUEST_ID_HEADER
from functions.api.errors import service_error_response

MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_REQUEST_ID = REQUEST_ID_HEADER.encode()


def _request_id(scope: Scope) -> str:
    event: dict[str, Any] = scope.get("aws.event") or {}
    from_gateway = (event.get("requestContext") or {}).get("requestId")
    if from_gateway:
        return str(from_gateway)
    for name, value in scope.get("headers", []):
        if name == _REQUEST_ID and 8 <= len(value) <= 128:
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
        started = time.perf_counter()
        status_holder = {"status": 500}

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_holder["status"] = message["status"]
                headers = list(message.get("headers", []))
                headers.append((_REQUEST_ID, request_id.encode("latin-1")))
                message["headers"] = headers
            await send(message)

        with invocation_keys(correlation_id=request_id):
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

    def __init__(self, app: ASGIApp, *, enabled: bool | Callable[[], bool]) -> None:
        self.app = app
        self._enabled = enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not (scope["type"] == "http" and scope["method"] in MUTATING_METHODS and _value(self._enabled)):
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


class JsonBodyGuard:
    """Every JSON request body is at most `max_bytes` (413 `payload_too_large`) and nests at
    most MAX_JSON_DEPTH levels (400 `invalid_json`), checked before any route parses it.

    A body counts as JSON unless it is an upload (multipart, octet-stream, JSON Lines):
    routes that take uploads stream them with their own caps. The body is read once and
    handed on whole; later `receive` calls reach the server (a streamed answer still hears
    the client go away)."""

    def __init__(self, app: ASGIApp, *, max_bytes: int | Callable[[], int]) -> None:
        self.app = app
        self._max_bytes = max_bytes

    @property
    def max_bytes(self) -> int:
        return _value(self._max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in MUTATING_METHODS or _is_upload(scope):
            await self.app(scope, receive, send)
            return
        path = str(scope["path"])
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(path, self._too_large(), scope, receive, send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(path, self._too_large(), scope, receive, send)
                return
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        if nests_deeper_than(body):
            refusal = InvalidRequest(
                f"The request body nests deeper than {MAX_JSON_DEPTH} levels.",
                code="invalid_json",
                details={"max_depth": MAX_JSON_DEPTH},
            )
            await self._refuse(path, refusal, scope, receive, send)
            return
        if has_lone_surrogate(body):
            refusal = InvalidRequest(
                "The request body escapes a lone UTF-16 surrogate (such as \\ud800), which is not text.",
                code="invalid_json",
            )
            await self._refuse(path, refusal, scope, receive, send)
            return
        handed = False

        async def replay() -> Message:
            nonlocal handed
            if not handed:
                handed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(
            f"JSON bodies are at most {self.max_bytes} bytes; send large inputs as a file upload.",
            details={"max_bytes": self.max_bytes},
        )

    @staticmethod
    async def _refuse(path: str, exc: ServiceError, scope: Scope, receive: Receive, send: Send) -> None:
        await service_error_response(path, exc)(scope, receive, send)


T = TypeVar("T")


def _value(setting: T | Callable[[], T]) -> T:
    """A setting given as it is, or read per request (the app's settings, read on first use)."""
    return setting() if callable(setting) else setting


# The routes that take a file's bytes, streamed (never held whole): a body there in a file's
# type (every JSON Lines type the upload takes, or multipart) is the upload's to check
# (docs/files.md: its own size limit, line errors), not a JSON body's.
_UPLOAD_ROUTES = re.compile(r"^/v1/(files|compat/v1/files|compat/v1/uploads/[^/]+/parts)$")
_UPLOAD_TYPES = JSONL_MEDIA_TYPES | {"multipart/form-data"}
# What a route reading its own JSON body refuses outright (a file's bytes, not JSON).
_FILE_TYPES = frozenset(
    {"multipart/form-data", "application/octet-stream", "application/jsonl", "application/x-ndjson"}
)


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value)
    return None


async def json_body(request: Request) -> object:
    """The JSON body of a route that reads its own (JsonBodyGuard checked its size and depth):
    a body sent as a file (multipart, octet-stream, JSON Lines) is refused, not parsed."""
    if _media_type(request.scope) in _FILE_TYPES:
        raise InvalidRequest(
            "The request body must be JSON, sent with Content-Type: application/json.", code="invalid_json"
        )
    try:
        return json.loads(await request.body())
    except (ValueError, UnicodeDecodeError):
        raise InvalidRequest("The request body is not valid JSON.", code="invalid_json") from None


def _is_upload(scope: Scope) -> bool:
    """A file's bytes sent to a route that takes them (POST, `_UPLOAD_ROUTES`, a file's type)."""
    path = str(scope.get("path", ""))
    return (
        scope.get("method") == "POST"
        and bool(_UPLOAD_ROUTES.match(path))
        and _media_type(scope) in _UPLOAD_TYPES
    )


def _media_type(scope: Scope) -> str:
    content_type = (_header(scope, b"content-type") or b"").decode("latin-1")
    return content_type.split(";", 1)[0].strip().lower()


def _content_length(scope: Scope) -> int | None:
    raw = _header(scope, b"content-length")
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


class CookieOriginGuard:
    """A state-changing request (POST, PUT, PATCH, DELETE) that the session cookie would
    authenticate (it carries the cookie and no Authorization header: a bearer key wins over a
    cookie) must come from the service's own origin: 403 `forbidden_origin` otherwise
    (docs/auth.md, "Cross-site writes").

    The origin is the `Origin` header, else the `Referer`'s scheme and host. Trusted: the
    origin of PUBLIC_BASE_URL (the console's), any of CONSOLE_ORIGINS, and the request's own
    Host (a same-origin request; a browser never lets a page choose the Host it sends). A
    request with neither header is let through: every current browser sends `Origin` on
    these methods, so only a non-browser client (which no other site can drive) omits both.
    """

    def __init__(self, app: ASGIApp, *, trusted: Callable[[], frozenset[str]]) -> None:
        self.app = app
        self._trusted = trusted

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in MUTATING_METHODS
            or _header(scope, b"authorization") is not None
            or SESSION_COOKIE not in cookie_parser((_header(scope, b"cookie") or b"").decode("latin-1"))
        ):
            await self.app(scope, receive, send)
            return
        origin = request_origin(scope)
        if origin is None or origin in self._trusted() or origin == _own_origin(scope, origin):
            await self.app(scope, receive, send)
            return
        refusal = Forbidden(
            "A signed-in session's changes must come from the service's own pages.", code="forbidden_origin"
        )
        await service_error_response(str(scope["path"]), refusal)(scope, receive, send)


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of a URL, lower-cased; `null` when it has no host."""
    parts = urlsplit(url.strip())
    return f"{parts.scheme}://{parts.netloc}".lower() if parts.scheme and parts.netloc else "null"


def request_origin(scope: Scope) -> str | None:
    origin = _header(scope, b"origin")
    if origin is not None:
        return origin_of(origin.decode("latin-1"))
    referer = _header(scope, b"referer")
    return origin_of(referer.decode("latin-1")) if referer is not None else None


def _own_origin(scope: Scope, origin: str) -> str | None:
    """The origin a same-origin page would send: the request's Host under the origin's scheme."""
    host = _header(scope, b"host")
    return f"{origin.split('://', 1)[0]}://{host.decode('latin-1').lower()}" if host else None


def trusted_origins(settings: Settings) -> frozenset[str]:
    named = {origin_of(settings.public_base_url), *(origin_of(o) for o in settings.console_origins)}
    return frozenset(named - {"null"})  # an opaque origin is never trusted


NOSNIFF = (b"x-content-type-options", b"nosniff")


class NoSniff:
    """`X-Content-Type-Options: nosniff` on every answer: errors, streams, and the 500s that
    Starlette's outermost error middleware writes (so this wraps the whole stack: app.py)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_nosniff(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != NOSNIFF[0]]
                message["headers"] = [*headers, NOSNIFF]
            await send(message)

        await self.app(scope, receive, send_nosniff)
