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

    def __init_subclass__(
        cls, *, kind: ErrorKind | None = None, code: str | None = None, **rest: Any
    ) -> None:
        """`class NotFound(ServiceError, kind="not_found", code="not_found")`: a kind's class,
        its HTTP status mapped from `kind` (functions/api/errors.py), `code` its default."""
        super().__init_subclass__(**rest)
        if kind is not None:
            cls.kind = kind
        if code is not None:
            cls.default_code = code


class InvalidRequest(ServiceError, kind="invalid", code="invalid_request"): ...


class Unauthenticated(ServiceError, kind="unauthenticated", code="unauthenticated"): ...


class PaymentRequired(ServiceError, kind="payment_required", code="insufficient_credits"): ...


class Forbidden(ServiceError, kind="forbidden", code="forbidden"): ...


class NotFound(ServiceError, kind="not_found", code="not_found"): ...


class Conflict(ServiceError, kind="conflict", code="conflict"): ...


class Gone(ServiceError, kind="gone", code="gone"): ...


class PayloadTooLarge(ServiceError, kind="too_large", code="payload_too_large"): ...


class RateLimited(ServiceError, kind="rate_limited", code="rate_limited"): ...


class Unavailable(ServiceError, kind="unavailable", code="unavailable"): ...


class TransientError(Exception):
    """A failure worth retrying (throttling, a provider 5xx, a time-out)."""


class PermanentError(Exception):
    """A failure that no retry will fix; the workflow step fails."""
