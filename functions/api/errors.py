"""The one place where exceptions become HTTP answers."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from batchroute.errors import ErrorKind, ServiceError
from batchroute.observability import logger
from functions.api.compat_envelope import (
    COMPAT_PREFIX,
    NO_RETRY,
    conflict_is_permanent,
    insufficient_quota,
    is_compat,
    param_of,
    vendor_error_response,
)
from functions.api.envelope import REFUSAL, REQUEST_ID_HEADER, error_response

STATUS_BY_KIND: dict[ErrorKind, int] = {
    "invalid": 400,
    "unauthenticated": 401,
    "payment_required": 402,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "gone": 410,
    "too_large": 413,
    "rate_limited": 429,
    "unavailable": 503,
}

_HTTP_CODES = {
    400: "invalid_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def _validation_issues(exc: RequestValidationError) -> list[dict[str, Any]]:
    # Never echo the offending input back: it may be a password or a key.
    issues = []
    for err in exc.errors():
        location = [str(part) for part in err.get("loc", ())]
        issues.append(
            {"path": ".".join(location), "message": err.get("msg", ""), "type": err.get("type", "")}
        )
    return issues


_PARAM_LOCATIONS = frozenset({"body", "query", "path"})


def _vendor_param(error: Any) -> str | None:
    """The field a validation error is about as the vendor's `param` names it: its whole path
    below the body, query or path (`metadata.k`, `limit`, `part_ids[0]`); None for a body that
    is not JSON, or a problem of the body as a whole or of a header. The vendor-compatible
    surface only: the native answer lists `details.errors[].path` as it always has."""
    loc = list(error.get("loc") or ())
    if len(loc) < 2 or loc[0] not in _PARAM_LOCATIONS or error.get("type") == "json_invalid":
        return None
    param = ""
    for part in loc[1:]:
        param += f"[{part}]" if isinstance(part, int) else f"{'.' if param else ''}{part}"
    return param


def service_error_response(path: str, exc: ServiceError) -> JSONResponse:
    """A domain error as its HTTP answer: the spec's envelope, or the vendor's shape on the
    vendor-compatible surface. Also used by the middleware that answers before a route runs."""
    headers = None
    if exc.retry_after_seconds is not None:
        headers = {"Retry-After": str(exc.retry_after_seconds)}
    if path.startswith(COMPAT_PREFIX):
        if exc.kind == "payment_required":
            return insufficient_quota(exc.message)
        if exc.kind == "conflict" and conflict_is_permanent(exc.code, exc.details):
            headers = {**(headers or {}), **NO_RETRY}
        return vendor_error_response(
            STATUS_BY_KIND[exc.kind], exc.message, code=exc.code, param=param_of(exc.details), headers=headers
        )
    return error_response(
        STATUS_BY_KIND[exc.kind], exc.code, exc.message, details=exc.details, headers=headers
    )


async def _service_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    return service_error_response(request.url.path, exc)


def refusal_response(exc: RequestValidationError) -> JSONResponse | None:
    """A body refused in the spec's terms by its request model (functions/api/schemas/common.py
    `ContractBody`): its code, message and details, as the client has always seen them. Only
    when the body is the first problem: a bad path, query or header parameter is checked first
    and answered as it always was (the generic `invalid_request` listing every problem)."""
    errors = exc.errors()
    context = (errors[0].get("ctx") or {}) if errors else {}
    if not context.get(REFUSAL):
        return None
    return error_response(400, errors[0]["type"], errors[0]["msg"], details=context.get("details"))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    refused = refusal_response(exc)
    if refused is not None and not is_compat(request):
        return refused
    issues = _validation_issues(exc)
    if is_compat(request):
        first = issues[0] if issues else {"path": "", "message": "The request is invalid."}
        errors = exc.errors()
        param = _vendor_param(errors[0]) if errors else None
        return vendor_error_response(
            400, f"{first['path']}: {first['message']}", code="invalid_request", param=param
        )
    if any(issue["type"] == "json_invalid" for issue in issues):
        return error_response(400, "invalid_json", "The request body is not valid JSON.")
    return error_response(400, "invalid_request", "The request is invalid.", details={"errors": issues})


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    message = exc.detail if isinstance(exc.detail, str) else "Request failed."
    if exc.status_code == 404:
        message = "No such resource."
    headers = getattr(exc, "headers", None)
    if exc.status_code == 405:
        headers = {**(headers or {}), "Allow": ", ".join(_allowed_methods(request))}
    if is_compat(request):
        return vendor_error_response(exc.status_code, message, code=code, headers=headers)
    return error_response(exc.status_code, code, message, headers=headers)


def _allowed_methods(request: Request) -> list[str]:
    """Every method the path's routes take (RFC 9110: `Allow` lists them all; Starlette names
    only the first route's when several routes share the path)."""
    routes = request.app.routes
    return [
        method
        for method in _METHODS
        if any(route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes)
    ]


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    """The 500. Starlette answers it outside every middleware, so the request's id is put on
    it here."""
    logger.exception("unexpected error", extra={"path": request.url.path, "method": request.method})
    request_id = request.scope.get("state", {}).get("request_id")
    headers = {REQUEST_ID_HEADER: request_id} if request_id else None
    message = "An unexpected error occurred; it has been logged."
    if is_compat(request):
        return vendor_error_response(500, message, code="internal_error", headers=headers)
    return error_response(500, "internal_error", message, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ServiceError, _service_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)
