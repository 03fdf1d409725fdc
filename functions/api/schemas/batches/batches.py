"""Request and response models: batches. Create (202, already priced, credits reserved from
the quote), list, read, items, results, the artifact link, cancel and retry (docs/batches.md).

The create body is validated here, once, by its command's parser (`CreateBatch`,
services/batches/commands.py, also the reader of the bodies schedules and the vendor-compatible
surface create batches from). An Idempotency-Key replay is answered before the body is looked
at: the route's `idempotent_replay` dependency runs first (functions/api/routes/batches/batches.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from batchroute.domain.batches.metadata import MAX_KEY_CHARS, MAX_METADATA_PAIRS, MAX_VALUE_CHARS
from batchroute.domain.batches.states import BatchState
from batchroute.domain.catalog.catalog import PrivacyTier, SlaTier
from batchroute.domain.routing.gates import RoutingMode
from batchroute.services.batches.commands import CreateBatch
from batchroute.services.batches.create import MAX_CANCEL_REASON
from functions.api.schemas.batches.quotes import ItemsToQuote
from functions.api.schemas.batches.receipts import BillingReceipt, TokenUsage
from functions.api.schemas.common import Absent, ContractBody, MoneyOut, as_sent
from functions.api.schemas.delivery.targets import BucketDeliveryOut
from functions.api.schemas.feedback.feedback import FeedbackOut

LaneRunStatus = Literal["pending", "running", "completed", "failed", "canceled"]

Metadata = Annotated[
    dict[
        Annotated[str, Field(min_length=1, max_length=MAX_KEY_CHARS)],
        Annotated[str, Field(max_length=MAX_VALUE_CHARS)] | float | bool,
    ],
    Field(
        max_length=MAX_METADATA_PAIRS,
        description=f"Your key-value pairs, echoed on the batch: at most {MAX_METADATA_PAIRS}; keys "
        f"1-{MAX_KEY_CHARS} characters; values strings of at most {MAX_VALUE_CHARS} characters "
        "(numbers and booleans are kept as their text)",
    ),
]


# -- requests ----------------------------------------------------------------------------
class RescueSettingBody(BaseModel):
    """A batch's `rescue` setting (read by RescueSetting.from_api: domain/routing/rescue.py)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["within_reservation", "allow_overage", "off"] = "within_reservation"
    max_overage_usd: str | None = Field(
        default=None,
        description="With allow_overage (required there, only there): the most the batch's rescues "
        "may add beyond its reservation, USD (a decimal string above 0, at most 10000)",
    )


WorkOrderId = Annotated[str, Field(pattern=r"^wo_", max_length=64)]


class BatchCreateRequest(ItemsToQuote):
    """A batch: from a quote (its locked prices; its own items when none are given) or priced
    now from `items` or `input_file_id`. Needs the Idempotency-Key header; unknown fields are
    refused."""

    model_config = ConfigDict(extra="forbid")

    quote_id: Annotated[Any, as_sent(str | None)] = Field(
        default=None, description="A quote (`qlock_...`) not yet expired, of the same items"
    )
    metadata: Annotated[Any, as_sent(Metadata | None)] = None
    work_order_id: Annotated[Any, as_sent(WorkOrderId | None)] = Field(
        default=None,
        description="(beta) An open work order (`wo_...`) of the org the batch joins (docs/work-orders.md)",
    )
    completion_window: Annotated[Any, as_sent(Literal["24h"])] = Field(
        default="24h", description="Every batch has one 24-hour SLA"
    )
    rescue: Annotated[Any, as_sent(RescueSettingBody | None)] = Field(
        default=None,
        description="Deadline rescue (docs/batches.md): when a lane is projected to miss the deadline, "
        "its unfinished items move to a faster eligible lane. mode within_reservation (default: only "
        "what the reservation covers, cheapest lane first), allow_overage (beyond it, up to "
        "max_overage_usd more, held on the wallet before the rescue within the available credit and "
        "the hard spending limit, and settled with the batch) or off",
    )

    @classmethod
    def reads(cls, body: Mapping[str, Any]) -> CreateBatch:
        return CreateBatch.parse(body)

    def command(self) -> CreateBatch:
        assert isinstance(self._command, CreateBatch)
        return self._command


