"""The client's feedback and billing-event calls (docs/client.md, docs/feedback.md,
docs/billing-alerts.md) against `httpx.MockTransport`: the target each rating names, the
filters a listing sends, the typed summary, and that a rating is repeated after a lost answer
(an author's feedback on a target is replaced, never doubled)."""

from __future__ import annotations

from typing import Any

import pytest
from batchroute_client import BillingEvent, Feedback, FeedbackSummary, Stars, Thumbs

from tests.unit.test_client_settings import AT, client_for, ok, sent
from tests.unit.test_client_unsafe_retries import LOST, lost_answer

BATCH = "batch_01j0000000000000000000000a"


def feedback(target: dict[str, Any], rating: int = 1) -> dict[str, Any]:
    return {
        "id": "fb_1",
        "object": "feedback",
        "target": target,
        "rating": rating,
        "rating_scale": "thumbs",
        "comment": None,
        "labels": ["concise"],
        "model": "gpt-4o-mini",
        "provider": "openai",
        "author": "key_1",
        "created_at": AT,
        "updated_at": AT,
    }


ITEM = {"type": "batch_item", "batch_id": BATCH, "customer_item_id": "a"}
CHAT = {"type": "chat_completion", "id": "chatcmpl-1"}


def figures(**extra: Any) -> dict[str, Any]:
    return {
        "count": 2,
        "thumbs": {"up": 1, "down": 1},
        "stars": {"count": 0, "mean": None},
        "top_labels": [{"label": "concise", "count": 2}],
        **extra,
    }


def test_feedback_is_sent_on_an_item_or_a_chat_completion_listed_and_summed() -> None:
    summary = {
        "object": "feedback_summary",
        "period": "daily",
        "start": "2026-04-01",
        "end": "2026-04-01",
        "total": figures(),
        "by_model_provider": [figures(model="gpt-4o-mini", provider="openai")],
    }
    client, recorder = client_for(
        ok(feedback(ITEM), 201),
        ok(feedback(CHAT, -1), 201),
        ok({"object": "list", "data": [feedback(ITEM)], "next_cursor": "fb_1"}),
        ok({"object": "list", "data": [], "next_cursor": None}),
        ok(summary),
    )
    on_item = client.feedback.send(rating=1, batch_id=BATCH, customer_item_id="a", labels=["concise"])
    on_chat = client.feedback.send(rating=-1, chat_completion_id="chatcmpl-1", comment="too long")
    listed = list(client.feedback.list(batch_id=BATCH, rating_scale="thumbs"))
    summed = client.feedback.summary(period="daily")
    assert [sent(r) for r in recorder.requests] == [
        ("POST", "/v1/feedback", {}, {"target": ITEM, "rating": 1, "labels": ["concise"]}),
        ("POST", "/v1/feedback", {}, {"target": CHAT, "rating": -1, "comment": "too long"}),
        ("GET", "/v1/feedback", {"batch_id": BATCH, "rating_scale": "thumbs"}, None),
        ("GET", "/v1/feedback", {"batch_id": BATCH, "rating_scale": "thumbs", "cursor": "fb_1"}, None),
        ("GET", "/v1/feedback/summary", {"period": "daily"}, None),
    ]
    assert isinstance(on_item, Feedback) and on_item.target.customer_item_id == "a"
    assert on_chat.target.id == "chatcmpl-1" and on_chat.rating == -1 and listed == [on_item]
    assert isinstance(summed, FeedbackSummary) and summed.total.thumbs == Thumbs(up=1, down=1)
    assert summed.total.stars == Stars(count=0, mean=None) and summed.total.top_labels[0].count == 2
    (per_lane,) = summed.by_model_provider
    assert (per_lane.model, per_lane.provider, per_lane.count) == ("gpt-4o-mini", "openai", 2)


@pytest.mark.parametrize("how", LOST)
def test_a_rating_whose_answer_was_lost_is_sent_again(how: str) -> None:
    client, recorder = client_for(lost_answer(how), ok(feedback(ITEM), 200))
    assert client.feedback.send(rating=1, batch_id=BATCH, customer_item_id="a").id == "fb_1"
    assert len(recorder.requests) == 2  # the second replaces the first, if it was kept


def test_billing_events_are_read_to_the_last_page_with_their_webhook() -> None:
    delivery = {"id": "whd_1", "status": "delivered", "attempt_count": 1, "event_id": "evt_1"}
    event = {
        "id": "evt_1",
        "object": "billing_event",
        "type": "balance.low",
        "org_id": "org_1",
        "created_at": AT,
        "data": {"balance": {"currency": "usd", "amount": "4.00"}},
        "webhook": delivery,
    }
    client, recorder = client_for(
        ok({"data": [event], "next_cursor": "evt_1"}),
        ok({"data": [{**event, "id": "evt_0", "webhook": None}], "next_cursor": None}),
    )
    events = list(client.billing.events(page_size=1))
    assert [sent(r)[2] for r in recorder.requests] == [{"limit": "1"}, {"limit": "1", "cursor": "evt_1"}]
    assert all(isinstance(e, BillingEvent) for e in events) and [e.id for e in events] == ["evt_1", "evt_0"]
    assert events[0].webhook is not None and events[0].webhook.status == "delivered"
    assert events[1].webhook is None and events[0].data["balance"]["amount"] == "4.00"
