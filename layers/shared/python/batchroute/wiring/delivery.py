"""The delivery context: signed webhooks (batch events and billing alert events), delivery
targets and the push of artifacts to them."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING

from batchroute.wiring.accounts import AccountsWiring

if TYPE_CHECKING:
    from batchroute.adapters.dynamo.webhook_deliveries import WebhookDeliveries
    from batchroute.adapters.webhook_sender import WebhookSender
    from batchroute.domain.delivery.network import UrlGuard
    from batchroute.services.delivery.buckets import BucketDelivery
    from batchroute.services.delivery.targets import DeliveryTargets
    from batchroute.services.delivery.webhooks import WebhookDelivery


class DeliveryWiring(AccountsWiring):
    @cached_property
    def url_guard(self) -> UrlGuard:
        """Where outbound calls to customers' webhooks and buckets may go: the SSRF guard,
        loopback receivers only with ALLOW_LOOPBACK_WEBHOOKS outside production."""
        from batchroute.domain.delivery.network import UrlGuard

        settings = self.settings
        return UrlGuard(settings.allow_loopback_webhooks, settings.environment)

    def webhook_url_check(self) -> Callable[[str], object]:
        """The guard's check of one customer URL (tests of the API replace it: functions/api/deps.py)."""
        return self.url_guard.check

    @cached_property
    def webhook_sender(self) -> WebhookSender:
        from batchroute.adapters.webhook_sender import WebhookSender

        return WebhookSender(self.url_guard, now=self.clock.now)

    @cached_property
    def webhook_delivery(self) -> WebhookDelivery:
        from batchroute.services.delivery.webhooks import WebhookDelivery

        return WebhookDelivery(
            self.webhook_deliveries, self.identity, self.sealer, self.webhook_sender, self.clock
        )

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
    def delivery_targets(self) -> DeliveryTargets:
        """Loopback endpoints follow the webhooks' rule (ALLOW_LOOPBACK_WEBHOOKS, never in
        production): the same SSRF guard, the same local convenience."""
        from batchroute.adapters.customer_buckets import CustomerBuckets
        from batchroute.services.delivery.targets import DeliveryTargets

        buckets = CustomerBuckets(self.url_guard)
        return DeliveryTargets(
            self.delivery_target_store,
            self.sealer,
            buckets,
            check_url=self.webhook_url_check(),
            clock=self.clock,
            probe_buckets=buckets.for_probes(),
            own_endpoint=self.settings.aws_endpoint_url,
        )

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