class CancelRequest(ContractBody):
    """Optional: why the batch is canceled."""

    reason: Annotated[str, Field(max_length=MAX_CANCEL_REASON)] | None = None


# -- responses ---------------------------------------------------------------------------
class BatchCounts(BaseModel):
    total: int
    pending: int
    running: int
    completed: int
    failed: int
    canceled: int


class ExecutionSummary(BaseModel):
    latest_error: str | None = Field(description="The latest batch-level execution error, if any")
    preflight: dict[str, Any] | None = Field(
        default=None,
        description="When the batch's input file failed intake (read by the workflow after create): "
        "the preflight's answer, {ok, errors, warnings}, as a 400 batch_preflight_failed carries it",
    )


class WorkOrderGroup(BaseModel):
    model: str | None
    item_count: int | None
    selected_lanes: list[str | None] = Field(description="lane ids")


class BatchPlan(BaseModel):
    """What was planned: the model groups and their selected lanes, the fee kind, the
    reservation."""

    groups: list[WorkOrderGroup]
    fee_kind: Literal["batch", "workflow"]
    reserved: MoneyOut


class WorkOrderRef(BaseModel):
    id: str = Field(description="wo_...")
    client_reference: str | None


class BatchWebhookState(BaseModel):
    url: str
    configured: Literal[True]


class ArtifactFile(BaseModel):
    status: Literal["pending", "available", "expired"] = Field(
        description="pending until written; expired once retention reclaimed the bytes"
    )
    rows: int | None = Field(default=None, description="Rows in the file, once written")


class ReceiptFile(BaseModel):
    status: Literal["pending", "available"] = Field(description="The receipt is never reclaimed")


class ArtifactFiles(BaseModel):
    """The batch's artifacts and their retention (docs/retention.md)."""

    results: ArtifactFile
    errors: ArtifactFile
    receipt: ReceiptFile
    available_since: str | None = Field(
        description="When the artifacts were written: the retention window starts"
    )
    expires_at: str | None = Field(
        description="When retention reclaims the result bytes under the org's current settings "
        "(null: kept until deleted, not written yet, or already reclaimed)"
    )
    reclaimed_at: str | None = Field(description="When retention reclaimed them")


class BatchDetails(BaseModel):
    """The detailed view: the work order it belongs to, the plan, delivery state, artifacts."""

    item_count: int
    chunk_count: int
    work_order: WorkOrderRef | None = Field(
        description="(beta) The work order this batch belongs to (docs/work-orders.md); null: none"
    )
    plan: BatchPlan
    workflow_product: str | None = Field(
        description="The workflow product whose contract the batch fulfils (a batch from a "
        "workflow quote, or its retry; GET /v1/catalog/workflow-products/{slug}); null: none"
    )
    workflow_steps: dict[str, str] = Field(description="When each workflow step ran")
    webhook: BatchWebhookState | None
    delivery: BucketDeliveryOut | None = Field(
        description="Delivery to the org's buckets (docs/delivery-targets.md); null when the org "
        "had no enabled delivery target"
    )
    state_changed_at: str | None
    artifacts: ArtifactFiles


class LaneStatusOut(BaseModel):
    """A lane: one internal provider/model execution of the batch."""

    lane_key: str | None
    lane_id: str | None
    provider: str | None
    model: str | None
    status: LaneRunStatus
    item_count: int
    chunks_done: int
    chunk_count: int
    attempts: int
    failover_from: str | None
    usage: TokenUsage
    latest_error: str | None


class BatchSchedule(BaseModel):
    id: str = Field(description="sched_...")
    version: int = Field(description="The schedule version that fired it")


