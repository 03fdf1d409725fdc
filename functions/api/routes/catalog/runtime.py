"""Operations: runtime metadata (its own module: the caller's principal needs the identity
store, which the liveness routes in `health` do not import)."""

from __future__ import annotations

from fastapi import APIRouter

from batchroute.services.catalog.runtime import RuntimeView, runtime_info
from functions.api.auth import OptionalPrincipal
from functions.api.openapi import documented_as
from functions.api.schemas.catalog.health import RuntimeOut
from functions.api.settings_dep import SettingsDep

router = APIRouter(tags=["operations"])


@router.get(
    "/v1/runtime",
    response_model=documented_as(RuntimeOut),
    summary="Runtime metadata; anonymous callers get public-safe data only",
)
def get_runtime(settings: SettingsDep, principal: OptionalPrincipal) -> RuntimeView:
    return runtime_info(settings, authenticated=principal is not None)
