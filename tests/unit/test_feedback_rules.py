"""The pure rules of feedback (domain/feedback/feedback.py): counter moves of a new or changed feedback,
the summary of counters, and the body."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from batchroute.domain.feedback.feedback import (
    TOP_LABELS,
    CreateFeedback,
    Feedback,
    FeedbackCounter,
    FeedbackFilters,
    Target,
    counter_moves,
    summarize,
)
from batchroute.errors import InvalidRequest
from functions.api.schemas.feedback.feedback import FeedbackCreate

BASE = Feedback(
    feedback_id="fb_1",
    org_id="org_1",
    target=Target("chat_completion", completion_id="chatcmpl-1"),
    author="user_1",
    rating=-1,
    rating_scale="thumbs",
    comment=None,
    labels=("slow",),
    model="m",
    provider="p",
    day="2026-11-25",
    created_at="t",
    updated_at="t",
)


def test_a_new_feedback_adds_its_contribution() -> None:
    assert counter_moves(None, BASE) == {
        ("2026-11-25", "m", "p"): {"count": 1, "thumbs_down": 1, "label:slow": 1}
    }


def test_a_change_moves_only_the_difference_on_one_counter() -> None:
    changed = replace(BASE, rating=1, labels=("slow", "good"))
    assert counter_moves(BASE, changed) == {
        ("2026-11-25", "m", "p"): {"thumbs_down": -1, "thumbs_up": 1, "label:good": 1}
    }
    assert counter_moves(BASE, BASE) == {}  # the same again moves nothing


def test_a_scale_change_and_another_counter() -> None:
    stars = replace(BASE, rating=4, rating_scale="stars", labels=(), provider="q")
    assert counter_moves(BASE, stars) == {
        ("2026-11-25", "m", "p"): {"count": -1, "thumbs_down": -1, "label:slow": -1},
        ("2026-11-25", "m", "q"): {"count": 1, "stars_count": 1, "stars_sum": 4},
    }


def test_the_summary_adds_counters_per_model_and_provider() -> None:
    counters = [
        FeedbackCounter(model="m", provider="p", count=2, thumbs_up=1, thumbs_down=1, labels={"slow": 2}),
        FeedbackCounter(model="m", provider="p", count=2, stars_count=2, stars_sum=7, labels={"good": 1}),
        FeedbackCounter(model="n", provider="p", count=1, thumbs_up=1),
        FeedbackCounter(model="z", provider="p", count=0, labels={"gone": 0}),  # emptied by changes
    ]
    total, per = summarize(counters)
    assert [(m, p, f.count) for m, p, f in per] == [("m", "p", 4), ("n", "p", 1)]
    assert per[0][2].to_api() == {
        "count": 4,
        "thumbs": {"up": 1, "down": 1},
        "stars": {"count": 2, "mean": "3.50"},
        "top_labels": [{"label": "slow", "count": 2}, {"label": "good", "count": 1}],
    }
    assert total.count == 5 and total.to_api()["stars"]["mean"] == "3.50"
    many = {f"l{n}": n + 1 for n in range(8)}
    top = summarize([FeedbackCounter(model="m", provider="p", count=1, labels=many)])[0].to_api()[
        "top_labels"
    ]
    assert len(top) == TOP_LABELS and top[0] == {"label": "l7", "count": 8}


def parse_feedback(body: dict[str, Any]) -> CreateFeedback:
    """What the request model hands the service."""
    return FeedbackCreate.model_validate(body).command()


def test_the_body() -> None:
    given = parse_feedback(
        {
            "target": {"type": "batch_item", "batch_id": "batch_1", "customer_item_id": "a#b"},
            "rating": 5,
            "rating_scale": "stars",
            "labels": ["ok", "ok"],
        }
    )
    assert given.target.key == "bi#batch_1#a#b" and given.labels == ("ok",) and given.comment is None
    with pytest.raises(InvalidRequest) as refused:
        parse_feedback(
            {"target": {"type": "chat_completion", "id": "chatcmpl-1"}, "rating": -1, "rating_scale": "stars"}
        )
    assert refused.value.details == {"field": "rating"}


def test_the_listing_filters_given_are_equalities_on_stored_fields() -> None:
    assert FeedbackFilters().equalities() == {}
    given = FeedbackFilters(target_type="chat_completion", provider="p", rating_scale="stars")
    assert given.equalities() == {
        "target_type": "chat_completion",
        "provider": "p",
        "rating_scale": "stars",
    }
