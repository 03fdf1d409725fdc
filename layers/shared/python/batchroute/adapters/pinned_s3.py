"""Sends an S3 client's requests to a customer endpoint itself, pinned to an address the SSRF
guard checked an instant before (docs/delivery-targets.md, SSRF rules).

Registered on botocore's `before-send` of a client with a customer `endpoint_url`: for each
request it resolves the host and checks every address (`domain/delivery/network.py`), then connects
to a checked address: the URL names the IP, the `Host` header the original name, and TLS
sends the name as SNI and verifies the certificate against it (httpcore's `sni_hostname`),
as the webhook sender does. A DNS answer that changes between check and connect (rebinding)
therefore cannot steer a delivery inward. botocore still signs, retries and parses: only
the wire is ours. No redirects, no environment proxies, no connection reuse.

The endpoint is the customer's, so nothing it sends is trusted to be small or quick:

- **Small reads.** Answers are streamed, never buffered whole. A control answer or an error
  body (everything but a successful `GetObject`) is read up to `max_answer_bytes` (1 MiB);
  past it the connection is closed and the request fails with `BucketRefused`
  `response_too_large`, having read at most the cap and one network chunk. A `GetObject`
  body is handed to botocore unread: its reader takes only what it asks for
  (`CustomerBucket.read` asks for its own limit + 1 byte), then closes.
- **A deadline per request.** Every request (connect, TLS handshake, upload, status line and
  headers, answer and body) ends within `deadline_seconds` of its start, on the wall clock:
  the connection enforces it on every network operation (`adapters/http_deadline.py`: each
  connect, write and read waits at most the time left), and the upload's 64 KiB pieces and
  the answer's chunks are also checked against the clock. An endpoint that drips its
  headers or its body a byte at a time, or reads the upload that slowly, is cut off
  (`BucketRefused` `timeout`) at the deadline, and that refusal is not retried: botocore's
  retry would give the next try a deadline of its own. A read time-out (nothing arrived in
  `read_timeout`, well before the deadline) is botocore's `ReadTimeoutError`, retried as any.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import (
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
    ResponseStreamingError,
)

from batchroute.adapters.http_deadline import DeadlinePassed, DeadlineTransport, deadline
from batchroute.domain.delivery.network import UrlGuard
from batchroute.domain.delivery.targets import BucketRefused
from batchroute.errors import InvalidRequest

MAX_ADDRESSES_TRIED = 3
MAX_ANSWER_BYTES = 1024 * 1024  # a control answer or an error body
UPLOAD_PIECE_BYTES = 64 * 1024  # the request body is sent in pieces, the deadline checked between them
# Operations whose successful answer is an object's bytes, read by the caller as it needs them.
_STREAMED = frozenset({"GetObject", "GetObjectTorrent"})
# Redirects: refused, never followed (304 is not one: nothing is asked conditionally).
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_S3_CODE = re.compile(rb"<Code>([A-Za-z][A-Za-z0-9]{0,63})</Code>")
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")
# Hop-by-hop or computed headers httpx sets itself (and `Expect: 100-continue`, which it
# does not speak).
_DROPPED = frozenset({"host", "expect", "content-length", "transfer-encoding", "connection"})


@dataclass(eq=False)
class _Body:
    """A whole (small) answer body as botocore's raw response expects it (`stream()`)."""

    content: bytes

    def stream(self, **_: Any) -> Iterator[bytes]:
        if self.content:
            yield self.content

    def read(self, *_: Any) -> bytes:
        content, self.content = self.content, b""
        return content

    def close(self) -> None:
        self.content = b""


class _Answer:
    """An answer body still on the wire, read chunk by chunk and never past the request's
    deadline; a raw stream as botocore's `StreamingBody` reads it. Closed at its end, on a
    failure, or by `close()`."""

    def __init__(
        self, response: httpx.Response, *, deadline: float, clock: Callable[[], float], origin: str
    ) -> None:
        self._response = response
        # (An answer already read, as a test transport's, is its bytes.)
        self._chunks = iter([response.content]) if response.is_stream_consumed else response.iter_raw()
        self._deadline = deadline
        self._clock = clock
        self._origin = origin
        self._pending = bytearray()
        self._ended = False
        self.received = 0  # bytes taken off the wire

    def _next_chunk(self) -> bytes:
        """The next chunk off the wire; b"" at the end."""
        if self._ended:
            return b""
        if self._clock() >= self._deadline:
            self.close()
            raise _deadline_passed()
        try:
            chunk = next(self._chunks, b"")
        except DeadlinePassed:  # the connection's own deadline (the request's), mid-read
            self.close()
            raise _deadline_passed() from None
        except httpx.TimeoutException:
            self.close()
            raise ReadTimeoutError(endpoint_url=self._origin) from None
        except httpx.HTTPError as exc:
            self.close()
            raise ResponseStreamingError(error=exc) from None
        if not chunk:
            self.close()
        self.received += len(chunk)
        return chunk

    def read_all(self, cap: int) -> bytes:
        """The whole body, refused past `cap` bytes (read: at most cap + one chunk)."""
        length = self._response.headers.get("content-length", "")
        if length.isdecimal() and int(length) > cap:
            self.close()
            raise _too_large(cap)
        while chunk := self._next_chunk():
            self._pending += chunk
            if len(self._pending) > cap:
                self.close()
                self._pending.clear()
                raise _too_large(cap)
        content = bytes(self._pending)
        self._pending.clear()
        return content

    # -- the raw stream botocore reads -------------------------------------------------------
    def read(self, amt: int | None = None, *_: Any, **__: Any) -> bytes:
        while amt is None or len(self._pending) < amt:
            chunk = self._next_chunk()
            if not chunk:
                break
            self._pending += chunk
        size = len(self._pending) if amt is None else min(amt, len(self._pending))
        data = bytes(self._pending[:size])
        del self._pending[:size]
        return data

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def readable(self) -> bool:
        return True

    def stream(self, amt: int = UPLOAD_PIECE_BYTES, **_: Any) -> Iterator[bytes]:
        while data := self.read(amt):
            yield data

    def close(self) -> None:
        self._ended = True
        self._response.close()


