"""Golden-set regression runs under the org's spending limit (docs/schedules.md, Golden sets;
docs/presets.md): a run is charged like direct chat, so its hold is taken as every hold is,
checked against the hard limit and bounded by its room in the hold's own transaction.

Over a hard limit a run asked for now answers 403 `spending_limit_reached` (direct chat's
answer) and a schedule version's run is skipped (the version saved, the reason logged);
either way nothing is held, charged or counted. Under the limit, or with a soft one, it runs
and is charged as before. A hold that another one overtook between the check and the write
is decided again, and refused."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.clock import FixedClock, isoformat
from batchroute.config import get_settings
from batchroute.domain.billing.ledger import ReservationTerms
from batchroute.money import Money
from batchroute.services.billing.funding import Funds
from tests.integration.principals import TestOrg
from tests.integration.principals import clocked_client as clocked_client  # the fixtures
from tests.integration.principals import fixed_clock as fixed_clock
from tests.integration.principals import org as org
from tests.integration.test_preset_golden_sets import _golden as _preset_golden
from tests.integration.test_preset_golden_sets import _preset
from tests.integration.test_schedules_api import _golden as _schedule_golden
from tests.integration.test_schedules_api import _schedule

CREDIT = Money.usd("10")  # the `org` fixture's


def _ledger() -> LedgerStore:
    return LedgerStore(get_settings().table_name("ledger"))


def _limit(client: TestClient, org: TestOrg, amount: str, mode: str = "hard") -> None:
    body = {"limit_enabled": True, "limit_period": "monthly", "limit_amount": amount, "limit_mode": mode}
    saved = client.put("/v1/billing/controls", json=body, headers=org.session_headers())
    assert saved.status_code == 200, saved.text


def _assert_untouched(org: TestOrg) -> None:
    """Nothing held, charged or counted: the wallet as opened, no reservation, no spend."""
    ledger = _ledger()
    state = ledger.state(org.org_id)
    assert (state.balance, state.reserved) == (CREDIT, Money.zero())
    assert ledger.reservations(org.org_id) == []
    assert ledger.spend_counters(org.org_id) == {}
    assert ledger.violations(org.org_id) == []


def _assert_refused_by_the_limit(response: Any) -> None:
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "spending_limit_reached"
    assert error["details"]["limit"] == "0.000001" and error["details"]["period"] == "monthly"
    assert Decimal(error["details"]["spent"]) == 0
    assert Decimal(error["details"]["projected"]) > Decimal("0.000001")


def test_a_preset_run_over_a_hard_limit_is_refused_as_direct_chat_and_charges_nothing(
    client: TestClient, org: TestOrg
) -> None:
    # Given a hard limit the run's estimate does not fit, and a preset with a golden set
    _limit(client, org, "0.000001")
    assert _preset(client, org, golden_set=_preset_golden()).status_code == 201
    # When its golden set is run now
    run = client.post("/v1/presets/triage/regression-runs", headers=org.key_headers())
    # Then it is refused as direct chat is over the limit, and nothing is held or charged
    _assert_refused_by_the_limit(run)
    _assert_untouched(org)
    listed = client.get("/v1/presets/triage/versions/1/benchmarks", headers=org.key_headers())
    assert listed.json()["data"] == []


def test_a_schedule_version_over_a_hard_limit_is_saved_and_its_run_skipped(
    client: TestClient, org: TestOrg, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a hard limit the run's estimate does not fit
    _limit(client, org, "0.000001")
    # When a schedule with a golden set is created (a version change runs it)
    with caplog.at_level("INFO", logger="batchroute"):
        created = _schedule(client, org, golden_set=_schedule_golden())
    # Then the version is saved, its run skipped with the reason logged, nothing charged
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert schedule["excluded_lanes"] == []
    skipped = [r for r in caplog.records if r.getMessage() == "regression run not made"]
    assert [(r.__dict__["code"], r.__dict__["trigger"]) for r in skipped] == [
        ("spending_limit_reached", "version_change")
    ]
    benchmarks = f"/v1/schedules/{schedule['id']}/versions/1/benchmarks"
    assert client.get(benchmarks, headers=org.key_headers()).json()["data"] == []
    _assert_untouched(org)
    # And a run asked for now is refused as direct chat is
    run = client.post(f"/v1/schedules/{schedule['id']}/regression-runs", headers=org.key_headers())
    _assert_refused_by_the_limit(run)
    _assert_untouched(org)


@pytest.mark.parametrize(("amount", "mode"), [("5", "hard"), ("0.000001", "soft")])
def test_under_a_hard_limit_or_a_soft_one_the_run_is_held_and_charged_as_before(
    client: TestClient, org: TestOrg, clock: FixedClock, amount: str, mode: str
) -> None:
    # Given a hard limit the run fits (or a soft limit, which never refuses)
    _limit(client, org, amount, mode)
    assert _preset(client, org, golden_set=_preset_golden()).status_code == 201
    # When its golden set is run
    run = client.post("/v1/presets/triage/regression-runs", headers=org.key_headers())
    # Then it runs and is charged
    assert run.status_code == 201, run.text
    charged = Money.usd(run.json()["charged"]["amount"])
    assert charged.micros > 0
    # And the money adds up: the hold settled into charged + released, spend counts the charge
    ledger = _ledger()
    [hold] = ledger.reservations(org.org_id)
    assert hold.reservation_id == f"res_{run.json()['regression_id']}" and hold.status != "pending"
    assert hold.amount == hold.charged + hold.released + hold.absorbed
    assert hold.charged == charged
    state = ledger.state(org.org_id)
    assert (state.balance, state.reserved) == (CREDIT - charged, Money.zero())
    month = f"M#{isoformat(clock.now())[:7]}"
    assert ledger.spend_counters(org.org_id)[month] == charged
    assert ledger.violations(org.org_id) == []


def test_a_hold_overtaken_between_the_check_and_the_write_is_decided_again(
    client: TestClient, org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another hold commits after the run's check read the wallet: the run's hold, bounded
    by the limit's room in its own transaction, is refused, decided again on fresh reads, and
    the run answers 403 with the other hold counted in flight."""
    _limit(client, org, "1")
    assert _preset(client, org, golden_set=_preset_golden()).status_code == 201
    other = Money.usd("0.999999")  # fits the limit alone, as the run's estimate does; not both
    checked = Funds.guarded
    overtaken: list[str] = []

    def then_overtaken(*args: Any, **kwargs: Any) -> Any:
        held = checked(*args, **kwargs)
        if not overtaken:  # the first decision passed; another hold commits before its write
            terms = ReservationTerms(reservation_id="res_other", amount=other, purpose="batch", ref="other")
            _ledger().reserve(org.org_id, terms, at=kwargs["now"].isoformat())
            overtaken.append(terms.reservation_id)
        return held

    monkeypatch.setattr(Funds, "guarded", then_overtaken)
    run = client.post("/v1/presets/triage/regression-runs", headers=org.key_headers())
    assert overtaken == ["res_other"]
    assert run.status_code == 403, run.text
    assert run.json()["error"]["code"] == "spending_limit_reached"
    ledger = _ledger()
    assert [r.reservation_id for r in ledger.reservations(org.org_id)] == ["res_other"]
    assert ledger.state(org.org_id).reserved == other
    assert ledger.spend_counters(org.org_id) == {}
    assert ledger.violations(org.org_id) == []
