"""A hard daily limit holds across midnight: a reservation decided in the last instant of a
day that commits in the first of the next, after a settlement already charged the new day,
is refused and decided again on the new day (domain/billing/spending_limit.py). Covered for
the guarded hold of regression runs and overage holds (`Funds.guarded`), batch create
through the API, and the direct chat hold (`HoldKeeper`); all on moto with an injected clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.chat_holds import ChatHoldStore
from batchroute.adapters.dynamo.controls import ControlsStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.dynamo.limit_checks import SpendingLimitChecks
from batchroute.clock import FixedClock, isoformat
from batchroute.config import get_settings
from batchroute.domain.accounts.audit import AuditEntry
from batchroute.domain.batches.record import FundingMoved, OverageHold
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.billing.ledger import ReservationTerms, period_keys
from batchroute.domain.billing.spending_limit import LimitGuard
from batchroute.domain.billing.usage import ReservationCharge
from batchroute.errors import ServiceError
from batchroute.ids import new_id
from batchroute.money import Money
from batchroute.services.billing.funding import Funds
from batchroute.services.chat.direct import DirectChat
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from functions.api.deps import get_clock
from tests.integration.batch_pipeline_support import create_batch, heartbeat_all_lanes
from tests.integration.principals import TestOrg, new_org
from tests.integration.test_chat_holds import ScriptedProvider
from tests.integration.test_chat_holds import _direct as direct_chat
from tests.integration.test_chat_holds import _principal as chat_principal
from tests.integration.test_chat_holds import _request as chat_request
from tests.integration.test_quotes import _item

LAST = datetime(2026, 11, 20, 23, 59, 59, 900000, tzinfo=UTC)  # decided here
FIRST = datetime(2026, 11, 21, 0, 0, 0, 100000, tzinfo=UTC)  # committed here
NEW_DAY = "D#2026-11-21"


def _ledger() -> LedgerStore:
    return LedgerStore(get_settings().table_name("ledger"))


def _funds() -> Funds:
    """The funds a hold is decided with (`guarded`: its watch is never told)."""
    unused: Any = None
    return Funds(_ledger(), ControlsStore(get_settings().table_name("controls")), _checks(), unused)


def _checks() -> SpendingLimitChecks:
    settings = get_settings()
    return SpendingLimitChecks(
        ledger_table=settings.table_name("ledger"), controls_table=settings.table_name("controls")
    )


def _hard_daily(org_id: str, limit: Money) -> BillingControls:
    store = ControlsStore(get_settings().table_name("controls"))
    saved = replace(
        BillingControls(org_id=org_id),
        configured=True,
        version=1,
        limit_enabled=True,
        limit_period="daily",
        limit_amount=limit,
        limit_mode="hard",
        limit_timezone="UTC",
    )
    audit = AuditEntry(new_id("aud"), org_id, None, None, "test", {}, {}, None, isoformat(LAST))
    store.save_billing_controls(saved, expected_version=0, audit=audit)
    controls = store.billing_controls(org_id)
    assert controls is not None
    return controls


def _reserve(org_id: str, reservation_id: str, amount: Money, at: datetime) -> None:
    terms = ReservationTerms(
        reservation_id=reservation_id, amount=amount, purpose="batch", ref=reservation_id
    )
    _ledger().reserve(org_id, terms, at=isoformat(at))


def _settle(org_id: str, reservation_id: str, amount: Money, at: datetime) -> None:
    charge = ReservationCharge(reservation_id, amount, isoformat(at), tuple(period_keys(at, "UTC").values()))
    _ledger().settle(org_id, charge)


def _midnight_turns(org_id: str, amount: Money) -> None:
    """What happens between the decision and the commit: the day turns, the batch in flight
    (`res_x`) settles `amount` into the new day, and another reservation of `amount` is taken
    on the new day (spent + in flight + amount = the limit: allowed)."""
    _settle(org_id, "res_x", amount, FIRST)
    _reserve(org_id, "res_z", amount, FIRST)


def _new_day_total(org_id: str) -> Money:
    """The new day's spend plus everything in flight (all of it settles on the new day)."""
    return _ledger().period_spend(org_id, NEW_DAY) + _ledger().state(org_id).reserved


