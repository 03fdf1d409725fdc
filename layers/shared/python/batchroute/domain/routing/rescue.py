"""Deadline rescue: when a running lane will miss the batch's deadline, and who takes its items.

Pure (the clock's time is passed in). docs/batches.md, "Deadline rescue", is the contract:

- **Projection.** From a lane's progress (its items, the items answered so far, the vendor
  job's own reported counts included, and when it started) the lane's rate in items per
  minute gives its finish; each chunk still to submit adds one job turnaround. A lane is
  judged only after `MIN_OBSERVATION_SECONDS` of running (the setting
  `rescue_min_observation_seconds`): a job just submitted says nothing.
- **Due.** The projection misses `deadline_at` minus the routing mode's margin
  (`RESCUE_MARGIN_SECONDS`, data), or no finish is in sight (nothing answered).
- **Decision.** Among the group's eligible lanes (the quote's `outranked` lanes, as failover)
  the sync ones that can run the items before the deadline minus the margin, cheapest
  first, pick the first; the batch's `rescue` setting says how many items it may take:
  `off` none; `within_reservation` (default) as many as the reservation's headroom pays the
  extra for; `allow_overage` as many as the headroom plus the overage cap (itself bounded
  by the wallet and the hard spending limit) pays for. The rest stays on the old lane.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import ROUND_UP, Decimal, InvalidOperation
from typing import Final, Literal, get_args

from batchroute.domain.request_fields import invalid
from batchroute.domain.routing.items import InputLine
from batchroute.domain.routing.lane_plan import (
    LaneRecord,
    PlanLane,
    PrefixFilter,
    chunks_for_range,
    lane_chunks,
    lane_key,
    new_lane_record,
)
from batchroute.money import MICROS_PER_USD, Money, is_amount_text

RescueMode = Literal["within_reservation", "allow_overage", "off"]
RESCUE_MODES: Final[tuple[RescueMode, ...]] = get_args(RescueMode)
DEADLINE_RESCUE: Final = "deadline_rescue"  # the successor's `handover_reason`
RESCUE_REST: Final = "deadline_rescue_rest"  # the old lane's own items it keeps, resubmitted

# How long before the deadline a lane must be projected to finish, per routing mode: data.
# sla_aware buys the most room; the rest one hour.
RESCUE_MARGIN_SECONDS: Final[Mapping[str, int]] = {
    "cheapest": 3600,
    "sla_aware": 7200,
    "public_only": 3600,
    "edge_only": 3600,
    "hybrid": 3600,
    "privacy_constrained": 3600,
}
DEFAULT_RESCUE_MARGIN_SECONDS: Final = 3600
MIN_OBSERVATION_SECONDS: Final = 600  # judge no lane on less than 10 minutes of its run (default)
# A sync lane's planning figure: one item per concurrent slot every this many seconds.
SYNC_SECONDS_PER_ITEM: Final = 10.0
MAX_OVERAGE_USD: Final = Decimal(10_000)
NO_MONEY: Final = Money(0)


def rescue_margin(routing_mode: str | None) -> timedelta:
    seconds = RESCUE_MARGIN_SECONDS.get(routing_mode or "cheapest", DEFAULT_RESCUE_MARGIN_SECONDS)
    return timedelta(seconds=seconds)


# -- the batch's setting ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RescueSetting:
    """The batch's `rescue` field: `{mode, max_overage_usd}` (the cap only with allow_overage)."""

    mode: RescueMode = "within_reservation"
    max_overage: Money = NO_MONEY

    @classmethod
    def from_api(cls, value: object) -> RescueSetting:
        """Read a body's `rescue`; InvalidRequest names the field."""
        if value is None:
            return cls()
        if not isinstance(value, Mapping) or set(value) - {"mode", "max_overage_usd"}:
            raise invalid("rescue", "rescue must be an object {mode, max_overage_usd}.")
        mode = value.get("mode", "within_reservation")
        if mode not in RESCUE_MODES:
            raise invalid("rescue", f"rescue.mode must be one of {', '.join(RESCUE_MODES)}.")
        cap = value.get("max_overage_usd")
        if mode != "allow_overage":
            if cap is not None:
                raise invalid("rescue", "rescue.max_overage_usd goes only with mode allow_overage.")
            return cls(mode)
        amount = _usd(cap)
        if amount is None or not Decimal(0) < amount <= MAX_OVERAGE_USD:
            raise invalid(
                "rescue",
                f"rescue.max_overage_usd must be an amount above 0 and at most {MAX_OVERAGE_USD} "
                "(a decimal string).",
            )
        return cls("allow_overage", Money.usd(amount))

    @classmethod
    def from_item(cls, item: Mapping[str, str] | None) -> RescueSetting:
        if not item:
            return cls()
        mode = item.get("mode", "within_reservation")
        if mode not in RESCUE_MODES:
            return cls()
        micros = int(item.get("max_overage_micros") or 0)
        return cls(mode, Money(micros))

    def to_item(self) -> dict[str, str]:
        item: dict[str, str] = {"mode": self.mode}
        if self.mode == "allow_overage":
            item["max_overage_micros"] = str(self.max_overage.micros)
        return item

    def to_api(self) -> dict[str, str]:
        shown: dict[str, str] = {"mode": self.mode}
        if self.mode == "allow_overage":
            shown["max_overage_usd"] = format(self.max_overage.amount, "f")
        return shown


