"""Where auto top-up notices go (`Notifier`: the billing watch, services/billing/watch.py, which
records the event once per key and sends it on the org's channels), found lazily because the
watch also lists the auto top-up among its balance listeners (docs/payments.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from batchroute.domain.billing.alerts import Alert, BillingEvent
from batchroute.services.billing.ports import Notifier


@dataclass(eq=False)
class DeferredNotifier:
    """A notifier found at the first notice, not when the auto top-up is built: the billing
    watch both listens to the auto top-up and notifies for it, so neither can be built first."""

    resolve: Callable[[], Notifier]

    def notify(self, org_id: str, alert: Alert, *, at: datetime) -> BillingEvent | None:
        return self.resolve().notify(org_id, alert, at=at)
