"""Funding check at submit (batch create, chat): does the wallet cover the estimate, and does
the org's spending limit allow it?

1. Balance: the wallet's available credit (balance - reserved) must cover the estimate, with
   or without a limit: else 402 `insufficient_credits` (chat: `insufficient_funds`), details
   {available, required}. This is a courtesy check for a clean error: the reservation's
   conditional write stays the final word (two submits may both pass this check).
2. Spending limit (when enabled): projected = period spend + in-flight + estimate, where period
   spend is what was charged in the current period (daily or monthly, by the local date in
   `limit_timezone`) and in-flight is the org's reserved credit (Σ pending reservations,
   the wallet's `reserved_micros`). Hard mode refuses projected > limit: 402
   `insufficient_credits` for a batch, 403 `spending_limit_reached` for chat and for a
   golden-set regression run (charged like direct chat; its lack of credit stays a 402
   `insufficient_credits`, docs/schedules.md), details
   {limit, period, spent, projected} (decimal strings; period `daily`|`monthly`). Soft mode
   never refuses. In both modes `limit_reached` is True once projected >= limit (the
   `billing.limit_reached` alert itself waits for charged spend: domain/billing/alerts.py).

Both are read before the write, so neither is the final word: the decision carries a
`LimitGuard` (domain/billing/spending_limit.py) that the reservation's own transaction asserts, so
concurrent submits cannot together pass a hard limit. When that transaction is refused, the
caller decides again on fresh reads. `Funds.guarded` is that decision with the items
of its hold (the reservation bounded by the guard, and the guard's checks), for every hold:
a batch's create, a rescue's overage, a golden-set regression run (a chat hold keeps its
limit guard cached: services/chat/state.py).

A quote reserves nothing and is never refused for the limit; `LimitPreview` gives it the same
rule as a preflight warning instead (`spending_limit_exceeded`, docs/billing-controls.md):
creating the batch now would be refused with the 402 above.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal, TypeVar

from batchroute.clock import Clock, isoformat
from batchroute.domain.batches.preflight import IssueView
from batchroute.domain.billing.controls import BillingControls, Period
from batchroute.domain.billing.ledger import ReservationTerms, WalletState, insufficient_credit, period_keys
from batchroute.domain.billing.spending_limit import LimitGuard, next_period_key
from batchroute.errors import Forbidden, PaymentRequired, ServiceError, Unavailable
from batchroute.money import Money, format_amount
from batchroute.services.billing.ports import (
    ControlsReader,
    LedgerBook,
    LimitChecks,
    MoneyWatch,
    WalletReader,
)
from batchroute.transactions import TransactItem

# Whose words a refusal takes: a batch's (402 for both), chat's (402 `insufficient_funds`,
# 403 `spending_limit_reached`), a regression run's (402 `insufficient_credits`, 403).
Surface = Literal["batch", "chat", "regression"]


@dataclass(frozen=True)
class FundingDecision:
    """An accepted submit: the figures it was judged on."""

    available: Money
    in_flight: Money
    required: Money
    limit_reached: bool = False
    limit: Money | None = None
    period: Period | None = None
    period_key: str | None = None
    spent: Money | None = None
    projected: Money | None = None
    guard: LimitGuard = field(default_factory=LimitGuard)  # what the reservation's transaction must assert


def decide(
    *,
    wallet: WalletState,
    estimate: Money,
    controls: BillingControls | None,
    spent: Money | None,
    period_key: str | None,
    surface: Surface = "batch",
    next_spent: Money | None = None,
) -> FundingDecision:
    """The pure rule: accept (a decision) or raise the refusal. `spent` and `period_key` are
    those of the controls' current period (None without an active limit); `next_spent`, what
    the next period's counter already holds (a hard limit counts the larger of the two:
    domain/billing/spending_limit.py)."""
    if estimate.micros < 0:
        raise ValueError("an estimate is never negative")
    if wallet.available.micros < estimate.micros:
        code = "insufficient_funds" if surface == "chat" else "insufficient_credits"
        raise insufficient_credit(wallet.available, estimate, code=code)
    decision = FundingDecision(available=wallet.available, in_flight=wallet.reserved, required=estimate)
    limit, period = active_limit(controls)
    if controls is None or limit is None or period is None:
        return decision
    current = spent or Money.zero()
    ahead = next_spent or Money.zero()
    spent = max(current, ahead) if controls.limit_mode == "hard" else current
    projected = spent + wallet.reserved + estimate
    if controls.limit_mode == "hard" and projected.micros > limit.micros:
        raise limit_refusal(limit=limit, period=period, spent=spent, projected=projected, surface=surface)
    return FundingDecision(
        available=wallet.available,
        in_flight=wallet.reserved,
        required=estimate,
        limit_reached=projected.micros >= limit.micros,
        limit=limit,
        period=period,
        period_key=period_key,
        spent=spent,
        projected=projected,
        guard=LimitGuard.of_hard_limit(
            controls.version, limit, period, period_key, spent=current, next_spent=ahead
        )
        if controls.limit_mode == "hard"
        else LimitGuard(),
    )


def active_limit(controls: BillingControls | None) -> tuple[Money | None, Period | None]:
    """The limit amount and period when a limit is enabled (and complete), else (None, None)."""
    if controls is None or not controls.limit_enabled:
        return None, None
    if controls.limit_amount is None or controls.limit_period is None:
        return None, None
    return controls.limit_amount, controls.limit_period


def limit_refusal(
    *, limit: Money, period: Period, spent: Money, projected: Money, surface: Surface
) -> ServiceError:
    details = {
        "limit": format_amount(limit.amount),
        "period": period,
        "spent": format_amount(spent.amount),
        "projected": format_amount(projected.amount),
    }
    message = f"This request would take {period} spend past the hard spending limit."
    if surface == "batch":
        return PaymentRequired(message, code="insufficient_credits", details=details)
    return Forbidden(message, code="spending_limit_reached", details=details)


@dataclass(eq=False)
class Funding:
    ledger: WalletReader

    def check_funding(
        self,
        org_id: str,
        estimate: Money,
        controls: BillingControls | None,
        *,
        now: datetime,
        surface: Surface = "batch",
    ) -> FundingDecision:
        """Accept the submit of `estimate` (a decision) or raise PaymentRequired / Forbidden."""
        wallet = self.ledger.state(org_id)
        limit, period = active_limit(controls)
        spent: Money | None = None
        next_spent: Money | None = None
        period_key: str | None = None
        if controls is not None and limit is not None and period is not None:
            period_key = period_keys(now, controls.limit_timezone)[period]
            spent = self.ledger.period_spend(org_id, period_key)
            if controls.limit_mode == "hard":
                next_spent = self.ledger.period_spend(org_id, next_period_key(period_key))
        return decide(
            wallet=wallet,
            estimate=estimate,
            controls=controls,
            spent=spent,
            period_key=period_key,
            surface=surface,
            next_spent=next_spent,
        )

    def limit_room(
        self, org_id: str, controls: BillingControls | None, wallet: WalletState, *, now: datetime
    ) -> Money | None:
        """Under a hard spending limit, the most a new reservation may take now: the limit less
        the period's spend and the in-flight credit, the room `decide` refuses beyond (None
        without a hard limit: nothing but the wallet bounds it)."""
        limit, period = active_limit(controls)
        if controls is None or controls.limit_mode != "hard" or limit is None or period is None:
            return None
        spent = hard_limit_spent(self.ledger, org_id, period_keys(now, controls.limit_timezone)[period])
        return limit - spent - wallet.reserved


def hard_limit_spent(ledger: WalletReader, org_id: str, period_key: str) -> Money:
    """The spend a hard limit counts: the larger of the period's and the next period's
    (domain/billing/spending_limit.py)."""
    current = ledger.period_spend(org_id, period_key)
    return max(current, ledger.period_spend(org_id, next_period_key(period_key)))


@dataclass(frozen=True)
class GuardedReservation:
    """A hold decided on fresh reads, as the items of ONE transaction: the reservation (its
    wallet update bounded by the decision's limit guard) and the guard's ConditionChecks."""

    decision: FundingDecision
    reservation: list[TransactItem]  # LedgerStore.reserve_items: wallet, reservation, entry
    limit_checks: list[TransactItem]  # SpendingLimitChecks.items


@dataclass(eq=False)
class Funds:
    """An org's credit as the services that hold and charge it reach it (batch create, a
    rescue's overage, a golden-set regression run, settlement): the ledger, the org's
    billing controls (limits, time zone), the spending-limit checks a hold is written with,
    and the watch told once the wallet moved (alerts, auto top-up)."""

    ledger: LedgerBook
    controls: ControlsReader
    limit_checks: LimitChecks
    watch: MoneyWatch

    def controls_of(self, org_id: str) -> BillingControls | None:
        return self.controls.billing_controls(org_id)

    def guarded(
        self,
        terms: ReservationTerms,
        controls: BillingControls | None,
        *,
        org_id: str,
        now: datetime,
        surface: Surface = "batch",
    ) -> GuardedReservation:
        """The check of a hold of `terms.amount`, as batch create checks a batch's
        (`Funding.check_funding`: its 402 or 403 raises), then the items that take it under
        the decision's guard (`reserve_items(..., reserved_at_most=guard.reserved_cap(amount))`
        and `limit_checks.items(org_id, guard)`). The caller writes them in one transaction
        (with its own items, if any); refused because the funding moved, it decides again."""
        ledger = self.ledger
        decision = Funding(ledger).check_funding(org_id, terms.amount, controls, now=now, surface=surface)
        guard = decision.guard
        reservation = ledger.reserve_items(
            org_id, terms, at=isoformat(now), reserved_at_most=guard.reserved_cap(terms.amount)
        )
        return GuardedReservation(decision, reservation, self.limit_checks.items(org_id, guard))

    def moved(self, org_id: str, *, at: datetime, controls: BillingControls | None = None) -> None:
        """Tell the watch that the org's wallet moved; never raises."""
        self.watch.moved(org_id, at=at, controls=controls)


