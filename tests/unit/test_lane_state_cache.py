"""The direct chat path's lane view (services/chat/state.LaneStateCache): read once, served
past its TTL, re-read after an answer (`refresh_if_due`) and never before one unless there
is no view or it is older than `max_age_seconds`."""

from __future__ import annotations

from batchroute.domain.catalog.catalog import LaneLive
from batchroute.services.chat.state import LaneStateCache


class Source:
    def __init__(self) -> None:
        self.reads = 0
        self.fail = False

    def live_states(self) -> dict[str, LaneLive]:
        if self.fail:
            raise RuntimeError("throttled")
        self.reads += 1
        return {}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_view_is_read_once_then_refreshed_after_answers_only() -> None:
    source, clock = Source(), Clock()
    cache = LaneStateCache(source, 15, max_age_seconds=120, monotonic=clock)
    # The first plan reads (there is no view); an answer within the TTL reads nothing
    cache.live_states()
    cache.refresh_if_due()
    assert source.reads == 1
    # Past the TTL the plan still uses the view; the answer after it re-reads, once
    clock.now += 20
    cache.live_states()
    assert source.reads == 1
    cache.refresh_if_due()
    cache.refresh_if_due()
    assert source.reads == 2
    # A view older than max_age is not planned with: read before
    clock.now += 121
    cache.live_states()
    assert source.reads == 3


def test_a_failed_refresh_keeps_the_view_and_is_tried_again() -> None:
    source, clock = Source(), Clock()
    cache = LaneStateCache(source, 15, max_age_seconds=120, monotonic=clock)
    cache.live_states()
    clock.now += 20
    source.fail = True
    cache.refresh_if_due()  # never raises
    cache.live_states()  # the old view is still served
    source.fail = False
    cache.refresh_if_due()
    assert source.reads == 2
