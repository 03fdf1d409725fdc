"""LedgerStore on moto: reservations inside a caller's transaction (batch create), chat holds,
settlement with the absorb policy, exactly-once resolution, open holds, period spend, wallets
from before `available_micros`, and concurrent reservations that must never overdraw."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError

from batchroute.adapters.dynamo.codec import to_item
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.dynamo.writes import cancellation_codes
from batchroute.config import get_settings
from batchroute.domain.billing.ledger import (
    DuplicateReservation,
    Purpose,
    ReservationTerms,
    UnknownReservation,
)
from batchroute.domain.billing.reconciliation import LedgerCredit
from batchroute.domain.billing.usage import ReservationCharge
from batchroute.errors import PaymentRequired
from batchroute.money import Money
from batchroute.services.billing.funding import Funding
from batchroute_tools.local.provision import LocalStack
from functions.api.auth import identity_store
from tests.integration.principals import ledger_store, new_org

AT = "2026-11-21T10:00:00.000Z"
NOW = datetime(2026, 11, 21, 10, tzinfo=UTC)
LATER = "2026-11-21T11:00:00.000Z"
KEYS = ("D#2026-11-21", "M#2026-11")


@pytest.fixture
def ledger(local_aws: LocalStack) -> LedgerStore:
    identity_store.cache_clear()
    return ledger_store()


def funded_org(usd: str) -> str:
    return new_org(credit_usd=usd).org_id


def batch_put(batch_id: str) -> dict[str, Any]:
    """A stand-in for the batch create's own item (in the batches table)."""
    return {
        "Put": {
            "TableName": get_settings().table_name("batches"),
            "Item": to_item({"pk": f"BATCH#{batch_id}", "sk": "META", "kind": "batch"}),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def reserve(ledger: LedgerStore, org_id: str, rid: str, usd: str, purpose: Purpose = "batch") -> None:
    ledger.reserve(
        org_id,
        ReservationTerms(reservation_id=rid, amount=Money.usd(usd), purpose=purpose, ref=f"ref_{rid}"),
        at=AT,
    )


# -- reservations in the batch create transaction ------------------------------------------
def test_reservation_commits_with_the_batch_in_one_transaction(ledger: LedgerStore) -> None:
    # Given 25 USD / When the batch create transaction reserves 10 USD with the batch item
    org_id = funded_org("25")
    items = ledger.reserve_items(
        org_id,
        ReservationTerms(reservation_id="batch_1", amount=Money.usd("10"), purpose="batch", ref="batch_1"),
        at=AT,
    )
    ledger.dynamodb.transact_write_items(TransactItems=[*items, batch_put("batch_1")])
    # Then the credit is reserved, the reservation is pending and explained by an entry
    state = ledger.state(org_id)
    assert (state.balance, state.reserved, state.available) == (
        Money.usd("25"),
        Money.usd("10"),
        Money.usd("15"),
    )
    held = ledger.reservation(org_id, "batch_1")
    assert held is not None and (held.status, held.purpose, held.amount) == (
        "pending",
        "batch",
        Money.usd("10"),
    )
    assert ledger.entries(org_id)[0]["entry_type"] == "reservation"
    assert ledger.violations(org_id) == []


def test_insufficient_credit_cancels_the_whole_batch_transaction(ledger: LedgerStore) -> None:
    # Given 5 USD / When a batch create transaction (batch item first) reserves 8 USD
    org_id = funded_org("5")
    items = ledger.reserve_items(
        org_id,
        ReservationTerms(reservation_id="batch_2", amount=Money.usd("8"), purpose="batch", ref="batch_2"),
        at=AT,
    )
    with pytest.raises(ClientError) as cancelled:
        ledger.dynamodb.transact_write_items(TransactItems=[batch_put("batch_2"), *items])
    # Then the refusal reads as a 402 with the details, and nothing at all was written
    refusal = ledger.reservation_refusal(cancelled.value, org_id, Money.usd("8"), offset=1)
    assert isinstance(refusal, PaymentRequired)
    assert (refusal.code, refusal.details) == (
        "insufficient_credits",
        {"available": "5.00", "required": "8.00"},
    )
    assert ledger.state(org_id).reserved == Money(0)
    assert ledger.reservation(org_id, "batch_2") is None
    batches = ledger.dynamodb.get_item(
        TableName=get_settings().table_name("batches"),
        Key={"pk": {"S": "BATCH#batch_2"}, "sk": {"S": "META"}},
    )
    assert "Item" not in batches


def test_a_refusal_from_the_callers_own_items_is_not_a_ledger_refusal(ledger: LedgerStore) -> None:
    # Given a batch item that exists already (a replayed create)
    org_id = funded_org("25")
    ledger.dynamodb.transact_write_items(TransactItems=[batch_put("batch_3")])
    items = ledger.reserve_items(
        org_id,
        ReservationTerms(reservation_id="batch_3", amount=Money.usd("1"), purpose="batch", ref="batch_3"),
        at=AT,
    )
    # When the create transaction runs / Then only the caller's item failed: no ledger refusal
    with pytest.raises(ClientError) as cancelled:
        ledger.dynamodb.transact_write_items(TransactItems=[*items, batch_put("batch_3")])
    assert cancellation_codes(cancelled.value) == ["None", "None", "None", "ConditionalCheckFailed"]
    assert ledger.reservation_refusal(cancelled.value, org_id, Money.usd("1")) is None
    assert ledger.state(org_id).reserved == Money(0)


def test_a_reservation_id_is_used_once(ledger: LedgerStore) -> None:
    org_id = funded_org("25")
    reserve(ledger, org_id, "r1", "1")
    with pytest.raises(DuplicateReservation):
        reserve(ledger, org_id, "r1", "1")
    assert ledger.state(org_id).reserved == Money.usd("1")


def test_a_reservation_id_reused_on_a_wallet_it_emptied_is_a_duplicate_not_a_402(ledger: LedgerStore) -> None:
    # Given a wallet whose whole balance the first reservation took
    org_id = funded_org("1")
    reserve(ledger, org_id, "r1", "1")
    # When the same id is reserved again (a retry): both conditions refuse the write
    # Then the taken id is what the caller hears, not "insufficient credit"
    with pytest.raises(DuplicateReservation):
        reserve(ledger, org_id, "r1", "1")
    assert ledger.state(org_id).reserved == Money.usd("1")


def test_chat_hold_refusal_is_insufficient_funds(ledger: LedgerStore) -> None:
    org_id = funded_org("0.5")
    with pytest.raises(PaymentRequired) as refused:
        reserve(ledger, org_id, "req_1", "0.500001", purpose="chat_hold")
    assert (refused.value.code, refused.value.details) == (
        "insufficient_funds",
        {"available": "0.50", "required": "0.500001"},
    )


def test_an_org_without_a_wallet_cannot_reserve(ledger: LedgerStore) -> None:
    with pytest.raises(PaymentRequired):
        reserve(ledger, "org_nowallet", "r1", "1")


# -- settlement ------------------------------------------------------------------------------
def test_settle_charges_the_cost_releases_the_rest_and_counts_period_spend(ledger: LedgerStore) -> None:
    # Given a 10 USD reservation out of 25 USD
    org_id = funded_org("25")
    reserve(ledger, org_id, "r1", "10")
    # When it settles at 3.25 USD
    result = ledger.settle(org_id, ReservationCharge("r1", Money.usd("3.25"), LATER, KEYS, memo="usage"))
    # Then 3.25 is charged, 6.75 released, and both spend counters hold the charge
    assert (result.status, result.reserved, result.charged, result.released, result.absorbed) == (
        "settled",
        Money.usd("10"),
        Money.usd("3.25"),
        Money.usd("6.75"),
        Money(0),
    )
    state = ledger.state(org_id)
    assert (state.balance, state.reserved) == (Money.usd("21.75"), Money(0))
    assert ledger.period_spend(org_id, "D#2026-11-21") == Money.usd("3.25")
    assert ledger.period_spend(org_id, "M#2026-11") == Money.usd("3.25")
    assert ledger.period_spend(org_id, "D#2026-11-22") == Money(0)
    kinds = sorted(e["entry_type"] for e in ledger.entries(org_id, limit=None))
    assert kinds == ["charge", "release", "reservation", "signup_credit"]
    assert ledger.violations(org_id) == []


def test_a_cost_above_the_reservation_is_absorbed_not_charged(ledger: LedgerStore) -> None:
    # Given a 2 USD reservation and only 2 USD in the wallet
    org_id = funded_org("2")
    reserve(ledger, org_id, "r1", "2")
    # When the actual cost is 2.5 USD
    result = ledger.settle(org_id, ReservationCharge("r1", Money.usd("2.5"), LATER, KEYS))
    # Then 2 USD is charged, 0.5 absorbed, and the balance is zero, never negative
    assert (result.charged, result.released, result.absorbed) == (Money.usd("2"), Money(0), Money.usd("0.5"))
    assert ledger.state(org_id).balance == Money(0)
    stored = ledger.reservation(org_id, "r1")
    assert stored is not None and stored.absorbed == Money.usd("0.5")
    assert ledger.violations(org_id) == []


def test_repeated_settle_and_release_return_the_first_outcome(ledger: LedgerStore) -> None:
    # Given a reservation settled once
    org_id = funded_org("25")
    reserve(ledger, org_id, "r1", "10")
    first = ledger.settle(org_id, ReservationCharge("r1", Money.usd("4"), LATER, KEYS))
    # When the settle message is delivered again (another charge) and a release arrives late
    again = ledger.settle(org_id, ReservationCharge("r1", Money.usd("9"), LATER, KEYS))
    late = ledger.release(org_id, "r1", at=LATER)
    # Then both return the first outcome and nothing more was written
    assert again.replayed and late.replayed and not first.replayed
    assert (again.charged, late.charged, late.status) == (Money.usd("4"), Money.usd("4"), "settled")
    assert ledger.state(org_id).balance == Money.usd("21")
    assert ledger.period_spend(org_id, "D#2026-11-21") == Money.usd("4")
    assert len(ledger.entries(org_id, limit=None)) == 4


def test_release_voids_the_reservation(ledger: LedgerStore) -> None:
    org_id = funded_org("25")
    reserve(ledger, org_id, "r1", "10")
    result = ledger.release(org_id, "r1", at=LATER)
    assert (result.status, result.charged, result.released) == ("released", Money(0), Money.usd("10"))
    assert ledger.state(org_id).available == Money.usd("25")
    assert ledger.spend_counters(org_id) == {}
    with pytest.raises(UnknownReservation):
        ledger.release(org_id, "r_missing", at=LATER)


def test_open_holds_lists_pending_reservations_older_than_a_moment(ledger: LedgerStore) -> None:
    # Given two chat holds and a batch reservation at different times, one hold resolved
    org_id = funded_org("25")
    holds: list[tuple[str, str, Purpose]] = [
        ("h1", "2026-11-21T10:00:00.000Z", "chat_hold"),
        ("h2", "2026-11-21T10:05:00.000Z", "chat_hold"),
        ("h3", "2026-11-21T10:06:00.000Z", "chat_hold"),
        ("b1", "2026-11-21T10:01:00.000Z", "batch"),
    ]
    for rid, at, purpose in holds:
        ledger.reserve(
            org_id,
            ReservationTerms(reservation_id=rid, amount=Money.usd("1"), purpose=purpose, ref=rid),
            at=at,
        )
    ledger.release(org_id, "h2", at=LATER)
    # When the sweeper asks for holds older than 10:06 / Then the pending ones, oldest first
    older = "2026-11-21T10:06:00.000Z"
    assert [r.reservation_id for r in ledger.open_holds(older)] == ["h1", "b1"]
    assert [r.reservation_id for r in ledger.open_holds(older, purpose="chat_hold")] == ["h1"]
    assert [r.reservation_id for r in ledger.open_holds("2027", limit=2)] == ["h1", "b1"]


# -- wallets from before available_micros -----------------------------------------------------
def test_a_wallet_without_available_micros_still_reserves_and_grants(ledger: LedgerStore) -> None:
    # Given a wallet written before `available_micros` existed (nothing reserved then)
    org_id = funded_org("10")
    ledger.dynamodb.update_item(
        TableName=ledger.table_name,
        Key={"pk": {"S": f"WALLET#{org_id}"}, "sk": {"S": "META"}},
        UpdateExpression="REMOVE available_micros",
    )
    # When it reserves beyond and within its balance, and is granted more
    with pytest.raises(PaymentRequired):
        reserve(ledger, org_id, "r1", "11")
    reserve(ledger, org_id, "r2", "4")
    assert ledger.grant(org_id, Money.usd("1"), at=AT, memo="m", actor="t") == Money.usd("7")
    # Then the derived attribute is back and consistent
    assert ledger.violations(org_id) == []


# -- concurrency -------------------------------------------------------------------------------
def run_together(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Start `count` calls of `work` at once (a barrier), return results or exceptions."""
    barrier = threading.Barrier(count)

    def attempt(n: int) -> Any:
        barrier.wait()
        try:
            return work(n)
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(attempt, range(count)))


@pytest.mark.usefixtures("serializable_transactions")
def test_concurrent_reservations_never_overdraw(ledger: LedgerStore) -> None:
    # Given 10 USD and 16 submits of 1 USD that all pass the funding check first
    org_id = funded_org("10")
    checked = threading.Barrier(16)

    def submit(n: int) -> None:
        Funding(ledger).check_funding(org_id, Money.usd("1"), None, now=NOW)
        checked.wait()  # every check saw 10 USD available before any reservation
        reserve(ledger, org_id, f"r{n}", "1")

    # When they reserve at once
    outcomes = run_together(16, submit)
    # Then exactly 10 succeed, the rest get 402, and available ends at zero, not below
    refused = [o for o in outcomes if isinstance(o, PaymentRequired)]
    assert len(refused) == 6 and outcomes.count(None) == 10
    state = ledger.state(org_id)
    assert (state.reserved, state.available) == (Money.usd("10"), Money(0))
    assert ledger.violations(org_id) == []


@pytest.mark.usefixtures("serializable_transactions")
def test_concurrent_duplicate_settlements_charge_once(ledger: LedgerStore) -> None:
    # Given a 10 USD reservation / When 8 copies of its settle message arrive at once
    org_id = funded_org("25")
    reserve(ledger, org_id, "r1", "10")
    outcomes = run_together(
        8, lambda n: ledger.settle(org_id, ReservationCharge("r1", Money.usd(3 + n), LATER, KEYS))
    )
    # Then one wrote, the others returned its outcome, and 1 charge entry exists
    assert [o.replayed for o in outcomes].count(False) == 1
    assert len({(o.charged, o.released) for o in outcomes}) == 1
    charges = [e for e in ledger.entries(org_id, limit=None) if e["entry_type"] == "charge"]
    assert len(charges) == 1
    assert ledger.period_spend(org_id, "D#2026-11-21") == outcomes[0].charged
    assert ledger.violations(org_id) == []


def test_entries_page_through_long_histories(ledger: LedgerStore) -> None:
    org_id = funded_org("100")
    for n in range(12):
        reserve(ledger, org_id, f"r{n}", "0.01")
    assert len(ledger.entries(org_id, limit=5)) == 5
    assert len(ledger.entries(org_id, limit=None)) == 13


def test_processor_credits_since_reads_every_orgs_purchases_and_top_ups_from_one_index(
    ledger: LedgerStore,
) -> None:
    # Given processor credits in two orgs before and after a moment, and a grant (not a payment)
    first, second = funded_org("0"), funded_org("0")
    ledger.credit(
        LedgerCredit(org_id=first, processor_ref="cs_old", kind="purchase", amount=Money.usd("25"), at=AT),
        memo="p",
    )
    ledger.credit(
        LedgerCredit(org_id=first, processor_ref="cs_new", kind="purchase", amount=Money.usd("25"), at=LATER),
        memo="p",
    )
    ledger.credit(
        LedgerCredit(org_id=second, processor_ref="pi_new", kind="topup", amount=Money.usd("50"), at=LATER),
        memo="t",
    )
    ledger.grant(second, Money.usd("7"), at=LATER, memo="goodwill", actor="operator")

    # When the credits since the moment are read
    credits = ledger.processor_credits_since("2026-11-21T10:30:00.000Z")

    # Then both orgs' processor credits after it, as recorded, and nothing else
    mine = sorted(
        (c.org_id, c.processor_ref, c.kind, c.amount, c.at) for c in credits if c.org_id in (first, second)
    )
    assert mine == sorted(
        [
            (first, "cs_new", "purchase", Money.usd("25"), LATER),
            (second, "pi_new", "topup", Money.usd("50"), LATER),
        ]
    )
