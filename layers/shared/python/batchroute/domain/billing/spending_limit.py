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

One more check closes the turn of a period: a guard read in the last instant of a period may
commit in the first of the next, after a settlement has charged the NEW period's counter,
which the spend check (on the old counter) does not see. So a hard guard also asserts that
the next period's counter (`next_period_key`) has not grown since it was read
(`next_spent_micros`, zero when absent), and bounds the reservation by the larger of the two
periods' spend: should the period turn before the write, the new period's spend is at most
what the bound counted; should it have been charged meanwhile, the transaction is refused and
the funding is decided again, on the new period. (The next period's counter is not always
empty: spend keys are local dates, so after the org moves its `limit_timezone` west, spend
already charged may stand under the new zone's tomorrow. Asserting it empty refused every hold
until that day came.)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from batchroute.domain.billing.ledger import DAILY_PREFIX, MONTHLY_PREFIX
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
    next_spent_micros: int = 0  # the next period's counter as read (0: absent)

    @classmethod
    def of_hard_limit(
        cls,
        version: int,
        limit: Money,
        period: str,
        period_key: str | None,
        *,
        spent: Money,
        next_spent: Money,
    ) -> LimitGuard:
        """A hard limit as read: the controls' `version`, the limit of `period`, and the
        spend of the period `period_key` and of the next (each as its counter stood)."""
        return cls(True, version, limit.micros, period, period_key, spent.micros, next_spent.micros)

    def reserved_cap(self, amount: Money) -> int | None:
        """The most the org may have in flight before this reservation (None without a hard
        limit); negative when the amount alone does not fit. Bounded by the larger of the two
        periods' spend (the module docstring)."""
        if not self.hard:
            return None
        return self.limit_micros - max(self.spent_micros, self.next_spent_micros) - amount.micros

    @property
    def next_period_key(self) -> str | None:
        """The spend-counter key of the period after the guard's (None without a hard limit)."""
        return next_period_key(self.period_key) if self.hard and self.period_key else None


def next_period_key(period_key: str) -> str:
    """The key of the period after `period_key`, by the same local calendar the key was taken
    in (`period_keys`, in the org's `limit_timezone`): "D#2026-11-20" -> "D#2026-11-21",
    "M#2026-12" -> "M#2027-01"."""
    if period_key.startswith(DAILY_PREFIX):
        day = date.fromisoformat(period_key[len(DAILY_PREFIX) :])
        return f"{DAILY_PREFIX}{day + timedelta(days=1):%Y-%m-%d}"
    if period_key.startswith(MONTHLY_PREFIX):
        year, month = (int(part) for part in period_key[len(MONTHLY_PREFIX) :].split("-"))
        return f"{MONTHLY_PREFIX}{year + month // 12:04d}-{month % 12 + 1:02d}"
    raise ValueError(f"not a spend-period key: {period_key!r}")
