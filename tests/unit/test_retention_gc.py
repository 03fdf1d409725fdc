"""Retention GC rules and the collector over in-memory fakes: when bytes may go per tier, when
a kept batch is looked at again, and what a sweep does with unfinished or vanished batches."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any

import pytest

from batchroute.clock import FixedClock, isoformat
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.billing.retention import REVIEW_INTERVAL, RetentionSettings, keep_until, next_review
from batchroute.services.workflow.retention_gc import WORKFLOW_SETTLE, RetentionCollector
from batchroute.transactions import TransactItem

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
        batch = self.batches.get(batch_id)
        marked = self.marked.get(batch_id)
        return batch if batch is None or marked is None else replace(batch, artifacts_reclaimed_at=marked)

    def mark_reclaimed(self, batch_id: str, *, at: str, unless: TransactItem | None = None) -> bool:
        # `unless` (the settings as read) always holds here: the fake settings never change
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

    def retention_unchanged(self, settings: RetentionSettings) -> TransactItem:
        return {"ConditionCheck": {"Key": settings.org_id, "version": settings.version}}


class FakeObjects:
    def __init__(self, keys: list[str]) -> None:
        self.stored = set(keys)

    def keys(self, prefix: str) -> Iterator[str]:
        return iter(sorted(k for k in self.stored if k.startswith(prefix)))

    def delete_many(self, keys: list[str]) -> None:
        self.stored -= set(keys)


def batch(
    batch_id: str, state: str = "completed", finalized: datetime | None = T0, ended: datetime | None = None
) -> BatchRecord:
    return BatchRecord.from_mapping(
        {
            "batch_id": batch_id,
            "org_id": "org_a",
            "state": state,
            "created_at": isoformat(T0),
            "finalized_at": isoformat(finalized) if finalized else None,
            "state_changed_at": isoformat(ended) if ended else None,
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


def test_an_unfinished_batch_is_looked_at_again_and_the_chunks_of_a_batch_never_made_go() -> None:
    # Given a due entry of a batch still finalizing, and the entry a create put before its
    # input chunks, whose transaction never committed (no batch; its chunks stored)
    index = FakeIndex({"run": batch("run", state="finalizing")})
    index.add("run", T0 + GRACE)
    index.add("never", T0 + GRACE)
    clock = FixedClock(T0 + GRACE + timedelta(seconds=1))
    objects = FakeObjects(
        ["batches/run/results.jsonl", "batches/never/input/00000.jsonl", "batches/never/input/00001.jsonl"]
    )
    # When a sweep runs
    report = collector(index, objects, FakeSettings(), clock).collect()
    # Then the unfinished one is kept and reviewed a day later; the chunks no batch owns are
    # deleted and their entry dropped
    assert report.reclaimed == [] and report.deferred == ["run"] and report.objects_deleted == 2
    assert index.entries == {"run": f"{isoformat(clock.now() + REVIEW_INTERVAL)}#run"}
    assert objects.stored == {"batches/run/results.jsonl"}


def test_a_terminal_batch_never_finalized_is_kept_while_its_workflow_may_still_run() -> None:
    # Given a batch expired at T0 that no Finalize reached (its workflow died), due on the index
    index = FakeIndex({"dead": batch("dead", state="expired", finalized=None, ended=T0)})
    index.add("dead", T0 + GRACE)
    objects = FakeObjects(["batches/dead/input/00000.jsonl", "batches/dead/results/l/00000.jsonl"])
    settings = FakeSettings()
    # When sweeps run at the end of the grace window, and a second before settle + grace
    clock = FixedClock(T0 + GRACE + timedelta(seconds=1))
    early = collector(index, objects, settings, clock).collect()
    clock.advance(seconds=(T0 + WORKFLOW_SETTLE + GRACE - timedelta(seconds=1) - clock.now()).total_seconds())
    late = collector(index, objects, settings, clock).collect()
    # Then both keep it (a live workflow could still finalize), its entry at settle + grace
    assert early.deferred == ["dead"] and late.deferred == ["dead"] and late.reclaimed == []
    assert index.entries == {"dead": f"{isoformat(T0 + WORKFLOW_SETTLE + GRACE)}#dead"}
    assert len(objects.stored) == 2
    # When a sweep runs once that time has passed
    clock.advance(seconds=2)
    report = collector(index, objects, settings, clock).collect()
    # Then its bytes go like any finished batch's
    assert report.reclaimed == ["dead"] and objects.stored == set() and index.entries == {}


def test_a_batch_still_running_is_never_reclaimed_whatever_its_entry_says() -> None:
    # Given a running batch (no terminal transition) with a due entry, a year on
    index = FakeIndex({"run": batch("run", state="running", finalized=None, ended=T0)})
    index.add("run", T0 + GRACE)
    clock = FixedClock(T0 + timedelta(days=365))
    objects = FakeObjects(["batches/run/input/00000.jsonl"])
    # When a sweep runs
    report = collector(index, objects, FakeSettings(), clock).collect()
    # Then it is kept and looked at again a day later
    assert report.deferred == ["run"] and report.reclaimed == []
    assert index.entries == {"run": f"{isoformat(clock.now() + REVIEW_INTERVAL)}#run"}


def _longest_run(task: dict[str, Any]) -> timedelta:
    """A task's longest time in the state machine: every attempt its Retry allows timing out,
    with the longest wait between each (Step Functions' IntervalSeconds, BackoffRate,
    MaxDelaySeconds)."""
    timeout = task["TimeoutSeconds"]
    seconds = timeout
    for retry in task.get("Retry", []):
        if not {"States.Timeout", "States.ALL"} & set(retry["ErrorEquals"]):
            continue
        for attempt in range(retry.get("MaxAttempts", 3)):
            wait = retry.get("IntervalSeconds", 1) * retry.get("BackoffRate", 2.0) ** attempt
            seconds += min(wait, retry.get("MaxDelaySeconds", wait)) + timeout
    return timedelta(seconds=seconds)


def test_the_settle_margin_covers_the_longest_workflow_path_after_a_terminal_transition() -> None:
    # Given the deployed state machine's tasks, time-outs and retries
    definition = json.loads(
        resources.files("batchroute.workflow").joinpath("batch.asl.json").read_text(encoding="utf-8")
    )
    states = definition["States"]
    run_lane = states["RunLanes"]["Iterator"]["States"]["RunLane"]
    # Then a lane begun before the transition, Finalize and then HandleFailure all fit in it
    longest = sum(
        (_longest_run(task) for task in (run_lane, states["Finalize"], states["HandleFailure"])), timedelta()
    )
    assert longest <= WORKFLOW_SETTLE
