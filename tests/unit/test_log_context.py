"""Log lines carry only their own invocation's keys: a worker's batch id, step and function
name, and a request's correlation id, are gone once the invocation or request ends, so a warm
Lambda's next invocation (or an API request in the same local process) never carries them."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from batchroute.observability import invocation_keys, lambda_logging, logger
from batchroute.worker import workflow_task_handler
from batchroute.workflow.tasks import WorkflowTask

CONTEXT_KEYS = {"function_name", "function_arn", "function_request_id", "function_memory_size", "cold_start"}


@dataclass
class FakeContext:
    function_name: str
    aws_request_id: str = "req-1"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:000000000000:function:f"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 60_000


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(logger.registered_formatter.format(record)))

    def message(self, text: str) -> dict[str, Any]:
        return next(line for line in self.lines if line["message"] == text)


@pytest.fixture
def lines() -> Iterator[Lines]:
    handler = Lines()
    logger._logger.addHandler(handler)  # the powertools Logger's own logging.Logger
    try:
        yield handler
    finally:
        logger._logger.removeHandler(handler)


class Callbacks:
    def succeed(self, task_token: str, output: dict[str, Any]) -> None:
        pass

    def fail(self, task_token: str, *, error: str, cause: str) -> None:
        pass


def _sqs_event(batch_id: str) -> dict[str, Any]:
    body = json.dumps({"step": "route", "batch_id": batch_id, "task_token": "tok"})
    return {
        "Records": [
            {
                "messageId": f"m-{batch_id}",
                "receiptHandle": "r",
                "body": body,
                "attributes": {},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:route",
                "awsRegion": "us-east-1",
            }
        ]
    }


def _step(task: WorkflowTask) -> dict[str, Any]:
    logger.info(f"routing {task.batch_id}")
    return {}


def test_a_workers_keys_end_with_its_invocation(lines: Lines) -> None:
    # Given a worker that has run a step of batch_a as the router function
    handler = workflow_task_handler({"route": _step}, Callbacks())
    handler(_sqs_event("batch_a"), FakeContext("router"))
    during = lines.message("routing batch_a")
    assert (during["batch_id"], during["step"], during["function_name"]) == ("batch_a", "route", "router")

    # When the process logs next: an API request line, and the next invocation of another function
    logger.info("api request")
    handler(_sqs_event("batch_b"), FakeContext("settle", aws_request_id="req-2"))

    # Then the API line carries none of the worker's keys
    assert not ({"batch_id", "step"} | CONTEXT_KEYS) & set(lines.message("api request"))
    # And the next invocation carries only its own
    after = lines.message("routing batch_b")
    assert (after["batch_id"], after["function_name"], after["function_request_id"]) == (
        "batch_b",
        "settle",
        "req-2",
    )
    assert after["cold_start"] is False


def test_keys_are_cleared_when_the_handler_fails(lines: Lines) -> None:
    @lambda_logging()
    def broken(event: dict[str, Any], context: Any) -> None:
        logger.info("failing")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        broken({}, FakeContext("sweeper"))
    logger.info("afterwards")
    assert lines.message("failing")["function_name"] == "sweeper"
    assert not CONTEXT_KEYS & set(lines.message("afterwards"))


def test_the_correlation_id_comes_from_the_event_and_goes_with_it(lines: Lines) -> None:
    @lambda_logging(correlation_id_path="requestContext.requestId")
    def api(event: dict[str, Any], context: Any) -> None:
        logger.info("serving")

    api({"requestContext": {"requestId": "gw-123"}}, FakeContext("api"))
    logger.info("idle")
    assert lines.message("serving")["correlation_id"] == "gw-123"
    assert "correlation_id" not in lines.message("idle")


def test_keys_of_one_thread_never_reach_another(lines: Lines) -> None:
    # Given a worker thread inside an invocation
    inside, done = threading.Event(), threading.Event()

    def worker() -> None:
        with invocation_keys(batch_id="batch_t", step="run_lane"):
            inside.set()
            done.wait(5)

    thread = threading.Thread(target=worker)
    thread.start()
    inside.wait(5)
    # When another thread (an API request) logs meanwhile / Then it carries none of them
    logger.info("concurrent request")
    done.set()
    thread.join()
    assert not {"batch_id", "step"} & set(lines.message("concurrent request"))


def test_an_inner_block_restores_the_outer_value() -> None:
    with invocation_keys(step="route"):
        with invocation_keys(step="run_lane"):
            assert logger.thread_safe_get_current_keys()["step"] == "run_lane"
        assert logger.thread_safe_get_current_keys()["step"] == "route"
    assert "step" not in logger.thread_safe_get_current_keys()
