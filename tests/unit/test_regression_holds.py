"""A golden-set regression run's deadline (`run_deadline`, domain/presets/golden_sets.py) and
the sweeper's release of the holds past it (`release_abandoned_regression_holds`), over the
ledger's in-memory model: released after the deadline and not before, in full, once; a hold
the run settled first is left as it settled (docs/schedules.md, "A run that dies")."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from batchroute.clock import FixedClock, isoformat
from batchroute.domain.billing.ledger import Purpose, Reservation, SettlementResult, Wallet
from batchroute.domain.presets.golden_sets import MAX_RUN_SECONDS, SETTLE_ALLOWANCE_SECONDS, run_deadline
from batchroute.services.workflow.sweeper import release_abandoned_regression_holds

START = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)


# -- the deadline ----------------------------------------------------------------------------------
def test_the_deadline_is_every_call_timed_out_one_after_another_then_the_settlement() -> None:
    assert run_deadline(START, calls=6, call_seconds=125) == START + timedelta(seconds=6 * 125 + 60)
    assert SETTLE_ALLOWANCE_SECONDS == 60
    assert run_deadline(START, calls=0, call_seconds=125) == START + timedelta(seconds=60)


def test_no_deadline_is_later_than_a_lambda_invocation_lives_then_the_settlement() -> None:
    # 50 items on 7 lanes at 125 s a call would be 12 hours; the function is stopped at 15 min
    assert MAX_RUN_SECONDS == 900
    assert run_deadline(START, calls=350, call_seconds=125) == START + timedelta(seconds=900 + 60)
    assert run_deadline(START, calls=7, call_seconds=125) == START + timedelta(seconds=875 + 60)


def test_more_calls_or_a_longer_time_out_never_make_the_deadline_earlier() -> None:
    deadlines = [run_deadline(START, calls=n, call_seconds=s) for n in range(4) for s in (1.0, 2.5)]
    assert all(d >= START + timedelta(seconds=SETTLE_ALLOWANCE_SECONDS) for d in deadlines)
    for calls in range(4):
        assert run_deadline(START, calls=calls + 1, call_seconds=2) > run_deadline(
            START, calls=calls, call_seconds=2
        )
        assert run_deadline(START, calls=calls + 1, call_seconds=3) > run_deadline(
            START, calls=calls + 1, call_seconds=2
        )


@pytest.mark.parametrize(("calls", "seconds"), [(-1, 5.0), (3, 0.0), (3, -1.0)])
def test_a_deadline_needs_a_count_of_calls_and_a_positive_time_out(calls: int, seconds: float) -> None:
    with pytest.raises(ValueError, match="deadline needs"):
        run_deadline(START, calls=calls, call_seconds=seconds)


# -- the sweeper's release ---------------------------------------------------------------------------
@dataclass
class ModelLedger:
    """`DueHolds` over the ledger's in-memory model; `stale` answers a read made earlier."""

    wallet: Wallet
    stale: list[Reservation] | None = None

    def due_holds(
        self, now_iso: str, *, purpose: Purpose | None = None, limit: int = 100
    ) -> list[Reservation]:
        if self.stale is not None:
            return self.stale
        return [
            r
            for r in self.wallet.reservations.values()
            if r.pending and r.expires_at is not None and r.expires_at < now_iso and r.purpose == purpose
        ][:limit]

    def release(
        self,
        org_id: str,
        reservation_id: str,
        *,
        at: str,
        memo: str = "",
        extra_items: Iterable[Any] = (),
    ) -> SettlementResult:
        return self.wallet.release(reservation_id, at=at)


def _wallet_with_hold(deadline: datetime) -> Wallet:
    wallet = Wallet(org_id="org_1")
    wallet.grant(10_000_000)
    held = wallet.reserve("res_regr_1", 400_000, purpose="regression", ref="regr_1")
    wallet.reservations[held.reservation_id] = replace(held, expires_at=isoformat(deadline))
    wallet.reserve("res_batch_1", 1_000_000, purpose="batch", ref="batch_1")  # never swept here
    return wallet


def test_a_hold_past_its_deadline_is_released_in_full_once_and_not_before() -> None:
    deadline = START + timedelta(minutes=30)
    wallet = _wallet_with_hold(deadline)
    ledger, clock = ModelLedger(wallet), FixedClock(START)
    # At the deadline itself: nothing released
    clock.advance(minutes=30)
    assert release_abandoned_regression_holds(ledger, clock).settled == []
    assert wallet.reservations["res_regr_1"].pending
    # Past it: released in full, once
    clock.advance(milliseconds=1)
    assert release_abandoned_regression_holds(ledger, clock).settled == ["res_regr_1"]
    released = wallet.reservations["res_regr_1"]
    assert (released.status, released.charged.micros, released.released.micros) == ("released", 0, 400_000)
    assert release_abandoned_regression_holds(ledger, clock).settled == []
    assert (wallet.balance, wallet.reserved) == (10_000_000, 1_000_000)  # the batch's still held
    assert wallet.reservations["res_batch_1"].pending
    assert wallet.violations() == []


def test_a_hold_the_run_settled_first_is_left_as_it_settled() -> None:
    deadline = START + timedelta(minutes=30)
    wallet = _wallet_with_hold(deadline)
    clock = FixedClock(deadline + timedelta(seconds=1))
    # The sweeper read the hold as overdue; the run settles before the sweeper releases it
    read = ModelLedger(wallet).due_holds(isoformat(clock.now()), purpose="regression")
    assert [r.reservation_id for r in read] == ["res_regr_1"]
    wallet.settle("res_regr_1", 150_000, period_keys=("D#2026-03-07", "M#2026-03"))
    # Then the release is a no-op: the charge stands, reserved = charged + released
    assert release_abandoned_regression_holds(ModelLedger(wallet, stale=read), clock).settled == []
    settled = wallet.reservations["res_regr_1"]
    assert (settled.status, settled.charged.micros, settled.released.micros) == ("settled", 150_000, 250_000)
    assert wallet.balance == 10_000_000 - 150_000
    assert wallet.violations() == []