def test_a_guarded_hold_decided_before_midnight_is_refused_once_the_new_day_is_charged(
    local_aws: LocalStack,
) -> None:
    # Given a $10 hard daily limit and $5 in flight on 20 November
    org = new_org(credit_usd="100")
    controls = _hard_daily(org.org_id, Money.usd("10"))
    _reserve(org.org_id, "res_x", Money.usd("5"), LAST - timedelta(minutes=5))
    # And a $5 hold decided at 23:59:59.9 (room 10 - 0 - 5 = 5)
    terms = ReservationTerms(reservation_id="res_a", amount=Money.usd("5"), purpose="regression", ref="a")
    held = _funds().guarded(terms, controls, org_id=org.org_id, now=LAST)
    # When the day turns, $5 settles into it and $5 more is reserved on it
    _midnight_turns(org.org_id, Money.usd("5"))
    # Then the hold's transaction is refused as a moved limit (decide again)
    with pytest.raises(FundingMoved):
        _ledger().reserve_guarded(held.reservation, held.limit_checks)
    # And decided again on the new day, it is over the limit
    with pytest.raises(ServiceError) as refused:
        _funds().guarded(terms, controls, org_id=org.org_id, now=FIRST)
    assert refused.value.details is not None and refused.value.details["projected"] == "15.00"
    assert _new_day_total(org.org_id) == Money.usd("10")


def test_a_hold_decided_before_midnight_commits_when_the_new_day_has_no_spend(local_aws: LocalStack) -> None:
    # Given a $10 hard daily limit and $5 in flight, and a $5 hold decided at 23:59:59.9
    org = new_org(credit_usd="100")
    controls = _hard_daily(org.org_id, Money.usd("10"))
    _reserve(org.org_id, "res_x", Money.usd("5"), LAST - timedelta(minutes=5))
    terms = ReservationTerms(reservation_id="res_a", amount=Money.usd("5"), purpose="regression", ref="a")
    held = _funds().guarded(terms, controls, org_id=org.org_id, now=LAST)
    # When it commits after midnight, nothing having been charged on the new day
    _ledger().reserve_guarded(held.reservation, held.limit_checks)
    # Then it holds: the old day's bound still bounds the new day
    assert _ledger().state(org.org_id).reserved == Money.usd("10")


def test_an_overage_hold_decided_before_midnight_is_refused_once_the_new_day_is_charged(
    local_aws: LocalStack,
) -> None:
    # Given a running batch holding R, another R in flight, and a hard daily limit of 3 R
    heartbeat_all_lanes()
    org = new_org(credit_usd="100")
    batch = create_batch(org.org_id, [_item(0)], state="running")
    held_r = batch.reserved
    controls = _hard_daily(org.org_id, Money(held_r.micros * 3))
    _reserve(org.org_id, "res_x", held_r, LAST - timedelta(minutes=5))
    # And a rescue's overage hold of R decided at 23:59:59.9 (room 3R - 0 - 2R = R)
    terms = ReservationTerms(
        reservation_id="res_overage", amount=held_r, purpose="rescue_overage", ref=batch.batch_id
    )
    held = _funds().guarded(terms, controls, org_id=org.org_id, now=LAST)
    # When the day turns, R settles into it and R more is reserved on it
    _midnight_turns(org.org_id, held_r)
    # Then the hold's transaction is refused as a moved limit (the rescue decides again)
    hold = OverageHold(
        batch_id=batch.batch_id,
        hold_id="res_overage",
        amount=held_r,
        cap=Money.usd("5"),
        reservation=held.reservation,
        limit_checks=held.limit_checks,
    )
    with pytest.raises(FundingMoved):
        BatchRecords(get_settings().table_name("batches")).hold_overage(hold)
    assert _new_day_total(org.org_id) == Money(held_r.micros * 3)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(LAST)


