"""Scheduled sweeper (EventBridge): moves batches past their SLA deadline to `expired`, settles
stale chat holds, retries due webhooks, refreshes lane heartbeats."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.chat_holds import ChatHoldStore
from batchroute.adapters.dynamo.lanes import LaneStateStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.catalog import builtin_catalog
from batchroute.clock import SystemClock
from batchroute.config import get_settings
from batchroute.observability import lambda_logging, logger, metrics, tracer
from batchroute.services.catalog.lane_health import provider_health_for, refresh_lane_heartbeats
from batchroute.services.delivery.webhooks import build_webhook_delivery
from batchroute.services.workflow.sweeper import expire_overdue_batches, resolve_stale_chat_holds

_records = BatchRecords(get_settings().table_name("batches"))
_clock = SystemClock()
_lanes = LaneStateStore(get_settings().table_name("controls"))
_provider_health = provider_health_for(get_settings())
_webhooks = build_webhook_delivery(get_settings(), _clock)
_ledger = LedgerStore(get_settings().table_name("ledger"))
_chat_holds = ChatHoldStore(
    ledger=_ledger,
    batches_table=get_settings().table_name("batches"),
    controls_table=get_settings().table_name("controls"),
)


@lambda_logging()
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    lanes = refresh_lane_heartbeats(builtin_catalog(), _lanes, _provider_health, _clock)  # docs/catalog.md
    metrics.add_metric(name="LaneHeartbeats", unit=MetricUnit.Count, value=len(lanes.refreshed))
    report = expire_overdue_batches(_records, _clock)
    metrics.add_metric(name="BatchesExpired", unit=MetricUnit.Count, value=len(report.expired))
    logger.info("sweep finished", extra={"expired": len(report.expired), "skipped": len(report.skipped)})
    holds = resolve_stale_chat_holds(  # chat holds whose request died (docs/chat.md)
        _ledger, _chat_holds, builtin_catalog(), _clock, stale_seconds=get_settings().chat_hold_stale_seconds
    )
    metrics.add_metric(name="StaleChatHoldsSettled", unit=MetricUnit.Count, value=len(holds.settled))
    retried = _webhooks.retry_due()  # webhook attempts that are due (docs/webhooks.md)
    metrics.add_metric(name="WebhookRetries", unit=MetricUnit.Count, value=len(retried.attempted))
    return {
        "expired": report.expired,
        "skipped": report.skipped,
        "chat_holds_settled": holds.settled,
        "webhooks": retried.as_dict(),
    }
