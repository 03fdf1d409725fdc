"""The queues task messages travel on, as the services see them."""

from __future__ import annotations

from typing import Protocol


class TaskSender(Protocol):
    """adapters/task_queue.py:TaskQueue: one SQS queue (the settle and lanes queues, where a
    chunked step re-enqueues its own message; the route queue's file checks; the deliver
    queue). A service given None does the work in place."""

    def send(self, body: str, *, delay_seconds: int = 0) -> None: ...
