"""Lambda's SQS event source mapping, played locally: poll a queue, invoke its consumer.

Same contract as on AWS: the consumer gets a Lambda-shaped SQS event with up to
`batch_size` records; messages it reports in `batchItemFailures` (or every message,
when it raises) stay on the queue for redelivery, the rest are deleted. SQS itself
moves a message to the DLQ once it has been received `maxReceiveCount` times (moto
implements the queue's RedrivePolicy on receive, as AWS does).

The one deviation: a failed message becomes visible again after
`redelivery_delay_seconds` (1 s by default) instead of the queue's full visibility
timeout, so a retry locally takes a second rather than minutes.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from batchroute import resources
from batchroute_tools.local.lambda_runtime import Handler

log = logging.getLogger("local.poller")

# SQS caps one receive at 10 messages, whatever the event source's batch size.
_SQS_RECEIVE_MAX = 10


@dataclass(frozen=True)
class PollOutcome:
    """What one poll did: how many messages it handed over, deleted, and left for redelivery."""

    received: int = 0
    deleted: int = 0
    retried: int = 0


class QueuePoller:
    def __init__(
        self,
        *,
        queue: resources.Queue,
        queue_url: str,
        queue_arn: str,
        region: str,
        handler: Handler,
        context_factory: Callable[[], Any],
        sqs: Any,
        wait_seconds: int = 1,
        redelivery_delay_seconds: int = 1,
    ) -> None:
        self.queue = queue
        self.queue_url = queue_url
        self.queue_arn = queue_arn
        self.region = region
        self.handler = handler
        self.context_factory = context_factory
        self.sqs = sqs
        # Short long-polls: a stop request is noticed within about this many seconds.
        self.wait_seconds = wait_seconds
        self.redelivery_delay_seconds = redelivery_delay_seconds

    def poll_once(self) -> PollOutcome:
        """Receive one batch, invoke the consumer once, settle each message. Never raises for the handler."""
        messages = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=min(self.queue.batch_size, _SQS_RECEIVE_MAX),
            WaitTimeSeconds=self.wait_seconds,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return PollOutcome()
        failed = self._invoke(messages)
        succeeded = [m for m in messages if m["MessageId"] not in failed]
        retried = [m for m in messages if m["MessageId"] in failed]
        self._delete(succeeded)
        self._make_visible_soon(retried)
        return PollOutcome(received=len(messages), deleted=len(succeeded), retried=len(retried))

    def run(self, stop: threading.Event) -> None:
        """Poll until `stop` is set. A broken poll (moto shutting down, say) is logged and retried."""
        while not stop.is_set():
            try:
                self.poll_once()
            except Exception:
                if stop.is_set():
                    return
                log.exception("polling %s failed; retrying", self.queue.key)
                stop.wait(1)

    def start(self, stop: threading.Event, *, workers: int = 1) -> list[threading.Thread]:
        """Run `workers` polling threads, like Lambda scaling a consumer out across batches."""
        threads = [
            threading.Thread(target=self.run, args=(stop,), name=f"poller-{self.queue.key}-{n}", daemon=True)
            for n in range(workers)
        ]
        for thread in threads:
            thread.start()
        return threads

    def _invoke(self, messages: list[dict[str, Any]]) -> set[str]:
        """Call the consumer; return the ids of the messages that failed."""
        ids = {m["MessageId"] for m in messages}
        event = sqs_event(messages, queue_arn=self.queue_arn, region=self.region)
        try:
            response = self.handler(event, self.context_factory())
        except Exception:
            log.exception(
                "%s consumer raised; the whole batch of %d will be redelivered", self.queue.key, len(messages)
            )
            return ids
        failed = failed_message_ids(response, ids)
        if failed:
            log.warning(
                "%s consumer reported %d of %d messages failed", self.queue.key, len(failed), len(messages)
            )
        return failed

    def _delete(self, messages: list[dict[str, Any]]) -> None:
        for chunk in _chunks(messages):
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(chunk)],
            )

    def _make_visible_soon(self, messages: list[dict[str, Any]]) -> None:
        for chunk in _chunks(messages):
            self.sqs.change_message_visibility_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {
                        "Id": str(n),
                        "ReceiptHandle": m["ReceiptHandle"],
                        "VisibilityTimeout": self.redelivery_delay_seconds,
                    }
                    for n, m in enumerate(chunk)
                ],
            )


def failed_message_ids(response: Any, batch_ids: set[str]) -> set[str]:
    """Read a partial batch response the way Lambda does.

    No response, or an empty `batchItemFailures`, means every message succeeded. An entry
    without a known `itemIdentifier` makes Lambda treat the whole batch as failed.
    """
    if not isinstance(response, dict):
        return set()
    failures = response.get("batchItemFailures") or []
    failed = set()
    for failure in failures:
        item_id = failure.get("itemIdentifier") if isinstance(failure, dict) else None
        if item_id not in batch_ids:
            log.error("invalid batchItemFailures entry %r; failing the whole batch", failure)
            return set(batch_ids)
        failed.add(item_id)
    return failed


def sqs_event(messages: Iterable[dict[str, Any]], *, queue_arn: str, region: str) -> dict[str, Any]:
    """The event Lambda builds from messages that sqs:ReceiveMessage returned."""
    return {"Records": [_record(m, queue_arn=queue_arn, region=region) for m in messages]}


def _record(message: dict[str, Any], *, queue_arn: str, region: str) -> dict[str, Any]:
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": {
            name: _lambda_message_attribute(value)
            for name, value in message.get("MessageAttributes", {}).items()
        },
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
    if "MD5OfMessageAttributes" in message:
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    return record


def _lambda_message_attribute(value: dict[str, Any]) -> dict[str, Any]:
    # Lambda spells these camelCase and carries binary values as base64 text.
    shaped: dict[str, Any] = {
        "dataType": value["DataType"],
        "stringListValues": list(value.get("StringListValues", [])),
        "binaryListValues": [_b64(v) for v in value.get("BinaryListValues", [])],
    }
    if "StringValue" in value:
        shaped["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        shaped["binaryValue"] = _b64(value["BinaryValue"])
    return shaped


def _b64(raw: bytes | str) -> str:
    return base64.b64encode(raw if isinstance(raw, bytes) else raw.encode()).decode()


def _chunks(messages: list[dict[str, Any]]) -> Iterable[list[dict[str, Any]]]:
    for start in range(0, len(messages), _SQS_RECEIVE_MAX):
        yield messages[start : start + _SQS_RECEIVE_MAX]
