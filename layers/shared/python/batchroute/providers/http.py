"""The HTTP every vendor adapter shares: a pooled httpx client per vendor endpoint, the
vendor's answers and network failures turned into the provider errors, Retry-After honoured.

How a failure maps (docs/providers.md, Errors):

- 429 whose error code or type is `insufficient_quota` (OpenAI: the account is out of
  credit; waiting does not clear it): ProviderUnavailable `insufficient_quota`: the lane is
  unusable, fail over (the lane runner also marks the lane unavailable and tells the operator);
- any other 429: TransientProviderError `rate_limited` with the vendor's `retry-after-ms` /
  `retry-after`: the item is retried, not sooner;
- 529, or a 5xx that says "overloaded" (Anthropic's `overloaded_error`): TransientProviderError
  `overloaded`, retried. A 4xx that merely mentions "overloaded" is not transient;
- 408, 5xx: TransientProviderError `provider_timeout` / `provider_5xx`: retried with backoff;
- 401, 403 (a bad or missing key): ProviderUnavailable `provider_auth_failed`: the whole
  lane is unusable, fail over;
- other 4xx (validation, content policy, unknown model): PermanentProviderError
  `provider_rejected`: the item fails;
- connection refused, DNS, TLS: ProviderUnavailable `provider_unreachable`: fail over;
- a time-out reading the answer: TransientProviderError `provider_timeout`: retried (a
  stream's wait for its first byte and its wait between two chunks are separate time-outs,
  `Timeouts.first_byte` and `Timeouts.idle`);
- a connection reset mid-answer: TransientProviderError `stream_interrupted`: retried (a
  stream ends there: after its first byte there is no failover).

Error messages carry the vendor's own message (truncated), never a header or a key.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Final, Protocol, TypedDict, Unpack

import httpx
from httpx_sse import EventSource

from batchroute.providers.base import (
    CONNECT_SECONDS,
    PermanentProviderError,
    ProviderError,
    ProviderUnavailable,
    TransientProviderError,
    UnknownJob,
)
from batchroute.providers.whole_answers import Answer, Failure, PooledCalls, WireFailure

_MESSAGE_CHARS: Final = 300
_MAX_RETRY_AFTER: Final = 900.0  # a vendor asking for longer is not waited on in one call
# The codes a vendor puts on a 429 that waiting does not clear (OpenAI: out of credit).
QUOTA_EXHAUSTED_CODES: Final = frozenset({"insufficient_quota"})


@dataclass(frozen=True)
class Timeouts:
    """How long a call may wait, in seconds (an endpoint's `timeouts` in the environment
    file, docs/providers.md):

    - `connect`: to open the connection;
    - `read`: for each read of a whole (not streamed) answer;
    - `first_byte`: for a stream's answer to begin (its status and headers);
    - `idle`: between two chunks of a stream once it began."""

    connect: float = CONNECT_SECONDS
    read: float = 120.0
    first_byte: float = 60.0
    idle: float = 60.0

    def __post_init__(self) -> None:
        if min(self.connect, self.read, self.first_byte, self.idle) <= 0:
            raise ValueError("every time-out must be positive")

    def httpx(self, read: float | None = None) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect, read=read or self.read, write=self.read, pool=self.connect)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The vendor's Retry-After: `retry-after-ms` (OpenAI, Anthropic) first, then
    `retry-after` in seconds or as an HTTP date; None when absent or unreadable."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return min(max(float(millis) / 1000, 0.0), _MAX_RETRY_AFTER)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return min(max(float(value), 0.0), _MAX_RETRY_AFTER)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return min(max((when - datetime.now(UTC)).total_seconds(), 0.0), _MAX_RETRY_AFTER)


def vendor_message(body: bytes | str | None) -> str:
    """The human message of a vendor's error body (`{error: {message}}` in its OpenAI,
    Anthropic and Gemini forms), else the start of the body."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    try:
        parsed = json.loads(text)
    except ValueError:
        return text.strip()[:_MESSAGE_CHARS] or "no message"
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])[:_MESSAGE_CHARS]
    if isinstance(parsed, dict) and isinstance(parsed.get("message"), str):  # Bedrock
        return str(parsed["message"])[:_MESSAGE_CHARS]
    return text.strip()[:_MESSAGE_CHARS]


