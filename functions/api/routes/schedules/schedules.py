"""Recurring schedules (docs/schedules.md): create, list, read, change (a new version),
delete, pause, resume; their runs, versions and golden-set regression runs. Readers
(`batches:read`) see them; those who may create batches (`batches:create`) manage them, since
every firing creates a batch in the org."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query

from batchroute.domain.accounts.access import Principal
from batchroute.domain.schedules.schedules import ScheduleView
from functions.api.auth import require
from functions.api.deps import SchedulesDep
from functions.api.envelope import errors_doc
from functions.api.openapi import documented_as
from functions.api.schemas.schedules.schedules import (
    RegressionRun,
    RegressionRunList,
    ScheduleCreate,
    ScheduleDeleted,
    ScheduleList,
    ScheduleOut,
    ScheduleRunList,
    ScheduleUpdate,
    ScheduleVersionList,
)

router = APIRouter(tags=["schedules"])

Reader = Annotated[Principal, Depends(require("batches:read"))]
Manager = Annotated[Principal, Depends(require("batches:create"))]
ScheduleId = Annotated[str, Path(min_length=1, max_length=64)]

_ERRORS = errors_doc(
    {401: "Missing, invalid or revoked credentials", 403: "The role may not do this (`permission_denied`)"}
)
_ONE = {**_ERRORS, **errors_doc({404: "No such schedule in this organization (`schedule_not_found`)"})}
_RACED = errors_doc({409: "The schedule changed while this one was applied; retry (`concurrent_update`)"})
_INVALID = errors_doc(
    {
        400: "`invalid_schedule` with details.field (e.g. `expression`, `golden_set.items[0].expected`); "
        "`file_not_found` / `delivery_target_not_found` for an unknown source"
    }
)


@router.post(
    "/v1/schedules",
    status_code=201,
    response_model=documented_as(ScheduleOut),
    responses={
        **_ERRORS,
        **_INVALID,
        **errors_doc(
            {409: "The organization keeps the most schedules it may (`schedule_limit`, details.limit)"}
        ),
    },
    summary="Create a recurring schedule (version 1); a golden set is benchmarked at once",
)
def create_schedule(principal: Manager, schedules: SchedulesDep, body: ScheduleCreate) -> ScheduleView:
    return schedules.create(principal, body.command()).to_api()


@router.get(
    "/v1/schedules",
    response_model=documented_as(ScheduleList),
    responses=_ERRORS,
    summary="The organization's schedules, oldest first",
)
def list_schedules(
    principal: Reader,
    schedules: SchedulesDep,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> dict[str, Any]:
    page, next_cursor = schedules.page(principal, cursor=cursor, limit=limit)
    return {"object": "list", "data": page, "next_cursor": next_cursor}


@router.get(
    "/v1/schedules/{schedule_id}",
    response_model=documented_as(ScheduleOut),
    responses=_ONE,
    summary="One schedule",
)
def get_schedule(schedule_id: ScheduleId, principal: Reader, schedules: SchedulesDep) -> ScheduleView:
    return schedules.get(principal, schedule_id).to_api()


@router.patch(
    "/v1/schedules/{schedule_id}",
    response_model=documented_as(ScheduleOut),
    responses={**_ONE, **_INVALID, **errors_doc({409: "Changed concurrently (`concurrent_update`)"})},
    summary="Change a schedule: a new version (old versions stay listed); a golden set is benchmarked again",
)
def update_schedule(
    schedule_id: ScheduleId, principal: Manager, schedules: SchedulesDep, body: ScheduleUpdate
) -> ScheduleView:
    return schedules.update(principal, schedule_id, body.command()).to_api()


@router.delete(
    "/v1/schedules/{schedule_id}",
    response_model=documented_as(ScheduleDeleted),
    responses=_ONE,
    summary="Delete a schedule, its trigger and its history; batches it created stay",
)
def delete_schedule(schedule_id: ScheduleId, principal: Manager, schedules: SchedulesDep) -> dict[str, Any]:
    schedules.delete(principal, schedule_id)
    return {"id": schedule_id, "object": "schedule", "deleted": True}


@router.post(
    "/v1/schedules/{schedule_id}/pause",
    response_model=documented_as(ScheduleOut),
    responses={**_ONE, **_RACED},
    summary="Pause: no firing until resumed (idempotent)",
)
def pause_schedule(schedule_id: ScheduleId, principal: Manager, schedules: SchedulesDep) -> ScheduleView:
    return schedules.set_state(principal, schedule_id, "paused").to_api()


@router.post(
    "/v1/schedules/{schedule_id}/resume",
    response_model=documented_as(ScheduleOut),
    responses={**_ONE, **_RACED},
    summary="Resume: the next fire is computed from now; fires missed while paused are not made up",
)
def resume_schedule(schedule_id: ScheduleId, principal: Manager, schedules: SchedulesDep) -> ScheduleView:
    return schedules.set_state(principal, schedule_id, "active").to_api()


@router.get(
    "/v1/schedules/{schedule_id}/runs",
    response_model=documented_as(ScheduleRunList),
    responses=_ONE,
    summary="The schedule's runs (one per fire time), newest first",
)
def list_runs(
    schedule_id: ScheduleId,
    principal: Reader,
    schedules: SchedulesDep,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> dict[str, Any]:
    runs, next_cursor = schedules.runs(principal, schedule_id, cursor=cursor, limit=limit)
    return {"object": "list", "data": runs, "next_cursor": next_cursor}


@router.get(
    "/v1/schedules/{schedule_id}/versions",
    response_model=documented_as(ScheduleVersionList),
    responses=_ONE,
    summary="The schedule's versions, newest first",
)
def list_versions(
    schedule_id: ScheduleId,
    principal: Reader,
    schedules: SchedulesDep,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 100,
) -> dict[str, Any]:
    versions, next_cursor = schedules.versions(principal, schedule_id, cursor=cursor, limit=limit)
    return {"object": "list", "data": versions, "next_cursor": next_cursor}


@router.get(
    "/v1/schedules/{schedule_id}/versions/{version}/benchmarks",
    response_model=documented_as(RegressionRunList),
    responses=_ONE,
    summary="The golden-set regression runs of one version, newest first, with a score per lane",
)
def list_benchmarks(
    schedule_id: ScheduleId,
    version: Annotated[int, Path(ge=1)],
    principal: Reader,
    schedules: SchedulesDep,
) -> dict[str, Any]:
    return {"object": "list", "data": schedules.benchmarks(principal, schedule_id, version)}


@router.post(
    "/v1/schedules/{schedule_id}/regression-runs",
    status_code=201,
    response_model=documented_as(RegressionRun),
    responses={
        **_ONE,
        **errors_doc(
            {
                402: "The estimate does not fit the wallet (`insufficient_credits`)",
                403: "The role may not do this (`permission_denied`), or holding the estimate would "
                "take the period's spend past the hard spending limit (`spending_limit_reached`)",
                409: "No golden set (`no_golden_set`) or no lane can run its model (`no_candidate_lanes`)",
            }
        ),
    },
    summary="Run the golden set now on every candidate lane (paid at direct prices); lanes below "
    "the threshold are excluded from the schedule's routing",
)
def run_regression(schedule_id: ScheduleId, principal: Manager, schedules: SchedulesDep) -> dict[str, Any]:
    return dict(schedules.regress_now(principal, schedule_id))
