"""Reading batches: listings, items with their live status, results and artifact links.

Items and results are read from S3 chunks as streams: a page never loads a whole batch.
A page of items or results also stops at PAGE_MAX_BYTES of rows (domain/batches/pages.py): the
buffered API function's answer cannot pass Lambda's 6 MB cap on a synchronous response.
Once retention reclaimed a batch's bytes (docs/retention.md), its items, results and
artifact URL answer 410 `results_expired`; its record and receipt stay readable.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import KW_ONLY, dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, NotRequired, Protocol, TypedDict, cast

from batchroute.clock import isoformat
from batchroute.domain.accounts.access import Principal, authorize, require_same_org
from batchroute.domain.batches.artifact_keys import INPUT_CHUNK_ROWS as CHUNK_SIZE
from batchroute.domain.batches.artifact_keys import (
    input_chunk_key,
    lane_result_key,
    results_index_key,
)
from batchroute.domain.batches.jsonl import artifact_lines
from batchroute.domain.batches.pages import ROW_MAX_BYTES, fill_page, row_bytes
from batchroute.domain.batches.record import BatchRecord, missing_reason
from batchroute.domain.batches.states import ALL_STATES, NON_TERMINAL
from batchroute.domain.billing.retention import RetentionSettings, keep_until
from batchroute.domain.billing.settlement import DirectReceipt, InlineReceipt
from batchroute.domain.feedback.feedback import FeedbackView
from batchroute.domain.routing.lane_plan import LaneRecord, lane_chunk_done, lane_chunk_position
from batchroute.domain.workflow.results import ResultLine
from batchroute.errors import Conflict, Gone, InvalidRequest, NotFound, PayloadTooLarge
from batchroute.services.batches.ports import BatchReader, BatchStore, ObjectStore
from batchroute.services.batches.views import ArtifactFilesView, LaneStatusView, artifact_files, lane_statuses

ITEM_STATUSES = ("pending", "processing", "completed", "failed")
BodyFormat = Literal["normalized", "raw"]


class ResultRowView(TypedDict):
    """One row of a results page; `output` and `error` are the result file's (customer JSON)."""

    customer_item_id: object
    sequence_number: object
    status: object
    output: object
    error: object


class ResultFileRow(TypedDict, total=False):
    """A line of `results.jsonl` (Finalize; docs/batches.md), as far as a results page reads it."""

    customer_item_id: object
    sequence_number: object
    status: object
    output: object
    error: object
    raw: object


class ResultsPageView(TypedDict):
    batch_id: str
    body_format: BodyFormat
    data: list[ResultRowView]
    next_cursor: str | None


class ArtifactUrlView(TypedDict):
    batch_id: str
    url: str
    expires_in: int


class ItemRowView(TypedDict):
    """One item with its live status; `error` a result's error or the batch's end."""

    sequence_number: int
    customer_item_id: object
    model: object
    operation: object
    status: object
    error: object
    output_preview: str | None
    preset: NotRequired[object]  # the preset version it was expanded from
    provider: NotRequired[object]
    feedback: NotRequired[list[FeedbackView]]


class ItemsPageView(TypedDict):
    batch_id: str
    data: list[ItemRowView]
    next_cursor: str | None


def _too_large(batch_id: str, row: ResultRowView, size: int, next_cursor: str | None) -> PayloadTooLarge:
    """A result row no answer can carry (an embeddings request of thousands of inputs): said
    in the error envelope, with the cursor past it and where the whole results file is read."""
    url_path = f"/v1/batches/{batch_id}/artifact-url"
    return PayloadTooLarge(
        f"The result of item {row['customer_item_id']!r} is {size:,} bytes, more than one answer "
        f"carries ({ROW_MAX_BYTES:,}): read it in the results file ({url_path}); next_cursor "
        "goes on past it.",
        code="result_too_large",
        details={
            "customer_item_id": row["customer_item_id"],
            "sequence_number": row["sequence_number"],
            "bytes": size,
            "max_bytes": ROW_MAX_BYTES,
            "next_cursor": next_cursor,
            "artifact_url_path": url_path,
        },
    )


