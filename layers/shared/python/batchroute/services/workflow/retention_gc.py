"""Retention garbage collection: the sweeper reclaims a finished batch's result bytes once the
org's retention window has passed (docs/retention.md).

Finalize puts every batch on a sparse index (`RECLAIM`, sorted by review time) at the end
of the free grace window, the earliest moment any tier lets bytes go; so do the failure path
and the expiry sweeper when they make a batch terminal, in case Finalize never gets through
(its window then starts `WORKFLOW_SETTLE` after the terminal transition). Each sweep takes at
most `max_batches` due entries, oldest first (those at their reclaim time before re-checks of
kept batches, which wait in their own partition), and decides each against the org's CURRENT
settings (`domain/billing/retention.py`): past its window, the batch is marked reclaimed
(every read answers 410 from then on; the mark checks the settings are still as read, so a
change saved meanwhile has the batch decided again on it), then every object under its
prefix except the receipt is deleted, then the entry is dropped; otherwise the entry moves
to the batch's reclaim time, or a day later at most, so a later change of settings is
honoured. Every step is idempotent and the index moves are conditional on the entry a sweep
read, so two sweeps never fight: a crash between steps leaves the entry due, and the next
sweep finishes the work.

Batch create puts an entry before it writes a batch's input chunks, an hour ahead
(`domain/billing/retention.py:ORPHAN_AFTER`), and its transaction deletes that entry with the
batch's commit: an entry with no batch behind it is a create that died between the two, and
its chunks are deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol, TypedDict

from batchroute.clock import Clock, isoformat
from batchroute.domain.batches.artifact_keys import batch_prefix, receipt_key
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.batches.states import TERMINAL
from batchroute.domain.billing.retention import RetentionSettings, keep_until, next_review
from batchroute.services.batches.ports import BatchReader
from batchroute.services.billing.ports import RetentionLookup
from batchroute.transactions import TransactItem

DEFAULT_MAX_BATCHES = 50  # per sweep (once a minute): up to 72,000 batches a day
# How long a workflow may still be on a batch that went terminal without Finalize (expired by
# the sweeper, or failed by a failure path whose finalize did not get through): at least the
# longest task path that can follow the terminal transition in batch.asl.json, a RunLane begun
# before it (25 h), then Finalize (1 h), then HandleFailure with every retry its Retry allows
# (tests/unit/test_retention_gc.py checks the sum against the definition). A workflow still
# alive finalizes within it, and its `finalized_at` then starts the window; past it, the
# workflow is dead (a later redrive finds the bytes gone: finalize.py, ArtifactsReclaimed).
WORKFLOW_SETTLE = timedelta(days=4)
_DELETE_PAGE = 1000  # S3 DeleteObjects takes at most 1,000 keys


class ReclaimMarks(Protocol):
    """Marking a batch's bytes reclaimed, and (the vendor-compatible surface deleting its
    files, services/compat/files.py) putting its entry due now: the next sweep deletes them."""

    def mark_reclaimed(self, batch_id: str, *, at: str, unless: TransactItem | None = None) -> bool: ...

    def reclaim_now(self, batch_id: str, *, at: str) -> None: ...


class ReclaimIndex(BatchReader, ReclaimMarks, Protocol):
    def reclaim_due(self, now_iso: str, limit: int) -> list[tuple[str, str]]: ...

    def reschedule_reclaim(
        self, batch_id: str, *, seen: str, review_at: str, recheck: bool = False
    ) -> bool: ...

    def drop_reclaim(self, batch_id: str, *, seen: str) -> bool: ...


class RetentionAsRead(RetentionLookup, Protocol):
    def retention_unchanged(self, settings: RetentionSettings) -> TransactItem:
        """A check, written with the mark, that the org's settings are still `settings`."""
        ...


class ArtifactObjects(Protocol):
    def keys(self, prefix: str) -> Iterator[str]: ...

    def delete_many(self, keys: list[str]) -> None: ...


class ReclaimSummary(TypedDict):
    reclaimed: list[str]
    deferred: int
    objects_deleted: int


