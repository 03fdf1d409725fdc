"""What the direct chat path keeps in process, so the hot path does not read DynamoDB.

- `LaneStateCache`: every lane's live state (one Query) reused for a short TTL. Heartbeats
  come once a minute and count for five, so a view a few seconds old routes the same. Once
  the TTL has passed the view is still served, and re-read after the answer
  (`refresh_if_due`), never before one; only a process with no view yet, or one older than
  `max_age_seconds` (nobody answered for a long while), reads before planning.
- `LaneStats`: what this process saw of each lane before the first byte (answered or not),
  the "observed" half of the reliability the ranking uses.
- `HoldKeeper`: opens holds with the spending-limit check and the caller's rate-limit count
  inside the same transaction (adapters/dynamo/chat_holds.py). An org without a hard limit
  needs no read at all (the transaction asserts there is none); a hard limit, once read, is
  cached and re-read only when the transaction says it changed (controls version) or spend
  moved past what was read.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import datetime

from batchroute.clock import Clock, isoformat
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.billing.ledger import insufficient_credit, period_keys
from batchroute.domain.billing.spending_limit import LimitGuard, next_period_key
from batchroute.domain.catalog.catalog import LaneLive
from batchroute.domain.chat.holds import HoldRefused, HoldTerms
from batchroute.domain.chat.routing import LaneRecord
from batchroute.money import Money
from batchroute.observability import logger
from batchroute.services.billing.funding import active_limit, funding_contended, limit_refusal
from batchroute.services.billing.rate_limiting import RateLimiter
from batchroute.services.catalog.ports import LiveStates
from batchroute.services.chat.ports import HoldStore

_HOLD_ATTEMPTS = 4
_MAX_CACHED_ORGS = 10_000


class LaneStateCache:
    def __init__(
        self,
        source: LiveStates,
        ttl_seconds: float,
        *,
        max_age_seconds: float = 120.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.ttl_seconds = ttl_seconds
        # A view older than this is not served even once: heartbeats count for 5 minutes.
        self.max_age_seconds = max(max_age_seconds, ttl_seconds)
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._states: dict[str, LaneLive] | None = None
        self._read_at = 0.0

    def live_states(self) -> dict[str, LaneLive]:
        """The view to plan with: the cached one unless there is none or it is too old."""
        with self._lock:
            if self._states is not None and self.monotonic() - self._read_at < self.max_age_seconds:
                return self._states
        return self._read()

    def refresh_if_due(self) -> None:
        """After an answer: re-read the view once its TTL has passed. Never raises."""
        with self._lock:
            if self._states is not None and self.monotonic() - self._read_at < self.ttl_seconds:
                return
            self._read_at = self.monotonic()  # one refresher at a time; others keep the view
        try:
            self._read()
        except Exception:  # the old view stays; the next answer tries again
            with self._lock:
                self._read_at -= self.ttl_seconds
            logger.warning("lane live state refresh failed", exc_info=True)

    def _read(self) -> dict[str, LaneLive]:
        states = self.source.live_states()
        with self._lock:
            self._states, self._read_at = states, self.monotonic()
        return states


class LaneStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, LaneRecord] = {}

    def record(self, lane_id: str, *, answered: bool) -> None:
        with self._lock:
            old = self._records.get(lane_id, LaneRecord())
            self._records[lane_id] = LaneRecord(
                successes=old.successes + int(answered), failures=old.failures + int(not answered)
            )

    def snapshot(self) -> dict[str, LaneRecord]:
        with self._lock:
            return dict(self._records)


@dataclass(frozen=True)
class _HardLimit:
    guard: LimitGuard
    controls: BillingControls


@dataclass(eq=False)
class HoldKeeper:
    store: HoldStore
    clock: Clock
    _: KW_ONLY
    limiter: RateLimiter | None = None  # folds the caller's rate limit into the hold (`HoldTerms.rate`)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _hard: OrderedDict[str, _HardLimit] = field(default_factory=OrderedDict, init=False)

    def open(self, terms: HoldTerms) -> LimitGuard:
        """Hold `amount` and write the request record, or raise 402 `insufficient_funds` /
        403 `spending_limit_reached`; with `rate`, count the request against the caller's
        rate limits in the same transaction, or raise 429 `rate_limited`; with
        `policy_version`, assert the org's route policy is still that version, or raise
        `HoldRefused("policy_changed")` (the caller re-plans); with `key_hash`, confirm the
        caller's API key is still unrevoked, or raise `HoldRefused("key_unconfirmed")`.
        Returns the limit guard the hold passed."""
        org_id, amount = terms.org_id, terms.amount
        now = self.clock.now()
        guard, fresh = self._cached(org_id, now), False
        for _ in range(_HOLD_ATTEMPTS):
            cap = guard.reserved_cap(amount)
            if cap is not None and cap < 0:
                if not fresh:  # refuse on what is stored now, never on a cached limit alone
                    guard, fresh = self.refresh(org_id, now), True
                    continue
                raise self._limit_refusal(org_id, guard, amount)
            try:
                self.store.open(terms, at=isoformat(now), guard=guard)
                return guard
            except HoldRefused as refused:
                if refused.reason in ("policy_changed", "key_unconfirmed"):
                    raise
                if refused.reason == "rate_limit" and terms.rate is not None and self.limiter is not None:
                    # Raises 429 when the exact counts refuse it; else the exact gate.
                    terms = replace(terms, rate=self.limiter.recheck(terms.rate, refused.rate_counts or {}))
                    continue
                if refused.reason in ("controls_changed", "spend_moved"):
                    now = self.clock.now()  # the period may have turned since (its next counter moved)
                    guard, fresh = self.refresh(org_id, now), True
                elif refused.reason == "funds":
                    wallet = self.store.wallet(org_id)
                    if wallet.available.micros < amount.micros:
                        raise insufficient_credit(
                            wallet.available, amount, code="insufficient_funds"
                        ) from None
                    if guard.hard:
                        raise self._limit_refusal(org_id, guard, amount) from None
                # "conflict" (or a wallet that moved meanwhile): try again
        logger.warning("a chat hold kept colliding with other writes", extra={"hold_id": terms.hold_id})
        raise funding_contended("request")  # as batch create answers it

    def refresh(self, org_id: str, now: datetime) -> LimitGuard:
        """Read the controls and the period's spend, and the next period's (one BatchGetItem:
        domain/billing/spending_limit.py), and cache a hard limit."""
        cached = self._hard.get(org_id)
        zone = cached.controls.limit_timezone if cached else "UTC"
        asked = _with_next(period_keys(now, zone).values())
        controls, spent = self.store.limit_inputs(org_id, asked)
        limit, period = active_limit(controls)
        if controls is None or limit is None or period is None or controls.limit_mode != "hard":
            with self._lock:
                self._hard.pop(org_id, None)
            return LimitGuard()
        key = period_keys(now, controls.limit_timezone)[period]
        if key not in asked or next_period_key(key) not in asked:  # not the zone the cache guessed
            _, spent = self.store.limit_inputs(org_id, _with_next([key]))
        guard = LimitGuard.of_hard_limit(
            controls.version,
            limit,
            period,
            key,
            spent=Money(spent.get(key, 0)),
            next_spent=Money(spent.get(next_period_key(key), 0)),
        )
        with self._lock:
            self._hard[org_id] = _HardLimit(guard, controls)
            self._hard.move_to_end(org_id)
            while len(self._hard) > _MAX_CACHED_ORGS:
                self._hard.popitem(last=False)
        return guard

    def _cached(self, org_id: str, now: datetime) -> LimitGuard:
        with self._lock:
            cached = self._hard.get(org_id)
        if cached is None:
            return LimitGuard()  # asserted in the transaction: no hard limit
        period = cached.guard.period
        if (
            period is None
            or period_keys(now, cached.controls.limit_timezone)[period] != cached.guard.period_key
        ):
            return self.refresh(org_id, now)  # a new day or month: its own counter
        return cached.guard

    def _limit_refusal(self, org_id: str, guard: LimitGuard, amount: Money) -> Exception:
        reserved = self.store.wallet(org_id).reserved
        spent = Money(max(guard.spent_micros, guard.next_spent_micros))  # what the bound counted
        return limit_refusal(
            limit=Money(guard.limit_micros),
            period=guard.period or "daily",  # type: ignore[arg-type]
            spent=spent,
            projected=spent + reserved + amount,
            surface="chat",
        )


def _with_next(keys: Iterable[str]) -> list[str]:
    """Each spend period's key, and the next period's after it."""
    return [each for key in keys for each in (key, next_period_key(key))]
