"""The price of a batch: provider subtotal, service fee, customer discount, total.

    provider subtotal = ceil_µ$( Σ lanes (fresh input x input_per_mtok + cached input x
                        cached_input_per_mtok + cache-write input x cache_write_input_per_mtok
                        + output x output_per_mtok) / 1e6 )
    floor fee         = ceil_µ$( subtotal x margin_floor_pct / 100 )
    service fee       = max( ceil_µ$( subtotal x fee_pct / 100 ) + lanes x control_plane_fee, floor fee )
                        (lanes: distinct fee lanes, `LaneUsage.fee_identity`)
    customer discount = min( requested discount, service fee - floor fee )
    total             = subtotal + service fee - customer discount

The subtotal is summed exactly in Decimal and rounded up once, to the micro-dollar, so a
quote never under-covers what the providers will charge. The margin floor bounds the fee
twice: a fee rate configured below it is raised to it, and a discount never takes the
fee below it. The same function prices a quote (estimated tokens) and a settlement
(actual tokens at the prices the quote locked). A receipt shows the schedule line behind
its fee (`PriceBreakdown.fee_basis`, docs/money.md). A receipt's per-lane costs are the
subtotal split over its lanes (`split_subtotal`), so they add up to it exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from typing import Final, Literal, Protocol, TypedDict, cast

from batchroute.domain.catalog.catalog import FeeSchedule, LanePrice, UnitPrices
from batchroute.money import MICROS_PER_USD, Money, MoneyView, money_text

FeeKind = Literal["batch", "workflow"]
_MILLION = Decimal(1_000_000)
_HUNDRED = Decimal(100)


class CacheFields(TypedDict, total=False):
    """The prompt-cache counts as result lines, tallies, receipts and records keep them: of
    the input, the tokens read from the vendor's cache and written to it, each key only when
    not zero (an answer without them keeps its old shape)."""

    cached_input_tokens: int
    cache_write_input_tokens: int


_CACHE_KEYS: Final = ("cached_input_tokens", "cache_write_input_tokens")  # CacheFields' keys
_TOTAL_KEYS: Final = ("cached_input", "cache_write_input")  # CacheTotals' keys


class CacheTotals(TypedDict, total=False):
    """The same counts as GET /v1/usage's `tokens` names them."""

    cached_input: int
    cache_write_input: int


@dataclass(frozen=True, slots=True)
class CacheTokens:
    """Of an input, the tokens the vendor read from its prompt cache and wrote to it: the one
    place their stored keys are read (`from_fields`) and written (`to_fields`, `to_totals`)."""

    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0

    def __add__(self, other: CacheTokens) -> CacheTokens:
        return CacheTokens(
            self.cached_input_tokens + other.cached_input_tokens,
            self.cache_write_input_tokens + other.cache_write_input_tokens,
        )

    def counts(self) -> dict[str, int]:
        """The counts by their stored key (`CacheFields`), those that are not zero."""
        return self._named(_CACHE_KEYS)

    def to_fields(self) -> CacheFields:
        return cast(CacheFields, self.counts())  # exactly CacheFields' keys, each an int

    def to_totals(self) -> CacheTotals:
        return cast(CacheTotals, self._named(_TOTAL_KEYS))  # exactly CacheTotals' keys

    def _named(self, names: tuple[str, str]) -> dict[str, int]:
        named = zip(names, (self.cached_input_tokens, self.cache_write_input_tokens), strict=True)
        return {name: count for name, count in named if count}

    @classmethod
    def from_fields(cls, fields: CacheFields | Mapping[str, int]) -> CacheTokens:
        """The counts a stored usage, tally or checkpoint holds (none: zero)."""
        return cls(
            int(fields.get("cached_input_tokens") or 0),
            int(fields.get("cache_write_input_tokens") or 0),
        )


NO_CACHE_TOKENS = CacheTokens()


