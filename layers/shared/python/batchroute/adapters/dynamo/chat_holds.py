"""Chat holds in DynamoDB: the one write before a direct request's first byte, and its end.

`open` is ONE TransactWriteItems over three tables:

- ledger: the hold (a `chat_hold` reservation: wallet update conditioned on the available
  balance, and on a hard limit's room; the reservation; its entry: `LedgerStore.reserve_items`);
- batches: the request's record, `BATCH#<id>`/`META` with `source = chat_direct` (what makes
  the batch behind a direct request visible and not cancellable);
- controls: a ConditionCheck on the billing controls: either "no hard limit is active", or
  "still the version the limit was read at"; with a hard limit also a ConditionCheck that
  the period's spend counter has not grown past what was read.

- controls, when the request was planned under the org's route policy (`policy_version`): a
  ConditionCheck that the policy is still that version (0: none stored), so a cached copy
  never routes a request after the policy changed (`policy_changed`: re-read and re-plan).

- identity, when the caller's API key came from the process's copy (`key_hash`): a
  ConditionCheck that the key still exists, unrevoked (`key_unconfirmed`: read it and answer
  401 as any request would; services/accounts/authentication.py).

- controls, when the caller's rate limit is folded in (`rate`): the per-key and per-account
  counter update of `RateCounterStore.gated_hit`, conditioned on the room the limit leaves
  (docs/rate-limits.md, "Folded into the chat hold"). Last in the transaction.

So the hold, the rate limit and the spending-limit check are one round trip, exact by construction: the
wallet's `reserved_micros <= limit - spent - amount` plus `spent_micros <= spent read` give
spent + in-flight + amount <= limit at the moment of the write. `settle` / `release` resolve
the hold exactly once (`LedgerStore.settle`) with the record's outcome in the same
transaction. docs/chat.md has the reasoning.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from botocore.exceptions import ClientError

from batchroute.adapters.dynamo.batch_records import batch_from_items, batch_key, batch_values
from batchroute.adapters.dynamo.codec import from_item, set_update
from batchroute.adapters.dynamo.identity import key_unrevoked_check
from batchroute.adapters.dynamo.ledger import (
    LedgerStore,
    is_transaction_conflict,
)
from batchroute.adapters.dynamo.limit_checks import SpendingLimitChecks
from batchroute.adapters.dynamo.rate_limits import RateCounterStore
from batchroute.adapters.dynamo.route_policies import unchanged_check
from batchroute.adapters.dynamo.writes import (
    CONDITION_FAILED,
    cancellation_codes,
    condition_failed_at,
    conditional_update,
    put_new,
    refused_by,
)
from batchroute.domain.batches.record import BatchRecord, UsageCheckpoint
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.billing.ledger import ReservationTerms, SettlementResult, WalletState
from batchroute.domain.billing.spending_limit import LimitGuard
from batchroute.domain.billing.usage import ReservationCharge
from batchroute.domain.chat.holds import ChatOutcome, HoldSettlement, HoldTerms
from batchroute.domain.chat.holds import HoldRefused as HoldRefused
from batchroute.domain.chat.holds import Refusal as Refusal
from batchroute.errors import TransientError
from batchroute.transactions import TransactItem

# Positions in the open transaction: the three reserve items, then ours (a hard limit's
# spend check, then its next period's: SpendingLimitChecks.items).
_WALLET_AT, _RESERVATION_AT, _RECORD_AT, _CONTROLS_AT, _SPEND_AT, _NEXT_SPEND_AT = 0, 1, 3, 4, 5, 6


class ChatHoldStore:
    def __init__(
        self,
        *,
        ledger: LedgerStore,
        batches_table: str,
        controls_table: str,
        identity_table: str | None = None,
        dynamodb: Any | None = None,
        rate_counters: RateCounterStore | None = None,
    ) -> None:
        self.ledger = ledger
        self.identity_table = identity_table
        self.rate_counters = rate_counters or RateCounterStore(controls_table, dynamodb)
        self.batches_table = batches_table
        self.controls_table = controls_table
        self._dynamodb = dynamodb
        self.limit_checks = SpendingLimitChecks(ledger_table=ledger.table_name, controls_table=controls_table)

    @property
    def dynamodb(self) -> Any:
        return self._dynamodb or self.ledger.dynamodb

    # -- before the first byte -----------------------------------------------------------------
    def open(self, terms: HoldTerms, *, at: str, guard: LimitGuard) -> None:
        """The hold, the request record, the limit check (the route policy's version check,
        `policy_version`, the API key's confirmation, `key_hash`, and the caller's rate-limit
        count, `rate`) in one transaction; HoldRefused names the condition that failed."""
        org_id, amount, record = terms.org_id, terms.amount, terms.record
        rate, policy_version, key_hash = terms.rate, terms.policy_version, terms.key_hash
        items: list[TransactItem] = [
            *self.ledger.reserve_items(
                org_id,
                ReservationTerms(
                    reservation_id=terms.hold_id,
                    amount=amount,
                    purpose="chat_hold",
                    ref=record.batch_id,
                    period_key=guard.period_key,
                ),
                at=at,
                reserved_at_most=guard.reserved_cap(amount),
            ),
            self._record_put(record),
            *self.limit_checks.items(org_id, guard),
        ]
        policy_at = len(items)
        if policy_version is not None:
            items.append(unchanged_check(self.controls_table, org_id, policy_version))
        key_at = len(items)
        if key_hash is not None:
            if self.identity_table is None:
                raise ValueError("confirming an API key needs the identity table")
            items.append(key_unrevoked_check(self.identity_table, key_hash))
        if rate is not None:
            items.append(self.rate_counters.gated_hit(rate))
        try:
            self.dynamodb.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if key_hash is not None and refused_by(exc, key_at):  # first: a revoked key learns nothing
                raise HoldRefused("key_unconfirmed") from exc
            if rate is not None:
                reasons = exc.response.get("CancellationReasons") or []
                last = reasons[len(items) - 1] if len(reasons) == len(items) else {}
                if last.get("Code") == CONDITION_FAILED:
                    counts = self.rate_counters.refused_counts(rate, last.get("Item") or {})
                    raise HoldRefused("rate_limit", counts) from exc
            if policy_version is not None and refused_by(exc, policy_at):
                raise HoldRefused("policy_changed") from exc
            raise HoldRefused(_reason(exc)) from exc

    def limit_inputs(
        self, org_id: str, period_keys: Iterable[str]
    ) -> tuple[BillingControls | None, dict[str, int]]:
        """The billing controls and the given spend counters, in ONE BatchGetItem (consistent)."""
        return self.limit_checks.read(self.dynamodb, org_id, period_keys)

    def wallet(self, org_id: str) -> WalletState:
        return self.ledger.state(org_id)

    # -- after it ------------------------------------------------------------------------------
    def checkpoint(self, batch_id: str, usage: UsageCheckpoint, at: str) -> None:
        """The usage streamed so far, for the sweeper should this function die."""
        request = set_update(
            self.batches_table,
            batch_key(batch_id),
            {"usage_checkpoint": usage.to_mapping(), "checkpoint_at": at},
            condition="#state = :running",  # a finished request's record keeps its outcome
            names={"#state": "state"},
            values={":running": "running"},
        )
        conditional_update(self.dynamodb, **request)

    def record(self, batch_id: str) -> BatchRecord | None:
        response = self.dynamodb.get_item(
            TableName=self.batches_table, Key=batch_key(batch_id), ConsistentRead=True
        )
        return batch_from_items(from_item(response["Item"])) if "Item" in response else None

    def settle(self, settlement: HoldSettlement) -> SettlementResult:
        """The settlement's charge, release, record update and usage counters: one transaction,
        exactly once."""
        return self.ledger.settle(
            settlement.org_id,
            ReservationCharge(
                settlement.hold_id,
                settlement.charge,
                settlement.at,
                tuple(settlement.period_keys),
                f"chat {settlement.batch_id}",
                settlement.usage,
            ),
            extra_items=[self._record_update(settlement.batch_id, settlement.outcome)],
        )

    def release(
        self, org_id: str, hold_id: str, *, batch_id: str, at: str, outcome: ChatOutcome
    ) -> SettlementResult:
        """Nothing charged (no lane answered): the whole hold released, with the outcome."""
        return self.ledger.release(
            org_id,
            hold_id,
            at=at,
            memo=f"chat {batch_id}",
            extra_items=[self._record_update(batch_id, outcome)],
        )

    def _record_put(self, record: BatchRecord) -> TransactItem:
        """The request's META item: listed with the org's batches, never on the SLA index
        (a direct request ends within the API's time-out, or the sweeper settles its hold)."""
        values, _ = batch_values(record, deadline_index=False)
        return put_new(self.batches_table, values)

    def _record_update(self, batch_id: str, outcome: ChatOutcome) -> TransactItem:
        return {"Update": set_update(self.batches_table, batch_key(batch_id), outcome.to_changes())}


def _reason(exc: ClientError) -> Refusal:
    codes = cancellation_codes(exc)
    if not codes:
        raise exc
    if is_transaction_conflict(exc):
        return "conflict"

    if condition_failed_at(codes, _CONTROLS_AT):
        return "controls_changed"
    if condition_failed_at(codes, _SPEND_AT) or condition_failed_at(codes, _NEXT_SPEND_AT):
        return "spend_moved"
    if condition_failed_at(codes, _WALLET_AT):
        return "funds"  # or the hard limit's room: the caller reads the wallet to tell
    if condition_failed_at(codes, _RESERVATION_AT) or condition_failed_at(codes, _RECORD_AT):
        raise TransientError("a chat hold id was reused") from exc
    raise exc
