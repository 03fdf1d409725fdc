"""A record stored field for field (domain/stored.py): one field list, the dataclass's."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from decimal import Decimal

import pytest

from batchroute.adapters.dynamo.batch_records import batch_from_items, batch_values
from batchroute.domain.batches.record import BatchIntake, BatchRecord, IntakeError
from batchroute.domain.billing.usage import UsageFigures
from batchroute.domain.delivery.webhooks import WebhookAttempt
from batchroute.domain.feedback.feedback import FeedbackCounter
from batchroute.domain.routing.gates import RoutingFields
from batchroute.domain.stored import from_counters, from_stored, sparse
from batchroute.domain.work_orders.work_orders import Tallies, WorkOrderMember
from batchroute.domain.workflow.results import LaneTally


@dataclass(frozen=True, slots=True)
class _Upload:
    upload_id: str
    bytes: int
    purpose: str | None = None


def test_a_stored_item_reads_back_without_the_stores_own_keys() -> None:
    item = {"pk": "UPLOAD#u1", "sk": "META", "kind": "upload", "upload_id": "u1", "bytes": 5}
    assert from_stored(_Upload, item) == _Upload("u1", 5)


def test_an_absent_field_takes_its_default_and_a_converted_value_wins() -> None:
    item = {"upload_id": "u1", "bytes": Decimal(7)}
    record = from_stored(_Upload, item, bytes=int(Decimal(7)))
    assert record == _Upload("u1", 7) and type(record.bytes) is int


@dataclass(frozen=True)
class _Entry:
    entry_id: str
    actor: str | None  # no default: may be None, never absent from the record
    at: str


def test_an_absent_field_that_may_be_none_reads_back_none() -> None:
    # a store writes no null (adapters/dynamo/codec.py to_item): absent is None
    assert from_stored(_Entry, {"entry_id": "e1", "at": "now"}) == _Entry("e1", None, "now")
    written = _Entry("e2", "ann", "now")
    assert from_stored(_Entry, asdict(written)) == written


def test_a_missing_required_field_is_refused() -> None:
    with pytest.raises(TypeError):
        from_stored(_Upload, {"bytes": 1})


def test_a_record_written_as_asdict_reads_back_the_same() -> None:
    attempt = WebhookAttempt("d1", 2, at="2026-11-30T00:00:00Z", status_code=500, duration_ms=12)
    item = asdict(attempt)
    assert list(item) == ["delivery_id", "attempt", "at", "status_code", "error", "duration_ms"]
    assert from_stored(WebhookAttempt, {**item, "pk": "BATCH#b", "batch_id": "b"}) == attempt


@pytest.mark.parametrize("kind", [Tallies, UsageFigures, LaneTally])
def test_every_whole_number_field_reads_back_from_decimal_and_absent_is_zero(kind: type) -> None:
    counters = [f.name for f in fields(kind) if f.name not in {"cache", "tool_uses", "savings", "usage"}]
    item = {name: Decimal(i + 1) for i, name in enumerate(counters)}
    read = from_counters(kind, {**item, "pk": "ORG#o", counters[0]: None})
    assert getattr(read, counters[0]) == 0
    assert [getattr(read, name) for name in counters[1:]] == list(range(2, len(counters) + 1))
    assert all(type(getattr(read, name)) is int for name in counters)
    assert from_counters(kind, {}) == kind()


def test_a_counter_record_takes_its_other_fields_as_given() -> None:
    item = {"model": "m", "count": Decimal(3), "stars_sum": Decimal(9)}
    read = from_counters(FeedbackCounter, item, model="m", provider="p", labels={"slow": 1})
    assert read == FeedbackCounter(model="m", provider="p", count=3, stars_sum=9, labels={"slow": 1})


def test_a_member_marker_from_before_chat_jobs_joined_is_a_batch() -> None:
    marker = {"pk": "ORG#o", "sk": "WOMEMBER#wo#b", "kind": "work_order_member", "batch_id": "b"}
    member = from_stored(
        WorkOrderMember, {**marker, "joined_at": "t", "items_total": 2, "reserved_micros": 5}
    )
    assert member == WorkOrderMember(batch_id="b", joined_at="t", items_total=2, reserved_micros=5)
    assert member.member_kind == "batch" and member.to_api()["kind"] == "batch"


def test_sparse_leaves_out_the_fields_that_hold_their_default() -> None:
    fresh = BatchIntake("file_1", "d", 2, {"routing_mode": "cheapest"})
    assert sparse(fresh) == {
        "file_id": "file_1",
        "digest": "d",
        "item_count": 2,
        "options": {"routing_mode": "cheapest"},
    }
    failed = replace(fresh, done=True, error=IntakeError("quote_mismatch", "differ", {"item_count": 3}))
    assert sparse(failed)["error"] == {
        "code": "quote_mismatch",
        "message": "differ",
        "details": {"item_count": 3},
    }
    assert sparse(failed)["done"] is True


def test_a_stored_intake_reads_back_with_its_error() -> None:
    failed = BatchIntake("file_1", "d", 2, {}, done=True, error=IntakeError("quote_mismatch", "differ"))
    base = {"batch_id": "b", "org_id": "o", "state": "failed", "created_at": "t"}
    record = BatchRecord.from_mapping({**base, "intake": {**sparse(failed), "item_count": Decimal(2)}})
    assert record.intake == failed and type(record.intake.item_count) is int


def test_a_batch_keeps_its_routing_fields_and_intake_options_on_its_plan_item() -> None:
    # written once at create beside the plan, never with META (rewritten by every progress update)
    routing: RoutingFields = {
        "routing_mode": "cheapest",
        "regions": ["us"],
        "max_price": {"per_item_usd": "0.01"},
        "required_tools": ["web_search"],
        "preset": "nightly@2",
    }
    intake = BatchIntake("file_1", "d", 2, {"regions": ["us"], "preset": "nightly@2"})
    record = BatchRecord(
        batch_id="b", org_id="o", state="priced", created_at="t", routing_fields=routing, intake=intake
    )
    meta, plan = batch_values(record)
    assert plan["routing_fields"] == routing and "routing_fields" not in meta
    back = batch_from_items(meta, plan)
    assert back.routing_fields == routing and back.intake == intake
    assert batch_from_items(meta).routing_fields is None  # a record read without its PLAN item
    assert (
        BatchRecord.from_mapping(
            {"batch_id": "b", "org_id": "o", "state": "priced", "created_at": "t"}
        ).routing_fields
        is None
    )
