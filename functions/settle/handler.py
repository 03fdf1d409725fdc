"""Finalizes and settles batches (the settle queue)."""

from __future__ import annotations

from batchroute.clock import SystemClock
from batchroute.services.batch_pipeline import lazy_steps
from batchroute.worker import workflow_task_handler

handler = workflow_task_handler(lazy_steps(("finalize", "settle", "fail"), SystemClock()))
