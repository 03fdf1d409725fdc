"""What the batch API shows: the batch summary, the detailed view and lane statuses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from batchroute.domain.batches.record import ArtifactKeys, BatchRecord
from batchroute.domain.routing.lane_plan import LaneRecord, lane_chunk_count
from batchroute.money import Money

COUNT_KEYS = ("total", "pending", "running", "completed", "failed", "canceled")

# Signs a short-lived GET URL for an artifact key (no AWS call: signing is local).
Signer = Callable[[str], str]


def _counts(batch: BatchRecord) -> dict[str, int]:
    counts = batch.counts or {}
    return {key: max(0, int(counts.get(key, 0))) for key in COUNT_KEYS}


def batch_summary(batch: BatchRecord, *, sign: Signer | None = None) -> dict[str, Any]:
    artifacts = batch.artifacts or ArtifactKeys()
    summary: dict[str, Any] = {
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
        # Batch results are artifacts with signed URLs, not files: no file ids (the
        # vendor-compatible surface names its files itself, docs/compat.md).
        "output_file_id": None,
        "error_file_id": None,
        "receipt_file_id": None,
        "output_url": None,
        "error_url": None,
        "receipt_url": None,
        "settled_at": batch.settled_at,
        "execution_summary": execution_summary(batch),
    }
    if sign is not None:
        reclaimed = bool(batch.artifacts_reclaimed_at)  # only the receipt outlives retention
        for name, key in (
            ("output_url", None if reclaimed else artifacts.results_key),
            ("error_url", None if reclaimed else artifacts.errors_key),
            ("receipt_url", artifacts.receipt_key),
        ):
            if key:
                summary[name] = sign(key)
    if batch.cancel_reason:
        summary["cancel_reason"] = batch.cancel_reason
    if batch.presets:
        summary["presets"] = list(batch.presets)
    if batch.schedule_id:  # fired by a recurring schedule (docs/schedules.md)
        summary["schedule"] = {"id": batch.schedule_id, "version": batch.schedule_version}
    return summary


def lane_statuses(lanes: list[LaneRecord]) -> list[dict[str, Any]]:
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
            "usage": lane.usage,
            "latest_error": lane.latest_error,
        }
        for lane in sorted(lanes, key=lambda lane: lane.lane_key)
    ]


def artifact_files(batch: BatchRecord, *, expires_at: str | None) -> dict[str, Any]:
    """Each artifact's status (docs/retention.md): `pending` until written, `available`, then
    `expired` once retention reclaimed the bytes (the receipt is never reclaimed)."""
    artifacts = batch.artifacts or ArtifactKeys()
    reclaimed = batch.artifacts_reclaimed_at

    def status(key: str | None, *, kept: bool = False) -> str:
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


def batch_details(batch: BatchRecord, *, delivery: dict[str, Any] | None = None) -> dict[str, Any]:
    """The detailed view's extra fields: the work order the batch belongs to (`{id,
    client_reference}` or null: docs/work-orders.md), the plan, and delivery state
    (`delivery`: the bucket delivery's view, services/delivery/buckets.py)."""
    webhook = batch.webhook
    plan = batch.plan or {}
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
                for group in plan.get("groups", [])
            ],
            "fee_kind": batch.fee_kind,
            "reserved": {"currency": "usd", "amount": _micros(batch.reserved_micros)},
        },
        "workflow_steps": dict(batch.workflow_steps),
        "webhook": {"url": webhook.url, "configured": True} if webhook is not None and webhook.url else None,
        "delivery": delivery,
        "state_changed_at": batch.state_changed_at,
    }


def _micros(micros: int) -> str:
    return str(Money(micros).to_api()["amount"])


def execution_summary(batch: BatchRecord) -> dict[str, Any]:
    """`latest_error`, and `preflight` (the preflight's whole answer, as the 400
    `batch_preflight_failed` carries it) when the batch's input file failed the Intake step."""
    summary: dict[str, Any] = {"latest_error": batch.latest_error}
    error = batch.intake.error if batch.intake is not None else None
    if error is not None and isinstance(error.details.get("preflight"), dict):
        summary["preflight"] = error.details["preflight"]
    return summary
