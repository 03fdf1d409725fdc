"""Feedback: rate a batch item's result or a chat completion, list the org's feedback, and
summarize it per model and provider from counters (docs/feedback.md; the rules in
domain/feedback/feedback.py).

The target must exist in the caller's org (404 otherwise, another org's included). The model
and provider recorded are those that served it: a batch item's from its row in the results
artifact (one streamed read), a direct chat completion's from its record, a queued one's from
its one-row results artifact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, TypedDict, cast

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal, authorize
from batchroute.domain.batches.artifact_keys import INPUT_CHUNK_ROWS as CHUNK_SIZE
from batchroute.domain.batches.artifact_keys import input_chunk_key
from batchroute.domain.batches.jsonl import artifact_lines
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.billing.usage import USAGE_PERIODS, UsagePeriod, period_window
from batchroute.domain.chat.objects import CHAT_SOURCE
from batchroute.domain.chat.requests import CHAT_ITEM_ID
from batchroute.domain.feedback.feedback import (
    CounterKey,
    CreateFeedback,
    Feedback,
    FeedbackCounter,
    FeedbackFilters,
    FeedbackView,
    FiguresView,
    ModelProviderFiguresView,
    Target,
    counter_moves,
    summarize,
)
from batchroute.domain.request_fields import invalid
from batchroute.domain.views import made_from
from batchroute.domain.workflow.results import ArtifactRow
from batchroute.errors import Conflict, Gone, InvalidRequest, NotFound
from batchroute.ids import new_id
from batchroute.services.batches.ports import Artifacts, BatchReader

# The provider recorded for a result no provider served (a failed item).
UNSERVED = "unserved"


class FeedbackStore(Protocol):
    def get(self, org_id: str, target: Target, author: str) -> Feedback | None: ...

    def save(
        self, feedback: Feedback, moves: Mapping[CounterKey, Mapping[str, int]], *, replaces: int | None
    ) -> bool: ...

    def page(
        self, org_id: str, *, cursor: str | None, limit: int, filters: Mapping[str, str]
    ) -> tuple[list[Feedback], str | None]: ...

    def for_batch(self, org_id: str, batch_id: str) -> list[Feedback]: ...

    def counters_between(self, org_id: str, first_day: str, last_day: str) -> list[FeedbackCounter]: ...


class SummaryView(TypedDict):
    object: Literal["feedback_summary"]
    period: UsagePeriod
    start: str
    end: str
    total: FiguresView
    by_model_provider: list[ModelProviderFiguresView]


@dataclass(frozen=True)
class Saved:
    feedback: Feedback
    created: bool


def target_not_found(target: Target) -> NotFound:
    return NotFound(
        "No such batch item or chat completion in this organization.",
        code="feedback_target_not_found",
        details={"field": "target.id" if target.type == "chat_completion" else "target.customer_item_id"},
    )


@dataclass(eq=False)
class FeedbackService:
    store: FeedbackStore
    batches: BatchReader
    artifacts: Artifacts
    clock: Clock

    def submit(self, principal: Principal, given: CreateFeedback) -> Saved:
        """Create the caller's feedback on the target, or change it (one per target and
        author: a user, or an API key without a user)."""
        authorize(principal, "batches:create")
        model, provider = self._served_by(principal.org_id, given.target)
        author = principal.acting_user_id or principal.key_id or "unknown"
        before = self.store.get(principal.org_id, given.target, author)
        now = self.clock.now()
        at = isoformat(now)
        after = made_from(  # the rating, comment and labels as given
            given,
            Feedback,
            feedback_id=before.feedback_id if before else new_id("fb", now),
            org_id=principal.org_id,
            author=author,
            model=model,
            provider=provider,
            day=before.day if before else now.date().isoformat(),
            created_at=before.created_at if before else at,
            updated_at=at,
            version=before.version + 1 if before else 1,
        )
        if not self.store.save(
            after, counter_moves(before, after), replaces=before.version if before else None
        ):
            raise Conflict("This feedback changed while it was saved; retry.", code="concurrent_update")
        return Saved(after, created=before is None)

    def listing(
        self, principal: Principal, filters: FeedbackFilters, *, cursor: str | None, limit: int
    ) -> tuple[list[Feedback], str | None]:
        authorize(principal, "batches:read")
        try:
            return self.store.page(principal.org_id, cursor=cursor, limit=limit, filters=filters.equalities())
        except ValueError:
            raise InvalidRequest(
                "cursor must be a value returned as next_cursor.", code="invalid_cursor"
            ) from None

    def summary(self, principal: Principal, *, period: str | None) -> SummaryView:
        """The org's feedback per model and provider over the current UTC day or month."""
        authorize(principal, "batches:read")
        if period is not None and period not in USAGE_PERIODS:
            raise invalid("period", "period must be daily or monthly.")
        window = period_window(cast(UsagePeriod, period or "monthly"), self.clock.now(), "UTC")
        counters = self.store.counters_between(
            principal.org_id, window.start.isoformat(), window.end.isoformat()
        )
        total, per = summarize(counters)
        return {
            "object": "feedback_summary",
            "period": window.period,
            "start": window.start.isoformat(),
            "end": window.end.isoformat(),
            "total": total.to_api(),
            "by_model_provider": [
                {"model": model, "provider": provider, **figures.to_api()} for model, provider, figures in per
            ],
        }

    def for_batch(self, org_id: str, batch_id: str) -> dict[str, list[FeedbackView]]:
        """The batch's feedback by customer_item_id (the batch item view's `feedback`)."""
        found: dict[str, list[FeedbackView]] = {}
        for feedback in self.store.for_batch(org_id, batch_id):
            found.setdefault(str(feedback.target.customer_item_id), []).append(feedback.to_api())
        return found

    # -- the target ----------------------------------------------------------------------------
    def _served_by(self, org_id: str, target: Target) -> tuple[str, str]:
        if target.type == "batch_item":
            batch = self._batch(org_id, str(target.batch_id), target)
            if batch.source == "chat_direct":
                raise target_not_found(target)
            if batch.source == CHAT_SOURCE:  # one answer, one target: its chat completion's
                completion_id = "chatcmpl-" + batch.batch_id.removeprefix("batch_")
                raise NotFound(
                    "This batch is a queued chat job: rate its answer as the chat completion "
                    f"{completion_id}.",
                    code="feedback_target_not_found",
                    details={"field": "target.batch_id", "chat_completion_id": completion_id},
                )
            row = self._result_row(batch, str(target.customer_item_id), target)
            if row.get("model"):
                return str(row["model"]), str(row.get("provider") or UNSERVED)
            return self._requested_model(batch, int(row.get("sequence_number") or 0)), UNSERVED
        suffix = str(target.completion_id).removeprefix("chatcmpl-")
        batch = self._batch(org_id, f"batch_{suffix}", target)
        if batch.source == "chat_direct":
            if batch.state != "completed":
                raise target_not_found(target)
            return str(batch.chat_model or ""), str(batch.provider or "")
        if batch.source != CHAT_SOURCE:
            raise target_not_found(target)
        row = self._result_row(batch, CHAT_ITEM_ID, target)
        if row.get("status") != "completed":
            raise target_not_found(target)
        return str(row.get("model") or batch.chat_model or ""), str(row.get("provider") or "")

    def _requested_model(self, batch: BatchRecord, seq: int) -> str:
        """A failed item has no serving model: the model it asked for (one input chunk)."""
        key = input_chunk_key(batch.batch_id, seq // CHUNK_SIZE)
        for line in artifact_lines(self.artifacts.chunks(key), key=key):
            if int(line.get("seq", -1)) == seq:
                return str((line.get("item") or {}).get("model") or "")
        return ""

    def _batch(self, org_id: str, batch_id: str, target: Target) -> BatchRecord:
        batch = self.batches.get(batch_id)
        if batch is None or batch.org_id != org_id:
            raise target_not_found(target)
        return batch

    def _result_row(self, batch: BatchRecord, customer_item_id: str, target: Target) -> ArtifactRow:
        if batch.artifacts_reclaimed_at:
            raise Gone(
                "This batch's results were reclaimed by retention.",
                code="results_expired",
                details={"reclaimed_at": batch.artifacts_reclaimed_at},
            )
        key = batch.results_key
        if not key:
            raise Conflict(
                "Feedback applies to a result: the batch is not finalized yet.",
                code="results_not_ready",
                details={"state": batch.state},
            )
        for row in artifact_lines(self.artifacts.chunks(key), key=key):
            if row.get("customer_item_id") == customer_item_id:
                return cast(ArtifactRow, row)  # a row of results.jsonl, as Finalize wrote it
        raise target_not_found(target)
