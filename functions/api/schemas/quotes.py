"""Request and response models: quotes, free and price-locked for 10 minutes, reserving
nothing. A model quote prices items (inline or an uploaded file); a workflow quote prices a
workflow product's inputs with model-agnostic lanes that satisfy its contract. The routing
constraints here are also those of a batch.

The bodies are read by the quote service (batchroute.domain.routing_gates.RouteRequest,
the preflight), which answers each problem in its own words: see ServiceValidatedBody.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SkipValidation

from batchroute.domain.catalog import PrivacyTier, SlaTier
from batchroute.domain.routing_gates import RoutingMode
from functions.api.schemas.common import ServiceValidatedBody, omittable
from functions.api.schemas.items import BatchItem, HostedTools
from functions.api.schemas.webhooks import WebhookTarget

DECIMAL_STRING = r"^\d+(\.\d+)?$"
Usd = Annotated[float, Field(ge=0)] | Annotated[str, Field(pattern=DECIMAL_STRING)]
Region = Annotated[str, Field(min_length=1)]


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


class RoutingConstraints(ServiceValidatedBody):
    routing_mode: SkipValidation[RoutingMode | None] = Field(
        default="cheapest",
        description="cheapest (default), sla_aware, public_only (vendor batch APIs and public hosts), "
        "edge_only, hybrid, privacy_constrained (adds the zero-data-retention check)",
    )
    privacy_tier: SkipValidation[PrivacyTier | None] = Field(
        default="standard",
        description="standard (default); confidential: providers that declare the tier (not a "
        "zero-data-retention guarantee); restricted: providers declaring it (no built-in provider does)",
    )
    sla_tier: SkipValidation[SlaTier | None] = Field(
        default="standard", description="Every batch has one 24-hour SLA: all three are treated as standard"
    )
    required_tools: SkipValidation[HostedTools | None] = Field(
        default=None, description="Hosted tools every lane must offer, merged with each item's own"
    )
    region: SkipValidation[Region | None] = Field(
        default=None, description="A provider region the lane must serve from"
    )
    regions: SkipValidation[list[Region] | None] = Field(
        default=None, description="Provider regions, any of them (instead of `region`)"
    )
    max_price: SkipValidation[MaxPrice | None] = None


class ItemsToQuote(RoutingConstraints):
    items: SkipValidation[Annotated[list[BatchItem], Field(min_length=1)] | None] = Field(
        default=None, description="The items, inline. Give exactly one of `items` and `input_file_id`"
    )
    input_file_id: SkipValidation[str | None] = Field(
        default=None,
        description="An uploaded file (POST /v1/files, `file_...`) whose JSONL lines are the items",
    )
    webhook: SkipValidation[WebhookTarget | None] = Field(
        default=None, description="Checked by the preflight (category `webhook`)"
    )


class QuoteModelRequest(ItemsToQuote):
    """Items to quote: the lanes chosen and rejected, and the price, locked for 10 minutes.
    Fields not listed are ignored."""

    model_config = ConfigDict(
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
        }
    )


class QuoteWorkflowRequest(RoutingConstraints):
    """A workflow product's inputs to quote: each model able to serve the product is priced and
    the cheapest eligible one chosen. Fields not listed are ignored."""

    model_config = ConfigDict(
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
        }
    )

    product: SkipValidation[str] = omittable("A workflow product slug (GET /v1/catalog/workflow-products)")
    inputs: SkipValidation[Annotated[list[dict[str, Any]], Field(min_length=1)]] = omittable(
        "The product's inputs: objects with the properties its input_schema requires; "
        "an input's string `id` becomes its customer_item_id",
    )
    webhook: SkipValidation[WebhookTarget | None] = Field(
        default=None, description="Checked by the preflight (category `webhook`)"
    )
