"""Operations: liveness. It imports no service, so a cold start's first call here pays for
this module only (docs/cold-start.md); runtime metadata is in `runtime`."""

from __future__ import annotations

from fastapi import APIRouter, Response

from functions.api.schemas.catalog.health import Health
from functions.api.settings_dep import SettingsDep

router = APIRouter(tags=["operations"])


@router.get("/v1/health", response_model=Health, summary="Liveness; stays up in read-only maintenance")
def get_health(settings: SettingsDep) -> Health:
    return Health(ok=True, service=settings.service_name, read_only=settings.read_only)


@router.head(
    "/v1/health",
    response_class=Response,
    responses={200: {"description": "Alive: headers only, no body"}},
    summary="Liveness, headers only",
)
def head_health() -> Response:
    return Response(status_code=200)
