"""Payments reconciliation (docs/payments.md, "Reconciliation"): the ledger's purchase and
auto top-up credits against the processor's successful payments.

`PaymentsReconciliation.run(since)` reads both sides and returns every difference
(`domain/billing/reconciliation.py`); the operator runs it with `batchroute-admin payments reconcile`.
`ScheduledReconciliation` is the deployed daily run (an EventBridge rule on the sweeper
function, played locally by a timer like the sweeper's): it reconciles the last two days, logs
each difference and counts them in the metric `PaymentReconciliationDifferences`, which
alarms above zero; a run that cannot finish counts `PaymentReconciliationFailed` (alarmed).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, TypedDict

from aws_lambda_powertools.metrics import MetricUnit

from batchroute.clock import Clock, isoformat
from batchroute.domain.billing.reconciliation import (
    LedgerCredit,
    ProcessorPayment,
    ReconciliationReport,
    ReportView,
    reconcile,
)
from batchroute.observability import logger, metrics

# A payment's webhook normally credits it within seconds; one younger than this is not yet
# owed its credit (the processor may still be delivering, the sweeper still recovering).
SETTLING_TIME = timedelta(minutes=30)
# Payments this long before `since` are read too: one credited inside the window may have
# been paid before it (the processor retries a webhook for up to three days).
PAYMENT_LOOKBACK = timedelta(days=3)
SCHEDULED_WINDOW = timedelta(days=2)


class ProcessorCredits(Protocol):
    def processor_credits_since(self, since: str) -> list[LedgerCredit]: ...


class SuccessfulPayments(Protocol):
    def successful_payments(self, since: datetime) -> list[ProcessorPayment]: ...


@dataclass
class PaymentsReconciliation:
    credits: ProcessorCredits  # the ledger (adapters/dynamo/ledger.py)
    processor: SuccessfulPayments  # adapters/stripe_payments.py (the emulator locally)
    clock: Clock
    settling_time: timedelta = SETTLING_TIME

    def run(self, since: datetime) -> ReconciliationReport:
        """Every difference between the credits since `since` and the payments they stand on."""
        settled_before = self.clock.now() - self.settling_time
        return reconcile(
            self.credits.processor_credits_since(isoformat(since)),
            self.processor.successful_payments(since - PAYMENT_LOOKBACK),
            since=isoformat(since),
            settled_before=isoformat(settled_before),
        )


class RunFailed(TypedDict):
    reconciled: bool  # False
    since: str


class RunReport(ReportView):
    reconciled: bool  # True


@dataclass
class ScheduledReconciliation:
    reconciliation: PaymentsReconciliation
    clock: Clock
    window: timedelta = SCHEDULED_WINDOW

    def run(self) -> RunFailed | RunReport:
        """Reconcile the last `window`: each difference logged as an error, their count as the
        metric `PaymentReconciliationDifferences` (0 when clean). Never raises: a run that
        cannot finish (the processor down) is logged and counted as `PaymentReconciliationFailed`."""
        since = self.clock.now() - self.window
        try:
            report = self.reconciliation.run(since)
        except Exception:
            logger.exception("payment reconciliation failed", extra={"since": isoformat(since)})
            metrics.add_metric(name="PaymentReconciliationFailed", unit=MetricUnit.Count, value=1)
            return {"reconciled": False, "since": isoformat(since)}
        for difference in report.differences:
            logger.error("payment reconciliation difference", extra=difference.to_dict())
        metrics.add_metric(
            name="PaymentReconciliationDifferences", unit=MetricUnit.Count, value=len(report.differences)
        )
        logger.info(
            "payment reconciliation finished",
            extra={
                "since": report.since,
                "credits": report.credits,
                "payments": report.payments,
                "matched": report.matched,
                "differences": len(report.differences),
                "awaiting_credit": len(report.awaiting_credit),
            },
        )
        return {"reconciled": True, **report.to_dict()}
