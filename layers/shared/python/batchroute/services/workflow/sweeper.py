"""The scheduled sweeper: moves batches whose SLA deadline passed to `expired`, settles chat
holds whose request died before settling (docs/chat.md), releases golden-set regression
holds whose run died before settling (docs/schedules.md), and (`Sweeper`) runs one whole sweep
with the lane heartbeats, the webhook retries (batch events, and billing alert events:
docs/billing-alerts.md), the billing watch of every org whose stale hold it charged, the
bucket delivery retries and retention GC (docs/retention.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Literal, NotRequired, Protocol, TypedDict, cast

from aws_lambda_powertools.metrics import MetricUnit

from batchroute.clock import Clock, isoformat
from batchroute.domain.batches.record import UsageCheckpoint
from batchroute.domain.billing.ledger import Purpose, Reservation, SettlementResult, period_keys
from batchroute.domain.billing.settlement import direct_totals
from batchroute.domain.billing.usage import UsageCharge, UsageLine, direct_usage_line, usage_day
from batchroute.domain.catalog.catalog import Catalog, Lane
from batchroute.domain.chat.holds import ChatOutcome, HoldSettlement
from batchroute.money import Money
from batchroute.observability import logger, metrics
from batchroute.services.batches.launch import LaunchReport
from batchroute.services.batches.ports import BatchStore
from batchroute.services.billing.ports import ControlsReader, MoneyWatch
from batchroute.services.chat.ports import HoldStore
from batchroute.services.workflow.retention_gc import ReclaimSummary


class ExpiryRecords(BatchStore, Protocol):
    def past_deadline(self, now_iso: str, limit: int = 100) -> list[str]: ...


@dataclass
class SweepReport:
    expired: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def expire_overdue_batches(
    records: ExpiryRecords,
    clock: Clock,
    *,
    retention_grace: timedelta = timedelta(hours=72),
    max_batches: int = 1000,
) -> SweepReport:
    """Move every batch past its SLA deadline to `expired`. Each goes on the retention GC's
    index first, due at the end of the grace window (docs/retention.md): a batch whose workflow
    died is never finalized, and its bytes must still go. The put keeps an earlier schedule
    (Finalize's), and comes before the move, so a sweep that dies between the two leaves the
    batch due for expiry, not terminal off the index."""
    report = SweepReport()
    moment = clock.now()
    now = isoformat(moment)
    review_at = isoformat(moment + retention_grace)
    while len(report.expired) + len(report.skipped) < max_batches:
        due = records.past_deadline(now)
        if not due:
            break
        for batch_id in due:
            records.schedule_reclaim(batch_id, review_at=review_at)
            moved = records.transition(
                batch_id,
                "expired",
                at=now,
                extra={"execution_summary": {"latest_error": "SLA deadline passed"}},
            )
            (report.expired if moved else report.skipped).append(batch_id)
        if all(b in report.skipped for b in due):
            break  # only batches another writer already finished remain in this page
    return report


# -- stale chat holds ------------------------------------------------------------------------------


class OpenHolds(Protocol):
    def open_holds(
        self, older_than_iso: str, *, purpose: Purpose | None = None, limit: int = 100
    ) -> list[Reservation]: ...


@dataclass
class HoldSweepReport:
    settled: list[str] = field(default_factory=list)  # hold ids
    charged_micros: int = 0
    charged_orgs: set[str] = field(default_factory=set)  # whose balance this sweep moved


def resolve_stale_chat_holds(
    ledger: OpenHolds,
    records: HoldStore,
    catalog: Catalog,
    clock: Clock,
    *,
    controls: ControlsReader,
    stale_seconds: int,
    max_holds: int = 500,
) -> HoldSweepReport:
    """Settle chat holds still open `stale_seconds` after they were taken: their function
    died before settling (a direct request lasts at most the API's time-out). The charge is
    the usage the stream last checkpointed on its record at the lane's direct price (nothing
    without a checkpoint); the rest is released and the record marked failed (completed,
    when the checkpoint says the answer was delivered whole: `answered`). Exactly once:
    a request that settles meanwhile wins, and this settle replays its outcome. The spend
    and usage count in the org's `limit_timezone` periods, as the request's own settle would
    (the hard limit reads its spend there)."""
    report = HoldSweepReport()
    now = clock.now()
    at = isoformat(now)
    zones: dict[str, str] = {}
    for hold in ledger.open_holds(
        isoformat(now - timedelta(seconds=stale_seconds)), purpose="chat_hold", limit=max_holds
    ):
        record = records.record(hold.ref)
        checkpoint = (record.usage_checkpoint if record is not None else None) or UsageCheckpoint()
        lane = next((x for x in catalog.lanes if x.lane_id == checkpoint.lane_id), None)
        line = _swept_usage(lane, checkpoint, (record and record.chat_model) or "")
        charge = Money.usd_ceil(line.cost)
        outcome = _swept_outcome(hold.ref, hold.amount, min(charge, hold.amount), checkpoint, at)
        if hold.org_id not in zones:
            org_controls = controls.billing_controls(hold.org_id)
            zones[hold.org_id] = (org_controls.limit_timezone if org_controls else "") or "UTC"
        zone = zones[hold.org_id]
        result = records.settle(
            HoldSettlement(
                hold.org_id,
                hold.reservation_id,
                hold.ref,
                charge,
                at,
                tuple(period_keys(now, zone).values()),
                outcome,
                usage=UsageCharge(day=usage_day(now, zone), lines=(line,)),
            )
        )
        if not result.replayed:
            report.settled.append(hold.reservation_id)
            report.charged_micros += result.charged.micros
            if result.charged.micros > 0:
                report.charged_orgs.add(hold.org_id)
    return report


def _swept_usage(lane: Lane | None, checkpoint: UsageCheckpoint, model: str) -> UsageLine:
    """The usage a stopped chat request last checkpointed: each token kind at its lane's
    direct price, and its hosted tool calls at the lane's (nothing charged on a lane the
    catalog no longer has)."""
    used = checkpoint.usage
    if lane is not None:
        return direct_usage_line(lane, used)
    cache = used.cache
    return UsageLine(
        model=model,
        provider="",
        input_tokens=used.prompt_tokens,
        output_tokens=used.completion_tokens,
        cached_input_tokens=cache.cached_input_tokens,
        cache_write_input_tokens=cache.cache_write_input_tokens,
        chat_requests=1,
    )


def _swept_outcome(
    batch_id: str, reserved: Money, charged: Money, checkpoint: UsageCheckpoint, at: str
) -> ChatOutcome:
    """The outcome the sweeper settles a stopped chat request with: failed, unless its
    answer was delivered whole and only its own settlement failed (`answered`)."""
    return ChatOutcome(
        completed=checkpoint.answered,
        at=at,
        usage=checkpoint.usage,
        latest_error=None
        if checkpoint.answered
        else "the request stopped before it settled; charged the usage last recorded",
        billing={**direct_totals(batch_id, charged, reserved, at), "recovered_by": "sweeper"},
    )


# -- abandoned regression holds --------------------------------------------------------------------


class DueHolds(Protocol):
    """adapters/dynamo/ledger.py:LedgerStore: the holds past their deadline, and a release."""

    def due_holds(
        self, now_iso: str, *, purpose: Purpose | None = None, limit: int = 100
    ) -> list[Reservation]: ...

    def release(self, org_id: str, reservation_id: str, *, at: str, memo: str) -> SettlementResult: ...


def release_abandoned_regression_holds(
    ledger: DueHolds, clock: Clock, *, max_holds: int = 500
) -> HoldSweepReport:
    """Release, in full, the golden-set regression holds still pending past their deadline
    (`expires_at`: the latest their run could still be running, services/schedules/
    regression.py): the run died before settling, so nothing is charged and no record was
    written. Exactly once: the release is conditional on the hold still pending, so a run
    that settled meanwhile wins (this release is a no-op), and one that settles later
    changes nothing (409 `regression_abandoned`). The reason is the reservation's memo."""
    report = HoldSweepReport()
    at = isoformat(clock.now())
    for hold in ledger.due_holds(at, purpose="regression", limit=max_holds):
        memo = f"golden-set regression {hold.ref} abandoned: not settled by its deadline {hold.expires_at}"
        result = ledger.release(hold.org_id, hold.reservation_id, at=at, memo=memo)
        if not result.replayed:
            report.settled.append(hold.reservation_id)
            logger.warning(
                "regression hold released",
                extra={
                    "org_id": hold.org_id,
                    "regression_id": hold.ref,
                    "released": result.released.to_api(),
                    "deadline": hold.expires_at,
                },
            )
    return report


