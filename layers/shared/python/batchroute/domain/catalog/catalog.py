"""The catalog's shapes: providers, models and the lanes that join them.

A lane is one provider serving one model: the unit the router selects, prices and rejects.
The built-in data lives in batchroute/catalog/ (versioned with `pricing_updated_at`); live
state (remaining capacity, last heartbeat) lives in DynamoDB and is passed in as LaneLive.
Pure data: no boto3, no FastAPI.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Literal, TypedDict

Operation = Literal["responses", "embeddings", "vision"]
OPERATIONS: tuple[Operation, ...] = ("responses", "embeddings", "vision")

PrivacyTier = Literal["standard", "confidential", "restricted"]
SlaTier = Literal["flex", "standard", "priority"]

# `any_image_type`: images of any type, by a URL that may tell none (the lane reads the type
# from the bytes; Gemini's lanes do not: domain/routing/images.py). `embedding_dimensions`: an
# embeddings request's `dimensions` (text-embedding-3 and later; Gemini's outputDimensionality).
# `functions_with_hosted_tools`: function tools beside hosted tools in one request (not Gemini 2.x).
# `tools_with_json_output`: tools beside a JSON answer format in one request (not Gemini 2.x).
# `whitespace_stop`: a stop sequence of whitespace alone, `"\n"` (not Anthropic's models).
# `seed`: a sampling seed (not Anthropic's models, nor Bedrock's lanes).
# `penalties`: a non-zero frequency or presence penalty (OpenAI and the hosts that document one).
# `serial_tool_calls`: `parallel_tool_calls: false` beside tools (OpenAI, Anthropic, Groq).
# `message_names`: a user or assistant message's `name` (OpenAI's Chat Completions).
RuntimeCapability = Literal[
    "tool_calling",
    "structured_outputs",
    "json_schema",
    "vision",
    "documents",
    "audio",
    "reasoning",
    "any_image_type",
    "embedding_dimensions",
    "functions_with_hosted_tools",
    "tools_with_json_output",
    "whitespace_stop",
    "seed",
    "penalties",
    "serial_tool_calls",
    "message_names",
]
HostedTool = Literal["web_search", "python_execution", "calculator", "time", "file_search", "retrieval"]

# vendor_batch: a large vendor with a batch API (submit a file, poll, download);
# public_host: an open-weight host called per item; edge: self-hosted open-weight nodes.
ProviderKind = Literal["vendor_batch", "public_host", "edge"]
# How the lane executes work: a vendor batch job, or synchronous calls under a concurrency limit.
ExecutionMode = Literal["batch_api", "sync"]


@dataclass(frozen=True)
class BatchLimits:
    """The most one vendor batch job may hold (the vendor's published limits): requests,
    bytes of the serialized requests (its input file, or its inline request body), and
    embedding inputs. None: no limit of that kind."""

    max_requests: int | None = None
    max_bytes: int | None = None
    # Embedding inputs across all requests of one job (OpenAI: 50,000), a list input counting
    # each of its entries.
    max_embedding_inputs: int | None = None


NO_BATCH_LIMITS = BatchLimits()


@dataclass(frozen=True)
class Provider:
    slug: str
    display_name: str
    kind: ProviderKind
    execution_mode: ExecutionMode
    regions: tuple[str, ...]
    privacy_tiers: tuple[PrivacyTier, ...]
    data_retention_days: int  # 0 = zero data retention
    enabled: bool = True
    launched: bool = True  # the launch-provider guard keeps unlaunched providers out of routing
    website: str = ""
    max_concurrency: int = 16
    # The vendor API version this service speaks to it, pinned (docs/providers.md): an
    # `anthropic-version` date, Gemini's `v1beta`, OpenAI's `v1`, Bedrock's runtime API
    # version; `control_api_version` is Bedrock's control plane (batch jobs), else "".
    api_version: str = ""
    control_api_version: str = ""
    batch_limits: BatchLimits = NO_BATCH_LIMITS


@dataclass(frozen=True)
class UnitPrices:
    """USD per million tokens of each token kind, on one basis (direct or batch): fresh
    input, input read from the vendor's prompt cache, input written to it, output."""

    input_per_mtok: Decimal
    output_per_mtok: Decimal
    cached_input_per_mtok: Decimal
    cache_write_input_per_mtok: Decimal


@dataclass(frozen=True)
class LanePrice:
    """USD per million tokens. `batch_*` are the asynchronous prices the batch API pays.

    The prompt-cache prices (cache reads, cache writes) are None on a lane whose vendor
    publishes none: its cached tokens are billed at its input price."""

    input_per_mtok: Decimal
    output_per_mtok: Decimal
    batch_input_per_mtok: Decimal
    batch_output_per_mtok: Decimal
    cached_input_per_mtok: Decimal | None = None
    cache_write_input_per_mtok: Decimal | None = None
    batch_cached_input_per_mtok: Decimal | None = None
    batch_cache_write_input_per_mtok: Decimal | None = None

    @property
    def direct(self) -> UnitPrices:
        return _unit_prices(
            self.input_per_mtok,
            self.output_per_mtok,
            self.cached_input_per_mtok,
            self.cache_write_input_per_mtok,
        )

    @property
    def batch(self) -> UnitPrices:
        return _unit_prices(
            self.batch_input_per_mtok,
            self.batch_output_per_mtok,
            self.batch_cached_input_per_mtok,
            self.batch_cache_write_input_per_mtok,
        )


def _unit_prices(
    input_price: Decimal, output_price: Decimal, cached: Decimal | None, written: Decimal | None
) -> UnitPrices:
    return UnitPrices(
        input_per_mtok=input_price,
        output_per_mtok=output_price,
        cached_input_per_mtok=input_price if cached is None else cached,
        cache_write_input_per_mtok=input_price if written is None else written,
    )


@dataclass(frozen=True)
class HostedToolPrice:
    """What a vendor bills for one of its hosted tools beside the tokens (providers.toml
    `hosted_tool_prices`): USD per 1,000 billed calls (a search, a grounded prompt, a code
    container; the same on the batch basis), and the calls a quote counts for each item that
    asks for the tool (an estimate: calls past it are absorbed, docs/money.md)."""

    per_1k_calls: Decimal
    calls_per_item: int


# How a vendor is told what to cache: it caches every long prefix by itself (OpenAI,
# Gemini's implicit caching), or only up to a breakpoint the request marks (Anthropic's
# `cache_control`, Bedrock Converse's `cachePoint`).
CacheMarker = Literal["automatic", "cache_control", "cache_point"]
CACHE_MARKERS: tuple[CacheMarker, ...] = ("automatic", "cache_control", "cache_point")


@dataclass(frozen=True)
class PromptCacheRule:
    """A lane's vendor prompt cache (lanes.toml `prompt_cache`): the fewest tokens a cached
    prefix has, how long an unused one lives, and how a request asks for it."""

    min_tokens: int
    lifetime_seconds: int
    marker: CacheMarker


@dataclass(frozen=True)
class Lane:
    provider: str  # Provider.slug
    model: str  # Model.id
    price: LanePrice
    context_window: int
    max_output_tokens: int
    operations: tuple[Operation, ...]
    runtime_capabilities: tuple[RuntimeCapability, ...] = ()
    hosted_tools: tuple[HostedTool, ...] = ()
    daily_capacity_items: int = 1_000_000  # planned capacity; live remaining capacity is in LaneLive
    reliability: Decimal = Decimal("0.99")  # observed success rate prior, used to rank direct lanes
    provider_model_id: str = ""  # the provider's own name for the model
    sampling_parameters: bool = True  # the model's: whether requests may carry temperature/top_p
    prompt_cache: PromptCacheRule | None = None  # None: the vendor caches nothing for this lane
    # Embeddings: the most tokens one request may hold, summed across its inputs, where the
    # vendor documents such a limit (OpenAI: 300,000); None: none. Each input must also fit
    # `context_window` on its own.
    max_embedding_request_tokens: int | None = None
    # Vision: the most images one request may hold, where the vendor documents such a limit
    # (Anthropic 100, Bedrock Converse 20); None: none but the context window.
    max_images: int | None = None
    # Vision: the most bytes one image may hold, where the vendor documents such a limit
    # (Anthropic 5 MB of base64: 3.75 MB, Bedrock Converse 3.75 MB); None: none. Known of data: images only.
    max_image_bytes: int | None = None
    # What the vendor bills for each hosted tool the lane offers (every one has a price).
    hosted_tool_prices: tuple[tuple[HostedTool, HostedToolPrice], ...] = ()

    @property
    def lane_id(self) -> str:
        return f"{self.provider}/{self.model}"

    @property
    def tool_prices_per_1k(self) -> tuple[tuple[str, Decimal], ...]:
        """USD per 1,000 calls of each hosted tool the lane prices above nothing."""
        return tuple(
            (tool, price.per_1k_calls) for tool, price in self.hosted_tool_prices if price.per_1k_calls
        )

    def tool_price(self, tool: str) -> HostedToolPrice | None:
        """The price of a hosted tool on this lane; None when the lane prices none for it."""
        return next((price for name, price in self.hosted_tool_prices if name == tool), None)


@dataclass(frozen=True)
class Model:
    id: str  # the exact id items use, and the catalog slug
    title: str
    summary: str
    description: str
    tags: tuple[str, ...]
    operations: tuple[Operation, ...]
    runtime_capabilities: tuple[RuntimeCapability, ...]
    open_weight: bool
    family: str
    # Whether the model takes sampling parameters (temperature, top_p); a reasoning model
    # that refuses them says false (models.toml `sampling_parameters`).
    sampling_parameters: bool = True
    # The provider whose published prices for this model are the yardstick of what routing
    # saved (models.toml `reference_provider`; docs/routing.md, "What routing saved").
    reference_provider: str = ""
    # An embedding model's vector size, the most `dimensions` an item may ask for (models.toml
    # `embedding_dimensions`); 0 where the catalog does not say.
    embedding_dimensions: int = 0
    released: date | None = None  # when its maker released it (models.toml `released`)

    @property
    def owned_by(self) -> str:
        """Its maker, as OpenAI's model list says `owned_by`: the organization of an open-weight
        model's id (`meta-llama`), else the vendor that sells it (its reference provider)."""
        if self.open_weight and "/" in self.id:
            return self.id.split("/", 1)[0]
        return self.reference_provider


@dataclass(frozen=True)
class LaneLive:
    """What the lanes report about themselves: capacity left today and their last heartbeat."""

    lane_id: str
    remaining_capacity_items: int
    last_heartbeat_at: str  # ISO 8601
    # Why the service marked the lane unavailable (e.g. the vendor account is out of credit);
    # "" when it did not. A marked lane has no heartbeat until `unavailable_until`.
    unavailable_reason: str = ""


class ProductRoutePolicy(TypedDict, total=False):
    """A workflow product's route policy, as its catalog row writes it (the loader checks it)."""

    routing_mode: str
    privacy_tier: str
    required_capabilities: list[str]
    min_context_window: int


@dataclass(frozen=True)
class WorkflowProduct:
    slug: str
    title: str
    summary: str
    input_schema: dict[str, object]
    output_schema: dict[str, object]
    sla_hours: int
    route_policy: ProductRoutePolicy
    operation: Operation = "responses"
    typical_input_tokens: int = 800
    typical_output_tokens: int = 200


@dataclass(frozen=True)
class FeeSchedule:
    standard_batch_fee_pct: Decimal  # of the provider subtotal
    workflow_product_fee_pct: Decimal
    margin_floor_pct: Decimal
    control_plane_fee_per_lane_usd: Decimal
    effective_at: str

    def to_mapping(self) -> dict[str, str]:
        """As a quote snapshot and a batch keep it (the schedule its price was locked with)."""
        return {f.name: str(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_mapping(cls, value: object) -> FeeSchedule | None:
        """The schedule as kept; None for a record written before fees were kept."""
        if not isinstance(value, Mapping):
            return None
        try:
            return cls(
                standard_batch_fee_pct=Decimal(str(value["standard_batch_fee_pct"])),
                workflow_product_fee_pct=Decimal(str(value["workflow_product_fee_pct"])),
                margin_floor_pct=Decimal(str(value["margin_floor_pct"])),
                control_plane_fee_per_lane_usd=Decimal(str(value["control_plane_fee_per_lane_usd"])),
                effective_at=str(value["effective_at"]),
            )
        except (KeyError, InvalidOperation):
            return None


@dataclass(frozen=True)
class Catalog:
    """One versioned snapshot of the built-in catalog."""

    version: str
    pricing_updated_at: str
    providers: tuple[Provider, ...]
    models: tuple[Model, ...]
    lanes: tuple[Lane, ...]
    workflow_products: tuple[WorkflowProduct, ...]
    fees: FeeSchedule
    _by_model: dict[str, tuple[Lane, ...]] = field(default_factory=dict, compare=False, repr=False)

    def provider(self, slug: str) -> Provider | None:
        return next((p for p in self.providers if p.slug == slug), None)

    def workflow_product(self, slug: object) -> WorkflowProduct | None:
        return next((p for p in self.workflow_products if p.slug == slug), None)

    def model(self, model_id: str) -> Model | None:
        return next((m for m in self.models if m.id == model_id), None)

    def lanes_for(self, model_id: str) -> tuple[Lane, ...]:
        if not self._by_model:
            grouped: dict[str, list[Lane]] = {}
            for lane in self.lanes:
                grouped.setdefault(lane.model, []).append(lane)
            self._by_model.update({k: tuple(v) for k, v in grouped.items()})
        return self._by_model.get(model_id, ())

    def reference_lane(self, model_id: str) -> Lane | None:
        """The lane of the model's reference provider: its list and batch prices are the
        reference prices of what routing saved."""
        model = self.model(model_id)
        if model is None:
            return None
        return next(
            (lane for lane in self.lanes_for(model_id) if lane.provider == model.reference_provider), None
        )
