"""Usage: what an org was charged, by day, model and provider, with its tokens. Pure.

The ledger keeps one usage counter per (local day, model, provider) in the wallet's
partition (`USAGE#D#<yyyy-mm-dd>#<model>#<provider>`), moved by `ADD` in the SAME
transaction as the charge it counts (`adapters/dynamo/ledger.py`), so a settlement that
is replayed (resolved exactly once) never counts twice, and `GET /v1/usage` reads one
range of counters per request instead of the ledger's entries. This module says:

- what one settlement adds to the counters (`usage_counters`): the amount actually charged
  (after the fee, the discount and the reservation cap) apportioned to its lines by their
  provider cost, to the micro-dollar, so the counters of a charge add up to the charge
  exactly; at most `MAX_USAGE_COUNTERS` counters per charge (the transaction's item limit);
- the periods (`period_window`): a calendar day or month in the billing controls' zone;
- how the counters of a period add up into the answer (`summarize`, `UsageReport`).

docs/usage.md has the long form.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Final, Literal, NotRequired, TypedDict, get_args

from batchroute.clock import isoformat
from batchroute.domain.billing.savings import References, Savings, SavingsView, TokenCounts, counter_savings
from batchroute.domain.billing.settlement import lane_usage
from batchroute.domain.catalog.catalog import Lane
from batchroute.domain.catalog.pricing import (
    CacheTokens,
    CacheTotals,
    TokenUsage,
    tool_cost,
    usage_cost,
)
from batchroute.domain.routing.lane_plan import LaneRecord
from batchroute.money import Money, MoneyView

UsagePeriod = Literal["daily", "monthly"]
USAGE_PERIODS: tuple[str, ...] = get_args(UsagePeriod)
USAGE_DAY_PREFIX: Final = "USAGE#D#"
# Counters one charge may move: the settle transaction holds 5-7 items of its own (and a
# chat record), far below DynamoDB's 100; the rest is headroom for other writers.
MAX_USAGE_COUNTERS: Final = 50
# Where the lines beyond MAX_USAGE_COUNTERS - 1 (the smallest) are folded.
OTHER: Final = "other"
# A charge with no line to attribute it to (none known at settle time).
UNATTRIBUTED: Final = "unattributed"


@dataclass(frozen=True)
class UsageLine:
    """One model on one provider within a charge: its own cost before fees and capping (the
    weight the charge is apportioned by), its tokens, and how many requests it answered."""

    model: str
    provider: str
    cost: Decimal = Decimal(0)
    input_tokens: int = 0  # all input
    output_tokens: int = 0
    batch_items: int = 0  # completed items of a batch
    chat_requests: int = 0  # chat completions (direct or queued)
    # Of input_tokens, what the vendor read from / wrote to its prompt cache.
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    # Of `cost`, the hosted tool calls', in micro-dollars rounded up (the savings set it on
    # the reference side too: domain/billing/savings.py TokenCounts.tool_usd).
    tool_cost_micros: int = 0


# The whole-number counts a usage line and the usage figures both carry, added field by field.
COUNT_FIELDS: Final = (
    "input_tokens",
    "output_tokens",
    "batch_items",
    "chat_requests",
    "cached_input_tokens",
    "cache_write_input_tokens",
    "tool_cost_micros",
)


def _counts(*parts: UsageLine | UsageFigures) -> dict[str, int]:
    """The `COUNT_FIELDS` of `parts`, summed (one part: its own counts)."""
    return {name: sum(getattr(part, name) for part in parts) for name in COUNT_FIELDS}


@dataclass(frozen=True)
class UsageCharge:
    """What a settlement passes the ledger: the local day the charge counts on (the billing
    controls' zone at the moment of the charge) and its lines."""

    day: str  # yyyy-mm-dd
    lines: tuple[UsageLine, ...]


@dataclass(frozen=True)
class ReservationCharge:
    """What resolves a pending reservation with a charge (`settle`), exactly once: `charge`
    (capped at the reservation, the rest of the cost absorbed) with the rest released, added
    to the spend counters `period_keys` (the daily and monthly keys of `at` in the billing
    controls' zone); `usage` (the charge's day and lines) moves the usage counters with it."""

    reservation_id: str
    charge: Money
    at: str
    period_keys: tuple[str, ...]
    memo: str = ""
    usage: UsageCharge | None = None


class TokensView(CacheTotals):
    """Of the input, what the vendor read from / wrote to its prompt cache (`CacheTotals`,
    when any)."""

    input: int  # all input
    output: int
    total: int


class RequestsView(TypedDict):
    batch_items: int
    chat: int
    total: int


class FiguresView(TypedDict):
    spend: MoneyView
    tokens: TokensView
    requests: RequestsView
    savings: SavingsView  # the spend beside the same tokens at the reference prices


class ModelFiguresView(FiguresView):
    model: str


class ProviderFiguresView(FiguresView):
    provider: str


class DayView(FiguresView):
    date: str
    by_model: list[ModelFiguresView]
    by_provider: list[ProviderFiguresView]


class PeriodUsageView(FiguresView):
    start_date: str
    end_date: str
    starts_at: str
    ends_at: str
    by_day: list[DayView]
    by_model: list[ModelFiguresView]
    by_provider: list[ProviderFiguresView]


class UsageReportView(TypedDict):
    object: Literal["usage"]
    org_id: str
    balance: MoneyView
    reserved: MoneyView
    available: MoneyView
    period: UsagePeriod
    timezone: str
    current_period: PeriodUsageView
    previous_period: PeriodUsageView
    generated_at: str
    reference_prices_as_of: NotRequired[str]  # the date of the prices `savings` compares with


@dataclass(frozen=True)
class UsageFigures:
    """Additive figures: one counter's, or a sum of them."""

    cost_micros: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    batch_items: int = 0
    chat_requests: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    tool_cost_micros: int = 0  # of the spend before fees, the hosted tool calls' (for savings)
    # Worked out when the report is read (`UsageCounter.with_savings`), never stored.
    savings: Savings = field(default_factory=Savings)

    def __add__(self, other: UsageFigures) -> UsageFigures:
        return UsageFigures(
            cost_micros=self.cost_micros + other.cost_micros,
            savings=self.savings + other.savings,
            **_counts(self, other),
        )

    @property
    def empty(self) -> bool:
        return self == UsageFigures()

    def to_api(self) -> FiguresView:
        tokens: TokensView = {
            "input": self.input_tokens,
            "output": self.output_tokens,
            "total": self.input_tokens + self.output_tokens,
            **CacheTokens(self.cached_input_tokens, self.cache_write_input_tokens).to_totals(),
        }
        return {
            "spend": Money(self.cost_micros).to_api(),
            "tokens": tokens,
            "requests": {
                "batch_items": self.batch_items,
                "chat": self.chat_requests,
                "total": self.batch_items + self.chat_requests,
            },
            "savings": self.savings.to_api(),
        }


@dataclass(frozen=True)
class UsageCounter:
    """One counter: a (day, model, provider) and its figures (what a charge adds to it, or
    what it holds when read back)."""

    day: str
    model: str
    provider: str
    figures: UsageFigures

    @property
    def sort_key(self) -> str:
        return usage_sort_key(self.day, self.model, self.provider)

    def with_savings(self, references: References) -> UsageCounter:
        """The counter with its tokens priced at its model's reference prices beside its spend."""
        f = self.figures
        tokens = TokenCounts(
            f.input_tokens,
            f.output_tokens,
            f.cached_input_tokens,
            f.cache_write_input_tokens,
            tool_usd=Money(f.tool_cost_micros).amount,
        )
        return replace(
            self, figures=replace(f, savings=counter_savings(references, self.model, tokens, f.cost_micros))
        )


def usage_sort_key(day: str, model: str, provider: str) -> str:
    """`USAGE#D#<day>#<model>#<provider>`, with `%` and `#` escaped in the names, so two
    different (model, provider) pairs never share an item (one transaction may not touch an
    item twice)."""
    return f"{USAGE_DAY_PREFIX}{day}#{_key_part(model)}#{_key_part(provider)}"


def _key_part(name: str) -> str:
    return name.replace("%", "%25").replace("#", "%23")


def usage_day(at: datetime, timezone: str) -> str:
    """The local date of the instant `at` in `timezone` (the counters' day)."""
    if at.tzinfo is None:
        raise ValueError("a usage day needs an aware datetime")
    return f"{at.astimezone(zoneinfo.ZoneInfo(timezone)):%Y-%m-%d}"


# -- what one charge adds ------------------------------------------------------------------
def costs_only(charge: UsageCharge) -> UsageCharge:
    """The charge's lines with their costs (the apportioning weights) and no counts: what a
    further reservation of the same work settles with (a rescue's overage hold), so its
    charge reaches the cost counters while the tokens and items are counted once."""
    return UsageCharge(
        day=charge.day,
        lines=tuple(
            UsageLine(model=line.model, provider=line.provider, cost=line.cost) for line in charge.lines
        ),
    )


def usage_counters(
    charge: UsageCharge, charged_micros: int, *, max_counters: int = MAX_USAGE_COUNTERS
) -> list[UsageCounter]:
    """The counters a charge of `charged_micros` moves: its lines merged per (model,
    provider), at most `max_counters` (the smallest folded into `other`/`other`), and the
    charge apportioned by the lines' costs with the largest-remainder method, so the
    counters' costs add up to `charged_micros` exactly. Lines that cost nothing share by
    their tokens, then equally; a charge without lines counts as `unattributed`."""
    if charged_micros < 0:
        raise ValueError("a charge is never negative")
    if max_counters < 1:
        raise ValueError("at least one counter")
    lines = _bounded(_merged(charge.lines), max_counters)
    if not lines:
        if charged_micros == 0:
            return []
        lines = [UsageLine(model=UNATTRIBUTED, provider=UNATTRIBUTED)]
    costs = _apportion(charged_micros, _weights(lines))
    return [
        UsageCounter(
            day=charge.day,
            model=line.model,
            provider=line.provider,
            figures=UsageFigures(cost_micros=cost, savings=Savings(), **_counts(line)),
        )
        for line, cost in zip(lines, costs, strict=True)
        if cost or not _idle(line)
    ]


def _idle(line: UsageLine) -> bool:
    return not (line.input_tokens or line.output_tokens or line.batch_items or line.chat_requests)


def _merged(lines: Iterable[UsageLine]) -> list[UsageLine]:
    merged: dict[tuple[str, str], UsageLine] = {}
    for line in lines:
        key = (line.model or UNATTRIBUTED, line.provider or UNATTRIBUTED)
        merged[key] = _plus(merged.get(key), line, *key)
    return sorted(merged.values(), key=lambda x: (x.model, x.provider))


def _plus(a: UsageLine | None, b: UsageLine, model: str, provider: str) -> UsageLine:
    if a is None:
        a = UsageLine(model=model, provider=provider)
    return UsageLine(model=model, provider=provider, cost=a.cost + b.cost, **_counts(a, b))


def _bounded(lines: list[UsageLine], max_counters: int) -> list[UsageLine]:
    if len(lines) <= max_counters:
        return lines
    ranked = sorted(lines, key=lambda x: (-x.cost, -(x.input_tokens + x.output_tokens), x.model, x.provider))
    kept, folded = ranked[: max_counters - 1], ranked[max_counters - 1 :]
    other: UsageLine | None = None
    for line in folded:
        other = _plus(other, line, OTHER, OTHER)
    assert other is not None
    # `other` may also be a real (model, provider) name among the kept: merge again.
    return _merged([*kept, other])


def _weights(lines: Sequence[UsageLine]) -> list[Decimal]:
    costs = [max(line.cost, Decimal(0)) for line in lines]
    if any(costs):
        return costs
    tokens = [Decimal(line.input_tokens + line.output_tokens) for line in lines]
    if any(tokens):
        return tokens
    return [Decimal(1)] * len(lines)


def _apportion(total: int, weights: Sequence[Decimal]) -> list[int]:
    """Integers proportional to `weights` adding up to `total` (largest remainder; ties to
    the earlier line, so the split is deterministic)."""
    whole = sum(weights, Decimal(0))
    exact = [total * w / whole for w in weights]
    parts = [int(x) for x in exact]  # floor: every x >= 0
    short = total - sum(parts)
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - parts[i]), i))
    for i in order[:short]:
        parts[i] += 1
    return parts