def _cursor(value: str | None) -> int:
    if value is None or value == "":
        return 0
    if not value.isdecimal():
        raise InvalidRequest("cursor must be a value returned as next_cursor.", code="invalid_cursor")
    return int(value)


def preview(output: Any, limit: int = 200) -> str | None:
    if not isinstance(output, dict):
        return None
    if isinstance(output.get("content"), str):
        return str(output["content"])[:limit]
    if "embedding" in output or "embeddings" in output:
        return f"embedding ({output.get('dimensions', '?')} dimensions)"
    return None


class FeedbackLookup(Protocol):
    """services/feedback/service.py:FeedbackService: a batch's feedback by customer_item_id."""

    def for_batch(self, org_id: str, batch_id: str) -> dict[str, list[FeedbackView]]: ...


class RetentionTerms(Protocol):
    def get(self, org_id: str) -> RetentionSettings: ...


def results_gone(batch: BatchRecord) -> Gone:
    return Gone(
        "This batch's result bytes were reclaimed by retention; its record and receipt remain.",
        code="results_expired",
        details={"reclaimed_at": batch.artifacts_reclaimed_at},
    )


def owned_batch(records: BatchReader, principal: Principal, batch_id: str) -> BatchRecord:
    """The batch, the principal's org's: 404 `batch_not_found`, or 403 for another org's."""
    batch = records.get(batch_id)
    if batch is None:
        raise NotFound("No such batch.", code="batch_not_found")
    require_same_org(principal, batch.org_id)
    return batch


# How long an artifact's signed URL works (`GET /v1/batches/{id}/artifact-url`, and a batch's
# `output_url`, `error_url` and `receipt_url`).
ARTIFACT_URL_SECONDS = 900


class SignedArtifacts(ObjectStore, Protocol):
    def presigned_read(self, key: str, *, expires_in: int) -> str: ...


