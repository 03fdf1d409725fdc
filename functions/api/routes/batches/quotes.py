"""Quotes: free, price-locked, reserve nothing."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from batchroute.domain.accounts.access import Principal
from batchroute.services.batches.quotes import QuoteView
from functions.api.auth import require
from functions.api.deps import QuotesDep
from functions.api.envelope import ErrorEnvelope
from functions.api.openapi import documented_as
from functions.api.schemas.batches.quotes import (
    QuoteModelRequest,
    QuoteOut,
    QuoteWorkflowRequest,
    WorkflowQuoteOut,
)

router = APIRouter(tags=["quotes"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {
        "model": ErrorEnvelope,
        "description": "Preflight failed (`batch_preflight_failed`, details.preflight)",
    },
    401: {"model": ErrorEnvelope, "description": "Missing or invalid credentials"},
    402: {"model": ErrorEnvelope, "description": "Listed for completeness: quotes never fail on funding"},
    403: {"model": ErrorEnvelope, "description": "The role may not create work"},
    404: {"model": ErrorEnvelope, "description": "Unknown input file or workflow product"},
    409: {"model": ErrorEnvelope, "description": "The input file is not ready"},
}


Creator = Annotated[Principal, Depends(require("batches:create"))]


@router.post(
    "/v1/quotes/model",
    response_model=documented_as(QuoteOut),
    responses=_ERRORS,
    summary="Quote items (inline or an uploaded file): lanes chosen and rejected, price locked 10 min",
)
def quote_model(
    principal: Creator,
    quotes: QuotesDep,
    body: QuoteModelRequest,
) -> QuoteView:
    return quotes.quote_model(principal, body.command())


@router.post(
    "/v1/quotes/workflow",
    response_model=documented_as(WorkflowQuoteOut),
    responses=_ERRORS,
    summary="Quote a workflow product's inputs with model-agnostic lanes that satisfy its contract",
)
def quote_workflow(
    principal: Creator,
    quotes: QuotesDep,
    body: QuoteWorkflowRequest,
) -> QuoteView:
    return quotes.quote_workflow(principal, body.command())
