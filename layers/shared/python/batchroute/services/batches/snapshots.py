"""A quote's price-locked snapshot, as stored (`QUOTE#<id>`/`META`) and read back by batch
create: what was quoted (`QuotedItems`), the plan, the locked total and the route policy's
version."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, cast

from batchroute.domain.batches.quote_snapshot import (
    ModelConsideredView,
    QuotedItemsItem,
    QuoteKind,
    QuoteSnapshotItem,
    WorkflowChoice,
)
from batchroute.domain.catalog.pricing import FeeKind, PriceEstimateView
from batchroute.domain.routing.engine import RoutePlanView, stored_plan


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

    @property
    def fee_kind(self) -> FeeKind:
        return "workflow" if self.kind == "workflow" else "batch"

    def to_item(self) -> QuoteSnapshotItem:
        return {
            "quote_id": self.quote_id,
            "org_id": self.org_id,
            "version": self.version,
            "kind": self.kind,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "catalog_version": self.catalog_version,
            "pricing_updated_at": self.pricing_updated_at,
            "item_count": self.item_count,
            "items": self.items.to_item(),
            "routing": self.routing,
            "pricing_estimate": self.pricing_estimate,
            "total_micros": self.total_micros,
            "policy_version": self.policy_version,
            **self.workflow,
        }

    @classmethod
    def from_item(cls, item: QuoteSnapshotItem) -> QuoteSnapshot:
        kind: QuoteKind = "workflow" if item.get("kind") == "workflow" else "model"
        workflow = WorkflowChoice()
        if "workflow_product" in item:
            workflow["workflow_product"] = str(item["workflow_product"])
        if "chosen_model" in item:
            workflow["chosen_model"] = str(item["chosen_model"])
        if "models_considered" in item:
            workflow["models_considered"] = [_considered(model) for model in item["models_considered"]]
        return cls(
            quote_id=str(item["quote_id"]),
            org_id=str(item["org_id"]),
            version=int(item.get("version") or 1),
            kind=kind,
            created_at=str(item["created_at"]),
            expires_at=str(item["expires_at"]),
            catalog_version=str(item.get("catalog_version") or ""),
            pricing_updated_at=item.get("pricing_updated_at"),
            item_count=int(item["item_count"]),
            items=QuotedItems.from_item(item["items"]),
            routing=stored_plan(item["routing"]),
            pricing_estimate=cast(PriceEstimateView, dict(item.get("pricing_estimate") or {})),
            total_micros=int(item["total_micros"]),
            policy_version=int(item.get("policy_version") or 0),
            workflow=workflow,
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