@dataclass(frozen=True)
class CacheUse:
    """The prompt-cache part of an input: tokens read from the cache and written to it, each
    at its price (None: billed at the input price)."""

    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    cached_input_per_mtok: Decimal | None = None
    cache_write_input_per_mtok: Decimal | None = None

    @classmethod
    def priced(cls, cached: int, written: int, prices: UnitPrices) -> CacheUse:
        return cls(cached, written, prices.cached_input_per_mtok, prices.cache_write_input_per_mtok)

    @classmethod
    def at_prices(
        cls,
        tokens: CacheTokens,
        *,
        cached_input_per_mtok: Decimal | None,
        cache_write_input_per_mtok: Decimal | None,
    ) -> CacheUse:
        return cls(
            tokens.cached_input_tokens,
            tokens.cache_write_input_tokens,
            cached_input_per_mtok,
            cache_write_input_per_mtok,
        )

    @property
    def tokens(self) -> CacheTokens:
        return CacheTokens(self.cached_input_tokens, self.cache_write_input_tokens)


NO_CACHE = CacheUse()


TOOL_USES_TALLY_PREFIX: Final = "tool_uses."  # a tally's key of a tool's calls: tool_uses.<tool>


class ToolFields(TypedDict, total=False):
    """The hosted tool calls as result lines, chat records and receipts keep them: the calls
    the vendor bills, by the service's tool name (`{"web_search": 2}`), the key only when any."""

    tool_uses: dict[str, int]


@dataclass(frozen=True, slots=True)
class ToolUses:
    """Hosted tool calls the vendor bills, by the service's tool name (web search, code
    execution, ...): the one place their stored shapes are read and written, in a usage
    (`tool_uses: {name: calls}`) and in a flat tally (`tool_uses.<name>: calls`). Kept
    sorted by name, only tools with calls."""

    calls: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, counts: Iterable[tuple[str, int]]) -> ToolUses:
        summed: dict[str, int] = {}
        for name, count in counts:
            summed[str(name)] = summed.get(str(name), 0) + int(count)
        return cls(tuple(sorted((name, count) for name, count in summed.items() if count > 0)))

    def __add__(self, other: ToolUses) -> ToolUses:
        return ToolUses.of((*self.calls, *other.calls)) if other.calls else self

    def __bool__(self) -> bool:
        return bool(self.calls)

    @classmethod
    def from_usage(cls, usage: ToolFields) -> ToolUses:
        """The calls a stored usage holds (none: no calls); a count that is no whole number
        of calls counts none."""
        found = usage.get("tool_uses")
        if not isinstance(found, Mapping):
            return NO_TOOL_USES
        return cls.of((name, count) for name, count in found.items() if _whole_count(count))

    def to_usage(self) -> ToolFields:
        return {"tool_uses": dict(self.calls)} if self.calls else {}

    @classmethod
    def from_tally(cls, tally: Mapping[str, int]) -> ToolUses:
        prefix = TOOL_USES_TALLY_PREFIX
        counts = ((key[len(prefix) :], count) for key, count in tally.items() if key.startswith(prefix))
        return cls.of((name, int(count)) for name, count in counts)

    def to_tally(self) -> dict[str, int]:
        return {TOOL_USES_TALLY_PREFIX + name: count for name, count in self.calls}


def _whole_count(value: object) -> bool:
    """A count of calls as stored: a positive whole number (DynamoDB gives back a Decimal)."""
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        return False
    return value > 0 and value == int(value)


NO_TOOL_USES = ToolUses()


