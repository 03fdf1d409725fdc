"""The workflow context: the batch pipeline's steps, the workflow and the sweeper."""

from __future__ import annotations

from functools import cached_property, partial
from typing import TYPE_CHECKING

from batchroute.wiring.schedules import SchedulesWiring

if TYPE_CHECKING:
    from batchroute.adapters.batch_artifacts import BatchArtifacts
    from batchroute.services.workflow.overage import RescueOverage
    from batchroute.services.workflow.rescue import DeadlineRescue
    from batchroute.services.workflow.retention_gc import RetentionCollector
    from batchroute.services.workflow.steps import BatchWorkflow, Pipeline
    from batchroute.services.workflow.stranded import StrandedHolds
    from batchroute.services.workflow.sweeper import Sweeper


class WorkflowWiring(SchedulesWiring):
    @cached_property
    def batch_artifacts(self) -> BatchArtifacts:
        """A batch's artifacts in the artifact store, shared by the pipeline's steps (and so its
        reads ahead: adapters/batch_artifacts.py)."""
        from batchroute.adapters.batch_artifacts import BatchArtifacts

        return BatchArtifacts(self.artifacts)

    @cached_property
    def pipeline(self) -> Pipeline:
        from batchroute.providers.retry import RetryPolicy
        from batchroute.services.workflow.execution import LaneExecutor
        from batchroute.services.workflow.finalize import Finalizer
        from batchroute.services.workflow.intake import Intake
        from batchroute.services.workflow.planning import LanePlanner
        from batchroute.services.workflow.settlement import Settlement
        from batchroute.services.workflow.steps import Pipeline

        return Pipeline(
            intake=Intake(
                records=self.batch_records,
                reader=self.quotes,
                artifacts=self.artifacts,
                clock=self.clock,
            ),
            continuations=self.queue("settle"),
            planner=LanePlanner(records=self.batch_records, progress=self.batch_progress, clock=self.clock),
            lanes=LaneExecutor(
                records=self.batch_records,
                progress=self.batch_progress,
                artifacts=self.batch_artifacts,
                registry=self.providers,
                retry=RetryPolicy.from_settings(self.settings),
                catalog=self.catalog,
                clock=self.clock,
                continuations=self.queue("lanes"),
                capacity=self.lane_states,
                availability=self.lane_states,
                rescue=self.deadline_rescue,
                policies=self.route_policies,
            ),
            finalizer=Finalizer(
                records=self.batch_records,
                artifacts=self.batch_artifacts,
                clock=self.clock,
                retention_grace=self.settings.retention_grace,
            ),
            settlement=Settlement(
                records=self.batch_records,
                funds=self.funds,
                artifacts=self.batch_artifacts,
                fees=self.catalog.fees,
                clock=self.clock,
                work_orders=self.work_orders,
                references=self.references,
            ),
        )

    @cached_property
    def deadline_rescue(self) -> DeadlineRescue:
        from batchroute.adapters.batch_artifacts import BatchArtifacts
        from batchroute.services.workflow.rescue import DeadlineRescue

        return DeadlineRescue(
            records=self.batch_records,
            # its own: the pipeline's reads ahead are for the pipeline's next reads
            artifacts=BatchArtifacts(self.artifacts),
            registry=self.providers,
            catalog=self.catalog,
            clock=self.clock,
            events=self.webhook_delivery,
            min_observation_seconds=self.settings.rescue_min_observation_seconds,
            overage=self.rescue_overage,
            policies=self.route_policies,
        )

    @cached_property
    def rescue_overage(self) -> RescueOverage:
        """allow_overage's second hold on the wallet (services/workflow/overage.py)."""
        from batchroute.services.workflow.overage import RescueOverage

        return RescueOverage(
            records=self.batch_records,
            funds=self.funds,
            clock=self.clock,
            work_orders=self.work_orders,
        )

    @cached_property
    def workflow(self) -> BatchWorkflow:
        from batchroute.services.workflow.steps import BatchWorkflow

        return BatchWorkflow(
            self.batch_records,
            self.clock,
            self.webhook_delivery,
            pipeline=self.pipeline,
            buckets=self.bucket_delivery,
            files=self.files,
            retention_grace=self.settings.retention_grace,
        )

    @cached_property
    def sweeper(self) -> Sweeper:
        from batchroute.services.catalog.lane_health import refresh_lane_heartbeats
        from batchroute.services.workflow.sweeper import Sweeper

        return Sweeper(
            refresh_heartbeats=partial(
                refresh_lane_heartbeats, self.catalog, self.lane_states, self.provider_health, self.clock
            ),
            batches=self.batch_records,
            workflows=self.workflow_launch,
            ledger=self.ledger,
            chat_holds=self.chat_holds,
            catalog=self.catalog,
            controls=self.controls,
            webhooks=self.webhook_delivery,
            clock=self.clock,
            stale_hold_seconds=self.settings.chat_hold_stale_seconds,
            retention_grace=self.settings.retention_grace,
            topups=self.auto_topup,
            retention=self.retention_gc,
            bucket_deliveries=self.bucket_delivery,
            billing_webhooks=self.billing_webhooks,
            watch=self.billing_watch,
            schedules=self.schedules,
            file_checks=self.file_check_resender,
            regression_holds=self.ledger,  # golden-set runs that died holding credit
            stranded_holds=self.stranded_holds,
        )

    @cached_property
    def stranded_holds(self) -> StrandedHolds | None:
        """Batch holds no workflow will settle: their `fail` step on the settle queue (None
        without one)."""
        from batchroute.services.workflow.stranded import StrandedHolds

        settle = self.queue("settle")
        return None if settle is None else StrandedHolds(self.ledger, self.batch_records, settle, self.clock)

    @cached_property
    def retention_gc(self) -> RetentionCollector:
        from batchroute.services.workflow.retention_gc import RetentionCollector

        return RetentionCollector(
            index=self.batch_records,
            settings=self.controls,
            objects=self.artifacts,
            clock=self.clock,
            grace=self.settings.retention_grace,
            max_batches=self.settings.retention_sweep_batches,
        )
