"""The settled price of a batch and its billing receipt. Pure.

What is charged: for every lane record, the tokens of its COMPLETED rows in the final
artifact (failed and never-run items are not charged) at that lane's locked unit prices,
each token kind at its own price (fresh input, input read from / written to the vendor's
prompt cache, output; a lane locked without cache prices bills cached input as input)
(a failover lane keeps the prices of the lane it took over from: the quote's), priced with
the fee schedule (`domain/catalog/pricing.price_usage`). The per-lane control-plane fee counts the
planned lanes: a failover successor counts as the planned lane it descends from (the
service's failover never costs the customer a lane fee); a deadline rescue lane counts as a
lane of its own (docs/batches.md). The ledger then charges at most what was reserved
(docs/ledger.md: the service absorbs the rest).

The receipt's lane costs are the provider subtotal split over the lanes (largest remainder,
`pricing.split_subtotal`): they add up to it exactly. Its rejected lanes are the quote's,
less the lanes that ran (a failover or rescue lane comes from the quote's rejections).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import NotRequired, TypedDict

from batchroute.domain.billing.ledger import SettlementResult
from batchroute.domain.billing.savings import ReceiptSavingsView, References, TokenCounts, receipt_savings
from batchroute.domain.catalog.pricing import (
    CacheFields,
    CacheTokens,
    CacheUse,
    FeeBasisView,
    LaneUsage,
    PriceEstimateView,
    ToolFields,
    ToolUses,
    locked_tool_prices,
    split_subtotal,
    tool_cost,
)
from batchroute.domain.routing.engine import LaneProofView, RejectedLane, RoutePlanView
from batchroute.domain.routing.lane_plan import LaneRecord, plan_groups, plan_lane_entry
from batchroute.domain.routing.prompt_cache import cache_saving
from batchroute.domain.routing.rescue import DEADLINE_RESCUE
from batchroute.money import Money, MoneyView

RECEIPT_VERSION = 1


class ItemCounts(TypedDict):
    completed: int
    failed: int
    canceled: int


class TokenUsage(CacheFields, ToolFields):
    """A lane's usage on the receipt; of the input, what was read from / written to the
    prompt cache (`CacheFields`, when any); the hosted tool calls (`ToolFields`, when any)."""

    prompt_tokens: int  # all input
    completion_tokens: int


class ReceiptPromptCache(TypedDict):
    """What the vendor's prompt cache did on a lane (cache-aware routing, docs/ledger.md):
    the items the quote grouped on a shared prefix there, the input read from and written to
    the cache (completed items), and what that saved against billing it all as input."""

    grouped_items: int
    cached_input_tokens: int
    cache_write_input_tokens: int
    saved: MoneyView


class ReceiptLane(TypedDict):
    """A lane that ran: what it delivered, at its locked prices, with the quote's proof
    (`proof` is the plan's own JSON, copied as planned)."""

    lane_key: str
    lane_id: str
    provider: str | None
    model: str | None
    status: str | None
    item_counts: ItemCounts
    usage: TokenUsage
    unit_prices: dict[str, str]
    cost: MoneyView
    proof: LaneProofView | None
    failover_from: str | None
    latest_error: str | None
    prompt_cache: NotRequired[ReceiptPromptCache]  # when grouped or the vendor reported cache use


class RescuedLane(TypedDict):
    """A lane that took items over for a deadline rescue (or, `deadline_rescue_rest`, the old
    lane's own record of the items the rescue left it): its items, its cost at its own
    prices, the same tokens at the prices of the lane it took over from, and the difference."""

    lane_key: str
    lane_id: str
    provider: str
    from_lane_key: str | None
    reason: str
    item_counts: ItemCounts
    cost: MoneyView
    cost_at_quoted_prices: MoneyView
    cost_difference: MoneyView
    # allow_overage: the rescue's overage hold on the wallet and what Settle charged of it
    overage_held: NotRequired[MoneyView]
    overage_charged: NotRequired[MoneyView]


class BatchCounts(TypedDict):
    total: int
    completed: int
    failed: int
    canceled: int


@dataclass(frozen=True, slots=True)
class ReceiptCredits:
    """What the wallet did: reserved, charged (capped at the reservation), released."""

    reserved: Money
    charged: Money
    released: Money
    settled_at: str

    @classmethod
    def of(cls, result: SettlementResult) -> ReceiptCredits:
        return cls(result.reserved, result.charged, result.released, result.settled_at)

    @classmethod
    def nothing(cls, at: str) -> ReceiptCredits:
        """A batch that reserved and charged nothing."""
        return cls(Money.zero(), Money.zero(), Money.zero(), at)


class ReceiptTotals(TypedDict):
    """The billing receipt without its lane lists (interface spec "Billing receipt")."""

    object: str
    version: int
    batch_id: str
    final_settled_price: MoneyView
    provider_subtotal: MoneyView
    service_fee: MoneyView
    service_fee_basis: NotRequired[FeeBasisView]  # the fee schedule line behind service_fee
    customer_discount: MoneyView
    settled_total: MoneyView
    absorbed: MoneyView
    credit_reserved: MoneyView
    credit_charged: MoneyView
    credit_released: MoneyView
    settled_at: str
    item_counts: BatchCounts
    # The charge beside the same tokens at the reference vendors' list and batch prices
    # (domain/billing/savings.py); absent on receipts settled before it, or when a lane's
    # model has no reference.
    savings: NotRequired[ReceiptSavingsView]


class DirectReceiptLane(TypedDict):
    lane_id: str
    provider: str
    usage: Mapping[str, object]  # domain/catalog/pricing.py:UsageFields
    unit_prices: dict[str, str]  # direct prices (services/chat/direct.py:direct_unit_prices)
    cost: MoneyView  # what the answer cost at them: the charge
    proof: NotRequired[LaneProofView | None]  # the lane's data/privacy proof as the plan saw it


class DirectReceipt(TypedDict):
    """The billing receipt of a direct chat request (services/chat/direct.py: direct prices,
    no service fee), or of one the sweeper settled at its last recorded usage
    (`recovered_by`: then without its lanes)."""

    basis: str  # "direct"
    final_settled_price: MoneyView
    credit_reserved: MoneyView
    credit_charged: MoneyView
    credit_released: MoneyView
    settled_at: str
    batch_id: NotRequired[str]
    provider_subtotal: NotRequired[MoneyView]
    service_fee: NotRequired[MoneyView]
    provider_lanes: NotRequired[list[DirectReceiptLane]]
    rejected_lanes: NotRequired[list[RejectedLane]]
    recovered_by: NotRequired[str]


def direct_totals(batch_id: str, charged: Money, held: Money, at: str) -> DirectReceipt:
    """A direct chat request's receipt, but for its lanes: direct prices and no fee, so the
    charge is the settled price and the provider subtotal."""
    return {
        "batch_id": batch_id,
        "basis": "direct",
        "final_settled_price": charged.to_api(),
        "provider_subtotal": charged.to_api(),
        "service_fee": Money.zero().to_api(),
        "credit_reserved": held.to_api(),
        "credit_charged": charged.to_api(),
        "credit_released": (held - charged).to_api(),
        "settled_at": at,
    }


class BillingReceipt(ReceiptTotals):
    """The billing receipt (interface spec "Billing receipt"); `rescues` only on a batch that
    had a deadline rescue (docs/batches.md)."""

    provider_lanes: list[ReceiptLane]
    rejected_lanes: list[RejectedLane]
    rescues: NotRequired[list[RescuedLane]]


class InlineReceipt(ReceiptTotals, total=False):
    """The receipt as the batch record keeps it: whole, or without its lane lists when it
    would be too large to inline (then `lists_in` names the stored receipt)."""

    provider_lanes: list[ReceiptLane]
    rejected_lanes: list[RejectedLane]
    rescues: list[RescuedLane]
    lists_in: str


def _price(unit_prices: Mapping[str, str], name: str) -> Decimal:
    value = unit_prices.get(name)
    return Decimal(str(value)) if value is not None else Decimal(0)


def _cache_price(unit_prices: Mapping[str, str], name: str) -> Decimal | None:
    """A locked prompt-cache price; None (the input price) for a lane locked without one."""
    value = unit_prices.get(name)
    return Decimal(str(value)) if value is not None else None


def lane_usage(lane: LaneRecord, tally: Mapping[str, int]) -> LaneUsage:
    prices = lane.unit_prices
    return LaneUsage(
        lane_id=lane.lane_id,
        prompt_tokens=int(tally.get("prompt_tokens") or 0),
        output_tokens=int(tally.get("completion_tokens") or 0),
        input_per_mtok=_price(prices, "input_per_mtok"),
        output_per_mtok=_price(prices, "output_per_mtok"),
        cache=CacheUse.at_prices(
            CacheTokens.from_fields(tally),
            cached_input_per_mtok=_cache_price(prices, "cached_input_per_mtok"),
            cache_write_input_per_mtok=_cache_price(prices, "cache_write_input_per_mtok"),
        ),
        tool_uses=ToolUses.from_tally(tally),
        tool_prices=locked_tool_prices(prices),
    )


def token_usage(usage: LaneUsage) -> TokenUsage:
    """A lane's usage as the receipt shows it: the cache counts and the hosted tool calls
    when there are any."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.output_tokens,
        **usage.cache.tokens.to_fields(),
        **usage.tool_uses.to_usage(),
    }


def _charged(tally: Mapping[str, int]) -> bool:
    """A lane record is charged when it delivered completed rows."""
    return int(tally.get("completed") or 0) > 0


def fee_lane(lane: LaneRecord, by_key: Mapping[str, LaneRecord]) -> str:
    """The lane id whose control-plane fee `lane`'s usage counts under: a failover successor
    (`failover_from`, no `handover_reason`) and the rest a rescue leaves on the old lane
    (`deadline_rescue_rest`) count as the lane they took over from, back to the planned lane
    (or to the deadline rescue lane, which counts as its own: docs/batches.md). A chain whose
    source is not among the records stops at the last one found."""
    seen = {lane.lane_key}
    while lane.failover_from and lane.handover_reason != DEADLINE_RESCUE:
        source = by_key.get(lane.failover_from)
        if source is None or source.lane_key in seen:
            break
        seen.add(source.lane_key)
        lane = source
    return lane.lane_id


def charged_usage(lanes: Iterable[LaneRecord], tallies: Mapping[str, Mapping[str, int]]) -> list[LaneUsage]:
    """One LaneUsage per lane record that delivered completed rows (only those are charged,
    and only those count for the per-lane control-plane fee, each under its `fee_lane`)."""
    by_key = {lane.lane_key: lane for lane in lanes}
    usages = []
    for lane in sorted(by_key.values(), key=lambda lane: lane.lane_key):
        tally = tallies.get(lane.lane_key) or {}
        if _charged(tally):
            usages.append(replace(lane_usage(lane, tally), fee_lane=fee_lane(lane, by_key)))
    return usages


def lane_item_counts(lane: LaneRecord, tally: Mapping[str, int]) -> ItemCounts:
    return {
        "completed": int(tally.get("completed") or 0),
        "failed": int(tally.get("failed") or 0),
        "canceled": lane.canceled,
    }


def prompt_cache_receipt(usage: LaneUsage, grouped_items: int) -> ReceiptPromptCache | None:
    """The lane's prompt-cache line: saved = cached x (input price - cached price) - write
    premium (written x (write price - input price)), at the lane's locked prices; None on a
    lane with no grouped items and no cache use."""
    cache = usage.cache
    cached, written = cache.cached_input_tokens, cache.cache_write_input_tokens
    if not (grouped_items or cached or written):
        return None
    saved = cache_saving(
        cached, written, usage.input_per_mtok, cache.cached_input_per_mtok, cache.cache_write_input_per_mtok
    )
    return {
        "grouped_items": grouped_items,
        "cached_input_tokens": cached,
        "cache_write_input_tokens": written,
        "saved": Money.usd(saved).to_api(),
    }


def lane_ran(lane: LaneRecord, tally: Mapping[str, int]) -> bool:
    rows = int(tally.get("completed") or 0) + int(tally.get("failed") or 0)
    return rows > 0 or lane.status != "pending"


def provider_lanes(
    lanes: Iterable[LaneRecord],
    tallies: Mapping[str, Mapping[str, int]],
    plan: RoutePlanView | None,
) -> list[ReceiptLane]:
    """The receipt's lanes that ran, each with what it delivered, its usage (completed rows),
    locked unit prices, provider cost and the quote-time data/privacy proof. The items the
    plan grouped on a lane are shown once, on its first record (a split group's lane may run
    as several: lane_plan.plan_lanes). The costs add up to the provider subtotal
    (`_lane_costs`)."""
    shown: list[ReceiptLane] = []
    groups = plan_groups(plan)
    grouped_shown: set[str] = set()
    ran = [
        lane
        for lane in sorted(lanes, key=lambda lane: lane.lane_key)
        if lane_ran(lane, _tally(tallies, lane))
    ]
    costs = _lane_costs(ran, tallies)
    for lane, cost in zip(ran, costs, strict=True):
        tally = _tally(tallies, lane)
        usage = lane_usage(lane, tally)
        entry = plan_lane_entry(groups, lane.lane_id)
        receipt_lane: ReceiptLane = {
            "lane_key": lane.lane_key,
            "lane_id": lane.lane_id,
            "provider": lane.provider,
            "model": lane.model,
            "status": lane.status,
            "item_counts": lane_item_counts(lane, tally),
            "usage": token_usage(usage),
            "unit_prices": dict(lane.unit_prices),
            "cost": cost.to_api(),
            "proof": entry.proof if entry is not None else None,
            "failover_from": lane.failover_from,
            # Why the lane failed or handed its items over (a vendor job's own errors
            # included), else None.
            "latest_error": lane.latest_error,
        }
        grouped = entry.grouped_items if entry is not None and lane.lane_id not in grouped_shown else 0
        grouped_shown.add(lane.lane_id)
        cache = prompt_cache_receipt(usage, grouped)
        if cache is not None:
            receipt_lane["prompt_cache"] = cache
        shown.append(receipt_lane)
    return shown


def _tally(tallies: Mapping[str, Mapping[str, int]], lane: LaneRecord) -> Mapping[str, int]:
    return tallies.get(lane.lane_key) or {}


def _lane_costs(lanes: Sequence[LaneRecord], tallies: Mapping[str, Mapping[str, int]]) -> list[Money]:
    """Each lane's charged cost (its completed rows at its locked prices; nothing when it
    delivered none), the subtotal split over them so that they add up to the receipt's
    `provider_subtotal` exactly, each within a micro-dollar of its exact cost."""
    exact = []
    for lane in lanes:
        tally = _tally(tallies, lane)
        exact.append(lane_usage(lane, tally).cost if _charged(tally) else Decimal(0))
    return split_subtotal(exact)


def rescued_lanes(
    lanes: Iterable[LaneRecord],
    tallies: Mapping[str, Mapping[str, int]],
    overage: Mapping[str, tuple[Money, Money]] | None = None,
) -> list[RescuedLane]:
    """The receipt's `rescues`: each lane a deadline rescue made, what it delivered at its own
    prices and what the same tokens cost at the prices of the lane it took over from; a
    rescue lane whose rescue took an overage hold also that hold's (held, charged), from
    `overage` by the key of the lane it took over from."""
    overage = overage or {}
    by_key = {lane.lane_key: lane for lane in lanes}
    shown: list[RescuedLane] = []
    for lane in sorted(by_key.values(), key=lambda lane: lane.lane_key):
        if not lane.handover_reason:
            continue
        tally = tallies.get(lane.lane_key) or {}
        source = by_key.get(lane.failover_from or "")
        cost = Money.usd_ceil(lane_usage(lane, tally).cost)
        quoted = lane if source is None else replace(lane, unit_prices=source.unit_prices)
        quoted_cost = Money.usd_ceil(lane_usage(quoted, tally).cost)
        row: RescuedLane = {
            "lane_key": lane.lane_key,
            "lane_id": lane.lane_id,
            "provider": lane.provider,
            "from_lane_key": lane.failover_from,
            "reason": lane.handover_reason,
            "item_counts": lane_item_counts(lane, tally),
            "cost": cost.to_api(),
            "cost_at_quoted_prices": quoted_cost.to_api(),
            "cost_difference": (cost - quoted_cost).to_api(),
        }
        held = overage.get(lane.failover_from or "") if lane.handover_reason == "deadline_rescue" else None
        if held is not None:
            row["overage_held"], row["overage_charged"] = held[0].to_api(), held[1].to_api()
        shown.append(row)
    return shown


def rejected_lanes(plan: RoutePlanView | None, ran: Collection[str] = ()) -> list[RejectedLane]:
    """The quote's rejected lanes with their rejection receipts, as planned, less those whose
    lane id is in `ran` (the lane ids of `provider_lanes`: a failover successor or a deadline
    rescue lane is taken from the quote's rejections, and a lane that ran is not a rejected one)."""
    return [
        {
            "lane_id": entry.get("lane_id"),
            "provider": entry.get("provider"),
            "model": entry.get("model"),
            "rejection": entry.get("rejection"),
            "proof": entry.get("proof"),
        }
        for group in (plan.get("groups") if plan is not None else None) or []
        for entry in group.get("rejected_lanes") or []
        if entry.get("lane_id") not in ran
    ]


def build_receipt(
    *,
    batch_id: str,
    breakdown_api: PriceEstimateView,
    credits: ReceiptCredits,
    absorbed: Money,
    counts: Mapping[str, int],
    lanes: list[ReceiptLane],
    rejected: list[RejectedLane],
    fee_basis: FeeBasisView | None = None,
    rescues: list[RescuedLane] | None = None,
    references: References | None = None,
) -> BillingReceipt:
    """The billing receipt (interface spec "Billing receipt"); Money as {currency, amount}.

    `final_settled_price` is what the wallet was charged (`credit_charged`): the settled
    total, capped at the reservation."""
    receipt: BillingReceipt = {
        "object": "billing_receipt",
        "version": RECEIPT_VERSION,
        "batch_id": batch_id,
        "final_settled_price": credits.charged.to_api(),
        "provider_subtotal": breakdown_api["provider_subtotal"],
        "service_fee": breakdown_api["service_fee"],
        "customer_discount": breakdown_api["customer_discount"],
        "settled_total": breakdown_api["total"],
        "absorbed": absorbed.to_api(),
        "credit_reserved": credits.reserved.to_api(),
        "credit_charged": credits.charged.to_api(),
        "credit_released": credits.released.to_api(),
        "settled_at": credits.settled_at,
        "item_counts": {
            "total": int(counts.get("total") or 0),
            "completed": int(counts.get("completed") or 0),
            "failed": int(counts.get("failed") or 0),
            "canceled": int(counts.get("canceled") or 0),
        },
        "provider_lanes": lanes,
        "rejected_lanes": rejected,
    }
    if fee_basis is not None:
        receipt["service_fee_basis"] = fee_basis
    if rescues:
        receipt["rescues"] = rescues
    savings = receipt_savings(references, _lane_tokens(lanes), credits.charged) if references else None
    if savings is not None:
        receipt["savings"] = savings
    return receipt


def _lane_tokens(lanes: list[ReceiptLane]) -> list[tuple[str | None, TokenCounts]]:
    return [
        (
            lane["model"],
            TokenCounts(
                prompt_tokens=lane["usage"]["prompt_tokens"],
                output_tokens=lane["usage"]["completion_tokens"],
                cached_input_tokens=lane["usage"].get("cached_input_tokens", 0),
                cache_write_input_tokens=lane["usage"].get("cache_write_input_tokens", 0),
                tool_usd=tool_cost(
                    ToolUses.from_usage(lane["usage"]), locked_tool_prices(lane["unit_prices"])
                ),
            ),
        )
        for lane in lanes
    ]