class UsageFields(CacheFields, ToolFields):
    """A usage as result lines, chat records, lane records and chat checkpoints keep it and
    the API shows it: the tokens (`prompt_tokens`: all input), and the prompt-cache counts
    (`CacheFields`) and hosted tool calls (`ToolFields`) only when there are any, so an answer
    without them keeps its old shape."""

    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """What a lane, a lane's tally or a chat request used: the tokens, of the input what the
    vendor read from / wrote to its prompt cache, and the hosted tool calls it bills. The one
    place the four are added up, written (`to_fields`, `to_tally`) and read back
    (`from_fields`, `from_tally`)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache: CacheTokens = NO_CACHE_TOKENS
    tool_uses: ToolUses = NO_TOOL_USES

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cache + other.cache,
            self.tool_uses + other.tool_uses,
        )

    def to_fields(self) -> UsageFields:
        tokens: UsageFields = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }
        return {**tokens, **self.cache.to_fields(), **self.tool_uses.to_usage()}

    @classmethod
    def from_fields(cls, usage: UsageFields | Mapping[str, int]) -> TokenUsage:
        """The usage a result line, record or checkpoint holds (a count absent: zero)."""
        return cls(
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
            CacheTokens.from_fields(usage),
            ToolUses.from_usage(cast(ToolFields, usage)),  # it checks each count
        )

    def to_tally(self) -> dict[str, int]:
        """The usage as lane tallies and lane records keep it, one flat map of counts: the
        tokens, and the cache counts and tool calls (`tool_uses.<tool>`) when there are any."""
        tokens = {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}
        return {**tokens, **self.cache.counts(), **self.tool_uses.to_tally()}

    @classmethod
    def from_tally(cls, tally: Mapping[str, int]) -> TokenUsage:
        return cls(
            int(tally.get("prompt_tokens") or 0),
            int(tally.get("completion_tokens") or 0),
            CacheTokens.from_fields(tally),
            ToolUses.from_tally(tally),
        )


NO_USAGE = TokenUsage()


@dataclass(frozen=True)
class LaneUsage:
    """Tokens on one lane at that lane's locked batch prices (USD per million tokens).

    `prompt_tokens` is all input; `cache` the parts of it the vendor read from / wrote to
    its prompt cache, at their own locked prices. `fee_lane`: the lane whose control-plane
    fee the usage counts under when not its own (a failover successor: the planned lane it
    took over from, domain/billing/settlement.py `charged_usage`)."""

    lane_id: str
    prompt_tokens: int
    output_tokens: int
    input_per_mtok: Decimal
    output_per_mtok: Decimal
    cache: CacheUse = NO_CACHE
    fee_lane: str | None = None
    # The hosted tool calls of the usage, each at its locked price (USD per 1,000 calls, by
    # tool); a call of a tool with no locked price costs nothing (docs/money.md).
    tool_uses: ToolUses = NO_TOOL_USES
    tool_prices: tuple[tuple[str, Decimal], ...] = ()

    @property
    def fee_identity(self) -> str:
        """The lane the control-plane fee counts: `fee_lane`, else the lane itself."""
        return self.fee_lane if self.fee_lane is not None else self.lane_id

    @property
    def cost(self) -> Decimal:
        tokens = token_cost(
            self.prompt_tokens,
            self.output_tokens,
            self.input_per_mtok,
            self.output_per_mtok,
            cache=self.cache,
        )
        return tokens + tool_cost(self.tool_uses, self.tool_prices)


class PriceEstimateView(TypedDict):
    """A quote's `pricing_estimate`, as shown and as its snapshot stores it."""

    provider_subtotal: MoneyView
    service_fee: MoneyView
    customer_discount: MoneyView
    total: MoneyView


