"""Vendor faults through the emulators: a 429 storm, a run of 5xx, a connection reset in the
middle of an answer. Each batch ends with every item answered once and charged once."""

from __future__ import annotations

from tests.faults.harness import Pipeline, mixed_items, run_and_check


def test_a_429_storm_on_the_sync_lane_loses_nothing(pipeline: Pipeline) -> None:
    # Given the sync lane's provider answering 429 to its next six requests
    pipeline.behaviour.inject("edge-eu", "rate_limited", 6)
    # When a batch over the sync lane and a vendor batch lane runs
    outcome = run_and_check(pipeline, mixed_items())
    # Then the storm was met, and every item still completed (retried after the asked wait)
    assert pipeline.behaviour.answered["rate_limited"] == 6
    assert outcome.batch.state == "completed"
    assert {r["status"] for r in outcome.rows} == {"completed"}


def test_a_run_of_5xx_on_both_lanes_loses_nothing(pipeline: Pipeline) -> None:
    # Given the sync lane's provider answering 500 to its next five requests, and the vendor
    # batch lane's job failing its first three lines with a server error
    pipeline.behaviour.inject("edge-eu", "transient", 5)
    pipeline.behaviour.inject("openai", "transient", 3)
    # When the batch runs
    outcome = run_and_check(pipeline, mixed_items())
    # Then every 5xx was met and every item still completed, once
    assert pipeline.behaviour.answered["transient"] == 8
    assert outcome.batch.state == "completed"
    assert {r["status"] for r in outcome.rows} == {"completed"}


def test_a_connection_reset_in_the_middle_of_answers_loses_nothing(pipeline: Pipeline) -> None:
    # Given the sync lane's provider resetting the connection halfway through its next four answers
    pipeline.behaviour.inject("edge-eu", "reset", 4)
    # When the batch runs
    outcome = run_and_check(pipeline, mixed_items())
    # Then each cut answer was asked again: every item completed once, charged once
    assert pipeline.behaviour.answered["reset"] == 4
    assert {r["status"] for r in outcome.rows} == {"completed"}
