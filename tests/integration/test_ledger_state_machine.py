"""The real LedgerStore on moto, driven by Hypothesis through random sequences of grants,
reservations (some beyond the available balance), settlements (below, at and above the
reservation), releases, processor credits (credit purchases and auto top-ups, each event
possibly delivered again) and repeated deliveries, checked against the in-memory model after
EVERY step by reading DynamoDB back: balance >= 0, available = balance - reserved >= 0,
reserved = Σ pending, each resolved reservation reserved = charged + released (the rest of
the cost absorbed), entries explain the balance (= credits in - charged), each reservation
resolved exactly once, each processor event credited exactly once,
spend counters hold the charges, and the open-holds index holds exactly the pending ones."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)
from moto import mock_aws

from batchroute import resources
from batchroute.adapters.dynamo.controls import ControlsStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.dynamo.limit_checks import SpendingLimitChecks
from batchroute.adapters.dynamo.writes import cancellation_codes
from batchroute.clock import isoformat
from batchroute.domain.accounts.audit import AuditEntry
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.billing.ledger import (
    DuplicateReservation,
    ProcessorCredit,
    Purpose,
    ReservationTerms,
    SettlementResult,
    UnknownReservation,
    Wallet,
    period_keys,
)
from batchroute.domain.billing.reconciliation import LedgerCredit
from batchroute.domain.billing.spending_limit import LimitGuard, next_period_key
from batchroute.domain.billing.usage import ReservationCharge
from batchroute.errors import PaymentRequired
from batchroute.money import Money
from tests.integration.conftest import MOTO_CONFIG

ORG = "org_machine"
TABLE = "machine-ledger"
REGION = "us-east-1"
ZONE = "Pacific/Kiritimati"  # UTC+14: settlement instants fall on different local days
INSTANTS = [
    datetime(2026, 11, 21, 9, 59, tzinfo=UTC),
    datetime(2026, 11, 21, 10, 0, tzinfo=UTC),
    datetime(2026, 11, 30, 10, 0, tzinfo=UTC),  # already December there
]
USD = 1_000_000
AMOUNTS = st.one_of(st.integers(1, 100), st.integers(1, 40 * USD))


@cache
def dynamodb_client() -> Any:
    """One client for every example (creating one costs far more than a whole example);
    each example's mock_aws() starts from empty backends."""
    return boto3.client("dynamodb", region_name=REGION)