@dataclass(eq=False)
class BatchReads:
    records: BatchStore
    artifacts: SignedArtifacts
    _: KW_ONLY
    retention: RetentionTerms  # when a result file's bytes go (docs/retention.md)
    feedback: FeedbackLookup  # each item row's feedback (docs/feedback.md)
    grace: timedelta = timedelta(hours=72)

    def with_content(self, principal: Principal, batch_id: str) -> BatchRecord:
        """The caller's batch whose result bytes are still kept (410 once reclaimed)."""
        batch = self.owned(principal, batch_id)
        if batch.artifacts_reclaimed_at:
            raise results_gone(batch)
        return batch

    def files(self, batch: BatchRecord) -> ArtifactFilesView:
        """The detailed view's `artifacts`: each file's status and when its bytes go."""
        expires_at = None
        if batch.finalized_at and not batch.artifacts_reclaimed_at:
            until = keep_until(
                self.retention.get(batch.org_id),
                finalized_at=datetime.fromisoformat(batch.finalized_at),
                grace=self.grace,
            )
            expires_at = isoformat(until) if until is not None else None
        return artifact_files(batch, expires_at=expires_at)

    def owned(self, principal: Principal, batch_id: str) -> BatchRecord:
        authorize(principal, "batches:read")
        return owned_batch(self.records, principal, batch_id)

    def billing_receipt(self, principal: Principal, batch_id: str) -> InlineReceipt | DirectReceipt:
        """The caller's batch's billing receipt, once it is settled (409 `receipt_not_ready`)."""
        batch = self.owned(principal, batch_id)
        if not batch.settled_at or not batch.billing:
            raise Conflict(
                "The receipt is available once the batch is settled.",
                code="receipt_not_ready",
                details={"state": batch.state},
            )
        return batch.billing

    def lane_statuses(self, batch: BatchRecord) -> list[LaneStatusView]:
        """The status of each provider lane the batch ran on."""
        return lane_statuses(self.records.lanes(batch.batch_id))

    def list_batches(
        self, principal: Principal, *, state: str | None, cursor: str | None, limit: int
    ) -> tuple[list[BatchRecord], str | None, int]:
        """A page of the caller's batches, newest first; `state` one batch state or `active`
        (every state but the terminal ones)."""
        authorize(principal, "batches:read")
        states: frozenset[str] | None = None
        if state == "active":
            states = frozenset(NON_TERMINAL)
        elif state in ALL_STATES:
            states = frozenset({state})
        elif state is not None:
            raise InvalidRequest(
                "state must be a batch state or `active`.", code="invalid_request", details={"field": "state"}
            )
        if cursor is not None and not cursor.startswith("batch_"):
            raise InvalidRequest("cursor must be a value returned as next_cursor.", code="invalid_cursor")
        page, next_cursor = self.records.list_for_org(
            principal.org_id, limit=limit, start_after=cursor, states=states
        )
        return page, next_cursor, self.records.count_for_org(principal.org_id)

    # -- results ---------------------------------------------------------------------------------
    def results(
        self, principal: Principal, batch_id: str, *, cursor: str | None, limit: int, body_format: BodyFormat
    ) -> ResultsPageView:
        key = self._results_key(principal, batch_id, "Results are ready once the batch is finalized.")
        start = _cursor(cursor)
        first, offset = self._results_offset(batch_id, start)
        rows_read = artifact_lines(self.artifacts.chunks(key, start=offset), key=key)
        rows = (
            (str(index), _result_row(cast(ResultFileRow, row), body_format))
            for index, row in enumerate(rows_read, start=first)
            if index >= start
        )
        data, next_cursor = fill_page(rows, limit=limit, size=row_bytes)
        if len(data) == 1 and (size := row_bytes(data[0])) > ROW_MAX_BYTES:
            raise _too_large(batch_id, data[0], size, next_cursor)
        return {"batch_id": batch_id, "body_format": body_format, "data": data, "next_cursor": next_cursor}

    def _results_offset(self, batch_id: str, start: int) -> tuple[int, int]:
        """Where a results page starting at row `start` begins reading: (the row index, the
        byte offset) of the nearest chunk start at or before it, from Finalize's index
        (`results.index.json`); the top of the file when there is no index. A page deep into a
        1M-row file is one ranged GET, not a read of every row before it."""
        if start <= 0 or self.artifacts.size(results_index_key(batch_id)) is None:
            return 0, 0
        index = json.loads(b"".join(self.artifacts.chunks(results_index_key(batch_id))))
        rows_per_chunk = int(index.get("rows_per_chunk") or CHUNK_SIZE)
        offsets = [int(o) for o in index.get("offsets") or []]
        chunk = min(start // rows_per_chunk, len(offsets) - 1)
        if chunk < 0:
            return 0, 0
        return chunk * rows_per_chunk, offsets[chunk]

    def artifact_url(self, principal: Principal, batch_id: str) -> ArtifactUrlView:
        key = self._results_key(principal, batch_id, "The artifact exists once the batch is finalized.")
        return {"batch_id": batch_id, "url": self.sign(key), "expires_in": ARTIFACT_URL_SECONDS}

    def sign(self, key: str) -> str:
        """A short-lived GET URL of the artifact `key` (signed locally: no AWS call)."""
        return self.artifacts.presigned_read(key, expires_in=ARTIFACT_URL_SECONDS)

    def _results_key(self, principal: Principal, batch_id: str, not_yet: str) -> str:
        """The batch's results artifact; 409 `results_not_ready` (`not_yet`) before Finalize."""
        batch = self.with_content(principal, batch_id)
        if not batch.results_key:
            raise Conflict(not_yet, code="results_not_ready", details={"state": batch.state})
        return batch.results_key

    # -- items -----------------------------------------------------------------------------------
    def items(
        self, principal: Principal, batch_id: str, *, status: str | None, cursor: str | None, limit: int
    ) -> ItemsPageView:
        batch = self.with_content(principal, batch_id)
        if status is not None and status not in ITEM_STATUSES:
            raise InvalidRequest(
                f"status must be one of {', '.join(ITEM_STATUSES)}.",
                code="invalid_request",
                details={"field": "status"},
            )
        lanes = self.records.lanes(batch_id)
        rows = self._item_rows(batch, lanes, _cursor(cursor))
        matching = (row for row in rows if status is None or row["status"] == status)
        paged = ((str(row["sequence_number"]), row) for row in self._with_feedback(batch, matching))
        data, next_cursor = fill_page(paged, limit=limit, size=row_bytes)
        return {"batch_id": batch_id, "data": data, "next_cursor": next_cursor}

    def _with_feedback(self, batch: BatchRecord, rows: Iterable[ItemRowView]) -> Iterator[ItemRowView]:
        """Each row with its `feedback` (before the page measures it): one Query for the batch,
        made at the first row (docs/feedback.md)."""
        found: dict[str, list[FeedbackView]] | None = None
        for row in rows:
            if found is None:
                found = self.feedback.for_batch(batch.org_id, batch.batch_id)
            row["feedback"] = found.get(str(row["customer_item_id"]), [])
            yield row

    def _item_rows(self, batch: BatchRecord, lanes: list[LaneRecord], start: int) -> Iterator[ItemRowView]:
        batch_id = batch.batch_id
        for chunk in range(start // CHUNK_SIZE, batch.chunk_count):
            results = self._chunk_results(batch_id, lanes, chunk)
            running = chunk_in_flight(batch, lanes, chunk)
            key = input_chunk_key(batch_id, chunk)
            for line in artifact_lines(self.artifacts.chunks(key), key=key):
                if int(line["seq"]) < start:
                    continue
                seq = int(line["seq"])
                item = line["item"]
                result = results.get(seq)
                row: ItemRowView = {
                    "sequence_number": seq,
                    "customer_item_id": item.get("customer_item_id"),
                    "model": item.get("model"),
                    "operation": item.get("operation"),
                    "status": "pending",
                    "error": None,
                    "output_preview": None,
                }
                if item.get("preset_version"):
                    row["preset"] = item["preset_version"]  # the preset version it was expanded from
                if result is not None:
                    row["status"] = result.get("status", "completed")
                    row["error"] = result.get("error")
                    row["output_preview"] = preview(result.get("output"))
                    row["provider"] = result.get("provider")
                elif running:
                    row["status"] = "processing"
                elif batch.state not in NON_TERMINAL:
                    row["status"] = "failed"
                    code, message = missing_reason(batch)
                    row["error"] = {"code": code, "message": message}
                yield row

    def _chunk_results(self, batch_id: str, lanes: list[LaneRecord], chunk: int) -> dict[int, ResultLine]:
        return {int(row["seq"]): row for row in finished_result_lines(self.artifacts, batch_id, lanes, chunk)}


def finished_result_lines(
    artifacts: ObjectStore, batch_id: str, lanes: Iterable[LaneRecord], chunk: int
) -> Iterator[ResultLine]:
    """The result lines of chunk `chunk` of each lane that finished it, lane by lane. A lane
    that answered none of the chunk (it handed every item on) has no result file."""
    for lane in lanes:
        if lane_chunk_done(lane, chunk):
            key = lane_result_key(batch_id, lane, chunk)
            for row in artifact_lines(artifacts.chunks(key, missing_ok=True), key=key):
                yield cast(ResultLine, row)  # a lane's result line (domain/workflow/results.py)


def _result_row(row: ResultFileRow, body_format: BodyFormat) -> ResultRowView:
    """A results page's row of a `results.jsonl` line: `raw` for `body_format=raw`."""
    output = row.get("raw") if body_format == "raw" else row.get("output")
    return {
        "customer_item_id": row.get("customer_item_id"),
        "sequence_number": row.get("sequence_number"),
        "status": row.get("status"),
        "output": output if row.get("status") == "completed" else None,
        "error": row.get("error") if row.get("status") == "failed" else None,
    }


def chunk_in_flight(batch: BatchRecord, lanes: list[LaneRecord], chunk: int) -> bool:
    """A running lane started the chunk and has not finished it: its items moved from
    `pending` to `running` in the batch's counts when it started (`chunks_started_n`), so a
    chunk still waiting for its lane's turn is pending here too. A started chunk of a terminal
    batch (canceled, expired, failed) still finishes (docs/batches.md RunLane); nothing is in
    flight once Finalize wrote the results."""
    if batch.results_key:
        return False
    for lane in lanes:
        position = lane_chunk_position(lane, chunk)
        if lane.status != "running" or position is None or lane_chunk_done(lane, chunk):
            continue
        if position < lane.chunks_started_n:
            return True
    return False
