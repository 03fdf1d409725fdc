"""A quote's snapshot as stored (domain/batches/quote_snapshot.py): one JSON text, read back whole."""

from __future__ import annotations

import json

from batchroute.domain.batches.quote_snapshot import QuotedItems, QuoteSnapshot
from batchroute.domain.routing.engine import RoutePlanView
from batchroute.domain.routing.gates import RoutingFields

PLAN: RoutePlanView = {
    "routing_mode": "cheapest",
    "privacy_tier": "standard",
    "sla_tier": "standard",
    "effective_sla_tier": "standard",
    "catalog_version": "cat-1",
    "groups": [],
}


def _snapshot(**changes: object) -> QuoteSnapshot:
    fields: dict[str, object] = {
        "quote_id": "qlock_1",
        "org_id": "org_1",
        "version": 1,
        "kind": "model",
        "created_at": "2026-11-30T00:00:00.000Z",
        "expires_at": "2026-11-30T00:15:00.000Z",
        "catalog_version": "cat-1",
        "pricing_updated_at": None,
        "item_count": 2,
        "items": QuotedItems("inline", "d1", s3_key="quotes/qlock_1.jsonl"),
        "routing": PLAN,
        "pricing_estimate": {},
        "total_micros": 1200,
        "policy_version": 3,
        **changes,
    }
    return QuoteSnapshot(**fields)  # type: ignore[arg-type]


def test_a_model_quote_reads_back_the_same() -> None:
    snapshot = _snapshot()
    assert QuoteSnapshot.from_json(snapshot.to_json()) == snapshot


def test_a_workflow_quote_keeps_its_choice_beside_its_fields() -> None:
    choice = {
        "workflow_product": "ticket-classification",
        "chosen_model": "gpt-4o-mini",
        "models_considered": [
            {
                "model": "gpt-4o-mini",
                "eligible": True,
                "estimated_total": {"currency": "usd", "amount": "0.01"},
            },
            {"model": "claude-3-haiku", "eligible": False, "reason": "no lane"},
        ],
    }
    snapshot = _snapshot(kind="workflow", workflow=choice)
    stored = json.loads(snapshot.to_json())
    # the stored text's shape: the choice flat beside the fields, the items without nulls
    assert stored["workflow_product"] == "ticket-classification" and "workflow" not in stored
    assert stored["items"] == {"kind": "inline", "digest": "d1", "s3_key": "quotes/qlock_1.jsonl"}
    assert QuoteSnapshot.from_json(snapshot.to_json()) == snapshot


def test_a_quote_keeps_the_routing_fields_its_request_gave() -> None:
    fields: RoutingFields = {
        "regions": ["us"],
        "max_price": {"input_per_mtok": "0.04"},
        "required_tools": ["web_search"],
        "preset": "nightly@2",
    }
    snapshot = _snapshot(routing_fields=fields)
    assert json.loads(snapshot.to_json())["routing_fields"] == fields
    assert QuoteSnapshot.from_json(snapshot.to_json()) == snapshot


def test_a_snapshot_stored_before_routing_fields_were_kept_reads_none() -> None:
    stored = json.loads(_snapshot().to_json())
    del stored["routing_fields"]
    old = QuoteSnapshot.from_json(json.dumps(stored))
    assert old.routing_fields is None and old == _snapshot()
