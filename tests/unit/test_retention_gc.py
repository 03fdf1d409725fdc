"""Retention GC rules and the collector over in-memory fakes: when bytes may go per tier, when
a kept batch is looked at again, and what a sweep does with unfinished or vanished batches."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from batchroute.clock import FixedClock, isoformat
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.billing.retention import REVIEW_INTERVAL, RetentionSettings, keep_until, next_review
from batchroute.services.workflow.retention_gc import RetentionCollector

T0 = datetime(2026, 3, 1, tzinfo=UTC)
GRACE = timedelta(hours=72)


@pytest.mark.parametrize(
    ("settings", "kept_for"),
    [
        (RetentionSettings(org_id="o"), GRACE),
        (
            RetentionSettings(org_id="o", retention_tier="extended_fixed", extended_days=30),
            timedelta(days=30),
        ),
        (RetentionSettings(org_id="o", retention_tier="extended_fixed", extended_days=1), GRACE),
        (RetentionSettings(org_id="o", retention_tier="until_deleted"), None),
        # never_charge wins even over a stored paid tier (defence in depth: the update coerces it)
        (RetentionSettings(org_id="o", retention_tier="until_deleted", never_charge=True), GRACE),
    ],
)
def test_keep_until_per_tier(settings: RetentionSettings, kept_for: timedelta | None) -> None:
    until = keep_until(settings, finalized_at=T0, grace=GRACE)
    assert until == (None if kept_for is None else T0 + kept_for)


def test_a_kept_batch_is_reviewed_at_its_time_or_within_a_day() -> None:
    now = T0 + GRACE
    assert next_review(None, now=now) == now + REVIEW_INTERVAL
    assert next_review(now + timedelta(hours=2), now=now) == now + timedelta(hours=2)
    assert next_review(now + timedelta(days=30), now=now) == now + REVIEW_INTERVAL


class FakeIndex:
    def __init__(self, batches: dict[str, BatchRecord]) -> None:
        self.batches = batches
        self.entries: dict[str, str] = {}  # batch id -> entry (review_at#id)
        self.marked: dict[str, str] = {}
        self.rechecks: set[str] = set()  # entries moved to a re-check, not a reclaim time

    def add(self, batch_id: str, review_at: datetime) -> None:
        self.entries[batch_id] = f"{isoformat(review_at)}#{batch_id}"

    def reclaim_due(self, now_iso: str, limit: int) -> list[tuple[str, str]]:
        # as the adapter: entries at their reclaim time first, then re-checks, each oldest first
        due = sorted(
            (batch_id in self.rechecks, entry, batch_id)
            for batch_id, entry in self.entries.items()
            if entry < now_iso
        )
        return [(batch_id, entry) for _, entry, batch_id in due[:limit]]

    def reschedule_reclaim(self, batch_id: str, *, seen: str, review_at: str, recheck: bool = False) -> bool:
        if self.entries.get(batch_id) != seen:
            return False
        self.entries[batch_id] = f"{review_at}#{batch_id}"
        (self.rechecks.add if recheck else self.rechecks.discard)(batch_id)
        return True

    def drop_reclaim(self, batch_id: str, *, seen: str) -> bool:
        if self.entries.get(batch_id) != seen:
            return False
        del self.entries[batch_id]
        return True

    def get(self, batch_id: str) -> BatchRecord | None:
        return self.batches.get(batch_id)

    def mark_reclaimed(self, batch_id: str, *, at: str) -> bool:
        if batch_id in self.marked:
            return False
        self.marked[batch_id] = at
        return True


class FakeSettings:
    def __init__(self) -> None:
        self.reads = 0

    def retention(self, org_id: str) -> RetentionSettings | None:
        self.reads += 1
        return None  # never saved: grace_only


class FakeObjects:
    def __init__(self, keys: list[str]) -> None:
        self.stored = set(keys)

    def keys(self, prefix: str) -> Iterator[str]:
        return iter(sorted(k for k in self.stored if k.startswith(prefix)))

    def delete_many(self, keys: list[str]) -> None:
        self.stored -= set(keys)


def batch(batch_id: str, state: str = "completed", finalized: datetime | None = T0) -> BatchRecord:
    return BatchRecord.from_mapping(
        {
            "batch_id": batch_id,
            "org_id": "org_a",
            "state": state,
            "created_at": isoformat(T0),
            "finalized_at": isoformat(finalized) if finalized else None,
        }
    )


def collector(
    index: FakeIndex, objects: FakeObjects, settings: FakeSettings, clock: FixedClock
) -> RetentionCollector:
    return RetentionCollector(index=index, settings=settings, objects=objects, clock=clock, grace=GRACE)


def test_a_sweep_reclaims_due_batches_keeps_receipts_and_reads_each_org_once() -> None:
    # Given two finished batches of one org, due, with many objects (more than one delete page)
    index = FakeIndex({"b1": batch("b1"), "b2": batch("b2")})
    keys = [f"batches/b1/results/l/{n:05d}.jsonl" for n in range(2500)]
    keys += [
        "batches/b1/receipt.json",
        "batches/b2/results.jsonl",
        "batches/b2/receipt.json",
        "batches/b10/x",
    ]
    objects, settings, clock = (
        FakeObjects(keys),
        FakeSettings(),
        FixedClock(T0 + GRACE + timedelta(seconds=1)),
    )
    for batch_id in ("b1", "b2"):
        index.add(batch_id, T0 + GRACE)
    # When one sweep runs
    report = collector(index, objects, settings, clock).collect()
    # Then both are reclaimed, only their receipts (and the other batch's object) remain
    assert report.reclaimed == ["b1", "b2"] and report.objects_deleted == 2501
    assert objects.stored == {"batches/b1/receipt.json", "batches/b2/receipt.json", "batches/b10/x"}
    assert index.entries == {} and settings.reads == 1


def test_an_unfinished_batch_is_looked_at_again_and_a_vanished_one_dropped() -> None:
    # Given a due entry of a batch still finalizing and one whose batch no longer exists
    index = FakeIndex({"run": batch("run", state="finalizing")})
    index.add("run", T0 + GRACE)
    index.add("gone", T0 + GRACE)
    clock = FixedClock(T0 + GRACE + timedelta(seconds=1))
    objects = FakeObjects(["batches/run/results.jsonl"])
    # When a sweep runs
    report = collector(index, objects, FakeSettings(), clock).collect()
    # Then the unfinished one is kept and reviewed a day later; the vanished entry is dropped
    assert report.reclaimed == [] and report.deferred == ["run"]
    assert index.entries == {"run": f"{isoformat(clock.now() + REVIEW_INTERVAL)}#run"}
    assert objects.stored == {"batches/run/results.jsonl"}
