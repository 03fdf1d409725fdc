"""The prepaid wallet of each org, its reservations and its append-only ledger.

Balances are integer micro-dollars. Every change to a wallet is written in the same
transaction as the ledger entry that explains it, so the entries always add up to the
balance. Items (all in the wallet's partition `WALLET#<org>`):

- `META`: the wallet: `balance_micros`, `reserved_micros` (Σ pending reservations: the org's
  in-flight credit) and `available_micros` = balance - reserved, kept on every wallet write
  because a DynamoDB condition cannot do arithmetic (reservations condition on it);
- `ENTRY#<ulid>`: ledger entries, never changed;
- `RES#<id>`: reservations; while pending they carry the sparse `gsi1` keys
  (`HOLD#OPEN` / `<created_at>#<org>#<id>`) so stale ones can be found; a hold with a
  deadline (`expires_at`: a golden-set regression run's) is indexed by it instead
  (`HOLD#DUE` / `<expires_at>#<org>#<id>`), so the overdue ones are read and no others;
- `SPEND#<period key>`: charged micros per spend period (`D#2026-11-21`, `M#2026-11`);
- `PAYMENT#<processor ref>`: the exactly-once marker of a processor credit (a Checkout
  Session or PaymentIntent id), written in the credit's own transaction (docs/payments.md);
  its `gsi1` keys (`CREDIT#PROCESSOR` / `<created_at>#<org>#<ref>`) let the payments
  reconciliation read every org's credits since a date in one Query.
  A refunded or disputed payment's record rides on it too (`refunded_cents`,
  `refund_failed_cents`, `disputed_cents`, `recovered_micros`, `unrecovered_micros`,
  `reversal_version`: `record_reversal`, docs/payments.md "Refunds and disputes").
- `USAGE#D#<yyyy-mm-dd>#<model>#<provider>`: usage counters (charged micros, tokens, requests)
  per local day, model and provider, moved in the charge's own transaction (docs/usage.md).

The rules (split of a settlement, the absorb policy, invariants) live in `domain/billing/ledger.py`;
see docs/ledger.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from botocore.exceptions import ClientError

from batchroute.adapters.dynamo.codec import from_item, to_value, update_request
from batchroute.adapters.dynamo.limit_checks import SpendingLimitChecks
from batchroute.adapters.dynamo.reads import day_range_query, index_before, pages, prefix_query, raw_items
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.adapters.dynamo.writes import (
    cancellation_codes,
    condition_failed_at,
    put_new,
)
from batchroute.domain.batches.record import FundingMoved
from batchroute.domain.billing.ledger import (
    CreditItemRefused,
    DuplicateReservation,
    Entry,
    LedgerSnapshot,
    Purpose,
    Reservation,
    ReservationTerms,
    SettlementResult,
    UnknownReservation,
    WalletState,
    insufficient_credit,
    resolve,
)
from batchroute.domain.billing.reconciliation import LedgerCredit
from batchroute.domain.billing.reversals import (
    CreditReversal,
    ReversalFigures,
    ReversalKind,
    ReversalStep,
    reversal_step,
)
from batchroute.domain.billing.usage import (
    USAGE_DAY_PREFIX,
    ReservationCharge,
    UsageCharge,
    UsageCounter,
    UsageFigures,
    usage_counters,
    usage_sort_key,
)
from batchroute.domain.stored import from_counters
from batchroute.errors import PermanentError, ServiceError, TransientError
from batchroute.ids import new_id
from batchroute.money import Money
from batchroute.transactions import TransactItem

OPEN_HOLDS = "HOLD#OPEN"
DUE_HOLDS = "HOLD#DUE"  # gsi1 partition of the pending holds with a deadline, by deadline
PROCESSOR_CREDITS = "CREDIT#PROCESSOR"  # gsi1 partition of the processor credits' markers
_RESERVATION_PREFIX = "RES#"
_ENTRY_PREFIX = "ENTRY#"
_SPEND_PREFIX = "SPEND#"
_PAYMENT_PREFIX = "PAYMENT#"
# A cancelled transaction is retried this many times when it collided with another one on the
# same item (DynamoDB's TransactionConflict); the retry re-reads, so it is safe.
_ATTEMPTS = 4
# Positions within the items of `reserve_items` (the caller may place them at an offset).
_WALLET_AT, _RESERVATION_AT = 0, 1


def _pk(org_id: str) -> str:
    return f"WALLET#{org_id}"


def _key(org_id: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": _pk(org_id)}, "sk": {"S": sk}}


def _wallet_key(org_id: str) -> dict[str, Any]:
    return _key(org_id, "META")


def _credit_marker(credit: LedgerCredit) -> dict[str, Any]:
    """`PAYMENT#<ref>`: a processor credit, applied once, indexed by time for the reconciliation."""
    org_id, ref = credit.org_id, credit.processor_ref
    return {
        "pk": _pk(org_id),
        "sk": _PAYMENT_PREFIX + ref,
        "kind": "processor_credit",
        "org_id": org_id,
        "processor_ref": ref,
        "entry_type": credit.kind,
        "amount_micros": credit.amount.micros,
        "currency": credit.amount.currency,
        "created_at": credit.at,
        # The reconciliation's index of every processor credit by time (docs/payments.md).
        "gsi1pk": PROCESSOR_CREDITS,
        "gsi1sk": f"{credit.at}#{org_id}#{ref}",
    }


def is_transaction_conflict(exc: ClientError) -> bool:
    return "TransactionConflict" in cancellation_codes(exc)


def reservation_failure(codes: Sequence[str], *, offset: int = 0) -> Literal["wallet", "reservation"] | None:
    """Which condition of `reserve_items` (placed at `offset` in a transaction) refused it:
    the wallet's (the available balance, or a hard limit's room) or the reservation's (the
    id is taken); None when neither did. A taken id wins: a retry of a reservation already
    made is a duplicate even when the wallet it emptied could not cover it a second time."""

    if condition_failed_at(codes, offset + _RESERVATION_AT):
        return "reservation"
    if condition_failed_at(codes, offset + _WALLET_AT):
        return "wallet"
    return None


class LedgerStore(DynamoStore):
    # -- wallet --------------------------------------------------------------------------------
    def open_wallet_items(self, org_id: str, *, signup_credit: Money, at: str) -> list[TransactItem]:
        """Items that open an org's wallet (with its signup credit), for the account transaction."""
        wallet = {
            "pk": _pk(org_id),
            "sk": "META",
            "kind": "wallet",
            "org_id": org_id,
            "currency": signup_credit.currency,
            "balance_micros": signup_credit.micros,
            "reserved_micros": 0,
            "available_micros": signup_credit.micros,
            "created_at": at,
        }
        items: list[TransactItem] = [self._put(wallet)]
        if signup_credit.micros > 0:
            items.append(
                self._entry_item(
                    org_id,
                    kind="signup_credit",
                    amount=signup_credit,
                    at=at,
                    memo="signup credit",
                    actor="system",
                )
            )
        return items

    def grant(self, org_id: str, amount: Money, *, at: str, memo: str, actor: str) -> Money:
        """Add credits to an existing wallet with a ledger entry; returns the new spendable balance."""
        if amount.micros <= 0:
            raise ValueError("a grant must be positive")
        self.dynamodb.transact_write_items(
            TransactItems=[
                self._wallet_add(org_id, amount),
                self._entry_item(org_id, kind="grant", amount=amount, at=at, memo=memo, actor=actor),
            ]
        )
        return self.balance(org_id)

    def credit(self, credit: LedgerCredit, *, memo: str, extra_items: Iterable[TransactItem] = ()) -> bool:
        """Credit money paid through the payment processor (a purchase or an auto top-up)
        EXACTLY ONCE per `processor_ref`: the marker `PAYMENT#<ref>` (conditional on not
        existing), the wallet and the ledger entry are one transaction, with `extra_items`
        (the top-up attempt's outcome and the auto top-up settings). Returns False, writing
        nothing, when `processor_ref` was credited before (a repeated or reordered processor
        event), whatever the extra items' conditions say; raises CreditItemRefused, writing
        nothing, when an extra item's own condition refused it."""
        org_id, amount, at = credit.org_id, credit.amount, credit.at
        if amount.micros <= 0:
            raise ValueError("a credit must be positive")
        extra = tuple(extra_items)
        items = [
            self._put(_credit_marker(credit)),
            self._wallet_add(org_id, amount),
            self._entry_item(
                org_id,
                kind=credit.kind,
                amount=amount,
                at=at,
                memo=memo,
                actor="system",
                processor_ref=credit.processor_ref,
            ),
            *extra,
        ]
        extra_at = len(items) - len(extra)
        for _ in range(_ATTEMPTS):
            try:
                self.dynamodb.transact_write_items(TransactItems=items)
            except ClientError as exc:
                codes = cancellation_codes(exc)
                if condition_failed_at(codes, 0):
                    return False  # this processor event was applied already
                if is_transaction_conflict(exc):
                    continue
                refused = next(
                    (i for i in range(len(extra)) if condition_failed_at(codes, extra_at + i)), None
                )
                if refused is not None:
                    raise CreditItemRefused(refused) from exc
                raise
            return True
        raise TransientError(f"crediting {credit.processor_ref} kept colliding with other wallet writes")

    def credited(self, org_id: str, processor_ref: str) -> bool:
        """Whether the processor credit `processor_ref` was applied."""
        return self.item_at(_key(org_id, _PAYMENT_PREFIX + processor_ref)) is not None

    def credit_reversal(self, org_id: str, processor_ref: str) -> CreditReversal | None:
        """What was credited under `processor_ref` and taken back since; None when it was
        never credited to this org."""
        return self.read_at(_key(org_id, _PAYMENT_PREFIX + processor_ref), _reversal_of)

    def record_reversal(
        self, org_id: str, processor_ref: str, figures: ReversalFigures, *, at: str
    ) -> ReversalStep | None:
        """Record the processor's confirmed refunded (or lost in dispute) cents against the
        credit `processor_ref`, ONCE: the marker's record (conditional on its version), the
        wallet debited by what is still available (never below zero) and the `refund` entry
        are one transaction; the rest is recorded as not recovered. A refunded figure below
        the recorded one (`failed_cents`, the processor's failed refunds, says a refund failed)
        is recorded the same way, ONCE: the marker, and what is given back
        (`refund_failed_step`) added to the wallet with a `refund_reversed` entry. None,
        writing nothing, when the credit does not exist or already records those figures
        (docs/payments.md)."""
        for _ in range(_ATTEMPTS):
            current = self.credit_reversal(org_id, processor_ref)
            if current is None:
                return None
            step = reversal_step(current, figures, available_micros=self.state(org_id).available.micros)
            if step is None:
                return None
            items = self._reversal_items(org_id, processor_ref, current, step, kind=figures.kind, at=at)
            try:
                self.dynamodb.transact_write_items(TransactItems=items)
            except ClientError as exc:
                codes = cancellation_codes(exc)
                if condition_failed_at(codes, 0) or condition_failed_at(codes, 1):
                    continue  # recorded meanwhile, or the wallet moved: read both again
                if is_transaction_conflict(exc):
                    continue
                raise
            return step
        raise TransientError(f"recording the reversal of {processor_ref} kept colliding")

    def _reversal_items(
        self,
        org_id: str,
        ref: str,
        current: CreditReversal,
        step: ReversalStep,
        *,
        kind: ReversalKind,
        at: str,
    ) -> list[TransactItem]:
        after = step.after
        first = current.version == 0
        items = [
            self._update(
                _key(org_id, _PAYMENT_PREFIX + ref),
                "SET refunded_cents = :refunded, refund_failed_cents = :failed, "
                "disputed_cents = :disputed, recovered_micros = :recovered, "
                "unrecovered_micros = :unrecovered, reversal_version = :version, reversed_at = :at",
                condition="attribute_exists(pk) AND "
                + ("attribute_not_exists(reversal_version)" if first else "reversal_version = :seen"),
                values={
                    ":refunded": after.refunded_cents,
                    ":failed": after.refund_failed_cents,
                    ":disputed": after.disputed_cents,
                    ":recovered": after.recovered_micros,
                    ":unrecovered": after.unrecovered_micros,
                    ":version": after.version,
                    ":at": at,
                    **({} if first else {":seen": current.version}),
                },
            )
        ]
        return items + self._reversal_money_items(org_id, ref, step, kind=kind, at=at)

    def _reversal_money_items(
        self, org_id: str, ref: str, step: ReversalStep, *, kind: ReversalKind, at: str
    ) -> list[TransactItem]:
        """The wallet write and its entry, after the marker (position 1, then 2): a debit
        (`refund`, never below what is available), or credit given back (`refund_reversed`, a
        refund that failed); nothing when the step moves no money."""
        if step.credit_back_micros:
            back = Money(step.credit_back_micros)
            return [
                self._wallet_add(org_id, back),
                self._entry_item(
                    org_id,
                    kind="refund_reversed",
                    amount=back,
                    at=at,
                    memo=f"refund of {ref} failed: credit given back",
                    actor="system",
                    processor_ref=ref,
                ),
            ]
        debit = step.debit_micros
        if not debit:
            return []
        return [
            self._update(
                _wallet_key(org_id),
                "SET balance_micros = balance_micros - :debit, available_micros = available_micros - :debit",
                condition="available_micros >= :debit AND balance_micros >= :debit",
                values={":debit": debit},
            ),
            self._entry_item(
                org_id,
                kind="refund",
                amount=Money(debit),
                at=at,
                memo=f"{kind} of {ref}",
                actor="system",
                processor_ref=ref,
                unrecovered_micros=step.unrecovered_micros or None,
            ),
        ]

    def processor_credits_since(self, since: str) -> list[LedgerCredit]:
        """Every processor credit (purchase, auto top-up) made at or after `since` (ISO-8601),
        in every org: ONE Query of the `gsi1` partition of their markers, paged past 1 MB
        (docs/payments.md, "Reconciliation"). Eventually consistent, like any index read."""
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :p AND gsi1sk >= :since",
            "ExpressionAttributeValues": {":p": to_value(PROCESSOR_CREDITS), ":since": to_value(since)},
        }
        return [_processor_credit(item) for item in self.query_all(kwargs)]

    def index_processor_credits(self) -> int:
        """Give the reconciliation's `gsi1` keys to processor credit markers written before they
        existed: a one-off migration, a paginated Scan of the whole table (filtered to markers
        without the keys), one conditional update each. Returns how many it indexed; a second
        run finds none."""
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "FilterExpression": "#kind = :kind AND attribute_not_exists(gsi1pk)",
            "ExpressionAttributeNames": {"#kind": "kind"},
            "ExpressionAttributeValues": {":kind": to_value("processor_credit")},
        }
        indexed = 0
        for item in (from_item(i) for i in raw_items(self.dynamodb.scan, kwargs)):
            sort_key = f"{item['created_at']}#{item['org_id']}#{item['processor_ref']}"
            indexed += self.update_where(  # False: indexed meanwhile by another run
                _key(str(item["org_id"]), str(item["sk"])),
                "SET gsi1pk = :p, gsi1sk = :s, currency = if_not_exists(currency, :usd)",
                condition="attribute_exists(pk) AND attribute_not_exists(gsi1pk)",
                values={":p": PROCESSOR_CREDITS, ":s": sort_key, ":usd": "usd"},
            )
        return indexed

    def balance(self, org_id: str) -> Money:
        """Spendable credit: the balance less what is reserved for running work."""
        return self.state(org_id).available

    def state(self, org_id: str) -> WalletState:
        """Balance and reserved (in-flight) credit; zero for an org without a wallet."""
        wallet = self.wallet(org_id)
        if wallet is None:
            return WalletState(balance=Money.zero(), reserved=Money.zero())
        return WalletState(
            balance=Money(int(wallet["balance_micros"])),
            reserved=Money(int(wallet.get("reserved_micros", 0))),
        )

    def wallet(self, org_id: str) -> dict[str, Any] | None:
        return self.item_at(_wallet_key(org_id))

    def entries(self, org_id: str, limit: int | None = 100) -> list[dict[str, Any]]:
        """Ledger entries newest first; `limit=None` reads them all."""
        return self._partition(org_id, _ENTRY_PREFIX, newest_first=True, limit=limit)

    # -- reservations --------------------------------------------------------------------------
    def reserve_items(
        self, org_id: str, terms: ReservationTerms, *, at: str, reserved_at_most: int | None = None
    ) -> list[TransactItem]:
        """The items of a reservation, for ONE TransactWriteItems with the caller's own items
        (batch create adds the batch and its idempotency record): take `amount` from the
        available balance (refused by the condition when it does not cover it), write the
        pending reservation (refused if the id exists) and its ledger entry. Keep the three
        together and in this order; `reservation_refusal(exc, offset=...)` reads a refusal.
        `reserved_at_most` also refuses the wallet item when the org's in-flight credit before
        this reservation exceeds it (a hard spending limit checked in the same write:
        docs/chat.md). A hold with a deadline (`terms.expires_at`) keeps it and is indexed by
        it (`due_holds`), others by their creation (`open_holds`)."""
        amount, reservation_id = terms.amount, terms.reservation_id
        if amount.micros <= 0:
            raise ValueError("a reservation must be positive")
        index, since = (DUE_HOLDS, terms.expires_at) if terms.expires_at else (OPEN_HOLDS, at)
        reservation = {
            "pk": _pk(org_id),
            "sk": _RESERVATION_PREFIX + reservation_id,
            "kind": "reservation",
            "reservation_id": reservation_id,
            "org_id": org_id,
            "status": "pending",
            "purpose": terms.purpose,
            "ref": terms.ref,
            "amount_micros": amount.micros,
            "currency": amount.currency,
            "created_at": at,
            "period_key": terms.period_key,
            "expires_at": terms.expires_at,
            "gsi1pk": index,
            "gsi1sk": f"{since}#{org_id}#{reservation_id}",
        }
        return [
            self._take_available(org_id, amount, reserved_at_most),
            self._put(reservation),
            self._entry_item(
                org_id,
                kind="reservation",
                amount=amount,
                at=at,
                memo=f"{terms.purpose} {terms.ref}",
                actor="system",
                reservation_id=reservation_id,
                ref=terms.ref,
            ),
        ]

    def _take_available(self, org_id: str, amount: Money, reserved_at_most: int | None) -> TransactItem:
        """The wallet's side of a reservation: refused when the available balance does not
        cover `amount` (or the in-flight credit exceeds `reserved_at_most`)."""
        condition = (
            "(available_micros >= :amount "
            "OR (attribute_not_exists(available_micros) AND balance_micros >= :amount))"
        )
        wallet_values: dict[str, Any] = {":amount": amount.micros}
        if reserved_at_most is not None:
            condition += " AND reserved_micros <= :reserved_cap"
            wallet_values[":reserved_cap"] = reserved_at_most
        return self._update(
            _wallet_key(org_id),
            "SET reserved_micros = reserved_micros + :amount, "
            "available_micros = if_not_exists(available_micros, balance_micros) - :amount",
            condition=condition,
            values=wallet_values,
        )

    def reservation_refusal(
        self,
        exc: ClientError,
        org_id: str,
        amount: Money,
        *,
        offset: int = 0,
        code: str = "insufficient_credits",
    ) -> ServiceError | None:
        """What a cancelled transaction holding `reserve_items` at `offset` means for the
        reservation: a 402 (`code`, details {available, required}) when the wallet could not
        cover it, a DuplicateReservation when the id was taken, None when the refusal came
        from elsewhere (the caller's own items, or a TransactionConflict to retry)."""
        refused = reservation_failure(cancellation_codes(exc), offset=offset)
        if refused == "wallet":
            return insufficient_credit(self.balance(org_id), amount, code=code)
        if refused == "reservation":
            return DuplicateReservation("A reservation with this id exists already.")
        return None

    def reserve(
        self, org_id: str, terms: ReservationTerms, *, at: str, code: str | None = None
    ) -> Reservation:
        """Reserve on its own (chat holds). Raises PaymentRequired (`insufficient_funds` for a
        chat hold, else `insufficient_credits`, unless `code` is given) when the available
        balance does not cover `amount`; DuplicateReservation for a known id."""
        items = self.reserve_items(org_id, terms, at=at)
        refusal_code = code or (
            "insufficient_funds" if terms.purpose == "chat_hold" else "insufficient_credits"
        )
        for _ in range(_ATTEMPTS):
            try:
                self.dynamodb.transact_write_items(TransactItems=items)
            except ClientError as exc:
                refusal = self.reservation_refusal(exc, org_id, terms.amount, code=refusal_code)
                if refusal is not None:
                    raise refusal from exc
                if is_transaction_conflict(exc):
                    continue
                raise
            return Reservation(
                reservation_id=terms.reservation_id,
                org_id=org_id,
                purpose=terms.purpose,
                ref=terms.ref,
                amount=terms.amount,
                status="pending",
                created_at=at,
            )
        raise TransientError(f"reservation {terms.reservation_id} kept colliding with other wallet writes")

    def reserve_guarded(self, reservation: list[TransactItem], limit_checks: list[TransactItem]) -> None:
        """A reservation on its own under the spending limit (a golden-set regression run's
        hold): `reserve_items(..., reserved_at_most=guard.reserved_cap(amount))` and the
        guard's ConditionChecks (`SpendingLimitChecks.items`) in ONE TransactWriteItems.
        Raises FundingMoved when the wallet (its balance or the limit's room) or a limit
        check refused it, or another write collided (decide again on fresh reads), and
        DuplicateReservation when the id is taken."""
        try:
            self.dynamodb.transact_write_items(TransactItems=[*reservation, *limit_checks])
        except ClientError as exc:
            codes = cancellation_codes(exc)
            refused = reservation_failure(codes)
            if refused == "reservation":
                raise DuplicateReservation("A reservation with this id exists already.") from exc
            if codes and (
                refused == "wallet"
                or SpendingLimitChecks.moved(codes, len(reservation))
                or is_transaction_conflict(exc)
            ):
                raise FundingMoved("the funds, the limit's room, its spend or its controls moved") from exc
            raise

    def reservation(self, org_id: str, reservation_id: str) -> Reservation | None:
        return self.read_at(_key(org_id, _RESERVATION_PREFIX + reservation_id), _reservation)

    def reservations(self, org_id: str) -> list[Reservation]:
        """All of an org's reservations (audits and tests)."""
        return [_reservation(i) for i in self._partition(org_id, _RESERVATION_PREFIX, limit=None)]

    def open_holds(
        self, older_than_iso: str, *, purpose: Purpose | None = None, limit: int = 100
    ) -> list[Reservation]:
        """Pending reservations (without a deadline) created before `older_than_iso`, oldest
        first (sparse gsi1), for the sweeper to resolve stale chat holds; `purpose` narrows to
        one kind."""
        return self._holds_before(OPEN_HOLDS, older_than_iso, purpose, limit)

    def due_holds(
        self, now_iso: str, *, purpose: Purpose | None = None, limit: int = 100
    ) -> list[Reservation]:
        """Pending reservations whose deadline (`expires_at`) passed before `now_iso`, the
        earliest first (sparse gsi1 `HOLD#DUE`): their work died, for the sweeper to release;
        `purpose` narrows to one kind."""
        return self._holds_before(DUE_HOLDS, now_iso, purpose, limit)

    def _holds_before(
        self, partition: str, before: str, purpose: Purpose | None, limit: int
    ) -> list[Reservation]:
        kwargs = index_before(self.table_name, "gsi1", partition, before)
        if purpose is not None:
            kwargs["FilterExpression"] = "purpose = :purpose"
            kwargs["ExpressionAttributeValues"][":purpose"] = to_value(purpose)
        found: list[Reservation] = []
        if limit <= 0:
            return found
        for response in pages(self.dynamodb.query, {**kwargs, "Limit": limit}):
            found.extend(_reservation(from_item(i)) for i in response.get("Items", []))
            if len(found) >= limit:
                break
        return found[:limit]

    # -- settlement ----------------------------------------------------------------------------
    def settle(
        self, org_id: str, settled: ReservationCharge, *, extra_items: Iterable[TransactItem] = ()
    ) -> SettlementResult:
        """Resolve a pending reservation exactly once: charge the actual cost (capped at the
        reservation; the rest of the cost is absorbed), release the remainder, and add the
        charge to the spend counters `period_keys` (the daily and monthly keys of `at` in the
        billing controls' zone: `domain.ledger.period_keys(...).values()`). A repeat returns
        the stored outcome (`replayed=True`) and writes nothing. `extra_items` ride in the same
        transaction (a chat request record's outcome), so they are written exactly once too.
        `usage` (the charge's day, models, providers and tokens) moves the usage counters in
        the same transaction, with the charged amount apportioned to its lines."""
        if settled.charge.micros < 0:
            raise ValueError("a charge is never negative")
        return self._resolve(
            org_id,
            settled.reservation_id,
            cost=settled.charge,
            at=settled.at,
            memo=settled.memo,
            keys=settled.period_keys,
            extra=tuple(extra_items),
            usage=settled.usage,
        )

    def release(
        self,
        org_id: str,
        reservation_id: str,
        *,
        at: str,
        memo: str = "",
        extra_items: Iterable[TransactItem] = (),
    ) -> SettlementResult:
        """Void a pending reservation: nothing charged, all of it released (exactly once)."""
        return self._resolve(
            org_id, reservation_id, cost=None, at=at, memo=memo, keys=(), extra=tuple(extra_items)
        )

    def _resolve(
        self,
        org_id: str,
        reservation_id: str,
        *,
        cost: Money | None,
        at: str,
        memo: str,
        keys: tuple[str, ...],
        extra: tuple[TransactItem, ...] = (),
        usage: UsageCharge | None = None,
    ) -> SettlementResult:
        for _ in range(_ATTEMPTS):
            current = self.reservation(org_id, reservation_id)
            if current is None:
                raise UnknownReservation(f"No reservation {reservation_id} in the wallet of {org_id}.")
            if not current.pending:
                return SettlementResult.of(current, replayed=True)
            resolved = resolve(current, cost=0 if cost is None else cost.micros, at=at, void=cost is None)
            try:
                self.dynamodb.transact_write_items(
                    TransactItems=[
                        *self._resolution_items(resolved, memo=memo, keys=keys, usage=usage),
                        *extra,
                    ]
                )
            except ClientError as exc:
                codes = cancellation_codes(exc)
                if condition_failed_at(codes, 0):
                    continue  # resolved meanwhile by a repeated message: read its outcome
                if condition_failed_at(codes, 1):
                    raise PermanentError(
                        f"wallet of {org_id} cannot absorb the resolution of {reservation_id}"
                    ) from exc
                if is_transaction_conflict(exc):
                    continue
                raise
            return SettlementResult.of(resolved, replayed=False)
        raise TransientError(f"resolving {reservation_id} kept colliding with other wallet writes")

    def _resolution_items(
        self, r: Reservation, *, memo: str, keys: tuple[str, ...], usage: UsageCharge | None = None
    ) -> list[TransactItem]:
        assert r.settled_at is not None
        at, charged, released = r.settled_at, r.charged.micros, r.released.micros
        items = [
            # First: the exactly-once guard (the reservation must still be pending).
            self._update(
                _key(r.org_id, _RESERVATION_PREFIX + r.reservation_id),
                "SET #status = :status, charged_micros = :charged, released_micros = :released, "
                "absorbed_micros = :absorbed, settled_at = :at, settle_memo = :memo REMOVE gsi1pk, gsi1sk",
                condition="#status = :pending AND amount_micros = :amount",
                names={"#status": "status"},
                values={
                    ":status": r.status,
                    ":pending": "pending",
                    ":charged": charged,
                    ":released": released,
                    ":absorbed": r.absorbed.micros,
                    ":at": at,
                    ":memo": memo,
                    ":amount": r.amount.micros,
                },
            ),
            # Second: the wallet; its guards hold by construction and keep the balance >= 0.
            self._update(
                _wallet_key(r.org_id),
                "SET balance_micros = balance_micros - :charged, "
                "reserved_micros = reserved_micros - :amount, "
                "available_micros = available_micros + :released",
                condition="reserved_micros >= :amount AND balance_micros >= :charged",
                values={":charged": charged, ":amount": r.amount.micros, ":released": released},
            ),
        ]
        common = {"at": at, "actor": "system", "reservation_id": r.reservation_id, "ref": r.ref}
        if charged:
            items.append(
                self._entry_item(
                    r.org_id,
                    kind="charge",
                    amount=r.charged,
                    memo=memo or f"charge {r.ref}",
                    absorbed_micros=r.absorbed.micros or None,
                    **common,
                )
            )
            items.extend(self._spend_item(r.org_id, key, charged, at) for key in dict.fromkeys(keys))
        if released:
            items.append(
                self._entry_item(
                    r.org_id, kind="release", amount=r.released, memo=f"release {r.ref}", **common
                )
            )
        if usage is not None and r.status == "settled":
            items.extend(self._usage_item(r.org_id, c, at) for c in usage_counters(usage, charged))
        return items

    # -- period spend --------------------------------------------------------------------------
    def period_spend(self, org_id: str, period_key: str) -> Money:
        """What was charged in the spend period `period_key` (e.g. `D#2026-11-21`)."""
        item = self.item_at(_key(org_id, _SPEND_PREFIX + period_key)) or {}
        return Money(int(item.get("spent_micros", 0)))

    def spend_counters(self, org_id: str) -> dict[str, Money]:
        return {
            i["period_key"]: Money(int(i["spent_micros"]))
            for i in self._partition(org_id, _SPEND_PREFIX, limit=None)
        }

    def _spend_item(self, org_id: str, period_key: str, micros: int, at: str) -> TransactItem:
        return self._update(
            _key(org_id, _SPEND_PREFIX + period_key),
            "ADD spent_micros :micros "
            "SET #kind = :kind, org_id = :org, period_key = :period, updated_at = :at",
            names={"#kind": "kind"},
            values={
                ":micros": micros,
                ":kind": "period_spend",
                ":org": org_id,
                ":period": period_key,
                ":at": at,
            },
        )

    # -- usage counters ------------------------------------------------------------------------
    def usage_between(self, org_id: str, first_day: str, last_day: str) -> list[UsageCounter]:
        """The usage counters of the local days `first_day`..`last_day` (yyyy-mm-dd, inclusive):
        ONE Query over a contiguous key range (paged only past 1 MB), whatever the number of
        ledger entries."""
        request = day_range_query(
            self.table_name, _pk(org_id), USAGE_DAY_PREFIX, first_day, last_day, ConsistentRead=True
        )
        return [_usage_counter(item) for item in self.query_all(request)]

    def _usage_item(self, org_id: str, counter: UsageCounter, at: str) -> TransactItem:
        f = counter.figures
        return self._update(
            _key(org_id, usage_sort_key(counter.day, counter.model, counter.provider)),
            "ADD cost_micros :cost, input_tokens :input, output_tokens :output, "
            "cached_input_tokens :cached, cache_write_input_tokens :written, "
            "tool_cost_micros :tools, batch_items :items, chat_requests :chats "
            "SET #kind = :kind, org_id = :org, #day = :day, #model = :model, #provider = :provider, "
            "updated_at = :at",
            names={"#kind": "kind", "#day": "day", "#model": "model", "#provider": "provider"},
            values={
                ":cost": f.cost_micros,
                ":input": f.input_tokens,
                ":output": f.output_tokens,
                ":cached": f.cached_input_tokens,
                ":written": f.cache_write_input_tokens,
                ":tools": f.tool_cost_micros,
                ":items": f.batch_items,
                ":chats": f.chat_requests,
                ":kind": "usage_counter",
                ":org": org_id,
                ":day": counter.day,
                ":model": counter.model,
                ":provider": counter.provider,
                ":at": at,
            },
        )

    # -- audit ---------------------------------------------------------------------------------
    def snapshot(self, org_id: str) -> LedgerSnapshot:
        """The wallet, its reservations, entries and spend counters in one partition read
        (audits and tests: it reads the whole history)."""
        items = self._partition(org_id, "", limit=None)
        wallet = next((i for i in items if i["sk"] == "META"), {})
        balance = int(wallet.get("balance_micros", 0))
        return LedgerSnapshot(
            balance=balance,
            reserved=int(wallet.get("reserved_micros", 0)),
            available=int(wallet.get("available_micros", balance)),
            reservations=tuple(_reservation(i) for i in items if i["sk"].startswith(_RESERVATION_PREFIX)),
            entries=tuple(
                Entry(
                    i["entry_type"], int(i["amount_micros"]), i.get("reservation_id"), i.get("processor_ref")
                )
                for i in items
                if i["sk"].startswith(_ENTRY_PREFIX)
            ),
            spend={
                i["period_key"]: int(i["spent_micros"]) for i in items if i["sk"].startswith(_SPEND_PREFIX)
            },
        )

    def violations(self, org_id: str) -> list[str]:
        """Every broken ledger invariant of the org's wallet (reads its whole partition)."""
        return self.snapshot(org_id).violations()

    # -- helpers -------------------------------------------------------------------------------
    def _partition(
        self, org_id: str, prefix: str, *, newest_first: bool = False, limit: int | None
    ) -> list[dict[str, Any]]:
        kwargs = prefix_query(
            self.table_name, _pk(org_id), prefix, ScanIndexForward=not newest_first, ConsistentRead=True
        )
        if prefix == "":
            kwargs["KeyConditionExpression"] = "pk = :pk"
            del kwargs["ExpressionAttributeValues"][":prefix"]
        found: list[dict[str, Any]] = []
        while limit is None or len(found) < limit:
            page = {"Limit": limit - len(found)} if limit is not None else {}
            response = self.dynamodb.query(**kwargs, **page)
            found.extend(from_item(i) for i in response.get("Items", []))
            if "LastEvaluatedKey" not in response:
                break
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return found

    def _entry_item(
        self,
        org_id: str,
        *,
        kind: str,
        amount: Money,
        at: str,
        memo: str,
        actor: str | None,
        **extra: Any,
    ) -> TransactItem:
        entry_id = new_id("evt")
        return self._put(
            {
                "pk": _pk(org_id),
                "sk": _ENTRY_PREFIX + entry_id,
                "kind": "ledger_entry",
                "entry_id": entry_id,
                "entry_type": kind,
                "amount_micros": amount.micros,
                "currency": amount.currency,
                "memo": memo,
                "actor": actor,
                "created_at": at,
                **extra,
            }
        )

    def _put(self, values: dict[str, Any]) -> TransactItem:
        return put_new(self.table_name, values)

    def _wallet_add(self, org_id: str, amount: Money) -> TransactItem:
        """`amount` added to an existing wallet's balance and to what it may spend. (A wallet
        opened before `available_micros` existed had nothing reserved, reservations came with
        it: its available is its balance, `if_not_exists`.)"""
        return self._update(
            _wallet_key(org_id),
            "SET balance_micros = balance_micros + :amount, "
            "available_micros = if_not_exists(available_micros, balance_micros) + :amount",
            condition="attribute_exists(pk)",
            values={":amount": amount.micros},
        )

    def _update(
        self,
        key: dict[str, Any],
        expression: str,
        *,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        values: dict[str, Any],
    ) -> TransactItem:
        return {
            "Update": update_request(
                self.table_name, key, expression, condition=condition, names=names, values=values
            )
        }


