"""The built-in catalog's invariants: what routing and the public catalog rely on."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from decimal import Decimal

import jsonschema  # a test-only dependency (it comes with moto); never imported by the service
import pytest

from batchroute.catalog import CATALOG_VERSION, PRICING_UPDATED_AT, builtin_catalog
from batchroute.domain.catalog.catalog import OPERATIONS, Catalog

CATALOG = builtin_catalog()


def test_catalog_is_versioned_and_cached() -> None:
    assert CATALOG.version == CATALOG_VERSION
    assert CATALOG.pricing_updated_at == PRICING_UPDATED_AT
    assert builtin_catalog() is CATALOG


def test_at_least_eight_providers_of_all_three_kinds() -> None:
    kinds = Counter(p.kind for p in CATALOG.providers)
    assert len(CATALOG.providers) >= 8
    assert set(kinds) == {"vendor_batch", "public_host", "edge"}
    assert kinds["vendor_batch"] >= 3 and kinds["public_host"] >= 4 and kinds["edge"] >= 2


def test_no_built_in_provider_declares_restricted() -> None:
    assert all("restricted" not in p.privacy_tiers for p in CATALOG.providers)


def test_confidential_providers_differ_in_retention_so_privacy_constrained_filters() -> None:
    confidential = [p for p in CATALOG.providers if "confidential" in p.privacy_tiers]
    zero_retention = [p for p in confidential if p.data_retention_days == 0]
    assert len(confidential) >= 4
    assert 0 < len(zero_retention) < len(confidential)
    assert all(p.data_retention_days == 0 for p in CATALOG.providers if p.kind == "edge")


def test_ids_are_unique() -> None:
    for ids in (
        [p.slug for p in CATALOG.providers],
        [m.id for m in CATALOG.models],
        [lane.lane_id for lane in CATALOG.lanes],
        [w.slug for w in CATALOG.workflow_products],
    ):
        assert len(ids) == len(set(ids))


def test_every_lane_names_a_known_provider_and_model_and_every_model_has_a_lane() -> None:
    for lane in CATALOG.lanes:
        assert CATALOG.provider(lane.provider) is not None, lane.lane_id
        assert CATALOG.model(lane.model) is not None, lane.lane_id
    assert all(CATALOG.lanes_for(m.id) for m in CATALOG.models)


def test_provider_slugs_cannot_be_confused_with_model_ids_in_lane_ids() -> None:
    # lane ids are `<provider>/<model>`; the live-state keys rely on slugs without `/` or `#`
    assert all("/" not in p.slug and "#" not in p.slug for p in CATALOG.providers)
    assert all("#" not in m.id for m in CATALOG.models)


def test_prices_are_positive_decimals_and_batch_never_costs_more() -> None:
    for lane in CATALOG.lanes:
        price = lane.price
        values = (
            price.input_per_mtok,
            price.output_per_mtok,
            price.batch_input_per_mtok,
            price.batch_output_per_mtok,
        )
        assert all(isinstance(v, Decimal) for v in values), lane.lane_id
        assert price.input_per_mtok > 0 and price.batch_input_per_mtok > 0, lane.lane_id
        if lane.operations == ("embeddings",):
            assert price.output_per_mtok == price.batch_output_per_mtok == 0  # no output tokens
        else:
            assert price.output_per_mtok > 0 and price.batch_output_per_mtok > 0, lane.lane_id
        assert price.batch_input_per_mtok <= price.input_per_mtok, lane.lane_id
        assert price.batch_output_per_mtok <= price.output_per_mtok, lane.lane_id


def test_vendor_batch_apis_charge_half_for_batch_work() -> None:
    for lane in CATALOG.lanes:
        if CATALOG.provider(lane.provider).kind == "vendor_batch":  # type: ignore[union-attr]
            assert lane.price.batch_input_per_mtok * 2 == lane.price.input_per_mtok


def test_an_open_weight_model_is_served_by_several_providers_at_different_prices() -> None:
    shared = [
        m
        for m in CATALOG.models
        if m.open_weight and len({lane.provider for lane in CATALOG.lanes_for(m.id)}) >= 3
    ]
    assert shared
    llama = CATALOG.lanes_for("meta-llama/Llama-3.3-70B-Instruct")
    assert {lane.provider for lane in llama} >= {"together", "groq", "fireworks", "deepinfra"}
    assert len({lane.price.batch_input_per_mtok for lane in llama}) >= 3


def test_lanes_stay_within_what_their_model_can_do() -> None:
    for lane in CATALOG.lanes:
        model = CATALOG.model(lane.model)
        assert model is not None
        assert set(lane.operations) <= set(model.operations), lane.lane_id
        assert set(lane.runtime_capabilities) <= set(model.runtime_capabilities), lane.lane_id
        assert set(lane.operations) <= set(OPERATIONS)
        assert lane.context_window > 0 and lane.daily_capacity_items > 0
        assert lane.max_output_tokens > 0 or lane.operations == ("embeddings",)
        assert Decimal(0) < lane.reliability <= 1


def test_every_operation_and_a_spread_of_tools_and_regions_exist() -> None:
    assert {op for lane in CATALOG.lanes for op in lane.operations} == set(OPERATIONS)
    tool_sets = {lane.hosted_tools for lane in CATALOG.lanes}
    assert () in tool_sets and len(tool_sets) >= 4  # the tool gate has lanes to reject
    assert {r for p in CATALOG.providers for r in p.regions} >= {"us", "eu"}
    edge = [lane for lane in CATALOG.lanes if CATALOG.provider(lane.provider).kind == "edge"]  # type: ignore[union-attr]
    assert max(lane.daily_capacity_items for lane in edge) < min(
        lane.daily_capacity_items for lane in CATALOG.lanes if lane not in edge
    )


def test_fee_schedule_is_the_published_one() -> None:
    fees = CATALOG.fees
    assert fees.standard_batch_fee_pct == Decimal("5.90")
    assert fees.workflow_product_fee_pct == Decimal("11.80")
    assert fees.margin_floor_pct == Decimal("5.90")
    assert fees.control_plane_fee_per_lane_usd > 0


@pytest.mark.parametrize("product", CATALOG.workflow_products, ids=lambda p: p.slug)
def test_workflow_product_schemas_are_valid_draft_2020_12(product: object) -> None:
    assert hasattr(product, "input_schema")
    for schema in (product.input_schema, product.output_schema):  # type: ignore[attr-defined]
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        jsonschema.Draft202012Validator.check_schema(schema)


def test_workflow_products_are_real_contracts_each_served_by_some_lane() -> None:
    from batchroute.domain.routing.lanes import lane_serves_product

    assert len(CATALOG.workflow_products) >= 3
    for product in CATALOG.workflow_products:
        assert product.sla_hours == 24
        assert product.route_policy["routing_mode"]
        able = [
            lane
            for lane in CATALOG.lanes
            if lane_serves_product(lane, CATALOG.provider(lane.provider), product)  # type: ignore[arg-type]
        ]
        assert able, product.slug
        assert len(able) < len(CATALOG.lanes), product.slug  # the route policy really filters


def test_a_sample_input_validates_against_its_schema() -> None:
    product = next(p for p in CATALOG.workflow_products if p.slug == "ticket-classification")
    validator = jsonschema.Draft202012Validator(product.input_schema)
    good = {"ticket": {"subject": "Refund", "body": "I was charged twice."}, "categories": ["billing", "bug"]}
    assert not list(validator.iter_errors(good))
    assert list(validator.iter_errors({"ticket": {"body": ""}, "categories": ["one"]}))


def test_catalog_type_is_the_domain_shape() -> None:
    assert isinstance(CATALOG, Catalog)


# -- The figures docs/catalog.md states about the built-in data ---------------------------

LLAMA_70B = "meta-llama/Llama-3.3-70B-Instruct"


def test_the_documented_counts() -> None:
    kinds = Counter(p.kind for p in CATALOG.providers)
    assert (len(CATALOG.providers), len(CATALOG.models), len(CATALOG.lanes)) == (10, 12, 30)
    assert len(CATALOG.workflow_products) == 4
    assert kinds == {"vendor_batch": 4, "public_host": 4, "edge": 2}


def test_llama_70b_is_served_by_seven_providers() -> None:
    providers = [lane.provider for lane in CATALOG.lanes_for(LLAMA_70B)]
    assert providers == ["bedrock", "together", "groq", "fireworks", "deepinfra", "edge-eu", "edge-us"]


def test_the_documented_privacy_tiers_and_launch_state() -> None:
    confidential = {p.slug for p in CATALOG.providers if "confidential" in p.privacy_tiers}
    zero = {slug for slug in confidential if CATALOG.provider(slug).data_retention_days == 0}  # type: ignore[union-attr]
    assert confidential == {"openai", "anthropic", "bedrock", "groq", "fireworks", "edge-eu", "edge-us"}
    assert zero == {"bedrock", "groq", "fireworks", "edge-eu", "edge-us"}
    assert [p.slug for p in CATALOG.providers if not p.launched] == ["edge-us"]
    assert all(p.enabled for p in CATALOG.providers)


def test_batch_prices_are_half_on_batch_apis_and_equal_when_called_per_item() -> None:
    for lane in CATALOG.lanes:
        provider = CATALOG.provider(lane.provider)
        assert provider is not None
        half = provider.execution_mode == "batch_api" and lane.lane_id != "together/BAAI/bge-large-en-v1.5"
        factor = Decimal("0.5") if half else 1
        assert lane.price.batch_input_per_mtok == lane.price.input_per_mtok * factor, lane.lane_id
        assert lane.price.batch_output_per_mtok == lane.price.output_per_mtok * factor, lane.lane_id


def test_the_edge_pools_differ_only_where_the_docs_say() -> None:
    # edge-us runs the same builds as edge-eu, without the embedding model
    eu = {lane.model: lane for lane in CATALOG.lanes if lane.provider == "edge-eu"}
    us = {lane.model: lane for lane in CATALOG.lanes if lane.provider == "edge-us"}
    assert set(eu) - set(us) == {"BAAI/bge-large-en-v1.5"}
    for model, lane in us.items():
        assert replace(lane, provider="edge-eu") == eu[model]
    assert all(
        lane.context_window == 32_768 for lane in (*eu.values(), *us.values()) if lane.max_output_tokens
    )


def test_lanes_are_listed_by_provider_then_model() -> None:
    providers = [p.slug for p in CATALOG.providers]
    models = [m.id for m in CATALOG.models]
    keys = [(providers.index(lane.provider), models.index(lane.model)) for lane in CATALOG.lanes]
    assert keys == sorted(keys)
