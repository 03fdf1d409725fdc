"""The overage hold of a deadline rescue under `allow_overage` (docs/batches.md, "Deadline
rescue"; docs/ledger.md, "The overage hold of a rescue").

When a rescue costs more than the batch's reservation has room for, what it needs beyond is
held on the wallet apart, BEFORE the items move: a second reservation (purpose
`rescue_overage`, id `overage_hold_id(<batch reservation>, <lane key>)`), sized by the
decision, never above what `room` allows (the batch's cap less what it holds already, the
wallet's available credit, the hard spending limit's room). It is taken with the checks
batch create's own hold uses (`Funding.check_funding`, then ONE transaction: the wallet's
conditional update bounded by the limit guard, the reservation, its ledger entry, the
batch's record of the hold, the limit's ConditionChecks and its work order's count of it),
so a wallet or a limit that moved since the reads refuses it. A refused hold leaves the
rescue to what the reservation covers (`within_reservation`); nothing is ever overdrawn.
Settle resolves the hold with the batch's reservation (services/workflow/settlement.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from batchroute.clock import Clock
from batchroute.domain.batches.record import BatchRecord, FundingMoved, OverageHold, OverageRefused
from batchroute.domain.billing.ledger import DuplicateReservation, ReservationTerms
from batchroute.domain.routing.rescue import RescueSetting, overage_hold_id, overage_room
from batchroute.errors import ServiceError
from batchroute.money import Money
from batchroute.observability import logger
from batchroute.services.batches.ports import BatchReader
from batchroute.services.billing.funding import Funding, Funds
from batchroute.transactions import TransactItem

# A hold refused because the wallet or the limit moved since the reads is decided again
# on fresh reads this many times, then the rescue keeps to the reservation.
_ATTEMPTS = 3


class OverageRecords(BatchReader, Protocol):
    """adapters/dynamo/batch_records.py:BatchRecords: the batch, and the hold's transaction."""

    def hold_overage(self, hold: OverageHold) -> None: ...


class OverageMembership(Protocol):
    """services/work_orders/service.py:WorkOrderService: the work order counts the hold."""

    def overage_items(self, batch: BatchRecord, amount_micros: int) -> list[TransactItem]: ...


def overage_held(batch: BatchRecord) -> Money:
    """What the batch holds for rescue overages already (its record of the holds)."""
    return Money(batch.overage_held_micros or 0)


@dataclass(eq=False, kw_only=True)
class RescueOverage:
    records: OverageRecords
    funds: Funds
    clock: Clock
    # required, so that no wiring holds a member's overage without its work order counting it
    work_orders: OverageMembership

    def fresh(self, batch: BatchRecord) -> BatchRecord:
        """The batch as it stands (its overage holds: another lane's rescue may have taken one)."""
        return self.records.get(batch.batch_id) or batch

    def room(self, batch: BatchRecord, setting: RescueSetting) -> Money:
        """What a new overage hold of `batch` may take now (`overage_room`); 0 unless allow_overage."""
        if setting.mode != "allow_overage":
            return Money(0)
        controls = self.funds.controls_of(batch.org_id)
        wallet = self.funds.ledger.state(batch.org_id)
        limit_room = Funding(self.funds.ledger).limit_room(
            batch.org_id, controls, wallet, now=self.clock.now()
        )
        return overage_room(
            cap=setting.max_overage,
            held=overage_held(batch),
            available=wallet.available,
            limit_room=limit_room,
        )

    def hold(self, batch: BatchRecord, lane_key: str, amount: Money, setting: RescueSetting) -> bool:
        """Take the overage hold of the rescue of `lane_key`; False when it cannot be taken
        (the wallet short, the hard limit reached, the batch's cap or state, a hold of this
        rescue already there): then the rescue keeps to the reservation."""
        if amount.micros <= 0 or setting.mode != "allow_overage" or not batch.reservation_id:
            return False
        hold_id = overage_hold_id(batch.reservation_id, lane_key)
        for _ in range(_ATTEMPTS):
            try:
                self._hold_once(batch, hold_id, amount, setting.max_overage)
            except FundingMoved:
                continue
            except (ServiceError, DuplicateReservation, OverageRefused) as exc:
                logger.warning("rescue overage hold refused", extra={"hold_id": hold_id, "why": str(exc)})
                return False
            self.funds.moved(batch.org_id, at=self.clock.now())  # in-flight credit, as any hold
            return True
        logger.warning("rescue overage hold kept colliding", extra={"hold_id": hold_id})
        return False

    def _hold_once(self, batch: BatchRecord, hold_id: str, amount: Money, cap: Money) -> None:
        """Batch create's check (`Funds.guarded`: the 402 it raises is a refusal here),
        then the hold in ONE transaction with its limit guard."""
        org_id = batch.org_id
        terms = ReservationTerms(
            reservation_id=hold_id, amount=amount, purpose="rescue_overage", ref=batch.batch_id
        )
        held = self.funds.guarded(terms, self.funds.controls_of(org_id), org_id=org_id, now=self.clock.now())
        self.records.hold_overage(
            OverageHold(
                batch_id=batch.batch_id,
                hold_id=hold_id,
                amount=amount,
                cap=cap,
                reservation=held.reservation,
                limit_checks=held.limit_checks,
                membership=self.work_orders.overage_items(batch, amount.micros),
            )
        )