def _usage_counter(item: dict[str, Any]) -> UsageCounter:
    return UsageCounter(
        day=str(item["day"]),
        model=str(item["model"]),
        provider=str(item["provider"]),
        figures=from_counters(UsageFigures, item),
    )


def _processor_credit(item: dict[str, Any]) -> LedgerCredit:
    return LedgerCredit(
        org_id=str(item["org_id"]),
        processor_ref=str(item["processor_ref"]),
        kind=item["entry_type"],
        amount=Money(int(item["amount_micros"]), str(item.get("currency", "usd"))),
        at=str(item["created_at"]),
        reversed_cents=int(item.get("refunded_cents", 0)) + int(item.get("disputed_cents", 0)),
        unrecovered_micros=int(item.get("unrecovered_micros", 0)),
    )


def _reversal_of(marker: dict[str, Any]) -> CreditReversal:
    return CreditReversal(
        credited_micros=int(marker["amount_micros"]),
        refunded_cents=int(marker.get("refunded_cents", 0)),
        disputed_cents=int(marker.get("disputed_cents", 0)),
        recovered_micros=int(marker.get("recovered_micros", 0)),
        unrecovered_micros=int(marker.get("unrecovered_micros", 0)),
        version=int(marker.get("reversal_version", 0)),
        refund_failed_cents=int(marker.get("refund_failed_cents", 0)),
    )


def _reservation(item: dict[str, Any]) -> Reservation:
    def money(name: str) -> Money:
        return Money(int(item.get(name, 0)), item.get("currency", "usd"))

    return Reservation(
        reservation_id=item["reservation_id"],
        org_id=item["org_id"],
        purpose=item["purpose"],
        ref=item["ref"],
        amount=money("amount_micros"),
        status=item["status"],
        created_at=item["created_at"],
        expires_at=item.get("expires_at"),
        charged=money("charged_micros"),
        released=money("released_micros"),
        absorbed=money("absorbed_micros"),
        settled_at=item.get("settled_at"),
    )
