"""A wall-clock deadline over a whole outbound HTTP exchange, enforced on the wire.

httpx's time-outs apply to each network operation, not to a request: every read waits up
to the read time-out afresh. A peer that sends its status line and headers a byte at a time
(or a TLS handshake, or reads an upload that slowly) therefore holds a request as long as it
likes, each byte inside the time-out. Checking a clock between body chunks does not help
while httpcore is still reading the headers.

So the deadline lives in the network layer: `DeadlineTransport` is httpx's own transport
(its exception mapping, its streams) over a httpcore network backend whose connections cut
every operation's time-out to the time left before the deadline in force when they were
opened (`deadline(...)`). Connect, TLS handshake (one time-out for the whole handshake in
CPython), each write of the request (in slices of at most `WRITE_SLICE_BYTES`) and each read
of the status line, headers and body: each waits at most the time left, and an operation
the deadline cut short, or one started after it, raises `DeadlinePassed`. A header dripped a
byte at a time is thus cut at the deadline, give or take the scheduler.

`DeadlinePassed` is not an httpx error: it passes through httpx and httpcore unchanged (they
close the connection on the way), so a caller tells "the deadline passed" (the exchange's own
time-out) from an ordinary per-operation time-out (`httpx.TimeoutException`), which a
retrying caller may treat differently.

A connection keeps the deadline it was opened under for its whole life, so an answer body
read after `deadline(...)` has ended is still bounded. The transport never reuses a
connection (no keep-alive): each request's connection is its own, opened under its own
deadline. Outside any `deadline(...)` the transport behaves as httpx's.
"""

from __future__ import annotations

import ssl
import time
import typing
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import httpcore
import httpx

# A write waits at most the time left per slice, so a peer that reads the request slowly
# cannot stretch one large write past the deadline by more than one slice's wait.
WRITE_SLICE_BYTES = 16 * 1024


class DeadlinePassed(Exception):
    """The exchange's deadline passed while it was on the wire (connecting, writing or reading)."""


@dataclass(frozen=True)
class _Deadline:
    at: float
    clock: Callable[[], float]

    def cut(self, timeout: float | None) -> tuple[float, bool]:
        """The time-out to give one operation (`timeout` or the time left, whichever is
        shorter) and whether the deadline is what bounds it. Raises once the time is up."""
        left = self.at - self.clock()
        if left <= 0:
            raise DeadlinePassed
        if timeout is None or left < timeout:
            return left, True
        return timeout, False


_CURRENT: ContextVar[_Deadline | None] = ContextVar("batchroute_http_deadline", default=None)


@contextmanager
def deadline(at: float, *, clock: Callable[[], float] = time.monotonic) -> Iterator[None]:
    """Connections a `DeadlineTransport` opens inside this block end by `at` (on `clock`,
    monotonic seconds), whatever the peer does; they keep the deadline once the block ends."""
    token = _CURRENT.set(_Deadline(at, clock))
    try:
        yield
    finally:
        _CURRENT.reset(token)


@dataclass(eq=False)
class _DeadlineStream(httpcore.NetworkStream):
    inner: httpcore.NetworkStream
    until: _Deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        cut, bound = self.until.cut(timeout)
        try:
            return self.inner.read(max_bytes, cut)
        except httpcore.TimeoutException:
            if bound:
                raise DeadlinePassed from None
            raise

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        view = memoryview(buffer)
        for start in range(0, len(view), WRITE_SLICE_BYTES):
            cut, bound = self.until.cut(timeout)
            try:
                self.inner.write(bytes(view[start : start + WRITE_SLICE_BYTES]), cut)
            except httpcore.TimeoutException:
                if bound:
                    raise DeadlinePassed from None
                raise

    def close(self) -> None:
        self.inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        cut, bound = self.until.cut(timeout)
        try:
            upgraded = self.inner.start_tls(ssl_context, server_hostname, cut)
        except httpcore.TimeoutException:
            if bound:
                raise DeadlinePassed from None
            raise
        return _DeadlineStream(upgraded, self.until)

    def get_extra_info(self, info: str) -> typing.Any:
        return self.inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's sync backend, its streams bound to the deadline in force at connect."""

    def __init__(self, inner: httpcore.NetworkBackend | None = None) -> None:
        self._inner = inner or httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        until = _CURRENT.get()
        if until is None:
            return self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        cut, bound = until.cut(timeout)
        try:
            stream = self._inner.connect_tcp(host, port, cut, local_address, socket_options)
        except httpcore.TimeoutException:
            if bound:
                raise DeadlinePassed from None
            raise
        return _DeadlineStream(stream, until)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:  # pragma: no cover - the senders connect over TCP only
        raise httpcore.ConnectError("unix sockets are not used by the pinned senders")

    def sleep(self, seconds: float) -> None:  # pragma: no cover - retries=0: never called
        self._inner.sleep(seconds)


class DeadlineTransport(httpx.HTTPTransport):
    """httpx's transport (TLS verified, no retries, no connection reuse) over `DeadlineBackend`."""

    def __init__(self, *, max_connections: int) -> None:
        ssl_context = httpx.create_ssl_context(verify=True)
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=0)
        super().__init__(verify=ssl_context, retries=0, limits=limits)
        # httpx builds its pool without a way to name the network backend: the same pool,
        # with ours.
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=max_connections,
            max_keepalive_connections=0,
            retries=0,
            network_backend=DeadlineBackend(),
        )
