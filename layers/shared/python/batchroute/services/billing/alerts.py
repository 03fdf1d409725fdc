"""`billing.limit_reached` after a settlement (interface spec, "Billing alert events").

After a batch settles, if the org's billing controls have a spending limit and the
period's charged spend (the ledger's `SPEND#` counter of the controls' period, in their
zone) has reached it, the event is recorded once per period (`BillingEvents.record_once`)
and, when `alert_email_enabled`, the org owner is emailed. The limit only blocks the NEXT
submit (hard mode, `services/billing/funding.py`); completed results are never clawed back.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from batchroute.domain.billing_controls import BillingControls
from batchroute.domain.ledger import period_keys
from batchroute.money import Money, format_amount
from batchroute.observability import logger
from batchroute.services.billing.funding import FundingDecision

LIMIT_REACHED = "billing.limit_reached"


class SpendReader(Protocol):
    def period_spend(self, org_id: str, period_key: str) -> Money: ...


class EventRecorder(Protocol):
    def record_once(
        self,
        org_id: str,
        *,
        kind: str,
        period_key: str,
        event_type: str,
        details: dict[str, Any],
        at: datetime,
    ) -> dict[str, Any] | None: ...


class Mailer(Protocol):
    def send(self, to: str, subject: str, text: str) -> None: ...


Recipients = Callable[[str], list[str]]


class BillingAlerts:
    def __init__(
        self,
        *,
        events: EventRecorder,
        spend: SpendReader,
        mailer: Mailer | None = None,
        recipients: Recipients | None = None,
    ) -> None:
        self.events = events
        self.spend = spend
        self.mailer = mailer
        self.recipients = recipients

    def after_settlement(
        self, org_id: str, controls: BillingControls, *, at: datetime
    ) -> dict[str, Any] | None:
        """Emit `billing.limit_reached` if the period's spend reached the limit (once per
        period); returns the event when one was recorded now."""
        if not controls.limit_enabled or controls.limit_amount is None or controls.limit_period is None:
            return None
        period_key = period_keys(at, controls.limit_timezone)[controls.limit_period]
        spent = self.spend.period_spend(org_id, period_key)
        if spent < controls.limit_amount:
            return None
        return self._reached(org_id, controls, _limit_details(controls, period_key, spent), at=at)

    def at_submit(
        self, org_id: str, controls: BillingControls, decision: FundingDecision, *, at: datetime
    ) -> dict[str, Any] | None:
        """Emit `billing.limit_reached` when an accepted submit brings the period to its limit
        (soft mode never blocks, so this is how a soft limit is reported); once per period."""
        if controls.limit_amount is None or controls.limit_period is None or decision.period_key is None:
            return None
        details = _limit_details(controls, decision.period_key, decision.spent or Money.zero())
        details["projected"] = format_amount((decision.projected or decision.required).amount)
        return self._reached(org_id, controls, details, at=at)

    def _reached(
        self, org_id: str, controls: BillingControls, details: dict[str, Any], *, at: datetime
    ) -> dict[str, Any] | None:
        """Record the event once per period; email the owner when that is wanted."""
        event = self.events.record_once(
            org_id,
            kind="limit_reached",
            period_key=details["period_key"],
            event_type=LIMIT_REACHED,
            details=details,
            at=at,
        )
        if event is not None and controls.alert_email_enabled:
            self._email(org_id, details)
        return event

    def _email(self, org_id: str, details: dict[str, Any]) -> None:
        if self.mailer is None or self.recipients is None:
            return
        blocked = " New batches are refused until the period ends." if details["mode"] == "hard" else ""
        text = (
            f"Your {details['period']} spending limit of ${details['limit']} has been reached: "
            f"${details['spent']} charged this period.{blocked}\n\n"
            "Completed results are not affected. Change the limit in your billing settings."
        )
        try:
            for to in self.recipients(org_id):
                self.mailer.send(to, "Spending limit reached", text)
        except Exception:  # the event is recorded; an email that cannot go out is not retried
            logger.warning("limit alert email not sent", extra={"org_id": org_id}, exc_info=True)


def owner_emails(identity: Any) -> Recipients:
    """The org owner's address (`adapters/dynamo/identity.py:IdentityStore`)."""

    def lookup(org_id: str) -> list[str]:
        org = identity.get_org(org_id)
        owner = identity.get_user(org.owner_user_id) if org is not None else None
        return [owner.email] if owner is not None and owner.email else []

    return lookup


def _limit_details(controls: BillingControls, period_key: str, spent: Money) -> dict[str, Any]:
    assert controls.limit_amount is not None
    return {
        "limit": format_amount(controls.limit_amount.amount),
        "period": controls.limit_period,
        "period_key": period_key,
        "spent": format_amount(spent.amount),
        "mode": controls.limit_mode,
    }