LIMIT_WARNING_CODE = "spending_limit_exceeded"
# Funding decided on fresh reads, then committed; a refused commit (something moved) decides
# again. A refusal means another reservation committed meanwhile (or spend or controls
# changed), so each retry follows someone's progress: under a hard limit a reservation may
# lose once per competitor that fits, hence room for many before answering 503
# `funding_contended`.
FUNDING_ATTEMPTS: Final = 24
Held = TypeVar("Held")


def funded(attempt: Callable[[], Held | None], *, what: str) -> Held:
    """`attempt` (decide on fresh reads, then commit: None when the commit was refused
    because the funding moved) until it commits, at most FUNDING_ATTEMPTS times; then the
    retryable 503 `funding_contended`."""
    for _ in range(FUNDING_ATTEMPTS):
        held = attempt()
        if held is not None:
            return held
    raise funding_contended(what)


def funding_contended(what: str) -> Unavailable:
    """The answer when the wallet kept moving under a hold of `what`: retryable, never a 500."""
    return Unavailable(
        f"The wallet kept changing while this {what} was funded; retry.",
        code="funding_contended",
        retry_after_seconds=1,
    )


@dataclass(eq=False)
class LimitPreview:
    """A quote's look at the hard spending limit: the warning when creating a batch of
    `estimate` now would be refused (projected > limit in hard mode), else None."""

    ledger: WalletReader
    controls: ControlsReader
    clock: Clock

    def limit_warning(self, org_id: str, estimate: Money) -> IssueView | None:
        controls = self.controls.billing_controls(org_id)
        limit, period = active_limit(controls)
        if controls is None or controls.limit_mode != "hard" or limit is None or period is None:
            return None
        period_key = period_keys(self.clock.now(), controls.limit_timezone)[period]
        spent = hard_limit_spent(self.ledger, org_id, period_key)
        projected = spent + self.ledger.state(org_id).reserved + estimate
        if projected.micros <= limit.micros:
            return None
        refusal = limit_refusal(limit=limit, period=period, spent=spent, projected=projected, surface="batch")
        return {
            "category": "spending_limit",
            "code": LIMIT_WARNING_CODE,
            "message": f"Creating this batch now would take {period} spend past the hard spending "
            "limit, so it would be refused.",
            "action": "Raise the limit, wait for the next period, or send fewer items.",
            "details": refusal.details or {},  # the 402's figures: limit, period, spent, projected
        }
