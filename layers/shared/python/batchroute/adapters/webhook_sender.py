"""Sends one signed webhook POST to a customer URL, through the SSRF guard, pinned.

Every attempt resolves the host and checks every address (`domain/delivery/network.py`), then
connects to a checked address itself: the request URL names the IP, the `Host` header the
original name, and TLS sends the name as SNI and verifies the certificate against it
(httpcore's `sni_hostname` extension). A DNS answer that changes between check and connect
(rebinding) therefore cannot steer the request to an internal address.

No redirects (a 3xx is a failed attempt), no proxies from the environment, no connection
reuse (a pooled connection verified for one name is never used for another), at most
64 KiB of the answer read and none of it kept.

At most `timeout_seconds` (10 s) per attempt, on the wall clock, for the whole exchange:
connecting, the TLS handshake, sending the request, and reading the status line, headers and
answer (`adapters/http_deadline.py`: every network operation waits at most the time left).
A receiver that drips its headers a byte at a time is cut off at the deadline with the same
outcome as any time-out (`timed out after 10 s`). One whose status and headers arrived in
time keeps its status; reading the rest of its answer simply stops at the deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import httpx

from batchroute.adapters.http_deadline import DeadlinePassed, DeadlineTransport, deadline
from batchroute.domain.delivery.network import UrlGuard
from batchroute.domain.delivery.webhooks import AttemptOutcome, parse_retry_after
from batchroute.errors import InvalidRequest

USER_AGENT = "batchroute-webhooks/1.0"
TIMEOUT_SECONDS = 10.0
MAX_RESPONSE_BYTES = 64 * 1024
# A host may resolve to many addresses; trying a few covers a dead one without letting a
# long answer list multiply the time an attempt takes.
MAX_ADDRESSES_TRIED = 3


class WebhookSender:
    def __init__(
        self,
        guard: UrlGuard = UrlGuard(),
        *,
        transport: httpx.BaseTransport | None = None,
        timeout_seconds: float = TIMEOUT_SECONDS,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        user_agent: str = USER_AGENT,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.guard = guard  # loopback receivers: a local-development convenience, never in production
        self.timeout_seconds = timeout_seconds
        self.max_response_bytes = max_response_bytes
        self.user_agent = user_agent
        self._now = now or (lambda: datetime.now(UTC))
        self._client = httpx.Client(
            transport=transport or DeadlineTransport(max_connections=50),
            follow_redirects=False,
            trust_env=False,
            timeout=timeout_seconds,
        )

    def close(self) -> None:
        self._client.close()

    def send(self, url: str, raw_body: bytes, headers: Mapping[str, str]) -> AttemptOutcome:
        """POST `raw_body` to `url` with `headers` (the signature headers) and report the outcome."""
        started = time.monotonic()
        ends_at = started + self.timeout_seconds

        def outcome(status: int | None, error: str | None, retry_after: int | None = None) -> AttemptOutcome:
            elapsed = int((time.monotonic() - started) * 1000)
            return AttemptOutcome(status, error[:300] if error else None, elapsed, retry_after)

        try:
            checked = self.guard.check(url)
        except InvalidRequest as exc:
            return outcome(None, f"{exc.code}: {exc.message}")
        try:
            original = httpx.URL(checked.url)
            host_header = original.netloc.decode("ascii")
            name = original.raw_host.decode("ascii")
        except (httpx.InvalidURL, UnicodeError) as exc:
            return outcome(None, f"invalid_url: {exc}")
        request_headers = {
            **headers,
            "Host": host_header,
            "Content-Type": "application/json",
            "User-Agent": self.user_agent,
            "Accept-Encoding": "identity",
        }

        last_error = "no address to connect to"
        for address in checked.addresses[:MAX_ADDRESSES_TRIED]:
            remaining = ends_at - time.monotonic()
            if remaining <= 0:
                return outcome(None, f"timed out after {self.timeout_seconds:g} s")
            target = original.copy_with(host=address)  # connect to the checked address only
            extensions = {"sni_hostname": name} if checked.scheme == "https" and name != address else {}
            try:
                # The deadline bounds the whole exchange, headers included (each read's own
                # time-out alone would let a byte-a-time receiver hold the attempt).
                with (
                    deadline(ends_at),
                    self._client.stream(
                        "POST",
                        target,
                        content=raw_body,
                        headers=request_headers,
                        extensions=extensions,
                        timeout=httpx.Timeout(remaining),
                    ) as response,
                ):
                    self._drain(response, ends_at)
                    retry_after = parse_retry_after(response.headers.get("retry-after"), now=self._now())
                    return outcome(response.status_code, None, retry_after)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                last_error = f"could not connect to {address}: {_reason(exc)}"
                continue  # the next checked address, if any
            except (httpx.TimeoutException, DeadlinePassed):
                return outcome(None, f"timed out after {self.timeout_seconds:g} s")
            except httpx.HTTPError as exc:
                return outcome(None, f"{type(exc).__name__}: {_reason(exc)}")
        return outcome(None, last_error)

    def _drain(self, response: httpx.Response, ends_at: float) -> None:
        """Read (and drop) at most max_response_bytes, within the attempt's time: the status
        already arrived, so an answer still coming at the deadline is left unread."""
        read = 0
        try:
            for chunk in response.iter_raw():
                read += len(chunk)
                if read >= self.max_response_bytes or time.monotonic() >= ends_at:
                    break
        except DeadlinePassed:
            return


def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__