# -- periods -------------------------------------------------------------------------------
@dataclass(frozen=True)
class PeriodWindow:
    """A calendar day or month in a zone: local dates `start`..`end` (inclusive) and the
    instants they span (`starts_at` inclusive, `ends_at` exclusive)."""

    period: UsagePeriod
    timezone: str
    start: date
    end: date

    @property
    def starts_at(self) -> datetime:
        return _local_midnight(self.start, self.timezone)

    @property
    def ends_at(self) -> datetime:
        return _local_midnight(self.end + timedelta(days=1), self.timezone)

    def days(self, *, through: date | None = None) -> list[date]:
        """The local dates of the window, up to `through` (today, for the current one)."""
        last = self.end if through is None else min(self.end, through)
        count = (last - self.start).days + 1
        return [self.start + timedelta(days=i) for i in range(max(count, 0))]

    def previous(self) -> PeriodWindow:
        before = self.start - timedelta(days=1)
        start = before if self.period == "daily" else before.replace(day=1)
        return PeriodWindow(self.period, self.timezone, start, before)


def _local_midnight(day: date, timezone: str) -> datetime:
    return datetime.combine(day, time(0), tzinfo=zoneinfo.ZoneInfo(timezone)).astimezone(UTC)


def period_window(period: UsagePeriod, now: datetime, timezone: str) -> PeriodWindow:
    """The day or month that `now` falls in, by its local date in `timezone`."""
    if now.tzinfo is None:
        raise ValueError("a period needs an aware datetime")
    today = now.astimezone(zoneinfo.ZoneInfo(timezone)).date()
    if period == "daily":
        return PeriodWindow(period, timezone, today, today)
    first = today.replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    return PeriodWindow(period, timezone, first, following - timedelta(days=1))


