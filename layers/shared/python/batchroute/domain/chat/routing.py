"""Direct chat routing: which lanes may answer one request, in which order, and what to hold.

Pure. Every lane of the exact model passes the routing gates (routing_gates.py: guards,
operation, privacy tier, tools and capabilities, context window, heartbeat, capacity) as a
one-item group, then `provider_preferences.only` filters. The survivors are ranked:

1. providers named in `order`, in that order;
2. then a lane that can produce the request's `max_tokens` before one whose output limit is
   lower (its price looks lower only because it would answer less);
3. then by the expected direct price of a successful call: the request's estimated cost at
   the lane's DIRECT prices divided by the lane's observed reliability (the catalog prior
   blended with what this process saw: `blended_reliability`), so a cheap lane that keeps
   failing loses to a slightly dearer one that answers;
4. then lane id (stable).

With `allow_fallbacks: false` only the first lane is kept. The org's route policy
(route_policy.py) applies as the `policy` gate at DIRECT prices, its routing mode and privacy
floor are combined with the request, and `chat_fallbacks_allowed: false` keeps only the
first lane (the others are rejected `policy`, rule `chat_fallbacks_allowed`). The hold covers the dearest lane
that may be tried: prompt estimate at input price + (`max_tokens`, capped by the lane, or
the lane's own output limit) at output price, rounded up to the micro-dollar.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Final, NotRequired, TypedDict

from batchroute.domain.billing.usage import direct_usage_line
from batchroute.domain.catalog.catalog import Catalog, Lane, LaneLive, Provider
from batchroute.domain.catalog.pricing import (
    NO_TOOL_USES,
    CacheTokens,
    TokenUsage,
    ToolUses,
    token_cost,
    tool_cost,
)
from batchroute.domain.chat.requests import ChatRequest, ProviderPreferences
from batchroute.domain.routing.engine import LaneProof, RejectedLane, RejectionView, lane_proof
from batchroute.domain.routing.gates import (
    OUTRANKED,
    GateDetail,
    GateFailure,
    RouteRequest,
    RoutingGuards,
    lane_gate_failures,
)
from batchroute.domain.routing.items import ModelGroup
from batchroute.domain.routing.policy import POLICY_GATE, RoutePolicy, combine, guarded, in_force
from batchroute.errors import InvalidRequest
from batchroute.money import Money

# How many observations the catalog's reliability prior is worth against this process's own.
PRIOR_WEIGHT: Final = 20
# Never rank a lane as if it could not succeed at all (division by zero, and a lane recovers).
MIN_RELIABILITY: Final = Decimal("0.05")
EXCLUDED_BY_PREFERENCES: Final = "excluded_by_preferences"
NOT_FIRST_CHOICE: Final = "fallbacks_disallowed"
_NO_PROVIDER: Final = "The lane's provider is not in the catalog."


@dataclass(frozen=True)
class LaneRecord:
    """What this process observed of a lane on the direct path (before the first byte)."""

    successes: int = 0
    failures: int = 0


def blended_reliability(prior: Decimal, record: LaneRecord | None, *, weight: int = PRIOR_WEIGHT) -> Decimal:
    """(prior x weight + successes) / (weight + attempts), at least MIN_RELIABILITY."""
    if record is None:
        return max(prior, MIN_RELIABILITY)
    attempts = record.successes + record.failures
    value = (prior * weight + record.successes) / (weight + attempts)
    return max(value, MIN_RELIABILITY)


@dataclass(frozen=True)
class DirectLane:
    lane: Lane
    provider: Provider
    max_output_tokens: int  # what the provider is asked for
    hold: Money  # the most this request can cost on this lane
    expected_cost: Decimal  # estimated cost / reliability: the ranking key
    reliability: Decimal
    cuts_output: bool = False  # the lane stops short of the request's max_tokens
    proof: LaneProof | None = None  # its data/privacy proof as the plan saw it (the receipt's)

    @property
    def lane_id(self) -> str:
        return self.lane.lane_id

    def charge(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        *,
        cached_input_tokens: int = 0,
        cache_write_input_tokens: int = 0,
        tool_uses: ToolUses = NO_TOOL_USES,
    ) -> Money:
        """The actual cost at this lane's direct prices, each token kind at its own (cache
        reads and writes within `prompt_tokens`), and its hosted tool calls at the lane's
        prices for them (`direct_usage_line`, what the usage counters count), rounded up to
        the micro-dollar."""
        cache = CacheTokens(cached_input_tokens, cache_write_input_tokens)
        line = direct_usage_line(self.lane, TokenUsage(prompt_tokens, completion_tokens, cache, tool_uses))
        return Money.usd_ceil(line.cost)


class LaneRejection(TypedDict):
    """A lane the plan did not choose, and why (`rule`: the policy rule, for `policy`), as a
    `no_direct_lane` refusal lists it: the gate's message and details too, so a refusal says
    what to change (101 images against a limit of 100, the capability missing), as a quote's
    receipt does."""

    lane_id: str
    code: str
    message: str
    details: NotRequired[dict[str, GateDetail]]
    rule: NotRequired[str]


class Rejections(TypedDict):
    rejected_lanes: list[LaneRejection]


@dataclass(frozen=True)
class Rejected:
    """A lane of the model the plan did not choose: its first refusal (`reasons`: every gate
    it failed), as a refusal lists it and as the receipt shows it (a batch receipt's shape)."""

    lane_id: str
    provider: str
    code: str
    message: str
    details: Mapping[str, GateDetail] = field(default_factory=dict)
    reasons: tuple[str, ...] = ()
    proof: LaneProof | None = None  # its data/privacy proof as the plan saw it

    @classmethod
    def failing(cls, lane: Lane, failures: Sequence[GateFailure], proof: LaneProof | None = None) -> Rejected:
        first = failures[0]
        codes = tuple(f.code for f in failures)
        return cls(lane.lane_id, lane.provider, first.code, first.message, first.details, codes, proof)

    def to_error(self) -> LaneRejection:
        entry: LaneRejection = {"lane_id": self.lane_id, "code": self.code, "message": self.message}
        if self.details:
            entry["details"] = dict(self.details)
        rule = self.details.get("rule") if self.code == POLICY_GATE else None
        if rule:
            entry["rule"] = str(rule)
        return entry

    def to_receipt(self, model: str) -> RejectedLane:
        rejection: RejectionView = {
            "code": self.code,
            "message": self.message,
            "details": dict(self.details),
            "reasons": list(self.reasons or (self.code,)),
        }
        return {
            "lane_id": self.lane_id,
            "provider": self.provider,
            "model": model,
            "rejection": rejection,
            "proof": self.proof.to_api() if self.proof is not None else None,
        }


@dataclass(frozen=True)
class DirectPlan:
    lanes: tuple[DirectLane, ...]  # in the order they are tried
    rejected: tuple[Rejected, ...]  # by lane id

    @property
    def hold(self) -> Money:
        """The hold that covers whichever lane ends up answering."""
        return max((lane.hold for lane in self.lanes), default=Money.zero())

    def not_chosen(self, model: str, answering: DirectLane) -> list[RejectedLane]:
        """The receipt's lanes not chosen: those the plan refused, and those ranked after the
        one that answered (eligible, never tried: `outranked`)."""
        after = [lane.lane_id for lane in self.lanes].index(answering.lane_id) + 1
        unneeded = (
            Rejected(
                lane.lane_id,
                lane.lane.provider,
                OUTRANKED,
                f"Eligible, but not needed: {answering.lane_id} answered first.",
                {"selected": [answering.lane_id]},
                proof=lane.proof,
            )
            for lane in self.lanes[after:]
        )
        return [rejected.to_receipt(model) for rejected in (*self.rejected, *unneeded)]

    def rejection_details(self) -> Rejections:
        return {"rejected_lanes": [rejected.to_error() for rejected in self.rejected]}


def plan_direct(
    request: ChatRequest,
    catalog: Catalog,
    *,
    live: Mapping[str, LaneLive],
    now: datetime,
    guards: RoutingGuards,
    observed: Mapping[str, LaneRecord] | None = None,
    policy: RoutePolicy | None = None,
) -> DirectPlan:
    """The lanes to try, best first; raises InvalidRequest `no_direct_lane` when none may.
    `policy`: the org's route policy, if any."""
    group = ModelGroup(model=request.model, first_index=0)
    group.add(0, request.facts)
    policy = in_force(policy)
    route_request = combine(policy, RouteRequest(privacy_tier=request.privacy_tier), mode_given=False).request
    guards = guarded(guards, policy, basis="direct")
    providers = {p.slug: p for p in catalog.providers}
    observed = observed or {}
    prefs = request.preferences
    eligible: list[DirectLane] = []
    rejected: list[Rejected] = []
    for lane in sorted(catalog.lanes_for(request.model), key=lambda lane: lane.lane_id):
        provider = providers.get(lane.provider)
        proof = lane_proof(catalog, provider, live.get(lane.lane_id), now)
        failures = lane_gate_failures(
            lane,
            provider,
            group,
            request=route_request,
            guards=guards,
            live=live.get(lane.lane_id),
            now=now,
            item_count=1,
        )
        if failures:
            rejected.append(Rejected.failing(lane, failures, proof))
        elif provider is None:
            rejected.append(
                Rejected(lane.lane_id, lane.provider, "provider_disabled", _NO_PROVIDER, proof=proof)
            )
        elif prefs.only is not None and lane.provider not in prefs.only:
            message = f"provider_preferences.only leaves {lane.provider} out."
            rejected.append(
                Rejected(lane.lane_id, lane.provider, EXCLUDED_BY_PREFERENCES, message, proof=proof)
            )
        else:
            eligible.append(_direct_lane(request, lane, provider, observed.get(lane.lane_id), proof))
    eligible = _in_order(eligible, prefs, policy, rejected)
    rejected.sort(key=lambda r: r.lane_id)
    plan = DirectPlan(lanes=tuple(eligible), rejected=tuple(rejected))
    if not plan.lanes:
        raise InvalidRequest(
            f"No provider can answer {request.model} directly under this request's constraints.",
            code="no_direct_lane",
            details={"model": request.model, **plan.rejection_details()},
        )
    return plan


def _in_order(
    eligible: list[DirectLane],
    prefs: ProviderPreferences,
    policy: RoutePolicy | None,
    rejected: list[Rejected],
) -> list[DirectLane]:
    """The eligible lanes best first (the caller's provider order, then the expected cost),
    cut to the first when fallbacks are off (by the request or the policy): the cut ones go
    to `rejected`."""
    order = {slug: i for i, slug in enumerate(prefs.order)}
    eligible.sort(
        key=lambda d: (order.get(d.lane.provider, len(order)), d.cuts_output, d.expected_cost, d.lane_id)
    )
    if eligible and not prefs.allow_fallbacks:
        cut = "provider_preferences.allow_fallbacks is false: only the first lane is tried."
        rejected.extend(
            Rejected(d.lane_id, d.lane.provider, NOT_FIRST_CHOICE, cut, proof=d.proof) for d in eligible[1:]
        )
        eligible = eligible[:1]
    if eligible and policy is not None and not policy.chat_fallbacks_allowed:
        cut = "The org's route policy allows chat no fallback lane (chat_fallbacks_allowed: false)."
        rule = {"rule": "chat_fallbacks_allowed"}
        rejected.extend(
            Rejected(d.lane_id, d.lane.provider, POLICY_GATE, cut, rule, proof=d.proof) for d in eligible[1:]
        )
        eligible = eligible[:1]
    return eligible


def tool_calls_asked(tools: Iterable[str], lane: Lane) -> ToolUses:
    """The hosted tool calls a quote counts for one request asking for `tools` on `lane`:
    each tool's calls per item, where the lane prices it."""
    prices = ((tool, lane.tool_price(tool)) for tool in tools)
    return ToolUses.of((tool, price.calls_per_item) for tool, price in prices if price is not None)


def _direct_lane(
    request: ChatRequest, lane: Lane, provider: Provider, record: LaneRecord | None, proof: LaneProof
) -> DirectLane:
    limit = lane.max_output_tokens
    asked = request.max_tokens
    prompt = request.facts.prompt_tokens
    if asked is None:
        # No cap asked: as much as the lane writes, but no more than its window leaves beside
        # the prompt (vendors refuse prompt + max_tokens past the window; the context gate
        # let the lane in on the default output, which that room always holds)
        room = lane.context_window - prompt if lane.context_window > 0 else limit
        max_output = min(limit, room) if limit > 0 and room > 0 else max(limit, room)
    else:
        max_output = min(asked, limit) if limit > 0 else asked
    price = lane.price
    # The hold covers the dearest way the vendor may bill the input: all of it written to
    # its prompt cache, where a cache write costs more than fresh input (Anthropic).
    dearest_input = max(price.input_per_mtok, price.direct.cache_write_input_per_mtok)
    # and the hosted tool calls a quote counts for the tools the request asks for (calls past
    # them are absorbed, as in a batch: docs/money.md)
    tools = tool_cost(tool_calls_asked(request.facts.tools, lane), lane.tool_prices_per_1k)
    worst = token_cost(prompt, max_output, dearest_input, price.output_per_mtok) + tools
    estimate = (
        token_cost(
            prompt, min(max_output, request.facts.output_tokens), price.input_per_mtok, price.output_per_mtok
        )
        + tools
    )
    reliability = blended_reliability(lane.reliability, record)
    hold = Money.usd_ceil(worst)
    return DirectLane(
        lane=lane,
        provider=provider,
        max_output_tokens=max_output,
        hold=hold if hold.micros > 0 else Money(1),
        expected_cost=estimate / reliability,
        reliability=reliability,
        cuts_output=asked is not None and asked > limit,
        proof=proof,
    )
