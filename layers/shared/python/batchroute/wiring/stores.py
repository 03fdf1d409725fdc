"""The deployment's stores, buckets and clients, each built once from the settings: the
floor every context's wiring builds on."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from batchroute.adapters.dynamo.batch_progress import BatchProgress
    from batchroute.adapters.dynamo.batch_records import BatchRecords
    from batchroute.adapters.dynamo.billing_events import BillingEvents
    from batchroute.adapters.dynamo.bucket_deliveries import BucketDeliveries
    from batchroute.adapters.dynamo.chat_holds import ChatHoldStore
    from batchroute.adapters.dynamo.compat import CompatStore
    from batchroute.adapters.dynamo.controls import ControlsStore
    from batchroute.adapters.dynamo.delivery_targets import DeliveryTargetStore
    from batchroute.adapters.dynamo.files import FileStore
    from batchroute.adapters.dynamo.identity import IdentityStore
    from batchroute.adapters.dynamo.lanes import LaneStateStore
    from batchroute.adapters.dynamo.ledger import LedgerStore
    from batchroute.adapters.dynamo.limit_checks import SpendingLimitChecks
    from batchroute.adapters.dynamo.payments import PaymentsStore
    from batchroute.adapters.dynamo.presets import PresetStore
    from batchroute.adapters.dynamo.quotes import QuoteStore
    from batchroute.adapters.dynamo.rate_limits import RateCounterStore
    from batchroute.adapters.dynamo.route_policies import RoutePolicyStore
    from batchroute.adapters.dynamo.schedules import ScheduleStore
    from batchroute.adapters.dynamo.webhook_deliveries import WebhookDeliveries
    from batchroute.adapters.email import SesMailer
    from batchroute.adapters.kms import KmsSealer
    from batchroute.adapters.s3_objects import S3Objects
    from batchroute.adapters.task_queue import TaskQueue
    from batchroute.clock import Clock
    from batchroute.config import Settings


@dataclass(eq=False)
class Stores:
    settings: Settings
    clock: Clock

    def queue(self, name: str) -> TaskQueue | None:
        """The deployment's queue `name` (resources.py), or None where none is configured:
        the service given None does that work in place (docs/architecture.md)."""
        from batchroute.adapters.task_queue import TaskQueue

        url = self.settings.queue_urls.get(name)
        return TaskQueue(url) if url else None

    @cached_property
    def identity(self) -> IdentityStore:
        from batchroute.adapters.dynamo.identity import IdentityStore

        return IdentityStore(self.settings.table_name("identity"))

    @cached_property
    def ledger(self) -> LedgerStore:
        from batchroute.adapters.dynamo.ledger import LedgerStore

        return LedgerStore(self.settings.table_name("ledger"))

    @cached_property
    def controls(self) -> ControlsStore:
        from batchroute.adapters.dynamo.controls import ControlsStore

        return ControlsStore(self.settings.table_name("controls"))

    @cached_property
    def batch_records(self) -> BatchRecords:
        from batchroute.adapters.dynamo.batch_records import BatchRecords

        return BatchRecords(self.settings.table_name("batches"))

    @cached_property
    def batch_progress(self) -> BatchProgress:
        from batchroute.adapters.dynamo.batch_progress import BatchProgress

        return BatchProgress(self.settings.table_name("batches"))

    @cached_property
    def lane_states(self) -> LaneStateStore:
        from batchroute.adapters.dynamo.lanes import LaneStateStore

        return LaneStateStore(self.settings.table_name("controls"))

    @cached_property
    def quote_store(self) -> QuoteStore:
        from batchroute.adapters.dynamo.quotes import QuoteStore

        return QuoteStore(self.settings.table_name("batches"))

    @cached_property
    def file_store(self) -> FileStore:
        from batchroute.adapters.dynamo.files import FileStore

        return FileStore(self.settings.table_name("batches"))

    @cached_property
    def compat_store(self) -> CompatStore:
        from batchroute.adapters.dynamo.compat import CompatStore

        return CompatStore(self.settings.table_name("batches"))

    @cached_property
    def webhook_deliveries(self) -> WebhookDeliveries:
        from batchroute.adapters.dynamo.webhook_deliveries import WebhookDeliveries

        return WebhookDeliveries(self.settings.table_name("batches"))

    @cached_property
    def delivery_target_store(self) -> DeliveryTargetStore:
        from batchroute.adapters.dynamo.delivery_targets import DeliveryTargetStore

        return DeliveryTargetStore(self.settings.table_name("controls"))

    @cached_property
    def preset_store(self) -> PresetStore:
        from batchroute.adapters.dynamo.presets import PresetStore

        return PresetStore(self.settings.table_name("controls"))

    @cached_property
    def bucket_deliveries(self) -> BucketDeliveries:
        from batchroute.adapters.dynamo.bucket_deliveries import BucketDeliveries

        return BucketDeliveries(self.settings.table_name("batches"))

    @cached_property
    def rate_counters(self) -> RateCounterStore:
        from batchroute.adapters.dynamo.rate_limits import RateCounterStore

        return RateCounterStore(self.settings.table_name("controls"))

    @cached_property
    def billing_events(self) -> BillingEvents:
        from batchroute.adapters.dynamo.billing_events import BillingEvents

        return BillingEvents(self.settings.table_name("controls"))

    @cached_property
    def limit_checks(self) -> SpendingLimitChecks:
        from batchroute.adapters.dynamo.limit_checks import SpendingLimitChecks

        return SpendingLimitChecks(
            ledger_table=self.settings.table_name("ledger"),
            controls_table=self.settings.table_name("controls"),
        )

    @cached_property
    def chat_holds(self) -> ChatHoldStore:
        from batchroute.adapters.dynamo.chat_holds import ChatHoldStore

        return ChatHoldStore(
            ledger=self.ledger,
            batches_table=self.settings.table_name("batches"),
            controls_table=self.settings.table_name("controls"),
            identity_table=self.settings.table_name("identity"),
            rate_counters=self.rate_counters,
        )

    @cached_property
    def artifacts(self) -> S3Objects:
        from batchroute.adapters.s3_objects import S3Objects

        return S3Objects(self.settings.buckets.get("artifacts", ""))

    @cached_property
    def uploads(self) -> S3Objects:
        from batchroute.adapters.s3_objects import S3Objects

        return S3Objects(self.settings.buckets.get("uploads", ""))

    @cached_property
    def sealer(self) -> KmsSealer:
        from batchroute.adapters.kms import KmsSealer

        return KmsSealer(self.settings.kms_key_id)

    @cached_property
    def mailer(self) -> SesMailer:
        from batchroute.adapters.email import SesMailer

        return SesMailer.from_settings(self.settings)

    @cached_property
    def schedule_store(self) -> ScheduleStore:
        from batchroute.adapters.dynamo.schedules import ScheduleStore

        return ScheduleStore(self.settings.table_name("controls"))

    @cached_property
    def route_policy_store(self) -> RoutePolicyStore:
        from batchroute.adapters.dynamo.route_policies import RoutePolicyStore

        return RoutePolicyStore(self.settings.table_name("controls"))

    @cached_property
    def payments_store(self) -> PaymentsStore:
        from batchroute.adapters.dynamo.payments import PaymentsStore

        return PaymentsStore(self.settings.table_name("controls"))