def vendor_error_codes(body: bytes | str | None) -> frozenset[str]:
    """The machine-readable `code` and `type` of a vendor's error body (`{error: {code,
    type}}` as OpenAI and Anthropic send it, `{type}` at the top as well), lower-cased."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    try:
        parsed = json.loads(text)
    except ValueError:
        return frozenset()
    if not isinstance(parsed, dict):
        return frozenset()
    error = parsed.get("error")
    found = {parsed.get("type")}
    if isinstance(error, dict):
        found |= {error.get("code"), error.get("type"), error.get("status")}
    return frozenset(value.lower() for value in found if isinstance(value, str) and value)


def error_for_status(
    status: int, headers: Mapping[str, str], body: bytes | str | None, *, vendor: str
) -> ProviderError:
    """The provider error for a vendor's non-2xx answer."""
    message = f"{vendor} answered {status}: {vendor_message(body)}"
    retry_after = retry_after_seconds(headers)
    if status == 429:
        if vendor_error_codes(body) & QUOTA_EXHAUSTED_CODES:
            return ProviderUnavailable(message, code="insufficient_quota")
        return TransientProviderError(message, code="rate_limited", retry_after_seconds=retry_after)
    if status == 529 or (status >= 500 and "overloaded" in message.lower()):
        return TransientProviderError(message, code="overloaded", retry_after_seconds=retry_after)
    if status == 408:
        return TransientProviderError(message, code="provider_timeout", retry_after_seconds=retry_after)
    if status >= 500:
        return TransientProviderError(message, code="provider_5xx", retry_after_seconds=retry_after)
    if status in (401, 403):
        return ProviderUnavailable(message, code="provider_auth_failed")
    if status == 404:
        return PermanentProviderError(message, code="not_found")
    return PermanentProviderError(message, code="provider_rejected")


def error_for_exception(exc: httpx.HTTPError, *, vendor: str, before_response: bool = False) -> ProviderError:
    """The provider error for a failure of an httpx call's connection itself."""
    return error_for_failure(
        _httpx_kind(exc), type(exc).__name__, vendor=vendor, before_response=before_response
    )


def error_for_failure(
    kind: Failure, name: str, *, vendor: str, before_response: bool = False
) -> ProviderError:
    """The provider error for a failure of the connection itself (`kind` as whole_answers
    classifies it; `name` the failure's class, for the message). Before any answer arrived,
    a broken connection means the host is not serving (fail over); during one, that the
    answer was cut short (retry)."""
    if kind == "connect":
        return ProviderUnavailable(f"{vendor} is unreachable: {name}", code="provider_unreachable")
    if kind == "timeout":
        return TransientProviderError(f"{vendor} did not answer in time", code="provider_timeout")
    if kind == "broken":
        if before_response:
            return ProviderUnavailable(
                f"{vendor} closed the connection without answering: {name}", code="provider_unreachable"
            )
        return TransientProviderError(f"the connection to {vendor} broke: {name}", code="stream_interrupted")
    return TransientProviderError(f"{vendor} call failed: {name}", code="provider_error")


def _httpx_kind(exc: httpx.HTTPError) -> Failure:
    if isinstance(exc, httpx.ConnectTimeout | httpx.ConnectError | httpx.PoolTimeout):
        return "connect"
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return "broken"
    return "other"


class SendOptions(TypedDict, total=False):
    """What a request may add to its method and path: a JSON body, query parameters, its own
    read time-out (seconds), or a multipart form (`files`, `data`)."""

    json_body: Any
    params: Mapping[str, str] | None
    read_timeout: float | None
    files: Any
    data: Mapping[str, str] | None