class SweepOutcome(TypedDict, total=False):
    """What one sweep did (the sweeper function's answer): each step's part, and the names of
    the steps that failed (logged; their parts are missing)."""

    workflows_started: list[str]
    expired: list[str]
    skipped: list[str]
    chat_holds_settled: list[str]
    webhooks: dict[str, list[str]]
    failed_steps: list[str]
    billing_webhooks: NotRequired[dict[str, list[str]]]
    bucket_deliveries: NotRequired[dict[str, list[str]]]
    retention: NotRequired[ReclaimSummary]
    schedules: NotRequired[dict[str, list[str]]]
    schedule_histories_purged: NotRequired[list[str]]
    file_checks_resent: NotRequired[list[str]]
    stranded_batches_resent: NotRequired[list[str]]
    auto_topups: NotRequired[dict[str, list[str]]]
    regression_holds_released: NotRequired[list[str]]


class LaneHeartbeatRefresh(Protocol):
    def __call__(self) -> Any: ...


class DueWebhooks(Protocol):
    def retry_due(self) -> Any: ...


class PendingTopups(Protocol):
    def sweep(self, *, limit: int = 50) -> Any: ...


class RetentionGC(Protocol):
    def collect(self) -> Any: ...


class DueBucketDeliveries(Protocol):
    def enqueue_due(self) -> Any: ...


