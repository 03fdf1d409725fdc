"""Scheduled sweeper (EventBridge): moves batches past their SLA deadline to `expired`."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.clock import SystemClock
from batchroute.config import get_settings
from batchroute.observability import logger, metrics, tracer
from batchroute.services.sweeper import expire_overdue_batches

_records = BatchRecords(get_settings().table_name("batches"))
_clock = SystemClock()


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    report = expire_overdue_batches(_records, _clock)
    metrics.add_metric(name="BatchesExpired", unit=MetricUnit.Count, value=len(report.expired))
    logger.info("sweep finished", extra={"expired": len(report.expired), "skipped": len(report.skipped)})
    return {"expired": report.expired, "skipped": report.skipped}