@pytest.fixture
def client(local_aws: LocalStack, clock: FixedClock) -> TestClient:
    identity_store.cache_clear()
    app = create_app()
    app.dependency_overrides[get_clock] = lambda: clock
    heartbeat_all_lanes(clock)
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture
def turn_at_first_create(monkeypatch: pytest.MonkeyPatch, clock: FixedClock) -> dict[str, Any]:
    """Before the first batch-create transaction commits: midnight turns (`_midnight_turns`)."""
    plan: dict[str, Any] = {"org_id": None, "amount": None, "creates": 0}
    original = BatchRecords.create

    def create(self: BatchRecords, *args: Any, **kwargs: Any) -> None:
        plan["creates"] += 1
        if plan["creates"] == 1 and plan["org_id"] is not None:
            clock.advance(seconds=(FIRST - LAST).total_seconds())
            _midnight_turns(plan["org_id"], plan["amount"])
        original(self, *args, **kwargs)

    monkeypatch.setattr(BatchRecords, "create", create)
    return plan


def test_a_batch_created_across_midnight_is_decided_again_on_the_new_day(
    client: TestClient, turn_at_first_create: dict[str, Any]
) -> None:
    org: TestOrg = new_org(credit_usd="100")
    headers = org.key_headers()
    items = [_item(0)]
    quote = client.post("/v1/quotes/model", json={"items": items}, headers=headers)
    estimate = Money.usd(Decimal(quote.json()["pricing_estimate"]["total"]["amount"]))
    assert estimate > Money.zero()
    # Given a hard daily limit of twice the batch's estimate, and one estimate in flight
    _hard_daily(org.org_id, Money(estimate.micros * 2))
    _reserve(org.org_id, "res_x", estimate, LAST - timedelta(minutes=5))
    turn_at_first_create.update(org_id=org.org_id, amount=estimate)
    # When the batch is decided at 23:59:59.9 and midnight turns before its transaction commits
    created = client.post(
        "/v1/batches",
        json={"quote_id": quote.json()["quote_id"], "items": items},
        headers={**headers, "Idempotency-Key": "midnight-0001"},
    )
    # Then it is decided again on the new day, where it no longer fits: the limit's 402
    assert turn_at_first_create["creates"] >= 1
    assert created.status_code == 402, created.text
    assert created.json()["error"]["details"]["spent"] == Money(estimate.micros).to_api()["amount"]
    assert _new_day_total(org.org_id) == Money(estimate.micros * 2)


def _chat_under_two_holds(clock: FixedClock) -> tuple[TestOrg, DirectChat, Money]:
    """A new org under a hard daily limit of two holds of a direct chat request: the org, the
    direct path and the hold."""
    identity_store.cache_clear()
    heartbeat_all_lanes(clock)
    org = new_org(credit_usd="100")
    direct, _ = direct_chat(ScriptedProvider("edge-eu", tokens=3), clock)
    hold = direct.plan(chat_request()).hold
    _hard_daily(org.org_id, Money(hold.micros * 2))
    return org, direct, hold


