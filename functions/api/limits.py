"""Rate limits at the edge: the authenticated caller check (called once per request from
auth.current_principal) and `limit_anonymous(...)`, a dependency for the registration,
login and password endpoints. The rules live in batchroute.services.billing.rate_limiting."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from batchroute.config import get_settings
from batchroute.domain.accounts.access import Principal
from batchroute.errors import InvalidRequest
from batchroute.services.billing.rate_limiting import AnonymousBucket, RateLimiter
from batchroute.wiring import wiring_for
from functions.api.deps import get_clock
from functions.api.middleware import json_body

T = TypeVar("T")


def client_ip(request: Request) -> str:
    """The caller's address as API Gateway saw it; never X-Forwarded-For, which anyone can set."""
    event: dict[str, Any] = request.scope.get("aws.event") or {}
    context = event.get("requestContext") or {}
    source = (context.get("identity") or {}).get("sourceIp") or (context.get("http") or {}).get("sourceIp")
    if source:
        return str(source)
    return request.client.host if request.client else "unknown"


def _resolved(request: Request, dependency: Callable[[], T]) -> T:
    """A dependency's value honouring the app's overrides (create_app(settings), test clocks),
    for code that runs inside another dependency rather than being injected itself."""
    provider: Callable[[], T] = request.app.dependency_overrides.get(dependency, dependency)
    return provider()


def rate_limiter(request: Request) -> RateLimiter:
    return wiring_for(_resolved(request, get_settings), _resolved(request, get_clock)).rate_limiter


def enforce_caller_limits(request: Request, principal: Principal) -> None:
    """Per API key (or user) and per account; raises RateLimited (429 with Retry-After)."""
    if getattr(request.state, "rate_limit_checked", False):
        return  # one count per request, however many dependencies ask for the principal
    request.state.rate_limit_checked = True
    rate_limiter(request).check_caller(principal)


def limit_anonymous(bucket: AnonymousBucket) -> Callable[[Request], Awaitable[None]]:
    """Dependency for the anonymous auth endpoints, keyed by client IP; login and password
    also key by the body's normalized `email` when there is one:

        @router.post("/v1/auth/login", dependencies=[Depends(limit_anonymous("login"))])
    """

    async def dependency(request: Request) -> None:
        email = await _body_email(request) if bucket in ("login", "password") else None
        limiter = rate_limiter(request)
        await run_in_threadpool(limiter.check_anonymous, bucket, ip=client_ip(request), email=email)

    dependency.__name__ = f"limit_anonymous_{bucket}"
    return dependency


async def _body_email(request: Request) -> str | None:
    """The `email` of a JSON body, if any. The body is cached, so the route still reads it;
    a malformed body is the route's 400 to give, not this check's."""
    try:
        body = await json_body(request)
    except InvalidRequest:
        return None
    email = body.get("email") if isinstance(body, dict) else None
    return email if isinstance(email, str) and 0 < len(email) <= 320 else None
