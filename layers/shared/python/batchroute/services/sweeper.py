"""The scheduled sweeper: moves batches whose SLA deadline passed to `expired`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.batch_states import BatchState


class ExpiryRecords(Protocol):
    def past_deadline(self, now_iso: str, limit: int = 100) -> list[str]: ...

    def transition(
        self, batch_id: str, target: BatchState, *, at: str, extra: dict[str, object] | None = None
    ) -> bool: ...


@dataclass
class SweepReport:
    expired: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def expire_overdue_batches(records: ExpiryRecords, clock: Clock, *, max_batches: int = 1000) -> SweepReport:
    report = SweepReport()
    now = isoformat(clock.now())
    while len(report.expired) + len(report.skipped) < max_batches:
        due = records.past_deadline(now)
        if not due:
            break
        for batch_id in due:
            moved = records.transition(
                batch_id,
                "expired",
                at=now,
                extra={"execution_summary": {"latest_error": "SLA deadline passed"}},
            )
            (report.expired if moved else report.skipped).append(batch_id)
        if all(b in report.skipped for b in due):
            break  # only batches another writer already finished remain in this page
    return report
