"""Request and response models: quotes, free and price-locked for 10 minutes, reserving
nothing. A model quote prices items (inline or an uploaded file); a workflow quote prices a
workflow product's inputs with model-agnostic lanes that satisfy its contract. The routing
constraints here are also those of a batch.

Each body is validated here, once, by its command's parser (services/batches/commands.py:
`QuoteRequest`, `QuoteWorkflow`), in the spec's words; the quote service takes the command.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator
from pydantic_core import PydanticCustomError
from pydantic_core.core_schema import ValidatorFunctionWrapHandler

from batchroute.domain.batches.preflight import Category
from batchroute.domain.catalog.catalog import PrivacyTier, SlaTier
from batchroute.domain.request_fields import unknown_fields_error
from batchroute.domain.routing.gates import REJECTION_CODES, RoutingMode
from batchroute.errors import InvalidRequest
from batchroute.money import AMOUNT_TEXT
from batchroute.services.batches.commands import QuoteRequest, QuoteWorkflow
from functions.api.schemas.common import Absent, ContractBody, MoneyOut, as_sent, omittable, refusal
from functions.api.schemas.delivery.webhooks import WebhookTarget
from functions.api.schemas.routing.items import BatchItem, HostedTools

Usd = Annotated[float, Field(ge=0)] | Annotated[str, Field(pattern=AMOUNT_TEXT)]
Region = Annotated[str, Field(min_length=1)]
RejectionCode = Annotated[str, Field(json_schema_extra={"enum": list(REJECTION_CODES)})]


class MaxPrice(BaseModel):
    """The most you will pay a lane, in USD at batch prices; any bound may be left out. A lane
    above a bound is rejected with `price_cap_exceeded`."""

    model_config = ConfigDict(extra="forbid")

    input_per_mtok: Usd | None = Field(default=None, description="cap on the input price per million tokens")
    output_per_mtok: Usd | None = Field(
        default=None, description="cap on the output price per million tokens"
    )
    per_item_usd: Usd | None = Field(
        default=None, description="cap on the estimated provider cost per item, before the service fee"
    )


C = TypeVar("C")


def read_command(parse: Callable[[Mapping[str, Any]], C], data: Mapping[str, Any]) -> C:
    """The body's command, or its first problem as the spec words it (functions/api/errors.py)."""
    try:
        return parse(data)
    except InvalidRequest as exc:
        raise refusal(exc.code, exc.message, exc.details) from exc


