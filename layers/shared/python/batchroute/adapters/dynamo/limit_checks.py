"""The spending-limit half of a reservation's transaction (domain/billing/spending_limit.py).

`items(org_id, guard)` are the ConditionChecks to put in the same TransactWriteItems as
`LedgerStore.reserve_items(..., reserved_at_most=guard.reserved_cap(amount))`:

- on the `controls` table: with a hard limit, "still the version it was read at"; without
  one, "still no active hard limit";
- on the `ledger` table (hard limit only): "the period's spend counter has not grown past
  what was read", then "the NEXT period's spend counter has not grown past what was read"
  (zero when absent: a reservation decided at the very end of a period that commits after a
  settlement charged the new period is refused, and decided again on the new period).

`moved(codes, offset)` tells whether a refused transaction failed on one of them (read the
limit again and retry). `read(...)` reads the controls and spend counters in one
consistent BatchGetItem.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from batchroute.adapters.dynamo.codec import condition_check, from_item
from batchroute.adapters.dynamo.controls import CONTROLS_SK, controls_from_item
from batchroute.adapters.dynamo.writes import condition_failed_at
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.billing.spending_limit import LimitGuard
from batchroute.transactions import TransactItem

_SPEND_PREFIX: Final = "SPEND#"
# The most items `items` returns: the controls check, the period's spend, the next period's.
MAX_CHECKS: Final = 3
_NO_HARD_LIMIT: Final = (
    "attribute_not_exists(pk) OR limit_enabled = :off OR limit_mode <> :hard "
    "OR attribute_not_exists(limit_amount_micros) OR attribute_not_exists(limit_period)"
)


@dataclass(eq=False, kw_only=True)
class SpendingLimitChecks:
    ledger_table: str
    controls_table: str

    def items(self, org_id: str, guard: LimitGuard) -> list[TransactItem]:
        """The controls check, then (hard limit only) the spend check and the next period's
        (at most `MAX_CHECKS` items)."""
        items = [self._controls_check(org_id, guard)]
        if guard.hard and guard.period_key is not None and guard.next_period_key is not None:
            items.append(self._spend_check(org_id, guard.period_key, guard.spent_micros))
            items.append(self._spend_check(org_id, guard.next_period_key, guard.next_spent_micros))
        return items

    @staticmethod
    def moved(codes: list[str], offset: int) -> bool:
        """Did the transaction fail on the checks placed at `offset` (the limit moved)?"""
        return any(condition_failed_at(codes, offset + i) for i in range(MAX_CHECKS))

    def read(
        self, dynamodb: Any, org_id: str, period_keys: Iterable[str]
    ) -> tuple[BillingControls | None, dict[str, int]]:
        """The billing controls and the given spend counters (`period key -> micros`, absent
        when never charged), in ONE consistent BatchGetItem."""
        ledger_keys = [_ledger_key(org_id, _SPEND_PREFIX + key) for key in period_keys]
        request: dict[str, Any] = {
            self.controls_table: {"Keys": [_controls_key(org_id)], "ConsistentRead": True}
        }
        if ledger_keys:
            request[self.ledger_table] = {"Keys": ledger_keys, "ConsistentRead": True}
        found: list[dict[str, Any]] = []
        while request:
            response = dynamodb.batch_get_item(RequestItems=request)
            for rows in response.get("Responses", {}).values():
                found.extend(from_item(row) for row in rows)
            request = response.get("UnprocessedKeys") or {}
        controls = next((controls_from_item(i) for i in found if i.get("sk") == CONTROLS_SK), None)
        spent = {
            str(i["sk"])[len(_SPEND_PREFIX) :]: int(i.get("spent_micros", 0))
            for i in found
            if str(i.get("sk", "")).startswith(_SPEND_PREFIX)
        }
        return controls, spent

    def _controls_check(self, org_id: str, guard: LimitGuard) -> TransactItem:
        key = _controls_key(org_id)
        if guard.hard:
            return condition_check(
                self.controls_table, key, "version = :version", values={":version": guard.version}
            )
        return condition_check(
            self.controls_table, key, _NO_HARD_LIMIT, values={":off": False, ":hard": "hard"}
        )

    def _spend_check(self, org_id: str, period_key: str, spent_micros: int) -> TransactItem:
        """The period's spend counter is absent or at most `spent_micros`."""
        return condition_check(
            self.ledger_table,
            _ledger_key(org_id, _SPEND_PREFIX + period_key),
            "attribute_not_exists(spent_micros) OR spent_micros <= :spent",
            values={":spent": spent_micros},
        )


def _controls_key(org_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"ORG#{org_id}"}, "sk": {"S": CONTROLS_SK}}


def _ledger_key(org_id: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": f"WALLET#{org_id}"}, "sk": {"S": sk}}
