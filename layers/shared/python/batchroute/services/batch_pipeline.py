"""The batch pipeline's parts (Route, RunLane, Finalize, Settle), wired from the settings.

`build_pipeline(settings, clock)` is what the router and settle functions use; tests build
a `Pipeline` themselves when they inject a clock, a sleeper or a time budget.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from batchroute.adapters.batch_artifacts import BatchArtifacts
from batchroute.adapters.dynamo.batch_progress import BatchProgress
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.billing_events import BillingEvents
from batchroute.adapters.dynamo.controls import ControlsStore
from batchroute.adapters.dynamo.identity import IdentityStore
from batchroute.adapters.dynamo.lanes import LaneStateStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.email import SesMailer
from batchroute.adapters.s3_objects import S3Objects
from batchroute.adapters.task_queue import TaskQueue
from batchroute.catalog import builtin_catalog
from batchroute.clock import Clock
from batchroute.config import Settings, get_settings
from batchroute.providers.registry import provider_registry
from batchroute.providers.retry import RetryPolicy
from batchroute.services.billing.alerts import BillingAlerts, owner_emails
from batchroute.services.workflow.execution import LaneExecutor
from batchroute.services.workflow.finalize import Finalizer
from batchroute.services.workflow.planning import LanePlanner
from batchroute.services.workflow.settlement import Settlement
from batchroute.services.workflow.steps import BatchWorkflow
from batchroute.workflow.tasks import Step, StepOutput, WorkflowTask


@dataclass(frozen=True)
class Pipeline:
    planner: LanePlanner
    lanes: LaneExecutor
    finalizer: Finalizer
    settlement: Settlement


def build_billing_alerts(settings: Settings, ledger: LedgerStore) -> BillingAlerts:
    return BillingAlerts(
        events=BillingEvents(settings.table_name("controls")),
        spend=ledger,
        mailer=SesMailer.from_settings(settings),
        recipients=owner_emails(IdentityStore(settings.table_name("identity"))),
    )


def build_pipeline(settings: Settings, clock: Clock) -> Pipeline:
    catalog = builtin_catalog()
    records = BatchRecords(settings.table_name("batches"))
    progress = BatchProgress(settings.table_name("batches"))
    artifacts = BatchArtifacts(S3Objects(settings.buckets.get("artifacts", "")))
    ledger = LedgerStore(settings.table_name("ledger"))
    lanes_queue = settings.queue_urls.get("lanes")
    alerts = build_billing_alerts(settings, ledger)
    return Pipeline(
        planner=LanePlanner(records=records, progress=progress, clock=clock),
        lanes=LaneExecutor(
            records=records,
            progress=progress,
            artifacts=artifacts,
            registry=provider_registry(settings, catalog),
            retry=RetryPolicy.from_settings(settings),
            catalog=catalog,
            clock=clock,
            continuations=TaskQueue(lanes_queue) if lanes_queue else None,
            capacity=LaneStateStore(settings.table_name("controls")),
        ),
        finalizer=Finalizer(records=records, artifacts=artifacts, clock=clock),
        settlement=Settlement(
            records=records,
            ledger=ledger,
            controls=ControlsStore(settings.table_name("controls")),
            artifacts=artifacts,
            fees=catalog.fees,
            clock=clock,
            alerts=alerts,
        ),
    )


def lazy_steps(names: Iterable[str], clock: Clock) -> dict[str, Step]:
    """Workflow steps for a handler module: the workflow is built on first use, and again
    only when the settings object changes (tests clear `get_settings`), so importing a
    handler reads no settings that a test could not change afterwards."""
    built: list[tuple[Settings, BatchWorkflow]] = []

    def workflow() -> BatchWorkflow:
        settings = get_settings()
        if not built or built[0][0] is not settings:
            records = BatchRecords(settings.table_name("batches"))
            built[:] = [(settings, BatchWorkflow(records, clock, pipeline=build_pipeline(settings, clock)))]
        return built[0][1]

    def step(name: str) -> Step:
        def run(task: WorkflowTask) -> StepOutput | None:
            method: Step = getattr(workflow(), name)
            return method(task)

        return run

    return {name: step(name) for name in names}
