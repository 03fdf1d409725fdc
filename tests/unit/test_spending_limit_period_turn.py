"""A hard limit's guard also asserts the NEXT period's spend counter has not grown since it was
read (zero when absent), so a reservation decided at the very end of a period cannot commit
after a settlement charged the new one, and bounds the reservation by the larger of the two
periods' spend (domain/billing/spending_limit.py, adapters/dynamo/limit_checks.py)."""

from __future__ import annotations

from typing import Any

import pytest

from batchroute.adapters.dynamo.limit_checks import MAX_CHECKS, SpendingLimitChecks
from batchroute.domain.billing.spending_limit import LimitGuard, next_period_key
from batchroute.money import Money

CHECKS = SpendingLimitChecks(ledger_table="ledger", controls_table="controls")


@pytest.mark.parametrize(
    ("key", "following"),
    [
        ("D#2026-11-20", "D#2026-11-21"),
        ("D#2026-11-30", "D#2026-12-01"),
        ("D#2026-12-31", "D#2027-01-01"),
        ("D#2028-02-28", "D#2028-02-29"),
        ("D#2027-02-28", "D#2027-03-01"),
        ("M#2026-11", "M#2026-12"),
        ("M#2026-12", "M#2027-01"),
    ],
)
def test_the_next_period_key_follows_the_local_calendar(key: str, following: str) -> None:
    assert next_period_key(key) == following


def test_a_period_key_of_another_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="not a spend-period key"):
        next_period_key("W#2026-47")


def _check(item: Any) -> dict[str, Any]:
    check: dict[str, Any] = item["ConditionCheck"]
    return check


def test_a_hard_guard_checks_its_period_and_the_next_one_unchanged() -> None:
    # Given a hard daily limit read on 20 November with $3 spent
    guard = LimitGuard(
        hard=True,
        version=4,
        limit_micros=10_000_000,
        period="daily",
        period_key="D#2026-11-20",
        spent_micros=3_000_000,
    )
    # When its checks are built
    controls, spend, following = (_check(item) for item in CHECKS.items("org_a", guard))
    # Then the controls' version, the day's spend as read, and the next day's spend at zero
    assert controls["ExpressionAttributeValues"] == {":version": {"N": "4"}}
    assert spend["Key"]["sk"] == {"S": "SPEND#D#2026-11-20"}
    assert spend["ExpressionAttributeValues"] == {":spent": {"N": "3000000"}}
    assert following["Key"] == {"pk": {"S": "WALLET#org_a"}, "sk": {"S": "SPEND#D#2026-11-21"}}
    assert following["ConditionExpression"] == "attribute_not_exists(spent_micros) OR spent_micros <= :spent"
    assert following["ExpressionAttributeValues"] == {":spent": {"N": "0"}}
    assert guard.next_period_key == "D#2026-11-21"


def test_spend_read_on_the_next_period_is_what_its_check_allows_and_what_the_bound_counts() -> None:
    # Given a $10 hard daily limit read with $3 spent today and $4 already under tomorrow's key
    guard = LimitGuard(
        hard=True,
        version=4,
        limit_micros=10_000_000,
        period="daily",
        period_key="D#2026-11-20",
        spent_micros=3_000_000,
        next_spent_micros=4_000_000,
    )
    _, _, following = (_check(item) for item in CHECKS.items("org_a", guard))
    # Then tomorrow's counter may not grow past what was read, and the bound counts the $4
    assert following["ExpressionAttributeValues"] == {":spent": {"N": "4000000"}}
    assert guard.reserved_cap(Money.usd("1")) == 10_000_000 - 4_000_000 - 1_000_000


def test_without_a_hard_limit_only_the_controls_are_checked() -> None:
    assert len(CHECKS.items("org_a", LimitGuard())) == 1
    assert LimitGuard().next_period_key is None


def test_a_refusal_by_the_next_periods_check_is_a_moved_limit() -> None:
    # Given a transaction of 3 reserve items, then the 3 checks, then an idempotency record
    offset = 3
    for failed_at in range(offset, offset + MAX_CHECKS):
        codes = ["None"] * 7
        codes[failed_at] = "ConditionalCheckFailed"
        # Then a refusal by any of the checks is a moved limit (decide again)
        assert SpendingLimitChecks.moved(codes, offset), failed_at
    assert not SpendingLimitChecks.moved(["ConditionalCheckFailed"] + ["None"] * 6, offset)
