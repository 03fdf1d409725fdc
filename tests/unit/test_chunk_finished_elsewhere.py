"""A lane's chunk that another worker finished first (the lane message delivered twice, both
running it at once) keeps that worker's result file: the later worker neither writes its own
answers over it nor counts the chunk again (services/workflow/execution.py, `_finish_chunk`)."""

from __future__ import annotations

from typing import Any

from batchroute.clock import FixedClock
from batchroute.domain.routing.lane_plan import LaneRecord
from batchroute.domain.workflow.results import ResultLine
from batchroute.services.workflow.execution import LaneExecutor, _Chunk
from tests.unit.test_lane_runner_batch import policy


class Progress:
    """The lane record as the chunk's finish reads and moves it."""

    def __init__(self, lane: LaneRecord) -> None:
        self.lane = lane
        self.finished: list[Any] = []

    def get_lane(self, batch_id: str, lane_key: str) -> LaneRecord:
        return self.lane

    def finish_chunk(self, batch_id: str, lane_key: str, tally: Any, *, at: str) -> bool:
        self.finished.append(tally)
        return True


class Artifacts:
    def __init__(self) -> None:
        self.written: dict[str, list[ResultLine]] = {"partial": []}

    def write_lines(self, key: str, lines: list[ResultLine]) -> int:
        self.written[key] = list(lines)
        return len(lines)

    def delete(self, key: str) -> None:
        self.written.pop("partial" if "partial" in key else key, None)


def executor(progress: Progress, artifacts: Artifacts) -> LaneExecutor:
    unused: dict[str, Any] = dict.fromkeys(("records", "registry", "catalog", "continuations"))
    return LaneExecutor(
        progress=progress,  # type: ignore[arg-type]
        artifacts=artifacts,  # type: ignore[arg-type]
        retry=policy(),
        clock=FixedClock(),
        **unused,
    )


def lane(done: int) -> LaneRecord:
    """Lane L1 of one chunk (0), started, and finished `done` times."""
    return LaneRecord(
        lane_key="L1",
        lane_id="openai/gpt",
        provider="openai",
        model="gpt",
        ordinal_start=0,
        ordinal_end=2,
        item_count=2,
        chunk_ranges=((0, 0),),
        unit_prices={},
        created_at="2026-12-02T08:00:00Z",
        chunks_started_n=1,
        chunks_done_n=done,
    )


def chunk_with_failed_answers() -> _Chunk:
    chunk = _Chunk(number=0, position=0, first_ordinal=0, kept=[(0, {}), (1, {})], has_partial=True)
    for seq in (0, 1):
        chunk.results[seq] = {"seq": seq, "status": "failed", "error": {"code": "batch_job_forgotten"}}  # type: ignore[typeddict-item]
    return chunk


def test_a_chunk_another_worker_finished_first_keeps_its_result_file() -> None:
    # Given the lane record says another worker finished chunk 0 (its file written first)
    finished = lane(done=1)
    progress, artifacts = Progress(finished), Artifacts()
    # When this worker (which read the lane before) comes to finish the chunk with its answers
    executor(progress, artifacts)._finish_chunk("batch_1", lane(done=0), chunk_with_failed_answers())
    # Then nothing is written over the other's file, the chunk is not counted again, and
    # this worker's partial file of it is dropped
    assert artifacts.written == {} and progress.finished == []


def test_a_chunk_another_worker_finished_first_is_not_handed_over_again() -> None:
    # Given the other worker finished chunk 0; this one meets a failover (or a rescue) in it
    progress, artifacts = Progress(lane(done=1)), Artifacts()
    handed = executor(progress, artifacts)._hand_over(
        "batch_1", lane(done=0), chunk_with_failed_answers(), lane(done=0), "failover"
    )
    # Then it writes nothing over the other's file and moves nothing on
    assert handed is False and artifacts.written == {}


def test_a_chunk_not_finished_yet_is_written_then_counted() -> None:
    progress, artifacts = Progress(lane(done=0)), Artifacts()
    executor(progress, artifacts)._finish_chunk("batch_1", lane(done=0), chunk_with_failed_answers())
    assert len(artifacts.written) == 1 and "partial" not in artifacts.written
    assert len(progress.finished) == 1
