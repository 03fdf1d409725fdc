"""The commands the batches context takes: a quote request, a workflow quote, a batch to create.

Each is read from a body here, once: the API's request models (functions/api/schemas/batches/quotes.py,
batches.py) call these parsers at the edge, and the callers that create batches from stored or
vendor-shaped bodies (schedules, the compat surface, retry) call the same ones, so a field is
checked in one place, in the spec's words (`invalid_request` with `details.field`). The
services take the typed commands, never a body.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from batchroute.domain.batches.metadata import parse_metadata
from batchroute.domain.request_fields import invalid, unknown_fields_error
from batchroute.domain.routing.gates import Exclusions, RouteRequest, RoutingFields
from batchroute.domain.routing.rescue import RescueSetting
from batchroute.domain.work_orders.work_orders import parse_work_order_id

# The routing fields of a quote or batch body (`region` is a one-region `regions`).
ROUTING_FIELDS: Final = (
    "routing_mode",
    "privacy_tier",
    "sla_tier",
    "required_tools",
    "region",
    "regions",
    "max_price",
)
ITEM_FIELDS: Final = ("items", "input_file_id", "webhook", "preset")
# Every field a batch body takes (an unknown one is refused).
BATCH_FIELDS: Final = frozenset(
    (*ROUTING_FIELDS, *ITEM_FIELDS, "quote_id", "metadata", "work_order_id", "completion_window", "rescue")
)


def request_hash(body: Mapping[str, Any]) -> str:
    """The fingerprint of a body as sent: an Idempotency-Key replay must send the same."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Routing:
    """The routing constraints a body gave (`given`: the fields it set, not null), read once
    by `RouteRequest.from_api`; a batch-wide preset fills the ones left out."""

    request: RouteRequest = field(default_factory=RouteRequest)
    given: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, body: Mapping[str, Any]) -> Routing:
        request = RouteRequest.from_api(body)
        given = {name for name in ROUTING_FIELDS if body.get(name) is not None}
        if "region" in given:
            given = (given - {"region"}) | {"regions"}
        return cls(request, frozenset(given))

    @property
    def mode_given(self) -> bool:
        return "routing_mode" in self.given

    def fields(self) -> RoutingFields:
        """The given fields as a body carries them (what a preset fills and Intake reads)."""
        request, given = self.request, self.given
        fields = RoutingFields()
        if "routing_mode" in given:
            fields["routing_mode"] = request.routing_mode
        if "privacy_tier" in given:
            fields["privacy_tier"] = request.privacy_tier
        if "sla_tier" in given:
            fields["sla_tier"] = request.sla_tier
        if "required_tools" in given:
            fields["required_tools"] = sorted(request.required_tools)
        if "regions" in given:
            fields["regions"] = list(request.regions)
        if "max_price" in given:
            fields["max_price"] = request.max_price.to_api() if request.max_price is not None else None
        return fields

    def excluding(self, excluded_lanes: Exclusions | None) -> RouteRequest:
        """The route request, with the lanes the service rules out (a schedule's regression
        exclusions, docs/schedules.md; a workflow product's contract, docs/catalog.md)."""
        if not excluded_lanes:
            return self.request
        return replace(self.request, excluded_lanes=dict(excluded_lanes))


