"""The batch workflow's last tasks (HandleFailure, DeliverFailure, Deliver) as deployed: they
have nothing to fall back to, so each retries a task that timed out or failed for a day or
more, whether its attempts time out (a worker down, its messages dead-lettered) or fail at
once, and none catches the end of its retries (a redrive resumes the execution there)."""

from __future__ import annotations

import json
from typing import Any

from tests.infra.cfn import Cfn

DAY_SECONDS = 24 * 3600
# The tasks after which nothing else settles or tells the customer: HandleFailure is the only
# step that fails, finalizes and settles a batch whose Finalize or Settle did not answer.
LAST_TASKS = ("HandleFailure", "DeliverFailure", "Deliver")


def _states(cfn: Cfn) -> dict[str, Any]:
    ((props),) = cfn.properties("AWS::StepFunctions::StateMachine").values()
    states: dict[str, Any] = json.loads(props["DefinitionString"])["States"]
    return states


def _retrier(state: dict[str, Any], error: str) -> dict[str, Any]:
    """The first retrier that matches `error` (as Step Functions scans them)."""
    for retrier in state.get("Retry", []):
        if error in retrier["ErrorEquals"] or "States.ALL" in retrier["ErrorEquals"]:
            return dict(retrier)
    raise AssertionError(f"no retrier matches {error}: {state.get('Retry')}")


def _waits(retrier: dict[str, Any]) -> list[float]:
    """The waits before each retry, as Step Functions computes them (no jitter)."""
    interval = float(retrier.get("IntervalSeconds", 1))
    rate = float(retrier.get("BackoffRate", 2.0))
    cap = float(retrier.get("MaxDelaySeconds", 31622401))
    return [min(interval * rate**n, cap) for n in range(int(retrier.get("MaxAttempts", 3)))]


def test_the_failure_path_tasks_retry_a_timeout_or_a_failure_for_a_day_or_more(cfn: Cfn) -> None:
    # Given the deployed definition
    states = _states(cfn)

    for name in LAST_TASKS:
        state = states[name]
        # When a task of it times out (its worker never answers) or fails (SendTaskFailure,
        # an SQS error); States.TaskFailed matches every error but States.Timeout
        timeout = _retrier(state, "States.Timeout")
        failed = _retrier(state, "States.TaskFailed")

        # Then it is tried again, for a day or more however the attempts end
        for retrier in (timeout, failed):
            assert sum(_waits(retrier)) >= DAY_SECONDS, (name, retrier)
        attempts = len(_waits(timeout)) + 1
        assert attempts * state["TimeoutSeconds"] + sum(_waits(timeout)) >= 2 * DAY_SECONDS, name
        # And no Catch takes it anywhere else: once the retries are spent the execution fails
        # at this task, where a redrive resumes it (a Catch would leave the batch unsettled)
        assert "Catch" not in state, name


def test_every_way_onto_the_failure_path_reaches_the_retried_handle_failure(cfn: Cfn) -> None:
    # Given the deployed definition
    states = _states(cfn)

    # When a state catches an error
    targets = {catch["Next"] for state in states.values() for catch in state.get("Catch", [])}

    # Then it goes to HandleFailure, and from there every task on the way to the end retries
    assert targets == {"HandleFailure"}
    name: str | None = "HandleFailure"
    path = []
    while name is not None:
        state = states[name]
        path.append(name)
        if state["Type"] == "Task":
            assert _retrier(state, "States.Timeout") and _retrier(state, "States.TaskFailed"), name
        name = state.get("Next")
    assert path == ["HandleFailure", "DeliverFailure", "WorkflowFailed"]
