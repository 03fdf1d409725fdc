"""A quote's price-locked snapshot as stored (`QUOTE#<id>`/`META`, adapters/dynamo/quotes.py)
and read back by batch create (services/batches/snapshots.py:QuoteSnapshot). Pure: the stored
shapes only."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from batchroute.domain.catalog.pricing import PriceEstimateView
from batchroute.domain.routing.engine import RoutePlanView
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


class QuoteSnapshotItem(WorkflowChoice):
    """The snapshot as stored: `QuoteSnapshot`'s fields, its workflow choice beside them."""

    quote_id: str
    org_id: str
    version: int
    kind: QuoteKind
    created_at: str
    expires_at: str
    catalog_version: str
    pricing_updated_at: str | None
    item_count: int
    items: QuotedItemsItem
    routing: RoutePlanView
    pricing_estimate: PriceEstimateView
    total_micros: int
    policy_version: int