# -- the report ----------------------------------------------------------------------------
Ranked = tuple[tuple[str, UsageFigures], ...]


@dataclass(frozen=True)
class PeriodUsage:
    window: PeriodWindow
    total: UsageFigures
    by_day: tuple[tuple[date, UsageFigures], ...]
    by_model: Ranked
    by_provider: Ranked
    # Each day split by model and by provider (the console's stacked chart); days without
    # spend have no entry.
    day_models: Mapping[date, Ranked] = field(default_factory=dict)
    day_providers: Mapping[date, Ranked] = field(default_factory=dict)

    def to_api(self) -> PeriodUsageView:
        w = self.window
        return {
            "start_date": w.start.isoformat(),
            "end_date": w.end.isoformat(),
            "starts_at": isoformat(w.starts_at),
            "ends_at": isoformat(w.ends_at),
            **self.total.to_api(),
            "by_day": [
                {
                    "date": d.isoformat(),
                    **f.to_api(),
                    "by_model": [{"model": m, **g.to_api()} for m, g in self.day_models.get(d, ())],
                    "by_provider": [{"provider": p, **g.to_api()} for p, g in self.day_providers.get(d, ())],
                }
                for d, f in self.by_day
            ],
            "by_model": [{"model": m, **f.to_api()} for m, f in self.by_model],
            "by_provider": [{"provider": p, **f.to_api()} for p, f in self.by_provider],
        }


