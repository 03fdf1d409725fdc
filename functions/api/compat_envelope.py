"""The vendor's error shape, answered on the vendor-compatible surface (`/v1/compat/`):
`{error: {type, message, param, code}}` (docs/compat.md). functions/api/errors.py decides
when to use it; this module only builds it."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

COMPAT_PREFIX = "/v1/compat/"

# The vendor's `error.type` per HTTP status; clients (and the official SDK) branch on the status.
_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    409: "invalid_request_error",
    410: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    503: "server_error",
}
# Out of credits: the vendor answers 429 `insufficient_quota`, and retrying cannot help.
INSUFFICIENT_QUOTA_STATUS = 429
INSUFFICIENT_QUOTA = "insufficient_quota"
# The official SDK retries every 409 (it reads one as a lock timeout) unless the answer says
# `x-should-retry: false`. These are the 409s a retry can settle, left retryable: another
# request with the same Idempotency-Key still in progress, a concurrent write, a file whose
# check is still running (`file_not_ready` of an `uploaded` file). Every other 409 (a terminal
# batch, a finished upload, an Idempotency-Key used with another body, ...) stays as it is
# however often it is asked, so it says not to retry.
_TRANSIENT_CONFLICTS: frozenset[str] = frozenset({"idempotency_in_progress", "concurrent_update"})
NO_RETRY: dict[str, str] = {"x-should-retry": "false"}


class VendorErrorBody(BaseModel):
    type: str
    message: str
    param: str | None
    code: str | None


class VendorErrorEnvelope(BaseModel):
    error: VendorErrorBody


def is_compat(request: Request) -> bool:
    return request.url.path.startswith(COMPAT_PREFIX)


def vendor_error_response(
    status: int,
    message: str,
    *,
    code: str | None,
    param: str | None = None,
    error_type: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = {
        "type": error_type
        or _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error"),
        "message": message,
        "param": param,
        "code": code,
    }
    return JSONResponse(status_code=status, content={"error": body}, headers=headers)


def param_of(details: dict[str, Any] | None) -> str | None:
    """The field a service error names (`details.param`, else `details.field`)."""
    for key in ("param", "field"):
        value = (details or {}).get(key)
        if isinstance(value, str):
            return value
    return None


def conflict_is_permanent(code: str | None, details: dict[str, Any] | None) -> bool:
    """Whether a 409 answers the same however often the client retries it."""
    if code in _TRANSIENT_CONFLICTS:
        return False
    return not (code == "file_not_ready" and (details or {}).get("status") == "uploaded")


def insufficient_quota(message: str) -> JSONResponse:
    return vendor_error_response(
        INSUFFICIENT_QUOTA_STATUS,
        message,
        code=INSUFFICIENT_QUOTA,
        error_type=INSUFFICIENT_QUOTA,
        # The official SDK retries a 429 unless told not to; more credit is what helps.
        headers=dict(NO_RETRY),
    )


def compat_errors_doc(described: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """Error answers for the OpenAPI document: `{status: description}` in the vendor's shape."""
    return {status: {"model": VendorErrorEnvelope, "description": text} for status, text in described.items()}


COMPAT_ERRORS = compat_errors_doc(
    {
        400: "Invalid body, parameters or input rows (the message names the line)",
        401: "Missing or invalid credentials",
        403: "The role may not do this, or the object belongs to another organization",
        404: "No such object",
        429: "Rate limited, or `insufficient_quota`: not enough credits for the batch",
    }
)
