"""A golden-set regression run whose function dies between its hold and its settlement
(docs/schedules.md, "A run that dies"): its hold carries a deadline, the latest the run can
still be running (every provider call given up after the time-out the run gives it, then the
settlement's allowance), and the sweeper releases it once that has passed, not before, and
once. The hold resolves exactly once: a run that settles after the release changes nothing
(409 `regression_abandoned`, no charge, no record, no exclusions); a run that settled first
makes the sweeper's release a no-op. Money adds up throughout: reserved = charged + released,
the balance never below zero, each hold resolved once, the spend counters what was charged.

The run "dies" by a BaseException from its first provider call (as a Lambda time-out stops
the code: no `except Exception` runs); time moves only by the injected clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.clock import FixedClock, isoformat
from batchroute.config import get_settings
from batchroute.domain.accounts.access import Principal
from batchroute.domain.billing.ledger import Reservation, SettlementResult
from batchroute.domain.presets.presets import PresetVersion
from batchroute.errors import Conflict
from batchroute.money import Money
from batchroute.providers.base import ProviderRequest, ProviderResult
from batchroute.services.schedules.regression import RegressionRuns
from batchroute.services.workflow.sweeper import release_abandoned_regression_holds
from batchroute.wiring import Wiring, wiring_for
from tests.integration.batch_pipeline_support import LLAMA
from tests.integration.principals import START, TestOrg
from tests.integration.principals import clocked_client as clocked_client  # the fixtures
from tests.integration.principals import fixed_clock as fixed_clock
from tests.integration.principals import org as org
from tests.integration.test_preset_golden_sets import _golden as _preset_golden
from tests.integration.test_preset_golden_sets import _preset
from tests.integration.test_schedules_api import _golden as _schedule_golden
from tests.integration.test_schedules_api import _schedule

CREDIT = Money.usd("10")  # the `org` fixture's
ITEMS = 3  # in either golden set


class FunctionDied(BaseException):
    """The Lambda's end (time-out, crash): not an Exception, so nothing the run catches."""


@dataclass
class FirstCallHook:
    """The wiring's providers, with `hook` run at the start of the run's first call."""

    providers: Any
    hook: Callable[[], None]
    calls: int = 0

    def sync(self, slug: str) -> Any:
        return _HookedProvider(self, self.providers.sync(slug))


@dataclass
class _HookedProvider:
    outer: FirstCallHook
    inner: Any

    def complete(self, request: ProviderRequest) -> ProviderResult:
        self.outer.calls += 1
        if self.outer.calls == 1:
            self.outer.hook()
        return self.inner.complete(request)  # type: ignore[no-any-return]


@dataclass
class ReadBefore:
    """The sweeper's view of the holds as read before the run settled, its releases real."""

    ledger: LedgerStore
    due: list[Reservation]

    def due_holds(self, now_iso: str, *, purpose: Any = None, limit: int = 100) -> list[Reservation]:
        return self.due

    def release(self, org_id: str, reservation_id: str, **kwargs: Any) -> SettlementResult:
        return self.ledger.release(org_id, reservation_id, **kwargs)


def _wiring(clock: FixedClock) -> Wiring:
    return wiring_for(get_settings(), clock)


def _runs(wiring: Wiring, hook: Callable[[], None]) -> RegressionRuns:
    return replace(wiring.regression_runs, providers=FirstCallHook(wiring.providers, hook))


def _preset_version(client: TestClient, org: TestOrg, wiring: Wiring) -> PresetVersion:
    assert _preset(client, org, golden_set=_preset_golden()).status_code == 201
    assert wiring.regression_runs.presets is not None
    return wiring.regression_runs.presets.resolve(org.org_id, "triage")


def _only_hold(wiring: Wiring, org: TestOrg) -> Reservation:
    [hold] = wiring.ledger.reservations(org.org_id)
    return hold


def _deadline(hold: Reservation) -> datetime:
    assert hold.expires_at is not None
    return datetime.fromisoformat(hold.expires_at)


