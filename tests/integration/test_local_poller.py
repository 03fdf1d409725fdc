"""The local event source mapping (batchroute_tools.local.poller) on moto's SQS: the consumer
gets a Lambda-shaped event, successes are deleted, partial failures and exceptions are
redelivered, and SQS redrives to the DLQ after maxReceiveCount."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from batchroute import resources
from batchroute_tools.local.lambda_runtime import LambdaContext, context_for
from batchroute_tools.local.poller import QueuePoller, failed_message_ids
from batchroute_tools.local.provision import LOCAL_ACCOUNT, LOCAL_REGION, LocalStack, provision

PREFIX = resources.resource_prefix("local")


class FakeConsumer:
    """Records every invocation; answers with whatever `respond` returns for the event."""

    def __init__(self, respond: Callable[[dict[str, Any]], Any] = lambda event: None) -> None:
        self.respond = respond
        self.events: list[dict[str, Any]] = []
        self.contexts: list[Any] = []

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        self.events.append(event)
        self.contexts.append(context)
        return self.respond(event)


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with mock_aws():
        yield provision(prefix=PREFIX, account=LOCAL_ACCOUNT, region=LOCAL_REGION, endpoint_url=None)


@pytest.fixture
def sqs(stack: LocalStack) -> Any:
    return boto3.client("sqs", region_name=stack.region)


def _poller(stack: LocalStack, sqs: Any, consumer: FakeConsumer, queue_key: str = "route") -> QueuePoller:
    queue = resources.queue(queue_key)
    return QueuePoller(
        queue=queue,
        queue_url=stack.queue_urls[queue_key],
        queue_arn=stack.queue_arns[queue_key],
        region=stack.region,
        handler=consumer,
        context_factory=lambda: context_for(
            queue.consumer, prefix=stack.prefix, region=stack.region, account=stack.account
        ),
        sqs=sqs,
        wait_seconds=0,
        # Redeliver at once: the tests drive time by polling, never by sleeping.
        redelivery_delay_seconds=0,
    )


def _send(sqs: Any, url: str, *bodies: str) -> None:
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)


def _counts(sqs: Any, url: str) -> tuple[int, int]:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def _fail_bodies(*bodies: str) -> Callable[[dict[str, Any]], Any]:
    def respond(event: dict[str, Any]) -> Any:
        return {
            "batchItemFailures": [
                {"itemIdentifier": r["messageId"]} for r in event["Records"] if r["body"] in bodies
            ]
        }

    return respond


def _raise(event: dict[str, Any]) -> Any:
    raise RuntimeError("the consumer broke")


def test_consumer_gets_a_lambda_shaped_sqs_event(stack: LocalStack, sqs: Any) -> None:
    # Given a message with an attribute on the route queue
    sqs.send_message(
        QueueUrl=stack.queue_urls["route"],
        MessageBody=json.dumps({"step": "route", "batch_id": "batch_x"}),
        MessageAttributes={"origin": {"DataType": "String", "StringValue": "workflow"}},
    )
    consumer = FakeConsumer()
    # When the poller polls once
    outcome = _poller(stack, sqs, consumer).poll_once()
    # Then the router got one Lambda-shaped record and a Lambda context
    assert outcome.received == 1
    (record,) = consumer.events[0]["Records"]
    assert json.loads(record["body"]) == {"step": "route", "batch_id": "batch_x"}
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"] == stack.queue_arns["route"]
    assert record["awsRegion"] == LOCAL_REGION
    assert record["messageId"]
    assert record["receiptHandle"]
    assert record["md5OfBody"]
    assert {
        "ApproximateReceiveCount",
        "SentTimestamp",
        "SenderId",
        "ApproximateFirstReceiveTimestamp",
    } <= set(record["attributes"])
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert record["messageAttributes"]["origin"] == {
        "dataType": "String",
        "stringValue": "workflow",
        "stringListValues": [],
        "binaryListValues": [],
    }
    context = consumer.contexts[0]
    assert isinstance(context, LambdaContext)
    assert context.function_name == f"{PREFIX}-router"
    assert context.invoked_function_arn.endswith(f":function:{PREFIX}-router")
    assert 0 < context.get_remaining_time_in_millis() <= 300_000


def test_successful_batch_is_deleted(stack: LocalStack, sqs: Any) -> None:
    # Given three messages on the settle queue
    _send(sqs, stack.queue_urls["settle"], "a", "b", "c")
    # When a consumer that returns nothing handles them
    outcome = _poller(stack, sqs, FakeConsumer(), "settle").poll_once()
    # Then all three are deleted in one batch
    assert (outcome.received, outcome.deleted, outcome.retried) == (3, 3, 0)
    assert _counts(sqs, stack.queue_urls["settle"]) == (0, 0)


def test_partial_batch_failure_redelivers_only_the_failed_message(stack: LocalStack, sqs: Any) -> None:
    # Given three messages and a consumer that reports "b" as failed
    _send(sqs, stack.queue_urls["settle"], "a", "b", "c")
    consumer = FakeConsumer(_fail_bodies("b"))
    poller = _poller(stack, sqs, consumer, "settle")
    # When it polls twice
    first = poller.poll_once()
    second = poller.poll_once()
    # Then only "b" comes back, on its second receive, and the rest are gone
    assert (first.received, first.deleted, first.retried) == (3, 2, 1)
    (record,) = consumer.events[1]["Records"]
    assert record["body"] == "b"
    assert record["attributes"]["ApproximateReceiveCount"] == "2"
    assert (second.deleted, second.retried) == (0, 1)


def test_consumer_exception_fails_the_whole_batch(stack: LocalStack, sqs: Any) -> None:
    # Given two messages and a consumer that raises
    _send(sqs, stack.queue_urls["deliver"], "a", "b")
    poller = _poller(stack, sqs, FakeConsumer(_raise), "deliver")
    # When it polls
    outcome = poller.poll_once()
    # Then nothing is deleted and both are visible again
    assert (outcome.received, outcome.deleted, outcome.retried) == (2, 0, 2)
    assert _counts(sqs, stack.queue_urls["deliver"]) == (2, 0)


def test_unknown_item_identifier_fails_the_whole_batch(stack: LocalStack, sqs: Any) -> None:
    # Given a consumer whose partial response names a message not in the batch
    _send(sqs, stack.queue_urls["route"], "a", "b")
    consumer = FakeConsumer(lambda event: {"batchItemFailures": [{"itemIdentifier": "not-in-batch"}]})
    # When it polls
    outcome = _poller(stack, sqs, consumer).poll_once()
    # Then, as Lambda does, the whole batch is treated as failed
    assert (outcome.deleted, outcome.retried) == (0, 2)


def test_sqs_redrives_to_the_dlq_after_max_receive_count(stack: LocalStack, sqs: Any) -> None:
    # Given a message the consumer always fails
    queue = resources.queue("route")
    _send(sqs, stack.queue_urls["route"], "poison")
    consumer = FakeConsumer(_raise)
    poller = _poller(stack, sqs, consumer)
    # When it is polled once more than maxReceiveCount
    outcomes = [poller.poll_once() for _ in range(queue.max_receive_count + 1)]
    # Then it was handed over exactly maxReceiveCount times, then moved to the DLQ
    assert [o.received for o in outcomes] == [1] * queue.max_receive_count + [0]
    assert len(consumer.events) == queue.max_receive_count
    assert _counts(sqs, stack.queue_urls["route"]) == (0, 0)
    dead = sqs.receive_message(QueueUrl=stack.dlq_urls["route"], MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in dead] == ["poison"]


def test_batch_size_follows_the_queue_definition(stack: LocalStack, sqs: Any) -> None:
    # Given three lane messages (the lanes queue has batch size 1)
    assert resources.queue("lanes").batch_size == 1
    _send(sqs, stack.queue_urls["lanes"], "lane_a", "lane_b", "lane_c")
    consumer = FakeConsumer()
    poller = _poller(stack, sqs, consumer, "lanes")
    # When it polls until the queue is empty
    while poller.poll_once().received:
        pass
    # Then each invocation carried exactly one lane
    assert [len(e["Records"]) for e in consumer.events] == [1, 1, 1]


def test_empty_queue_invokes_nothing(stack: LocalStack, sqs: Any) -> None:
    consumer = FakeConsumer()
    assert _poller(stack, sqs, consumer).poll_once().received == 0
    assert consumer.events == []


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (None, set()),
        ({}, set()),
        ({"batchItemFailures": []}, set()),
        ({"batchItemFailures": None}, set()),
        ({"batchItemFailures": [{"itemIdentifier": "m2"}]}, {"m2"}),
        ({"batchItemFailures": [{"itemIdentifier": ""}]}, {"m1", "m2"}),
        ({"batchItemFailures": [{}]}, {"m1", "m2"}),
    ],
)
def test_partial_batch_response_is_read_like_lambda(response: Any, expected: set[str]) -> None:
    assert failed_message_ids(response, {"m1", "m2"}) == expected
