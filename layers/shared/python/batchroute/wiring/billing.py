"""The billing context: controls, retention, usage, the billing watch and its alerts,
payments, auto top-up and reconciliation (docs/billing-alerts.md, docs/payments.md)."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING

from batchroute.wiring.delivery import DeliveryWiring

if TYPE_CHECKING:
    from batchroute.adapters.stripe_payments import StripePayments
    from batchroute.services.billing.auto_topup import AutoTopupService
    from batchroute.services.billing.controls import BillingControlsService
    from batchroute.services.billing.events import BillingEventLog
    from batchroute.services.billing.funding import Funds
    from batchroute.services.billing.payments import CreditPurchases
    from batchroute.services.billing.ports import Notifier
    from batchroute.services.billing.reconciliation import ScheduledReconciliation
    from batchroute.services.billing.retention import RetentionService
    from batchroute.services.billing.reversals import PaymentReversals
    from batchroute.services.billing.usage import UsageService
    from batchroute.services.billing.watch import BalanceListener, BillingWatch


class BillingWiring(DeliveryWiring):
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

        return UsageService(
            ledger=self.ledger, controls=self.controls, clock=self.clock, references=self.references
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

    @cached_property
    def payment_processor(self) -> StripePayments:
        from batchroute.adapters.stripe_payments import StripePayments

        return StripePayments.from_settings(self.settings)

    @cached_property
    def funds(self) -> Funds:
        """How the services that hold and charge credit reach the wallet (batch create, a
        rescue's overage, a regression run, settlement), the billing watch told after."""
        from batchroute.services.billing.funding import Funds

        return Funds(self.ledger, self.controls, self.limit_checks, watch=self.billing_watch)

    @cached_property
    def billing_notifier(self) -> Notifier:
        """Where auto top-up and reversal notices go: the billing watch (event, email, signed
        webhook), reached at the first notice (the watch's listeners include the auto top-up)."""
        from batchroute.services.billing.payment_notices import DeferredNotifier

        return DeferredNotifier(lambda: self.billing_watch)

    def balance_moved(self, org_id: str, at: datetime) -> None:
        """Called after a processor credit: alerts re-arm, listeners hear it."""
        self.billing_watch.moved(org_id, at=at)

    @cached_property
    def auto_topup(self) -> AutoTopupService:
        from batchroute.services.billing.auto_topup import AutoTopupService

        return AutoTopupService(
            store=self.payments_store,
            ledger=self.ledger,
            processor=self.payment_processor,
            notifier=self.billing_notifier,
            on_moved=self.balance_moved,
            clock=self.clock,
            charge_inline=self.settings.auto_topup_charge_inline,
            stuck_after=timedelta(seconds=self.settings.auto_topup_stuck_seconds),
        )

    @cached_property
    def payment_reversals(self) -> PaymentReversals:
        """Refunds and disputes of credited payments (docs/payments.md)."""
        from batchroute.services.billing.reversals import PaymentReversals

        return PaymentReversals(
            processor=self.payment_processor,
            checkouts=self.payments_store,
            ledger=self.ledger,
            topups=self.auto_topup,
            notifier=self.billing_notifier,
            on_moved=self.balance_moved,
            clock=self.clock,
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
            reversals=self.payment_reversals,
            on_moved=self.balance_moved,
            clock=self.clock,
            public_base_url=self.settings.public_base_url,
            # outside local mode a paid session is confirmed with the processor itself
            confirm_with_processor=self.settings.confirms_payments_with_processor,
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