class StatusErrors(Protocol):
    """How a vendor's non-2xx answer becomes a provider error (`error_for_status`, or a
    vendor's own refinement of it that reads more of its error body)."""

    def __call__(
        self, status: int, headers: Mapping[str, str], body: bytes | str | None, *, vendor: str
    ) -> ProviderError: ...


class VendorHttp:
    """One vendor endpoint: a base URL, the headers every call carries (the key among them),
    and one pooled client shared by every thread of the process."""

    def __init__(
        self,
        base_url: str,
        *,
        vendor: str,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts | None = None,
        transport: httpx.BaseTransport | None = None,
        max_connections: int = 64,
        status_errors: StatusErrors = error_for_status,
    ) -> None:
        self.vendor = vendor
        self.timeouts = timeouts or Timeouts()
        self._status_errors = status_errors
        self._lock = threading.Lock()
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=dict(headers or {}),
            timeout=self.timeouts.httpx(),
            transport=transport,
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            follow_redirects=False,
        )
        # Whole answers over urllib3 (providers/whole_answers.py); a transport given here (a
        # test's in-memory vendor) carries every call instead.
        self._whole = (
            PooledCalls(base_url, headers=headers or {}, max_connections=max_connections)
            if transport is None
            else None
        )

    @property
    def base_url(self) -> str:
        return str(self._client.base_url)

    def request_json(self, method: str, path: str, **options: Unpack[SendOptions]) -> Any:
        """The parsed JSON answer of a 2xx, else the mapped provider error."""
        answer = self._send(method, path, **options)
        try:
            return json.loads(answer.content)
        except ValueError as exc:
            raise TransientProviderError(
                f"{self.vendor} answered {answer.status} with a body that is not JSON",
                code="provider_bad_response",
            ) from exc

    def request_bytes(self, method: str, path: str, *, read_timeout: float | None = None) -> bytes:
        return self._send(method, path, read_timeout=read_timeout).content

    @contextmanager
    def stream_lines(
        self, method: str, path: str, *, read_timeout: float | None = None
    ) -> Iterator[Iterator[str]]:
        """The lines of a 2xx answer as they arrive (a results file), without holding it whole."""
        with self._open(
            self._client.stream(method, path, timeout=self.timeouts.httpx(read_timeout))
        ) as response:
            yield _guarded(response.iter_lines(), self.vendor)

    @contextmanager
    def sse(
        self,
        path: str,
        *,
        json_body: Any,
        first_byte_timeout: float | None = None,
        params: Mapping[str, str] | None = None,
        read_timeout: float | None = None,
    ) -> Iterator[EventSource]:
        """A server-sent-event stream (httpx-sse parses it). A failure to connect, a dropped
        connection or a non-2xx answer raises on entry, before the first byte; a failure
        while reading the events raises from the iteration.

        Two waits, each a `provider_timeout` when it runs out: for the answer to begin,
        `first_byte_timeout` (a request's own, e.g. the direct chat path's; `read_timeout` is
        its former name) else the endpoint's `Timeouts.first_byte`; then between two chunks,
        the endpoint's `Timeouts.idle`."""
        first_byte = first_byte_timeout or read_timeout or self.timeouts.first_byte
        opened = self._client.stream(
            "POST",
            path,
            json=json_body,
            params=params,
            timeout=self.timeouts.httpx(first_byte),
            headers={"accept": "text/event-stream"},
        )
        with self._open(opened) as response:
            _read_body_within(response, self.timeouts.idle)
            yield EventSource(response)

    @contextmanager
    def _open(self, opened: Any) -> Iterator[httpx.Response]:
        try:
            response = opened.__enter__()
        except httpx.HTTPError as exc:
            raise error_for_exception(exc, vendor=self.vendor, before_response=True) from exc
        try:
            if response.status_code >= 300:
                try:
                    response.read()
                except httpx.HTTPError as exc:
                    raise error_for_exception(exc, vendor=self.vendor) from exc
                raise self._status_errors(
                    response.status_code, response.headers, response.content, vendor=self.vendor
                )
            try:
                yield response
            except httpx.HTTPError as exc:
                raise error_for_exception(exc, vendor=self.vendor) from exc
        finally:
            opened.__exit__(None, None, None)

    def request_job(self, method: str, path: str, *, job_id: str) -> Any:
        """`request_json` on a batch job: a 404 means the vendor does not know the job."""
        try:
            return self.request_json(method, path)
        except PermanentProviderError as exc:
            if exc.code == "not_found":
                raise UnknownJob(f"{self.vendor} does not know batch {job_id}") from exc
            raise

    def forget(self, path: str) -> None:
        """DELETE what the vendor need not keep (a read job, a downloaded file), best effort:
        on failure the vendor's own retention applies; the results are already ours."""
        with suppress(ProviderError):
            self.request_json("DELETE", path)

    def close(self) -> None:
        self._client.close()
        if self._whole is not None:
            self._whole.close()

    def _send(self, method: str, path: str, **options: Unpack[SendOptions]) -> Answer:
        """One call whose whole answer is read: over urllib3, or httpx for a multipart form
        (or when a transport was given); a non-2xx answer raised as its provider error."""
        if self._whole is not None and options.get("files") is None and options.get("data") is None:
            try:
                answer = self._whole.send(
                    method,
                    path,
                    json_body=options.get("json_body"),
                    params=options.get("params"),
                    connect=self.timeouts.connect,
                    read=options.get("read_timeout") or self.timeouts.read,
                )
            except WireFailure as exc:
                raise error_for_failure(
                    exc.kind, exc.name, vendor=self.vendor, before_response=exc.before_response
                ) from exc
        else:
            answer = self._send_httpx(method, path, **options)
        if answer.status >= 300:
            raise self._status_errors(answer.status, answer.headers, answer.content, vendor=self.vendor)
        return answer

    def _send_httpx(self, method: str, path: str, **options: Unpack[SendOptions]) -> Answer:
        built = self._client.build_request(
            method,
            path,
            json=options.get("json_body"),
            params=options.get("params"),
            files=options.get("files"),
            data=options.get("data"),
            timeout=self.timeouts.httpx(options.get("read_timeout")),
        )
        try:
            response = self._client.send(built, stream=True)
        except httpx.HTTPError as exc:
            raise error_for_exception(exc, vendor=self.vendor, before_response=True) from exc
        try:
            response.read()
        except httpx.HTTPError as exc:  # the answer began, then broke off
            raise error_for_exception(exc, vendor=self.vendor) from exc
        finally:
            response.close()
        return Answer(response.status_code, response.headers, response.content)


def _read_body_within(response: httpx.Response, seconds: float) -> None:
    """From now on each wait for the next chunk of `response` is at most `seconds`. The
    transport reads the request's read time-out when the body starts to be read (after the
    status and headers came within the first-byte time-out), so changing it here makes the
    body's reads use the idle time-out."""
    timeout = response.request.extensions.get("timeout")
    changed = dict(timeout) if isinstance(timeout, Mapping) else {}
    changed["read"] = seconds
    response.request.extensions["timeout"] = changed


def _guarded(lines: Iterator[str], vendor: str) -> Iterator[str]:
    try:
        yield from lines
    except httpx.HTTPError as exc:
        raise error_for_exception(exc, vendor=vendor) from exc


def event_json(data: str, *, vendor: str) -> dict[str, Any]:
    """A stream event's JSON object ({} for any other JSON value); an event that is not JSON
    means the answer broke."""
    try:
        parsed = json.loads(data)
    except ValueError as exc:
        raise TransientProviderError(
            f"{vendor} sent a stream event that is not JSON", code="provider_bad_response"
        ) from exc
    return parsed if isinstance(parsed, dict) else {}
