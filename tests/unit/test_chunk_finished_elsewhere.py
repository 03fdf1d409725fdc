"""A lane's chunk that another worker finished first (the lane message delivered twice, both
running it at once) keeps that worker's result file: the later worker neither writes its own
answers over it nor counts the chunk again (services/workflow/execution.py, `_finish_chunk`);
two that cross each write a file of their own, and only the one the counted finish notes on
the lane record stays and is read."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from batchroute.clock import FixedClock
from batchroute.domain.batches.artifact_keys import lane_result_key
from batchroute.domain.routing.lane_plan import LaneRecord, lane_result_writer
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
    unused: dict[str, Any] = dict.fromkeys(
        ("records", "registry", "catalog", "continuations", "policies", "capacity", "rescue", "availability")
    )
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


def result_files(artifacts: Artifacts) -> set[str]:
    return set(artifacts.written) - {"partial"}


class FirstFinishWins(Progress):
    """The lane record's condition: the chunk is finished once; a second finish changes nothing."""

    def finish_chunk(self, batch_id: str, lane_key: str, tally: Any, *, at: str) -> bool:
        if self.finished:
            return False
        self.finished.append(tally)
        return True

    def hand_over(self, batch_id: str, move: Any) -> bool:
        return self.finish_chunk(batch_id, move.lane_key, move.tally, at=move.at)


def chunk_with(status: str) -> _Chunk:
    chunk = _Chunk(number=0, position=0, first_ordinal=0, kept=[(0, {}), (1, {})])
    for seq in (0, 1):
        chunk.results[seq] = {"seq": seq, "status": status}  # type: ignore[typeddict-item]
    return chunk


def test_two_workers_crossing_each_keep_their_own_file_and_only_the_counted_one_stays() -> None:
    # Given two workers running the same lane at once, both past the check (the lane record
    # they read says the chunk is not finished), one with answers, one with failures
    progress, artifacts = FirstFinishWins(lane(done=0)), Artifacts()
    first, second = executor(progress, artifacts), executor(progress, artifacts)
    # When the first finishes the chunk, and the second comes to finish it just after
    first._finish_chunk("batch_1", lane(done=0), chunk_with("completed"))
    second._finish_chunk("batch_1", lane(done=0), chunk_with("failed"))
    # Then the chunk is counted once, as the first's answers, and the one result file left
    # is the first's: the file the counted finish notes on the lane record
    (tally,) = progress.finished
    assert tally.completed == 2 and tally.failed == 0
    noted = replace(lane(done=1), result_writers=(tally.result_writer,))
    assert result_files(artifacts) == {lane_result_key("batch_1", noted, 0)}
    assert [line["status"] for line in artifacts.written[lane_result_key("batch_1", noted, 0)]] == [
        "completed",
        "completed",
    ]


def test_a_hand_over_another_worker_beat_leaves_no_file_of_its_own() -> None:
    progress, artifacts = FirstFinishWins(lane(done=0)), Artifacts()
    executor(progress, artifacts)._finish_chunk("batch_1", lane(done=0), chunk_with("completed"))
    handed = executor(progress, artifacts)._hand_over(
        "batch_1", lane(done=0), chunk_with("failed"), lane(done=0), "failover"
    )
    (tally,) = progress.finished
    noted = replace(lane(done=1), result_writers=(tally.result_writer,))
    assert handed is False and result_files(artifacts) == {lane_result_key("batch_1", noted, 0)}


def test_a_lane_record_from_before_writers_were_noted_reads_its_chunk_file_where_it_was() -> None:
    # A record written before the change notes no writer: its file is at the plain key
    assert lane_result_key("batch_1", lane(done=1), 0) == "batches/batch_1/results/L1/00000.jsonl"
    noted = replace(lane(done=1), result_writers=("0:ab12",))
    assert lane_result_key("batch_1", noted, 0) == "batches/batch_1/results/L1/00000.ab12.jsonl"
    assert lane_result_key("batch_1", noted, 1) == "batches/batch_1/results/L1/00001.jsonl"


@given(st.dictionaries(st.integers(0, 2000), st.from_regex(r"[0-9a-f]{12}", fullmatch=True), max_size=40))
def test_each_chunk_reads_the_writer_noted_for_it_and_no_other(writers: dict[int, str]) -> None:
    # Chunk numbers that prefix one another (1, 11, 110) each find their own note
    noted = replace(
        lane(done=1), result_writers=tuple(f"{chunk}:{writer}" for chunk, writer in writers.items())
    )
    for chunk in range(0, 2001, 7):
        assert lane_result_writer(noted, chunk) == writers.get(chunk)
    for chunk, writer in writers.items():
        assert lane_result_key("batch_1", noted, chunk).endswith(f"/{chunk:05d}.{writer}.jsonl")