def _usd(value: object) -> Decimal | None:
    """A plain decimal string ("12.50") or an integer; an exponent, sign, separator or space
    is refused, never guessed (docs/money.md, "Typed amounts")."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    if isinstance(value, str) and not is_amount_text(value):
        return None
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return None
    return amount if amount.is_finite() and amount == amount.quantize(Decimal("0.000001")) else None


# -- the projection --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LaneProgress:
    """What a running lane has done: `done` of its `items` answered (the running vendor job's
    reported counts included), since `started_at`; `chunks_left` chunks still to submit after
    the current one, each a job turnaround of `chunk_turnaround`."""

    started_at: datetime
    items: int
    done: int
    chunks_left: int = 0
    chunk_turnaround: timedelta = timedelta(0)


@dataclass(frozen=True, slots=True)
class Projection:
    remaining: int
    items_per_minute: float
    finish_at: datetime | None  # None: nothing answered yet, no finish in sight


def project(
    progress: LaneProgress, now: datetime, min_observation_seconds: float = MIN_OBSERVATION_SECONDS
) -> Projection | None:
    """The lane's projected finish; None while it ran too short a time to judge (less than
    `min_observation_seconds`)."""
    remaining = max(0, progress.items - progress.done)
    elapsed = (now - progress.started_at).total_seconds()
    if remaining == 0:
        return Projection(0, 0.0, now)
    if elapsed < min_observation_seconds or elapsed <= 0:
        return None
    rate = progress.done / (elapsed / 60)
    if progress.done <= 0:
        return Projection(remaining, 0.0, None)
    extra = progress.chunk_turnaround * progress.chunks_left
    return Projection(remaining, rate, now + timedelta(minutes=remaining / rate) + extra)


def rescue_due(
    projection: Projection | None, deadline_at: datetime, margin: timedelta, now: datetime
) -> bool:
    """The lane misses the deadline less the margin (and the deadline is still ahead)."""
    if projection is None or projection.remaining == 0 or now >= deadline_at:
        return False
    return projection.finish_at is None or projection.finish_at > deadline_at - margin


# -- the decision ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RescueOption:
    """An eligible lane that could take the items: a sync lane of the group's quote."""

    lane: PlanLane
    concurrency: int
    item_micros: int  # its estimated price per item, fee included, rounded up
    unit_prices: Mapping[str, str]  # its own batch prices: what the rescued items are charged

    def finish_at(self, items: int, now: datetime) -> datetime:
        rounds = math.ceil(items / max(1, self.concurrency))
        return now + timedelta(seconds=rounds * SYNC_SECONDS_PER_ITEM)


@dataclass(frozen=True, slots=True)
class RescueBudget:
    """What the money allows: `headroom` is the reservation less the estimated cost of the
    batch at its quoted prices (actual usage for what is answered); `overage` what
    allow_overage may add (the cap, bounded by the wallet's available credit and the hard
    spending limit's room); `lane_fee` the control-plane fee of one more lane, and
    `freed_lane_fee` the fee the old lane no longer costs when it hands over every item
    before delivering any (the fee counts the lanes that delivered)."""

    headroom: Money
    overage: Money = NO_MONEY
    lane_fee: Money = NO_MONEY
    freed_lane_fee: Money = NO_MONEY


