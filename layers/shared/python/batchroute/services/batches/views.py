"""What the batch API shows: the batch summary, the detailed view and lane statuses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NotRequired, TypedDict

from batchroute.domain.batches.record import (
    ArtifactKeys,
    BatchFeeKind,
    BatchRecord,
    BatchSource,
    WorkOrderRefItem,
)
from batchroute.domain.batches.states import BatchState
from batchroute.domain.catalog.pricing import UsageFields
from batchroute.domain.compat.batches import output_files
from batchroute.domain.delivery.buckets import DeliveryView
from batchroute.domain.routing.lane_plan import LaneRecord, lane_chunk_count
from batchroute.money import Money, MoneyView

COUNT_KEYS = ("total", "pending", "running", "completed", "failed", "canceled")

# Signs a short-lived GET URL for an artifact key (no AWS call: signing is local).
Signer = Callable[[str], str]


class ScheduleRef(TypedDict):
    id: str
    version: int | None


class ExecutionSummaryView(TypedDict):
    latest_error: str | None
    preflight: NotRequired[object]  # the preflight's whole answer, as the 400 carries it


class BatchSummaryView(TypedDict):
    """A batch as the API shows it; `details` and `lane_statuses` only when asked for."""

    id: str
    object: Literal["batch"]
    state: BatchState
    counts: dict[str, int]
    created_at: str
    deadline_at: str | None
    completed_at: str | None
    routing_mode: str
    sla_tier: str
    privacy_tier: str
    quote_id: str | None
    source: BatchSource
    metadata: dict[str, str]
    output_file_id: str | None
    error_file_id: str | None
    receipt_file_id: None
    output_url: str | None
    error_url: str | None
    receipt_url: str | None
    settled_at: str | None
    execution_summary: ExecutionSummaryView
    cancel_reason: NotRequired[str]
    presets: NotRequired[list[str]]
    schedule: NotRequired[ScheduleRef]
    details: NotRequired[BatchDetailsView]
    lane_statuses: NotRequired[list[LaneStatusView]]


class LaneStatusView(TypedDict):
    lane_key: object
    lane_id: object
    provider: object
    model: object
    status: object
    item_count: int
    chunks_done: int
    chunk_count: int
    attempts: int
    failover_from: object
    usage: UsageFields
    latest_error: object


class ArtifactStatus(TypedDict):
    status: Literal["pending", "available", "expired"]
    rows: NotRequired[int | None]


class ArtifactFilesView(TypedDict):
    results: ArtifactStatus
    errors: ArtifactStatus
    receipt: ArtifactStatus
    available_since: str | None
    expires_at: str | None
    reclaimed_at: str | None


class PlanGroupView(TypedDict):
    model: object
    item_count: object
    selected_lanes: list[object]


class PlanView(TypedDict):
    groups: list[PlanGroupView]
    fee_kind: BatchFeeKind
    reserved: MoneyView


class WebhookView(TypedDict):
    url: str
    configured: bool


class BatchDetailsView(TypedDict):
    item_count: int
    chunk_count: int
    work_order: WorkOrderRefItem | None
    plan: PlanView
    workflow_product: str | None
    workflow_steps: dict[str, str]
    webhook: WebhookView | None
    delivery: DeliveryView | None  # the bucket delivery's view (services/delivery/buckets.py)
    state_changed_at: str | None
    artifacts: NotRequired[ArtifactFilesView]


def _counts(batch: BatchRecord) -> dict[str, int]:
    counts = batch.counts or {}
    return {key: max(0, int(counts.get(key, 0))) for key in COUNT_KEYS}


def batch_summary(batch: BatchRecord, *, sign: Signer | None = None) -> BatchSummaryView:
    artifacts = batch.artifacts or ArtifactKeys()
    # Batch results are artifacts with signed URLs, not files: a native batch names no file.
    # One made on the vendor-compatible surface names the files that surface serves, as its
    # Batch object shows them (docs/compat.md).
    output_file_id, error_file_id = output_files(batch) if batch.compat else (None, None)
    summary: BatchSummaryView = {
        "id": batch.batch_id,
        "object": "batch",
        "state": batch.state,
        "counts": _counts(batch),
        "created_at": batch.created_at,
        "deadline_at": batch.deadline_at,
        "completed_at": batch.completed_at,
        "routing_mode": batch.routing_mode or "cheapest",
        "sla_tier": batch.sla_tier or "standard",
        "privacy_tier": batch.privacy_tier or "standard",
        "quote_id": batch.quote_id,
        "source": batch.source,
        "metadata": dict(batch.metadata or {}),
        "output_file_id": output_file_id,
        "error_file_id": error_file_id,
        "receipt_file_id": None,
        "output_url": None,
        "error_url": None,
        "receipt_url": None,
        "settled_at": batch.settled_at,
        "execution_summary": execution_summary(batch),
    }
    if sign is not None:
        reclaimed = bool(batch.artifacts_reclaimed_at)  # only the receipt outlives retention
        if artifacts.results_key and not reclaimed:
            summary["output_url"] = sign(artifacts.results_key)
        if artifacts.errors_key and not reclaimed:
            summary["error_url"] = sign(artifacts.errors_key)
        if artifacts.receipt_key:
            summary["receipt_url"] = sign(artifacts.receipt_key)
    if batch.cancel_reason:
        summary["cancel_reason"] = batch.cancel_reason
    if batch.presets:
        summary["presets"] = list(batch.presets)
    if batch.schedule_id:  # fired by a recurring schedule (docs/schedules.md)
        summary["schedule"] = {"id": batch.schedule_id, "version": batch.schedule_version}
    return summary


def lane_statuses(lanes: list[LaneRecord]) -> list[LaneStatusView]:
    """Per-lane status of the internal provider/model executions."""
    return [
        {
            "lane_key": lane.lane_key,
            "lane_id": lane.lane_id,
            "provider": lane.provider,
            "model": lane.model,
            "status": lane.status,
            "item_count": lane.item_count,
            "chunks_done": lane.chunks_done_n,
            "chunk_count": lane_chunk_count(lane),
            "attempts": lane.attempts,
            "failover_from": lane.failover_from,
            "usage": lane.usage.to_fields(),
            "latest_error": lane.latest_error,
        }
        for lane in sorted(lanes, key=lambda lane: lane.lane_key)
    ]


def artifact_files(batch: BatchRecord, *, expires_at: str | None) -> ArtifactFilesView:
    """Each artifact's status (docs/retention.md): `pending` until written, `available`, then
    `expired` once retention reclaimed the bytes (the receipt is never reclaimed)."""
    artifacts = batch.artifacts or ArtifactKeys()
    reclaimed = batch.artifacts_reclaimed_at

    def status(key: str | None, *, kept: bool = False) -> Literal["pending", "available", "expired"]:
        if not key:
            return "pending"
        return "expired" if reclaimed and not kept else "available"

    return {
        "results": {"status": status(artifacts.results_key), "rows": artifacts.result_count},
        "errors": {"status": status(artifacts.errors_key), "rows": artifacts.error_count},
        "receipt": {"status": status(artifacts.receipt_key, kept=True)},
        "available_since": batch.finalized_at,
        "expires_at": expires_at,
        "reclaimed_at": reclaimed,
    }


def batch_details(batch: BatchRecord, *, delivery: DeliveryView | None = None) -> BatchDetailsView:
    """The detailed view's extra fields: the work order the batch belongs to (`{id,
    client_reference}` or null: docs/work-orders.md), the plan, and delivery state
    (`delivery`: the bucket delivery's view, services/delivery/buckets.py)."""
    webhook = batch.webhook
    groups = batch.plan.get("groups", []) if batch.plan else []
    return {
        "item_count": batch.item_count,
        "chunk_count": batch.chunk_count,
        "work_order": batch.work_order.to_mapping() if batch.work_order else None,
        "plan": {
            "groups": [
                {
                    "model": group.get("model"),
                    "item_count": group.get("item_count"),
                    "selected_lanes": [lane.get("lane_id") for lane in group.get("selected_lanes", [])],
                }
                for group in groups
            ],
            "fee_kind": batch.fee_kind,
            "reserved": Money(batch.reserved_micros).to_api(),
        },
        "workflow_product": batch.workflow_product,
        "workflow_steps": dict(batch.workflow_steps),
        "webhook": {"url": webhook.url, "configured": True} if webhook is not None and webhook.url else None,
        "delivery": delivery,
        "state_changed_at": batch.state_changed_at,
    }


def execution_summary(batch: BatchRecord) -> ExecutionSummaryView:
    """`latest_error`, and `preflight` (the preflight's whole answer, as the 400
    `batch_preflight_failed` carries it) when the batch's input file failed the Intake step."""
    summary: ExecutionSummaryView = {"latest_error": batch.latest_error}
    error = batch.intake.error if batch.intake is not None else None
    if error is not None and isinstance(error.details.get("preflight"), dict):
        summary["preflight"] = error.details["preflight"]
    return summary
