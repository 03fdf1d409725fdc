"""A vendor account that cannot serve (OpenAI's `insufficient_quota`): every lane of the
provider is marked unavailable for a while, routing says why it leaves them, and the
operator is told (an error log and the LanesMarkedUnavailable metric)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from batchroute.catalog import builtin_catalog
from batchroute.domain.catalog.catalog import LaneLive
from batchroute.observability import metrics
from batchroute.providers.base import ItemError
from batchroute.services.catalog.lane_health import ACCOUNT_DOWN_CODES, mark_account_down
from tests.unit.catalog_fixtures import NOW, lane, provider
from tests.unit.test_routing import only_group, plan_for, rejected

QUOTA = ItemError("insufficient_quota", "openai answered 429: You exceeded your current quota", True)
T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


class Marks:
    def __init__(self, failing: str = "") -> None:
        self.calls: list[dict[str, Any]] = []
        self.failing = failing

    def mark_unavailable(self, lane_id: str, *, code: str, reason: str, until: str, at: str) -> None:
        if lane_id == self.failing:
            raise RuntimeError("throttled")
        self.calls.append({"lane_id": lane_id, "code": code, "reason": reason, "until": until, "at": at})


@pytest.fixture(autouse=True)
def _no_metrics_left() -> Any:
    metrics.clear_metrics()
    yield
    metrics.clear_metrics()


def test_only_an_account_that_cannot_serve_marks_lanes() -> None:
    assert "insufficient_quota" in ACCOUNT_DOWN_CODES
    assert not {"provider_unreachable", "rate_limited", "batch_job_failed"} & ACCOUNT_DOWN_CODES


def test_every_lane_of_the_provider_is_marked_until_the_pause_ends_and_the_operator_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given the OpenAI account out of credit
    catalog = builtin_catalog()
    marks = Marks()
    # When the lane runner fails over for that reason
    lane_ids = mark_account_down(catalog, marks, "openai", QUOTA, now=T0, seconds=3600)
    # Then every OpenAI lane (and no other) is marked for an hour, with the vendor's words
    openai_lanes = {lane.lane_id for lane in catalog.lanes if lane.provider == "openai"}
    assert openai_lanes and set(lane_ids) == openai_lanes
    assert {call["lane_id"] for call in marks.calls} == openai_lanes
    assert {call["until"] for call in marks.calls} == {"2026-11-28T13:00:00.000Z"}
    assert all(call["code"] == "insufficient_quota" for call in marks.calls)
    assert all("exceeded your current quota" in call["reason"] for call in marks.calls)
    # And the operator is told: the metric the alarm watches, and an error log
    counted = metrics.metric_set["LanesMarkedUnavailable"]
    assert counted["Value"] == [len(openai_lanes)]
    errors = [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]
    assert any("operator action needed" in message for message in errors)


def test_a_lane_that_cannot_be_marked_does_not_stop_the_others_or_the_alert() -> None:
    catalog = builtin_catalog()
    first = next(lane.lane_id for lane in catalog.lanes if lane.provider == "openai")
    marks = Marks(failing=first)
    lane_ids = mark_account_down(catalog, marks, "openai", QUOTA, now=T0, seconds=60)
    assert len(marks.calls) == len(lane_ids) - 1
    assert metrics.metric_set["LanesMarkedUnavailable"]["Value"] == [len(lane_ids)]


def test_routing_says_why_it_leaves_a_lane_marked_unavailable() -> None:
    # Given lane a marked unavailable (no heartbeat, a reason) and lane b healthy
    a, b = lane("a", batch_in="0.10", batch_out="0.40"), lane("b", batch_in="0.20", batch_out="0.80")
    states = {
        "a/m-chat": LaneLive("a/m-chat", 1_000, "", unavailable_reason=QUOTA.describe()),
        "b/m-chat": LaneLive("b/m-chat", 1_000, NOW.isoformat()),
    }
    group = only_group(plan_for([provider("a"), provider("b")], [a, b], states=states))
    # Then a is rejected as stale, saying it was marked and why; b serves
    refusal = rejected(group, "a/m-chat")
    assert refusal.code == "stale_heartbeat"
    assert "marked unavailable" in refusal.message and "insufficient_quota" in refusal.message
    assert refusal.details["unavailable_reason"] == QUOTA.describe()
    assert [lane.lane_id for lane in group.selected] == ["b/m-chat"]
