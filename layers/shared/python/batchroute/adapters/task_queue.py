"""Hands a workflow task back to its own queue: a RunLane that must stop before its lane is
done (Lambda time budget, or a vendor batch job still running) re-enqueues its message with
the same task token and returns without answering it; the next invocation carries on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from batchroute.adapters.aws import shared_client

MAX_DELAY_SECONDS = 900  # SQS's cap on DelaySeconds


@dataclass(eq=False, repr=False)
class TaskQueue:
    queue_url: str
    sqs: Any = shared_client("sqs")

    def send(self, body: str, *, delay_seconds: int = 0) -> None:
        self.sqs.send_message(
            QueueUrl=self.queue_url,
            MessageBody=body,
            DelaySeconds=max(0, min(MAX_DELAY_SECONDS, int(delay_seconds))),
        )
