"""Routes batches and runs lanes (the route and lanes queues)."""

from __future__ import annotations

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.clock import SystemClock
from batchroute.config import get_settings
from batchroute.services.batch_workflow import BatchWorkflow
from batchroute.worker import workflow_task_handler

_workflow = BatchWorkflow(BatchRecords(get_settings().table_name("batches")), SystemClock())

handler = workflow_task_handler(_workflow.router_steps())
