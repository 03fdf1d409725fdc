"""Presets: an org's named, versioned request templates (docs/presets.md). Every role may
read them (`batches:read`); the roles that run work write them (`batches:create`: owner,
admin, member). Every edit is a new version; DELETE archives the name. A version's golden
set is run on demand (regression-runs, paid as a schedule's) and its benchmarks listed."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query

from batchroute.domain.accounts.access import Principal
from batchroute.domain.catalog.catalog import Catalog
from batchroute.domain.presets.golden_sets import RegressionRunView
from batchroute.domain.presets.presets import NAME_PATTERN, VERSION_MAX, PresetVersionView, PresetView
from functions.api.auth import require
from functions.api.deps import PresetsDep, built
from functions.api.envelope import errors_doc
from functions.api.openapi import documented_as
from functions.api.schemas.presets.presets import (
    PresetCreate,
    PresetList,
    PresetOut,
    PresetRegressionRun,
    PresetRegressionRunList,
    PresetReplace,
    PresetVersionList,
    PresetVersionOut,
)

router = APIRouter(tags=["presets"])

Reader = Annotated[Principal, Depends(require("batches:read"))]
Writer = Annotated[Principal, Depends(require("batches:create"))]
DeploymentCatalog = Annotated[Catalog, Depends(built("catalog"))]
Name = Annotated[str, Path(min_length=1, max_length=64, pattern=NAME_PATTERN)]
Limit = Annotated[int, Query(ge=1, le=100, description="1-100, default 20")]
Cursor = Annotated[str | None, Query(max_length=64, description="A previous answer's next_cursor")]

_ERRORS = errors_doc(
    {401: "Missing, invalid or revoked credentials", 403: "The role may not do this (`permission_denied`)"}
)
_ONE = {**_ERRORS, **errors_doc({404: "No such preset in this organization (`preset_not_found`)"})}
_INVALID = "`invalid_preset`: details.field names the first problem, details.errors lists each with its field"


@router.post(
    "/v1/presets",
    status_code=201,
    response_model=PresetOut,
    responses={
        **_ERRORS,
        **errors_doc(
            {
                400: _INVALID,
                409: "The name is taken (`preset_exists`), or the organization is at its limit "
                "(`preset_limit`)",
            }
        ),
    },
    summary="Create a preset (version 1); an archived name comes back at its next version",
)
def create_preset(
    principal: Writer, presets: PresetsDep, body: PresetCreate, catalog: DeploymentCatalog
) -> PresetView:
    return presets.create(principal, body.command(catalog)).to_api()


@router.get(
    "/v1/presets",
    response_model=PresetList,
    responses=_ERRORS,
    summary="The organization's presets by name (their latest versions)",
)
def list_presets(
    principal: Reader,
    presets: PresetsDep,
    cursor: Cursor = None,
    limit: Limit = 20,
    include_archived: Annotated[bool, Query(description="Also list deleted (archived) presets")] = False,
) -> dict[str, Any]:
    page, next_cursor = presets.listing(
        principal, cursor=cursor, limit=limit, include_archived=include_archived
    )
    return {
        "object": "list",
        "data": page,
        "next_cursor": next_cursor,
        "limit": presets.max_presets,
    }


@router.get(
    "/v1/presets/{name}",
    response_model=PresetOut,
    responses=_ONE,
    summary="A preset: its latest version (archived ones too, with archived_at)",
)
def get_preset(name: Name, principal: Reader, presets: PresetsDep) -> PresetView:
    return presets.get(principal, name).to_api()


_EDIT_ERRORS = {
    **_ONE,
    **errors_doc(
        {
            400: _INVALID,
            409: "Archived (`preset_archived`), or edited concurrently (`concurrent_update`)",
        }
    ),
}


@router.put(
    "/v1/presets/{name}",
    response_model=PresetOut,
    responses=_EDIT_ERRORS,
    summary="Replace the template: a new version (older versions stay resolvable as name@version)",
)
def replace_preset(
    name: Name, principal: Writer, presets: PresetsDep, body: PresetReplace, catalog: DeploymentCatalog
) -> PresetView:
    return presets.replace(principal, name, body.replacement(name, catalog)).to_api()


@router.patch(
    "/v1/presets/{name}",
    response_model=PresetOut,
    responses=_EDIT_ERRORS,
    summary="Change the fields given: a new version",
)
def patch_preset(name: Name, principal: Writer, presets: PresetsDep, body: PresetReplace) -> PresetView:
    return presets.patch(principal, name, body.patch(name)).to_api()


@router.delete(
    "/v1/presets/{name}",
    response_model=PresetOut,
    responses={**_ONE, **errors_doc({409: "Already archived (`preset_archived`)"})},
    summary="Delete (archive) a preset: the name takes no new requests; its versions stay readable",
)
def delete_preset(name: Name, principal: Writer, presets: PresetsDep) -> PresetView:
    return presets.archive(principal, name).to_api()


@router.get(
    "/v1/presets/{name}/versions",
    response_model=PresetVersionList,
    responses=_ONE,
    summary="A preset's versions, newest first",
)
def list_versions(
    name: Name, principal: Reader, presets: PresetsDep, cursor: Cursor = None, limit: Limit = 20
) -> dict[str, Any]:
    page, next_cursor = presets.versions(principal, name, cursor=cursor, limit=limit)
    return {"object": "list", "name": name, "data": page, "next_cursor": next_cursor}


Version = Annotated[int, Path(ge=1, le=VERSION_MAX)]
_VERSION_ERRORS = {**_ERRORS, **errors_doc({404: "No such preset or version (`preset_version_not_found`)"})}


@router.post(
    "/v1/presets/{name}/regression-runs",
    status_code=201,
    response_model=documented_as(PresetRegressionRun),
    responses={
        **_VERSION_ERRORS,
        **errors_doc(
            {
                402: "The estimate does not fit the wallet (`insufficient_credits`)",
                403: "The role may not do this (`permission_denied`), or holding the estimate would "
                "take the period's spend past the hard spending limit (`spending_limit_reached`)",
                409: "The version has no golden set (`no_golden_set`), no lane can run its model "
                "(`no_candidate_lanes`), or the preset is archived (`preset_archived`)",
            }
        ),
    },
    summary="Run a version's golden set now on every candidate lane, the preset applied to each "
    "input (paid at direct prices); one benchmark per lane",
)
def run_regression(
    name: Name,
    principal: Writer,
    presets: PresetsDep,
    version: Annotated[int | None, Query(ge=1, le=VERSION_MAX, description="Default: the latest")] = None,
) -> RegressionRunView:
    return presets.regress(principal, name, version)


@router.get(
    "/v1/presets/{name}/versions/{version}/benchmarks",
    response_model=documented_as(PresetRegressionRunList),
    responses=_VERSION_ERRORS,
    summary="The golden-set regression runs of one preset version, newest first, with a score per lane",
)
def list_benchmarks(name: Name, version: Version, principal: Reader, presets: PresetsDep) -> dict[str, Any]:
    return {"object": "list", "data": presets.benchmarks(principal, name, version)}


@router.get(
    "/v1/presets/{name}/versions/{version}",
    response_model=PresetVersionOut,
    responses=_VERSION_ERRORS,
    summary="One version of a preset",
)
def get_version(
    name: Name,
    version: Version,
    principal: Reader,
    presets: PresetsDep,
) -> PresetVersionView:
    return presets.version(principal, name, version).to_api()
