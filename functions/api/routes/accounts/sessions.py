"""The cookie session: read it (anyone) and end it (its holder).

`GET /v1/sessions/current` describes the `service_ui_session` cookie only: an API key, even
a valid one, has no session, so a key-only caller sees `{session: null}`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Cookie, Response

from batchroute.config import Settings
from batchroute.services.accounts.authentication import SESSION_COOKIE
from batchroute.services.accounts.sessions import SESSION_LIFETIME
from functions.api.deps import SessionsDep, SettingsDep
from functions.api.envelope import ErrorEnvelope
from functions.api.schemas.accounts.accounts import SessionEnvelope, SessionOut
from functions.api.schemas.common import Ok

router = APIRouter(tags=["sessions"])

SessionCookie = Annotated[str | None, Cookie(alias=SESSION_COOKIE, include_in_schema=False)]


def set_session_cookie(response: Response, token: str, settings: Settings) -> None:
    """HttpOnly (no script reads it), SameSite=Lax (no cross-site POSTs carry it), Secure
    outside local mode, whole site, 14 days."""
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=int(SESSION_LIFETIME.total_seconds()),
        path="/",
        secure=settings.cookie_secure,
        httponly=True,
        samesite="lax",
    )


def clear_session_cookie(response: Response, settings: Settings) -> None:
    response.delete_cookie(
        SESSION_COOKIE, path="/", secure=settings.cookie_secure, httponly=True, samesite="lax"
    )


@router.get(
    "/v1/sessions/current",
    response_model=SessionEnvelope,
    summary="The cookie session, or null (anonymous, ended, expired, or an API key alone)",
)
def get_current_session(
    sessions: SessionsDep, response: Response, cookie: SessionCookie = None
) -> SessionEnvelope:
    response.headers["Cache-Control"] = "no-store"
    live = sessions.current(cookie)
    return SessionEnvelope(session=SessionOut.of(live) if live else None)


@router.delete(
    "/v1/sessions/current",
    response_model=Ok,
    responses={401: {"model": ErrorEnvelope, "description": "No live session cookie"}},
    summary="Sign out: revokes this cookie's session only (other sessions and API keys keep working)",
)
def delete_current_session(
    sessions: SessionsDep, settings: SettingsDep, response: Response, cookie: SessionCookie = None
) -> Ok:
    sessions.logout(cookie)
    clear_session_cookie(response, settings)
    return Ok()
