"""Operations: health and runtime metadata."""

from __future__ import annotations

from fastapi import APIRouter, Response

from batchroute.services.catalog.runtime import RuntimeView, runtime_info
from functions.api.auth import OptionalPrincipal
from functions.api.deps import SettingsDep
from functions.api.openapi import documented_as
from functions.api.schemas.catalog.health import Health, RuntimeOut

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


@router.get(
    "/v1/runtime",
    response_model=documented_as(RuntimeOut),
    summary="Runtime metadata; anonymous callers get public-safe data only",
)
def get_runtime(settings: SettingsDep, principal: OptionalPrincipal) -> RuntimeView:
    return runtime_info(settings, authenticated=principal is not None)
