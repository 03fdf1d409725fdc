from __future__ import annotations

from datetime import UTC, datetime

from batchroute.clock import FixedClock
from batchroute.domain.batches.states import BatchState, can_transition
from batchroute.services.workflow.sweeper import expire_overdue_batches


class FakeRecords:
    def __init__(self, batches: dict[str, tuple[BatchState, str]]) -> None:
        self.batches = dict(batches)
        self.reclaims: dict[str, str] = {}  # batch id -> review_at (put once)

    def schedule_reclaim(self, batch_id: str, *, review_at: str) -> bool:
        return self.reclaims.setdefault(batch_id, review_at) == review_at

    def past_deadline(self, now_iso: str, limit: int = 100) -> list[str]:
        due = [
            b for b, (state, deadline) in self.batches.items() if deadline < now_iso and state != "expired"
        ]
        return sorted(due)[:limit]

    def transition(
        self, batch_id: str, target: BatchState, *, at: str, extra: dict[str, object] | None = None
    ) -> bool:
        state, deadline = self.batches[batch_id]
        if not can_transition(state, target):
            return False
        self.batches[batch_id] = (target, deadline)
        return True


def test_only_overdue_non_terminal_batches_expire() -> None:
    # Given one overdue running batch, one not yet due, one completed but overdue
    records = FakeRecords(
        {
            "batch_a": ("running", "2026-01-01T00:00:00.000Z"),
            "batch_b": ("queued", "2026-01-03T00:00:00.000Z"),
            "batch_c": ("completed", "2026-01-01T00:00:00.000Z"),
        }
    )
    clock = FixedClock(datetime(2026, 1, 2, tzinfo=UTC))
    # When the sweeper runs
    report = expire_overdue_batches(records, clock)
    # Then only the overdue running batch expired; the completed one is left alone
    assert report.expired == ["batch_a"]
    assert records.batches["batch_c"][0] == "completed"
    assert records.batches["batch_b"][0] == "queued"
    # And the expired one is on the retention GC's index, due at the end of the grace window
    assert records.reclaims["batch_a"] == "2026-01-05T00:00:00.000Z" and "batch_b" not in records.reclaims
    # And a later sweep after the second deadline expires it too
    clock.advance(days=2)
    assert expire_overdue_batches(records, clock).expired == ["batch_b"]