@dataclass
class ReclaimReport:
    reclaimed: list[str] = field(default_factory=list)  # batch ids whose bytes went this sweep
    deferred: list[str] = field(default_factory=list)  # looked at, kept for now
    objects_deleted: int = 0

    def as_dict(self) -> ReclaimSummary:
        return {
            "reclaimed": self.reclaimed,
            "deferred": len(self.deferred),
            "objects_deleted": self.objects_deleted,
        }


@dataclass(eq=False, kw_only=True)
class RetentionCollector:
    index: ReclaimIndex
    settings: RetentionAsRead
    objects: ArtifactObjects
    clock: Clock
    grace: timedelta
    max_batches: int = DEFAULT_MAX_BATCHES

    def collect(self) -> ReclaimReport:
        """One bounded page of due batches: reclaim or reschedule each."""
        report = ReclaimReport()
        now = self.clock.now()
        at = isoformat(now)
        orgs: dict[str, RetentionSettings] = {}  # each org's settings read once per sweep
        for batch_id, seen in self.index.reclaim_due(at, self.max_batches):
            batch = self.index.get(batch_id)
            if batch is None:  # a create that died before its transaction: its input chunks
                report.objects_deleted += self._delete_bytes(batch_id)  # are no batch's
                self.index.drop_reclaim(batch_id, seen=seen)
                continue
            if batch.org_id not in orgs:
                orgs[batch.org_id] = self.settings.retention(batch.org_id) or RetentionSettings(
                    org_id=batch.org_id
                )
            until = self._until(batch, orgs[batch.org_id])
            if batch.artifacts_reclaimed_at is None and (until is None or until > now):
                review_at = next_review(until, now=now)
                self.index.reschedule_reclaim(
                    batch_id, seen=seen, review_at=isoformat(review_at), recheck=review_at != until
                )
                report.deferred.append(batch_id)
                continue
            newly = False
            if batch.artifacts_reclaimed_at is None:
                unchanged = self.settings.retention_unchanged(orgs[batch.org_id])
                newly = self.index.mark_reclaimed(batch_id, at=at, unless=unchanged)
                if not newly and not self._marked(batch_id):
                    # The org saved its settings after this sweep read them (a longer window,
                    # say): nothing is deleted, and the entry, still due, is decided again on them.
                    del orgs[batch.org_id]
                    report.deferred.append(batch_id)
                    continue
            report.objects_deleted += self._delete_bytes(batch_id)
            self.index.drop_reclaim(batch_id, seen=seen)
            if newly:
                report.reclaimed.append(batch_id)
        return report

    def _marked(self, batch_id: str) -> bool:
        """The batch is marked reclaimed (by this sweep's earlier try, or another sweep)."""
        batch = self.index.get(batch_id)
        return batch is not None and batch.artifacts_reclaimed_at is not None

    def _until(self, batch: BatchRecord, settings: RetentionSettings) -> datetime | None:
        """When this batch's bytes may go; None while kept (until deleted, or not finished)."""
        start = window_start(batch)
        if start is None:
            return None  # the workflow is still on it: look again later
        return keep_until(settings, finalized_at=start, grace=self.grace)

    def _delete_bytes(self, batch_id: str) -> int:
        """Every object under the batch's prefix but its receipt, 1,000 per request."""
        keep = receipt_key(batch_id)
        deleted = 0
        page: list[str] = []
        for key in self.objects.keys(batch_prefix(batch_id)):
            if key == keep:
                continue
            page.append(key)
            if len(page) == _DELETE_PAGE:
                self.objects.delete_many(page)
                deleted, page = deleted + len(page), []
        self.objects.delete_many(page)
        return deleted + len(page)


def window_start(batch: BatchRecord) -> datetime | None:
    """When a terminal batch's retention window starts: when Finalize wrote its artifacts or,
    for a batch that ended without them, `WORKFLOW_SETTLE` after it went terminal (a workflow
    that is still alive finalizes before then). None while the batch is not terminal."""
    if batch.state not in TERMINAL:
        return None
    if batch.finalized_at is not None:
        return datetime.fromisoformat(batch.finalized_at)
    ended = [
        datetime.fromisoformat(moment) for moment in (batch.state_changed_at, batch.completed_at) if moment
    ]
    return max(ended) + WORKFLOW_SETTLE if ended else None
