"""Typed errors: every non-2xx answer of the native API carries `{error: {code, message, details?}}`;
the vendor-compatible surface's carry `{error: {type, message, param, code}}`."""

from __future__ import annotations

import time
from typing import Any

import httpx

from batchroute_client._retry import parse_retry_after


class BatchrouteError(Exception):
    """Base of every error this client raises."""


class APIConnectionError(BatchrouteError):
    """The request never got an answer (network error or time-out), after the retries."""


class InvalidRequestError(BatchrouteError):
    """The request cannot be sent as built, so it is not sent nor retried: a header value HTTP
    cannot carry (a control or non-ASCII character, e.g. in an idempotency key), a URL that is
    not valid or not http(s), or an upload body whose length changed while it was read. The
    text names the call, never the value refused (a header may be the API key)."""


class WaitTimeoutError(BatchrouteError):
    """`batches.wait` gave up before the batch settled."""


class UnexpectedResponse(BatchrouteError):
    """The base URL answered, but not with the API's JSON: an HTML page (a base URL that is the
    console's, not the API's), a proxy's page, an empty body or JSON that is not the document
    the spec describes. Carries the `method`, the `url` (without its query: a signed URL's
    signature stays out of messages), the `status` and the `content_type` of the answer."""

    def __init__(self, method: str, url: str, status: int, content_type: str | None, problem: str) -> None:
        shown = content_type or "no content type"
        super().__init__(
            f"{method} {url} answered HTTP {status} ({shown}): {problem}; is the base URL the API's?"
        )
        self.method = method
        self.url = url
        self.status = status
        self.content_type = content_type
        self.problem = problem


def plain_url(url: str | httpx.URL) -> str:
    """`url` without its query and fragment (a signed URL's signature is a credential)."""
    return str(httpx.URL(url).copy_with(query=None, fragment=None))


def unexpected(
    method: str, url: str | httpx.URL, response: httpx.Response, problem: str
) -> UnexpectedResponse:
    """The `UnexpectedResponse` of `response` to `method url`."""
    return UnexpectedResponse(
        method, plain_url(url), response.status_code, response.headers.get("content-type"), problem
    )


class APIError(BatchrouteError):
    """The service answered with an error. Branch on `code` (stable); `message` may change.
    `retry_after`: the seconds the answer's `Retry-After` asked to wait, when it had one (a
    429 asking for longer than the client waits, `MAX_RETRY_AFTER`, is raised at once)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}
        self.request_id = request_id
        self.retry_after = retry_after


class BadRequestError(APIError):
    """400: invalid body or parameters, or preflight failed (`details["preflight"]`)."""


class AuthenticationError(APIError):
    """401: missing, invalid or revoked API key."""


class InsufficientFundsError(APIError):
    """402: not enough credit (`insufficient_credits`, `insufficient_funds`) or a hard spending limit."""


class PermissionDeniedError(APIError):
    """403: authenticated but not permitted."""


class NotFoundError(APIError):
    """404: unknown resource."""


class ConflictError(APIError):
    """409: idempotency conflict or an action the resource's state forbids."""


class GoneError(APIError):
    """410: content reclaimed by retention."""


class RateLimitError(APIError):
    """429: rate limited (retried automatically first)."""


class InternalServerError(APIError):
    """5xx: transient server error (retried automatically first)."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    402: InsufficientFundsError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    429: RateLimitError,
}


def error_for(status: int, body: Any, request_id: str | None = None, foreign: str | None = None) -> APIError:
    """Build the typed error of a non-2xx answer from its envelope (tolerating a bare body:
    code `http_<status>`, and as message `foreign`, what answered, else `HTTP <status>`)."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        error = {}
    code = _code_of(error) or f"http_{status}"
    message = str(error.get("message") or foreign or f"HTTP {status}")
    details = error.get("details") if isinstance(error.get("details"), dict) else None
    cls = _BY_STATUS.get(status, InternalServerError if status >= 500 else APIError)
    return cls(status, code, message, details, request_id)


def _code_of(error: dict[str, Any]) -> str | None:
    """The envelope's `code`; a vendor-shape error of the compat surface (`/v1/compat/...`,
    `{type, message, param, code}`) may leave `code` null and say what went wrong in `type`
    (`insufficient_quota`), which is then the code, rather than losing it to `http_<status>`."""
    code, kind = error.get("code"), error.get("type")
    if code:
        return str(code)
    return kind if isinstance(kind, str) and kind else None


def error_from_response(
    response: httpx.Response, method: str, url: str | httpx.URL, now: float | None = None
) -> APIError:
    """The typed error of the non-2xx `response` to `method url`, with its `Retry-After` in
    seconds (an HTTP date counted from `now`, Unix seconds). An answer that is not the API's
    error envelope (a proxy's HTML page, an empty body) keeps its status's class and the code
    `http_<status>`; its message names the URL, the status and the content type."""
    try:
        body = response.json()
    except ValueError:
        body = None
    shown = response.headers.get("content-type") or "no content type"
    foreign = (
        f"HTTP {response.status_code} from {method} {plain_url(url)} ({shown}), not the API's JSON error"
    )
    error = error_for(response.status_code, body, response.headers.get("x-request-id"), foreign)
    wait = response.headers.get("retry-after")
    error.retry_after = parse_retry_after(wait, time.time() if now is None else now)
    return error
