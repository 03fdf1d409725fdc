"""Small catalogs built per test, so routing, preflight and pricing tests never depend on the
built-in catalog data (which changes with prices)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from batchroute.clock import isoformat
from batchroute.domain.catalog.catalog import (
    Catalog,
    FeeSchedule,
    HostedTool,
    Lane,
    LaneLive,
    LanePrice,
    Model,
    Operation,
    PrivacyTier,
    Provider,
    ProviderKind,
    RuntimeCapability,
)
from batchroute.domain.routing.items import ModelGroup, read_item

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CHAT = "m-chat"
EMBED = "m-embed"

FEES = FeeSchedule(
    standard_batch_fee_pct=Decimal("5.90"),
    workflow_product_fee_pct=Decimal("11.80"),
    margin_floor_pct=Decimal("5.90"),
    control_plane_fee_per_lane_usd=Decimal("0.01"),
    effective_at="2026-01-01T00:00:00Z",
)


def provider(
    slug: str,
    *,
    kind: ProviderKind = "public_host",
    privacy: tuple[PrivacyTier, ...] = ("standard",),
    retention_days: int = 30,
    regions: tuple[str, ...] = ("us",),
    enabled: bool = True,
    launched: bool = True,
) -> Provider:
    return Provider(
        slug=slug,
        display_name=slug.title(),
        kind=kind,
        execution_mode="batch_api" if kind == "vendor_batch" else "sync",
        regions=regions,
        privacy_tiers=privacy,
        data_retention_days=retention_days,
        enabled=enabled,
        launched=launched,
    )


def lane(
    provider_slug: str,
    model: str = CHAT,
    *,
    batch_in: str = "1.00",
    batch_out: str = "2.00",
    window: int = 128_000,
    max_output: int = 16_384,
    operations: tuple[Operation, ...] = ("responses",),
    tools: tuple[HostedTool, ...] = (),
    capabilities: tuple[RuntimeCapability, ...] = (),
    reliability: str = "0.99",
) -> Lane:
    return Lane(
        provider=provider_slug,
        model=model,
        price=LanePrice(
            input_per_mtok=Decimal(batch_in) * 2,
            output_per_mtok=Decimal(batch_out) * 2,
            batch_input_per_mtok=Decimal(batch_in),
            batch_output_per_mtok=Decimal(batch_out),
        ),
        context_window=window,
        max_output_tokens=max_output,
        operations=operations,
        runtime_capabilities=capabilities,
        hosted_tools=tools,
        reliability=Decimal(reliability),
    )


def catalog(providers: Sequence[Provider], lanes: Sequence[Lane], *, fees: FeeSchedule = FEES) -> Catalog:
    """A catalog whose models are exactly the ones the lanes serve."""
    operations: dict[str, set[Operation]] = {}
    for one in lanes:
        operations.setdefault(one.model, set()).update(one.operations)
    models = tuple(
        Model(
            id=model_id,
            title=model_id,
            summary="",
            description="",
            tags=(),
            operations=tuple(sorted(ops)),
            runtime_capabilities=(),
            open_weight=True,
            family="test",
        )
        for model_id, ops in sorted(operations.items())
    )
    return Catalog(
        version="test-1",
        pricing_updated_at="2026-02-01",
        providers=tuple(providers),
        models=models,
        lanes=tuple(lanes),
        workflow_products=(),
        fees=fees,
    )


def live(
    lanes: Iterable[Lane],
    *,
    capacity: int = 1_000_000,
    age_seconds: int = 30,
    overrides: dict[str, tuple[int, int]] | None = None,
) -> dict[str, LaneLive]:
    """Fresh heartbeats and room for every lane; `overrides` maps lane_id -> (capacity, age)."""
    states = {}
    for one in lanes:
        room, age = (overrides or {}).get(one.lane_id, (capacity, age_seconds))
        states[one.lane_id] = LaneLive(
            lane_id=one.lane_id,
            remaining_capacity_items=room,
            last_heartbeat_at=isoformat(NOW - timedelta(seconds=age)),
        )
    return states


def item(
    index: int, *, model: str = CHAT, text: str = "Summarize this sentence.", **extra: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "customer_item_id": f"item-{index}",
        "operation": "responses",
        "model": model,
        "input": {"messages": [{"role": "user", "content": text}]},
    }
    body.update(extra)
    return body


def group_of(items: Iterable[dict[str, Any]]) -> ModelGroup:
    """The ModelGroup of valid items of one model (as the preflight would build it)."""
    group: ModelGroup | None = None
    for index, raw in enumerate(items):
        facts, problems = read_item(raw)
        assert facts is not None, problems
        if group is None:
            group = ModelGroup(model=facts.model, first_index=index)
        group.add(index, facts)
    assert group is not None
    return group


def chat_group(count: int, *, model: str = CHAT, **extra: Any) -> ModelGroup:
    return group_of(item(i, model=model, **extra) for i in range(count))