def summarize(counters: Iterable[UsageCounter], window: PeriodWindow, *, today: date) -> PeriodUsage:
    """The counters of `window`'s days added up: the total, every day from the start up to
    `today` (zeros included, each split by model and by provider), and per model and per
    provider (dearest first)."""
    days = window.days(through=today)
    first, last = window.start.isoformat(), window.end.isoformat()
    by_day: dict[str, UsageFigures] = {d.isoformat(): UsageFigures() for d in days}
    by_model: dict[str, UsageFigures] = {}
    by_provider: dict[str, UsageFigures] = {}
    day_models: dict[str, dict[str, UsageFigures]] = {}
    day_providers: dict[str, dict[str, UsageFigures]] = {}
    total = UsageFigures()
    for counter in counters:
        if not first <= counter.day <= last:
            continue
        f = counter.figures
        total += f
        by_day[counter.day] = by_day.get(counter.day, UsageFigures()) + f
        by_model[counter.model] = by_model.get(counter.model, UsageFigures()) + f
        by_provider[counter.provider] = by_provider.get(counter.provider, UsageFigures()) + f
        models = day_models.setdefault(counter.day, {})
        models[counter.model] = models.get(counter.model, UsageFigures()) + f
        providers = day_providers.setdefault(counter.day, {})
        providers[counter.provider] = providers.get(counter.provider, UsageFigures()) + f
    return PeriodUsage(
        window=window,
        total=total,
        by_day=tuple((date.fromisoformat(d), f) for d, f in sorted(by_day.items())),
        by_model=_ranked(by_model),
        by_provider=_ranked(by_provider),
        day_models={date.fromisoformat(d): _ranked(groups) for d, groups in day_models.items()},
        day_providers={date.fromisoformat(d): _ranked(groups) for d, groups in day_providers.items()},
    )