def _pass_deadline(clock: FixedClock, hold: Reservation) -> None:
    clock.advance(seconds=(_deadline(hold) - clock.now()).total_seconds(), milliseconds=1)


def _released_by_sweep(wiring: Wiring) -> list[str]:
    return wiring.sweeper.sweep()["regression_holds_released"]


def _assert_released_in_full(wiring: Wiring, org: TestOrg, hold_id: str) -> None:
    """Nothing charged, all of it released, once; the wallet and spend as before the run."""
    ledger = wiring.ledger
    hold = ledger.reservation(org.org_id, hold_id)
    assert hold is not None and hold.status == "released"
    assert (hold.charged, hold.released) == (Money.zero(), hold.amount)
    state = ledger.state(org.org_id)
    assert (state.balance, state.reserved) == (CREDIT, Money.zero())
    assert ledger.spend_counters(org.org_id) == {}
    assert ledger.violations(org.org_id) == []


def test_a_run_that_dies_after_its_hold_is_released_by_the_sweeper_after_its_deadline_not_before(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    # Given a preset with a golden set, and a run whose function dies on its first call
    wiring = _wiring(clock)
    preset = _preset_version(client, org, wiring)

    def die() -> None:
        raise FunctionDied

    runs = _runs(wiring, die)
    with pytest.raises(FunctionDied):
        runs.for_preset(preset, trigger="on_demand")
    # Then its hold is pending, in flight, with the deadline its calls' time-outs make
    hold = _only_hold(wiring, org)
    assert (hold.status, hold.purpose) == ("pending", "regression")
    assert wiring.ledger.state(org.org_id).reserved == hold.amount
    calls = len(runs.candidate_lanes(LLAMA, None).lanes) * ITEMS
    assert calls > ITEMS  # more than one lane
    assert _deadline(hold) == START + timedelta(seconds=min(calls * (5 + 120), 900) + 60)
    # And the chat holds' sweep never sees it (it is indexed by its deadline)
    assert wiring.ledger.open_holds("2999-01-01T00:00:00.000Z") == []
    # When the sweeper runs at the deadline: nothing is released yet
    clock.advance(seconds=(_deadline(hold) - clock.now()).total_seconds())
    assert _released_by_sweep(wiring) == []
    assert wiring.ledger.reservation(org.org_id, hold.reservation_id) == hold
    # When it runs once the deadline has passed: the hold is released in full, once
    clock.advance(milliseconds=1)
    assert _released_by_sweep(wiring) == [hold.reservation_id]
    _assert_released_in_full(wiring, org, hold.reservation_id)
    item = wiring.ledger.item_at(
        {"pk": {"S": f"WALLET#{org.org_id}"}, "sk": {"S": f"RES#{hold.reservation_id}"}}
    )
    assert item is not None and item["settle_memo"] == (
        f"golden-set regression {hold.ref} abandoned: not settled by its deadline {hold.expires_at}"
    )
    assert "gsi1pk" not in item  # off the index once resolved
    assert _released_by_sweep(wiring) == []
    # And the run left no record
    listed = client.get("/v1/presets/triage/versions/1/benchmarks", headers=org.key_headers())
    assert listed.json()["data"] == []


def test_a_run_that_settles_after_the_sweeper_released_its_hold_changes_nothing(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    # Given a run that is still going when its deadline passes and the sweeper releases it
    wiring = _wiring(clock)
    preset = _preset_version(client, org, wiring)
    swept: list[str] = []

    def late() -> None:
        _pass_deadline(clock, _only_hold(wiring, org))
        swept.extend(_released_by_sweep(wiring))

    # When the run ends and settles
    with pytest.raises(Conflict) as refused:
        _runs(wiring, late).for_preset(preset, trigger="on_demand")
    # Then the sweeper's release stands: the late settlement charged and recorded nothing
    assert refused.value.code == "regression_abandoned"
    hold = _only_hold(wiring, org)
    assert swept == [hold.reservation_id]
    assert refused.value.details == {"regression_id": hold.ref, "deadline": hold.expires_at}
    _assert_released_in_full(wiring, org, hold.reservation_id)
    day = isoformat(clock.now())[:10]
    assert wiring.ledger.usage_between(org.org_id, day, day) == []
    listed = client.get("/v1/presets/triage/versions/1/benchmarks", headers=org.key_headers())
    assert listed.json()["data"] == []


def test_a_run_that_settles_first_makes_the_sweepers_release_a_no_op(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    # Given a sweeper that read the run's hold as overdue before the run settled
    wiring = _wiring(clock)
    preset = _preset_version(client, org, wiring)
    read: list[Reservation] = []

    def overdue() -> None:
        _pass_deadline(clock, _only_hold(wiring, org))
        read.extend(wiring.ledger.due_holds(isoformat(clock.now()), purpose="regression"))

    # When the run settles first, then the sweeper releases what it read
    run = _runs(wiring, overdue).for_preset(preset, trigger="on_demand")
    report = release_abandoned_regression_holds(ReadBefore(wiring.ledger, read), clock)
    # Then the settlement stands and the release changed nothing
    hold = _only_hold(wiring, org)
    assert [h.reservation_id for h in read] == [hold.reservation_id]
    assert report.settled == []
    charged = Money.usd(run["charged"]["amount"])
    assert charged.micros > 0
    assert (hold.status, hold.charged) == ("settled", charged)
    assert hold.amount == hold.charged + hold.released + hold.absorbed
    state = wiring.ledger.state(org.org_id)
    assert (state.balance, state.reserved) == (CREDIT - charged, Money.zero())
    assert wiring.ledger.spend_counters(org.org_id)[f"M#{isoformat(clock.now())[:7]}"] == charged
    assert wiring.ledger.violations(org.org_id) == []
    # And the run is recorded, with its charge, and no longer on the due index
    listed = client.get("/v1/presets/triage/versions/1/benchmarks", headers=org.key_headers())
    assert [r["regression_id"] for r in listed.json()["data"]] == [run["regression_id"]]
    assert listed.json()["data"][0]["charged"] == run["charged"]
    assert _released_by_sweep(wiring) == []


def test_a_schedules_late_run_moves_neither_its_benchmarks_nor_its_exclusions(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    # Given a schedule whose version change ran its golden set (edge-eu excluded)
    created = _schedule(client, org, expression="rate(1 hour)", golden_set=_schedule_golden())
    assert created.status_code == 201, created.text
    schedule_id = created.json()["id"]
    wiring = _wiring(clock)
    schedule = wiring.schedule_store.get(org.org_id, schedule_id)
    assert schedule is not None and schedule.exclusions
    benchmarks = f"/v1/schedules/{schedule_id}/versions/1/benchmarks"
    before = client.get(benchmarks, headers=org.key_headers()).json()["data"]
    balance = wiring.ledger.state(org.org_id).balance
    # When a run on demand outlasts its deadline, is released by the sweeper, then settles
    clock.advance(minutes=1)
    swept: list[str] = []

    def late() -> None:
        [pending] = [h for h in wiring.ledger.reservations(org.org_id) if h.pending]
        _pass_deadline(clock, pending)
        swept.extend(_released_by_sweep(wiring))

    principal = Principal(org_id=org.org_id, role="owner", via="api_key")
    with pytest.raises(Conflict, match="outlasted its deadline"):
        _runs(wiring, late)(principal, schedule, trigger="on_demand")
    # Then the schedule is as the first run left it, and only that run was charged
    assert len(swept) == 1
    assert client.get(benchmarks, headers=org.key_headers()).json()["data"] == before
    after = wiring.schedule_store.get(org.org_id, schedule_id)
    assert after is not None and after.exclusions == schedule.exclusions
    state = wiring.ledger.state(org.org_id)
    assert (state.balance, state.reserved) == (balance, Money.zero())
    assert wiring.ledger.violations(org.org_id) == []
