"""Faults between the queues and the workers: every SQS message delivered twice, and a worker
that dies after the vendor answered but before it wrote the result."""

from __future__ import annotations

from typing import Any

import pytest

from batchroute.adapters.batch_artifacts import BatchArtifacts
from batchroute.adapters.dynamo.batch_progress import BatchProgress
from batchroute.providers.openai.client import OpenAIBatch
from tests.faults.harness import (
    Pipeline,
    delivered_to_two_workers,
    delivered_twice,
    mixed_items,
    run_and_check,
)


def test_every_sqs_message_delivered_twice_runs_and_charges_once(pipeline: Pipeline) -> None:
    # Given every queue delivering each message twice (the copy after the first was handled)
    for queue in ("route", "lanes", "settle", "deliver"):
        pipeline.wrappers[queue] = delivered_twice(pipeline)
    # When the batch runs
    outcome = run_and_check(pipeline, mixed_items())
    # Then every step met its duplicate, and each item was answered, counted and charged once
    assert {kind.rsplit(":", 1)[1] for kind in pipeline.faults.counts} == {
        "route",
        "lanes",
        "settle",
        "deliver",
    }
    assert outcome.batch.state == "completed"
    assert {r["status"] for r in outcome.rows} == {"completed"}


def test_a_worker_dying_after_the_vendor_answered_loses_no_answer(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a worker that dies once per lane between the vendor's answer and writing its result
    original = BatchArtifacts.write_lines
    died: set[str] = set()

    def dies_once(self: BatchArtifacts, key: str, lines: Any) -> int:
        lane = key.split("/results/")[-1].split("/")[0] if "/results/" in key else None
        if lane is not None and lane not in died:
            died.add(lane)
            pipeline.faults.add("worker:died_before_result")
            raise RuntimeError("injected: the worker died before writing its result")
        return original(self, key, lines)

    monkeypatch.setattr(BatchArtifacts, "write_lines", dies_once)
    # When the batch runs (the message comes back and the lane runs the chunk again)
    outcome = run_and_check(pipeline, mixed_items())
    # Then both lanes died once, and still every item has one answer, charged once
    assert len(died) == 2
    assert {r["status"] for r in outcome.rows} == {"completed"}


def test_every_lane_message_run_by_two_workers_at_once_runs_and_charges_once(
    pipeline: Pipeline, serializable_transactions: None
) -> None:
    # Given every RunLane message handed to two workers at the same time
    pipeline.wrappers["lanes"] = delivered_to_two_workers(pipeline)
    # When the batch runs
    outcome = run_and_check(pipeline, mixed_items())
    # Then the two runners of each lane raced over its chunks, and each chunk started,
    # finished and counted once: every item answered once, charged once
    assert pipeline.faults.counts["sqs:concurrent:lanes"] >= 2
    assert {r["status"] for r in outcome.rows} == {"completed"}


def test_a_worker_dying_as_it_lets_a_finished_job_go_loses_no_answer(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a worker that dies once per lane as it lets its finished vendor job go (the lane
    # record's `job` cleared), after the vendor's answers were read
    died = set_job_dies_once(pipeline, monkeypatch, letting_go=True, fault="died_letting_job_go")
    # When the batch runs (the message comes back; the lane record still names the spent job)
    outcome = run_and_check(pipeline, mixed_items())
    # Then the answers kept before the job went are the chunk's: every item answered once
    assert died
    assert {r["status"] for r in outcome.rows} == {"completed"}


def test_a_worker_dying_after_the_vendor_made_its_job_makes_no_second_job(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a worker that dies once per lane after OpenAI made its batch job, before the lane
    # record stored it (the submit noted on the lane record, the job not)
    died = set_job_dies_once(pipeline, monkeypatch, letting_go=False, fault="died_before_storing_job")
    made: list[frozenset[str]] = []  # the custom ids of each batch OpenAI made
    submit_part = OpenAIBatch._submit_part

    def counted(self: OpenAIBatch, endpoint: str, requests: Any, key: str | None) -> str:
        made.append(frozenset(r.custom_id for r in requests))
        return submit_part(self, endpoint, requests, key)

    monkeypatch.setattr(OpenAIBatch, "_submit_part", counted)
    # When the batch runs (the message comes back; the lane record names no job)
    outcome = run_and_check(pipeline, mixed_items())
    # Then the next invocation took the job the dead one made: no item was in two batches
    # (two, billed twice, before the lane record's note), and every item was answered once
    assert died and made
    assert sum(len(ids) for ids in made) == len(frozenset().union(*made))
    assert {r["status"] for r in outcome.rows} == {"completed"}


def set_job_dies_once(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, *, letting_go: bool, fault: str
) -> set[str]:
    """A worker that dies once per lane in `BatchProgress.set_job`: as it lets its finished
    vendor job go (`letting_go`), or as it stores a job the vendor made. The lanes it died in."""
    original = BatchProgress.set_job
    died: set[str] = set()

    def dies_once(self: BatchProgress, batch_id: str, lane_key: str, job: Any, *, chunk: int) -> None:
        if (job is None) == letting_go and lane_key not in died:
            died.add(lane_key)
            pipeline.faults.add(f"worker:{fault}")
            raise RuntimeError(f"injected: the worker died in set_job ({fault})")
        original(self, batch_id, lane_key, job, chunk=chunk)

    monkeypatch.setattr(BatchProgress, "set_job", dies_once)
    return died