def _ranked(groups: Mapping[str, UsageFigures]) -> tuple[tuple[str, UsageFigures], ...]:
    return tuple(
        sorted(
            groups.items(),
            key=lambda kv: (-kv[1].cost_micros, -(kv[1].input_tokens + kv[1].output_tokens), kv[0]),
        )
    )


@dataclass(frozen=True)
class UsageReport:
    """`GET /v1/usage`: the wallet now and the spend of the current and previous period."""

    org_id: str
    balance: Money
    reserved: Money
    current: PeriodUsage
    previous: PeriodUsage
    generated_at: datetime
    period: UsagePeriod = field(default="monthly")
    reference_prices_as_of: str | None = None

    @property
    def available(self) -> Money:
        return self.balance - self.reserved

    def to_api(self) -> UsageReportView:
        view: UsageReportView = {
            "object": "usage",
            "org_id": self.org_id,
            "balance": self.balance.to_api(),
            "reserved": self.reserved.to_api(),
            "available": self.available.to_api(),
            "period": self.period,
            "timezone": self.current.window.timezone,
            "current_period": self.current.to_api(),
            "previous_period": self.previous.to_api(),
            "generated_at": isoformat(self.generated_at),
        }
        if self.reference_prices_as_of:
            view["reference_prices_as_of"] = self.reference_prices_as_of
        return view


# -- what a settlement knows -------------------------------------------------------------
def batch_usage_lines(
    lanes: Iterable[LaneRecord], tallies: Mapping[str, Mapping[str, int]], *, chat: bool = False
) -> tuple[UsageLine, ...]:
    """The lines of a batch's charge: one per lane that delivered completed rows (the rows
    that are charged), with its model, provider, tokens and cost at its locked prices. A
    queued chat request (`chat`) counts its completed item as a chat request."""
    lines = []
    for lane in lanes:
        tally = tallies.get(lane.lane_key) or {}
        completed = int(tally.get("completed") or 0)
        if completed <= 0:
            continue
        usage = lane_usage(lane, tally)
        lines.append(
            UsageLine(
                model=str(lane.model or UNATTRIBUTED),
                provider=str(lane.provider or UNATTRIBUTED),
                cost=usage.cost,
                input_tokens=usage.prompt_tokens,
                output_tokens=usage.output_tokens,
                cached_input_tokens=usage.cache.cached_input_tokens,
                cache_write_input_tokens=usage.cache.cache_write_input_tokens,
                tool_cost_micros=Money.usd_ceil(tool_cost(usage.tool_uses, usage.tool_prices)).micros,
                batch_items=0 if chat else completed,
                chat_requests=completed if chat else 0,
            )
        )
    return tuple(lines)


def direct_usage_line(lane: Lane, usage: TokenUsage) -> UsageLine:
    """One direct chat request on `lane`: its tokens, each kind at the lane's direct price,
    and its hosted tool calls at the lane's prices (the request's charge is this cost
    rounded up, at most its hold)."""
    cache = usage.cache
    tokens = usage_cost(
        lane.price.direct,
        usage.prompt_tokens,
        usage.completion_tokens,
        cached_input_tokens=cache.cached_input_tokens,
        cache_write_input_tokens=cache.cache_write_input_tokens,
    )
    tools = tool_cost(usage.tool_uses, lane.tool_prices_per_1k)
    return UsageLine(
        model=lane.model,
        provider=lane.provider,
        cost=tokens + tools,
        tool_cost_micros=Money.usd_ceil(tools).micros,
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        cached_input_tokens=cache.cached_input_tokens,
        cache_write_input_tokens=cache.cache_write_input_tokens,
        chat_requests=1,
    )