class PinnedSender:
    def __init__(
        self,
        guard: UrlGuard,
        *,
        connect_timeout: float,
        read_timeout: float,
        deadline_seconds: float,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.guard = guard
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.deadline_seconds = deadline_seconds
        self.max_answer_bytes = max_answer_bytes
        self._clock = clock
        self._client = httpx.Client(
            transport=transport or DeadlineTransport(max_connections=20),
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
        )

    def __call__(self, request: AWSPreparedRequest, event_name: str = "", **_: Any) -> AWSResponse:
        ends_at = self._clock() + self.deadline_seconds
        url = httpx.URL(request.url)
        origin = f"{url.scheme}://{url.netloc.decode('ascii')}"
        try:
            checked = self.guard.check(origin)
        except InvalidRequest as refused:
            raise BucketRefused(refused.code, refused.message) from None
        body = request.body
        if body is not None and hasattr(body, "read"):
            body = body.read()
        data = bytes(body or b"")
        headers = {
            _text(name): _text(value)
            for name, value in request.headers.items()
            if name.lower() not in _DROPPED
        }
        if data or any(_text(name).lower() == "content-length" for name in request.headers):
            headers["Content-Length"] = str(len(data))  # the pieces below are not chunked
        headers["Host"] = url.netloc.decode("ascii")
        if not any(name.lower() == "accept-encoding" for name in headers):
            headers["Accept-Encoding"] = "identity"  # bytes as sent: the caps count wire bytes
        streamed = event_name.rsplit(".", 1)[-1] in _STREAMED
        name = url.raw_host.decode("ascii")
        for address in checked.addresses[:MAX_ADDRESSES_TRIED]:
            left = ends_at - self._clock()
            if left <= 0:
                raise _deadline_passed()
            target = url.copy_with(host=address)
            extensions = {"sni_hostname": name} if url.scheme == "https" and name != address else {}
            outgoing = self._client.build_request(
                request.method,
                target,
                content=self._pieces(data, ends_at) if data else b"",
                headers=headers,
                extensions=extensions,
                timeout=httpx.Timeout(min(self.read_timeout, left), connect=min(self.connect_timeout, left)),
            )
            try:
                # The connection opened here keeps this deadline for every operation, the
                # status line and headers included, and for the answer read after it.
                with deadline(ends_at, clock=self._clock):
                    response = self._client.send(outgoing, stream=True)
            except httpx.ConnectTimeout:
                raise ConnectTimeoutError(endpoint_url=origin) from None
            except httpx.ConnectError:
                continue  # the next checked address, if any
            except DeadlinePassed:
                raise _deadline_passed() from None
            except httpx.TimeoutException:
                raise ReadTimeoutError(endpoint_url=origin) from None
            answer = _Answer(response, deadline=ends_at, clock=self._clock, origin=origin)
            if response.status_code in _REDIRECTS:
                raise _redirected(response, answer.read_all(self.max_answer_bytes))
            raw: _Answer | _Body = answer
            if response.status_code >= 300 or not streamed:
                raw = _Body(answer.read_all(self.max_answer_bytes))
            return AWSResponse(request.url, response.status_code, dict(response.headers), raw)
        raise EndpointConnectionError(endpoint_url=origin)

    def _pieces(self, data: bytes, ends_at: float) -> Iterator[bytes]:
        view = memoryview(data)
        for start in range(0, len(view), UPLOAD_PIECE_BYTES):
            if self._clock() >= ends_at:
                raise DeadlinePassed
            yield bytes(view[start : start + UPLOAD_PIECE_BYTES])


def _redirected(response: httpx.Response, body: bytes) -> BucketRefused:
    """A redirect, refused as it comes: botocore's S3 region redirector would send the request
    again, and a custom endpoint's answer to that again, without end. The code is the one S3
    puts in the body (`PermanentRedirect`, `TemporaryRedirect`), else `redirect_refused`."""
    named = _S3_CODE.search(body)
    code = named.group(1).decode("ascii") if named else "redirect_refused"
    region = response.headers.get("x-amz-bucket-region", "")
    where = f" (the bucket is in {region})" if _REGION.fullmatch(region) else ""
    return BucketRefused(
        code,
        f"the bucket's endpoint answered HTTP {response.status_code}, a redirect{where}; redirects "
        "are not followed: set the target's endpoint_url and region to the bucket's own",
    )


def _deadline_passed() -> BucketRefused:
    """The request's time is up: refused as `timeout`, and not a botocore error, so botocore's
    retry does not start the request again with a deadline of its own (a drip endpoint would
    hold each try to the deadline)."""
    return BucketRefused("timeout", "the bucket's endpoint did not finish within the request's deadline")


def _too_large(cap: int) -> BucketRefused:
    return BucketRefused(
        "response_too_large", f"the bucket's endpoint answered more than {cap} bytes; the answer was refused"
    )


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value