class DueSchedules(Protocol):
    def fire_due(self, *, limit: int = 100) -> dict[str, list[str]]: ...

    def purge_deleted(self, *, limit: int = 100) -> list[str]:
        """The deleted schedules whose history purge ended (docs/schedules.md)."""
        ...


class DueResends(Protocol):
    """Work whose message was lost or whose workflow ended: sent again (the ids)."""

    def resend_due(self, *, limit: int = 100) -> list[str]: ...


class UnstartedWorkflows(Protocol):
    """services/batches/launch.py:WorkflowLaunch."""

    def launch_unstarted(self, now: datetime, *, limit: int = 100) -> LaunchReport: ...


@dataclass(kw_only=True)
class Sweeper:
    """One scheduled sweep (EventBridge, once a minute): refresh lane heartbeats, start the
    workflows of batches whose start was lost, expire batches past their SLA deadline, settle
    stale chat holds, release the holds of regression runs past their deadline, retry
    webhooks that are due, reclaim result bytes whose retention window passed (one bounded
    page), fire the schedules due and purge the history of deleted ones, re-send the check of
    uploads left `uploaded` too long (a lost `check_file` message), send the `fail` step of
    batches whose hold no workflow will settle."""

    refresh_heartbeats: LaneHeartbeatRefresh  # docs/catalog.md
    batches: ExpiryRecords
    workflows: UnstartedWorkflows  # docs/batches.md, "Starting the workflow"
    ledger: OpenHolds
    chat_holds: HoldStore
    catalog: Catalog
    controls: ControlsReader  # each org's limit_timezone, for a stale hold's spend periods
    webhooks: DueWebhooks  # docs/webhooks.md
    clock: Clock
    stale_hold_seconds: int
    # an expired batch goes on the retention GC's index due this long after (docs/retention.md)
    retention_grace: timedelta = timedelta(hours=72)
    # Every duty is required, so that no wiring leaves one out (a customer's bytes kept past
    # retention, an alert never sent, a hold never released).
    topups: PendingTopups  # auto top-ups to charge or recover (docs/payments.md)
    retention: RetentionGC  # docs/retention.md
    bucket_deliveries: DueBucketDeliveries  # docs/delivery-targets.md
    billing_webhooks: DueWebhooks  # billing alert events (docs/billing-alerts.md)
    watch: MoneyWatch  # alerts and auto top-up after a stale hold is charged
    schedules: DueSchedules  # recurring schedules due by now (docs/schedules.md)
    file_checks: DueResends  # uploads still waiting for their check (docs/files.md)
    # golden-set regression holds past their run's deadline (docs/schedules.md)
    regression_holds: DueHolds
    # batch holds no workflow will settle: their `fail` step (services/workflow/stranded.py);
    # None where there is no settle queue to send it to
    stranded_holds: DueResends | None = None

    def _chat_holds(self) -> Swept:
        """Chat holds whose request died (docs/chat.md), then the watch of each org charged."""
        holds = resolve_stale_chat_holds(
            self.ledger,
            self.chat_holds,
            self.catalog,
            self.clock,
            controls=self.controls,
            stale_seconds=self.stale_hold_seconds,
        )
        now = self.clock.now()
        for org_id in sorted(holds.charged_orgs):
            self.watch.moved(org_id, at=now)
        return len(holds.settled), {"chat_holds_settled": holds.settled}

    def _regression_holds(self) -> Swept:
        """Regression holds whose run died (docs/schedules.md)."""
        released = release_abandoned_regression_holds(self.regression_holds, self.clock)
        return len(released.settled), {"regression_holds_released": released.settled}

    def sweep(self) -> SweepOutcome:
        """Runs every step on its own, each counted in its metric: a step that raises (a
        record it cannot handle, a store that failed) is logged with its name and counted
        (`SweepStepFailed`, an alarm), and the later steps still run, so one bad record never
        stops retention, schedules or auto top-up for every org. The next minute's sweep
        tries the step again."""
        outcome: SweepOutcome = {}
        failed: list[str] = []
        for step in self._steps():
            try:
                count, part = step.run()
            except Exception:
                logger.exception("sweep step failed", extra={"step": step.name})
                metrics.add_metric(name="SweepStepFailed", unit=MetricUnit.Count, value=1)
                failed.append(step.name)
                continue
            metrics.add_metric(name=step.metric, unit=MetricUnit.Count, value=count)
            outcome.update(part)
        if failed:
            outcome["failed_steps"] = failed
        return outcome

    def _steps(self) -> list[SweepStep]:
        """The sweep's steps in order, each with the metric that counts what it did (the
        stranded holds' where there is a settle queue)."""
        steps = [
            SweepStep("heartbeats", "LaneHeartbeats", self._heartbeats),
            SweepStep("workflow_starts", "WorkflowsStartedLate", self._late_starts),
            SweepStep("expiry", "BatchesExpired", self._expire),
            SweepStep("chat_holds", "StaleChatHoldsSettled", self._chat_holds),
            SweepStep("webhooks", "WebhookRetries", partial(_webhooks, "webhooks", self.webhooks)),
            SweepStep("regression_holds", "AbandonedRegressionHoldsReleased", self._regression_holds),
            SweepStep(
                "billing_webhooks",
                "BillingWebhookRetries",
                partial(_webhooks, "billing_webhooks", self.billing_webhooks),
            ),
            SweepStep(
                "bucket_deliveries",
                "BucketDeliveryRetries",
                partial(_bucket_deliveries, self.bucket_deliveries),
            ),
            SweepStep("retention", "BatchesReclaimed", partial(_retention, self.retention)),
            SweepStep("schedules", "SchedulesFired", partial(_schedules, self.schedules)),
            SweepStep(
                "schedule_purges", "ScheduleHistoriesPurged", partial(_schedule_purges, self.schedules)
            ),
            SweepStep(
                "file_checks", "FileChecksResent", partial(_resent, "file_checks_resent", self.file_checks)
            ),
        ]
        if self.stranded_holds is not None:
            resent = partial(_resent, "stranded_batches_resent", self.stranded_holds)
            steps.append(SweepStep("stranded_holds", "StrandedBatchHoldsResent", resent))
        steps.append(SweepStep("auto_topups", "AutoTopupsCharged", partial(_auto_topups, self.topups)))
        return steps

    def _heartbeats(self) -> Swept:
        return len(self.refresh_heartbeats().refreshed), {}

    def _late_starts(self) -> Swept:
        launched = self.workflows.launch_unstarted(self.clock.now())
        return len(launched.started), {"workflows_started": launched.started}

    def _expire(self) -> Swept:
        report = expire_overdue_batches(self.batches, self.clock, retention_grace=self.retention_grace)
        logger.info("expiry swept", extra={"expired": len(report.expired), "skipped": len(report.skipped)})
        return len(report.expired), {"expired": report.expired, "skipped": report.skipped}


