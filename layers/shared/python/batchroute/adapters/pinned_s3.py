"""Sends an S3 client's requests to a customer endpoint itself, pinned to an address the SSRF
guard checked an instant before (docs/delivery-targets.md, SSRF rules).

Registered on botocore's `before-send` of a client with a customer `endpoint_url`: for each
request it resolves the host and checks every address (`domain/delivery/network.py`), then connects
to a checked address: the URL names the IP, the `Host` header the original name, and TLS
sends the name as SNI and verifies the certificate against it (httpcore's `sni_hostname`),
as the webhook sender does. A DNS answer that changes between check and connect (rebinding)
therefore cannot steer a delivery inward. botocore still signs, retries and parses: only
the wire is ours. No redirects, no environment proxies, no connection reuse.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

from batchroute.domain.delivery.network import UrlGuard
from batchroute.domain.delivery.targets import BucketRefused
from batchroute.errors import InvalidRequest

MAX_ADDRESSES_TRIED = 3
# Hop-by-hop or computed headers httpx sets itself (and `Expect: 100-continue`, which it
# does not speak).
_DROPPED = frozenset({"host", "expect", "content-length", "transfer-encoding", "connection"})


@dataclass(eq=False)
class _Body:
    """A whole answer body as botocore's raw response expects it (`stream()`)."""

    content: bytes

    def stream(self, **_: Any) -> Iterator[bytes]:
        if self.content:
            yield self.content

    def read(self, *_: Any) -> bytes:
        content, self.content = self.content, b""
        return content

    def close(self) -> None:
        self.content = b""


class PinnedSender:
    def __init__(
        self,
        guard: UrlGuard,
        *,
        connect_timeout: float,
        read_timeout: float,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.guard = guard
        self._client = httpx.Client(
            transport=transport
            or httpx.HTTPTransport(
                verify=True, retries=0, limits=httpx.Limits(max_connections=20, max_keepalive_connections=0)
            ),
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
        )

    def __call__(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse:
        url = httpx.URL(request.url)
        origin = f"{url.scheme}://{url.netloc.decode('ascii')}"
        try:
            checked = self.guard.check(origin)
        except InvalidRequest as refused:
            raise BucketRefused(refused.code, refused.message) from None
        body = request.body
        if body is not None and hasattr(body, "read"):
            body = body.read()
        headers = {
            _text(name): _text(value)
            for name, value in request.headers.items()
            if name.lower() not in _DROPPED
        }
        headers["Host"] = url.netloc.decode("ascii")
        name = url.raw_host.decode("ascii")
        for address in checked.addresses[:MAX_ADDRESSES_TRIED]:
            target = url.copy_with(host=address)
            extensions = {"sni_hostname": name} if url.scheme == "https" and name != address else {}
            try:
                response = self._client.request(
                    request.method, target, content=body or b"", headers=headers, extensions=extensions
                )
            except httpx.ConnectTimeout:
                raise ConnectTimeoutError(endpoint_url=origin) from None
            except httpx.ConnectError:
                continue  # the next checked address, if any
            except httpx.TimeoutException:
                raise ReadTimeoutError(endpoint_url=origin) from None
            return AWSResponse(
                request.url, response.status_code, dict(response.headers), _Body(response.content)
            )
        raise EndpointConnectionError(endpoint_url=origin)


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value
