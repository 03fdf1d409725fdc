"""The one place that builds the service: every store, service and workflow step, from the
settings and a clock (the composition root).

`wiring_for(settings, clock)` returns the `Wiring` of that pair, built once per process and
reused (a warm Lambda keeps its clients, caches and the chat hot path's state between
invocations; a test that builds an app with its own settings or clock gets its own). Every
caller goes through it: the API's dependencies (functions/api/deps.py), every Lambda handler
(`lambda_handler`), the local runner and the benches. Nothing else reads
`settings.table_name(...)` or `settings.buckets`.

Seams that tests replace (a mailer, password hashing parameters, a URL check) are arguments
of the methods that need them; everything else is a cached attribute. docs/architecture.md
(Layout) names the parts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from batchroute.clock import SystemClock
from batchroute.config import get_settings
from batchroute.resources import RECONCILIATION_EVENT

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

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
    from batchroute.adapters.stripe_payments import StripePayments
    from batchroute.adapters.task_queue import TaskQueue
    from batchroute.adapters.webhook_sender import WebhookSender
    from batchroute.catalog.environments import Deployment
    from batchroute.clock import Clock
    from batchroute.config import Settings
    from batchroute.domain.batch_record import BatchWebhook
    from batchroute.domain.catalog import Catalog
    from batchroute.domain.routing_gates import RoutingGuards
    from batchroute.providers.credentials import ProviderKeys
    from batchroute.providers.registry import ProviderRegistry
    from batchroute.services.accounts.accounts import Registration
    from batchroute.services.accounts.api_keys import ApiKeys
    from batchroute.services.accounts.authentication import Authenticator
    from batchroute.services.accounts.login_lockout import LoginLockout
    from batchroute.services.accounts.password_reset import PasswordReset, ResponseFloor
    from batchroute.services.accounts.passwords import Argon2Passwords
    from batchroute.services.accounts.sessions import Sessions
    from batchroute.services.accounts.settings import AccountSettings
    from batchroute.services.accounts.verification import EmailVerification
    from batchroute.services.batches.create import BatchService
    from batchroute.services.batches.files import FileCheckResender, FileLimits, FileService
    from batchroute.services.batches.quotes import QuoteService
    from batchroute.services.batches.reads import BatchReads
    from batchroute.services.billing.auto_topup import AutoTopupService
    from batchroute.services.billing.controls import BillingControlsService
    from batchroute.services.billing.events import BillingEventLog
    from batchroute.services.billing.payments import CreditPurchases
    from batchroute.services.billing.ports import Notifier
    from batchroute.services.billing.rate_limiting import RateLimiter
    from batchroute.services.billing.reconciliation import ScheduledReconciliation
    from batchroute.services.billing.retention import RetentionService
    from batchroute.services.billing.usage import UsageService
    from batchroute.services.billing.watch import BalanceListener, BillingWatch
    from batchroute.services.catalog.catalog import CatalogService
    from batchroute.services.catalog.content import ContentService
    from batchroute.services.catalog.lane_health import (
        LaneHealthReport,
        ProviderHealth,
    )
    from batchroute.services.chat.direct import DirectChat
    from batchroute.services.chat.jobs import ChatJobs
    from batchroute.services.chat.state import HoldKeeper, LaneStateCache, LaneStats
    from batchroute.services.compat.batches import CompatBatches
    from batchroute.services.compat.files import CompatFiles
    from batchroute.services.compat.uploads import CompatUploads
    from batchroute.services.delivery.buckets import BucketDelivery
    from batchroute.services.delivery.ports import Mailer
    from batchroute.services.delivery.targets import DeliveryTargets
    from batchroute.services.delivery.webhooks import WebhookDelivery
    from batchroute.services.feedback.service import FeedbackService
    from batchroute.services.presets.service import Presets
    from batchroute.services.routing.policy import PolicyReader, RoutePolicyService
    from batchroute.services.schedules.regression import RegressionRuns
    from batchroute.services.schedules.schedules import Schedules
    from batchroute.services.work_orders.service import WorkOrders
    from batchroute.services.workflow.retention_gc import RetentionCollector
    from batchroute.services.workflow.steps import BatchWorkflow, Pipeline
    from batchroute.services.workflow.sweeper import Sweeper
    from batchroute.worker import LambdaHandler
    from batchroute.workflow.tasks import Step, StepOutput, WorkflowTask

ARTIFACT_URL_SECONDS = 900
_MAX_WIRINGS = 8  # test suites build many apps; a deployed process has one


class Wiring:
    def __init__(self, settings: Settings, clock: Clock) -> None:
        self.settings = settings
        self.clock = clock

    def queue(self, name: str) -> TaskQueue | None:
        """The deployment's queue `name` (resources.py), or None where none is configured:
        the service given None does that work in place (docs/architecture.md)."""
        from batchroute.adapters.task_queue import TaskQueue

        url = self.settings.queue_urls.get(name)
        return TaskQueue(url) if url else None

    # -- stores ----------------------------------------------------------------------------
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

    # -- catalog and providers -------------------------------------------------------------
    @cached_property
    def deployment(self) -> Deployment:
        """The catalog as this environment runs it, and how each provider is reached."""
        from batchroute.catalog import builtin_catalog
        from batchroute.catalog.environments import Placeholders, load_deployment

        settings = self.settings
        values = {f"bucket:{key}": name for key, name in settings.buckets.items()}
        values.update(
            emulators=settings.vendor_emulator_url.rstrip("/"),
            region=settings.aws_region,
            bedrock_batch_role_arn=settings.bedrock_batch_role_arn,
        )
        return load_deployment(builtin_catalog(), settings.environment, Placeholders(values))

    @cached_property
    def catalog(self) -> Catalog:
        return self.deployment.catalog

    @cached_property
    def guards(self) -> RoutingGuards:
        from batchroute.services.catalog.catalog import guards_for

        return guards_for(self.settings)

    @cached_property
    def provider_keys(self) -> ProviderKeys:
        from batchroute.adapters.aws import client
        from batchroute.providers.credentials import ProviderKeys

        return ProviderKeys(
            self.settings.prefix,
            secretsmanager=client("secretsmanager"),
            max_age=self.settings.provider_key_max_age_seconds,
        )

    @cached_property
    def providers(self) -> ProviderRegistry:
        from batchroute.providers.registry import provider_registry

        return provider_registry(
            self.settings,
            self.catalog.providers,
            endpoints=self.deployment.endpoints,
            keys=self.provider_keys,
        )

    @cached_property
    def provider_health(self) -> ProviderHealth:
        from batchroute.services.catalog.lane_health import provider_health_for

        return provider_health_for(self.settings, self.providers)

    @cached_property
    def catalog_service(self) -> CatalogService:
        from batchroute.services.catalog.catalog import CatalogService

        return CatalogService(self.catalog, self.lane_states, self.settings, self.clock)

    @cached_property
    def content(self) -> ContentService:
        from batchroute.content import BuiltinContent
        from batchroute.services.catalog.content import ContentService

        return ContentService(BuiltinContent(), enabled=self.settings.content_store_enabled)

    # -- accounts --------------------------------------------------------------------------
    @cached_property
    def authenticator(self) -> Authenticator:
        from batchroute.adapters.app_secret import app_secret
        from batchroute.services.accounts.authentication import Authenticator

        return Authenticator(
            self.identity, environment=self.settings.environment, secret=app_secret, clock=self.clock
        )

    @cached_property
    def rate_limiter(self) -> RateLimiter:
        from batchroute.adapters.app_secret import app_secret
        from batchroute.services.billing.rate_limiting import RateLimiter, RateLimitPolicy

        return RateLimiter(
            self.rate_counters, self.clock, RateLimitPolicy.from_settings(self.settings), secret=app_secret()
        )

    @cached_property
    def api_keys(self) -> ApiKeys:
        from batchroute.adapters.app_secret import app_secret
        from batchroute.services.accounts.api_keys import ApiKeys

        return ApiKeys(
            self.identity, environment=self.settings.environment, secret=app_secret, clock=self.clock
        )

    def email_verification(self, mailer: Mailer) -> EmailVerification:
        from batchroute.adapters.app_secret import app_secret
        from batchroute.services.accounts.verification import EmailVerification

        return EmailVerification(
            self.identity,
            mailer,
            secret=app_secret,
            clock=self.clock,
            public_base_url=self.settings.public_base_url,
        )

    def registration(self, passwords: Argon2Passwords, verification: EmailVerification) -> Registration:
        from batchroute.adapters.app_secret import app_secret
        from batchroute.money import Money
        from batchroute.services.accounts.accounts import Registration

        return Registration(
            self.identity,
            self.ledger,
            passwords,
            verification,
            environment=self.settings.environment,
            secret=app_secret,
            signup_credit=Money.usd(self.settings.effective_signup_credit_usd),
            clock=self.clock,
        )

    def sessions(self, passwords: Argon2Passwords, mailer: Mailer) -> Sessions:
        from batchroute.adapters.app_secret import app_secret
        from batchroute.services.accounts.sessions import Sessions

        return Sessions(
            self.identity,
            passwords,
            environment=self.settings.environment,
            secret=app_secret,
            clock=self.clock,
            lockout=self.login_lockout(mailer),
        )

    def login_lockout(self, mailer: Mailer) -> LoginLockout:
        from batchroute.adapters.app_secret import app_secret
        from batchroute.adapters.dynamo.rate_limits import LoginLockStore
        from batchroute.services.accounts.login_lockout import LockoutPolicy, LoginLockout

        return LoginLockout(
            self.rate_counters,
            LoginLockStore(self.settings.table_name("controls")),
            mailer,
            policy=LockoutPolicy.from_settings(self.settings),
            secret=app_secret,
            clock=self.clock,
            public_base_url=self.settings.public_base_url,
        )

    def password_reset(
        self, mailer: Mailer, passwords: Argon2Passwords, floor: ResponseFloor
    ) -> PasswordReset:
        from batchroute.adapters.app_secret import app_secret
        from batchroute.services.accounts.password_reset import PasswordReset

        return PasswordReset(
            self.identity,
            mailer,
            passwords,
            secret=app_secret,
            clock=self.clock,
            public_base_url=self.settings.public_base_url,
            floor=floor,
        )

    def webhook_url_check(self) -> Callable[[str], object]:
        """Loopback receivers are a local-development convenience, never honoured in production."""
        from batchroute.domain.network import check_public_https_url

        settings = self.settings
        allow_loopback = settings.allow_loopback_webhooks and settings.environment != "production"

        def check(url: str) -> object:
            return check_public_https_url(
                url, allow_loopback=allow_loopback, environment=settings.environment
            )

        return check

    def account_settings(self, check_url: Callable[[str], object]) -> AccountSettings:
        from batchroute.services.accounts.settings import AccountSettings

        return AccountSettings(
            self.identity, self.ledger, self.sealer, check_webhook_url=check_url, clock=self.clock
        )

    # -- routing policy --------------------------------------------------------------------
    @cached_property
    def route_policy_store(self) -> RoutePolicyStore:
        from batchroute.adapters.dynamo.route_policies import RoutePolicyStore

        return RoutePolicyStore(self.settings.table_name("controls"))

    @cached_property
    def route_policies(self) -> PolicyReader:
        """Per process: its cache is what keeps direct chat off DynamoDB for the policy."""
        from batchroute.services.routing.policy import PolicyReader

        return PolicyReader(self.route_policy_store, self.clock)

    @cached_property
    def route_policy(self) -> RoutePolicyService:
        from batchroute.services.routing.policy import RoutePolicyService

        return RoutePolicyService(self.route_policy_store, self.catalog, self.clock, self.route_policies)

    # -- billing ---------------------------------------------------------------------------
    @cached_property
    def billing_controls(self) -> BillingControlsService:
        from batchroute.services.billing.controls import BillingControlsService

        return BillingControlsService(self.controls, self.clock)

    @cached_property
    def retention(self) -> RetentionService:
        from batchroute.services.billing.retention import RetentionService

        return RetentionService(self.controls, self.clock)

    @cached_property
    def usage(self) -> UsageService:
        from batchroute.services.billing.usage import UsageService

        return UsageService(ledger=self.ledger, controls=self.controls, clock=self.clock)

    @cached_property
    def billing_webhook_deliveries(self) -> WebhookDeliveries:
        """Deliveries of billing alert events, beside their org in the controls table."""
        from batchroute.adapters.dynamo.webhook_deliveries import ORG_OWNER, WebhookDeliveries

        return WebhookDeliveries(self.settings.table_name("controls"), owner=ORG_OWNER)

    @cached_property
    def billing_webhooks(self) -> WebhookDelivery:
        """Billing alert events to the org's delivery webhook: the batch webhooks' signature,
        schedule and dead letter; attempts made by the sweeper."""
        from batchroute.services.delivery.webhooks import WebhookDelivery

        return WebhookDelivery(
            self.billing_webhook_deliveries,
            self.identity,
            self.sealer,
            self.webhook_sender,
            self.clock,
            owner_field="org_id",
        )

    @cached_property
    def billing_event_log(self) -> BillingEventLog:
        from batchroute.services.billing.events import BillingEventLog

        return BillingEventLog(self.billing_events, self.billing_webhook_deliveries)

    @cached_property
    def balance_listeners(self) -> tuple[BalanceListener, ...]:
        """Who hears every balance movement after the alerts: the auto top-up."""
        return (self.auto_topup,)

    @cached_property
    def billing_watch(self) -> BillingWatch:
        """Called after every money movement: billing alerts, then the balance listeners."""
        from batchroute.services.billing.alerts import EmailAlerts, WebhookAlerts, owner_emails
        from batchroute.services.billing.watch import BillingWatch
        from batchroute.services.delivery.webhooks import OrgEventWebhooks

        return BillingWatch(
            controls=self.controls,
            ledger=self.ledger,
            records=self.billing_events,
            channels=(
                EmailAlerts(self.mailer, owner_emails(self.identity)),
                WebhookAlerts(OrgEventWebhooks(self.billing_webhook_deliveries, self.identity)),
            ),
            listeners=self.balance_listeners,
        )

    # -- payments (docs/payments.md) ------------------------------------------------------
    @cached_property
    def payments_store(self) -> PaymentsStore:
        from batchroute.adapters.dynamo.payments import PaymentsStore

        return PaymentsStore(self.settings.table_name("controls"))

    @cached_property
    def payment_processor(self) -> StripePayments:
        from batchroute.adapters.stripe_payments import SecretsManagerStripeKeys, StripeKeys, StripePayments

        settings = self.settings
        keys: Callable[[], StripeKeys]
        if settings.payments_secret_name:
            from batchroute.adapters.aws import client

            keys = SecretsManagerStripeKeys(
                settings.payments_secret_name, secretsmanager=client("secretsmanager")
            )
        else:
            local = StripeKeys(
                secret_key=settings.stripe_secret_key.get_secret_value(),
                webhook_secret=settings.stripe_webhook_secret.get_secret_value(),
            )

            def keys() -> StripeKeys:
                return local

        return StripePayments(keys, api_base=settings.effective_payments_api_url)

    @cached_property
    def billing_notifier(self) -> Notifier:
        """Where auto top-up notices go: the billing watch (event, email, signed webhook)."""
        return self.billing_watch

    def balance_moved(self, org_id: str, at: datetime) -> None:
        """Called after a processor credit: alerts re-arm, listeners hear it."""
        self.billing_watch.moved(org_id, at=at)

    @cached_property
    def auto_topup(self) -> AutoTopupService:
        from batchroute.services.billing.auto_topup import AutoTopupService
        from batchroute.services.billing.payment_notices import DeferredNotifier

        return AutoTopupService(
            store=self.payments_store,
            ledger=self.ledger,
            processor=self.payment_processor,
            notifier=DeferredNotifier(lambda: self.billing_notifier),
            on_moved=self.balance_moved,
            clock=self.clock,
            charge_inline=self.settings.auto_topup_charge_inline,
            stuck_after=timedelta(seconds=self.settings.auto_topup_stuck_seconds),
        )

    @cached_property
    def credit_purchases(self) -> CreditPurchases:
        from batchroute.services.billing.payments import CreditPurchases

        return CreditPurchases(
            processor=self.payment_processor,
            profiles=self.payments_store,
            checkouts=self.payments_store,
            ledger=self.ledger,
            topups=self.auto_topup,
            on_moved=self.balance_moved,
            clock=self.clock,
            public_base_url=self.settings.public_base_url,
            # outside local mode a paid session is confirmed with the processor itself
            confirm_with_processor=self.settings.confirms_payments_with_processor,
        )

    # -- batches ---------------------------------------------------------------------------
    @cached_property
    def file_limits(self) -> FileLimits:
        from batchroute.services.batches.files import FileLimits

        settings = self.settings
        return FileLimits(
            max_direct_upload_bytes=settings.max_direct_upload_bytes,
            max_file_bytes=settings.max_file_bytes,
            upload_url_seconds=settings.file_upload_url_seconds,
            multipart_threshold_bytes=settings.file_multipart_threshold_bytes,
            part_bytes=settings.file_part_bytes,
            max_line_bytes=settings.max_jsonl_line_bytes,
            download_redirect_bytes=settings.file_download_redirect_bytes,
            download_url_seconds=settings.file_download_url_seconds,
        )

    @cached_property
    def files(self) -> FileService:
        """Also what quotes and batch creation use to read an `input_file_id`."""
        from batchroute.services.batches.files import FileService, queued_checks

        return FileService(
            self.file_store,
            self.uploads,
            self.clock,
            self.file_limits,
            request_check=queued_checks(self.queue("route")),
        )

    @cached_property
    def quotes(self) -> QuoteService:
        """Reads `input_file_id`s from the native file service (`QuoteService.reading` for
        another source)."""
        from batchroute.adapters.quote_items import QuoteItemSink
        from batchroute.services.batches.quotes import QuoteService

        return QuoteService(
            catalog=self.catalog,
            live=self.lane_states,
            snapshots=self.quote_store,
            item_sink=QuoteItemSink(self.artifacts),
            files=self.files,
            balances=self.ledger,
            settings=self.settings,
            guards=self.guards,
            clock=self.clock,
            policies=self.route_policies,
            presets=self.presets,
        )

    @cached_property
    def presets(self) -> Presets:
        """The org's request templates (docs/presets.md); also what quotes, batches, compat
        rows and chat bodies resolve `preset` through."""
        from batchroute.services.presets.service import Presets

        return Presets(
            self.preset_store,
            catalog=self.catalog,
            clock=self.clock,
            regression=lambda: self.regression_runs,  # golden-set runs, built when first asked
        )

    @cached_property
    def batches(self) -> BatchService:
        from batchroute.adapters.stepfunctions import start_execution
        from batchroute.domain.batch_record import BatchWebhook
        from batchroute.services.batches.create import BatchService
        from batchroute.services.delivery.webhooks import batch_webhook_config

        settings, sealer = self.settings, self.sealer

        def start(*, batch_id: str) -> str:
            return start_execution(
                state_machine_arn=settings.state_machine_arn, name=batch_id, payload={"batch_id": batch_id}
            )

        def seal(*, org_id: str, batch_id: str, url: str, secret: str) -> BatchWebhook:
            config = batch_webhook_config(sealer, org_id=org_id, batch_id=batch_id, url=url, secret=secret)
            return BatchWebhook(url=config["url"], secret_sealed=config["secret_sealed"])

        return BatchService(
            records=self.batch_records,
            ledger=self.ledger,
            controls=self.controls,
            quotes=self.quotes,
            artifacts=self.artifacts,
            start_workflow=start,
            seal_webhook=seal,
            settings=settings,
            clock=self.clock,
            watch=self.billing_watch,
            limit_checks=self.limit_checks,
            work_orders=self.work_orders,
        )

    # -- work orders and feedback (docs/work-orders.md, docs/feedback.md) --------------------
    @cached_property
    def work_orders(self) -> WorkOrders:
        from batchroute.adapters.dynamo.work_orders import WorkOrderStore
        from batchroute.services.work_orders.service import WorkOrders

        store = WorkOrderStore(self.settings.table_name("controls"), self.settings.table_name("batches"))
        return WorkOrders(store, self.batch_records, self.clock)

    @cached_property
    def feedback(self) -> FeedbackService:
        from batchroute.adapters.dynamo.feedback import FeedbackStore
        from batchroute.services.feedback.service import FeedbackService

        store = FeedbackStore(self.settings.table_name("controls"))
        return FeedbackService(store, self.batch_records, self.artifacts, self.clock)

    @cached_property
    def batch_reads(self) -> BatchReads:
        from batchroute.adapters.s3_objects import presigning_client
        from batchroute.services.batches.reads import BatchReads

        bucket = self.settings.buckets.get("artifacts", "")

        def sign(key: str) -> str:
            return str(
                presigning_client().generate_presigned_url(
                    "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=ARTIFACT_URL_SECONDS
                )
            )

        return BatchReads(
            self.batch_records,
            self.artifacts,
            sign,
            retention=self.retention,
            grace=timedelta(hours=self.settings.retention_grace_hours),
            feedback=self.feedback,
        )

    # -- chat ------------------------------------------------------------------------------
    @cached_property
    def chat_lane_cache(self) -> LaneStateCache:
        from batchroute.services.chat.state import LaneStateCache

        return LaneStateCache(self.lane_states, self.settings.chat_lane_state_ttl_seconds)

    @cached_property
    def chat_lane_stats(self) -> LaneStats:
        from batchroute.services.chat.state import LaneStats

        return LaneStats()

    @cached_property
    def hold_keeper(self) -> HoldKeeper:
        from batchroute.services.chat.state import HoldKeeper

        return HoldKeeper(self.chat_holds, self.clock, limiter=self.rate_limiter)

    @cached_property
    def direct_chat(self) -> DirectChat:
        """Reused across requests: the lane-state cache, the observed lane records and the
        cached hard limits are what keep the hot path off DynamoDB."""
        from batchroute.services.chat.direct import DirectChat, DirectOptions

        settings = self.settings
        return DirectChat(
            catalog=self.catalog,
            lanes=self.chat_lane_cache,
            stats=self.chat_lane_stats,
            holds=self.hold_keeper,
            store=self.chat_holds,
            providers=self.providers,
            controls=self.controls,
            guards=self.guards,
            clock=self.clock,
            policies=self.route_policies,
            options=DirectOptions(
                first_byte_timeout_seconds=settings.chat_first_byte_timeout_seconds,
                checkpoint_seconds=settings.chat_usage_checkpoint_seconds,
            ),
            watch=self.billing_watch,
            limiter=self.rate_limiter,
            availability=self.lane_states,
        )

    @cached_property
    def chat_jobs(self) -> ChatJobs:
        from batchroute.services.chat.jobs import ChatJobs

        return ChatJobs(batches=self.batches, records=self.batch_records, artifacts=self.artifacts)

    # -- compat ----------------------------------------------------------------------------
    @cached_property
    def compat_files(self) -> CompatFiles:
        from batchroute.services.compat.files import CompatFiles

        return CompatFiles(
            self.files, outputs=self.compat_store, batches=self.batch_records, artifacts=self.artifacts
        )

    @cached_property
    def compat_uploads(self) -> CompatUploads:
        from batchroute.services.compat.uploads import CompatUploads

        return CompatUploads(self.compat_store, self.compat_files, self.uploads, self.clock)

    @cached_property
    def compat_batches(self) -> CompatBatches:
        from batchroute.services.compat.batches import CompatBatches

        return CompatBatches(
            batches=self.batches,
            files=self.files,
            reads=self.batch_reads,
            records=self.compat_store,
            clock=self.clock,
        )

    # -- workflow --------------------------------------------------------------------------
    @cached_property
    def webhook_sender(self) -> WebhookSender:
        from batchroute.adapters.webhook_sender import WebhookSender

        settings = self.settings
        return WebhookSender(
            allow_loopback=settings.allow_loopback_webhooks,
            environment=settings.environment,
            now=self.clock.now,
        )

    @cached_property
    def webhook_delivery(self) -> WebhookDelivery:
        from batchroute.services.delivery.webhooks import WebhookDelivery

        return WebhookDelivery(
            self.webhook_deliveries, self.identity, self.sealer, self.webhook_sender, self.clock
        )

    @cached_property
    def delivery_targets(self) -> DeliveryTargets:
        """Loopback endpoints follow the webhooks' rule (ALLOW_LOOPBACK_WEBHOOKS, never in
        production): the same SSRF guard, the same local convenience."""
        from batchroute.adapters.customer_buckets import CustomerBuckets
        from batchroute.services.delivery.targets import DeliveryTargets

        settings = self.settings
        buckets = CustomerBuckets(
            allow_loopback=settings.allow_loopback_webhooks, environment=settings.environment
        )
        return DeliveryTargets(
            self.delivery_target_store,
            self.sealer,
            buckets,
            check_url=self.webhook_url_check(),
            clock=self.clock,
            probe_buckets=buckets.for_probes(),
        )

    # -- recurring schedules (docs/schedules.md) ---------------------------------------------
    @cached_property
    def schedule_store(self) -> ScheduleStore:
        from batchroute.adapters.dynamo.schedules import ScheduleStore

        return ScheduleStore(self.settings.table_name("controls"))

    @cached_property
    def regression_runs(self) -> RegressionRuns:
        """Golden-set runs of schedules and presets (one implementation, two subjects)."""
        from batchroute.services.presets.service import Presets
        from batchroute.services.schedules.regression import RegressionRuns

        return RegressionRuns(
            store=self.schedule_store,
            catalog=self.catalog,
            providers=self.providers,
            guards=self.guards,
            ledger=self.ledger,
            controls=self.controls,
            clock=self.clock,
            watch=self.billing_watch,
            # its own resolver over the same store: `presets` holds this runner, no cycle
            presets=Presets(self.preset_store, catalog=self.catalog, clock=self.clock),
            preset_benchmarks=self.preset_store,
        )

    @cached_property
    def schedules(self) -> Schedules:
        from batchroute.services.schedules.schedules import Schedules

        settings = self.settings
        triggers = None
        if settings.schedule_group_name and settings.schedule_target_arn:
            from batchroute.adapters.event_scheduler import EventScheduler

            triggers = EventScheduler(
                group_name=settings.schedule_group_name,
                role_arn=settings.schedule_role_arn,
                target_arn=settings.schedule_target_arn,
            )
        return Schedules(
            store=self.schedule_store,
            batches=lambda: self.batches,  # built when a schedule first fires
            files=self.files,
            targets=self.delivery_targets,
            read_prefix=self._read_prefix,
            sealer=self.sealer,
            catalog=self.catalog,
            check_url=self.webhook_url_check(),
            clock=self.clock,
            triggers=triggers,
            regression=self.regression_runs,
        )

    def _read_prefix(self, org_id: str, target_id: str, prefix: str) -> Iterator[tuple[str, bytes]]:
        """A schedule's input files: every object under `prefix` in the org's delivery target,
        read with the target's own credentials (BucketRefused becomes the run's error)."""
        from batchroute.adapters.customer_buckets import CustomerBucket
        from batchroute.domain.delivery_targets import BucketRefused
        from batchroute.errors import InvalidRequest
        from batchroute.services.schedules.schedules import MAX_SOURCE_BYTES, MAX_SOURCE_FILES

        targets = self.delivery_targets
        target = targets.get(org_id, target_id)
        try:
            bucket = targets.open(target)
            assert isinstance(bucket, CustomerBucket)
            for key in bucket.keys(prefix, limit=MAX_SOURCE_FILES):
                yield key, bucket.read(key, max_bytes=MAX_SOURCE_BYTES)
        except BucketRefused as refused:
            raise InvalidRequest(
                f"The input bucket refused: {refused.message}", code=f"bucket_{refused.code}".lower()[:64]
            ) from None

    @cached_property
    def bucket_delivery(self) -> BucketDelivery:
        from batchroute.adapters.customer_buckets import ArtifactSource
        from batchroute.services.delivery.buckets import BucketDelivery

        return BucketDelivery(
            self.bucket_deliveries,
            self.delivery_targets,
            self.batch_records,
            ArtifactSource(self.artifacts),
            self.clock,
            queue=self.queue("deliver"),
        )

    @cached_property
    def pipeline(self) -> Pipeline:
        from batchroute.adapters.batch_artifacts import BatchArtifacts
        from batchroute.providers.retry import RetryPolicy
        from batchroute.services.workflow.execution import LaneExecutor
        from batchroute.services.workflow.finalize import Finalizer
        from batchroute.services.workflow.intake import Intake
        from batchroute.services.workflow.planning import LanePlanner
        from batchroute.services.workflow.settlement import Settlement
        from batchroute.services.workflow.steps import Pipeline

        artifacts = BatchArtifacts(self.artifacts)
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
                artifacts=artifacts,
                registry=self.providers,
                retry=RetryPolicy.from_settings(self.settings),
                catalog=self.catalog,
                clock=self.clock,
                continuations=self.queue("lanes"),
                capacity=self.lane_states,
                availability=self.lane_states,
            ),
            finalizer=Finalizer(
                records=self.batch_records,
                artifacts=artifacts,
                clock=self.clock,
                retention_grace=timedelta(hours=self.settings.retention_grace_hours),
            ),
            settlement=Settlement(
                records=self.batch_records,
                ledger=self.ledger,
                controls=self.controls,
                artifacts=artifacts,
                fees=self.catalog.fees,
                clock=self.clock,
                watch=self.billing_watch,
                work_orders=self.work_orders,
            ),
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
        )

    @cached_property
    def sweeper(self) -> Sweeper:
        from batchroute.services.catalog.lane_health import refresh_lane_heartbeats
        from batchroute.services.workflow.sweeper import Sweeper

        def refresh_heartbeats() -> LaneHealthReport:
            return refresh_lane_heartbeats(self.catalog, self.lane_states, self.provider_health, self.clock)

        return Sweeper(
            refresh_heartbeats=refresh_heartbeats,
            batches=self.batch_records,
            ledger=self.ledger,
            chat_holds=self.chat_holds,
            catalog=self.catalog,
            webhooks=self.webhook_delivery,
            clock=self.clock,
            stale_hold_seconds=self.settings.chat_hold_stale_seconds,
            topups=self.auto_topup,
            retention=self.retention_gc,
            bucket_deliveries=self.bucket_delivery,
            billing_webhooks=self.billing_webhooks,
            watch=self.billing_watch,
            schedules=self.schedules,
            file_checks=self.file_check_resender,
        )

    @cached_property
    def file_check_resender(self) -> FileCheckResender:
        from batchroute.services.batches.files import FileCheckResender

        return FileCheckResender(self.files, self.file_store)

    @cached_property
    def retention_gc(self) -> RetentionCollector:
        from batchroute.services.workflow.retention_gc import RetentionCollector

        return RetentionCollector(
            index=self.batch_records,
            settings=self.controls,
            objects=self.artifacts,
            clock=self.clock,
            grace=timedelta(hours=self.settings.retention_grace_hours),
            max_batches=self.settings.retention_sweep_batches,
        )

    @cached_property
    def payments_reconciliation(self) -> ScheduledReconciliation:
        """The daily payments reconciliation (docs/payments.md, "Reconciliation")."""
        from batchroute.services.billing.reconciliation import (
            PaymentsReconciliation,
            ScheduledReconciliation,
        )

        return ScheduledReconciliation(
            PaymentsReconciliation(self.ledger, self.payment_processor, self.clock), self.clock
        )


_lock = threading.Lock()
_wirings: dict[tuple[int, int], Wiring] = {}
_system_clock = SystemClock()


def wiring_for(settings: Settings | None = None, clock: Clock | None = None) -> Wiring:
    """The process's Wiring of these settings and clock (the current settings and the system
    clock by default), built on first use."""
    settings = settings or get_settings()
    clock = clock or _system_clock
    key = (id(settings), id(clock))
    with _lock:
        found = _wirings.get(key)
        if found is None or found.settings is not settings or found.clock is not clock:
            if len(_wirings) >= _MAX_WIRINGS:
                _wirings.clear()
            found = _wirings[key] = Wiring(settings, clock)
        return found


def workflow_steps(names: Iterable[str]) -> Mapping[str, Step]:
    """The named workflow steps, resolved at each call against the current settings, so a
    handler module reads no settings at import (tests change them between runs)."""

    def step(name: str) -> Step:
        def run(task: WorkflowTask) -> StepOutput | None:
            method: Step = getattr(wiring_for().workflow, name)
            return method(task)

        return run

    return {name: step(name) for name in names}


# -- Lambda handlers: each function's module is one line that names its handler here -------
def workflow_handler(*steps: str) -> LambdaHandler:
    """An SQS worker running the named workflow steps (router, settle, webhook)."""
    from batchroute.worker import workflow_task_handler

    return workflow_task_handler(workflow_steps(steps))


def sweeper_handler() -> LambdaHandler:
    """The scheduled sweeper (EventBridge)."""
    from batchroute.observability import lambda_logging, metrics, tracer

    @lambda_logging()
    @metrics.log_metrics
    @tracer.capture_lambda_handler(capture_response=False)
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        fire = event.get("schedule_fire")
        if isinstance(fire, dict):  # an EventBridge Scheduler schedule (docs/schedules.md)
            from batchroute.adapters.event_scheduler import fire_request

            org_id, schedule_id, fire_at = fire_request(fire)
            return wiring_for().schedules.fire(org_id, schedule_id, fire_at)
        if all(event.get(k) == v for k, v in RECONCILIATION_EVENT.items()):  # docs/payments.md
            return wiring_for().payments_reconciliation.run()
        return wiring_for().sweeper.sweep()

    return handler
