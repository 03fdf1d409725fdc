"""What other contexts need from billing, declared once: the org's billing controls, the
money watch that runs alerts and auto top-up after money moves, the balance and the alert
notifier. The billing services and the stores satisfy them; the wiring passes them in."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from batchroute.domain.billing.alerts import Alert, BillingEvent
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.billing.ledger import (
    LedgerSnapshot,
    Reservation,
    ReservationTerms,
    SettlementResult,
    WalletState,
)
from batchroute.domain.billing.retention import RetentionSettings
from batchroute.domain.billing.spending_limit import LimitGuard
from batchroute.domain.billing.usage import ReservationCharge
from batchroute.money import Money
from batchroute.transactions import TransactItem


class RetentionLookup(Protocol):
    """adapters/dynamo/controls.py:ControlsStore: the org's retention settings, if any."""

    def retention(self, org_id: str) -> RetentionSettings | None: ...


class ControlsReader(Protocol):
    """adapters/dynamo/controls.py:ControlsStore: the org's billing controls, if any."""

    def billing_controls(self, org_id: str) -> BillingControls | None: ...


class MoneyWatch(Protocol):
    """services/billing/watch.py:BillingWatch: billing alerts and auto top-up after money
    moved (a reservation, a charge, a settlement); never raises. `controls` saves a read
    when the caller already holds them."""

    def moved(self, org_id: str, *, at: datetime, controls: BillingControls | None = None) -> None: ...


class Balances(Protocol):
    """adapters/dynamo/ledger.py:LedgerStore: the org's spendable balance."""

    def balance(self, org_id: str) -> Money: ...


class Notifier(Protocol):
    """The billing watch's `notify` (docs/billing-alerts.md): an event once per `once_key`,
    sent on the org's alert channels."""

    def notify(self, org_id: str, alert: Alert, *, at: datetime) -> BillingEvent | None: ...


class WalletReader(Protocol):
    """adapters/dynamo/ledger.py:LedgerStore, read only: the org's wallet and its spend in a
    period (the spending limit's)."""

    def state(self, org_id: str) -> WalletState: ...

    def period_spend(self, org_id: str, period_key: str) -> Money: ...


class LimitChecks(Protocol):
    """adapters/dynamo/limit_checks.py:SpendingLimitChecks: the spending-limit conditions of a
    reserving transaction."""

    def items(self, org_id: str, guard: LimitGuard) -> list[TransactItem]: ...

    @staticmethod
    def moved(codes: list[str], offset: int) -> bool: ...


class LedgerBook(WalletReader, Protocol):
    """adapters/dynamo/ledger.py:LedgerStore: the org's wallet: reservations and settlements."""

    def reserve_items(
        self, org_id: str, terms: ReservationTerms, *, at: str, reserved_at_most: int | None = None
    ) -> list[TransactItem]: ...

    def reserve(
        self, org_id: str, terms: ReservationTerms, *, at: str, code: str | None = None
    ) -> Reservation: ...

    def reserve_guarded(self, reservation: list[TransactItem], limit_checks: list[TransactItem]) -> None: ...

    def settle(
        self, org_id: str, settled: ReservationCharge, *, extra_items: Iterable[TransactItem] = ...
    ) -> SettlementResult: ...

    def reservation(self, org_id: str, reservation_id: str) -> Reservation | None: ...

    def snapshot(self, org_id: str) -> LedgerSnapshot: ...