class RoutingConstraints(ContractBody):
    """The routing constraints of a quote or batch body. The body is validated once, here, by
    its command's parser (`command()`), the same that reads the bodies of schedules and of the
    vendor-compatible surface."""

    routing_mode: Annotated[Any, as_sent(RoutingMode | None)] = Field(
        default="cheapest",
        description="cheapest (default), sla_aware, public_only (vendor batch APIs and public hosts), "
        "edge_only, hybrid, privacy_constrained (adds the zero-data-retention check)",
    )
    privacy_tier: Annotated[Any, as_sent(PrivacyTier | None)] = Field(
        default="standard",
        description="standard (default); confidential: providers that declare the tier (not a "
        "zero-data-retention guarantee); restricted: providers declaring it (no built-in provider does)",
    )
    sla_tier: Annotated[Any, as_sent(SlaTier | None)] = Field(
        default="standard", description="Every batch has one 24-hour SLA: all three are treated as standard"
    )
    required_tools: Annotated[Any, as_sent(HostedTools | None)] = Field(
        default=None, description="Hosted tools every lane must offer, merged with each item's own"
    )
    region: Annotated[Any, as_sent(Region | None)] = Field(
        default=None, description="A provider region the lane must serve from"
    )
    regions: Annotated[Any, as_sent(list[Region] | None)] = Field(
        default=None, description="Provider regions, any of them (instead of `region`)"
    )
    max_price: Annotated[Any, as_sent(MaxPrice | None)] = None
    _command: object = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _read(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        body = handler(data)
        body._command = read_command(cls.reads, data)
        return body

    @classmethod
    def reads(cls, body: Mapping[str, Any]) -> object:
        """The body's command, by its parser (each body below names its own)."""
        return None

    @classmethod
    def unknown_fields(cls, unknown: list[str]) -> PydanticCustomError:
        error = unknown_fields_error(unknown)
        return refusal(error.code, error.message, error.details)


class ItemsToQuote(RoutingConstraints):
    items: Annotated[Any, as_sent(Annotated[list[BatchItem], Field(min_length=1)] | None)] = Field(
        default=None, description="The items, inline. Give exactly one of `items` and `input_file_id`"
    )
    input_file_id: Annotated[Any, as_sent(str | None)] = Field(
        default=None,
        description="An uploaded file (POST /v1/files, `file_...`) whose JSONL lines are the items",
    )
    webhook: Annotated[Any, as_sent(WebhookTarget | None)] = Field(
        default=None, description="Checked by the preflight (category `webhook`)"
    )
    preset: Annotated[Any, as_sent(str | None)] = Field(
        default=None,
        description="A preset (`name` or `name@version`, docs/presets.md) for the whole batch: its "
        "routing settings fill the routing fields left out here, and it expands every item naming none",
    )


class QuoteModelRequest(ItemsToQuote):
    """Items to quote: the lanes chosen and rejected, and the price, locked for 10 minutes.
    Unknown fields are refused (a misspelt constraint would price, and lock, routing without it)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "items": [
                        {
                            "customer_item_id": "ticket-1",
                            "operation": "responses",
                            "model": "gpt-4o-mini",
                            "input": {
                                "messages": [
                                    {"role": "user", "content": "Summarize: the printer is on fire."}
                                ]
                            },
                        }
                    ],
                    "routing_mode": "cheapest",
                    "privacy_tier": "standard",
                }
            ]
        },
    )

    @classmethod
    def reads(cls, body: Mapping[str, Any]) -> QuoteRequest:
        return QuoteRequest.parse(body)

    def command(self) -> QuoteRequest:
        assert isinstance(self._command, QuoteRequest)
        return self._command


class QuoteWorkflowRequest(RoutingConstraints):
    """A workflow product's inputs to quote: each model able to serve the product is priced and
    the cheapest eligible one chosen. Unknown fields are refused, as in a batch body."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "required": ["product", "inputs"],
            "examples": [
                {
                    "product": "ticket-classification",
                    "inputs": [
                        {"ticket": {"body": "I was charged twice."}, "categories": ["billing", "bug"]}
                    ],
                }
            ],
        },
    )

    product: Annotated[Any, as_sent(str)] = omittable(
        "A workflow product slug (GET /v1/catalog/workflow-products)"
    )
    inputs: Annotated[Any, as_sent(Annotated[list[dict[str, Any]], Field(min_length=1)])] = omittable(
        "The product's inputs: objects with the properties its input_schema requires; "
        "an input's string `id` becomes its customer_item_id",
    )
    webhook: Annotated[Any, as_sent(WebhookTarget | None)] = Field(
        default=None, description="Checked by the preflight (category `webhook`)"
    )

    @classmethod
    def reads(cls, body: Mapping[str, Any]) -> QuoteWorkflow:
        return QuoteWorkflow.parse(body)

    def command(self) -> QuoteWorkflow:
        assert isinstance(self._command, QuoteWorkflow)
        return self._command


# -- responses ---------------------------------------------------------------------------
class LaneProof(BaseModel):
    """The quote-time data/privacy proof of a lane: what it was chosen or rejected on."""

    provider: str
    provider_kind: str = Field(description="vendor_batch, public_host or edge")
    execution_mode: str
    privacy_tiers: list[str]
    data_retention_days: int | None
    zero_data_retention: bool
    regions: list[str]
    last_heartbeat_at: str | None
    heartbeat_age_seconds: int | None
    remaining_capacity_items: int | None
    catalog_version: str
    pricing_updated_at: str


_TOOL_PRICE = (
    "The hosted tool's billed calls (a search, a grounded prompt), USD per 1,000 calls: on a lane "
    "whose items ask for a tool its vendor bills by the call (docs/money.md, 'Hosted tool calls')."
)


class LaneUnitPrices(BaseModel):
    """A lane's locked unit prices, USD per million tokens. The prompt-cache prices appear
    on a lane whose vendor bills cached input apart; without them, cached tokens are billed
    at `input_per_mtok`."""

    currency: str
    basis: Literal["batch"]
    input_per_mtok: str
    output_per_mtok: str
    cached_input_per_mtok: str | Absent = Field(
        default=None, description="Input read from the vendor's prompt cache, USD per million tokens."
    )
    cache_write_input_per_mtok: str | Absent = Field(
        default=None, description="Input written to the vendor's prompt cache, USD per million tokens."
    )
    web_search_per_1k_calls: str | Absent = Field(default=None, description=_TOOL_PRICE)
    file_search_per_1k_calls: str | Absent = Field(default=None, description=_TOOL_PRICE)
    python_execution_per_1k_calls: str | Absent = Field(default=None, description=_TOOL_PRICE)
    calculator_per_1k_calls: str | Absent = Field(default=None, description=_TOOL_PRICE)
    time_per_1k_calls: str | Absent = Field(default=None, description=_TOOL_PRICE)
    retrieval_per_1k_calls: str | Absent = Field(default=None, description=_TOOL_PRICE)