@dataclass(frozen=True)
class PriceBreakdown:
    provider_subtotal: Money
    service_fee: Money
    customer_discount: Money  # the discount applied, which may be less than the one asked
    total: Money
    lane_count: int
    fee_pct: Decimal
    margin_floor_applied: bool  # the floor, not the rate, set the fee
    fee_kind: FeeKind = "batch"

    def to_api(self) -> PriceEstimateView:
        """The quote's `pricing_estimate` (and the receipt's settled figures)."""
        return {
            "provider_subtotal": self.provider_subtotal.to_api(),
            "service_fee": self.service_fee.to_api(),
            "customer_discount": self.customer_discount.to_api(),
            "total": self.total.to_api(),
        }

    def fee_basis(self, fees: FeeSchedule) -> FeeBasisView:
        """The fee schedule line behind the service fee: the receipt's `service_fee_basis`."""
        name = "workflow-product fee" if self.fee_kind == "workflow" else "standard batch fee"
        per_lane = Money.usd(fees.control_plane_fee_per_lane_usd)
        lanes = f"{self.lane_count} lane{'' if self.lane_count == 1 else 's'}"
        rate = f"{_pct(self.fee_pct)}% {name}"
        on_subtotal = f"of the provider subtotal ({money_text(self.provider_subtotal)})"
        per_lanes = f"{money_text(per_lane)} for each lane that delivered answers ({lanes})"
        if self.margin_floor_applied:
            line = (
                f"Service fee {money_text(self.service_fee)}: the {_pct(fees.margin_floor_pct)}% margin "
                f"floor {on_subtotal}, more than the {rate} plus {per_lanes}."
            )
        else:
            line = f"Service fee {money_text(self.service_fee)}: the {rate} {on_subtotal} plus {per_lanes}."
        return {
            "fee": "workflow_product_fee" if self.fee_kind == "workflow" else "standard_batch_fee",
            "fee_pct": _pct(self.fee_pct),
            "control_plane_fee_per_lane": per_lane.to_api(),
            "lane_count": self.lane_count,
            "margin_floor_pct": _pct(fees.margin_floor_pct),
            "margin_floor_applied": self.margin_floor_applied,
            "schedule_line": line,
        }


class FeeBasisView(TypedDict):
    """How the service fee was reached, in the terms of the fee schedule (GET /v1/pricing/fees)."""

    fee: Literal["standard_batch_fee", "workflow_product_fee"]
    fee_pct: str
    control_plane_fee_per_lane: MoneyView
    lane_count: int
    margin_floor_pct: str
    margin_floor_applied: bool
    schedule_line: str


def _pct(value: Decimal) -> str:
    return format(value.normalize(), "f")


def token_cost(
    prompt_tokens: int,
    output_tokens: int,
    input_per_mtok: Decimal,
    output_per_mtok: Decimal,
    *,
    cache: CacheUse = NO_CACHE,
) -> Decimal:
    """Exact USD for the tokens: no rounding here, callers round once at the end. Of the
    `prompt_tokens` (all input), the cache reads and writes are charged at their own prices
    and the rest at the input price."""
    cached, written = cache.cached_input_tokens, cache.cache_write_input_tokens
    fresh = max(0, prompt_tokens - cached - written)
    cached_price = input_per_mtok if cache.cached_input_per_mtok is None else cache.cached_input_per_mtok
    write_price = (
        input_per_mtok if cache.cache_write_input_per_mtok is None else cache.cache_write_input_per_mtok
    )
    input_cost = fresh * input_per_mtok + cached * cached_price + written * write_price
    return (input_cost + output_tokens * output_per_mtok) / _MILLION


def tool_cost(uses: ToolUses, per_1k_calls: Iterable[tuple[str, Decimal]]) -> Decimal:
    """Exact USD for hosted tool calls at prices per 1,000 calls, by tool (a tool without a
    price: nothing)."""
    prices = dict(per_1k_calls)
    return sum((count * prices[tool] for tool, count in uses.calls if tool in prices), Decimal(0)) / 1000


def tool_price_key(tool: str) -> str:
    """A hosted tool's price among a lane's locked `unit_prices`: USD per 1,000 calls."""
    return f"{tool}{_PER_1K_CALLS}"


def locked_tool_prices(unit_prices: Mapping[str, str]) -> tuple[tuple[str, Decimal], ...]:
    """The hosted tool prices a lane's `unit_prices` locked (`tool_price_key`), by tool."""
    return tuple(
        sorted(
            (key.removesuffix(_PER_1K_CALLS), Decimal(str(value)))
            for key, value in unit_prices.items()
            if key.endswith(_PER_1K_CALLS)
        )
    )


_PER_1K_CALLS: Final = "_per_1k_calls"


