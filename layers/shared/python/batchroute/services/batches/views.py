"""What the batch API shows: the batch summary, the detailed view and lane statuses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from batchroute.money import Money

COUNT_KEYS = ("total", "pending", "running", "completed", "failed", "canceled")

# Signs a short-lived GET URL for an artifact key (no AWS call: signing is local).
Signer = Callable[[str], str]


def _counts(batch: dict[str, Any]) -> dict[str, int]:
    counts = batch.get("counts") or {}
    return {key: max(0, int(counts.get(key, 0))) for key in COUNT_KEYS}


def batch_summary(batch: dict[str, Any], *, sign: Signer | None = None) -> dict[str, Any]:
    artifacts = batch.get("artifacts") or {}
    summary: dict[str, Any] = {
        "id": batch["batch_id"],
        "object": "batch",
        "state": batch["state"],
        "counts": _counts(batch),
        "created_at": batch["created_at"],
        "deadline_at": batch["deadline_at"],
        "completed_at": batch.get("completed_at"),
        "routing_mode": batch.get("routing_mode", "cheapest"),
        "sla_tier": batch.get("sla_tier", "standard"),
        "privacy_tier": batch.get("privacy_tier", "standard"),
        "quote_id": batch.get("quote_id"),
        "source": batch.get("source", "native"),
        "metadata": batch.get("metadata") or {},
        "output_file_id": artifacts.get("output_file_id"),
        "error_file_id": artifacts.get("error_file_id"),
        "receipt_file_id": artifacts.get("receipt_file_id"),
        "output_url": None,
        "error_url": None,
        "receipt_url": None,
        "settled_at": batch.get("settled_at"),
        "execution_summary": {"latest_error": (batch.get("execution_summary") or {}).get("latest_error")},
    }
    if sign is not None:
        for field, key in (
            ("output_url", "results_key"),
            ("error_url", "errors_key"),
            ("receipt_url", "receipt_key"),
        ):
            if artifacts.get(key):
                summary[field] = sign(artifacts[key])
    if batch.get("cancel_reason"):
        summary["cancel_reason"] = batch["cancel_reason"]
    return summary


def lane_statuses(lanes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-lane status of the internal provider/model executions."""
    return [
        {
            "lane_key": lane.get("lane_key"),
            "lane_id": lane.get("lane_id"),
            "provider": lane.get("provider"),
            "model": lane.get("model"),
            "status": lane.get("status", "pending"),
            "item_count": int(lane.get("item_count", 0)),
            "chunks_done": len(lane.get("chunks_done") or []),
            "chunk_count": len(lane.get("chunks") or []),
            "attempts": int(lane.get("attempts", 0)),
            "failover_from": lane.get("failover_from"),
            "usage": lane.get("usage") or {"prompt_tokens": 0, "completion_tokens": 0},
            "latest_error": lane.get("latest_error"),
        }
        for lane in sorted(lanes, key=lambda lane: str(lane.get("lane_key")))
    ]


def batch_details(batch: dict[str, Any]) -> dict[str, Any]:
    """The detailed view's extra fields: the work order (what was planned) and delivery state."""
    webhook = batch.get("webhook") or {}
    plan = batch.get("plan") or {}
    return {
        "item_count": int(batch.get("item_count", 0)),
        "chunk_count": int(batch.get("chunk_count", 0)),
        "work_order": {
            "groups": [
                {
                    "model": group.get("model"),
                    "item_count": group.get("item_count"),
                    "selected_lanes": [lane.get("lane_id") for lane in group.get("selected_lanes", [])],
                }
                for group in plan.get("groups", [])
            ],
            "fee_kind": batch.get("fee_kind", "batch"),
            "reserved": {"currency": "usd", "amount": _micros(batch.get("reserved_micros", 0))},
        },
        "workflow_steps": batch.get("workflow_steps") or {},
        "webhook": {"url": webhook.get("url"), "configured": True} if webhook.get("url") else None,
        "state_changed_at": batch.get("state_changed_at"),
    }


def _micros(micros: Any) -> str:
    return str(Money(int(micros or 0)).to_api()["amount"])
