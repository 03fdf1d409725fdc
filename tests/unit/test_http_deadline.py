"""The wall-clock deadline of an outbound exchange (adapters/http_deadline.py): every network
operation of a connection opened under `deadline(...)` waits at most the time left, and one
the deadline cut short (or started after it) raises `DeadlinePassed`.

A fake network backend and an injected clock: no socket, no sleeping. The drip over real
sockets is tests/integration/test_drip_deadline.py."""

from __future__ import annotations

import ssl
import typing
from collections.abc import Iterable

import httpcore
import pytest

from batchroute.adapters.http_deadline import (
    WRITE_SLICE_BYTES,
    DeadlineBackend,
    DeadlinePassed,
    DeadlineTransport,
    deadline,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeStream(httpcore.NetworkStream):
    """Records each operation's time-out; a byte per read, each taking `gap` on the clock.
    `stall`: the peer sends nothing, so a read waits its whole time-out and times out."""

    def __init__(self, clock: Clock, gap: float = 0.0) -> None:
        self.clock, self.gap = clock, gap
        self.timeouts: list[tuple[str, float | None]] = []
        self.written: list[bytes] = []
        self.stall = False
        self.closed = False

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self.timeouts.append(("read", timeout))
        if self.stall:
            self.clock.now += timeout or 0
            raise httpcore.ReadTimeout("timed out")
        self.clock.now += self.gap
        return b"a"

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.timeouts.append(("write", timeout))
        self.written.append(buffer)

    def close(self) -> None:
        self.closed = True

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        self.timeouts.append(("start_tls", timeout))
        return self

    def get_extra_info(self, info: str) -> typing.Any:
        return f"info:{info}"


class FakeBackend(httpcore.NetworkBackend):
    def __init__(self, stream: FakeStream) -> None:
        self.stream = stream
        self.connect_timeouts: list[float | None] = []

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        self.connect_timeouts.append(timeout)
        return self.stream


def _opened(
    clock: Clock, *, gap: float = 0.0, seconds: float = 10.0
) -> tuple[httpcore.NetworkStream, FakeStream]:
    fake = FakeStream(clock, gap)
    backend = DeadlineBackend(FakeBackend(fake))
    with deadline(clock() + seconds, clock=clock):
        stream = backend.connect_tcp("93.184.215.14", 443, timeout=30)
    return stream, fake


def test_outside_a_deadline_the_backend_is_httpcores_own() -> None:
    fake = FakeStream(Clock())
    stream = DeadlineBackend(FakeBackend(fake)).connect_tcp("93.184.215.14", 443, timeout=30)
    assert stream is fake


def test_a_byte_at_a_time_is_cut_at_the_deadline_not_one_time_out_per_byte() -> None:
    # Given a connection with 10 s left and a peer that sends a byte a second (inside the 30 s
    # read time-out: httpx alone would wait for ever)
    clock = Clock()
    stream, fake = _opened(clock, gap=1.0)
    # When the headers are read a byte at a time (the deadline outlives the `with` block)
    received = b""

    def read_headers() -> None:
        nonlocal received
        while True:
            received += stream.read(65536, timeout=30)

    with pytest.raises(DeadlinePassed):
        read_headers()
    # Then the reads stop at the deadline, each given only the time left
    assert received == b"a" * 10 and clock.now == 110.0
    assert [t for op, t in fake.timeouts] == [10.0 - n for n in range(10)]


def test_a_read_the_deadline_cut_short_is_the_deadline_and_a_short_one_a_time_out() -> None:
    clock = Clock()
    stream, fake = _opened(clock, seconds=10)
    fake.stall = True
    # A read time-out (1 s) shorter than the time left: an ordinary time-out, as httpcore's
    with pytest.raises(httpcore.ReadTimeout):
        stream.read(10, timeout=1)
    # A read time-out longer than the time left: waits only what is left, then the deadline
    with pytest.raises(DeadlinePassed):
        stream.read(10, timeout=30)
    assert fake.timeouts == [("read", 1), ("read", 9.0)] and clock.now == 110.0


def test_connect_tls_and_writes_get_the_time_left() -> None:
    clock = Clock()
    fake = FakeStream(clock)
    inner = FakeBackend(fake)
    with deadline(clock() + 4, clock=clock):
        stream = DeadlineBackend(inner).connect_tcp("93.184.215.14", 443, timeout=30)
    assert inner.connect_timeouts == [4]
    clock.now += 1
    tls = stream.start_tls(ssl.create_default_context(), "s3.customer.example", timeout=30)
    assert tls is not fake and tls.get_extra_info("socket") == "info:socket"
    clock.now += 1
    tls.write(b"x" * (2 * WRITE_SLICE_BYTES + 1), timeout=30)  # in slices, each its own wait
    assert fake.timeouts == [("start_tls", 3), ("write", 2), ("write", 2), ("write", 2)]
    assert [len(piece) for piece in fake.written] == [WRITE_SLICE_BYTES, WRITE_SLICE_BYTES, 1]
    clock.now += 2
    with pytest.raises(DeadlinePassed):  # nothing starts once the time is up
        tls.write(b"late", timeout=30)
    assert len(fake.written) == 3


def test_the_transport_reuses_no_connection() -> None:
    transport = DeadlineTransport(max_connections=5)
    pool = transport._pool
    assert isinstance(pool, httpcore.ConnectionPool)
    assert pool._max_keepalive_connections == 0 and isinstance(pool._network_backend, DeadlineBackend)
