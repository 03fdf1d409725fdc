"""The routing engine: for each model group, pick the lane(s) that will run it.

Pure: the catalog, the lanes' live state (remaining capacity, last heartbeat) and the
clock's `now` come in as arguments. For each group every lane of the model is evaluated,
in lane_id order, against every gate (routing_gates.py); the lanes that pass are ranked
by the routing mode and assigned the group's items:

- a group goes to the best-ranked lane that has room for all of it;
- when no single lane has room, it is split across lanes in rank order, each taking what
  it has room for (a split costs a control-plane fee per extra lane, hence the preference);
- `hybrid` fills edge lanes first, then the rest goes to public lanes as above.

Every lane not selected gets a rejection with a code, and every lane a quote-time
data/privacy proof; both go on the quote and the billing receipt. docs/routing.md defines
each mode with an example.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Final, Literal, NotRequired, TypedDict, cast, get_args

from batchroute.domain.catalog.catalog import Catalog, Lane, LaneLive, PrivacyTier, Provider, SlaTier
from batchroute.domain.catalog.pricing import (
    NO_TOOL_USES,
    LaneUsage,
    ToolUses,
    batch_cost,
    tool_cost,
    tool_price_key,
)
from batchroute.domain.routing.gates import (
    OUTRANKED,
    GateDetail,
    GateFailure,
    LaneDemand,
    RouteRequest,
    RoutingGuards,
    RoutingMode,
    heartbeat_age_seconds,
    lane_gate_failures,
)
from batchroute.domain.routing.items import ModelGroup, pro_rata
from batchroute.domain.routing.prompt_cache import (
    NO_EXPECTED_CACHE,
    REST,
    ExpectedCache,
    GroupPrefix,
    PrefixRun,
    Share,
    SharedPrefixView,
    expected_cache,
    expected_cost,
    lane_shares,
    pack_prefixes,
    run_views,
    runs_of,
    shared_runs,
)
from batchroute.domain.views import view_of
from batchroute.money import Money, MoneyView, money_text

# Under sla_aware a lane is "roomy" with this many times the group's items left today:
# room for retries and other customers' load inside the 24 h SLA.
SLA_HEADROOM_RATIO = 2


class LaneProofView(TypedDict):
    provider: str
    provider_kind: str
    execution_mode: str
    privacy_tiers: list[str]
    data_retention_days: int | None
    zero_data_retention: bool
    regions: list[str]
    last_heartbeat_at: str | None
    heartbeat_age_seconds: int | None
    remaining_capacity_items: int | None
    catalog_version: str
    pricing_updated_at: str


class UnitPricesView(TypedDict):
    """A lane's locked batch prices; the prompt-cache prices only on a lane that has them
    (without them, cached tokens are billed at `input_per_mtok`); a hosted tool's price per
    1,000 calls (`pricing.tool_price_key`) for each tool the lane's items ask for that the
    lane prices."""

    currency: Literal["usd"]
    basis: Literal["batch"]
    input_per_mtok: str
    output_per_mtok: str
    cached_input_per_mtok: NotRequired[str]
    cache_write_input_per_mtok: NotRequired[str]
    web_search_per_1k_calls: NotRequired[str]
    file_search_per_1k_calls: NotRequired[str]
    python_execution_per_1k_calls: NotRequired[str]
    calculator_per_1k_calls: NotRequired[str]
    time_per_1k_calls: NotRequired[str]
    retrieval_per_1k_calls: NotRequired[str]


def with_cache_prices(
    view: UnitPricesView, cached: Decimal | None, written: Decimal | None
) -> UnitPricesView:
    """`view` with the prompt-cache prices the lane has."""
    if cached is not None:
        view["cached_input_per_mtok"] = format(cached, "f")
    if written is not None:
        view["cache_write_input_per_mtok"] = format(written, "f")
    return view


class LanePromptCacheView(TypedDict):
    """A selected lane's expected prompt-cache use (docs/routing.md, "Cache-aware routing"):
    on a lane whose vendor caches, when cache-aware routing is on. An expectation: the
    estimated cost and the reservation stay uncached."""

    min_prefix_tokens: int
    lifetime_seconds: int
    marker: str
    grouped_items: int
    expected_cached_input_tokens: int
    expected_cache_write_input_tokens: int
    expected_cache_savings: MoneyView
    expected_provider_cost: MoneyView


class SelectedLaneView(TypedDict):
    lane_id: str
    provider: str
    model: str
    selected: Literal[True]
    item_count: int
    estimated_prompt_tokens: int
    estimated_output_tokens: int
    unit_prices: UnitPricesView
    estimated_provider_cost: MoneyView
    proof: LaneProofView
    prompt_cache: NotRequired[LanePromptCacheView]
    estimated_tool_calls: NotRequired[dict[str, int]]  # the hosted tool calls the quote counts


class RejectionView(TypedDict):
    code: str
    message: str
    details: dict[str, GateDetail]
    reasons: list[str]


class RejectedLaneView(TypedDict):
    lane_id: str
    provider: str
    model: str
    selected: Literal[False]
    rejection: RejectionView
    proof: LaneProofView


class RejectedLane(TypedDict):
    """A lane the quote rejected, with its rejection receipt (the plan's JSON, as planned)."""

    lane_id: str | None
    provider: str | None
    model: str | None
    rejection: RejectionView | None
    proof: LaneProofView | None


class GroupRouteView(TypedDict):
    model: str
    item_count: int
    selected_lanes: list[SelectedLaneView]
    rejected_lanes: list[RejectedLaneView]
    failure: str | None
    # the prompt prefixes its items share (cache-aware routing): what the lanes mark
    shared_prefixes: NotRequired[list[SharedPrefixView]]
    # the operations its items run (the route policy's price caps are per operation: what a
    # failover or rescue checks a lane against); absent on a plan stored before it was kept
    operations: NotRequired[list[str]]


class RoutePlanView(TypedDict):
    """The plan as a quote shows it and its snapshot stores it."""

    routing_mode: RoutingMode
    privacy_tier: PrivacyTier
    sla_tier: SlaTier
    effective_sla_tier: Literal["standard"]
    catalog_version: str
    groups: list[GroupRouteView]


@dataclass(frozen=True)
class LaneProof:
    """The quote-time data/privacy proof of one lane: what the receipt shows it was chosen
    (or rejected) on."""

    provider: str
    provider_kind: str
    execution_mode: str
    privacy_tiers: tuple[str, ...]
    data_retention_days: int | None
    regions: tuple[str, ...]
    last_heartbeat_at: str | None
    heartbeat_age_seconds: int | None
    remaining_capacity_items: int | None
    catalog_version: str
    pricing_updated_at: str

    def to_api(self) -> LaneProofView:
        return view_of(
            self,
            LaneProofView,
            privacy_tiers=list(self.privacy_tiers),
            zero_data_retention=self.data_retention_days == 0,
            regions=list(self.regions),
        )


@dataclass(frozen=True)
class LaneCacheExpectation:
    """A selected lane's expected prompt-cache use and what it does to the lane's cost."""

    min_prefix_tokens: int
    lifetime_seconds: int
    marker: str
    expected: ExpectedCache
    expected_cost: Money  # the lane's share at its batch prices, the cache as expected
    savings: Money  # the uncached estimate less `expected_cost`

    def to_api(self) -> LanePromptCacheView:
        return {
            "min_prefix_tokens": self.min_prefix_tokens,
            "lifetime_seconds": self.lifetime_seconds,
            "marker": self.marker,
            "grouped_items": self.expected.grouped_items,
            "expected_cached_input_tokens": self.expected.cached_tokens,
            "expected_cache_write_input_tokens": self.expected.write_tokens,
            "expected_cache_savings": self.savings.to_api(),
            "expected_provider_cost": self.expected_cost.to_api(),
        }


@dataclass(frozen=True)
class SelectedLane:
    lane_id: str
    provider: str
    model: str
    item_count: int
    prompt_tokens: int  # estimated, this lane's share
    output_tokens: int
    batch_input_per_mtok: Decimal  # locked unit prices, USD per million tokens
    batch_output_per_mtok: Decimal
    estimated_cost: Money  # provider cost of this share, rounded up
    proof: LaneProof
    batch_cached_input_per_mtok: Decimal | None = None  # None: the lane has no cache prices
    batch_cache_write_input_per_mtok: Decimal | None = None
    prompt_cache: LaneCacheExpectation | None = None  # cache-aware routing on a caching lane
    # The hosted tool calls the quote counts for the lane's items, and their locked prices
    # (USD per 1,000 calls, by tool): the tools its items ask for that the lane prices.
    tool_calls: ToolUses = NO_TOOL_USES
    tool_prices: tuple[tuple[str, Decimal], ...] = ()

    def usage(self) -> LaneUsage:
        """The lane's estimated usage, uncached: what the quote's price and the batch's
        reservation cover (the cache's expected savings are never counted on), the hosted
        tool calls the quote counts included."""
        return LaneUsage(
            lane_id=self.lane_id,
            prompt_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens,
            input_per_mtok=self.batch_input_per_mtok,
            output_per_mtok=self.batch_output_per_mtok,
            tool_uses=self.tool_calls,
            tool_prices=self.tool_prices,
        )

    def to_api(self) -> SelectedLaneView:
        view = self._view()
        if self.prompt_cache is not None:
            view["prompt_cache"] = self.prompt_cache.to_api()
        if self.tool_calls:
            view["estimated_tool_calls"] = dict(self.tool_calls.calls)
        prices = cast(dict[str, str], view["unit_prices"])  # its `<tool>_per_1k_calls` keys
        for tool, price in self.tool_prices:
            prices[tool_price_key(tool)] = format(price, "f")
        return view

    def _view(self) -> SelectedLaneView:
        return {
            "lane_id": self.lane_id,
            "provider": self.provider,
            "model": self.model,
            "selected": True,
            "item_count": self.item_count,
            "estimated_prompt_tokens": self.prompt_tokens,
            "estimated_output_tokens": self.output_tokens,
            "unit_prices": with_cache_prices(
                {
                    "currency": "usd",
                    "basis": "batch",
                    "input_per_mtok": format(self.batch_input_per_mtok, "f"),
                    "output_per_mtok": format(self.batch_output_per_mtok, "f"),
                },
                self.batch_cached_input_per_mtok,
                self.batch_cache_write_input_per_mtok,
            ),
            "estimated_provider_cost": self.estimated_cost.to_api(),
            "proof": self.proof.to_api(),
        }


@dataclass(frozen=True)
class Rejection:
    lane_id: str
    provider: str
    model: str
    code: str  # the first failing gate in GATE_ORDER, or `outranked`
    message: str
    details: dict[str, GateDetail]
    reasons: tuple[str, ...]  # every failing gate
    proof: LaneProof

    def to_api(self) -> RejectedLaneView:
        return view_of(
            self,
            RejectedLaneView,
            selected=False,
            rejection={
                "code": self.code,
                "message": self.message,
                "details": self.details,
                "reasons": list(self.reasons),
            },
            proof=self.proof.to_api(),
        )


@dataclass(frozen=True)
class GroupRoute:
    model: str
    item_count: int
    first_index: int
    selected: tuple[SelectedLane, ...]
    rejected: tuple[Rejection, ...]
    failure: str | None = None  # why no lane could take the group
    shared_prefixes: tuple[SharedPrefixView, ...] = ()
    operations: tuple[str, ...] = ()  # the operations its items run

    @property
    def ok(self) -> bool:
        return self.failure is None

    def rejection_counts(self) -> dict[str, int]:
        return dict(sorted(Counter(r.code for r in self.rejected).items()))

    def to_api(self) -> GroupRouteView:
        view: GroupRouteView = {
            "model": self.model,
            "item_count": self.item_count,
            "selected_lanes": [lane.to_api() for lane in self.selected],
            "rejected_lanes": [lane.to_api() for lane in self.rejected],
            "failure": self.failure,
        }
        if self.shared_prefixes:
            view["shared_prefixes"] = list(self.shared_prefixes)
        if self.operations:
            view["operations"] = list(self.operations)
        return view


@dataclass(frozen=True)
class RoutePlan:
    request: RouteRequest
    catalog_version: str
    groups: tuple[GroupRoute, ...]

    @property
    def ok(self) -> bool:
        return all(group.ok for group in self.groups)

    @property
    def failures(self) -> tuple[GroupRoute, ...]:
        return tuple(group for group in self.groups if not group.ok)

    @property
    def selected(self) -> tuple[SelectedLane, ...]:
        return tuple(lane for group in self.groups for lane in group.selected)

    @property
    def rejected(self) -> tuple[Rejection, ...]:
        return tuple(lane for group in self.groups for lane in group.rejected)

    def usage(self) -> list[LaneUsage]:
        return [lane.usage() for lane in self.selected]

    def explanation(self) -> str:
        """The plain-language summary a quote carries as `customer_explanation`."""
        lines = []
        for group in self.groups:
            if not group.ok:
                lines.append(f"{group.model}: no eligible lane ({group.failure}).")
                continue
            placed = "; ".join(
                f"{lane.item_count} item{'' if lane.item_count == 1 else 's'} on {lane.provider} "
                f"(${format(lane.batch_input_per_mtok, 'f')} in / "
                f"${format(lane.batch_output_per_mtok, 'f')} out per million tokens{_tools(lane)})"
                f"{_cached(lane)}"
                for lane in group.selected
            )
            counts = ", ".join(f"{count} {code}" for code, count in group.rejection_counts().items())
            others = f"; other lanes: {counts}" if counts else ""
            lines.append(f"{group.model}: {placed}, by {self.request.routing_mode} routing{others}.")
        return " ".join(lines)

    def to_api(self) -> RoutePlanView:
        return {
            "routing_mode": self.request.routing_mode,
            "privacy_tier": self.request.privacy_tier,
            "sla_tier": self.request.sla_tier,
            "effective_sla_tier": "standard",
            "catalog_version": self.catalog_version,
            "groups": [group.to_api() for group in self.groups],
        }


def _tools(lane: SelectedLane) -> str:
    """What the explanation says of the hosted tool calls a lane's estimate counts, if any."""
    prices = dict(lane.tool_prices)
    return "".join(
        f", plus {calls} {tool} call{'' if calls == 1 else 's'} at ${format(prices[tool], 'f')} per 1,000"
        for tool, calls in lane.tool_calls.calls
        if tool in prices
    )


def _cached(lane: SelectedLane) -> str:
    """What the explanation says of a lane's expected prompt cache, when it expects one."""
    cache = lane.prompt_cache
    if cache is None or not cache.expected.grouped_items:
        return ""
    return (
        f", {cache.expected.grouped_items} of them sharing a cached prompt prefix: expected "
        f"{money_text(cache.expected_cost)} instead of {money_text(lane.estimated_cost)}"
    )


def route(
    groups: Iterable[ModelGroup],
    catalog: Catalog,
    *,
    live: Mapping[str, LaneLive],
    request: RouteRequest,
    now: datetime,
    guards: RoutingGuards | None = None,
) -> RoutePlan:
    """Route every model group; a group no lane can take carries a `failure`."""
    router = _Router(catalog, live, request, guards or RoutingGuards(), now)
    ordered = sorted(groups, key=lambda group: group.model)
    return RoutePlan(
        request=request,
        catalog_version=catalog.version,
        groups=tuple(router.route_group(group) for group in ordered if group.item_count > 0),
    )


@dataclass(eq=False)
class _Candidate:
    lane: Lane
    provider: Provider
    demand: LaneDemand
    remaining: int
    proof: LaneProof
    expected: ExpectedCache = NO_EXPECTED_CACHE  # over the whole group
    rank_cost: Decimal = Decimal(0)  # the group's cost here, the cache as expected
    taken: int = 0


def _cost_reason(candidate: _Candidate, best: _Candidate) -> tuple[str, dict[str, GateDetail]]:
    """Why `best` ranks before `candidate` on cost: its price, or at the same price the
    tie-break that decided (`_Router._rank_key`: reliability, then lane id), as `tie_break`."""
    costs = Money.usd_ceil(best.rank_cost), Money.usd_ceil(candidate.rank_cost)
    best_id = best.lane.lane_id
    if best.rank_cost != candidate.rank_cost:
        shown = [money_text(cost) for cost in costs]
        if shown[0] == shown[1]:  # apart by less than the display shows: the exact amounts
            shown = [f"{cost.to_api()['amount']} USD" for cost in costs]
        return f"{best_id} costs {shown[0]} for this group, this lane {shown[1]}", {}
    price = f"same price ({money_text(costs[0])} for this group)"
    if best.lane.reliability != candidate.lane.reliability:
        reliabilities = f"{best.lane.reliability} against {candidate.lane.reliability}"
        return f"{price}; {best_id} is more reliable ({reliabilities})", {"tie_break": "reliability"}
    return f"{price} and reliability; {best_id} comes first by lane id", {"tie_break": "lane_id"}


def _roomy(candidate: _Candidate, group: ModelGroup) -> bool:
    """Under sla_aware: room for SLA_HEADROOM_RATIO times the group's items today."""
    return candidate.remaining >= SLA_HEADROOM_RATIO * group.item_count


def _cuts_output(candidate: _Candidate, group: ModelGroup) -> bool:
    """Whether the lane would stop an item short of the output it asks for."""
    return group.max_output_tokens > candidate.lane.max_output_tokens


def _output_reason(candidate: _Candidate, best: _Candidate, group: ModelGroup) -> str:
    return (
        f"an item asks for up to {group.max_output_tokens} output tokens; {best.lane.lane_id} can "
        f"produce them, this lane stops at {candidate.lane.max_output_tokens}"
    )


@dataclass
class _Router:
    catalog: Catalog
    live: Mapping[str, LaneLive]
    request: RouteRequest
    guards: RoutingGuards
    now: datetime
    providers: dict[str, Provider] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.providers = {provider.slug: provider for provider in self.catalog.providers}

    def route_group(self, group: ModelGroup) -> GroupRoute:
        rejected: list[Rejection] = []
        candidates: list[_Candidate] = []
        shared = shared_runs(group.prefixes) if self.guards.cache_aware else []
        runs = [run for _, run in shared]
        for lane in sorted(self.catalog.lanes_for(group.model), key=lambda lane: lane.lane_id):
            provider = self.providers.get(lane.provider)
            live = self.live.get(lane.lane_id)
            proof = self._proof(provider, live)
            demand = LaneDemand.of(group, lane)
            failures = lane_gate_failures(
                lane,
                provider,
                group,
                request=self.request,
                guards=self.guards,
                live=live,
                now=self.now,
                item_count=group.item_count,
                demand=demand,
            )
            # A lane short of room for the whole group may still take part of a split.
            if provider is None or live is None or any(f.code != "capacity_full" for f in failures):
                rejected.append(_rejection(lane, failures, proof))
            else:
                candidates.append(self._candidate(lane, provider, demand, live, proof, runs))
        candidates.sort(key=self._rank_key(group))
        chosen = self._assign(candidates, group.item_count)
        prefixes = _split_prefixes(chosen, shared, group.item_count)
        split = len(chosen) > 1 or any(c.taken < group.item_count for c in chosen)
        for candidate in candidates:
            if any(candidate is c for c in chosen):
                continue
            could_help = candidate.remaining >= group.item_count or (split and candidate.remaining > 0)
            if chosen and could_help:
                why = self._outranked(candidate, chosen, group)
            else:
                why = _capacity_failure(candidate.remaining, group.item_count)
            rejected.append(_rejection(candidate.lane, [why], candidate.proof))
        rejected.sort(key=lambda r: r.lane_id)
        selected = tuple(
            _selected(candidate, group, _lane_runs(shared, prefixes, at) if self.guards.cache_aware else None)
            for at, candidate in enumerate(chosen)
        )
        failure = None
        if not selected:
            failure = _failure_text(group, rejected, candidates)
        return GroupRoute(
            model=group.model,
            item_count=group.item_count,
            first_index=group.first_index,
            selected=selected,
            rejected=tuple(rejected),
            failure=failure,
            shared_prefixes=_shared_views(group, prefixes) if self.guards.cache_aware else (),
            operations=tuple(sorted(group.operations)),
        )

    def _candidate(
        self,
        lane: Lane,
        provider: Provider,
        demand: LaneDemand,
        live: LaneLive,
        proof: LaneProof,
        runs: list[PrefixRun],
    ) -> _Candidate:
        """A lane that may take (part of) the group, ranked on its expected cost."""
        expected = expected_cache(runs, lane.prompt_cache)
        cost = expected_cost(lane, demand.prompt_tokens, demand.output_tokens, expected) + demand.tool_cost
        return _Candidate(lane, provider, demand, live.remaining_capacity_items, proof, expected, cost)

    def _rank_key(self, group: ModelGroup) -> Callable[[_Candidate], tuple[bool, int, Decimal, Decimal, str]]:
        """Lower sorts first: a lane that can produce the output the items ask for before one
        that would cut it short (its cost looks lower only because it produces less), then
        the mode's preference, then cost, then reliability, then lane_id."""
        mode = self.request.routing_mode

        def key(c: _Candidate) -> tuple[bool, int, Decimal, Decimal, str]:
            if mode == "sla_aware":
                first = 0 if _roomy(c, group) else 1
            elif mode == "hybrid":
                first = 0 if c.provider.kind == "edge" else 1
            else:
                first = 0
            return (_cuts_output(c, group), first, c.rank_cost, -c.lane.reliability, c.lane.lane_id)

        return key

    def _assign(self, ranked: list[_Candidate], item_count: int) -> list[_Candidate]:
        """The lanes that take the group, each with its `taken` count; [] when they cannot."""
        for candidate in ranked:
            candidate.taken = 0
        if self.request.routing_mode == "hybrid":
            chosen, left = _take([c for c in ranked if c.provider.kind == "edge"], item_count)
            if left == 0:
                return chosen
            rest = _fill([c for c in ranked if c.provider.kind != "edge"], left)
            return chosen + rest if rest else _untaken(chosen)
        return _fill(ranked, item_count)

    def _outranked(self, candidate: _Candidate, chosen: list[_Candidate], group: ModelGroup) -> GateFailure:
        mode = self.request.routing_mode
        is_edge = candidate.provider.kind == "edge"
        peers = chosen
        if mode == "hybrid":  # compare with the lanes chosen from the same pool (edge or public)
            peers = [c for c in chosen if (c.provider.kind == "edge") == is_edge]
        best = (peers or chosen)[0]
        cost = Money.usd_ceil(candidate.demand.cost).to_api()["amount"]
        tie: dict[str, GateDetail] = {}
        if _cuts_output(candidate, group) and not _cuts_output(best, group):
            basis, why = "output_limit", _output_reason(candidate, best, group)
            tie = {
                "requested_output_tokens": group.max_output_tokens,
                "max_output_tokens": candidate.lane.max_output_tokens,
            }
        elif mode == "hybrid" and not is_edge and not peers:
            basis, why = "edge_first", "hybrid routing fills edge lanes first and they had room"
        elif mode == "sla_aware" and _roomy(best, group) and not _roomy(candidate, group):
            basis, why = (
                "sla_headroom_then_cost",
                (
                    f"{best.lane.lane_id} has room for at least {SLA_HEADROOM_RATIO}x this group's "
                    f"{group.item_count} items today, this lane for {candidate.remaining}"
                ),
            )
            tie = {"remaining_capacity_items": candidate.remaining}
        else:  # as roomy as the selected lane (sla_aware ranks those by cost): cost decided
            basis, why, tie = ("cost", *_cost_reason(candidate, best))
        return GateFailure(
            OUTRANKED,
            f"Eligible, but not needed: {why}.",
            {
                "rank_basis": basis,
                "selected": [c.lane.lane_id for c in chosen],
                "estimated_provider_cost": {"currency": "usd", "amount": cost},
                **tie,
            },
        )

    def _proof(self, provider: Provider | None, live: LaneLive | None) -> LaneProof:
        return lane_proof(self.catalog, provider, live, self.now)


def lane_proof(
    catalog: Catalog, provider: Provider | None, live: LaneLive | None, now: datetime
) -> LaneProof:
    """A lane's data/privacy proof as routing saw it at `now`: its provider's facts, its live
    state, the catalog's version (a batch receipt's and a direct chat receipt's)."""
    return LaneProof(
        provider=provider.slug if provider else "",
        provider_kind=provider.kind if provider else "",
        execution_mode=provider.execution_mode if provider else "",
        privacy_tiers=provider.privacy_tiers if provider else (),
        data_retention_days=provider.data_retention_days if provider else None,
        regions=provider.regions if provider else (),
        last_heartbeat_at=live.last_heartbeat_at if live else None,
        heartbeat_age_seconds=heartbeat_age_seconds(live, now),
        remaining_capacity_items=live.remaining_capacity_items if live else None,
        catalog_version=catalog.version,
        pricing_updated_at=catalog.pricing_updated_at,
    )


def _fill(ranked: list[_Candidate], item_count: int) -> list[_Candidate]:
    """One lane with room for all, else a split in rank order; [] when room runs out."""
    for candidate in ranked:
        if candidate.remaining >= item_count:
            candidate.taken = item_count
            return [candidate]
    chosen, left = _take(ranked, item_count)
    return chosen if left == 0 else _untaken(chosen)


def _take(ranked: list[_Candidate], item_count: int) -> tuple[list[_Candidate], int]:
    """Each lane in rank order takes what room it has until the items are placed: the lanes
    that took some, and how many items are left."""
    chosen: list[_Candidate] = []
    left = item_count
    for candidate in ranked:
        if left == 0:
            break
        candidate.taken = min(candidate.remaining, left)
        if candidate.taken:
            chosen.append(candidate)
            left -= candidate.taken
    return chosen, left


def _untaken(chosen: list[_Candidate]) -> list[_Candidate]:
    """Room ran out: the lanes give their items back; no lane takes the group."""
    for candidate in chosen:
        candidate.taken = 0
    return []


@dataclass(frozen=True, slots=True)
class _PrefixSplit:
    """A split group's shared prefixes: the selected lane taking each whole, and each
    selected lane's shares (prompt_cache.lane_shares)."""

    lane_of: dict[str, int]
    shares: list[list[Share]]


def _split_prefixes(
    chosen: list[_Candidate], shared: list[tuple[str, PrefixRun]], total: int
) -> _PrefixSplit | None:
    """With two lanes or more and shared prefixes (cache-aware routing): each prefix that
    one of the chosen lanes caches (at or above its minimum) whole on one of them where their
    room allows (prompt_cache.pack_prefixes); the lanes' counts move with them, and a lane
    left with none drops out. A prefix no chosen lane caches moves nothing: no lane pays more
    for nothing. Items stay the same, only their lane changes (docs/routing.md)."""
    if len(chosen) < 2 or not shared:
        return None
    prefixes = [GroupPrefix(key, run.items, run.first) for key, run in shared]
    cached = [
        prefix
        for prefix, (_, run) in zip(prefixes, shared, strict=True)
        if any(c.lane.prompt_cache and run.tokens >= c.lane.prompt_cache.min_tokens for c in chosen)
    ]
    lane_of, counts = pack_prefixes(cached, [c.remaining for c in chosen], total)
    kept = [at for at, count in enumerate(counts) if count > 0]
    for candidate, count in zip(chosen, counts, strict=True):
        candidate.taken = count
    chosen[:] = [chosen[at] for at in kept]
    renumber = {old: new for new, old in enumerate(kept)}
    lane_of = {key: renumber[lane] for key, lane in lane_of.items()}
    counts = [counts[at] for at in kept]
    return _PrefixSplit(lane_of, lane_shares(prefixes, lane_of, counts, total))


def _lane_runs(
    shared: list[tuple[str, PrefixRun]], prefixes: _PrefixSplit | None, at: int
) -> list[PrefixRun]:
    """The shared prefixes' items the `at`-th selected lane takes (all: no split)."""
    if prefixes is None:
        return [run for _, run in shared]
    tokens = {key: run.tokens for key, run in shared}
    return [
        PrefixRun(tokens[share.key], share.end - share.start, share.start, share.end - 1)
        for share in prefixes.shares[at]
        if share.key != REST
    ]


def _shared_views(group: ModelGroup, prefixes: _PrefixSplit | None) -> tuple[SharedPrefixView, ...]:
    """The group's shared prefixes as its plan keeps them: on a split, with the lane taking
    each whole (lane_plan.plan_lanes places them so)."""
    views = group.shared_prefixes()
    if prefixes is not None:
        for view in views:
            lane = prefixes.lane_of.get(view["prefix"])
            if lane is not None:
                view["lane"] = lane
    return tuple(views)


def _selected(candidate: _Candidate, group: ModelGroup, runs: list[PrefixRun] | None) -> SelectedLane:
    """The lane's share of the group (`taken` items): tokens pro rata to its items, rounded
    up, so the shares of a split never add up to less than the whole; with cache-aware
    routing on and a lane that caches, its expected cache use (`runs`: the shared prefixes'
    items it takes)."""
    share = candidate.taken
    prompt = pro_rata(candidate.demand.prompt_tokens, share, group.item_count)
    output = pro_rata(candidate.demand.output_tokens, share, group.item_count)
    lane = candidate.lane
    tool_calls = group.tool_calls_on(lane, share)
    counted = {tool for tool, _ in tool_calls.calls}
    tools = tool_cost(tool_calls, lane.tool_prices_per_1k)
    estimated = Money.usd_ceil(batch_cost(prompt, output, lane.price) + tools)
    cache = None
    if runs is not None and lane.prompt_cache is not None:
        rule = lane.prompt_cache
        expected = expected_cache(runs, rule)
        cost = Money.usd_ceil(expected_cost(lane, prompt, output, expected) + tools)
        cache = LaneCacheExpectation(
            rule.min_tokens, rule.lifetime_seconds, rule.marker, expected, cost, estimated - cost
        )
    return SelectedLane(
        lane_id=lane.lane_id,
        provider=lane.provider,
        model=lane.model,
        item_count=share,
        prompt_tokens=prompt,
        output_tokens=output,
        batch_input_per_mtok=lane.price.batch_input_per_mtok,
        batch_output_per_mtok=lane.price.batch_output_per_mtok,
        estimated_cost=estimated,
        proof=candidate.proof,
        batch_cached_input_per_mtok=lane.price.batch_cached_input_per_mtok,
        batch_cache_write_input_per_mtok=lane.price.batch_cache_write_input_per_mtok,
        prompt_cache=cache,
        tool_calls=tool_calls,
        tool_prices=tuple((tool, price) for tool, price in lane.tool_prices_per_1k if tool in counted),
    )


def _capacity_failure(remaining: int, needed: int) -> GateFailure:
    return GateFailure(
        "capacity_full",
        f"The lane has room for {remaining} more items today; this group needs {needed}.",
        {"remaining_capacity_items": remaining, "needed_items": needed},
    )


def _rejection(lane: Lane, failures: list[GateFailure], proof: LaneProof) -> Rejection:
    first = failures[0]
    return Rejection(
        lane_id=lane.lane_id,
        provider=lane.provider,
        model=lane.model,
        code=first.code,
        message=first.message,
        details=first.details,
        reasons=tuple(dict.fromkeys(f.code for f in failures)),
        proof=proof,
    )


def _failure_text(group: ModelGroup, rejected: list[Rejection], candidates: list[_Candidate]) -> str:
    if not rejected:
        return f"the catalog has no lane for {group.model}"
    if candidates:
        room = sum(c.remaining for c in candidates)
        return f"the eligible lanes have room for {room} of the {group.item_count} items today"
    counts = Counter(r.code for r in rejected)
    named = ", ".join(f"{count} {code}" for code, count in sorted(counts.items()))
    return f"every lane was rejected: {named}"


# -- a plan read back from a quote's snapshot ----------------------------------------------------
# The stored plan has the keys `RoutePlan.to_api` gave it, but DynamoDB gives its numbers back
# as Decimal (and a score detail stays one): these read every value into the view's own type.
def stored_plan(item: RoutePlanView) -> RoutePlanView:
    """A plan as `RoutePlan.to_api` showed it and the quote's snapshot stored it."""
    return {
        "routing_mode": _STORED_MODES[str(item["routing_mode"])],
        "privacy_tier": _STORED_PRIVACY[str(item["privacy_tier"])],
        "sla_tier": _STORED_SLA[str(item["sla_tier"])],
        "effective_sla_tier": "standard",
        "catalog_version": str(item["catalog_version"]),
        "groups": [_stored_group(group) for group in item["groups"]],
    }


_STORED_MODES: Final[dict[str, RoutingMode]] = {mode: mode for mode in get_args(RoutingMode)}
_STORED_PRIVACY: Final[dict[str, PrivacyTier]] = {tier: tier for tier in get_args(PrivacyTier)}
_STORED_SLA: Final[dict[str, SlaTier]] = {tier: tier for tier in get_args(SlaTier)}


def _stored_group(group: GroupRouteView) -> GroupRouteView:
    failure = group.get("failure")
    stored: GroupRouteView = {
        "model": str(group["model"]),
        "item_count": int(group["item_count"]),
        "selected_lanes": [_stored_selected(lane) for lane in group["selected_lanes"]],
        "rejected_lanes": [_stored_rejected(lane) for lane in group["rejected_lanes"]],
        "failure": None if failure is None else str(failure),
    }
    if group.get("shared_prefixes"):
        stored["shared_prefixes"] = _stored_prefixes(group.get("shared_prefixes") or [])
    if group.get("operations"):
        stored["operations"] = [str(operation) for operation in group.get("operations") or []]
    return stored


def _stored_prefixes(views: list[SharedPrefixView]) -> list[SharedPrefixView]:
    stored = run_views(runs_of(views).items())
    for view, kept in zip(views, stored, strict=True):
        if view.get("lane") is not None:
            kept["lane"] = int(str(view.get("lane")))
    return stored


def _stored_selected(lane: SelectedLaneView) -> SelectedLaneView:
    stored = _stored_selected_lane(lane)
    cache = lane.get("prompt_cache")
    if cache is not None:
        stored["prompt_cache"] = _stored_cache(cache)
    return stored


def _stored_cache(cache: LanePromptCacheView) -> LanePromptCacheView:
    return {
        "min_prefix_tokens": int(cache["min_prefix_tokens"]),
        "lifetime_seconds": int(cache["lifetime_seconds"]),
        "marker": str(cache["marker"]),
        "grouped_items": int(cache["grouped_items"]),
        "expected_cached_input_tokens": int(cache["expected_cached_input_tokens"]),
        "expected_cache_write_input_tokens": int(cache["expected_cache_write_input_tokens"]),
        "expected_cache_savings": _stored_money(cache["expected_cache_savings"]),
        "expected_provider_cost": _stored_money(cache["expected_provider_cost"]),
    }


def _stored_money(money: MoneyView) -> MoneyView:
    return {"currency": str(money["currency"]), "amount": str(money["amount"])}


def _stored_selected_lane(lane: SelectedLaneView) -> SelectedLaneView:
    prices, cost = lane["unit_prices"], lane["estimated_provider_cost"]
    return {
        "lane_id": str(lane["lane_id"]),
        "provider": str(lane["provider"]),
        "model": str(lane["model"]),
        "selected": True,
        "item_count": int(lane["item_count"]),
        "estimated_prompt_tokens": int(lane["estimated_prompt_tokens"]),
        "estimated_output_tokens": int(lane["estimated_output_tokens"]),
        "unit_prices": _stored_prices(prices),
        "estimated_provider_cost": _stored_money(cost),
        "proof": _stored_proof(lane["proof"]),
    }


def _stored_prices(prices: UnitPricesView) -> UnitPricesView:
    stored: UnitPricesView = {
        "currency": "usd",
        "basis": "batch",
        "input_per_mtok": str(prices["input_per_mtok"]),
        "output_per_mtok": str(prices["output_per_mtok"]),
    }
    if "cached_input_per_mtok" in prices:
        stored["cached_input_per_mtok"] = str(prices["cached_input_per_mtok"])
    if "cache_write_input_per_mtok" in prices:
        stored["cache_write_input_per_mtok"] = str(prices["cache_write_input_per_mtok"])
    return stored


def _stored_rejected(lane: RejectedLaneView) -> RejectedLaneView:
    rejection = lane["rejection"]
    return {
        "lane_id": str(lane["lane_id"]),
        "provider": str(lane["provider"]),
        "model": str(lane["model"]),
        "selected": False,
        "rejection": {
            "code": str(rejection["code"]),
            "message": str(rejection["message"]),
            "details": {str(name): _stored_detail(value) for name, value in rejection["details"].items()},
            "reasons": [str(reason) for reason in rejection["reasons"]],
        },
        "proof": _stored_proof(lane["proof"]),
    }


def _stored_proof(proof: LaneProofView) -> LaneProofView:
    return {
        "provider": str(proof["provider"]),
        "provider_kind": str(proof["provider_kind"]),
        "execution_mode": str(proof["execution_mode"]),
        "privacy_tiers": [str(tier) for tier in proof["privacy_tiers"]],
        "data_retention_days": _whole(proof.get("data_retention_days")),
        "zero_data_retention": bool(proof["zero_data_retention"]),
        "regions": [str(region) for region in proof["regions"]],
        "last_heartbeat_at": proof.get("last_heartbeat_at"),
        "heartbeat_age_seconds": _whole(proof.get("heartbeat_age_seconds")),
        "remaining_capacity_items": _whole(proof.get("remaining_capacity_items")),
        "catalog_version": str(proof["catalog_version"]),
        "pricing_updated_at": str(proof["pricing_updated_at"]),
    }


def _whole(value: Decimal | int | None) -> int | None:
    return None if value is None else int(value)


def _stored_detail(value: object) -> GateDetail:
    """A rejection's detail as stored: whole numbers as int, others (a score) kept exact."""
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    if isinstance(value, list):
        return [str(part) for part in value]
    if isinstance(value, dict):
        if all(isinstance(part, dict) for part in value.values()):
            return {str(k): {str(a): str(b) for a, b in part.items()} for k, part in value.items()}
        return {str(k): str(part) for k, part in value.items()}
    if value is None or isinstance(value, (str, int, float, Decimal)):  # bool is an int
        return value
    return str(value)
