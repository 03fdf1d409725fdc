"""Feedback: rate a batch item's result or a chat completion; list it; a summary per model and
provider from counters (docs/feedback.md). Roles that create batches give feedback; every
role that reads batches reads it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response

from batchroute.domain.accounts.access import Principal
from batchroute.services.feedback.service import SummaryView
from functions.api.auth import require
from functions.api.deps import FeedbackDep
from functions.api.envelope import errors_doc
from functions.api.openapi import documented_as
from functions.api.schemas.feedback.feedback import (
    FeedbackCreate,
    FeedbackList,
    FeedbackListQuery,
    FeedbackOut,
    FeedbackSummary,
)

router = APIRouter(tags=["feedback"])

Reader = Annotated[Principal, Depends(require("batches:read"))]
Writer = Annotated[Principal, Depends(require("batches:create"))]

_ERRORS = errors_doc(
    {401: "Missing, invalid or revoked credentials", 403: "The role may not do this (`permission_denied`)"}
)


@router.post(
    "/v1/feedback",
    status_code=201,
    responses={
        200: {"model": FeedbackOut, "description": "The author's earlier feedback on the target, replaced"},
        201: {"model": FeedbackOut, "description": "New feedback"},
        **_ERRORS,
        **errors_doc(
            {
                400: "`invalid_request` with `details.field` (e.g. `target.batch_id`, `rating`, `labels[2]`)",
                404: "No such batch item or chat completion in the org (`feedback_target_not_found`)",
                409: "The batch is not finalized yet (`results_not_ready`), or a concurrent change",
                410: "The batch's results were reclaimed by retention (`results_expired`)",
            }
        ),
    },
    summary="Rate a batch item's result or a chat completion (one per target and author)",
)
def give_feedback(principal: Writer, feedback: FeedbackDep, body: FeedbackCreate, response: Response) -> Any:
    saved = feedback.submit(principal, body.command())
    response.status_code = 201 if saved.created else 200
    return saved.feedback.to_api()


@router.get(
    "/v1/feedback",
    response_model=documented_as(FeedbackList),  # the views as built: a target's own keys only
    responses={**_ERRORS, **errors_doc({400: "A bad filter or cursor (`details.field`, `invalid_cursor`)"})},
    summary="The org's feedback, newest change first",
)
def list_feedback(
    principal: Reader, feedback: FeedbackDep, query: Annotated[FeedbackListQuery, Query()]
) -> dict[str, Any]:
    found, next_cursor = feedback.listing(principal, query.filters(), cursor=query.cursor, limit=query.limit)
    return {"object": "list", "data": [f.to_api() for f in found], "next_cursor": next_cursor}


@router.get(
    "/v1/feedback/summary",
    response_model=FeedbackSummary,
    responses={**_ERRORS, **errors_doc({400: "period must be daily or monthly"})},
    summary="Feedback per model and provider over the current UTC day or month (from counters)",
)
def feedback_summary(principal: Reader, feedback: FeedbackDep, period: str | None = None) -> SummaryView:
    return feedback.summary(principal, period=period)
