"""The hard spending limit as a condition of the reservation's own write.

A reservation under a hard limit must keep period spend + in-flight + this amount <= limit
(docs/billing-controls.md). A read followed by a write cannot promise that: requests that
read the same spend would all pass. So the limit is read once into a `LimitGuard` and the
reservation's transaction asserts three things together (adapters/dynamo/limit_checks.py):

- the wallet's in-flight credit before this reservation is at most
  `limit - spent - amount` (`reserved_cap`, a condition on the wallet update);
- the period's spend counter has not grown past `spent` (a ConditionCheck);
- the controls are still the version the limit was read at, or, without a hard limit,
  still have none (a ConditionCheck).

DynamoDB transactions are serializable, so when all three hold at the write,
spent + in-flight + amount <= limit holds at that instant. Settlement only moves credit from
in-flight to spend (charged <= reserved), so it can only make room, never take it.
"""

from __future__ import annotations

from dataclasses import dataclass

from batchroute.money import Money


@dataclass(frozen=True)
class LimitGuard:
    """How a reservation checks the org's spending limit inside its own transaction:
    `hard=False` asserts there is no active hard limit; `hard=True` carries the limit as read."""

    hard: bool = False
    version: int = 0
    limit_micros: int = 0
    period: str | None = None
    period_key: str | None = None
    spent_micros: int = 0

    def reserved_cap(self, amount: Money) -> int | None:
        """The most the org may have in flight before this reservation (None without a hard
        limit); negative when the amount alone does not fit."""
        if not self.hard:
            return None
        return self.limit_micros - self.spent_micros - amount.micros