# What one sweep step did: the count its metric records, and its part of the sweep's answer.
Swept = tuple[int, SweepOutcome]


@dataclass(frozen=True)
class SweepStep:
    name: str  # in the log and `failed_steps` when it raises
    metric: str  # counts what it did (`Swept`'s count), every sweep
    run: Callable[[], Swept]


def _webhooks(part: Literal["webhooks", "billing_webhooks"], due: DueWebhooks) -> Swept:
    retried = due.retry_due()
    return len(retried.attempted), cast(SweepOutcome, {part: retried.as_dict()})


def _bucket_deliveries(due: DueBucketDeliveries) -> Swept:
    buckets = due.enqueue_due()
    return len(buckets.queued), {"bucket_deliveries": buckets.as_dict()}


def _retention(gc: RetentionGC) -> Swept:
    reclaimed = gc.collect()
    return len(reclaimed.reclaimed), {"retention": reclaimed.as_dict()}


def _schedules(due: DueSchedules) -> Swept:
    fired = due.fire_due()
    return len(fired["created"]), {"schedules": fired}


def _schedule_purges(due: DueSchedules) -> Swept:
    purged = due.purge_deleted()
    return len(purged), {"schedule_histories_purged": purged}


def _resent(part: Literal["file_checks_resent", "stranded_batches_resent"], due: DueResends) -> Swept:
    resent = due.resend_due()
    return len(resent), cast(SweepOutcome, {part: resent})


def _auto_topups(topups: PendingTopups) -> Swept:
    report = topups.sweep()
    charged = {
        "charged": report.charged,
        "recovered": report.recovered,
        "left_pending": report.left_pending,
        "withdrawn": report.withdrawn,
    }
    return len(report.charged), {"auto_topups": charged}
