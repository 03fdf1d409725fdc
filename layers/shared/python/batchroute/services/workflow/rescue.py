"""Deadline rescue at poll time: a running vendor job that will miss the batch's deadline
hands its unfinished items to a faster lane (docs/batches.md, "Deadline rescue").

RunLane asks `DeadlineRescue.check` at each poll of a running job. The projection and the
decision are pure (domain/routing/rescue.py); this module gathers their inputs: the lane's
progress (its record and the job's reported counts), the eligible lanes of the quote (the
group's `outranked` lanes, sync ones only, priced at their own batch prices from the
catalog), and the money (the reservation, and the overage holds of earlier rescues, less
the batch's estimated cost at its quoted prices, actual usage for what is answered; under
`allow_overage` also the room for an overage hold, which services/workflow/overage.py takes
before the items move). RunLane then hands the items over in ONE
transaction (as failover does), cancels the vendor job (best effort) and tells the customer
(`batch.rescue_started`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Protocol, TypedDict

from batchroute.clock import Clock, isoformat
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.catalog.catalog import Catalog, UnitPrices
from batchroute.domain.catalog.pricing import fee_pct_for
from batchroute.domain.delivery.webhooks import RESCUE_STARTED
from batchroute.domain.routing.lane_plan import (
    LaneRecord,
    handover_lanes,
    lane_chunk_count,
    lane_offsets,
    plan_groups,
    root_number,
)
from batchroute.domain.routing.policy import in_force
from batchroute.domain.routing.rescue import (
    MIN_OBSERVATION_SECONDS,
    LaneProgress,
    RescueBudget,
    RescueDecision,
    RescueOption,
    RescueRecords,
    RescueSetting,
    decide_rescue,
    item_micros,
    model_ordinals,
    project,
    rescue_due,
    rescue_margin,
    rescue_records,
)
from batchroute.money import Money, MoneyView
from batchroute.observability import logger
from batchroute.providers.base import JobStatus
from batchroute.providers.registry import ProviderRegistry
from batchroute.services.batches.ports import BatchStore
from batchroute.services.routing.ports import OrgPolicies
from batchroute.services.workflow.overage import RescueOverage
from batchroute.services.workflow.ports import BatchFiles

_ENDED = frozenset({"completed", "failed", "canceled"})


class RescueStartedView(TypedDict):
    """The `rescue` of a `batch.rescue_started` event (docs/webhooks.md)."""

    from_lane_key: str
    from_lane_id: str
    lane_key: str
    lane_id: str
    items: int
    items_kept: int
    reason: str
    message: str
    estimated_extra_cost: MoneyView
    overage_held: MoneyView
    deadline_at: str | None


class RescueEvents(Protocol):
    """services/delivery/webhooks.py:WebhookDelivery: queues `batch.rescue_started`."""

    def queue_batch_event(
        self, batch: BatchRecord, *, event_type: str, key: str, details: RescueStartedView
    ) -> object: ...


@dataclass(frozen=True, slots=True)
class RescuePlan:
    decision: RescueDecision
    message: str  # the old lane's latest_error: why it handed its items over


def _parse(moment: str) -> datetime:
    return datetime.fromisoformat(moment.replace("Z", "+00:00"))


def _prices_view(prices: UnitPrices) -> dict[str, str]:
    return {
        "currency": "usd",
        "basis": "batch",
        "input_per_mtok": format(prices.input_per_mtok, "f"),
        "output_per_mtok": format(prices.output_per_mtok, "f"),
        "cached_input_per_mtok": format(prices.cached_input_per_mtok, "f"),
        "cache_write_input_per_mtok": format(prices.cache_write_input_per_mtok, "f"),
    }


@dataclass(eq=False, kw_only=True)
class DeadlineRescue:
    records: BatchStore
    artifacts: BatchFiles
    registry: ProviderRegistry
    catalog: Catalog
    clock: Clock
    # The org's route policy as it stands: a rescue never leaves it (docs/routing-policy.md)
    policies: OrgPolicies
    events: RescueEvents  # the batch's `batch.rescue_started` webhook
    overage: RescueOverage  # allow_overage's second hold on the wallet
    min_observation_seconds: float = MIN_OBSERVATION_SECONDS  # settings: rescue_min_observation_seconds
    _declined: dict[tuple[str, str], datetime] = field(default_factory=dict, init=False)

    # -- is it due, and what then ------------------------------------------------------------
    def worth_checking(self, batch: BatchRecord, lane: LaneRecord) -> bool:
        """Whether a check could find a rescue at all, from what the caller holds (no read):
        rescue on, a deadline, a lane that ran long enough to judge, not declined lately."""
        if RescueSetting.from_item(batch.rescue).mode == "off" or not batch.deadline_at:
            return False
        if not lane.started_at:
            return False
        now = self.clock.now()
        if (now - _parse(lane.started_at)).total_seconds() < self.min_observation_seconds:
            return False
        declined = self._declined.get((batch.batch_id, lane.lane_key))
        # A lane whose decision was "no rescue" is asked again only after the minimum
        # observation time (each ask reads every lane record of the batch).
        return declined is None or (now - declined).total_seconds() >= self.min_observation_seconds

    def check(
        self,
        batch: BatchRecord,
        lane: LaneRecord,
        position: int,
        status: JobStatus | None,
        *,
        sync: bool = False,
    ) -> RescuePlan | None:
        """The rescue to make now for this lane (at a poll of its running vendor job, or
        `sync`: before a chunk of a sync lane), or None."""
        if not self.worth_checking(batch, lane) or not lane.started_at or not batch.deadline_at:
            return None
        setting = RescueSetting.from_item(batch.rescue)
        now = self.clock.now()
        reported = (status.completed_count + status.failed_count) if status is not None else 0
        progress = LaneProgress(
            started_at=_parse(lane.started_at),
            items=lane.item_count,
            done=lane.completed + lane.failed + reported,
            chunks_left=max(0, lane_chunk_count(lane) - position - 1),
            chunk_turnaround=timedelta(seconds=0 if sync else self.registry.batch_poll_interval_seconds),
        )
        deadline = _parse(batch.deadline_at)
        margin = rescue_margin(batch.routing_mode)
        projection = project(progress, now, self.min_observation_seconds)
        if not rescue_due(projection, deadline, margin, now):
            return None
        items_left = lane.item_count - lane.completed - lane.failed
        decision = self._funded(batch, lane, setting, items_left, now)
        assert projection is not None
        finish = isoformat(projection.finish_at) if projection.finish_at else "never (nothing answered)"
        if not decision.rescues:
            self._declined[(batch.batch_id, lane.lane_key)] = now
            logger.warning(
                "lane will miss the deadline; no rescue",
                extra={"lane_key": lane.lane_key, "projected_finish": finish, "why": decision.reason},
            )
            return None
        message = (
            f"deadline rescue: projected to finish at {finish}, past the deadline {batch.deadline_at} "
            f"less {int(margin.total_seconds())} s; {decision.reason}"
        )
        return RescuePlan(decision, message[:1000])

    def _funded(
        self, batch: BatchRecord, lane: LaneRecord, setting: RescueSetting, items_left: int, now: datetime
    ) -> RescueDecision:
        """The decision, its overage held on the wallet first (allow_overage): when that hold
        cannot be taken, the decision again with no overage (what the reservation covers)."""
        if setting.mode != "allow_overage":
            return self._decide(batch, lane, setting, items_left, now, Money(0))
        batch = self.overage.fresh(batch)  # the overage holds as they stand
        decision = self._decide(batch, lane, setting, items_left, now, self.overage.room(batch, setting))
        if decision.overage.micros <= 0 or self.overage.hold(batch, lane.lane_key, decision.overage, setting):
            return decision
        return self._decide(batch, lane, setting, items_left, now, Money(0))

    def _decide(
        self,
        batch: BatchRecord,
        lane: LaneRecord,
        setting: RescueSetting,
        items_left: int,
        now: datetime,
        overage_room: Money,
    ) -> RescueDecision:
        lanes = self.records.lanes(batch.batch_id)
        fee_pct = fee_pct_for(self.catalog.fees, "workflow" if batch.fee_kind == "workflow" else "batch")
        tokens = _item_tokens(batch)
        prompt, output = tokens.get(lane.model, (Decimal(0), Decimal(0)))
        options = self._options(batch, lane, {other.lane_id for other in lanes}, prompt, output, fee_pct)
        estimate = _estimated_cost(lanes, tokens, fee_pct, self.catalog.fees.control_plane_fee_per_lane_usd)
        lane_fee = Money.usd_ceil(self.catalog.fees.control_plane_fee_per_lane_usd)
        delivered = any(other.completed for other in lanes if other.lane_id == lane.lane_id)
        budget = RescueBudget(
            # the batch's holds: its reservation and the overage holds of earlier rescues
            headroom=Money(batch.reserved_micros + (batch.overage_held_micros or 0) - estimate.micros),
            overage=overage_room,
            lane_fee=lane_fee,
            freed_lane_fee=Money(0) if delivered else lane_fee,
        )
        return decide_rescue(
            setting=setting,
            items_left=items_left,
            quoted_item_micros=item_micros(prompt, output, lane.unit_prices, fee_pct),
            options=options,
            budget=budget,
            now=now,
            deadline_at=_parse(str(batch.deadline_at)),
            margin=rescue_margin(batch.routing_mode),
        )

    def _options(
        self,
        batch: BatchRecord,
        lane: LaneRecord,
        used: set[str],
        prompt: Decimal,
        output: Decimal,
        fee_pct: Decimal,
    ) -> list[RescueOption]:
        """The group's eligible lanes that run items one by one (sync), at their own prices."""
        options = []
        policy = in_force(self.policies.current(batch.org_id))
        groups = plan_groups(batch.plan)
        for candidate, found in handover_lanes(groups, lane.model, used, self.catalog, policy):
            if self.registry.execution_mode(found.provider) == "batch_api":
                continue
            prices = _prices_view(found.price.batch)
            concurrency = self.registry.provider(found.provider).max_concurrency
            options.append(
                RescueOption(candidate, concurrency, item_micros(prompt, output, prices, fee_pct), prices)
            )
        return options

    # -- the hand-over -----------------------------------------------------------------------
    def records_for(
        self,
        batch: BatchRecord,
        lane: LaneRecord,
        decision: RescueDecision,
        *,
        chunk: int,
        first_ordinal: int,
        answered: Iterable[int],
    ) -> RescueRecords:
        """The rescue lane's record (and the rest's, on the old lane) from `chunk` on."""
        assert decision.option is not None
        done = set(answered)
        if chunk == min((c for c, _ in lane.chunk_ranges), default=chunk):
            done |= set(lane.exclude_seqs)
        return rescue_records(
            lane,
            decision.option,
            items=decision.items,
            chunk=chunk,
            ordinals=model_ordinals(
                self.artifacts.input_lines(batch.batch_id, chunk, model=lane.model),
                lane.model,
                first_ordinal,
                lane.prefixes,
            ),
            done=done,
            offsets=lane_offsets(batch.chunk_models or [], lane),
            root_number=root_number(lane.lane_key),
            at=isoformat(self.clock.now()),
        )

    def started(self, batch: BatchRecord, lane: LaneRecord, made: RescueRecords, plan: RescuePlan) -> None:
        """Tell the customer (`batch.rescue_started`), once per rescue lane."""
        logger.warning(
            "deadline rescue",
            extra={"lane_key": lane.lane_key, "to": made.rescue.lane_key, "items": made.rescue.item_count},
        )
        details: RescueStartedView = {
            "from_lane_key": lane.lane_key,
            "from_lane_id": lane.lane_id,
            "lane_key": made.rescue.lane_key,
            "lane_id": made.rescue.lane_id,
            "items": made.rescue.item_count,
            "items_kept": made.rest.item_count if made.rest is not None else 0,
            "reason": "deadline_rescue",
            "message": plan.message,
            "estimated_extra_cost": plan.decision.extra.to_api(),
            "overage_held": plan.decision.overage.to_api(),
            "deadline_at": batch.deadline_at,
        }
        try:
            self.events.queue_batch_event(
                batch, event_type=RESCUE_STARTED, key=made.rescue.lane_key, details=details
            )
        except Exception:  # the event is best effort: the rescue itself is done
            logger.warning("could not queue batch.rescue_started", exc_info=True)


