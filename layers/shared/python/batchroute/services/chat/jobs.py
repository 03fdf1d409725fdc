"""Queued chat requests: a one-item batch at batch price, seen as a chat job.

`batch: true` (or a `batch` object) turns the request into an ordinary batch, created by
`BatchService` exactly like `POST /v1/batches` without a quote (the internal quote prices
it at batch prices; credits are reserved in the same transaction as the batch), with the
id `batch_<x>` whose job is `chatjob_<x>`. The batch API sees and cancels it like any
other. The job view reads the batch and, once it ran, its one result line (output, usage,
provider) from the lane's result chunk; once retention reclaimed it, 410 `results_expired`.
An `Idempotency-Key` (optional here) makes a retried request answer the job the first one
queued, as `POST /v1/batches` answers a replay (a different body with it: 409).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Protocol, cast

from batchroute.domain.accounts.access import Principal, authorize, require_same_org
from batchroute.domain.batches.record import BatchRecord, SurfaceFields, batch_id_for, job_id_for
from batchroute.domain.catalog.pricing import CacheTokens
from batchroute.domain.chat.objects import (
    CHAT_SOURCE,
    ChatJobView,
    ServedBy,
    ToolCallView,
    chat_completion,
    chat_job,
    completion_id,
    epoch_seconds,
)
from batchroute.domain.chat.requests import ChatRequest
from batchroute.domain.workflow.results import ResultLine
from batchroute.errors import Forbidden, Gone, NotFound, PaymentRequired
from batchroute.ids import new_id
from batchroute.services.batches.commands import CreateBatch
from batchroute.services.batches.create import CreateAnswer, Surface, check_idempotency_key
from batchroute.services.batches.ports import BatchStore, ObjectStore
from batchroute.services.batches.reads import finished_result_lines


class BatchCreator(Protocol):
    def create(
        self,
        principal: Principal,
        command: CreateBatch,
        idempotency_key: str | None,
        surface: Surface = ...,
    ) -> CreateAnswer: ...


@dataclass(eq=False, kw_only=True)
class ChatJobs:
    batches: BatchCreator
    records: BatchStore
    artifacts: ObjectStore

    def queue(
        self, principal: Principal, request: ChatRequest, idempotency_key: str | None = None
    ) -> ChatJobView:
        """Create the one-item batch; the 202 body is the chat job (status `queued`), or the
        job the first request with `idempotency_key` queued."""
        authorize(principal, "batches:create")
        assert request.queue is not None
        batch_id = new_id("batch")
        job_id = job_id_for(batch_id)
        body: dict[str, Any] = {
            "items": [request.as_item()],
            "privacy_tier": request.privacy_tier,
            "completion_window": request.queue.completion_window,
        }
        if request.queue.webhook is not None:
            body["webhook"] = dict(request.queue.webhook)
        if request.queue.metadata:
            body["metadata"] = dict(request.queue.metadata)
        if request.queue.work_order_id is not None:
            body["work_order_id"] = request.queue.work_order_id
        try:
            answer = self.batches.create(
                principal,
                CreateBatch.parse(body),
                _batch_key(idempotency_key) or f"chat-{job_id}",  # no key: one request, one batch
                Surface(
                    CHAT_SOURCE,
                    batch_id=batch_id,
                    fields=SurfaceFields(chat_model=request.model, chat_job_id=job_id),
                ),
            )
        except PaymentRequired as exc:
            raise _chat_refusal(exc) from exc
        batch_id = str(json.loads(answer.body)["batch"]["id"])  # a replay's: the first request's
        batch = self.records.get(batch_id)
        if batch is None:  # written in the create transaction: only a broken store gets here
            raise NotFound("The queued job could not be read back.", code="chat_job_not_found")
        return self._view(batch)  # a replay's job as it is now (done: its result)

    def get(self, principal: Principal, job_id: str) -> ChatJobView:
        authorize(principal, "batches:read")
        batch_id = batch_id_for(job_id)
        batch = self.records.get(batch_id) if batch_id else None
        if batch is None or batch.source != CHAT_SOURCE:
            raise NotFound("No such chat job.", code="chat_job_not_found")
        require_same_org(principal, batch.org_id)
        return self._view(batch)

    def _view(self, batch: BatchRecord) -> ChatJobView:
        """The job of a queued request's batch: once the batch is over, its one result line."""
        if batch.artifacts_reclaimed_at:
            # Retention reclaimed the job's result (docs/retention.md); the batch API still
            # shows its record and receipt.
            raise Gone(
                "This job's result was reclaimed by retention.",
                code="results_expired",
                details={"reclaimed_at": batch.artifacts_reclaimed_at},
            )
        line = (
            self._result_line(batch)
            if batch.state in ("completed", "failed", "canceled", "expired")
            else None
        )
        if line is None:
            latest = batch.latest_error
            return chat_job(batch, error={"code": batch.state, "message": str(latest or batch.state)})
        status = str(line.get("status"))
        if status != "completed":
            error = line.get("error")
            code = str(error.get("code", "failed")) if error else "failed"
            message = str(error.get("message", "")) if error else ""
            return chat_job(batch, item_status=status, error={"code": code, "message": message})
        output = line.get("output") or {}
        usage = line.get("usage") or {}
        served = ServedBy(
            completion_id(batch.batch_id),
            epoch_seconds(batch.created_at),
            batch.chat_model or "",
            str(line.get("provider") or ""),
        )
        result = chat_completion(
            served,
            content=str(output.get("content") or ""),
            finish_reason=str(output.get("finish_reason") or "stop"),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_tokens=CacheTokens.from_fields(usage).cached_input_tokens,
            tool_calls=[cast(ToolCallView, c) for c in output.get("tool_calls") or [] if isinstance(c, dict)],
            refusal=str(output["refusal"]) if output.get("refusal") else None,
        )
        return chat_job(batch, result=result, item_status=status)

    def _result_line(self, batch: BatchRecord) -> ResultLine | None:
        """The one item's result line: the first lane that finished chunk 0 and answered it."""
        batch_id = batch.batch_id
        found: ResultLine | None = None
        for row in finished_result_lines(self.artifacts, batch_id, self.records.lanes(batch_id), 0):
            if int(row.get("seq", -1)) == 0 and (found is None or row.get("status") == "completed"):
                found = row
        return found


def _batch_key(idempotency_key: str | None) -> str | None:
    """The batch create key of a queued request's `Idempotency-Key` (checked as batch create
    checks one; blank: none): `chat-` and a digest, so a key of the longest length still
    fits beside the prefix."""
    if idempotency_key is None or not idempotency_key.strip():
        return None
    digest = hashlib.sha256(check_idempotency_key(idempotency_key).encode()).hexdigest()
    return f"chat-{digest[:48]}"


def _chat_refusal(exc: PaymentRequired) -> Exception:
    """Batch create's funding refusals in the chat surface's words (spec, Errors)."""
    details = exc.details or {}
    if "limit" in details:
        return Forbidden(exc.message, code="spending_limit_reached", details=details)
    return PaymentRequired(exc.message, code="insufficient_funds", details=details)
