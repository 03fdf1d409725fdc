"""Builds the Catalog from the data files in batchroute/catalog/data/ (docs/catalog.md).

catalog.toml            version and pricing_updated_at
providers.toml          one table per provider, with its lanes' shared defaults
models.toml             one table per model
lanes.toml              one row per (provider, model): price, limits, capacity, tools
workflow_products.json  the outcome contracts and their JSON Schemas
fees.toml               the fee schedule

Every row is checked as it becomes a domain object: a bad one raises DataError naming the
file, the row and the key. The result is ordered as the files are: providers and models in
file order, lanes by provider, then model.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from importlib.resources import files
from typing import TYPE_CHECKING, cast, get_args

from batchroute.catalog.datafile import DataError, Row, read_json, read_toml
from batchroute.domain.catalog.catalog import (
    CACHE_MARKERS,
    NO_BATCH_LIMITS,
    OPERATIONS,
    BatchLimits,
    Catalog,
    ExecutionMode,
    FeeSchedule,
    HostedTool,
    HostedToolPrice,
    Lane,
    LanePrice,
    Model,
    PrivacyTier,
    ProductRoutePolicy,
    PromptCacheRule,
    Provider,
    ProviderKind,
    RuntimeCapability,
    WorkflowProduct,
)
from batchroute.domain.routing.gates import ROUTING_MODES

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

PROVIDER_KINDS: tuple[ProviderKind, ...] = get_args(ProviderKind)
EXECUTION_MODES: tuple[ExecutionMode, ...] = get_args(ExecutionMode)
PRIVACY_TIERS: tuple[PrivacyTier, ...] = get_args(PrivacyTier)
RUNTIME_CAPABILITIES: tuple[RuntimeCapability, ...] = get_args(RuntimeCapability)
HOSTED_TOOLS: tuple[HostedTool, ...] = get_args(HostedTool)

_ONE = Decimal(1)


def data_folder() -> Traversable:
    return files("batchroute.catalog") / "data"


@dataclass(frozen=True)
class LaneDefaults:
    """What a provider's lanes share unless their row says otherwise (providers.toml)."""

    reliability: Decimal
    batch_price_factor: Decimal
    exposed_capabilities: tuple[RuntimeCapability, ...] | None  # None: all of the model's
    max_embedding_request_tokens: int | None = None  # the embeddings lanes' summed-token limit
    max_images: int | None = None  # the most images one request of a vision lane may hold
    max_image_bytes: int | None = None  # the most bytes one image may hold
    hosted_tool_prices: tuple[tuple[HostedTool, HostedToolPrice], ...] = ()  # by hosted tool


def load_catalog(folder: Traversable | None = None) -> Catalog:
    """The catalog the data files in `folder` (default: the package's) describe."""
    folder = folder or data_folder()
    manifest = read_toml(folder, "catalog.toml")
    version = manifest.text("version")
    pricing_updated_at = manifest.text("pricing_updated_at")
    manifest.close()
    providers = load_providers(folder)
    models = load_models(folder)
    lanes = load_lanes(folder, providers, models)
    _check_references(models, lanes)
    return Catalog(
        version=version,
        pricing_updated_at=pricing_updated_at,
        providers=tuple(provider for provider, _ in providers.values()),
        models=tuple(models.values()),
        lanes=lanes,
        workflow_products=load_workflow_products(folder),
        fees=load_fees(folder),
    )


def _check_references(models: dict[str, Model], lanes: tuple[Lane, ...]) -> None:
    """Every model's reference provider has a lane of it: its prices are the reference."""
    lane_ids = {lane.lane_id for lane in lanes}
    for model in models.values():
        if f"{model.reference_provider}/{model.id}" not in lane_ids:
            raise DataError(
                f"models.toml, models.{model.id!r}: reference_provider {model.reference_provider!r} "
                "has no lane of this model in lanes.toml"
            )


