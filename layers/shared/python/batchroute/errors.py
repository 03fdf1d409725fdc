"""Domain errors. Services raise these; the API maps each `kind` to an HTTP status in one place
(functions/api/errors.py) and the workers decide retry or give-up from `transient`."""

from __future__ import annotations

from typing import Any, Literal

ErrorKind = Literal[
    "invalid",  # 400
    "unauthenticated",  # 401
    "payment_required",  # 402
    "forbidden",  # 403
    "not_found",  # 404
    "conflict",  # 409
    "gone",  # 410
    "too_large",  # 413
    "rate_limited",  # 429
    "unavailable",  # 503
]


class ServiceError(Exception):
    kind: ErrorKind = "invalid"
    default_code = "invalid_request"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: dict[str, Any] | None = None,
        retry_after_seconds: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.details = details
        self.retry_after_seconds = retry_after_seconds


class InvalidRequest(ServiceError):
    kind = "invalid"
    default_code = "invalid_request"


class Unauthenticated(ServiceError):
    kind = "unauthenticated"
    default_code = "unauthenticated"


class PaymentRequired(ServiceError):
    kind = "payment_required"
    default_code = "insufficient_credits"


class Forbidden(ServiceError):
    kind = "forbidden"
    default_code = "forbidden"


class NotFound(ServiceError):
    kind = "not_found"
    default_code = "not_found"


class Conflict(ServiceError):
    kind = "conflict"
    default_code = "conflict"


class Gone(ServiceError):
    kind = "gone"
    default_code = "gone"


class PayloadTooLarge(ServiceError):
    kind = "too_large"
    default_code = "payload_too_large"


class RateLimited(ServiceError):
    kind = "rate_limited"
    default_code = "rate_limited"


class Unavailable(ServiceError):
    kind = "unavailable"
    default_code = "unavailable"


class TransientError(Exception):
    """A failure worth retrying (throttling, a provider 5xx, a time-out)."""


class PermanentError(Exception):
    """A failure that no retry will fix; the workflow step fails."""
