"""Authentication and authorization as FastAPI dependencies; the rules live in
batchroute.domain.accounts.access and batchroute.services.accounts.authentication."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Annotated

from fastapi import Depends, Request

from batchroute.adapters.dynamo.identity import IdentityStore
from batchroute.clock import Clock
from batchroute.config import get_settings
from batchroute.domain.accounts.access import Permission, Principal, authorize, require_user_session
from batchroute.errors import Unauthenticated
from batchroute.services.accounts.authentication import SESSION_COOKIE, Authenticator
from batchroute.wiring import wiring_for
from functions.api.deps import get_clock
from functions.api.limits import enforce_caller_limits


@lru_cache(maxsize=1)
def identity_store() -> IdentityStore:
    """The identity store of the current settings (tests seed callers through it)."""
    return wiring_for().identity


def get_authenticator(clock: Annotated[Clock, Depends(get_clock)]) -> Authenticator:
    return wiring_for(get_settings(), clock).authenticator


AuthenticatorDep = Annotated[Authenticator, Depends(get_authenticator)]


def current_principal(request: Request, authenticator: AuthenticatorDep) -> Principal:
    principal = authenticator.authenticate(
        authorization=request.headers.get("authorization"),
        session_cookie=request.cookies.get(SESSION_COOKIE),
    )
    request.state.principal = principal
    enforce_caller_limits(request, principal)  # per key and per account: 429 with Retry-After
    return principal


def optional_principal(request: Request, authenticator: AuthenticatorDep) -> Principal | None:
    """For endpoints that also serve anonymous callers: bad credentials count as none."""
    try:
        return current_principal(request, authenticator)
    except Unauthenticated:
        return None


def session_principal(principal: Annotated[Principal, Depends(current_principal)]) -> Principal:
    require_user_session(principal)
    return principal


def require(permission: Permission, *, session_only: bool = False) -> Callable[..., Principal]:
    """Dependency: an authenticated principal whose role grants `permission`."""
    base = session_principal if session_only else current_principal

    def dependency(principal: Principal = Depends(base)) -> Principal:  # string annotations cannot see `base`
        authorize(principal, permission)
        return principal

    # Read back by route_permissions (docs/roles.md's route table is checked against it).
    dependency.permission = permission  # type: ignore[attr-defined]
    dependency.session_only = session_only  # type: ignore[attr-defined]
    return dependency


CurrentPrincipal = Annotated[Principal, Depends(current_principal)]
OptionalPrincipal = Annotated[Principal | None, Depends(optional_principal)]
SessionPrincipal = Annotated[Principal, Depends(session_principal)]
