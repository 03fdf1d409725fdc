"""What routing saved (domain/billing/savings.py): every model's reference lane is in the
catalog, the reference cost is each token kind at the reference lane's own price, savings add
up, and a receipt with a model that has no reference shows no comparison."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from batchroute.catalog import builtin_catalog
from batchroute.domain.billing.savings import (
    References,
    Savings,
    TokenCounts,
    counter_savings,
    receipt_savings,
)
from batchroute.domain.billing.usage import UsageCounter, UsageFigures
from batchroute.money import Money
from tests.unit.test_catalog_loader import _edited, _fails

REFERENCES = References.of(builtin_catalog())
MODELS = sorted(REFERENCES.lanes)


def test_every_model_of_the_catalog_has_a_reference_lane_of_its_own() -> None:
    catalog = builtin_catalog()
    assert set(REFERENCES.lanes) == {model.id for model in catalog.models}
    for model, lane in REFERENCES.lanes.items():
        assert lane.model == model and lane.provider == catalog.model(model).reference_provider  # type: ignore[union-attr]
    assert REFERENCES.lanes["gpt-4o-mini"].provider == "openai"
    assert REFERENCES.lanes["claude-3-5-haiku"].provider == "anthropic"
    assert REFERENCES.prices_as_of == catalog.pricing_updated_at


def test_a_reference_provider_without_a_lane_of_the_model_fails_the_catalog(tmp_path: Path) -> None:
    folder = _edited(
        tmp_path,
        "models.toml",
        'family = "gpt-4o"\nreference_provider = "openai"',
        'family = "gpt-4o"\nreference_provider = "groq"',
    )
    _fails(folder, "models.toml", "gpt-4o-mini", "reference_provider 'groq'")


tokens = st.builds(
    lambda cached, written, fresh, output: TokenCounts(fresh + cached + written, output, cached, written),
    st.integers(0, 10**7),
    st.integers(0, 10**7),
    st.integers(0, 10**8),
    st.integers(0, 10**7),
)


@given(model=st.sampled_from(MODELS), used=tokens)
def test_the_reference_cost_is_each_token_kind_at_the_reference_price(model: str, used: TokenCounts) -> None:
    cost = REFERENCES.cost(model, used)
    assert cost is not None
    for prices, usd in (
        (REFERENCES.lanes[model].price.direct, cost.list_usd),
        (REFERENCES.lanes[model].price.batch, cost.batch_usd),
    ):
        fresh = used.prompt_tokens - used.cached_input_tokens - used.cache_write_input_tokens
        expected = (
            fresh * prices.input_per_mtok
            + used.cached_input_tokens * prices.cached_input_per_mtok
            + used.cache_write_input_tokens * prices.cache_write_input_per_mtok
            + used.output_tokens * prices.output_per_mtok
        ) / Decimal(1_000_000)
        assert usd == expected
    assert cost.batch_usd <= cost.list_usd


@given(
    parts=st.lists(st.tuples(st.sampled_from(MODELS), tokens, st.integers(0, 10**9)), min_size=1, max_size=6)
)
def test_savings_add_up_and_the_difference_is_reference_minus_charged(
    parts: list[tuple[str, TokenCounts, int]],
) -> None:
    each = [counter_savings(REFERENCES, model, used, charged) for model, used, charged in parts]
    whole = sum(each, Savings())
    assert whole.charged_micros == sum(charged for _, _, charged in parts)
    shown = whole.to_api()
    saved = Money.usd(shown["saved_vs_list_price"]["amount"]).micros
    assert saved == whole.reference_list_micros - whole.charged_micros
    # And a usage counter's figures carry the same savings through their sums
    counters = [
        UsageCounter(
            "2026-11-29",
            model,
            "p",
            UsageFigures(
                cost_micros=charged,
                input_tokens=used.prompt_tokens,
                output_tokens=used.output_tokens,
                cached_input_tokens=used.cached_input_tokens,
                cache_write_input_tokens=used.cache_write_input_tokens,
            ),
        )
        for model, used, charged in parts
    ]
    summed = sum((c.with_savings(REFERENCES).figures for c in counters), UsageFigures())
    assert summed.savings == whole


def test_work_on_a_model_without_a_reference_is_left_out_of_both_sides() -> None:
    used = TokenCounts(1_000, 100)
    assert counter_savings(REFERENCES, "other", used, 5_000) == Savings()
    assert receipt_savings(REFERENCES, [("gpt-4o-mini", used), ("retired-model", used)], Money(9)) is None
    shown = receipt_savings(REFERENCES, [("gpt-4o-mini", used), ("gpt-4o-mini", used)], Money(9))
    assert shown is not None and [row["model"] for row in shown["by_model"]] == ["gpt-4o-mini"]
    # 2,000 input at $0.15/M and 200 output at $0.60/M: $0.00042 list, half that in batch
    assert shown["reference_list_price"]["amount"] == "0.00042"
    assert shown["reference_batch_price"]["amount"] == "0.00021"
    assert shown["saved_vs_batch_price"]["amount"] == "0.000201"
