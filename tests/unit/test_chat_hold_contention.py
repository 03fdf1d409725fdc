"""A chat hold whose transaction keeps colliding with other writes (services/chat/state.py) is
answered as batch create answers it, 503 `funding_contended` (retryable), never a 500."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from batchroute.clock import FixedClock
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.billing.spending_limit import LimitGuard
from batchroute.domain.chat.holds import HoldRefused, HoldTerms
from batchroute.errors import Unavailable
from batchroute.money import Money
from batchroute.services.chat.state import HoldKeeper


class CollidingStore:
    """Every open is refused as a transaction conflict (another write to the wallet won)."""

    def __init__(self) -> None:
        self.opened = 0

    def open(self, terms: HoldTerms, *, at: str, guard: LimitGuard) -> None:
        self.opened += 1
        raise HoldRefused("conflict")

    def __getattr__(self, name: str) -> Any:  # nothing else is asked of it here
        raise AssertionError(f"unexpected call: {name}")


def test_a_hold_that_keeps_colliding_is_a_retryable_503() -> None:
    store = CollidingStore()
    keeper = HoldKeeper(store, FixedClock(datetime(2026, 12, 2, 10, 0, tzinfo=UTC)))  # type: ignore[arg-type]
    record = BatchRecord(
        batch_id="batch_x",
        org_id="org_x",
        state="running",
        created_at="2026-12-02T10:00:00Z",
        reservation_id="hold_x",
    )
    with pytest.raises(Unavailable) as refused:
        keeper.open(HoldTerms(record=record, amount=Money.usd("0.01")))
    assert refused.value.code == "funding_contended"
    assert refused.value.retry_after_seconds == 1  # Unavailable: a 503 with Retry-After
    assert store.opened > 1  # it was tried again before giving up
