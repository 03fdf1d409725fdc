"""`GET /v1/usage`: the wallet now, and what the current and previous period cost.

Three reads, none of them over ledger entries: the billing controls (which period, which
zone), the wallet (balance, reserved, available) and ONE range of usage counters covering
both periods (`LedgerStore.usage_between`). The counters are written with each charge
(docs/usage.md), so the cost of this read grows with days x models used, never with the
number of ledger entries. The arithmetic is `domain/billing/usage.py`.
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass
from typing import Protocol, cast

from batchroute.clock import Clock
from batchroute.domain.accounts.access import Principal, authorize
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.billing.savings import References
from batchroute.domain.billing.usage import (
    USAGE_PERIODS,
    UsageCounter,
    UsagePeriod,
    UsageReport,
    period_window,
    summarize,
)
from batchroute.errors import InvalidRequest
from batchroute.services.billing.ports import ControlsReader, WalletReader


class UsageLedger(WalletReader, Protocol):
    def usage_between(self, org_id: str, first_day: str, last_day: str) -> list[UsageCounter]: ...


def default_period(controls: BillingControls) -> UsagePeriod:
    """The spending limit's period while a limit is on; monthly otherwise."""
    if controls.limit_enabled and controls.limit_period is not None:
        return controls.limit_period
    return "monthly"


@dataclass(eq=False, kw_only=True)
class UsageService:
    ledger: UsageLedger
    controls: ControlsReader
    clock: Clock
    references: References  # what routing saved: each counter beside its reference prices

    def report(self, principal: Principal, *, period: str | None = None) -> UsageReport:
        authorize(principal, "billing:read")
        if period is not None and period not in USAGE_PERIODS:
            raise InvalidRequest(
                "period must be daily or monthly.",
                code="invalid_request",
                details={"field": "period", "allowed": list(USAGE_PERIODS)},
            )
        org_id = principal.org_id
        controls = self.controls.billing_controls(org_id) or BillingControls(org_id=org_id)
        kind = cast(UsagePeriod, period) if period is not None else default_period(controls)
        zone = controls.limit_timezone or "UTC"
        now = self.clock.now()
        current = period_window(kind, now, zone)
        previous = current.previous()
        counters = self.ledger.usage_between(org_id, previous.start.isoformat(), current.end.isoformat())
        counters = [counter.with_savings(self.references) for counter in counters]
        today = now.astimezone(zoneinfo.ZoneInfo(zone)).date()
        wallet = self.ledger.state(org_id)
        return UsageReport(
            org_id=org_id,
            balance=wallet.balance,
            reserved=wallet.reserved,
            current=summarize(counters, current, today=today),
            previous=summarize(counters, previous, today=today),
            generated_at=now,
            period=kind,
            reference_prices_as_of=self.references.prices_as_of,
        )
