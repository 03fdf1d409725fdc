"""Where payment notices go (`Notifier`: the billing watch, services/billing/watch.py, which
records the event once per key and sends it on the org's channels): found lazily for the auto
top-up, because the watch also lists it among its balance listeners (docs/payments.md); and
sent quietly, because a notice that fails must not undo the money it reports."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from batchroute.domain.billing.alerts import Alert, BillingEvent
from batchroute.observability import logger
from batchroute.services.billing.ports import Notifier


@dataclass(eq=False)
class DeferredNotifier:
    """A notifier found at the first notice, not when the auto top-up is built: the billing
    watch both listens to the auto top-up and notifies for it, so neither can be built first."""

    resolve: Callable[[], Notifier]

    def notify(self, org_id: str, alert: Alert, *, at: datetime) -> BillingEvent | None:
        return self.resolve().notify(org_id, alert, at=at)


def notify_quietly(notifier: Notifier, org_id: str, alert: Alert, *, at: datetime) -> None:
    """Send a notice about money already moved; a failure is logged, never raised."""
    try:
        notifier.notify(org_id, alert, at=at)
    except Exception:
        logger.exception(
            "billing notification failed", extra={"org_id": org_id, "event_type": alert.event_type}
        )