def load_providers(folder: Traversable) -> dict[str, tuple[Provider, LaneDefaults]]:
    top = read_toml(folder, "providers.toml")
    resolved: dict[str, Row] = {}
    providers: dict[str, tuple[Provider, LaneDefaults]] = {}
    for slug, row in top.tables("providers").items():
        if not slug or not all(c.isalnum() or c == "-" for c in slug):
            row.fail("slug", "a provider slug is letters, digits and '-' (it is part of lane ids and keys)")
        base = row.text("extends", "")
        if base:
            if base not in resolved:
                row.fail("extends", f"{base!r} is not a provider listed above this one")
            row = row.extend(resolved[base], link="extends")
        resolved[slug] = row
        defaults = row.table("lane_defaults")
        providers[slug] = (
            Provider(
                slug=slug,
                display_name=row.text("display_name"),
                kind=row.choice("kind", PROVIDER_KINDS),
                execution_mode=row.choice("execution_mode", EXECUTION_MODES),
                regions=row.texts("regions", non_empty=True),
                privacy_tiers=row.choices("privacy_tiers", PRIVACY_TIERS, non_empty=True),
                data_retention_days=row.integer("data_retention_days"),
                enabled=row.flag("enabled", True),
                launched=row.flag("launched", True),
                website=row.text("website", ""),
                max_concurrency=row.integer("max_concurrency", minimum=1),
                api_version=row.text("api_version"),
                control_api_version=row.text("control_api_version", ""),
                batch_limits=_batch_limits(row),
            ),
            LaneDefaults(
                reliability=_fraction(defaults, "reliability"),
                batch_price_factor=_fraction(defaults, "batch_price_factor"),
                exposed_capabilities=(
                    defaults.choices("exposed_capabilities", RUNTIME_CAPABILITIES)
                    if defaults.has("exposed_capabilities")
                    else None
                ),
                max_embedding_request_tokens=_request_tokens(defaults),
                max_images=defaults.integer("max_images_per_request", minimum=1)
                if defaults.has("max_images_per_request")
                else None,
                max_image_bytes=defaults.integer("max_image_bytes", minimum=1)
                if defaults.has("max_image_bytes")
                else None,
                hosted_tool_prices=_hosted_tool_prices(defaults),
            ),
        )
        defaults.close()
        row.close()
    top.close()
    return providers


def _hosted_tool_prices(defaults: Row) -> tuple[tuple[HostedTool, HostedToolPrice], ...]:
    """`hosted_tool_prices`: per hosted tool, `per_1k_calls` (USD) and `calls_per_item`."""
    if not defaults.has("hosted_tool_prices"):
        return ()
    prices: list[tuple[HostedTool, HostedToolPrice]] = []
    for name, row in defaults.tables("hosted_tool_prices").items():
        if name not in HOSTED_TOOLS:
            defaults.fail("hosted_tool_prices", f"{name!r} is not one of {', '.join(HOSTED_TOOLS)}")
        tool = HOSTED_TOOLS[HOSTED_TOOLS.index(name)]
        price = HostedToolPrice(row.decimal("per_1k_calls"), row.integer("calls_per_item", minimum=1))
        row.close()
        prices.append((tool, price))
    return tuple(sorted(prices))


def _batch_limits(row: Row) -> BatchLimits:
    """`batch_limits = { max_requests, max_bytes, max_embedding_inputs }`, each optional:
    what one vendor job may hold."""
    if not row.has("batch_limits"):
        return NO_BATCH_LIMITS
    limits = row.table("batch_limits")
    found = BatchLimits(
        max_requests=limits.integer("max_requests", minimum=1) if limits.has("max_requests") else None,
        max_bytes=limits.integer("max_bytes", minimum=1) if limits.has("max_bytes") else None,
        max_embedding_inputs=(
            limits.integer("max_embedding_inputs", minimum=1) if limits.has("max_embedding_inputs") else None
        ),
    )
    limits.close()
    return found


def load_models(folder: Traversable) -> dict[str, Model]:
    top = read_toml(folder, "models.toml")
    models: dict[str, Model] = {}
    for model_id, row in top.tables("models").items():
        if not model_id.strip() or "#" in model_id:
            row.fail("id", "a model id is non-blank and has no '#' (it is part of lane keys)")
        models[model_id] = Model(
            id=model_id,
            title=row.text("title"),
            summary=row.text("summary"),
            description=row.text("description"),
            tags=row.texts("tags"),
            operations=row.choices("operations", OPERATIONS, non_empty=True),
            runtime_capabilities=row.choices("runtime_capabilities", RUNTIME_CAPABILITIES),
            open_weight=row.flag("open_weight"),
            family=row.text("family"),
            sampling_parameters=row.flag("sampling_parameters", True),
            reference_provider=row.text("reference_provider"),
            embedding_dimensions=(
                row.integer("embedding_dimensions", minimum=1) if row.has("embedding_dimensions") else 0
            ),
            released=row.day("released"),
        )
        row.close()
    top.close()
    return models