def usage_cost(
    prices: UnitPrices,
    prompt_tokens: int,
    output_tokens: int,
    *,
    cached_input_tokens: int = 0,
    cache_write_input_tokens: int = 0,
) -> Decimal:
    """Exact USD for the tokens at one basis's unit prices (`LanePrice.direct` / `.batch`)."""
    return token_cost(
        prompt_tokens,
        output_tokens,
        prices.input_per_mtok,
        prices.output_per_mtok,
        cache=CacheUse.priced(cached_input_tokens, cache_write_input_tokens, prices),
    )


def batch_cost(prompt_tokens: int, output_tokens: int, price: LanePrice) -> Decimal:
    return token_cost(prompt_tokens, output_tokens, price.batch_input_per_mtok, price.batch_output_per_mtok)


def fee_pct_for(fees: FeeSchedule, fee_kind: FeeKind) -> Decimal:
    return fees.workflow_product_fee_pct if fee_kind == "workflow" else fees.standard_batch_fee_pct


def price_usage(
    usage: Iterable[LaneUsage],
    fees: FeeSchedule,
    *,
    fee_kind: FeeKind = "batch",
    customer_discount: Money | None = None,
) -> PriceBreakdown:
    """Price tokens on lanes: estimated ones for a quote, actual ones at the quote's locked
    prices for a settlement (pass only the lanes that ran: the control-plane fee is per lane
    run; a failover successor's usage carries its planned lane as `fee_lane`, so it adds no
    lane)."""
    lanes = list(usage)
    subtotal = Money.usd_ceil(sum((lane.cost for lane in lanes), Decimal(0)))
    lane_count = len({lane.fee_identity for lane in lanes})
    fee_pct = fee_pct_for(fees, fee_kind)
    rate_fee = Money.usd_ceil(subtotal.amount * fee_pct / _HUNDRED) + Money.usd_ceil(
        fees.control_plane_fee_per_lane_usd * lane_count
    )
    floor_fee = Money.usd_ceil(subtotal.amount * fees.margin_floor_pct / _HUNDRED)
    service_fee = max(rate_fee, floor_fee)
    asked = customer_discount or Money.zero()
    if asked.micros < 0:
        raise ValueError("a customer discount cannot be negative")
    applied = min(asked, service_fee - floor_fee)
    return PriceBreakdown(
        provider_subtotal=subtotal,
        service_fee=service_fee,
        customer_discount=applied,
        total=subtotal + service_fee - applied,
        lane_count=lane_count,
        fee_pct=fee_pct,
        margin_floor_applied=floor_fee > rate_fee,
        fee_kind=fee_kind,
    )


def split_subtotal(costs: Sequence[Decimal]) -> list[Money]:
    """Exact (non-negative) lane costs as whole micro-dollars that add up to the subtotal
    `price_usage` rounds their sum to (`ceil_µ$(Σ costs)`), by largest remainder: each cost
    rounded down, then one micro-dollar more to each of the costs with the largest
    remainders (ties: the earlier), as many as the subtotal has left. Each differs from its
    exact cost by less than a micro-dollar (a cost already whole is never raised)."""
    subtotal = Money.usd_ceil(sum(costs, Decimal(0))).micros
    scaled = [cost * MICROS_PER_USD for cost in costs]
    floors = [int(value.to_integral_value(rounding=ROUND_FLOOR)) for value in scaled]
    left = subtotal - sum(floors)
    by_remainder = sorted(range(len(costs)), key=lambda i: (floors[i] - scaled[i], i))
    raised = set(by_remainder[:left])
    return [Money(micros + (1 if i in raised else 0)) for i, micros in enumerate(floors)]


class PlannedUsage(Protocol):
    """A route plan as pricing sees it: the usage of its selected lanes (domain/routing/engine.py)."""

    def usage(self) -> list[LaneUsage]: ...


def estimate_price(
    plan: PlannedUsage,
    fees: FeeSchedule,
    *,
    fee_kind: FeeKind = "batch",
    customer_discount: Money | None = None,
) -> PriceBreakdown:
    """The quote's pricing estimate: the plan's selected lanes at their locked batch prices."""
    return price_usage(plan.usage(), fees, fee_kind=fee_kind, customer_discount=customer_discount)