@dataclass(frozen=True, slots=True)
class QuoteRequest:
    """Items to quote (or to price a batch over): inline or an uploaded file's, the routing
    constraints, the webhook the preflight checks and the batch-wide preset. `items` are the
    customer's JSON as sent (the preflight judges each); `webhook` is checked by the
    preflight's own rule (its category `webhook`)."""

    routing: Routing = field(default_factory=Routing)
    items: tuple[Any, ...] | None = None
    input_file_id: str | None = None
    webhook: object = None
    preset: object = None

    @classmethod
    def parse(cls, body: Mapping[str, Any], *, items_optional: bool = False) -> QuoteRequest:
        """`items_optional`: a batch from a quote may send neither (the quote's own items)."""
        raw_items, file_id = body.get("items"), body.get("input_file_id")
        if (raw_items is not None) == bool(file_id) and not (items_optional and raw_items is None):
            raise invalid("items", "Give exactly one of `items` or `input_file_id`.")
        if file_id is not None and not isinstance(file_id, str):
            raise invalid("input_file_id", "`input_file_id` must be a file id.")
        if raw_items is not None and not isinstance(raw_items, list):
            raise invalid("items", "`items` must be a list.")
        return cls(
            routing=Routing.parse(body),
            items=tuple(raw_items) if raw_items is not None else None,
            input_file_id=file_id or None,
            webhook=body.get("webhook"),
            preset=body.get("preset"),
        )

    def with_routing(self, routing: Routing) -> QuoteRequest:
        return replace(self, routing=routing)

    def preset_fields(self) -> RoutingFields:
        """What a batch-wide preset fills: the given routing fields and the preset."""
        fields = self.routing.fields()
        fields["preset"] = self.preset
        return fields

    def constraints(self) -> RoutingFields:
        """The given routing fields and the batch-wide preset when one is named: what a
        quote's snapshot and a batch keep of the request (a retry replays them)."""
        fields = self.routing.fields()
        if self.preset is not None:
            fields["preset"] = self.preset
        return fields


@dataclass(frozen=True, slots=True)
class QuoteWorkflow:
    """A workflow product's inputs to quote (`inputs`: the customer's JSON objects)."""

    product: object
    inputs: tuple[Any, ...]
    routing: Routing = field(default_factory=Routing)
    webhook: object = None

    @classmethod
    def parse(cls, body: Mapping[str, Any]) -> QuoteWorkflow:
        inputs = body.get("inputs")
        if not isinstance(inputs, list) or not inputs:
            raise invalid("inputs", "`inputs` must be a non-empty list of product inputs.")
        return cls(
            product=body.get("product"),
            inputs=tuple(inputs),
            routing=Routing.parse(body),
            webhook=body.get("webhook"),
        )

    def as_quote(self, items: tuple[Any, ...]) -> QuoteRequest:
        return QuoteRequest(routing=self.routing, items=items, webhook=self.webhook)


@dataclass(frozen=True, slots=True)
class CreateBatch:
    """A batch to create: its items and routing (`quote`), the price-locked quote it comes
    from, its metadata, the work order it joins; `fingerprint` is the body's as sent."""

    quote: QuoteRequest
    fingerprint: str
    quote_id: str | None = None
    metadata: dict[str, str] | None = None
    work_order_id: str | None = None
    rescue: RescueSetting | None = None  # deadline rescue (docs/batches.md); None: the default

    @classmethod
    def parse(cls, body: Mapping[str, Any]) -> CreateBatch:
        unknown = sorted(set(body) - BATCH_FIELDS)
        if unknown:
            raise unknown_fields_error(unknown)
        if body.get("completion_window", "24h") != "24h":
            raise invalid("completion_window", "completion_window must be 24h.")
        metadata = parse_metadata(body.get("metadata"))
        work_order_id = parse_work_order_id(body.get("work_order_id"))
        quote_id = body.get("quote_id")
        if quote_id is not None and not isinstance(quote_id, str):
            raise invalid("quote_id", "quote_id must be a qlock_ id.")
        quote = QuoteRequest.parse(body, items_optional=bool(quote_id))
        rescue = RescueSetting.from_api(body["rescue"]) if body.get("rescue") is not None else None
        return cls(quote, request_hash(body), quote_id or None, metadata, work_order_id, rescue)

    def with_quote(self, quote: QuoteRequest) -> CreateBatch:
        return replace(self, quote=quote)

    def intake_options(self) -> RoutingFields:
        """What the Intake step reads the input file with: the routing fields and the preset
        (stored on the batch's plan; services/workflow/intake.py)."""
        return self.quote.constraints()
