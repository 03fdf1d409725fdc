"""The batch record's plain-value form: what the batches table stores, read back unchanged."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

from batchroute.domain.batches.record import FIELDS, ArtifactKeys, BatchRecord, CompatFields, UsageCheckpoint
from batchroute.domain.catalog.pricing import TokenUsage

STORED: dict[str, Any] = {
    "batch_id": "batch_1",
    "org_id": "org_1",
    "state": "completed",
    "source": "compat",
    "created_at": "2026-01-01T00:00:00.000Z",
    "deadline_at": "2026-01-02T00:00:00.000Z",
    "state_changed_at": "2026-01-01T00:05:00.000Z",
    "completed_at": "2026-01-01T00:05:00.000Z",
    "routing_mode": "cheapest",
    "sla_tier": "standard",
    "privacy_tier": "standard",
    "quote_id": "qlock_1",
    "created_by": "user_1",
    "metadata": {"team": "a"},
    "rescue": {"mode": "allow_overage", "max_overage_micros": "2500000"},
    "webhook": {"url": "https://hooks.example.com", "secret_sealed": "AQID"},
    "item_count": Decimal(3),
    "chunk_count": Decimal(1),
    "chunk_models": [{"m": Decimal(3)}],
    "plan": {"groups": [{"model": "m", "item_count": Decimal(3)}]},
    "reservation_id": "res_batch_1",
    "reserved_micros": Decimal(1500),
    "overage_hold_ids": ["res_batch_1-overage-01-a-m"],
    "overage_held_micros": Decimal(700),
    "fee_kind": "workflow",
    "workflow_product": "ticket-classification",
    "fees": {
        "standard_batch_fee_pct": "5.90",
        "workflow_product_fee_pct": "11.80",
        "margin_floor_pct": "3.00",
        "control_plane_fee_per_lane_usd": "0.01",
        "effective_at": "2026-01-01T00:00:00Z",
    },
    "counts": {"total": Decimal(3), "pending": 0, "running": 0, "completed": 2, "failed": 1, "canceled": 0},
    "execution_arn": "arn:aws:states:x",
    "workflow_steps": {"route": "2026-01-01T00:01:00.000Z"},
    "execution_summary": {"latest_error": None},
    "cancel_reason": "no longer needed",
    "retry_of": "batch_0",
    "work_order": {"id": "wo_1", "client_reference": "PO-1"},
    "presets": ["triage@3", "triage@1"],
    "artifacts": {
        "results_key": "r",
        "errors_key": "e",
        "result_count": 3,
        "error_count": 1,
        "receipt_key": "b",
    },
    "lane_tallies": {"01-a-m": {"completed": 2, "failed": 1, "prompt_tokens": 9, "completion_tokens": 4}},
    "finalizing_at": "2026-01-01T00:03:30.000Z",
    "finalized_at": "2026-01-01T00:04:00.000Z",
    "billing": {"object": "billing_receipt", "credit_charged": {"currency": "usd", "amount": "0.01"}},
    "settled_at": "2026-01-01T00:05:00.000Z",
    "artifacts_reclaimed_at": "2026-01-04T00:04:00.000Z",
    "compat": {
        "endpoint": "/v1/chat/completions",
        "input_file_id": "file_in",
        "completion_window": "24h",
        "body_format": "normalized",
        "output_file_id": "file_out",
        "error_file_id": "file_err",
    },
    "chat_model": "m",
    "chat_job_id": "chatjob_1",
    "stream": False,
    "planned_lanes": ["lane_a"],
    "lane_id": "lane_a",
    "provider": "a",
    "attempts": [{"lane_id": "lane_a", "provider": "a", "error": None}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 4},
    "usage_checkpoint": {"lane_id": "lane_a", "prompt_tokens": 9, "completion_tokens": 4},
    "checkpoint_at": "2026-01-01T00:03:00.000Z",
    "schedule_id": "sched_1",
    "schedule_version": 2,
    "intake": {"file_id": "file_1", "digest": "d", "item_count": 2, "options": {}},
    "routing_fields": {
        "routing_mode": "cheapest",
        "regions": ["us"],
        "max_price": {"per_item_usd": "0.01"},
        "required_tools": ["web_search"],
    },
}


def test_every_stored_field_is_modelled_and_reads_back_unchanged() -> None:
    assert set(STORED) == set(FIELDS)
    record = BatchRecord.from_mapping({**STORED, "pk": "BATCH#batch_1", "gsi1pk": "ORG#org_1"})
    assert record.to_mapping() == STORED
    assert BatchRecord.from_mapping(record.to_mapping()) == record


def test_numbers_are_ints_and_nested_parts_are_typed() -> None:
    record = BatchRecord.from_mapping(STORED)
    assert record.reserved_micros == 1500 and type(record.reserved_micros) is int
    assert record.counts is not None and type(record.counts["total"]) is int
    assert record.chunk_models == [{"m": 3}]
    assert record.artifacts == ArtifactKeys(
        results_key="r", errors_key="e", result_count=3, error_count=1, receipt_key="b"
    )
    assert record.compat is not None and record.compat.output_file_id == "file_out"
    assert isinstance(record.compat, CompatFields)
    assert record.usage_checkpoint == UsageCheckpoint(lane_id="lane_a", usage=TokenUsage(9, 4))
    assert record.results_key == "r" and record.latest_error is None


def test_a_final_checkpoint_says_the_answer_was_delivered_and_reads_back() -> None:
    final = UsageCheckpoint(lane_id="lane_a", usage=TokenUsage(9, 4), answered=True)
    stored = {**STORED, "usage_checkpoint": final.to_mapping()}
    assert stored["usage_checkpoint"]["answered"] is True
    assert BatchRecord.from_mapping(stored).usage_checkpoint == final
    # a streaming checkpoint stores no flag and reads back as not answered
    assert "answered" not in UsageCheckpoint(usage=TokenUsage(1)).to_mapping()
    assert BatchRecord.from_mapping(STORED).usage_checkpoint == replace(final, answered=False)


def test_absent_fields_stay_absent() -> None:
    minimal = {"batch_id": "batch_1", "org_id": "org_1", "state": "running", "created_at": "t"}
    record = BatchRecord.from_mapping(minimal)
    assert record.counts is None and record.execution_summary is None and record.privacy_tier is None
    assert (record.source, record.fee_kind, record.item_count, record.workflow_steps) == (
        "native",
        "batch",
        0,
        {},
    )
    assert record.to_mapping() == {
        **minimal,
        "source": "native",
        "item_count": 0,
        "chunk_count": 0,
        "reserved_micros": 0,
        "fee_kind": "batch",
        "workflow_steps": {},
    }