class BatchOut(BaseModel):
    """The batch summary. The lifecycle field is `state`, never `status`."""

    id: str = Field(description="batch_...")
    object: Literal["batch"]
    state: BatchState
    counts: BatchCounts
    created_at: str
    deadline_at: str = Field(description="The SLA deadline: created_at + 24 h")
    completed_at: str | None
    routing_mode: RoutingMode
    sla_tier: SlaTier
    privacy_tier: PrivacyTier
    quote_id: str | None
    source: Literal["native", "compat", "chat", "chat_direct"] = Field(
        description="native; compat: the vendor-compatible surface; chat: a queued chat job; "
        "chat_direct: the record of a direct chat request"
    )
    metadata: dict[str, str]
    output_file_id: str | None = Field(
        description="A batch made on the vendor-compatible surface: its output file there, once it "
        "shows it (GET /v1/compat/v1/files/{id}/content); null for a native batch (output_url)"
    )
    error_file_id: str | None = Field(description="Likewise its error file")
    receipt_file_id: str | None = Field(description="null: the receipt is receipt_url")
    output_url: str | None = Field(description="Short-lived signed URL of the results (JSONL)")
    error_url: str | None = Field(description="Short-lived signed URL of the failed rows (JSONL)")
    receipt_url: str | None = Field(description="Short-lived signed URL of the billing receipt (JSON)")
    settled_at: str | None = Field(
        description="Set once the batch is settled: its work in flight ended, its results and receipt "
        "written. A canceled, failed or expired batch is terminal before that (docs/batches.md)"
    )
    execution_summary: ExecutionSummary
    cancel_reason: str | Absent = Field(default=None, description="Present when canceled with a reason")
    presets: list[str] | Absent = Field(
        default=None, description="The preset versions its items used, `name@version` (docs/presets.md)"
    )
    schedule: BatchSchedule | Absent = Field(
        default=None, description="Present when a recurring schedule fired the batch (docs/schedules.md)"
    )
    details: BatchDetails | Absent = Field(default=None, description="With include_details=true")
    lane_statuses: list[LaneStatusOut] | Absent = Field(
        default=None, description="With include_billing_receipt=true"
    )


class BatchEnvelope(BaseModel):
    batch: BatchOut


class BatchRead(BaseModel):
    batch: BatchOut
    billing_receipt: BillingReceipt | None = Field(
        description="With include_billing_receipt=true, once settled; else null"
    )


class BatchList(BaseModel):
    data: list[BatchOut] = Field(description="Newest first")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null at the end")
    workspace_total_count: int


class RetriedBatch(BaseModel):
    batch: BatchOut = Field(description="The new batch")
    source_batch_id: str
    retry_item_count: int


class ItemError(BaseModel):
    code: str
    message: str
    transient: bool | Absent = None


class ItemRow(BaseModel):
    sequence_number: int = Field(description="The item's 0-based position in the batch")
    customer_item_id: str | None
    model: str | None
    operation: str | None
    status: Literal["pending", "processing", "completed", "failed"]
    error: ItemError | None
    output_preview: str | None = Field(description="The first 200 characters of the output")
    provider: str | None = Field(default=None, description="The provider that answered, once it has")
    feedback: list[FeedbackOut] = Field(
        default_factory=list, description="Feedback given on the item's result (docs/feedback.md)"
    )
    preset: str | Absent = Field(
        default=None,
        description="The preset version the item was expanded from, `name@version` (docs/presets.md)",
    )


class ItemsPage(BaseModel):
    batch_id: str
    data: list[ItemRow]
    next_cursor: str | None


class ResultRow(BaseModel):
    customer_item_id: str | None
    sequence_number: int | None
    status: Literal["completed", "failed"]
    output: dict[str, Any] | None = Field(
        description="Set on success: normalized, or the provider's own with body_format=raw"
    )
    error: ItemError | None = Field(description="Set on failure")


class ResultsPage(BaseModel):
    batch_id: str
    body_format: Literal["normalized", "raw"]
    data: list[ResultRow] = Field(description="One row per item, in input order")
    next_cursor: str | None


class ArtifactUrl(BaseModel):
    batch_id: str
    url: str = Field(description="A signed URL of the full JSONL results artifact")
    expires_in: int = Field(description="seconds")
