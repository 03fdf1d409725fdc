"""Lane availability and workflow-product fit (domain/routing/lanes.py), with an injected clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from batchroute.catalog import builtin_catalog
from batchroute.clock import FixedClock, isoformat
from batchroute.domain.catalog.catalog import LaneLive, Provider
from batchroute.domain.routing.gates import RoutingGuards
from batchroute.domain.routing.lanes import (
    fits_routing_mode,
    heartbeat_is_fresh,
    lane_serves_product,
    lane_status,
)

CATALOG = builtin_catalog()
START = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def _provider(slug: str) -> Provider:
    provider = CATALOG.provider(slug)
    assert provider is not None
    return provider


def _live(at: datetime, remaining: int = 100) -> LaneLive:
    return LaneLive(
        lane_id="groq/meta-llama/Llama-3.1-8B-Instruct",
        remaining_capacity_items=remaining,
        last_heartbeat_at=isoformat(at),
    )


def test_heartbeat_is_fresh_for_exactly_the_ttl_then_stale() -> None:
    # Given a heartbeat now and a clock we move
    clock = FixedClock(START)
    live = _live(clock.now())
    # Then it counts for the TTL, inclusive, and not a millisecond longer
    assert heartbeat_is_fresh(live, clock.now(), 300)
    clock.advance(seconds=300)
    assert heartbeat_is_fresh(live, clock.now(), 300)
    clock.advance(milliseconds=1)
    assert not heartbeat_is_fresh(live, clock.now(), 300)


def test_no_live_record_is_stale() -> None:
    assert not heartbeat_is_fresh(None, START, 300)
    assert lane_status(_provider("groq"), None, START, RoutingGuards()) == "stale_heartbeat"


def test_lane_status_order_guards_then_heartbeat_then_capacity() -> None:
    clock = FixedClock(START)
    groq = _provider("groq")
    fresh = _live(clock.now(), remaining=10)
    assert lane_status(groq, fresh, clock.now(), RoutingGuards()) == "available"
    assert lane_status(groq, _live(clock.now(), remaining=0), clock.now(), RoutingGuards()) == "capacity_full"
    assert (
        lane_status(replace(groq, enabled=False), fresh, clock.now(), RoutingGuards()) == "provider_disabled"
    )
    only_openai = RoutingGuards(provider_allowlist=("openai",))
    assert lane_status(groq, fresh, clock.now(), only_openai) == "not_in_allowlist"
    clock.advance(minutes=6)
    assert lane_status(groq, fresh, clock.now(), RoutingGuards()) == "stale_heartbeat"


def test_launch_guard_keeps_unlaunched_providers_out_only_when_active() -> None:
    edge_us = _provider("edge-us")
    assert not edge_us.launched
    live = _live(START)
    assert lane_status(edge_us, live, START, RoutingGuards(launch_provider_guard=True)) == "not_launched"
    assert lane_status(edge_us, live, START, RoutingGuards(launch_provider_guard=False)) == "available"


@pytest.mark.parametrize(
    ("mode", "slug", "fits"),
    [
        ("edge_only", "edge-eu", True),
        ("edge_only", "groq", False),
        ("public_only", "groq", True),
        ("public_only", "edge-eu", False),
        ("privacy_constrained", "fireworks", True),  # confidential, zero retention
        ("privacy_constrained", "openai", False),  # confidential, 30-day retention
        ("privacy_constrained", "deepinfra", False),  # zero retention, standard tier only
        ("cheapest", "google", True),
        ("hybrid", "edge-us", True),
    ],
)
def test_routing_modes_that_constrain_provider_kind(mode: str, slug: str, fits: bool) -> None:
    assert fits_routing_mode(_provider(slug), mode) is fits


def test_workflow_product_fit_checks_capabilities_context_and_policy() -> None:
    pii = next(p for p in CATALOG.workflow_products if p.slug == "pii-redaction")
    summary = next(p for p in CATALOG.workflow_products if p.slug == "document-summary")

    def able(product_slug: str) -> set[str]:
        product = next(p for p in CATALOG.workflow_products if p.slug == product_slug)
        return {
            lane.lane_id
            for lane in CATALOG.lanes
            if lane_serves_product(lane, _provider(lane.provider), product)
        }

    # PII redaction: confidential + zero retention + json_schema -> Fireworks and the edge pools only
    # (Bedrock's Llama has no structured output: issue 26)
    assert {lane.split("/")[0] for lane in able(pii.slug)} == {"fireworks", "edge-eu", "edge-us"}
    # Document summary needs 128k context: the 32k edge and Qwen lanes are out
    summary_lanes = able(summary.slug)
    assert "openai/gpt-4.1-mini" in summary_lanes
    assert not any(lane.startswith("edge-") or "Qwen" in lane for lane in summary_lanes)
    # No responses-only product is served by an embeddings lane
    every_able = {lane for product in CATALOG.workflow_products for lane in able(product.slug)}
    assert not any("bge" in lane or "embedding" in lane for lane in every_able)
