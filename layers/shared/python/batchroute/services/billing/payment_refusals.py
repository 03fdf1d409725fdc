"""A processor event the service will not credit (issue 27, docs/payments.md "What credits a
wallet"): logged as an error with its event id and the problem, counted in the
`PaymentEventsRejected` metric (which alarms), and acknowledged, so the processor does not
redeliver it for days."""

from __future__ import annotations

from aws_lambda_powertools.metrics import MetricUnit

from batchroute.observability import logger, metrics

REJECTED_METRIC = "PaymentEventsRejected"


def refuse_payment_event(problem: str, *, event_id: str | None, **context: str | None) -> None:
    logger.error(
        "payment event refused: nothing credited",
        extra={"event_id": event_id, "problem": problem, **context},
    )
    metrics.add_metric(name=REJECTED_METRIC, unit=MetricUnit.Count, value=1)
