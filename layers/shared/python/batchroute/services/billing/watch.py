"""The billing watch: called after every money movement (reservation, settlement, chat charge,
grant, purchase or top-up credit), it raises the alerts that are due and tells the balance
listeners (auto top-up) where the wallet stands (docs/billing-alerts.md).

`moved(org_id, at=)` reads the controls, the wallet and (when a rule needs it) the alert
period's charged spend, then:
1. records `billing.limit_reached` and `billing.threshold_crossed` events that hold
   (`domain/billing/alerts.py:due_alerts`), each once per debounce key;
2. steps the low-balance alert: fire once per episode, re-arm at 110% of the level;
3. calls every listener's `balance_moved(org_id, wallet, at=)`.
It never raises into the money path: a failure is logged, and the next movement looks again
(the rules read state, not deltas, so nothing is lost but time).

`notify(org_id, alert, at=)` is the general entry (auto top-up events use it too): records
the alert's event once per its `once_key`, then hands the recorded `BillingEvent` to the
channels (email, signed webhook; `services/billing/alerts.py`) per the org's controls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from batchroute.domain.billing.alerts import (
    Alert,
    BillingEvent,
    alert_period,
    due_alerts,
    low_balance_alert,
    low_balance_step,
    needs_spend,
)
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.billing.ledger import WalletState
from batchroute.money import Money
from batchroute.observability import logger
from batchroute.services.billing.alerts import AlertChannel
from batchroute.services.billing.ports import ControlsReader, WalletReader


class BalanceListener(Protocol):
    def balance_moved(self, org_id: str, wallet: WalletState, *, at: datetime) -> None: ...


class LowBalance(Protocol):
    @property
    def episode(self) -> int: ...

    @property
    def fired(self) -> bool: ...  # this episode's alert went out


class AlertRecords(Protocol):
    """adapters/dynamo/billing_events.py:BillingEvents"""

    def record_once(self, org_id: str, alert: Alert, *, at: datetime) -> BillingEvent | None: ...

    def low_balance_state(self, org_id: str) -> LowBalance: ...

    def mark_low_balance_fired(self, org_id: str, *, episode: int, at: datetime) -> bool: ...

    def rearm_low_balance(self, org_id: str, *, episode: int, at: datetime) -> bool: ...


@dataclass(eq=False, kw_only=True)
class BillingWatch:
    controls: ControlsReader
    ledger: WalletReader
    records: AlertRecords
    channels: Sequence[AlertChannel] = ()
    listeners: Sequence[BalanceListener] = ()

    def __post_init__(self) -> None:
        self.channels = tuple(self.channels)
        self.listeners = tuple(self.listeners)

    # -- after a movement ----------------------------------------------------------------
    def moved(self, org_id: str, *, at: datetime, controls: BillingControls | None = None) -> None:
        """Evaluate the org's alerts and tell the listeners; never raises. `controls` spares
        a read when the caller already holds them."""
        try:
            wallet = self.ledger.state(org_id)
        except Exception:
            logger.exception("billing watch could not read the wallet", extra={"org_id": org_id})
            return
        try:
            self._alerts(org_id, wallet, controls, at)
        except Exception:
            logger.exception("billing alerts were not evaluated", extra={"org_id": org_id})
        for listener in self.listeners:
            try:
                listener.balance_moved(org_id, wallet, at=at)
            except Exception:
                logger.exception(
                    "balance listener failed", extra={"org_id": org_id, "listener": type(listener).__name__}
                )

    def _alerts(
        self, org_id: str, wallet: WalletState, controls: BillingControls | None, at: datetime
    ) -> None:
        controls = controls or self.controls.billing_controls(org_id)
        if controls is None:
            return  # never saved: no limit, no thresholds, no low-balance level
        if needs_spend(controls) or controls.alert_thresholds:
            period = alert_period(controls, at)
            reads_spend = needs_spend(controls)
            spent = self.ledger.period_spend(org_id, period.key) if reads_spend else Money.zero()
            alerts = due_alerts(controls, wallet=wallet, spent=spent, period=period)
            if alerts and not reads_spend:
                # a balance_below alert holds, and its event says the period's spend: read it now
                spent = self.ledger.period_spend(org_id, period.key)
                alerts = due_alerts(controls, wallet=wallet, spent=spent, period=period)
            for alert in alerts:
                self.notify(org_id, alert, at=at, controls=controls)
        self._low_balance(org_id, wallet, controls, at)

    def _low_balance(self, org_id: str, wallet: WalletState, controls: BillingControls, at: datetime) -> None:
        level = controls.low_balance_amount
        if level is None:
            return
        state = self.records.low_balance_state(org_id)
        step = low_balance_step(level, wallet.balance, fired=state.fired)
        if step == "fire":
            alert = low_balance_alert(level, wallet, episode=state.episode)
            # Concurrent movers may both get here: the once key lets one event through. The
            # episode is marked fired only once its event is on record (recorded now, or
            # before: debounced); a failure to record raises, so the next movement retries.
            self._record_and_send(org_id, alert, at, controls)
            self.records.mark_low_balance_fired(org_id, episode=state.episode, at=at)
        elif step == "rearm":
            self.records.rearm_low_balance(org_id, episode=state.episode, at=at)

    # -- the general entry ---------------------------------------------------------------
    def notify(
        self, org_id: str, alert: Alert, *, at: datetime, controls: BillingControls | None = None
    ) -> BillingEvent | None:
        """Record the event once per `once_key` and send it on the org's channels; the event,
        or None when it was recorded before (or could not be recorded: logged)."""
        try:
            return self._record_and_send(org_id, alert, at, controls)
        except Exception:
            logger.exception(
                "billing event not recorded", extra={"org_id": org_id, "event_type": alert.event_type}
            )
            return None

    def _record_and_send(
        self, org_id: str, alert: Alert, at: datetime, controls: BillingControls | None
    ) -> BillingEvent | None:
        """`notify`, except that a failure to record the event raises."""
        event_type = alert.event_type
        event = self.records.record_once(org_id, alert, at=at)
        if event is None:
            return None
        logger.info("billing event recorded", extra={"org_id": org_id, "event_type": event_type})
        try:
            controls = controls or self.controls.billing_controls(org_id) or BillingControls(org_id=org_id)
        except Exception:
            logger.exception("billing controls unreadable; alert not sent", extra={"org_id": org_id})
            return event
        for channel in self.channels:
            try:
                channel.send(event, controls)
            except Exception:  # the event is recorded; a channel that fails does not undo it
                logger.warning(
                    "billing alert channel failed",
                    extra={"org_id": org_id, "channel": type(channel).__name__, "event_type": event_type},
                    exc_info=True,
                )
        return event
