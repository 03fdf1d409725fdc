"""The final artifact: a k-way merge of lane result chunks in input order, one row per item."""

from __future__ import annotations

from typing import Any

from batchroute.domain.batches.record import BatchRecord, ExecutionSummary, missing_reason
from batchroute.domain.workflow.results import MergeTally, artifact_row, merge_chunk, missing_row
from batchroute.services.workflow.finalize import counts_of, unrun_canceled


def _line(
    seq: int, lane: str, status: str = "completed", prompt: int = 10, completion: int = 5
) -> dict[str, Any]:
    failed = status != "completed"
    return {
        "seq": seq,
        "customer_item_id": f"c{seq}",
        "status": status,
        "output": None if failed else {"type": "message", "content": f"answer {seq}"},
        "error": {"code": "boom", "message": "no", "transient": False} if failed else None,
        "raw": {"id": seq},
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
        "provider": lane,
        "lane_id": f"{lane}/m",
        "lane_key": f"01-{lane}",
        "attempts": 1,
    }


def _missing(seq: int) -> dict[str, Any]:
    return missing_row(seq, f"c{seq}", code="canceled", message="canceled")


def test_lanes_are_merged_by_seq_and_unanswered_items_get_a_failed_row() -> None:
    inputs = range(6)
    lane_a = [_line(0, "a"), _line(3, "a", "failed"), _line(5, "a")]
    lane_b = [_line(1, "b"), _line(2, "b", prompt=7, completion=3)]
    tally = MergeTally()
    rows = list(merge_chunk(inputs, [iter(lane_a), iter(lane_b)], missing=_missing, tally=tally))
    assert [r["sequence_number"] for r in rows] == [0, 1, 2, 3, 4, 5]
    assert [r["status"] for r in rows] == [
        "completed",
        "completed",
        "completed",
        "failed",
        "failed",
        "completed",
    ]
    assert (
        rows[4]["error"] == {"code": "canceled", "message": "canceled"}
        and rows[4]["customer_item_id"] == "c4"
    )
    assert rows[3]["error"] == {"code": "boom", "message": "no"} and rows[3]["output"] is None
    assert (tally.completed, tally.failed, tally.missing, tally.rows) == (4, 1, 1, 6)
    # Only completed rows count towards a lane's usage
    assert tally.lanes["01-a"].to_dict() == {
        "completed": 2,
        "failed": 1,
        "prompt_tokens": 20,
        "completion_tokens": 10,
    }
    assert tally.lanes["01-b"].to_dict() == {
        "completed": 2,
        "failed": 0,
        "prompt_tokens": 17,
        "completion_tokens": 8,
    }


def test_a_seq_answered_twice_keeps_the_first_and_strays_are_dropped() -> None:
    tally = MergeTally()
    rows = list(
        merge_chunk(
            [10, 11],
            [iter([_line(9, "a"), _line(10, "a")]), iter([_line(10, "b"), _line(11, "b"), _line(12, "b")])],
            missing=_missing,
            tally=tally,
        )
    )
    assert [(r["sequence_number"], r["status"]) for r in rows] == [(10, "completed"), (11, "completed")]
    assert tally.rows == 2 and tally.missing == 0


def test_the_artifact_row_is_the_native_result_row_plus_sequence_number_and_raw() -> None:
    row = artifact_row({**_line(4, "a"), "model": "m"})
    assert row == {
        "customer_item_id": "c4",
        "sequence_number": 4,
        "status": "completed",
        "output": {"type": "message", "content": "answer 4"},
        "error": None,
        "raw": {"id": 4},
        # what answered it: the vendor-compatible output builds its bodies from these
        "model": "m",
        "provider": "a",
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }
    failed = artifact_row(_line(5, "a", status="failed"))
    assert set(failed) == {"customer_item_id", "sequence_number", "status", "output", "error", "raw"}


def _batch(state: Any, **fields: Any) -> BatchRecord:
    return BatchRecord(
        batch_id="batch_1", org_id="org_1", state=state, created_at="2026-01-01T00:00:00Z", **fields
    )


def _final_counts(batch: BatchRecord, tally: MergeTally) -> dict[str, int]:
    return counts_of(tally, unrun_canceled=unrun_canceled(batch))


def test_final_counts_add_up_and_unrun_items_count_by_the_batch_state() -> None:
    tally = MergeTally(completed=3, failed=1, missing=2)
    assert _final_counts(_batch("canceled"), tally) == {
        "total": 6,
        "pending": 0,
        "running": 0,
        "completed": 3,
        "failed": 1,
        "canceled": 2,
    }
    assert _final_counts(_batch("failed"), tally)["failed"] == 3
    assert _final_counts(_batch("expired"), tally)["canceled"] == 2
    assert missing_reason(_batch("expired"))[0] == "expired"
    code, message = missing_reason(_batch("failed", execution_summary=ExecutionSummary("X: y")))
    assert code == "batch_failed" and "X: y" in message
