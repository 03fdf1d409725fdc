"""A quote's price-locked snapshot: what was quoted (`QuotedItems`), the plan, the locked total,
the route policy's version and the routing fields the request gave. Stored as one JSON text
(`QUOTE#<id>`/`META`, adapters/dynamo/quotes.py) and read back by batch create; its
dataclass is its one field list."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Literal, NotRequired, TypedDict, cast

from batchroute.domain.catalog.catalog import FeeSchedule
from batchroute.domain.catalog.pricing import FeeKind, PriceEstimateView
from batchroute.domain.routing.engine import RoutePlanView, stored_plan
from batchroute.domain.routing.gates import RoutingFields, stored_routing_fields
from batchroute.domain.stored import from_stored
from batchroute.money import MoneyView

QuoteKind = Literal["model", "workflow"]


class ModelConsideredView(TypedDict):
    """A model a workflow quote planned: eligible with its estimated total, or not and why."""

    model: str
    eligible: bool
    estimated_total: NotRequired[MoneyView]
    reason: NotRequired[str | None]


class WorkflowChoice(TypedDict, total=False):
    """A workflow quote's product answer (empty for a model quote), stored with the snapshot."""

    workflow_product: str
    chosen_model: str
    models_considered: list[ModelConsideredView]


class QuotedItemsItem(TypedDict):
    """What was quoted: inline items (kept at `s3_key`) or an input file's, and their digest."""

    kind: str
    digest: str
    file_id: NotRequired[str]
    s3_key: NotRequired[str]


@dataclass(frozen=True, slots=True)
class QuotedItems:
    """The quote's items: inline (kept at `s3_key`) or an input file's, and their digest."""

    kind: Literal["inline", "file"]
    digest: str = ""
    file_id: str | None = None
    s3_key: str | None = None

    def to_item(self) -> QuotedItemsItem:
        item: QuotedItemsItem = {"kind": self.kind, "digest": self.digest}
        if self.file_id is not None:
            item["file_id"] = self.file_id
        if self.s3_key is not None:
            item["s3_key"] = self.s3_key
        return item

    @classmethod
    def from_item(cls, item: QuotedItemsItem) -> QuotedItems:
        kind: Literal["inline", "file"] = "file" if item.get("kind") == "file" else "inline"
        return cls(kind, str(item.get("digest") or ""), item.get("file_id"), item.get("s3_key"))


@dataclass(frozen=True, slots=True)
class QuoteSnapshot:
    quote_id: str
    org_id: str
    version: int
    kind: QuoteKind
    created_at: str
    expires_at: str
    catalog_version: str
    pricing_updated_at: str | None
    item_count: int
    items: QuotedItems
    routing: RoutePlanView  # the plan as stored and shown
    pricing_estimate: PriceEstimateView
    total_micros: int
    policy_version: int = 0
    workflow: WorkflowChoice = field(default_factory=lambda: WorkflowChoice())
    # the routing fields the quote request gave and its batch-wide preset: what a batch from
    # the quote keeps (and a retry of it replays). An added field, not a new version: a
    # snapshot stored before it reads None (`from_json`), and the batch keeps the plan's tiers.
    routing_fields: RoutingFields | None = None
    # the fee schedule the total was priced with: a batch from the quote settles with it, so
    # a fee change deployed meanwhile never reprices it. None: stored before it was kept.
    fees: FeeSchedule | None = None

    @property
    def fee_kind(self) -> FeeKind:
        return "workflow" if self.kind == "workflow" else "batch"

    def to_json(self) -> str:
        """The snapshot as stored: its fields, the workflow choice's beside them."""
        stored = asdict(self)
        del stored["workflow"]
        stored["items"] = self.items.to_item()
        stored["fees"] = self.fees.to_mapping() if self.fees is not None else None
        return json.dumps({**stored, **self.workflow}, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> QuoteSnapshot:
        stored = json.loads(text)
        workflow = WorkflowChoice()
        if "workflow_product" in stored:
            workflow["workflow_product"] = str(stored["workflow_product"])
        if "chosen_model" in stored:
            workflow["chosen_model"] = str(stored["chosen_model"])
        if "models_considered" in stored:
            workflow["models_considered"] = [_considered(model) for model in stored["models_considered"]]
        return from_stored(
            cls,
            stored,
            kind="workflow" if stored.get("kind") == "workflow" else "model",
            version=int(stored.get("version") or 1),
            catalog_version=str(stored.get("catalog_version") or ""),
            items=QuotedItems.from_item(stored["items"]),
            routing=stored_plan(stored["routing"]),
            pricing_estimate=cast(PriceEstimateView, dict(stored.get("pricing_estimate") or {})),
            workflow=workflow,
            routing_fields=stored_routing_fields(stored.get("routing_fields")),
            fees=FeeSchedule.from_mapping(stored.get("fees")),
        )


def _considered(stored: ModelConsideredView) -> ModelConsideredView:
    """A planned model as stored (the view it was stored as, read back)."""
    if stored.get("eligible"):
        total = stored["estimated_total"]
        return {
            "model": str(stored["model"]),
            "eligible": True,
            "estimated_total": {"currency": str(total["currency"]), "amount": str(total["amount"])},
        }
    reason = stored.get("reason")
    return {
        "model": str(stored["model"]),
        "eligible": False,
        "reason": None if reason is None else str(reason),
    }