def _item_tokens(batch: BatchRecord) -> dict[str, tuple[Decimal, Decimal]]:
    """Per model: the quote's estimated prompt and output tokens of one item."""
    found: dict[str, tuple[Decimal, Decimal]] = {}
    for group in (batch.plan.get("groups") if batch.plan is not None else None) or []:
        items = prompt = output = 0
        for entry in group.get("selected_lanes") or []:
            items += int(entry.get("item_count") or 0)
            prompt += int(entry.get("estimated_prompt_tokens") or 0)
            output += int(entry.get("estimated_output_tokens") or 0)
        if items:
            found[str(group.get("model"))] = (Decimal(prompt) / items, Decimal(output) / items)
    return found


def _estimated_cost(
    lanes: Iterable[LaneRecord],
    tokens: Mapping[str, tuple[Decimal, Decimal]],
    fee_pct: Decimal,
    lane_fee_usd: Decimal,
) -> Money:
    """The batch's cost as it stands: each lane's answered usage and its unanswered items
    (the quote's estimate of an item) at its locked prices, the fee included."""
    micros = 0
    lane_ids = set()
    for lane in lanes:
        prompt, output = tokens.get(lane.model, (Decimal(0), Decimal(0)))
        open_items = lane.item_count - lane.completed - lane.failed - lane.canceled - lane.handed_over
        if lane.status in _ENDED:  # a lane that ended (or handed over) owns no open item
            open_items = 0
        micros += item_micros(
            Decimal(lane.usage.prompt_tokens),
            Decimal(lane.usage.completion_tokens),
            lane.unit_prices,
            fee_pct,
        )
        micros += max(0, open_items) * item_micros(prompt, output, lane.unit_prices, fee_pct)
        if lane.completed or open_items > 0:
            lane_ids.add(lane.lane_id)
    return Money(micros) + Money.usd_ceil(lane_fee_usd * len(lane_ids))
