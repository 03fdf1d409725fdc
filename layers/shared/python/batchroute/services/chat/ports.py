"""What the chat hot path needs from storage, declared once."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from batchroute.domain.batches.record import BatchRecord, UsageCheckpoint
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.billing.ledger import SettlementResult, WalletState
from batchroute.domain.billing.spending_limit import LimitGuard
from batchroute.domain.chat.holds import ChatOutcome, HoldSettlement, HoldTerms


class HoldStore(Protocol):
    """adapters/dynamo/chat_holds.py:ChatHoldStore: a chat call's hold, opened and settled in
    one transaction each."""

    def open(self, terms: HoldTerms, *, at: str, guard: LimitGuard) -> None: ...

    def limit_inputs(
        self, org_id: str, period_keys: Iterable[str]
    ) -> tuple[BillingControls | None, dict[str, int]]: ...

    def wallet(self, org_id: str) -> WalletState: ...

    def checkpoint(self, batch_id: str, usage: UsageCheckpoint, at: str) -> None: ...

    def record(self, batch_id: str) -> BatchRecord | None: ...

    def settle(self, settlement: HoldSettlement) -> SettlementResult: ...

    def release(
        self, org_id: str, hold_id: str, *, batch_id: str, at: str, outcome: ChatOutcome
    ) -> SettlementResult: ...
