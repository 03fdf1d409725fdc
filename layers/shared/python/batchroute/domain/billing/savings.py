"""What routing saved: the same tokens at the reference vendor's published prices. Pure.

Every model of the catalog names a reference provider (models.toml `reference_provider`): its
maker where the maker sells it, else the reference host of the open weights. The tokens the
customer was charged for, each kind apart (fresh input, input read from and written to the
vendor's prompt cache, output), are priced at that provider's lane: its list (synchronous)
price and its batch price (lanes.toml, as of catalog.toml's `pricing_updated_at`; a lane
without cache prices bills cached tokens at its input price, as the vendor does). What the
wallet was charged (fees included, after discounts, capped at the reservation) is set beside
both; the difference is what routing saved, negative when the routed work cost more.

Work on a model without a reference (one no longer in the catalog; the usage counters'
`other` fold) is left out of both sides. docs/routing.md, "What routing saved", is the
long form.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TypedDict

from batchroute.domain.catalog.catalog import Catalog, Lane
from batchroute.domain.catalog.pricing import usage_cost
from batchroute.money import Money, MoneyView


@dataclass(frozen=True, slots=True)
class TokenCounts:
    """Charged tokens of one model: `prompt_tokens` is all input; of it, the cache reads and
    writes."""

    prompt_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    # The model's hosted tool calls at the prices they were charged (exact USD): set on both
    # sides, as routing does not change what a vendor bills for a search.
    tool_usd: Decimal = Decimal(0)


@dataclass(frozen=True, slots=True)
class ReferenceCost:
    """The tokens at the reference lane's list and batch prices (exact USD)."""

    list_usd: Decimal = Decimal(0)
    batch_usd: Decimal = Decimal(0)

    def __add__(self, other: ReferenceCost) -> ReferenceCost:
        return ReferenceCost(self.list_usd + other.list_usd, self.batch_usd + other.batch_usd)


@dataclass(frozen=True)
class References:
    """The reference lane of each model, and the date of the prices."""

    prices_as_of: str
    lanes: Mapping[str, Lane] = field(default_factory=dict)

    @classmethod
    def of(cls, catalog: Catalog) -> References:
        found = {model.id: catalog.reference_lane(model.id) for model in catalog.models}
        return cls(
            catalog.pricing_updated_at, {model: lane for model, lane in found.items() if lane is not None}
        )

    def cost(self, model: str | None, tokens: TokenCounts) -> ReferenceCost | None:
        """The tokens at the model's reference prices; None when the model has none."""
        lane = self.lanes.get(model or "")
        if lane is None:
            return None
        counts = (tokens.prompt_tokens, tokens.output_tokens)
        cache = {
            "cached_input_tokens": tokens.cached_input_tokens,
            "cache_write_input_tokens": tokens.cache_write_input_tokens,
        }
        return ReferenceCost(
            list_usd=usage_cost(lane.price.direct, *counts, **cache) + tokens.tool_usd,
            batch_usd=usage_cost(lane.price.batch, *counts, **cache) + tokens.tool_usd,
        )


class SavingsView(TypedDict):
    """The charge beside the same tokens at the reference prices."""

    reference_list_price: MoneyView
    reference_batch_price: MoneyView
    charged: MoneyView
    saved_vs_list_price: MoneyView
    saved_vs_batch_price: MoneyView


@dataclass(frozen=True, slots=True)
class Savings:
    """Additive: micro-dollars at the reference list and batch prices, and what was charged
    for the same work."""

    reference_list_micros: int = 0
    reference_batch_micros: int = 0
    charged_micros: int = 0

    @classmethod
    def of(cls, reference: ReferenceCost, charged: Money) -> Savings:
        return cls(
            Money.usd(reference.list_usd).micros, Money.usd(reference.batch_usd).micros, charged.micros
        )

    def __add__(self, other: Savings) -> Savings:
        return Savings(
            self.reference_list_micros + other.reference_list_micros,
            self.reference_batch_micros + other.reference_batch_micros,
            self.charged_micros + other.charged_micros,
        )

    def to_api(self) -> SavingsView:
        return {
            "reference_list_price": Money(self.reference_list_micros).to_api(),
            "reference_batch_price": Money(self.reference_batch_micros).to_api(),
            "charged": Money(self.charged_micros).to_api(),
            "saved_vs_list_price": Money(self.reference_list_micros - self.charged_micros).to_api(),
            "saved_vs_batch_price": Money(self.reference_batch_micros - self.charged_micros).to_api(),
        }


class ModelReferenceView(TypedDict):
    model: str
    reference_provider: str
    reference_list_price: MoneyView
    reference_batch_price: MoneyView


class ReceiptSavingsView(SavingsView):
    """A receipt's savings: the whole batch, the reference prices' date, and each model's
    reference cost."""

    prices_as_of: str
    by_model: list[ModelReferenceView]


def receipt_savings(
    references: References, used: Iterable[tuple[str | None, TokenCounts]], charged: Money
) -> ReceiptSavingsView | None:
    """The receipt's savings over its lanes' `(model, tokens)`; None when a lane's model has
    no reference (a part of the charge could not be compared)."""
    per_model: dict[str, ReferenceCost] = {}
    for model, tokens in used:
        cost = references.cost(model, tokens)
        if cost is None or model is None:
            return None
        per_model[model] = per_model.get(model, ReferenceCost()) + cost
    whole = sum(per_model.values(), ReferenceCost())
    return {
        **Savings.of(whole, charged).to_api(),
        "prices_as_of": references.prices_as_of,
        "by_model": [
            {
                "model": model,
                "reference_provider": references.lanes[model].provider,
                "reference_list_price": Money.usd(cost.list_usd).to_api(),
                "reference_batch_price": Money.usd(cost.batch_usd).to_api(),
            }
            for model, cost in sorted(per_model.items())
        ],
    }


def counter_savings(references: References, model: str, tokens: TokenCounts, charged_micros: int) -> Savings:
    """One usage counter's savings; nothing on either side when its model has no reference."""
    cost = references.cost(model, tokens)
    return Savings() if cost is None else Savings.of(cost, Money(charged_micros))
