"""The workflow's Settle step: charge actual usage, release the rest, write the receipt.

The charge is computed from what Finalize counted per lane (`lane_tallies`: the usage of
COMPLETED rows only; failed, canceled and never-run items cost nothing) at each lane's
locked unit prices, priced with the fee schedule (`domain/billing/settlement.py`: a failover
successor counts for the control-plane fee as the planned lane it took over from). The ledger
settles the batch's reservation (and the overage holds its deadline rescues took under
`allow_overage`: docs/ledger.md) exactly once: a repeated Settle (or the failure path
settling after it) gets the stored outcome back (`replayed`) and writes the same receipt.
The receipt goes to `batches/<id>/receipt.json` and onto the batch (`billing`,
`settled_at`); a batch still finalizing becomes `completed`; a terminal one (failed,
canceled, expired) keeps its state. Then the billing watch looks at the wallet (alerts,
auto top-up; services/billing/watch.py). The charge moves the usage counters (per day,
model and provider: docs/usage.md) in its own transaction, so a replayed Settle never
counts twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.batches.artifact_keys import receipt_key
from batchroute.domain.batches.record import ArtifactKeys, BatchRecord
from batchroute.domain.batches.states import TERMINAL
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.billing.ledger import SettlementResult, UnknownReservation, combined, period_keys
from batchroute.domain.billing.savings import References
from batchroute.domain.billing.settlement import (
    BillingReceipt,
    InlineReceipt,
    ReceiptCredits,
    build_receipt,
    charged_usage,
    provider_lanes,
    rejected_lanes,
    rescued_lanes,
)
from batchroute.domain.billing.usage import (
    ReservationCharge,
    UsageCharge,
    batch_usage_lines,
    costs_only,
    usage_day,
)
from batchroute.domain.catalog.catalog import FeeSchedule
from batchroute.domain.catalog.pricing import FeeKind, price_usage
from batchroute.domain.chat.objects import CHAT_SOURCE
from batchroute.domain.routing.lane_plan import LaneRecord
from batchroute.domain.routing.rescue import overage_hold_id
from batchroute.errors import PermanentError
from batchroute.money import Money
from batchroute.services.batches.ports import BatchStore
from batchroute.services.billing.funding import Funds
from batchroute.services.workflow.ports import BatchFiles
from batchroute.workflow.tasks import SettleOutput

# Above this the batch keeps the receipt without its lane lists (receipt.json has them).
MAX_INLINE_RECEIPT_BYTES = 100_000


class SettlementFailed(PermanentError):
    pass


class WorkOrderMembers(Protocol):
    """services/work_orders/service.py:WorkOrders: counts a member's settlement once."""

    def member_settled(self, batch: BatchRecord, *, charged_micros: int) -> None: ...


def _parse(moment: str) -> datetime:
    return datetime.fromisoformat(moment.replace("Z", "+00:00"))


