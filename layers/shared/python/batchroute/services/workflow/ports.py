"""What the workflow's steps need from storage and queues, declared once."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

from batchroute.domain.billing.settlement import BillingReceipt
from batchroute.domain.routing.items import InputLine
from batchroute.domain.routing.lane_plan import LaneRecord, SubmittedJob
from batchroute.domain.workflow.results import ChunkTally, HandOver, ResultLine


class BatchFiles(Protocol):
    """adapters/batch_artifacts.py:BatchArtifacts: a batch's JSON Lines objects; `objects`
    is the bucket beneath (finalize streams multipart uploads on it)."""

    objects: Any

    def input_lines(self, batch_id: str, chunk: int, *, model: str | None = None) -> Iterator[InputLine]: ...

    def input_seqs(self, batch_id: str, chunk: int) -> Iterator[int]: ...

    def result_lines(self, batch_id: str, lane: LaneRecord, chunk: int) -> Iterator[ResultLine]: ...

    def partial_lines(self, batch_id: str, lane_key: str, chunk: int) -> Iterator[ResultLine]: ...

    def read_ahead(self, batch_id: str, chunk: int, lanes: Sequence[LaneRecord]) -> None: ...

    def write_lines(self, key: str, lines: Iterable[ResultLine]) -> int: ...

    def write_json(self, key: str, value: BillingReceipt) -> None: ...  # the batch's receipt

    def delete(self, key: str) -> None: ...


class ProgressCounters(Protocol):
    """adapters/dynamo/batch_progress.py:BatchProgress: each lane's counters and chunk marks."""

    def get_lane(self, batch_id: str, lane_key: str) -> LaneRecord | None: ...

    def put_lane(self, batch_id: str, lane: LaneRecord) -> bool: ...

    def lane_running(self, batch_id: str, lane_key: str, *, at: str) -> bool: ...

    def lane_first_run(self, batch_id: str, lane_key: str, *, at: str) -> bool: ...

    def lane_finished(
        self, batch_id: str, lane_key: str, status: str, *, at: str, latest_error: str | None = None
    ) -> bool: ...

    def set_job(self, batch_id: str, lane_key: str, job: SubmittedJob | None, *, chunk: int) -> None: ...

    def note_submitting(self, batch_id: str, lane_key: str, mark: str, expect: str | None = None) -> bool: ...

    def set_partial(self, batch_id: str, lane_key: str, chunk: int) -> None: ...

    def start_chunk(self, batch_id: str, lane_key: str, position: int, *, items: int) -> bool: ...

    def finish_chunk(self, batch_id: str, lane_key: str, tally: ChunkTally, *, at: str) -> bool: ...

    def cancel_rest(
        self, batch_id: str, lane_key: str, *, pending: int, running: int, at: str, reason: str
    ) -> bool: ...

    def set_fail_error(
        self, batch_id: str, lane_key: str, *, code: str, message: str, summary: str
    ) -> None: ...

    def hand_over(self, batch_id: str, move: HandOver) -> bool: ...