def create_ledger_table(dynamodb: Any, name: str) -> None:
    table = resources.table("ledger")
    keys = [table.partition_key, table.sort_key]
    for index in table.indexes:
        keys += [index.partition_key, index.sort_key]
    dynamodb.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[
            {"AttributeName": table.partition_key, "KeyType": "HASH"},
            {"AttributeName": table.sort_key, "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in dict.fromkeys(keys)],
        GlobalSecondaryIndexes=[
            {
                "IndexName": index.name,
                "KeySchema": [
                    {"AttributeName": index.partition_key, "KeyType": "HASH"},
                    {"AttributeName": index.sort_key, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
            for index in table.indexes
        ],
    )


class LedgerMachine(RuleBasedStateMachine):
    pending = Bundle("pending")
    resolved = Bundle("resolved")
    credits = Bundle("credits")

    def __init__(self) -> None:
        super().__init__()
        # local_aws is a pytest fixture, out of reach here: each example gets its own moto.
        self.aws = mock_aws(config=MOTO_CONFIG)
        self.aws.start()
        dynamodb = dynamodb_client()
        create_ledger_table(dynamodb, TABLE)
        self.store = LedgerStore(TABLE, dynamodb=dynamodb)
        self.model = Wallet(org_id=ORG)
        self.outcomes: dict[str, SettlementResult] = {}
        self.serial = 0

    def teardown(self) -> None:
        self.aws.stop()

    def _next_id(self) -> str:
        self.serial += 1
        return f"res_{self.serial:04d}"

    # -- rules -------------------------------------------------------------------------------
    @initialize(signup=st.integers(0, 50 * USD))
    def open_wallet(self, signup: int) -> None:
        at = isoformat(INSTANTS[0])
        self.store.dynamodb.transact_write_items(
            TransactItems=self.store.open_wallet_items(ORG, signup_credit=Money(signup), at=at)
        )
        if signup:
            self.model.grant(signup, kind="signup_credit")

    @rule(amount=st.integers(1, 30 * USD))
    def grant(self, amount: int) -> None:
        self.store.grant(ORG, Money(amount), at=isoformat(INSTANTS[0]), memo="top-up", actor="test")
        self.model.grant(amount)

    @rule(target=credits, amount=st.integers(5 * USD, 100 * USD), kind=st.sampled_from(["purchase", "topup"]))
    def processor_credit(self, amount: int, kind: ProcessorCredit) -> tuple[str, int, ProcessorCredit]:
        # A checkout.session.completed (cs_...) or a payment_intent.succeeded (pi_...)
        self.serial += 1
        ref = f"{'cs' if kind == 'purchase' else 'pi'}_{self.serial:04d}"
        applied = self.store.credit(
            LedgerCredit(
                org_id=ORG, processor_ref=ref, kind=kind, amount=Money(amount), at=isoformat(INSTANTS[0])
            ),
            memo=ref,
        )
        assert applied and self.model.credit(ref, amount, kind=kind)
        return ref, amount, kind

    @rule(credit=credits, other_amount=st.booleans())
    def processor_event_delivered_again(
        self, credit: tuple[str, int, ProcessorCredit], other_amount: bool
    ) -> None:
        # The same event again (or a tampered one with another amount): nothing changes
        ref, amount, kind = credit
        again = self.store.credit(
            LedgerCredit(
                org_id=ORG,
                processor_ref=ref,
                kind=kind,
                amount=Money(amount * (2 if other_amount else 1)),
                at=isoformat(INSTANTS[1]),
            ),
            memo=ref,
        )
        assert not again and not self.model.credit(ref, amount, kind=kind)
        event("processor event repeated")

    @rule(target=pending, amount=AMOUNTS, purpose=st.sampled_from(["batch", "chat_hold"]))
    def reserve(self, amount: int, purpose: Purpose) -> Any:
        reservation_id = self._next_id()
        at = isoformat(INSTANTS[0])
        expected: PaymentRequired | None = None
        try:
            self.model.reserve(reservation_id, amount, purpose=purpose, ref=reservation_id, at=at)
        except PaymentRequired as refusal:
            expected = refusal
        if expected is None:
            self._store_reserve(reservation_id, amount, purpose)
            return reservation_id
        # The model refuses (amount > available): the store refuses alike and changes nothing
        event("reserve refused")
        with pytest.raises(PaymentRequired) as refused:
            self._store_reserve(reservation_id, amount, purpose)
        assert refused.value.details == expected.details
        assert refused.value.code == (
            "insufficient_funds" if purpose == "chat_hold" else "insufficient_credits"
        )
        return multiple()

    @precondition(lambda self: bool(self.model.reservations))  # some id to reuse
    @rule(reservation_id=st.one_of(pending, resolved))
    def reserve_the_same_id_again(self, reservation_id: str) -> None:
        with pytest.raises(DuplicateReservation):
            self._store_reserve(reservation_id, 1, "batch")

    @rule(
        target=resolved,
        reservation_id=consumes(pending),
        kind=st.sampled_from(["zero", "under", "exact", "over"]),
        delta=st.integers(0, 5 * USD),
        instant=st.sampled_from(INSTANTS),
    )
    def settle(self, reservation_id: str, kind: str, delta: int, instant: datetime) -> str:
        amount = self.model.reservations[reservation_id].amount.micros
        cost = {"zero": 0, "under": max(amount - delta, 0), "exact": amount, "over": amount + delta}[kind]
        at, keys = isoformat(instant), tuple(period_keys(instant, ZONE).values())
        expected = self.model.settle(reservation_id, cost, at=at, period_keys=keys)
        event(f"settle {'absorbing' if expected.absorbed.micros else 'within the reservation'}")
        actual = self.store.settle(ORG, ReservationCharge(reservation_id, Money(cost), at, keys))
        assert actual == expected and not actual.replayed
        self.outcomes[reservation_id] = actual
        return reservation_id

    @rule(target=resolved, reservation_id=consumes(pending), instant=st.sampled_from(INSTANTS))
    def release(self, reservation_id: str, instant: datetime) -> str:
        expected = self.model.release(reservation_id, at=isoformat(instant))
        actual = self.store.release(ORG, reservation_id, at=isoformat(instant))
        assert actual == expected and actual.charged == Money(0)
        self.outcomes[reservation_id] = actual
        return reservation_id

    @rule(
        reservation_id=resolved,
        void=st.booleans(),
        charge=st.integers(0, 50 * USD),
        instant=st.sampled_from(INSTANTS),
    )
    def deliver_again(self, reservation_id: str, void: bool, charge: int, instant: datetime) -> None:
        # A duplicate settle or release message: the first outcome, nothing written
        at, keys = isoformat(instant), tuple(period_keys(instant, ZONE).values())
        if void:
            repeated = self.store.release(ORG, reservation_id, at=at)
        else:
            repeated = self.store.settle(ORG, ReservationCharge(reservation_id, Money(charge), at, keys))
        original = self.outcomes[reservation_id]
        assert repeated.replayed
        assert (repeated.status, repeated.charged, repeated.released, repeated.settled_at) == (
            original.status,
            original.charged,
            original.released,
            original.settled_at,
        )

    @rule()
    def settle_an_unknown_reservation(self) -> None:
        with pytest.raises(UnknownReservation):
            self.store.release(ORG, "res_unknown", at=isoformat(INSTANTS[0]))

    def _store_reserve(self, reservation_id: str, amount: int, purpose: Purpose) -> None:
        self.store.reserve(
            ORG,
            ReservationTerms(
                reservation_id=reservation_id, amount=Money(amount), purpose=purpose, ref=reservation_id
            ),
            at=isoformat(INSTANTS[0]),
        )

    # -- invariants, read back from DynamoDB after every step -----------------------------
    @invariant()
    def ledger_matches_the_model_and_is_consistent(self) -> None:
        stored, model = self.store.snapshot(ORG), self.model.snapshot()
        # balance >= 0, available = balance - reserved >= 0, reserved = Σ pending, each
        # resolved: reserved = charged + released, entries explain balance and reserved,
        # at most one charge and one release per reservation, spend counters = Σ charges
        assert stored.violations() == []
        assert model.violations() == []
        assert (stored.balance, stored.reserved, stored.available) == (
            model.balance,
            model.reserved,
            model.available,
        )
        assert {r.reservation_id: r for r in stored.reservations} == self.model.reservations
        assert Counter(stored.entries) == Counter(model.entries)  # settled exactly once
        assert stored.spend == model.spend

    @invariant()
    def open_holds_are_the_pending_reservations(self) -> None:
        open_ids = {r.reservation_id for r in self.store.open_holds("9999", limit=1000)}
        assert open_ids == {rid for rid, r in self.model.reservations.items() if r.pending}


LedgerMachine.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLedgerStateMachine = LedgerMachine.TestCase


# -- interleaved reservations under a hard spending limit -----------------------------------
CONTROLS_TABLE = "machine-controls"
NOW = INSTANTS[0]  # the submit instant: its local day is the limit's period
DAY_KEY = period_keys(NOW, ZONE)["daily"]
# ... and the next local day, where a settlement at INSTANTS[1] charges (UTC+14: 00:00 there):
# a hard guard bounds by the larger spend of the two and asserts neither grew since its read
# (domain/billing/spending_limit.py)
NEXT_DAY_KEY = next_period_key(DAY_KEY)


def create_controls_table(dynamodb: Any, name: str) -> None:
    table = resources.table("controls")
    dynamodb.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[
            {"AttributeName": table.partition_key, "KeyType": "HASH"},
            {"AttributeName": table.sort_key, "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": k, "AttributeType": "S"} for k in (table.partition_key, table.sort_key)
        ],
    )


@dataclass(frozen=True)
class Prepared:
    """A submit that has read the limit (its guard) and not yet written."""

    reservation_id: str
    amount: int
    guard: LimitGuard


class HardLimitLedgerMachine(LedgerMachine):
    """The same ledger with a hard daily limit: every reservation reads the limit into a guard
    and writes later, so reads and writes of different submits interleave in any order
    (with settlements, releases, grants and limit changes between them). A write is accepted
    exactly when the conditions promise (funds, room under the limit as read, spend not grown
    past what was read, controls unchanged), and the limit is never exceeded:
    spend of the day + in-flight <= limit after every step."""

    prepared = Bundle("prepared")

    def __init__(self) -> None:
        super().__init__()
        create_controls_table(self.store.dynamodb, CONTROLS_TABLE)
        self.controls = ControlsStore(CONTROLS_TABLE, dynamodb=self.store.dynamodb)
        self.checks = SpendingLimitChecks(ledger_table=TABLE, controls_table=CONTROLS_TABLE)
        self.limit = 0
        self.version = 0

    @initialize(limit=st.integers(1, 60 * USD))
    def set_hard_limit(self, limit: int) -> None:
        self._save_limit(limit)

    @rule(increase=st.integers(0, 10 * USD))
    def raise_the_limit(self, increase: int) -> None:
        # Raised only: lowering a limit below what is already in flight is allowed (it only
        # refuses new work), but then "never exceeded" would not be a property of the ledger.
        self._save_limit(self.limit + increase)

    def _save_limit(self, limit: int) -> None:
        controls = BillingControls(
            org_id=ORG,
            configured=True,
            limit_enabled=True,
            limit_period="daily",
            limit_amount=Money(limit),
            limit_mode="hard",
            limit_timezone=ZONE,
            version=self.version + 1,
        )
        audit = AuditEntry(
            id=f"audit_{self.version + 1}",
            org_id=ORG,
            actor_user_id=None,
            actor_role=None,
            action="billing_controls.updated",
            before={},
            after={},
            ip_address=None,
            created_at=isoformat(NOW),
        )
        self.controls.save_billing_controls(controls, expected_version=self.version, audit=audit)
        self.limit, self.version = limit, self.version + 1

    @rule(target=prepared, amount=AMOUNTS)
    def read_the_limit(self, amount: int) -> Prepared:
        controls, spent = self.checks.read(self.store.dynamodb, ORG, [DAY_KEY, NEXT_DAY_KEY])
        assert controls is not None and controls.limit_amount is not None
        guard = LimitGuard(
            hard=True,
            version=controls.version,
            limit_micros=controls.limit_amount.micros,
            period="daily",
            period_key=DAY_KEY,
            spent_micros=spent.get(DAY_KEY, 0),
            next_spent_micros=spent.get(NEXT_DAY_KEY, 0),
        )
        return Prepared(self._next_id(), amount, guard)

    @rule(target=LedgerMachine.pending, submit=consumes(prepared))
    def write_the_reservation(self, submit: Prepared) -> Any:
        model = self.model
        cap = submit.guard.reserved_cap(Money(submit.amount))
        expected = (
            model.available >= submit.amount
            and cap is not None
            and model.reserved <= cap
            and model.spend.get(DAY_KEY, 0) <= submit.guard.spent_micros
            and model.spend.get(NEXT_DAY_KEY, 0) <= submit.guard.next_spent_micros
            and submit.guard.version == self.version
        )
        items = [
            *self.store.reserve_items(
                ORG,
                ReservationTerms(
                    reservation_id=submit.reservation_id,
                    amount=Money(submit.amount),
                    purpose="batch",
                    ref=submit.reservation_id,
                ),
                at=isoformat(NOW),
                reserved_at_most=cap,
            ),
            *self.checks.items(ORG, submit.guard),
        ]
        refusal: list[str] = []
        try:
            self.store.dynamodb.transact_write_items(TransactItems=items)
        except ClientError as exc:
            refusal = cancellation_codes(exc)  # a refused condition, never another error
            if not refusal:
                raise
        accepted = not refusal
        assert accepted == expected
        if not accepted:
            event("guarded reserve refused")
            return multiple()
        event("guarded reserve accepted")
        model.reserve(submit.reservation_id, submit.amount, ref=submit.reservation_id, at=isoformat(NOW))
        return submit.reservation_id

    @precondition(lambda self: False)  # every reservation here reads the limit first
    @rule()
    def reserve(self) -> None:
        raise AssertionError("unreachable")

    @invariant()
    def the_hard_limit_is_never_exceeded(self) -> None:
        stored = self.store.snapshot(ORG)
        for day in (DAY_KEY, NEXT_DAY_KEY):
            assert stored.spend.get(day, 0) + stored.reserved <= self.limit


HardLimitLedgerMachine.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestHardLimitLedgerStateMachine = HardLimitLedgerMachine.TestCase


@settings(max_examples=1, database=None, deadline=None)
@given(st.just(None))  # only to run the machine's rules inside a test (they record events)
def test_a_hard_guard_stale_on_the_next_local_day_is_refused_and_a_fresh_one_accepted(nothing: None) -> None:
    """Drawn afresh, the machine found a guard read before a settlement charged the NEXT local
    day (at INSTANTS[1], 00:00 in UTC+14) refused, as the product means it, while the oracle
    knew only the day's own counter. Each write checks the oracle (accepted == expected)."""
    machine = HardLimitLedgerMachine()
    try:
        machine.open_wallet(signup=10 * USD)
        machine.set_hard_limit(limit=USD)
        stale = machine.read_the_limit(amount=1)
        held = machine.write_the_reservation(machine.read_the_limit(amount=USD // 2))
        machine.settle(reservation_id=held, kind="exact", delta=0, instant=INSTANTS[1])
        assert machine.store.snapshot(ORG).spend.get(NEXT_DAY_KEY) == USD // 2

        fresh = machine.read_the_limit(amount=1)
        assert (stale.guard.next_spent_micros, fresh.guard.next_spent_micros) == (0, USD // 2)
        machine.write_the_reservation(stale)
        assert machine.store.snapshot(ORG).reserved == 0  # refused: nothing held
        assert machine.write_the_reservation(fresh) == fresh.reservation_id
        assert machine.store.snapshot(ORG).reserved == 1
        machine.the_hard_limit_is_never_exceeded()
    finally:
        machine.teardown()