class LanePromptCache(BaseModel):
    """A selected lane's expected prompt-cache use (cache-aware routing, docs/routing.md):
    on a lane whose vendor caches prompt prefixes. An expectation only: the lane's
    `estimated_provider_cost`, the quote's `pricing_estimate` and what a batch reserves stay
    the uncached estimate."""

    min_prefix_tokens: int = Field(description="The fewest tokens the vendor caches as a prefix")
    lifetime_seconds: int = Field(description="How long an unused cached prefix lives at the vendor")
    marker: Literal["automatic", "cache_control", "cache_point"] = Field(
        description="How requests ask for caching: automatic, or the breakpoint the lane adds"
    )
    grouped_items: int = Field(description="Items whose prompt prefix is shared and long enough to cache")
    expected_cached_input_tokens: int = Field(description="Input expected to be read from the cache")
    expected_cache_write_input_tokens: int = Field(description="Input expected to be written to it")
    expected_cache_savings: MoneyOut = Field(
        description="estimated_provider_cost less expected_provider_cost"
    )
    expected_provider_cost: MoneyOut = Field(
        description="The lane's share at its prices, the cache as expected"
    )


class SelectedLaneOut(BaseModel):
    lane_id: str
    provider: str
    model: str
    selected: Literal[True]
    item_count: int
    estimated_prompt_tokens: int
    estimated_output_tokens: int
    unit_prices: LaneUnitPrices
    estimated_provider_cost: MoneyOut
    proof: LaneProof
    prompt_cache: LanePromptCache | Absent = Field(
        default=None,
        description="With cache-aware routing, on a lane whose vendor caches: the expected cache use",
    )
    estimated_tool_calls: dict[str, int] | Absent = Field(
        default=None,
        description="The hosted tool calls the estimate counts for the lane's items, by tool (each "
        "item asking for a tool the lane bills by the call counts that lane's calls per item)",
    )


class LaneRejection(BaseModel):
    code: RejectionCode = Field(description="The first gate the lane failed, or outranked")
    message: str
    details: dict[str, Any]
    reasons: list[str] = Field(description="Every gate the lane failed")


class RejectedLaneOut(BaseModel):
    lane_id: str
    provider: str
    model: str
    selected: Literal[False]
    rejection: LaneRejection
    proof: LaneProof


class PricingEstimate(BaseModel):
    provider_subtotal: MoneyOut
    service_fee: MoneyOut
    customer_discount: MoneyOut
    total: MoneyOut


class Funding(BaseModel):
    available: MoneyOut = Field(description="The wallet's available credit now")
    sufficient: bool


class PreflightIssue(BaseModel):
    category: Category | Literal["spending_limit"] = Field(
        description="the check; `spending_limit` only in a quote's warnings (docs/billing-controls.md)"
    )
    code: str
    message: str
    action: str
    path: str | Absent = Field(default=None, description="e.g. items[3].input.messages[0]")
    line: int | Absent = Field(default=None, description="the 1-based line of an item from a file")
    details: dict[str, Any] | Absent = None


class PreflightResult(BaseModel):
    ok: bool
    errors: list[PreflightIssue]
    warnings: list[PreflightIssue]


class PolicyNarrowing(BaseModel):
    field: str = Field(description="routing_mode, privacy_tier or regions")
    requested: Any
    effective: Any
    rule: str = Field(description="the policy rule that narrowed it")


class QuoteRoutePolicy(BaseModel):
    """The org's route policy the quote was held to (docs/routing-policy.md)."""

    version: int = Field(description="A batch from this quote is refused (409) once the policy moved on")
    narrowed: list[PolicyNarrowing] = Field(description="What the policy made stricter than requested")


class QuoteOut(BaseModel):
    """A price-locked, versioned snapshot: create a batch with its `quote_id` before it expires."""

    quote_id: str = Field(description="qlock_...")
    object: Literal["quote"]
    version: int
    kind: Literal["model", "workflow"]
    created_at: str
    expires_at: str
    item_count: int
    routing_mode: RoutingMode
    sla_tier: SlaTier
    effective_sla_tier: Literal["standard"]
    privacy_tier: PrivacyTier
    catalog_version: str
    pricing_updated_at: str | None
    pricing_estimate: PricingEstimate
    quote_lanes: list[SelectedLaneOut | RejectedLaneOut] = Field(
        description="Every lane considered: the selected ones first, then each rejected one with its reason"
    )
    customer_explanation: str
    funding: Funding
    preflight: PreflightResult = Field(description="Passed; its warnings, if any")
    route_policy: QuoteRoutePolicy | None = Field(
        default=None, description="The org's route policy in force, or null when it restricts nothing"
    )


class ModelConsidered(BaseModel):
    model: str
    eligible: bool
    reason: str | Absent = Field(default=None, description="why the model is not eligible")
    estimated_total: MoneyOut | Absent = None


class WorkflowQuoteOut(QuoteOut):
    """A workflow quote: the cheapest eligible model is chosen for the product's contract."""

    workflow_product: str
    chosen_model: str
    models_considered: list[ModelConsidered]
