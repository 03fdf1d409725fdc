"""Prepaid ledger rules: reservations (two-phase transfers), settlement, period keys, invariants.

A reservation is a pending transfer out of an org's wallet: it moves credit from `available`
to `reserved` and is later resolved exactly once, either settled (the actual cost charged,
the rest released) or released in full (voided). Amounts are integer micro-dollars.

Settlement policy (the absorb rule): the customer never pays more than was reserved. When the
actual cost exceeds the reservation (actual tokens above the estimate), the charge is capped at
the reservation and the shortfall is recorded as `absorbed` (the service's loss); so the
balance never goes negative.

`Wallet` is an in-memory model of the same rules: the reference the property tests compare the
DynamoDB store against. `ledger_violations` checks the invariants of any wallet state, the
model's or one read back from DynamoDB.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal, TypedDict, get_args

from batchroute.domain.views import made_from
from batchroute.errors import Conflict, NotFound, PaymentRequired
from batchroute.money import Money, MoneyView, format_amount

# `rescue_overage`: the second hold of a batch whose deadline rescue costs more than its
# reservation covers (rescue mode allow_overage: docs/batches.md, "Deadline rescue").
# `regression`: a golden-set regression run's hold, with a deadline (`expires_at`) past which
# the sweeper releases it (docs/schedules.md, "A run that dies").
Purpose = Literal["batch", "chat_hold", "rescue_overage", "regression"]
ReservationStatus = Literal["pending", "settled", "released"]
# `refund`: credit taken back after the processor refunded a payment or lost its dispute
# (docs/payments.md, "Refunds and disputes"), naming the payment's processor reference;
# `refund_reversed`: credit a `refund` took, given back because the refund then failed at the
# processor (the money came back to the service), naming the same reference.
EntryType = Literal[
    "signup_credit",
    "grant",
    "purchase",
    "topup",
    "reservation",
    "charge",
    "release",
    "refund",
    "refund_reversed",
]
# Credits paid through the payment processor: a credit purchase (Checkout) and an auto top-up
# (an off-session charge). Each carries the processor's reference and is applied at most once
# per reference (docs/payments.md).
ProcessorCredit = Literal["purchase", "topup"]
PURPOSES: tuple[str, ...] = get_args(Purpose)

# Entries that add credit to the balance, and those that take it away. `reservation` and
# `release` move credit between available and reserved: the balance does not change.
CREDIT_ENTRIES = frozenset({"signup_credit", "grant", "purchase", "topup", "refund_reversed"})
PROCESSOR_CREDITS = frozenset({"purchase", "topup"})
DEBIT_ENTRIES = frozenset({"charge", "refund"})

DAILY_PREFIX = "D#"
MONTHLY_PREFIX = "M#"


class DuplicateReservation(Conflict):
    """A reservation with this id exists already (a second reserve for the same work)."""

    default_code = "duplicate_reservation"


class UnknownReservation(NotFound):
    default_code = "reservation_not_found"


class CreditItemRefused(Exception):
    """An extra item of a processor credit's transaction (`extra_items`) was refused by its own
    condition, so nothing was written: the credit did not happen (an auto top-up's settings
    moved since they were read: read them again and retry the whole credit)."""

    def __init__(self, index: int) -> None:
        super().__init__(f"extra item {index} of the credit refused")
        self.index = index


@dataclass(frozen=True)
class WalletState:
    """A wallet's figures: `reserved` is the org's in-flight credit (Σ pending reservations)
    and `available` = balance - reserved is what a new reservation may take."""

    balance: Money
    reserved: Money

    @property
    def available(self) -> Money:
        return self.balance - self.reserved


def insufficient_credit(
    available: Money, required: Money, *, code: str = "insufficient_credits"
) -> PaymentRequired:
    """The 402 for a reservation the available balance cannot cover."""
    return PaymentRequired(
        "The available credit balance does not cover this request.",
        code=code,
        details={"available": format_amount(available.amount), "required": format_amount(required.amount)},
    )


# -- periods -----------------------------------------------------------------------------------
def period_keys(at: datetime, timezone: str) -> dict[str, str]:
    """The daily and monthly spend-period keys of the instant `at`, by its local date in
    `timezone` (an IANA zone): {"daily": "D#2026-11-21", "monthly": "M#2026-11"}."""
    if at.tzinfo is None:
        raise ValueError("period keys need an aware datetime")
    local = at.astimezone(zoneinfo.ZoneInfo(timezone))
    return {"daily": f"{DAILY_PREFIX}{local:%Y-%m-%d}", "monthly": f"{MONTHLY_PREFIX}{local:%Y-%m}"}


# -- settlement --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Split:
    """How a resolved reservation divides: reserved = charged + released; `absorbed` is the
    cost above the reservation that the customer is not charged."""

    charged: int
    released: int
    absorbed: int


def split_settlement(reserved: int, cost: int) -> Split:
    if reserved <= 0:
        raise ValueError("a reservation is positive")
    if cost < 0:
        raise ValueError("a charge is never negative")
    charged = min(cost, reserved)
    return Split(charged=charged, released=reserved - charged, absorbed=cost - charged)


@dataclass(frozen=True)
class Reservation:
    reservation_id: str
    org_id: str
    purpose: Purpose
    ref: str
    amount: Money
    status: ReservationStatus
    created_at: str
    expires_at: str | None = None
    charged: Money = field(default_factory=Money.zero)
    released: Money = field(default_factory=Money.zero)
    absorbed: Money = field(default_factory=Money.zero)
    settled_at: str | None = None

    @property
    def pending(self) -> bool:
        return self.status == "pending"


@dataclass(frozen=True, kw_only=True, slots=True)
class ReservationTerms:
    """What a new reservation takes from the wallet and why: its id, the amount, what for
    (`purpose`, and `ref`: the batch, chat request or regression it funds), the spend
    period it opened in (informational) and, for a hold whose work cannot outlast a known
    time, its deadline `expires_at`: still pending after it, the work died and the sweeper
    releases the hold (docs/ledger.md, "Stale holds")."""

    reservation_id: str
    amount: Money
    purpose: Purpose
    ref: str
    period_key: str | None = None
    expires_at: str | None = None


class ReceiptCredits(TypedDict):
    """The credit fields of a billing receipt."""

    credit_reserved: MoneyView
    credit_charged: MoneyView
    credit_released: MoneyView
    settled_at: str


@dataclass(frozen=True)
class SettlementResult:
    """The outcome of resolving a reservation; `replayed` when it had been resolved before
    (a repeated message): then nothing was written and the stored outcome is returned."""

    reservation_id: str
    status: ReservationStatus
    reserved: Money
    charged: Money
    released: Money
    absorbed: Money
    settled_at: str
    replayed: bool = False

    @classmethod
    def of(cls, reservation: Reservation, *, replayed: bool) -> SettlementResult:
        if reservation.pending or reservation.settled_at is None:
            raise ValueError("the reservation is not resolved")
        return made_from(
            reservation,
            cls,
            reserved=reservation.amount,
            settled_at=reservation.settled_at,
            replayed=replayed,
        )

    def receipt_credits(self) -> ReceiptCredits:
        """The credit fields of a billing receipt."""
        return {
            "credit_reserved": self.reserved.to_api(),
            "credit_charged": self.charged.to_api(),
            "credit_released": self.released.to_api(),
            "settled_at": self.settled_at,
        }


def combined(results: Sequence[SettlementResult]) -> SettlementResult:
    """Several reservations of one piece of work settled together (a batch's reservation and
    the overage holds of its rescues) as one outcome: the first's id and time, the sums of
    their parts (so reserved = charged + released still), replayed only when all were."""

    def total(part: str) -> Money:
        return sum((getattr(r, part) for r in results), Money.zero())

    return replace(
        results[0],
        reserved=total("reserved"),
        charged=total("charged"),
        released=total("released"),
        absorbed=total("absorbed"),
        replayed=all(r.replayed for r in results),
    )


def resolve(reservation: Reservation, *, cost: int, at: str, void: bool) -> Reservation:
    """The reservation after settling (`cost` charged, capped) or voiding (nothing charged)."""
    if not reservation.pending:
        raise ValueError("a reservation resolves exactly once")
    split = split_settlement(reservation.amount.micros, 0 if void else cost)
    return replace(
        reservation,
        status="released" if void else "settled",
        charged=Money(split.charged),
        released=Money(split.released),
        absorbed=Money(split.absorbed),
        settled_at=at,
    )


# -- entries and invariants --------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    entry_type: EntryType
    amount: int
    reservation_id: str | None = None
    processor_ref: str | None = None  # purchase / topup: the Checkout Session or PaymentIntent id


def balance_effect(entry: Entry) -> int:
    if entry.entry_type in CREDIT_ENTRIES:
        return entry.amount
    if entry.entry_type in DEBIT_ENTRIES:
        return -entry.amount
    return 0


def reserved_effect(entry: Entry) -> int:
    if entry.entry_type == "reservation":
        return entry.amount
    if entry.entry_type in ("charge", "release"):
        return -entry.amount
    return 0


@dataclass(frozen=True)
class LedgerSnapshot:
    """Everything one wallet holds, read at once: what the invariants are checked on."""

    balance: int
    reserved: int
    available: int
    reservations: tuple[Reservation, ...] = ()
    entries: tuple[Entry, ...] = ()
    spend: Mapping[str, int] = field(default_factory=dict)

    def violations(self) -> list[str]:
        return ledger_violations(
            balance=self.balance,
            reserved=self.reserved,
            available=self.available,
            reservations=self.reservations,
            entries=self.entries,
            spend=self.spend,
        )


def ledger_violations(
    *,
    balance: int,
    reserved: int,
    available: int,
    reservations: Iterable[Reservation],
    entries: Iterable[Entry],
    spend: Mapping[str, int] | None = None,
) -> list[str]:
    """Every broken ledger invariant of one wallet, in words (empty when consistent)."""
    problems: list[str] = []
    reservations = list(reservations)
    entries = list(entries)
    if balance < 0:
        problems.append(f"balance {balance} is negative")
    if available != balance - reserved:
        problems.append(f"available {available} != balance {balance} - reserved {reserved}")
    if available < 0:
        problems.append(f"available {available} is negative")
    pending = sum(r.amount.micros for r in reservations if r.pending)
    if reserved != pending:
        problems.append(f"reserved {reserved} != sum of pending reservations {pending}")
    if (explained := sum(balance_effect(e) for e in entries)) != balance:
        problems.append(f"entries explain a balance of {explained}, not {balance}")
    if (explained := sum(reserved_effect(e) for e in entries)) != reserved:
        problems.append(f"entries explain {explained} reserved, not {reserved}")
    by_reservation: dict[str, list[Entry]] = {}
    for entry in entries:
        if entry.reservation_id is not None:
            by_reservation.setdefault(entry.reservation_id, []).append(entry)
    for r in reservations:
        problems.extend(_reservation_violations(r, by_reservation.get(r.reservation_id, [])))
    problems.extend(_processor_credit_violations(entries))
    if spend is not None:
        charged = sum(r.charged.micros for r in reservations)
        for prefix in (DAILY_PREFIX, MONTHLY_PREFIX):
            counted = sum(v for k, v in spend.items() if k.startswith(prefix))
            if counted != charged:
                problems.append(f"{prefix} spend counters hold {counted}, charges total {charged}")
    return problems


def _processor_credit_violations(entries: list[Entry]) -> list[str]:
    """Every processor credit names its reference, and no reference is credited twice; a
    `refund` takes back only from a credited reference, never more than it credited; a
    `refund_reversed` gives back only what refunds of that reference took."""
    problems = _refund_violations(entries)
    seen: set[str] = set()
    for e in entries:
        if e.entry_type not in PROCESSOR_CREDITS:
            continue
        if not e.processor_ref:
            problems.append(f"a {e.entry_type} credit without a processor reference")
        elif e.processor_ref in seen:
            problems.append(f"{e.processor_ref}: credited more than once")
        else:
            seen.add(e.processor_ref)
        if e.amount <= 0:
            problems.append(f"{e.processor_ref}: a {e.entry_type} credit that is not positive")
    return problems


def _refund_violations(entries: list[Entry]) -> list[str]:
    credited = {e.processor_ref: e.amount for e in entries if e.entry_type in PROCESSOR_CREDITS}
    taken: dict[str, int] = {}
    given_back: dict[str, int] = {}
    for e in entries:
        if e.entry_type not in ("refund", "refund_reversed"):
            continue
        if e.amount <= 0 or not e.processor_ref or e.processor_ref not in credited:
            return [f"a {e.entry_type} of {e.amount} that names no credited payment ({e.processor_ref})"]
        moved = taken if e.entry_type == "refund" else given_back
        moved[e.processor_ref] = moved.get(e.processor_ref, 0) + e.amount
    problems = [
        f"{ref}: {amount} given back, more than its refunds took ({taken.get(ref, 0)})"
        for ref, amount in given_back.items()
        if amount > taken.get(ref, 0)
    ]
    return problems + [
        f"{ref}: {amount - given_back.get(ref, 0)} taken back, more than its credit of {credited[ref]}"
        for ref, amount in taken.items()
        if amount - given_back.get(ref, 0) > credited[ref]
    ]


def _reservation_violations(r: Reservation, entries: list[Entry]) -> list[str]:
    rid, amount = r.reservation_id, r.amount.micros
    problems: list[str] = []
    totals: dict[str, int] = {}
    counts: dict[str, int] = {}
    for e in entries:
        totals[e.entry_type] = totals.get(e.entry_type, 0) + e.amount
        counts[e.entry_type] = counts.get(e.entry_type, 0) + 1
    if counts.get("reservation") != 1 or totals.get("reservation") != amount:
        problems.append(f"{rid}: not exactly one reservation entry of {amount}")
    if r.pending:
        if counts.get("charge") or counts.get("release") or r.settled_at is not None:
            problems.append(f"{rid}: pending but has a resolution")
        return problems
    if r.charged.micros + r.released.micros != amount:
        problems.append(f"{rid}: charged {r.charged.micros} + released {r.released.micros} != {amount}")
    if min(r.charged.micros, r.released.micros, r.absorbed.micros) < 0:
        problems.append(f"{rid}: a negative part")
    if r.absorbed.micros and r.released.micros:
        problems.append(f"{rid}: absorbed a shortfall yet released credit")
    if counts.get("charge", 0) > 1 or counts.get("release", 0) > 1:
        problems.append(f"{rid}: resolved more than once")
    if totals.get("charge", 0) != r.charged.micros or totals.get("release", 0) != r.released.micros:
        problems.append(f"{rid}: entries disagree with the recorded charge and release")
    return problems


# -- the in-memory model -----------------------------------------------------------------------
@dataclass
class Wallet:
    """The ledger rules of one org's wallet, in memory (the reference model)."""

    org_id: str = "org_model"
    balance: int = 0
    reserved: int = 0
    reservations: dict[str, Reservation] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)
    spend: dict[str, int] = field(default_factory=dict)

    @property
    def available(self) -> int:
        return self.balance - self.reserved

    def grant(self, amount: int, *, kind: EntryType = "grant") -> None:
        if amount <= 0:
            raise ValueError("a grant must be positive")
        self.balance += amount
        self.entries.append(Entry(kind, amount))

    def credit(self, processor_ref: str, amount: int, *, kind: ProcessorCredit) -> bool:
        """A processor credit (purchase / top-up), applied once per `processor_ref`; False
        (nothing changed) when that reference was credited before."""
        if amount <= 0:
            raise ValueError("a credit must be positive")
        if any(e.processor_ref == processor_ref for e in self.entries):
            return False
        self.balance += amount
        self.entries.append(Entry(kind, amount, processor_ref=processor_ref))
        return True

    def reserve(
        self, reservation_id: str, amount: int, *, purpose: Purpose = "batch", ref: str = "", at: str = ""
    ) -> Reservation:
        if amount <= 0:
            raise ValueError("a reservation must be positive")
        if reservation_id in self.reservations:
            raise DuplicateReservation(f"Reservation {reservation_id} exists already.")
        if self.available < amount:
            raise insufficient_credit(Money(self.available), Money(amount))
        reservation = Reservation(
            reservation_id=reservation_id,
            org_id=self.org_id,
            purpose=purpose,
            ref=ref,
            amount=Money(amount),
            status="pending",
            created_at=at,
        )
        self.reservations[reservation_id] = reservation
        self.reserved += amount
        self.entries.append(Entry("reservation", amount, reservation_id))
        return reservation

    def settle(
        self, reservation_id: str, cost: int, *, at: str = "", period_keys: Iterable[str] = ()
    ) -> SettlementResult:
        return self._resolve(reservation_id, cost=cost, at=at, void=False, period_keys=period_keys)

    def release(self, reservation_id: str, *, at: str = "") -> SettlementResult:
        return self._resolve(reservation_id, cost=0, at=at, void=True, period_keys=())

    def _resolve(
        self, reservation_id: str, *, cost: int, at: str, void: bool, period_keys: Iterable[str]
    ) -> SettlementResult:
        current = self.reservations.get(reservation_id)
        if current is None:
            raise UnknownReservation(f"No reservation {reservation_id}.")
        if not current.pending:
            return SettlementResult.of(current, replayed=True)
        resolved = resolve(current, cost=cost, at=at, void=void)
        self.reservations[reservation_id] = resolved
        self.balance -= resolved.charged.micros
        self.reserved -= resolved.amount.micros
        if resolved.charged.micros:
            self.entries.append(Entry("charge", resolved.charged.micros, reservation_id))
            for key in period_keys:
                self.spend[key] = self.spend.get(key, 0) + resolved.charged.micros
        if resolved.released.micros:
            self.entries.append(Entry("release", resolved.released.micros, reservation_id))
        return SettlementResult.of(resolved, replayed=False)

    def snapshot(self) -> LedgerSnapshot:
        return LedgerSnapshot(
            balance=self.balance,
            reserved=self.reserved,
            available=self.available,
            reservations=tuple(self.reservations.values()),
            entries=tuple(self.entries),
            spend=dict(self.spend),
        )

    def violations(self) -> list[str]:
        return self.snapshot().violations()
