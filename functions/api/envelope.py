"""The spec's error envelope, as a response model and a builder."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel


class ErrorBody(BaseModel):
    code: str
    message: str
    details: dict[str, Any] | None = None


class ErrorEnvelope(BaseModel):
    error: ErrorBody


# The ctx key of a validation error already in the spec's terms (a request model's refusal,
# functions/api/schemas/common.py `refusal`): errors.py answers it with its code and details.
REFUSAL = "refusal"


# Every answer carries the request's id (functions/api/middleware.py gives each request one).
REQUEST_ID_HEADER = "x-request-id"


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    details: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        body["details"] = details
    return JSONResponse(status_code=status, content={"error": body}, headers=headers)


def errors_doc(described: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """Error answers for the OpenAPI document: `{status: description}` in the envelope."""
    return {status: {"model": ErrorEnvelope, "description": text} for status, text in described.items()}


# The error answers every route may give, for the OpenAPI document.
COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorEnvelope, "description": "Invalid body or parameters"},
    429: {"model": ErrorEnvelope, "description": "Rate limited; see Retry-After"},
    500: {"model": ErrorEnvelope, "description": "Unexpected server error"},
    503: {"model": ErrorEnvelope, "description": "Read-only maintenance or a disabled store"},
}