def load_lanes(
    folder: Traversable,
    providers: dict[str, tuple[Provider, LaneDefaults]],
    models: dict[str, Model],
) -> tuple[Lane, ...]:
    top = read_toml(folder, "lanes.toml")
    lanes: dict[str, tuple[Lane, str]] = {}
    for row in top.rows("lanes"):
        slugs = row.one_or_more("provider")
        model_id = row.text("model")
        row.name(", ".join(f"{slug}/{model_id}" for slug in slugs))
        model = models.get(model_id)
        if model is None:
            row.fail("model", f"{model_id!r} is not in models.toml")
        for slug in slugs:
            if slug not in providers:
                row.fail("provider", f"{slug!r} is not in providers.toml")
            lane = _lane(row, slug, providers[slug][1], model)
            if lane.lane_id in lanes:
                row.fail("provider", f"lane {lane.lane_id} is already defined at {lanes[lane.lane_id][1]}")
            lanes[lane.lane_id] = (lane, row.where)
        row.close()
    top.close()
    provider_order = {slug: index for index, slug in enumerate(providers)}
    model_order = {model_id: index for index, model_id in enumerate(models)}
    return tuple(
        sorted(
            (lane for lane, _ in lanes.values()),
            key=lambda lane: (provider_order[lane.provider], model_order[lane.model]),
        )
    )


def _lane(row: Row, provider: str, defaults: LaneDefaults, model: Model) -> Lane:
    operations = row.choices("operations", OPERATIONS, model.operations, non_empty=True)
    if not set(operations) <= set(model.operations):
        row.fail("operations", f"{model.id} does not run all of {list(operations)}")
    if row.has("runtime_capabilities"):
        capabilities = row.choices("runtime_capabilities", RUNTIME_CAPABILITIES)
        if not set(capabilities) <= set(model.runtime_capabilities):
            row.fail("runtime_capabilities", f"{model.id} cannot do all of {list(capabilities)}")
    else:
        exposed = defaults.exposed_capabilities
        capabilities = tuple(c for c in model.runtime_capabilities if exposed is None or c in exposed)
    hosted_tools = row.choices("hosted_tools", HOSTED_TOOLS, ())
    return Lane(
        provider=provider,
        model=model.id,
        price=_price(row, defaults),
        context_window=row.integer("context_window", minimum=1),
        max_output_tokens=row.integer("max_output_tokens"),
        operations=operations,
        runtime_capabilities=capabilities,
        hosted_tools=hosted_tools,
        daily_capacity_items=row.integer("daily_capacity_items", minimum=1),
        reliability=_fraction(row, "reliability", defaults.reliability),
        provider_model_id=row.text("provider_model_id"),
        sampling_parameters=model.sampling_parameters,
        prompt_cache=_prompt_cache(row),
        # the provider's summed-token limit of one embeddings request, on its embeddings lanes
        max_embedding_request_tokens=(
            defaults.max_embedding_request_tokens if "embeddings" in operations else None
        ),
        max_images=defaults.max_images,
        max_image_bytes=defaults.max_image_bytes,
        hosted_tool_prices=_offered_tool_prices(row, hosted_tools, defaults),
    )


def _offered_tool_prices(
    row: Row, offered: tuple[HostedTool, ...], defaults: LaneDefaults
) -> tuple[tuple[HostedTool, HostedToolPrice], ...]:
    """The prices of the hosted tools the lane offers: each must have one (a tool billed by
    the call and priced at nothing would be work given away)."""
    prices = dict(defaults.hosted_tool_prices)
    unpriced = [tool for tool in offered if tool not in prices]
    if unpriced:
        row.fail("hosted_tools", f"{unpriced[0]!r} has no price (hosted_tool_prices in providers.toml)")
    return tuple((tool, prices[tool]) for tool in sorted(offered))


def _request_tokens(row: Row) -> int | None:
    key = "max_embedding_request_tokens"
    return row.integer(key, minimum=1) if row.has(key) else None


def _prompt_cache(row: Row) -> PromptCacheRule | None:
    """The lane's vendor prompt cache (`prompt_cache`), when its vendor caches for it."""
    if not row.has("prompt_cache"):
        return None
    table = row.table("prompt_cache")
    rule = PromptCacheRule(
        min_tokens=table.integer("min_tokens", minimum=1),
        lifetime_seconds=table.integer("lifetime_seconds", minimum=1),
        marker=table.choice("marker", CACHE_MARKERS),
    )
    table.close()
    return rule