@dataclass(eq=False, kw_only=True)
class Settlement:
    records: BatchStore
    funds: Funds
    artifacts: BatchFiles
    fees: FeeSchedule
    clock: Clock
    # required, so that no wiring settles a member without its work order counting it
    work_orders: WorkOrderMembers
    references: References  # what routing saved, on the receipt

    def settle(self, batch: BatchRecord) -> SettleOutput:
        batch_id = batch.batch_id
        org_id = batch.org_id
        tallies: Mapping[str, Mapping[str, int]] = batch.lane_tallies or {}
        lanes = self.records.lanes(batch_id)
        usage = charged_usage(lanes, tallies)
        fee_kind: FeeKind = "workflow" if batch.fee_kind == "workflow" else "batch"
        fees = batch.fees or self.fees  # the schedule its price was locked with
        breakdown = price_usage(usage, fees, fee_kind=fee_kind)
        controls = self.funds.controls_of(org_id) or BillingControls(org_id=org_id)
        now = self.clock.now()
        zone = controls.limit_timezone or "UTC"
        usage_charge = UsageCharge(
            day=usage_day(now, zone),
            lines=batch_usage_lines(lanes, tallies, chat=batch.source == CHAT_SOURCE),
        )
        charged = self._charge(batch, org_id, breakdown.total, controls, now, usage_charge)
        result = charged.result if charged is not None else None
        credits = ReceiptCredits.of(result) if result is not None else ReceiptCredits.nothing(isoformat(now))
        absorbed = result.absorbed if result is not None else Money.zero()
        plan = batch.plan
        ran = provider_lanes(lanes, tallies, plan)
        receipt = build_receipt(
            batch_id=batch_id,
            breakdown_api=breakdown.to_api(),
            credits=credits,
            absorbed=absorbed,
            counts=batch.counts or {},
            lanes=ran,
            rejected=rejected_lanes(plan, {lane["lane_id"] for lane in ran}),
            fee_basis=breakdown.fee_basis(fees),
            rescues=rescued_lanes(lanes, tallies, charged.overage_by_lane(batch, lanes) if charged else None),
            references=self.references,
        )
        key = receipt_key(batch_id)
        self.artifacts.write_json(key, receipt)
        billing = _inline_billing(receipt, key)
        settled_at = credits.settled_at
        work_order = self.records.update_seeing_work_order(
            batch_id,
            {
                "billing": billing,
                "settled_at": settled_at,
                "artifacts": replace(batch.artifacts or ArtifactKeys(), receipt_key=key).to_mapping(),
            },
        )
        if batch.state not in TERMINAL:
            at = isoformat(now)
            self.records.transition(batch_id, "completed", at=at, extra={"completed_at": at})
        if work_order is not None:
            self._count_in_work_order(batch_id, result)
        if result is not None and org_id:
            self.funds.moved(org_id, at=_parse(settled_at), controls=controls)
        return {
            "step": "settle",
            "batch_id": batch_id,
            "charged": credits.charged.to_api(),
            "released": credits.released.to_api(),
            "replayed": bool(result.replayed) if result is not None else False,
        }

    def _count_in_work_order(self, batch_id: str, result: SettlementResult | None) -> None:
        """The work order's counters move once per member (docs/work-orders.md). Called only for
        a member: the write of `settled_at` answered the batch's `work_order` as it stood then
        (an attach racing this Settle either landed before, and is seen, or is refused by its
        `settled_at` condition), so a batch in no work order costs no read here. The member is
        read again for its state and counts after the transition above."""
        settled = self.records.get(batch_id)
        if settled is None or settled.work_order_id is None:
            return
        charged = result.charged.micros if result is not None else 0
        self.work_orders.member_settled(settled, charged_micros=charged)

    def _charge(
        self,
        batch: BatchRecord,
        org_id: str,
        total: Money,
        controls: BillingControls,
        now: datetime,
        usage: UsageCharge,
    ) -> _Charged | None:
        """Settle the batch's reservation, then the overage holds of its rescues in the order
        they were taken (None for a batch without a reservation: nothing to charge). Each
        but the last is charged at most its amount, the last the rest (the absorb policy:
        capped at it); each is resolved exactly once by its own pending condition, so a
        repeated Settle replays them all and one that stopped half way resolves the rest."""
        reservation_id = batch.reservation_id
        if not reservation_id:
            return None
        holds = list(batch.overage_hold_ids or ())
        keys = tuple(period_keys(now, controls.limit_timezone or "UTC").values())
        first = total if not holds else min(total, Money(batch.reserved_micros))
        main = self._settle(batch, reservation_id, first, keys, now, usage)
        results = [main]
        for n, hold_id in enumerate(holds):
            rest = max(Money.zero(), total - sum((r.charged for r in results), Money.zero()))
            if n < len(holds) - 1:
                rest = min(rest, self._hold_amount(batch, hold_id))
            results.append(self._settle(batch, hold_id, rest, keys, now, costs_only(usage)))
        return _Charged(combined(results), dict(zip(holds, results[1:], strict=True)))

    def _settle(
        self,
        batch: BatchRecord,
        reservation_id: str,
        charge: Money,
        keys: tuple[str, ...],
        now: datetime,
        usage: UsageCharge,
    ) -> SettlementResult:
        try:
            return self.funds.ledger.settle(
                batch.org_id,
                ReservationCharge(
                    reservation_id, charge, isoformat(now), keys, f"batch {batch.batch_id}", usage
                ),
            )
        except UnknownReservation as exc:
            raise SettlementFailed(f"batch {batch.batch_id}: reservation {reservation_id} not found") from exc

    def _hold_amount(self, batch: BatchRecord, hold_id: str) -> Money:
        hold = self.funds.ledger.reservation(batch.org_id, hold_id)
        if hold is None:
            raise SettlementFailed(f"batch {batch.batch_id}: overage hold {hold_id} not found")
        return hold.amount


@dataclass(frozen=True, slots=True)
class _Charged:
    """The batch's settlement: its reservation and overage holds as one (`result`), and each
    overage hold's own outcome by its id."""

    result: SettlementResult
    holds: dict[str, SettlementResult]

    def overage_by_lane(
        self, batch: BatchRecord, lanes: Iterable[LaneRecord]
    ) -> dict[str, tuple[Money, Money]]:
        """(held, charged) of each rescue's overage hold, by the key of the lane rescued."""
        found = {}
        for lane in lanes:
            hold = self.holds.get(overage_hold_id(str(batch.reservation_id), lane.lane_key))
            if hold is not None:
                found[lane.lane_key] = (hold.reserved, hold.charged)
        return found


def _inline_billing(receipt: BillingReceipt, key: str) -> InlineReceipt:
    """The receipt as the batch record keeps it: whole, or without its lane lists (then
    `lists_in` names the stored receipt) when it would be too large to inline."""
    billing: InlineReceipt = {**receipt, "lists_in": key}
    if len(json.dumps(receipt, default=str)) <= MAX_INLINE_RECEIPT_BYTES:
        del billing["lists_in"]  # whole
    else:
        del billing["provider_lanes"], billing["rejected_lanes"]
    return billing
