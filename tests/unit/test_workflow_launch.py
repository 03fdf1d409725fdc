"""WorkflowLaunch: a batch's start is recorded only when it happened, and the sweeper's pass
starts what its creating request did not, after the request's grace (services/batches/launch.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from batchroute.services.batches.launch import START_GRACE, WorkflowLaunch

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class Index:
    def __init__(self, unstarted: list[str] | None = None, *, fail_record: bool = False) -> None:
        self.recorded: dict[str, str] = {}
        self.asked: list[tuple[str, int]] = []
        self._unstarted = unstarted or []
        self._fail_record = fail_record

    def started(self, batch_id: str, execution_arn: str) -> None:
        if self._fail_record:
            raise RuntimeError("throttled")
        self.recorded[batch_id] = execution_arn

    def unstarted(self, created_before: str, limit: int = 100) -> list[str]:
        self.asked.append((created_before, limit))
        return list(self._unstarted)


def _start(refused: frozenset[str] = frozenset()):  # type: ignore[no-untyped-def]
    def start(*, batch_id: str) -> str:
        if batch_id in refused:
            raise RuntimeError("ThrottlingException")
        return f"arn:aws:states:us-east-1:1:execution:batch:{batch_id}"

    return start


def test_a_start_is_recorded_with_its_execution() -> None:
    index = Index()
    assert WorkflowLaunch(index, _start()).launch("batch_1") is True
    assert index.recorded == {"batch_1": "arn:aws:states:us-east-1:1:execution:batch:batch_1"}


@pytest.mark.parametrize(("refused", "fail_record"), [(frozenset({"batch_1"}), False), (frozenset(), True)])
def test_a_failed_start_or_record_leaves_the_batch_for_the_sweeper(
    refused: frozenset[str], fail_record: bool
) -> None:
    index = Index(fail_record=fail_record)
    assert WorkflowLaunch(index, _start(refused)).launch("batch_1") is False
    assert index.recorded == {}


def test_the_sweep_starts_batches_older_than_the_grace_and_reports_each() -> None:
    index = Index(["batch_1", "batch_2", "batch_3"])
    report = WorkflowLaunch(index, _start(frozenset({"batch_2"}))).launch_unstarted(NOW, limit=50)
    assert index.asked == [("2026-12-01T11:59:00.000Z", 50)] and START_GRACE.total_seconds() == 60
    assert report.started == ["batch_1", "batch_3"] and report.failed == ["batch_2"]
    assert sorted(index.recorded) == ["batch_1", "batch_3"]