def _price(row: Row, defaults: LaneDefaults) -> LanePrice:
    """Direct prices from the row; batch prices given, or direct x the batch price factor.
    The prompt-cache prices (`cached_input`, `cache_write_input`) are optional: a lane
    without them bills cached tokens at its input price."""
    price = row.table("price")
    direct_in, direct_out = price.decimal("input"), price.decimal("output")
    cached, written = _optional(price, "cached_input"), _optional(price, "cache_write_input")
    if price.has("batch_input") or price.has("batch_output"):
        if row.has("batch_price_factor"):
            row.fail("batch_price_factor", "give either batch prices or a batch price factor, not both")
        batch_in, batch_out = price.decimal("batch_input"), price.decimal("batch_output")
        batch_cached = _batch_cache_price(price, "batch_cached_input", cached)
        batch_written = _batch_cache_price(price, "batch_cache_write_input", written)
    else:
        factor = _fraction(row, "batch_price_factor", defaults.batch_price_factor)
        batch_in, batch_out = direct_in * factor, direct_out * factor
        batch_cached = cached * factor if cached is not None else None
        batch_written = written * factor if written is not None else None
    price.close()
    if batch_in > direct_in or batch_out > direct_out:
        row.fail("price", "a batch price is above the direct price")
    if cached is not None and cached > direct_in:
        row.fail("price", "a cached input price is above the input price")
    if batch_cached is not None and cached is not None and batch_cached > cached:
        row.fail("price", "a batch cache price is above the direct cache price")
    if batch_written is not None and written is not None and batch_written > written:
        row.fail("price", "a batch cache price is above the direct cache price")
    return LanePrice(
        input_per_mtok=direct_in,
        output_per_mtok=direct_out,
        batch_input_per_mtok=batch_in,
        batch_output_per_mtok=batch_out,
        cached_input_per_mtok=cached,
        cache_write_input_per_mtok=written,
        batch_cached_input_per_mtok=batch_cached,
        batch_cache_write_input_per_mtok=batch_written,
    )


def _optional(price: Row, key: str) -> Decimal | None:
    return price.decimal(key) if price.has(key) else None


def _batch_cache_price(price: Row, key: str, direct: Decimal | None) -> Decimal | None:
    """A batch cache price next to explicit batch prices: required when the direct one is given."""
    if direct is None:
        if price.has(key):
            price.fail(key, "a batch cache price without its direct price")
        return None
    return price.decimal(key)


def load_workflow_products(folder: Traversable) -> tuple[WorkflowProduct, ...]:
    top = read_json(folder, "workflow_products.json")
    slugs: set[str] = set()
    products = top.each("workflow_products", lambda row: _workflow_product(row, slugs))
    top.close()
    return products


def _workflow_product(row: Row, slugs: set[str]) -> WorkflowProduct:
    slug = row.unique("slug", slugs)
    policy = row.table("route_policy")
    policy.choice("routing_mode", ROUTING_MODES)
    policy.choice("privacy_tier", PRIVACY_TIERS)
    policy.choices("required_capabilities", RUNTIME_CAPABILITIES)
    policy.integer("min_context_window", minimum=1)
    policy.close()
    return WorkflowProduct(
        slug=slug,
        title=row.text("title"),
        summary=row.text("summary"),
        input_schema=row.raw("input_schema"),
        output_schema=row.raw("output_schema"),
        sla_hours=row.integer("sla_hours", minimum=1),
        route_policy=cast(ProductRoutePolicy, row.raw("route_policy")),  # checked above, served as written
        operation=row.choice("operation", OPERATIONS),
        typical_input_tokens=row.integer("typical_input_tokens", minimum=1),
        typical_output_tokens=row.integer("typical_output_tokens", minimum=1),
    )


def load_fees(folder: Traversable) -> FeeSchedule:
    row = read_toml(folder, "fees.toml")
    fees = FeeSchedule(
        standard_batch_fee_pct=row.decimal("standard_batch_fee_pct"),
        workflow_product_fee_pct=row.decimal("workflow_product_fee_pct"),
        margin_floor_pct=row.decimal("margin_floor_pct"),
        control_plane_fee_per_lane_usd=row.decimal("control_plane_fee_per_lane_usd"),
        effective_at=row.text("effective_at"),
    )
    row.close()
    return fees


def _fraction(row: Row, key: str, default: Decimal | None = None) -> Decimal:
    """A decimal in (0, 1]: a reliability prior or a batch price factor."""
    value = row.decimal(key) if default is None else row.decimal(key, default)
    if not 0 < value <= _ONE:
        row.fail(key, f"expected a decimal string above 0 and at most 1, got {str(value)!r}")
    return value


__all__ = ["DataError", "LaneDefaults", "load_catalog"]
