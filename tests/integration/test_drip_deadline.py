"""A deadline over the whole exchange: a peer that drips its response headers (or its TLS
handshake) a byte at a time, each byte well inside the per-read time-out, is cut off at the
attempt's deadline, for the webhook sender (docs/webhooks.md) and for the pinned S3 sender of
a customer's bucket (docs/delivery-targets.md, "Small reads and a deadline").

Real sockets on 127.0.0.1 (loopback admitted as in local development), short deadlines (1 s)
and a server that sends a byte every 0.1 s for far longer: each test takes about a second."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import pytest

from batchroute.adapters.customer_buckets import CustomerBuckets
from batchroute.adapters.webhook_sender import WebhookSender
from batchroute.domain.delivery.network import UrlGuard
from batchroute.domain.delivery.targets import BucketRefused, DeliveryTarget
from batchroute.domain.delivery.webhooks import AttemptOutcome

DEADLINE = 1.0
SLACK = 1.0  # a loaded 2-core machine's scheduling, not the peer's drip
DRIP_SECONDS = 8.0  # how long the peer would go on (the old code waited all of it)
GAP = 0.1  # between dripped bytes: far inside every per-read time-out below

Mode = Literal["headers", "body", "tls"]


@dataclass
class DripServer:
    """Answers each connection by dripping: `headers`: the status line, then one header byte
    at a time; `body`: whole headers at once, then the body a byte at a time; `tls`: the
    start of a TLS record a byte at a time (the handshake never completes)."""

    mode: Mode = "headers"
    port: int = 0
    connections: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, scheme: str = "http", path: str = "/hook") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def handle(self, conn: socket.socket) -> None:
        with self.lock:
            self.connections += 1
        try:
            conn.settimeout(5)
            if self.mode == "tls":
                conn.recv(65536)  # the ClientHello
                first, drip = b"\x16\x03\x03\x40\x00", b"\x02"  # a 16 KiB handshake record ...
            else:
                data = b""
                while b"\r\n\r\n" not in data:
                    piece = conn.recv(65536)
                    if not piece:
                        return
                    data += piece
                if self.mode == "headers":
                    first, drip = b"HTTP/1.1 200 OK\r\nX-Slow: ", b"a"
                else:
                    first, drip = (
                        b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n",
                        b"a",
                    )
            conn.sendall(first)
            ends = time.monotonic() + DRIP_SECONDS
            while time.monotonic() < ends and not self.stop.wait(GAP):
                conn.sendall(drip)  # ... that never ends in time
        except OSError:
            pass  # the client hung up: the point
        finally:
            conn.close()


@pytest.fixture
def drip() -> Iterator[DripServer]:
    server = DripServer()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    server.port = listener.getsockname()[1]

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=server.handle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        listener.close()


def _guard() -> UrlGuard:
    return UrlGuard(allow_loopback=True, environment="local")


def _send_timed(sender: WebhookSender, url: str) -> tuple[AttemptOutcome, float]:
    started = time.monotonic()
    outcome = sender.send(url, b'{"id":"evt_1"}', {"X-Service-Event": "batch.completed"})
    return outcome, time.monotonic() - started


# -- the webhook sender --------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "scheme"), [("headers", "http"), ("tls", "https")])
def test_a_receiver_dripping_its_headers_or_handshake_is_cut_at_the_attempts_deadline(
    drip: DripServer, mode: Mode, scheme: str
) -> None:
    # Given a receiver that drips its answer's headers (or its TLS handshake), and an
    # attempt of 1 s (production: 10 s)
    drip.mode = mode
    sender = WebhookSender(_guard(), timeout_seconds=DEADLINE)
    # When an attempt is made
    outcome, took = _send_timed(sender, drip.url(scheme))
    # Then it ends at its deadline, as an ordinary time-out: a failed attempt, retried later
    assert took < DEADLINE + SLACK, f"the attempt took {took:.1f} s"
    assert (outcome.status_code, outcome.error) == (None, "timed out after 1 s")
    assert drip.connections == 1


def test_a_receiver_whose_status_came_in_time_keeps_it_when_its_body_drips(drip: DripServer) -> None:
    # Given a receiver that answers 200 at once, then drips its body
    drip.mode = "body"
    sender = WebhookSender(_guard(), timeout_seconds=DEADLINE)
    outcome, took = _send_timed(sender, drip.url())
    # Then reading the rest stops at the deadline, and the attempt is the 200 it received
    assert took < DEADLINE + SLACK, f"the attempt took {took:.1f} s"
    assert (outcome.status_code, outcome.error) == (200, None)


# -- the pinned S3 sender --------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "scheme"), [("headers", "http"), ("body", "http"), ("tls", "https")])
def test_a_bucket_endpoint_dripping_its_answer_is_refused_at_the_requests_deadline(
    drip: DripServer, mode: Mode, scheme: str
) -> None:
    # Given a customer endpoint that drips its answer's headers (its body, its handshake)
    drip.mode = mode
    target = DeliveryTarget(
        target_id="dt_1",
        org_id="org_1",
        name="drip",
        bucket="customer-results",
        access_key_id="AKIAEXAMPLEKEY01",
        secret_sealed="sealed",
        endpoint_url=f"{scheme}://127.0.0.1:{drip.port}",
        region="us-east-1",
    )
    # A delivery's two tries, with per-operation time-outs well above the deadline: only the
    # deadline can cut a drip short
    buckets = CustomerBuckets(
        _guard(), connect_timeout=3, read_timeout=3, deadline_seconds=DEADLINE, max_attempts=2
    )
    bucket = buckets.open(target, "secret-value-0123456789")
    # When an object is put
    started = time.monotonic()
    with pytest.raises(BucketRefused) as refused:
        bucket.put("batchroute-test.json", b"{}", content_type="application/json")
    took = time.monotonic() - started
    # Then the request is refused as `timeout` at its deadline, and not tried again
    assert took < DEADLINE + SLACK, f"the request took {took:.1f} s"
    assert refused.value.code == "timeout"
    assert drip.connections == 1
