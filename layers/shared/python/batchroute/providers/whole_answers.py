"""Whole (not streamed) vendor answers over urllib3's connection pools.

A sync lane makes one call an item, tens of thousands in a batch, and the client's own cost
per call is the lane's largest cost in the service's CPU (bench/RESULTS.md, "Issue 30,
point 3"): httpx's client spends about twice urllib3's on the same call (request and
response models, cookies, URL merging, its own pool's locks). Calls whose whole answer is
read at once (JSON bodies, file downloads) therefore go through urllib3, the pool boto3
already ships in the layer; streams (server-sent events, results files) and multipart
uploads stay on httpx and httpx-sse (providers/http.py).

Same request on the wire as httpx's: the endpoint's headers, JSON bodies compact UTF-8
(no NaN), redirects not followed, no retries here (the lane retries, with the vendor's
Retry-After). A failure is classified as httpx's are, so both map to the same provider
errors (`http.error_for_failure`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import urlencode

import certifi
import urllib3
from urllib3 import exceptions as wire

# What httpx sends when the caller does not say (the answer is decoded either way).
_DEFAULT_HEADERS: Final = {"accept": "*/*", "accept-encoding": "gzip, deflate"}
_NUM_POOLS: Final = 8  # hosts an endpoint talks to: its API host, a results host

Failure = Literal["connect", "timeout", "broken", "other"]


@dataclass(frozen=True)
class Answer:
    """A vendor's whole answer: status, headers (case-insensitive), body."""

    status: int
    headers: Mapping[str, str]
    content: bytes


class WireFailure(Exception):
    """The call failed on the network; `before_response` says whether any answer began."""

    def __init__(self, kind: Failure, name: str, *, before_response: bool) -> None:
        super().__init__(name)
        self.kind = kind
        self.name = name
        self.before_response = before_response


class PooledCalls:
    """One endpoint's whole-answer calls: its base URL and headers, one pool per host,
    shared by every thread of the process."""

    def __init__(self, base_url: str, *, headers: Mapping[str, str], max_connections: int) -> None:
        self._base = base_url.rstrip("/")
        self._headers = {**_DEFAULT_HEADERS, **{k.lower(): v for k, v in headers.items()}}
        self._json_headers = {**self._headers, "content-type": "application/json"}
        self._pools = urllib3.PoolManager(
            num_pools=_NUM_POOLS, maxsize=max_connections, block=True, ca_certs=certifi.where()
        )

    def send(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        connect: float,
        read: float,
    ) -> Answer:
        body = None if json_body is None else json_bytes(json_body)
        headers = self._headers if body is None else self._json_headers
        try:
            response = self._pools.urlopen(
                method,
                self._url(path, params),
                body=body,
                headers=headers,
                retries=False,
                redirect=False,
                assert_same_host=False,
                timeout=urllib3.Timeout(connect=connect, read=read),
                pool_timeout=connect,
                preload_content=False,
            )
        except (wire.HTTPError, OSError) as exc:
            raise WireFailure(_kind(exc), type(exc).__name__, before_response=True) from exc
        try:
            content = response.read()
        except (wire.HTTPError, OSError) as exc:  # the answer began, then broke off
            raise WireFailure(_kind(exc), type(exc).__name__, before_response=False) from exc
        finally:
            response.release_conn()
        return Answer(response.status, response.headers, content)

    def close(self) -> None:
        self._pools.clear()

    def _url(self, path: str, params: Mapping[str, str] | None) -> str:
        url = path if path.startswith(("http://", "https://")) else self._base + path
        if params:
            url += ("&" if "?" in url else "?") + urlencode(params)
        return url


def json_bytes(body: Any) -> bytes:
    """A JSON body as httpx encodes one: compact, UTF-8, NaN refused."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _kind(exc: BaseException) -> Failure:
    """httpx's classes of failure: could not connect (or no free connection), waited too
    long for the answer, the connection broke, anything else."""
    if isinstance(exc, wire.ConnectTimeoutError | wire.EmptyPoolError | wire.SSLError):
        return "connect"  # NewConnectionError and NameResolutionError are ConnectTimeoutErrors
    if isinstance(exc, wire.TimeoutError):
        return "timeout"
    if isinstance(exc, wire.ProtocolError | OSError):
        return "broken"
    return "other"
