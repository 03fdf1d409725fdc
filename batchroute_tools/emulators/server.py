"""The HTTP server the vendor emulators run in: one threading server on loopback, each vendor
under its own path prefix (docs/emulators.md).

Standard library `http.server`, because an emulator must do what a framework hides: drop a
connection without answering (a host that is down), reset it halfway through a stream, hold
back the first byte. A handler returns a `Reply`:

- `Reply.json(status, body, headers)`: a whole answer;
- `Reply.stream(chunks, headers)`: chunked transfer of `(delay_seconds, bytes)` pieces, each
  flushed as it is written (server-sent events), optionally reset after `reset_after` pieces;
- `Reply.drop()`: the connection is closed at once, with nothing written.

Routes are `(method, regex)` pairs; the regex's named groups reach the handler.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    method: str
    path: str  # without the vendor prefix and the query
    query: dict[str, str]
    headers: Mapping[str, str]  # lower-case names
    body: bytes
    params: dict[str, str] = field(default_factory=dict)  # the route's named groups

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    chunks: Iterable[tuple[float, bytes]] | None = None  # a streamed answer
    reset_after: int | None = None  # reset the connection after this many chunks
    drop: bool = False
    delay_headers: float = 0.0  # hold back the first byte this long (a silent host)

    @classmethod
    def json(cls, status: int, body: Any, headers: Mapping[str, str] | None = None) -> Reply:
        return cls(status, {"content-type": "application/json", **(headers or {})}, json.dumps(body).encode())

    @classmethod
    def raw(cls, status: int, body: bytes, content_type: str) -> Reply:
        return cls(status, {"content-type": content_type}, body)

    @classmethod
    def stream(
        cls,
        chunks: Iterable[tuple[float, bytes]],
        *,
        content_type: str = "text/event-stream",
        headers: Mapping[str, str] | None = None,
        reset_after: int | None = None,
    ) -> Reply:
        return cls(
            200, {"content-type": content_type, **(headers or {})}, chunks=chunks, reset_after=reset_after
        )

    @classmethod
    def dropped(cls) -> Reply:
        return cls(drop=True)


Handler = Callable[[Request], Reply]


@dataclass
class Vendor:
    """One emulated vendor: its path prefix and routes."""

    prefix: str  # e.g. "/openai"
    routes: list[tuple[str, re.Pattern[str], Handler]] = field(default_factory=list)
    on_stop: list[Callable[[], None]] = field(default_factory=list)  # e.g. remove its files

    def route(self, method: str, pattern: str) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.routes.append((method, re.compile(pattern + r"\Z"), handler))
            return handler

        return register

    def dispatch(self, request: Request) -> Reply:
        allowed = False
        for method, pattern, handler in self.routes:
            found = pattern.match(request.path)
            if found is None:
                continue
            allowed = True
            if method == request.method:
                request.params = found.groupdict()
                return handler(request)
        return Reply.json(
            405 if allowed else 404, {"error": {"message": f"no route {request.method} {request.path}"}}
        )


class EmulatorServer:
    """The vendors, served on 127.0.0.1 (`port=0`: any free port) in a background thread."""

    def __init__(
        self, vendors: Iterable[Vendor], *, port: int = 0, sock: socket.socket | None = None
    ) -> None:
        """`sock`: a listening socket bound elsewhere (the local stack's runner), served as is."""
        self.vendors = sorted(vendors, key=lambda v: len(v.prefix), reverse=True)
        if sock is None:
            self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler_class(self))
        else:
            self._server = ThreadingHTTPServer(
                sock.getsockname()[:2], _handler_class(self), bind_and_activate=False
            )
            self._server.socket.close()
            self._server.socket = sock
            self._server.server_address = sock.getsockname()[:2]
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> EmulatorServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="vendor-emulators", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        for vendor in self.vendors:
            for release in vendor.on_stop:
                release()

    def dispatch(self, request: Request) -> Reply:
        for vendor in self.vendors:
            if request.path == vendor.prefix or request.path.startswith(vendor.prefix + "/"):
                request.path = request.path[len(vendor.prefix) :] or "/"
                return vendor.dispatch(request)
        return Reply.json(404, {"error": {"message": f"no emulated vendor at {request.path}"}})


def _handler_class(server: EmulatorServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, chunked streams
        # TCP_NODELAY, as a vendor's front end has it: an answer goes out as its headers, then
        # its body (or each stream chunk); with Nagle's algorithm on, the body waits for the
        # caller to acknowledge the headers, which Linux delays up to 40 ms: 40 ms added to
        # every call, the sync lanes' whole throughput at 32 calls in flight.
        disable_nagle_algorithm = True
        # Buffered writes: a whole answer's head and body leave in one send when the request
        # is done (`handle_one_request` flushes), as a front end writes a small answer; a
        # stream flushes its head and each chunk as they are written.
        wbufsize = 64 * 1024

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the service's own logs say what was called

        def _handle(self) -> None:
            split = urlsplit(self.path)
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            request = Request(
                method=self.command,
                path=split.path,
                query={k: v[-1] for k, v in parse_qs(split.query).items()},
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
            try:
                reply = server.dispatch(request)
            except Exception as exc:  # an emulator bug answers like a vendor's 500, visibly
                reply = Reply.json(
                    500, {"error": {"message": f"emulator error: {type(exc).__name__}: {exc}"}}
                )
            self._write(reply)

        do_GET = do_POST = do_DELETE = do_PUT = _handle

        def _write(self, reply: Reply) -> None:
            if reply.drop:
                self._abort()
                return
            if reply.delay_headers > 0:
                time.sleep(reply.delay_headers)
                self._abort()  # the caller has given up long ago
                return
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if reply.chunks is None:
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
                return
            self.send_header("transfer-encoding", "chunked")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            self.wfile.flush()  # the head now, before the first chunk's delay
            try:
                for count, (delay, chunk) in enumerate(reply.chunks):
                    if reply.reset_after is not None and count >= reply.reset_after:
                        self._abort()
                        return
                    if delay > 0:
                        time.sleep(delay)
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the caller went away: stop writing

        def _abort(self) -> None:
            """Close the connection with a reset (SO_LINGER 0), writing nothing more."""
            self.close_connection = True
            try:
                self.wfile.flush()
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
            except OSError:
                pass

    return _Handler


def sse(event: str | None, data: Any) -> bytes:
    """One server-sent event (JSON data, or a string such as `[DONE]`)."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()
