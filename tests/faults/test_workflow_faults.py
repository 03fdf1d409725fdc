"""Step Functions faults: a workflow task that fails, and one that times out (moto runs the
state machine as deployed: the task's Catch takes the batch down HandleFailure). The
failure path keeps what finished and charges it; the late or orphaned work changes nothing."""

from __future__ import annotations

from dataclasses import replace

from tests.faults.harness import (
    Pipeline,
    fail_task_once,
    hold_step,
    mixed_items,
    run_and_check,
    shorten_task_timeout,
)


def test_a_lane_task_that_fails_takes_the_failure_path_and_loses_nothing(pipeline: Pipeline) -> None:
    # Given the sync lane's RunLane task failed by its worker, once, while the vendor batch
    # lane's job is still running at the vendor (it takes 1.5 s): that lane carries on
    # after the workflow has taken the failure path
    pipeline.behaviour.config = replace(pipeline.behaviour.config, batch_seconds=1.5)
    pipeline.wrappers["lanes"] = fail_task_once(pipeline, "run_lane", lane_prefix="02-edge-eu")
    # When the batch runs
    outcome = run_and_check(pipeline, mixed_items())
    # Then the batch failed through HandleFailure; every item still has exactly one result,
    # and what completed was charged once, the rest released
    assert pipeline.faults.counts["sfn:task_failed:run_lane"] == 1
    assert outcome.batch.state == "failed"
    assert {r["error"]["code"] for r in outcome.rows if r["status"] == "failed"} == {"batch_failed"}


def test_a_finalize_task_that_times_out_takes_the_failure_path_and_loses_nothing(pipeline: Pipeline) -> None:
    # Given Finalize's task timing out after 2 s, and the worker getting to its message only
    # after 4 s (it runs late, on a workflow that has moved on)
    shorten_task_timeout(pipeline, "Finalize", 2)
    pipeline.wrappers["settle"] = hold_step(pipeline, "finalize", 4)
    # When the batch runs
    outcome = run_and_check(pipeline, mixed_items())
    # Then the batch failed through HandleFailure (States.Timeout), yet every item completed
    # and was charged once, and the late Finalize changed nothing
    assert pipeline.faults.counts["sfn:held:finalize"] == 1
    assert outcome.batch.state == "failed"
    summary = outcome.batch.execution_summary
    assert summary is not None and "Timeout" in str(summary.latest_error)
    assert {r["status"] for r in outcome.rows} == {"completed"}