def test_a_chat_hold_read_before_midnight_is_read_again_on_the_new_day(
    local_aws: LocalStack, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    org, direct, hold = _chat_under_two_holds(clock)
    # Given a hard daily limit of two holds, one hold's worth in flight on 20 November
    _reserve(org.org_id, "res_x", hold, LAST - timedelta(minutes=5))
    original, turned = ChatHoldStore.open, []

    def open_hold(self: ChatHoldStore, terms: Any, *, at: str, guard: LimitGuard) -> None:
        if guard.hard and not turned:  # the limit read at 23:59:59.9; midnight turns now
            turned.append(guard.period_key)
            clock.advance(seconds=(FIRST - LAST).total_seconds())
            _midnight_turns(org.org_id, hold)
        original(self, terms, at=at, guard=guard)

    monkeypatch.setattr(ChatHoldStore, "open", open_hold)
    # When a request's hold is decided at 23:59:59.9 and committed after midnight
    with pytest.raises(ServiceError) as refused:
        direct.open(chat_principal(org), chat_request())
    # Then the limit is read again on the new day, where the hold no longer fits: 403
    assert turned == ["D#2026-11-20"]
    assert refused.value.code == "spending_limit_reached"
    assert _new_day_total(org.org_id) == Money(hold.micros * 2)


# -- spend already standing under the next period ---------------------------------------------
# Spend keys are local dates, so an org that moves its `limit_timezone` west may find spend
# charged before the move under the new zone's tomorrow. The next period's counter is then not
# empty at the decision: a guard that asserted it empty was refused every time (503
# `funding_contended` on batch create, a 500 on chat) until that day came.
def _spent_tomorrow(org_id: str, amount: Money) -> None:
    """`amount` charged under the next day's key (D#2026-11-21) while it is 20 November."""
    _reserve(org_id, "res_east", amount, LAST - timedelta(minutes=10))
    _settle(org_id, "res_east", amount, FIRST)


def test_spend_standing_on_the_next_day_counts_but_does_not_block_a_hold(local_aws: LocalStack) -> None:
    # Given a $10 hard daily limit, and $4 charged under tomorrow's key
    org = new_org(credit_usd="100")
    controls = _hard_daily(org.org_id, Money.usd("10"))
    _spent_tomorrow(org.org_id, Money.usd("4"))
    # When a $5 hold is decided today / Then it commits (it was refused, again and again)
    terms = ReservationTerms(reservation_id="res_a", amount=Money.usd("5"), purpose="regression", ref="a")
    held = _funds().guarded(terms, controls, org_id=org.org_id, now=LAST)
    _ledger().reserve_guarded(held.reservation, held.limit_checks)
    assert _ledger().state(org.org_id).reserved == Money.usd("5")
    # And the next day's spend is counted: $5 more would take it to 4 + 5 + 5 > 10
    more = replace(terms, reservation_id="res_b", ref="b")
    with pytest.raises(ServiceError) as refused:
        _funds().guarded(more, controls, org_id=org.org_id, now=LAST)
    assert refused.value.details is not None and refused.value.details["projected"] == "14.00"
    # And charged meanwhile, the next day's counter still refuses a hold decided before it grew
    again = _funds().guarded(
        replace(terms, amount=Money.usd("1"), reservation_id="res_c"),
        controls,
        org_id=org.org_id,
        now=LAST,
    )
    _reserve(org.org_id, "res_d", Money.usd("1"), LAST)
    _settle(org.org_id, "res_d", Money.usd("1"), FIRST)
    with pytest.raises(FundingMoved):
        _ledger().reserve_guarded(again.reservation, again.limit_checks)


def test_a_batch_and_a_chat_request_go_through_with_spend_standing_on_the_next_day(
    client: TestClient, clock: FixedClock
) -> None:
    org: TestOrg = new_org(credit_usd="100")
    _hard_daily(org.org_id, Money.usd("1000"))
    _spent_tomorrow(org.org_id, Money.usd("1"))
    # When a batch is created under the limit / Then it is (it was 503 funding_contended)
    created = client.post(
        "/v1/batches",
        json={"items": [_item(0)]},
        headers={**org.key_headers(), "Idempotency-Key": "east-0001"},
    )
    assert created.status_code == 202, created.text
    # And a direct chat request's hold is taken (it was a 500)
    direct, _ = direct_chat(ScriptedProvider("edge-eu", tokens=3), clock)
    call = direct.open(chat_principal(org), chat_request())
    assert call.hold > Money.zero()
    call.finish()


def test_a_chat_hold_refused_for_spend_standing_on_the_next_day_says_so(
    local_aws: LocalStack, clock: FixedClock
) -> None:
    org, direct, hold = _chat_under_two_holds(clock)
    # Given a hard daily limit of two holds, and one and a half standing under tomorrow's key
    _spent_tomorrow(org.org_id, Money(hold.micros * 3 // 2))
    # When a request's hold would take the counted spend past it / Then the 403 shows the
    # figures it was refused on (today's $0 would show a projection under the limit)
    with pytest.raises(ServiceError) as refused:
        direct.open(chat_principal(org), chat_request())
    assert refused.value.code == "spending_limit_reached"
    details = refused.value.details or {}
    assert Money.usd(details["spent"]) == Money(hold.micros * 3 // 2)
    assert Money.usd(details["projected"]) > Money.usd(details["limit"])
