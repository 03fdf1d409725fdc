"""A created batch's workflow start, made once by the request that created it and again by the
sweeper for any batch whose start was never recorded (docs/batches.md, "Starting the
workflow").

The create transaction puts the batch on a start index with its reservation; the index entry
goes once the start is recorded. A start that failed (throttled, the function timed out or
died between the commit and the start) leaves the batch there, and the sweeper starts it
after `START_GRACE`: the execution is named after the batch, so a repeated start is a no-op,
and the workflow settles a batch that was canceled or expired before it ran (nothing is left
reserved)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from batchroute.clock import isoformat
from batchroute.observability import logger

# How long the creating request has to start its own batch before the sweeper does.
START_GRACE = timedelta(minutes=1)


class WorkflowStarter(Protocol):
    """Starts the batch's execution (named after the batch) and answers its ARN."""

    def __call__(self, *, batch_id: str) -> str: ...


class StartIndex(Protocol):
    """adapters/dynamo/batch_records.py:BatchRecords: the batches whose start is not recorded."""

    def started(self, batch_id: str, execution_arn: str) -> None: ...

    def unstarted(self, created_before: str, limit: int = 100) -> list[str]: ...


@dataclass
class LaunchReport:
    started: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


@dataclass(eq=False)
class WorkflowLaunch:
    index: StartIndex
    start: WorkflowStarter

    def launch(self, batch_id: str) -> bool:
        """Start the batch's workflow and record it; False (logged) when either failed, the
        batch then stays on the start index for the sweeper."""
        try:
            self.index.started(batch_id, self.start(batch_id=batch_id))
        except Exception:
            logger.exception(
                "workflow start failed; the sweeper starts it again", extra={"batch_id": batch_id}
            )
            return False
        return True

    def launch_unstarted(self, now: datetime, *, limit: int = 100) -> LaunchReport:
        """Start the workflows of batches created before `now - START_GRACE` whose start was
        never recorded (one page of at most `limit`)."""
        report = LaunchReport()
        for batch_id in self.index.unstarted(isoformat(now - START_GRACE), limit):
            (report.started if self.launch(batch_id) else report.failed).append(batch_id)
        return report
