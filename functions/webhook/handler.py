"""Delivers results: signed webhooks and bucket delivery (the deliver queue)."""

from __future__ import annotations

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.clock import SystemClock
from batchroute.config import get_settings
from batchroute.services.delivery.webhooks import build_webhook_delivery
from batchroute.services.workflow.steps import BatchWorkflow
from batchroute.worker import workflow_task_handler

_settings = get_settings()
_clock = SystemClock()
_workflow = BatchWorkflow(
    BatchRecords(_settings.table_name("batches")), _clock, webhooks=build_webhook_delivery(_settings, _clock)
)

handler = workflow_task_handler(_workflow.deliver_steps())
