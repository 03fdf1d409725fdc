"""Why opening a chat hold was refused: the hold transaction's conditions, by name
(adapters/dynamo/chat_holds.py raises it; the chat services turn it into the spec's codes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

from batchroute.domain.batches.record import BatchRecord, ExecutionSummaryItem, item_counts
from batchroute.domain.billing.rate_limits import CallerGate, WindowCounts
from batchroute.domain.billing.settlement import DirectReceipt
from batchroute.domain.billing.usage import UsageCharge
from batchroute.domain.catalog.pricing import TokenUsage, UsageFields
from batchroute.domain.routing.lanes import LaneAttempt
from batchroute.money import Money

Refusal = Literal[
    "funds", "controls_changed", "spend_moved", "conflict", "rate_limit", "policy_changed", "key_unconfirmed"
]


@dataclass(frozen=True, slots=True)
class HoldTerms:
    """What opening a chat hold asks for: `amount` held for the request's `record` (which
    names its org and its hold, `reservation_id`), and what the same transaction checks
    besides: the caller's rate-limit count (`rate`), the route policy's version
    (`policy_version`), the API key still unrevoked (`key_hash`)."""

    record: BatchRecord
    amount: Money
    rate: CallerGate | None = None
    policy_version: int | None = None
    key_hash: str | None = None

    def __post_init__(self) -> None:
        if not self.record.reservation_id:
            raise ValueError("a chat hold's record names its hold (reservation_id)")

    @property
    def org_id(self) -> str:
        return self.record.org_id

    @property
    def hold_id(self) -> str:
        return str(self.record.reservation_id)


@dataclass(frozen=True, slots=True)
class HoldSettlement:
    """What settling a chat call's hold does, in one transaction: `charge` (capped at the hold)
    charged to the hold's org and counted on its spending-limit periods (`period_keys`), the
    rest released, and the request's record (`batch_id`) given its `outcome`, with the usage
    counters of `usage`."""

    org_id: str
    hold_id: str
    batch_id: str
    charge: Money
    at: str
    period_keys: tuple[str, ...]
    outcome: ChatOutcome
    usage: UsageCharge | None = None


class HoldRefused(Exception):
    """The open transaction was refused; `reason` says by which condition (`rate_limit`:
    the rate counters, whose counts are in `rate_counts`)."""

    def __init__(self, reason: Refusal, rate_counts: dict[str, WindowCounts] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.rate_counts = rate_counts


@dataclass(frozen=True, slots=True)
class LanesTried:
    """The lanes a direct request tried, in order, ending on the one it ran on."""

    lane_id: str
    attempts: tuple[LaneAttempt, ...]

    @property
    def provider(self) -> str | None:
        """The provider that answered: the last attempt's, when it succeeded."""
        return self.attempts[-1].provider if self.attempts and self.attempts[-1].error is None else None


class ChatOutcomeChanges(TypedDict, total=False):
    """The request record's fields an outcome sets (`ChatOutcome.to_changes`)."""

    state: str
    state_changed_at: str
    completed_at: str
    settled_at: str
    counts: dict[str, int]
    provider: str | None
    lane_id: str
    attempts: list[dict[str, str | None]]  # LaneAttempt.to_item
    usage: UsageFields
    execution_summary: ExecutionSummaryItem
    billing: DirectReceipt


@dataclass(frozen=True, slots=True)
class ChatOutcome:
    """How a direct chat request's record ends, written in the transaction that settles or
    releases its hold: completed or failed at `at`, its usage, its error, its billing
    receipt, and (unless the sweeper recovered it) the lanes it tried."""

    completed: bool
    at: str
    usage: TokenUsage  # as the vendor billed it
    latest_error: str | None
    billing: DirectReceipt  # the receipt, as GET /v1/batches/{id} shows it
    lanes: LanesTried | None = None

    def to_changes(self) -> ChatOutcomeChanges:
        """The record's fields this outcome sets."""
        changes: ChatOutcomeChanges = {
            "state": "completed" if self.completed else "failed",
            "state_changed_at": self.at,
            "completed_at": self.at,
            "settled_at": self.at,
            "counts": item_counts(1, completed=int(self.completed), failed=int(not self.completed)),
        }
        if self.lanes is not None:
            changes["provider"] = self.lanes.provider
            changes["lane_id"] = self.lanes.lane_id
            changes["attempts"] = [a.to_item() for a in self.lanes.attempts]
        changes["usage"] = self.usage.to_fields()
        changes["execution_summary"] = {"latest_error": self.latest_error}
        changes["billing"] = self.billing
        return changes
