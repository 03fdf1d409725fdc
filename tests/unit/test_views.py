"""A public view read off a record (domain/views.py): one key list, the view's TypedDict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypedDict, TypeVar

import pytest

from batchroute.domain.delivery.webhooks import WebhookAttempt, WebhookDeliveryRecord, WebhookDeliveryView
from batchroute.domain.views import view_of

Changes = TypeVar("Changes")


class _BaseView(TypedDict):
    id: str
    status: str


class _FullView(_BaseView, total=False):
    size: int
    note: str | None


class _HistoryView(TypedDict, Generic[Changes]):
    id: str
    before: Changes


@dataclass(frozen=True, slots=True)
class _Record:
    record_id: str
    status: str
    size: int
    note: str | None = None
    secret: str = "s3cr3t"


def test_each_declared_key_comes_from_the_same_named_attribute_in_declared_order() -> None:
    record = _Record("r1", "ready", 7)
    shown = view_of(record, _FullView, id=record.record_id)
    assert shown == {"id": "r1", "status": "ready", "size": 7, "note": None}
    assert list(shown) == ["id", "status", "size", "note"]  # a base view's keys first


def test_a_given_value_wins_and_an_undeclared_attribute_is_never_shown() -> None:
    shown = view_of(_Record("r1", "ready", 7), _BaseView, id="other", status="done")
    assert shown == {"id": "other", "status": "done"}
    assert "secret" not in view_of(_Record("r1", "ready", 7), _FullView, id="r1")


def test_a_key_the_record_lacks_is_an_error_not_a_gap() -> None:
    @dataclass(frozen=True)
    class Bare:
        id: str

    with pytest.raises(AttributeError, match="status"):
        view_of(Bare("x"), _BaseView)


def test_a_given_key_the_view_does_not_declare_is_refused() -> None:
    with pytest.raises(TypeError, match="_BaseView declares no colour"):
        view_of(_Record("r1", "ready", 7), _BaseView, id="r1", colour="red")


def test_a_generic_view_reads_its_keys_from_its_declaration() -> None:
    @dataclass(frozen=True)
    class Entry:
        id: str
        before: int

    assert view_of(Entry("e1", 3), _HistoryView[int]) == {"id": "e1", "before": 3}


def test_a_webhook_delivery_shows_its_public_fields_and_never_its_payload_or_secret() -> None:
    record = WebhookDeliveryRecord(
        delivery_id="wd_1",
        org_id="org_1",
        event_id="evt_1",
        event_type="batch.completed",
        url="https://hooks.example.com/in",
        status="delivered",
        attempt_count=1,
        created_at="2026-12-04T10:00:00Z",
        updated_at="2026-12-04T10:00:01Z",
        payload='{"secret":"payload"}',
        secret_source="batch",
        secret_sealed="ciphertext",
        last_response_status=200,
    )
    shown = record.to_api()
    assert set(shown) == set(WebhookDeliveryView.__annotations__)
    assert shown["id"] == "wd_1" and shown["last_response_status"] == 200
    assert "payload" not in shown and "secret_sealed" not in shown and "org_id" not in shown
    attempt = WebhookAttempt("wd_1", 2, at="2026-12-04T10:00:01Z", status_code=500, error="HTTP 500")
    assert attempt.to_api() == {
        "delivery_id": "wd_1",
        "attempt": 2,
        "at": "2026-12-04T10:00:01Z",
        "status_code": 500,
        "error": "HTTP 500",
        "duration_ms": 0,
    }