@dataclass(frozen=True, slots=True)
class RescueDecision:
    option: RescueOption | None
    items: int  # the first `items` unanswered items of the lane (by ordinal) go to the option
    extra: Money  # their estimated cost over the quoted price, lane fee included (below 0: saved)
    overage: Money  # of which beyond the reservation (allow_overage)
    reason: str

    @property
    def rescues(self) -> bool:
        return self.option is not None and self.items > 0


def _none(reason: str) -> RescueDecision:
    return RescueDecision(None, 0, Money.zero(), Money.zero(), reason)


def decide_rescue(
    *,
    setting: RescueSetting,
    items_left: int,
    quoted_item_micros: int,
    options: Sequence[RescueOption],
    budget: RescueBudget,
    now: datetime,
    deadline_at: datetime,
    margin: timedelta,
) -> RescueDecision:
    """Which lane takes how many of `items_left` (module docstring)."""
    if setting.mode == "off":
        return _none("the batch's rescue setting is off")
    latest = deadline_at - margin
    in_time = [o for o in options if o.finish_at(items_left, now) <= latest]
    if not in_time:
        return _none("no eligible sync lane can finish the items before the deadline")
    option = min(enumerate(in_time), key=lambda pair: (pair[1].item_micros, pair[0]))[1]
    allowance = budget.headroom.micros
    if setting.mode == "allow_overage":
        allowance += min(budget.overage.micros, setting.max_overage.micros)
    per_item = option.item_micros - quoted_item_micros  # below 0: the rescue lane is cheaper
    whole = items_left * per_item + budget.lane_fee.micros - budget.freed_lane_fee.micros
    if whole <= allowance:
        items, extra = items_left, whole
    elif per_item > 0:  # only some: the old lane keeps (and still delivers) the rest
        items = max(0, min(items_left - 1, (allowance - budget.lane_fee.micros) // per_item))
        extra = items * per_item + budget.lane_fee.micros
    else:
        items, extra = 0, 0
    if items <= 0:
        return _none(f"the {setting.mode} budget does not cover one item on {option.lane.lane_id}")
    overage = Money(max(0, extra - max(0, budget.headroom.micros)))
    reason = f"{items} of {items_left} items to {option.lane.lane_id}"
    return RescueDecision(option, items, Money(extra), overage, reason)


def overage_room(*, cap: Money, held: Money, available: Money, limit_room: Money | None) -> Money:
    """The most a new overage hold of a batch may take: its `allow_overage` cap less what the
    batch holds for overages already, at most the wallet's available credit and, under a
    hard spending limit, the limit's room (limit - period spend - in-flight); never below 0."""
    room = min(cap.micros - held.micros, available.micros)
    if limit_room is not None:
        room = min(room, limit_room.micros)
    return Money(max(0, room))


def overage_hold_id(reservation_id: str, lane_key: str) -> str:
    """The id of the overage hold of the rescue of `lane_key` (one rescue per lane record):
    deterministic, so a repeated invocation cannot hold twice for the same rescue."""
    return f"{reservation_id}-overage-{lane_key}"


def item_micros(
    prompt_tokens: Decimal, output_tokens: Decimal, unit_prices: Mapping[str, str], fee_pct: Decimal
) -> int:
    """The estimated customer price of one item of these tokens at these unit prices, the
    percentage fee included, in micros rounded up."""
    price_in = Decimal(str(unit_prices.get("input_per_mtok") or 0))
    price_out = Decimal(str(unit_prices.get("output_per_mtok") or 0))
    usd = (prompt_tokens * price_in + output_tokens * price_out) / Decimal(1_000_000)
    with_fee = usd * (1 + fee_pct / Decimal(100)) * MICROS_PER_USD
    return int(with_fee.to_integral_value(rounding=ROUND_UP))


# -- the hand-over records ---------------------------------------------------------------------


def model_ordinals(
    lines: Iterable[InputLine], model: str, first_ordinal: int, prefixes: PrefixFilter | None = None
) -> dict[int, int]:
    """seq -> the ordinal in the model's items (of the lane's stream: `prefixes`), for one
    input chunk."""
    found: dict[int, int] = {}
    ordinal = first_ordinal
    for line in lines:
        item = line["item"]
        if item.get("model") == model and (prefixes is None or prefixes.admits(item)):
            found[int(line["seq"])] = ordinal
            ordinal += 1
    return found


@dataclass(frozen=True, slots=True)
class RescueRecords:
    rescue: LaneRecord  # on the rescue lane: the first items, at its own prices
    rest: LaneRecord | None  # the old lane keeps the others: a fresh job after the rescue


def rescue_records(
    source: LaneRecord,
    option: RescueOption,
    *,
    items: int,
    chunk: int,
    ordinals: Mapping[int, int],
    done: Iterable[int],
    offsets: Sequence[int],
    root_number: int,
    at: str,
) -> RescueRecords:
    """The records that take `source`'s unfinished items from `chunk` on: the rescue lane
    the first `items` of them (by ordinal), the old lane (a new record of it, run after the
    rescue lane) the rest. `ordinals` maps the chunk's seqs of the model to their ordinals;
    `done` are the seqs of the chunk answered (or excluded) already."""
    start = max(source.ordinal_start, min(ordinals.values(), default=source.ordinal_start))
    done_here = {seq for seq in done if seq in ordinals and start <= ordinals[seq] < source.ordinal_end}
    split = _split(start, source.ordinal_end, items, {ordinals[seq] for seq in done_here})
    depth = source.failover_depth + 1
    chunks = [c for c in lane_chunks(source) if c >= chunk]

    def record(lane: PlanLane | None, first: int, last: int, prices: Mapping[str, str]) -> LaneRecord:
        provider = lane.provider if lane is not None else source.provider
        covered = set(chunks_for_range(offsets, first, last))
        return new_lane_record(
            lane_key=lane_key(root_number, provider, source.model, failover_depth=depth),
            lane_id=str(lane.lane_id) if lane is not None else source.lane_id,
            provider=provider,
            model=source.model,
            ordinal_start=first,
            ordinal_end=last,
            chunks=[c for c in chunks if c in covered],
            unit_prices=prices,
            at=at,
            exclude_seqs=[s for s in done_here if first <= ordinals[s] < last],
            failover_from=source.lane_key,
            failover_depth=depth,
            prefixes=source.prefixes,
        )

    rest = None
    if split < source.ordinal_end:
        rest = replace(
            record(None, split, source.ordinal_end, source.unit_prices), handover_reason=RESCUE_REST
        )
    rescue = replace(
        record(option.lane, start, split, option.unit_prices),
        handover_reason=DEADLINE_RESCUE,
        then_lane=rest.lane_key if rest is not None else None,
    )
    return RescueRecords(rescue, rest)


def _split(start: int, end: int, items: int, done: set[int]) -> int:
    """The ordinal after the `items`-th not-done ordinal from `start` (at most `end`)."""
    split = start + items
    for ordinal in sorted(done):
        if ordinal < split:
            split += 1
    return min(split, end)


# -- late results ------------------------------------------------------------------------------


def handed_over_rows(lanes: Sequence[LaneRecord]) -> dict[str, tuple[int, frozenset[int]]]:
    """For each lane that handed its items over (failover or rescue): the chunk it handed
    over in, and the seqs of that chunk it answered itself (its successors exclude exactly
    those). Any other row of that chunk in its result file came late (a vendor job that
    answered after the hand-over) and is not the item's answer: its successor's is."""
    answered: dict[str, set[int]] = {}
    for lane in lanes:
        if lane.failover_from:
            answered.setdefault(lane.failover_from, set()).update(lane.exclude_seqs)
    found: dict[str, tuple[int, frozenset[int]]] = {}
    for lane in lanes:
        chunks = lane_chunks(lane)
        if lane.failover_to and 0 < lane.chunks_done_n <= len(chunks):
            found[lane.lane_key] = (
                chunks[lane.chunks_done_n - 1],
                frozenset(answered.get(lane.lane_key, ())),
            )
    return found
