"""Where a recorded billing alert event goes besides the event list: the org owner's email
(when `alert_email_enabled`) and the org's delivery webhook (when `alert_webhook_enabled`),
signed and retried exactly as batch webhooks are (docs/billing-alerts.md).

Each channel is told about an event once, right after it was recorded; a channel that fails
is logged and never undoes the event or stops the others.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from batchroute.domain.billing.alerts import (
    AUTO_TOPUP_FAILED,
    AUTO_TOPUP_SUCCEEDED,
    LIMIT_REACHED,
    LOW_BALANCE,
    THRESHOLD_CROSSED,
    AlertData,
    BillingEvent,
)
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.delivery.webhooks import WebhookDeliveryRecord
from batchroute.money import money_text
from batchroute.observability import logger
from batchroute.services.delivery.ports import Mailer

FOOTER = "\n\nManage your alerts and spending limit in your billing settings."


Recipients = Callable[[str], list[str]]


class OrgWebhooks(Protocol):
    """services/delivery/webhooks.py:WebhookDelivery over the org-keyed store."""

    def deliver_org_event(
        self, org_id: str, *, event_id: str, event_type: str, created_at: str, raw_body: str
    ) -> WebhookDeliveryRecord | None: ...


class AlertChannel(Protocol):
    def send(self, event: BillingEvent, controls: BillingControls) -> None: ...


@dataclass(eq=False)
class EmailAlerts:
    """The org owner's address gets a short message per event when `alert_email_enabled`."""

    mailer: Mailer
    recipients: Recipients

    def send(self, event: BillingEvent, controls: BillingControls) -> None:
        if not controls.alert_email_enabled:
            return
        subject, text = email_text(event)
        for to in self.recipients(event.org_id):
            self.mailer.send(to, subject, text + FOOTER)


@dataclass(eq=False)
class WebhookAlerts:
    """The event's public view, as the raw body of a signed delivery to the org's delivery
    webhook, when `alert_webhook_enabled` (no webhook configured: nothing to send)."""

    webhooks: OrgWebhooks

    def send(self, event: BillingEvent, controls: BillingControls) -> None:
        if not controls.alert_webhook_enabled:
            return
        raw_body = json.dumps(event.to_api(), separators=(",", ":"), ensure_ascii=False)
        delivery = self.webhooks.deliver_org_event(
            event.org_id,
            event_id=event.event_id,
            event_type=event.type,
            created_at=event.created_at,
            raw_body=raw_body,
        )
        if delivery is None:
            logger.info(
                "billing alert webhook wanted but no delivery webhook is set",
                extra={"org_id": event.org_id},
            )


def owner_emails(identity: Any) -> Recipients:
    """The org owner's address (`adapters/dynamo/identity.py:IdentityStore`)."""

    def lookup(org_id: str) -> list[str]:
        org = identity.get_org(org_id)
        owner = identity.get_user(org.owner_user_id) if org is not None else None
        return [owner.email] if owner is not None and owner.email else []

    return lookup


def email_text(event: BillingEvent) -> tuple[str, str]:
    """(subject, body) of the alert email of an event."""
    kind, d = event.type, event.details
    if kind == LIMIT_REACHED:
        blocked = " New batches are refused until the period ends." if _hard_limit_spent(d) else ""
        return "Spending limit reached", (
            f"Your {d.get('period')} spending limit of {_amount(d.get('limit'))} has been reached: "
            f"{_amount(d.get('spent'))} charged this period and "
            f"{_amount(d.get('in_flight', '0.00'))} in flight.{blocked}\n\n"
            "Completed results are not affected."
        )
    if kind == THRESHOLD_CROSSED:
        threshold = d.get("threshold")
        value, observed, period = (
            threshold.get("value") if threshold else None,
            d.get("observed"),
            d.get("period"),
        )
        what = {
            "balance_below": f"your balance ({_amount(observed)}) is below {_amount(value)}",
            "spend_above": f"your {period} spend ({_amount(observed)}) is above {_amount(value)}",
            "pct_of_limit": (
                f"your {period} spend reached {observed}% of your limit of {_amount(d.get('limit'))} "
                f"(alert at {value}%)"
            ),
        }.get(str(threshold.get("type") if threshold else None), "an alert threshold was crossed")
        return "Billing alert threshold crossed", f"A billing alert fired: {what}."
    if kind == LOW_BALANCE:
        return "Low credit balance", (
            f"Your credit balance is {_amount(d.get('balance'))}, below your low-balance level of "
            f"{_amount(d.get('level'))}. "
            "Add credits to keep batches and chat requests running. This alert fires again only after "
            f"the balance has been back at {_amount(d.get('rearm_at'))} or more."
        )
    if kind == AUTO_TOPUP_SUCCEEDED:
        return (
            "Auto top-up succeeded",
            f"Your wallet was topped up automatically: {_amount(d.get('amount'))}.",
        )
    if kind == AUTO_TOPUP_FAILED:
        reason = str(d.get("failure_reason") or d.get("reason") or "the payment was declined").rstrip(".")
        return "Auto top-up failed", (
            f"An automatic top-up of {_amount(d.get('amount'))} failed: {reason}. "
            "Check the saved payment method in your billing settings."
        )
    message = d.get("message")  # a refund or dispute of a payment says what it did
    if isinstance(message, str) and message:
        return "Billing alert", message
    return "Billing alert", f"A billing event occurred: {kind}."


def _amount(value: object) -> str:
    """An event's amount as a person reads it (`5.00 USD`): a Money object, or a plain amount."""
    if isinstance(value, dict):
        return money_text(Decimal(str(value.get("amount", "0"))), str(value.get("currency") or "usd"))
    return money_text(Decimal(str(value or "0")))


def _hard_limit_spent(details: AlertData) -> bool:
    """A hard limit that charged spend itself reached (not spend plus in-flight estimates,
    which settle lower and give room back): nothing more is accepted this period."""
    spent, limit = details.get("spent"), details.get("limit")
    if details.get("mode") != "hard" or spent is None or limit is None:
        return False
    return Decimal(spent) >= Decimal(limit)
