"""Direct chat completions: route, hold, call with failover before the first byte, settle once.

`DirectChat.open(principal, request)` does everything that happens before the first byte:
plan the lanes (domain/chat/routing.py, over the cached live state), hold the most the
request can cost together with its record, the spending-limit check and the caller's
rate-limit count (ONE transaction; with the key lookup, two AWS calls before the provider),
then try the lanes in order until one sends its first byte. A connection error, time-out,
5xx or missing adapter before that byte moves on to the next lane (unless
`allow_fallbacks: false`); a provider's refusal (4xx) ends the request. No lane answering
releases the hold. The `DirectCall` it returns streams the rest (`next_event`) and
`finish()` settles the hold exactly once: actual usage charged at the lane's direct price,
the rest released, the record completed (or failed) in the same transaction. A call that
stops early (the client went away) is closed upstream and charged for what was generated.
After the answer (never before it) the lanes' live state and the rate limit's previous
window are re-read when due (`_after_answer`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import cast

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal, authorize
from batchroute.domain.batches.record import BatchRecord, ExecutionSummary, UsageCheckpoint, item_counts
from batchroute.domain.billing.ledger import SettlementResult, period_keys
from batchroute.domain.billing.rate_limits import CallerGate
from batchroute.domain.billing.settlement import DirectReceipt, direct_totals
from batchroute.domain.billing.usage import UsageCharge, direct_usage_line, usage_day
from batchroute.domain.catalog.catalog import Catalog, LanePrice
from batchroute.domain.catalog.pricing import ToolUses, tool_price_key
from batchroute.domain.chat.holds import ChatOutcome, HoldRefused, HoldSettlement, HoldTerms, LanesTried
from batchroute.domain.chat.objects import DIRECT_SOURCE, ToolCallView, completion_id
from batchroute.domain.chat.requests import CHAT_ITEM_ID, ChatRequest
from batchroute.domain.chat.routing import DirectLane, DirectPlan, plan_direct
from batchroute.domain.routing.engine import RejectedLane
from batchroute.domain.routing.gates import RoutingGuards
from batchroute.domain.routing.lanes import LaneAttempt
from batchroute.domain.routing.policy import RoutePolicy
from batchroute.errors import InvalidRequest, TransientError, Unavailable
from batchroute.ids import new_id
from batchroute.money import Money
from batchroute.observability import logger
from batchroute.providers.base import (
    PermanentProviderError,
    ProviderError,
    ProviderRequest,
    ProviderResult,
    StreamDelta,
    StreamEnd,
    StreamEvent,
    StreamStart,
    ToolCallDelta,
    Usage,
    joined_tool_calls,
)
from batchroute.providers.retry import RetryPolicy
from batchroute.services.accounts.authentication import KeyUnconfirmed
from batchroute.services.billing.ports import ControlsReader, MoneyWatch
from batchroute.services.billing.rate_limiting import RateLimiter
from batchroute.services.catalog.lane_health import ACCOUNT_DOWN_CODES, LaneAvailability, mark_account_down
from batchroute.services.catalog.ports import SyncProviders
from batchroute.services.chat.early_start import EarlyStart, EarlyStarts, Opened
from batchroute.services.chat.ports import HoldStore
from batchroute.services.chat.state import HoldKeeper, LaneStateCache, LaneStats
from batchroute.services.routing.policy import policy_version
from batchroute.services.routing.ports import OrgPolicies

SLA = timedelta(hours=24)
# A settlement that fails (the wallet's transaction kept colliding) is tried 3 times in all,
# waiting up to 0.2 s, then 0.4 s: it runs before the answer's last byte.
SETTLE_RETRY = RetryPolicy(max_attempts=3, base_seconds=0.2, cap_seconds=1.0)


@dataclass(frozen=True)
class DirectOptions:
    first_byte_timeout_seconds: float = 10.0
    checkpoint_seconds: float = 2.0


@dataclass
class DirectCall:
    """One answering lane's stream, after its first byte."""

    principal: Principal
    request: ChatRequest
    batch_id: str
    hold_id: str
    hold: Money
    lane: DirectLane
    attempts: list[LaneAttempt]
    created: int
    # Settles the hold; None when it could not (the sweeper then settles at the final usage).
    settle: Callable[[DirectCall, str | None], SettlementResult | None]
    checkpoint: Callable[[DirectCall], None]
    clock: Clock
    checkpoint_seconds: float
    events: Iterator[StreamEvent] = field(repr=False, default_factory=lambda: iter(()))
    rejected: list[RejectedLane] = field(default_factory=list)  # the lanes not chosen (DirectPlan.not_chosen)
    completion_tokens: int = 0
    reported: Usage | None = None  # the vendor's usage so far, when its stream said (StreamDelta.usage)
    pieces: list[str] = field(default_factory=list)
    fragments: list[ToolCallDelta] = field(default_factory=list)  # the deltas' tool-call fragments
    refusals: list[str] = field(default_factory=list)
    result: ProviderResult | None = None
    settlement: SettlementResult | None = None
    rate: CallerGate | None = None
    # Releases the whole hold, charging nothing (`abandon`); set by DirectChat.
    release: Callable[[DirectCall, str], None] = field(default=lambda call, error: None, repr=False)
    released: bool = False
    unsettled: bool = False  # settling failed for good: the sweeper settles it
    _last_checkpoint: datetime | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def provider(self) -> str:
        return self.lane.lane.provider

    @property
    def completion_id(self) -> str:
        return completion_id(self.batch_id)

    @property
    def finished(self) -> bool:
        return self.result is not None

    def next_event(self) -> StreamDelta | StreamEnd | None:
        """The provider's next delta or its end; None once it ended. Blocks on the provider."""
        if self.result is not None:
            return None
        try:
            event = next(self.events)
        except StopIteration:
            event = None
        if isinstance(event, StreamDelta):
            self.completion_tokens += 1
            if event.usage is not None:
                self.reported = event.usage
            self.pieces.append(event.text)
            self.fragments.extend(event.tool_calls)
            if event.refusal:
                self.refusals.append(event.refusal)
            self._maybe_checkpoint()
            return event
        if isinstance(event, StreamEnd):
            self.result = event.result
            if self.completion_tokens and not _reported(event.result.usage):
                logger.warning(
                    "the provider's stream reported no usage: charged at the estimate",
                    extra={"batch_id": self.batch_id, "lane": self.lane.lane_id},
                )
            return event
        if event is None or isinstance(event, StreamStart):
            if event is None:  # ended without a StreamEnd: what arrived is the answer
                self.result = ProviderResult(
                    custom_id=CHAT_ITEM_ID, status="completed", usage=self.usage_so_far()
                )
                return None
            return self.next_event()
        return None

    def usage_so_far(self) -> Usage:
        """The answer's usage once it ended; before, the deltas so far and the input as the
        vendor reported it (with its prompt-cache split), else as estimated. An answer whose
        vendor reported no usage at all (a compatible host that ignores
        `stream_options.include_usage`) counts as one that is still going: the estimate."""
        if self.result is not None and (_reported(self.result.usage) or not self.completion_tokens):
            return self.result.usage
        estimated = self.request.facts.prompt_tokens
        reported = self.reported
        if reported is None:
            return Usage(prompt_tokens=estimated, completion_tokens=self.completion_tokens)
        return replace(
            reported,
            prompt_tokens=reported.prompt_tokens or estimated,
            completion_tokens=max(reported.completion_tokens, self.completion_tokens),
        )

    @property
    def content(self) -> str:
        output = self.result.output if self.result is not None else None
        if isinstance(output, dict) and isinstance(output.get("content"), str):
            return str(output["content"])
        return "".join(self.pieces)

    @property
    def tool_calls(self) -> list[ToolCallView]:
        """The answer's function calls: as its result has them, else as its deltas sent them."""
        output = self.result.output if self.result is not None else None
        given = output.get("tool_calls") if isinstance(output, dict) else None
        calls = given if isinstance(given, list) and given else joined_tool_calls(self.fragments)
        return [cast(ToolCallView, c) for c in calls if isinstance(c, dict)]

    @property
    def refusal(self) -> str | None:
        """The model's refusal text, if it refused."""
        output = self.result.output if self.result is not None else None
        if isinstance(output, dict) and output.get("refusal"):
            return str(output["refusal"])
        return "".join(self.refusals) or None

    @property
    def finish_reason(self) -> str:
        output = self.result.output if self.result is not None else None
        if isinstance(output, dict) and output.get("finish_reason"):
            return str(output["finish_reason"])
        return "stop"

    def finish(self, *, error: str | None = None) -> SettlementResult | None:
        """Stop the upstream call (if still going) and settle the hold, exactly once (None once
        `abandon` released it and the release did not answer, or the settlement kept failing:
        the sweeper ends it)."""
        with self._lock:
            if self.settlement is not None or self.released or self.unsettled:
                return self.settlement
            self._close()
            self.settlement = self.settle(self, error)
            self.unsettled = self.settlement is None
            return self.settlement

    def abandon(self, error: str) -> None:
        """Stop the upstream call and release the whole hold, charging nothing: for an answer
        no part of which reached the client (a non-streamed answer whose provider failed after
        its first byte, docs/chat.md). Once, and `finish()` then changes nothing."""
        with self._lock:
            if self.settlement is not None or self.released:
                return
            self.released = True
            self._close()
            self.release(self, error)

    def _close(self) -> None:
        close = getattr(self.events, "close", None)
        if close is not None and self.result is None:
            try:
                close()
            except Exception:  # closing a broken upstream must not block settlement
                logger.warning("closing the provider stream failed", exc_info=True)

    def _maybe_checkpoint(self) -> None:
        now = self.clock.now()
        if self._last_checkpoint is None:
            self._last_checkpoint = now
            return
        if (now - self._last_checkpoint).total_seconds() >= self.checkpoint_seconds:
            self._last_checkpoint = now
            try:
                self.checkpoint(self)
            except Exception:  # a missed checkpoint only weakens crash recovery
                logger.warning(
                    "chat usage checkpoint failed", extra={"batch_id": self.batch_id}, exc_info=True
                )


@dataclass(eq=False, kw_only=True)
class DirectChat:
    catalog: Catalog
    lanes: LaneStateCache
    stats: LaneStats
    holds: HoldKeeper
    store: HoldStore
    providers: SyncProviders
    controls: ControlsReader
    guards: RoutingGuards
    clock: Clock
    # The org's route policy: required, so that no wiring routes around it.
    policies: OrgPolicies
    watch: MoneyWatch  # billing alerts and auto top-up after a charge
    # Where a provider account that cannot serve marks its lanes (lane live state).
    availability: LaneAvailability
    options: DirectOptions = field(default_factory=DirectOptions)
    # The caller's rate limit, counted in the hold's transaction; without it the caller
    # was checked before `open` (auth.current_principal).
    limiter: RateLimiter | None = None
    # Starts the first lane's request while the hold commits; None: hold first, then call.
    early: EarlyStarts | None = None
    # How a failed settlement is retried (backoff with jitter; tests inject the sleeper).
    settle_retry: RetryPolicy = field(default_factory=lambda: SETTLE_RETRY)

    # -- before the first byte ---------------------------------------------------------------
    def plan(self, request: ChatRequest, org_id: str | None = None) -> DirectPlan:
        """With `org_id`, the org's route policy applies (the per-process cached copy)."""
        return self._route(request, org_id, fresh=False)[0]

    def _route(
        self, request: ChatRequest, org_id: str | None, *, fresh: bool
    ) -> tuple[DirectPlan, int | None]:
        """The plan and the route policy version it was made under (None: no policy applied):
        the per-process cached copy, or with `fresh` the stored one (after the hold found the
        copy out of date)."""
        if not org_id:
            return self._plan(request, None), None
        policy = self.policies.current(org_id) if fresh else self.policies.cached(org_id)
        return self._plan(request, policy), policy_version(policy)

    def _plan(self, request: ChatRequest, policy: RoutePolicy | None) -> DirectPlan:
        return plan_direct(
            request,
            self.catalog,
            live=self.lanes.live_states(),
            now=self.clock.now(),
            guards=self.guards,
            observed=self.stats.snapshot(),
            policy=policy,
        )

    def open(self, principal: Principal, request: ChatRequest, *, key_hash: str | None = None) -> DirectCall:
        """Route, hold (one transaction) and call the provider up to its first byte. With
        `key_hash` (the caller's key came from the process's copy) the hold confirms the key
        unrevoked, or raises KeyUnconfirmed and holds nothing. The first lane's request goes
        out while the hold commits (services/chat/early_start.py); nothing of it is read
        before the hold has committed."""
        authorize(principal, "batches:create")
        gate = self.limiter.caller_gate(principal) if self.limiter is not None else None
        plan, version = self._planned(principal, request, fresh=False)
        now = self.clock.now()
        batch_id = new_id("batch", now)
        early = self._start_early(principal, request, plan)
        try:
            plan = self._hold(principal, request, (plan, version), batch_id, now, gate, key_hash)
        except BaseException:
            if early is not None and self.early is not None:
                early.abandon()
                self.early.refused(principal.org_id)
            raise
        call = DirectCall(
            principal=principal,
            request=request,
            batch_id=batch_id,
            hold_id=f"hold_{batch_id}",
            hold=plan.hold,
            lane=plan.lanes[0],
            attempts=[],
            created=int(now.timestamp()),
            settle=self._settle,
            checkpoint=self._checkpoint,
            clock=self.clock,
            checkpoint_seconds=self.options.checkpoint_seconds,
            rejected=[r.to_receipt(request.model) for r in plan.rejected],  # and more once one answers
            rate=gate,
            release=self._abandoned,
        )
        try:
            self._first_byte(call, plan, early)
        except BaseException as exc:
            self._release(call, _describe(exc))
            self._after_answer(call)
            raise
        return call

    def _hold(
        self,
        principal: Principal,
        request: ChatRequest,
        planned: tuple[DirectPlan, int | None],
        batch_id: str,
        now: datetime,
        gate: CallerGate | None,
        key_hash: str | None,
    ) -> DirectPlan:
        """Hold the plan's amount; a route policy saved since this process's copy re-plans
        once under the stored one. Returns the plan the hold was placed for."""
        plan, version = planned
        hold_id = f"hold_{batch_id}"
        for attempt in range(2):
            try:
                self.holds.open(
                    HoldTerms(
                        record=self._record(principal, request, plan, batch_id, hold_id, plan.hold, now),
                        amount=plan.hold,
                        rate=gate,
                        policy_version=version,
                        key_hash=key_hash,
                    )
                )
                return plan
            except HoldRefused as refused:
                if refused.reason == "key_unconfirmed" and key_hash is not None:
                    raise KeyUnconfirmed(key_hash) from None
                if refused.reason != "policy_changed":
                    raise
                if attempt:
                    raise TransientError("the route policy kept changing under a chat hold") from None
                plan, version = self._planned(principal, request, fresh=True)
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _start_early(self, principal: Principal, request: ChatRequest, plan: DirectPlan) -> EarlyStart | None:
        if self.early is None or not plan.lanes:
            return None
        lane = plan.lanes[0]
        return self.early.start(principal.org_id, lane, lambda: self._open_lane(request, lane))

    def _open_lane(self, request: ChatRequest, lane: DirectLane) -> Opened:
        """The lane's provider stream and its first event."""
        provider_request = ProviderRequest(
            custom_id=CHAT_ITEM_ID,
            customer_item_id=CHAT_ITEM_ID,
            operation=request.facts.operation,
            model=lane.lane.model,
            provider_model_id=lane.lane.provider_model_id or lane.lane.model,
            input=request.provider_input,
            max_output_tokens=lane.max_output_tokens,
            first_byte_timeout_seconds=self.options.first_byte_timeout_seconds,
            sampling=lane.lane.sampling_parameters,
        )
        events = self.providers.sync(lane.lane.provider).stream(provider_request)
        return events, next(events)

    def _planned(
        self, principal: Principal, request: ChatRequest, *, fresh: bool
    ) -> tuple[DirectPlan, int | None]:
        try:
            return self._route(request, principal.org_id, fresh=fresh)
        except Exception:
            if self.limiter is not None:  # no hold to count it in: counted (or refused) alone
                self.limiter.check_caller(principal)
            raise

    def _first_byte(self, call: DirectCall, plan: DirectPlan, early: EarlyStart | None = None) -> None:
        if early is not None and (not plan.lanes or plan.lanes[0] is not early.lane):
            early.abandon()  # the hold re-planned: the early request was for another plan
            early = None
        for lane in plan.lanes:
            call.lane = lane
            try:
                if early is not None and lane is early.lane:
                    events, first = early.take(lane)
                else:
                    events, first = self._open_lane(call.request, lane)
            except PermanentProviderError as exc:
                call.attempts.append(_attempt(lane, exc.code))
                raise InvalidRequest(
                    f"{lane.lane.provider} refused the request: {exc.message}",
                    code="provider_rejected",
                    details={"provider": lane.lane.provider, "provider_code": exc.code},
                ) from exc
            except Exception as exc:  # connection error, time-out, 5xx, no adapter: next lane
                code = str(getattr(exc, "code", type(exc).__name__))
                if isinstance(exc, ProviderError) and code in ACCOUNT_DOWN_CODES:
                    mark_account_down(
                        self.catalog, self.availability, lane.lane.provider, exc, now=self.clock.now()
                    )
                call.attempts.append(_attempt(lane, code))
                self.stats.record(lane.lane_id, answered=False)
                logger.info(
                    "direct lane failed before its first byte", extra={"lane": lane.lane_id, "code": code}
                )
                continue
            if not isinstance(first, StreamStart):  # a provider that skips StreamStart started anyway
                events = _prepend(first, events)
            self.stats.record(lane.lane_id, answered=True)
            call.attempts.append(_attempt(lane, None))
            call.rejected = plan.not_chosen(call.request.model, lane)  # the receipt names each
            call.events = events
            return
        raise Unavailable(
            "No provider answered this request; nothing was charged. Retry shortly.",
            code="provider_unavailable",
            details={"attempts": [a.to_item() for a in call.attempts]},
            retry_after_seconds=1,
        )

    # -- settlement --------------------------------------------------------------------------
    def _settle(self, call: DirectCall, error: str | None) -> SettlementResult | None:
        """Settle, retrying a failure with backoff (`settle_retry`; the ledger's conditional
        settlement makes a retry of one that did commit replay it). If it still fails, the
        final usage becomes the record's checkpoint, so the sweeper charges what was
        generated rather than what the last checkpoint saw (and, for an answer delivered
        whole, completes the record); None."""
        attempt = 1
        while True:
            try:
                return self._settle_once(call, error)
            except Exception as exc:
                if not self.settle_retry.can_retry(attempt):
                    logger.error(
                        "settling a chat hold failed; the sweeper settles it at its final usage",
                        extra={"batch_id": call.batch_id, "attempts": attempt},
                        exc_info=exc,
                    )
                    break
                logger.warning(
                    "settling a chat hold failed; retrying",
                    extra={"batch_id": call.batch_id, "attempt": attempt, "code": _describe(exc)},
                )
                self.settle_retry.wait(attempt)
                attempt += 1
        try:
            self._checkpoint(call, answered=call.finished and error is None)
        except Exception:  # the sweeper charges the last checkpoint written while streaming
            logger.exception("writing a chat hold's final usage failed", extra={"batch_id": call.batch_id})
        return None

    def _settle_once(self, call: DirectCall, error: str | None) -> SettlementResult:
        now = self.clock.now()
        at = isoformat(now)
        usage = call.usage_so_far()
        charge = call.lane.charge(
            usage.prompt_tokens,
            usage.completion_tokens,
            cached_input_tokens=usage.cached_input_tokens,
            cache_write_input_tokens=usage.cache_write_input_tokens,
            tool_uses=ToolUses.of(usage.tool_uses),
        )
        completed = call.finished and error is None
        outcome = self._outcome(call, at, usage, charge, completed=completed, error=error)
        org_id = call.principal.org_id
        controls = self.controls.billing_controls(org_id)
        zone = controls.limit_timezone if controls else "UTC"
        result = self.store.settle(
            HoldSettlement(
                org_id,
                call.hold_id,
                call.batch_id,
                charge,
                at,
                tuple(period_keys(now, zone).values()),
                outcome,
                usage=chat_usage(call.lane, usage, day=usage_day(now, zone)),
            )
        )
        if not result.replayed and result.charged.micros > 0:
            # Alerts (a soft limit never blocks, so reaching it is reported here) and auto
            # top-up; after the answer's last byte, never on the way to the first one.
            self.watch.moved(org_id, at=now, controls=controls)
        self._after_answer(call)
        return result

    def _after_answer(self, call: DirectCall) -> None:
        """What the hot path put off: the lanes' live state once its TTL has passed, the org's
        route policy once its copy is stale, and the rate limit's previous-window counts if
        the hold's check had to assume them."""
        self.lanes.refresh_if_due()
        # re-read once the copy is CACHE_SECONDS old, so a change saved elsewhere reaches
        # this process without a request paying for it (the hold's check stays exact)
        try:
            self.policies.refresh_if_stale(call.principal.org_id)
        except Exception:  # the old copy stays; the hold's version check guards it
            logger.warning("route policy refresh failed", exc_info=True)
        if call.rate is not None and self.limiter is not None:
            self.limiter.learn(call.rate)

    def _abandoned(self, call: DirectCall, error: str) -> None:
        self._release(call, error)
        self._after_answer(call)

    def _release(self, call: DirectCall, error: str) -> None:
        at = isoformat(self.clock.now())
        outcome = self._outcome(call, at, Usage(), Money.zero(), completed=False, error=error)
        try:
            call.settlement = self.store.release(
                call.principal.org_id, call.hold_id, batch_id=call.batch_id, at=at, outcome=outcome
            )
        except Exception:  # the sweeper releases it later
            logger.exception("releasing a chat hold failed", extra={"batch_id": call.batch_id})

    def _checkpoint(self, call: DirectCall, *, answered: bool = False) -> None:
        usage = call.usage_so_far()
        checkpoint = UsageCheckpoint(lane_id=call.lane.lane_id, usage=usage.tokens, answered=answered)
        self.store.checkpoint(call.batch_id, checkpoint, isoformat(self.clock.now()))

    def _outcome(
        self, call: DirectCall, at: str, usage: Usage, charge: Money, *, completed: bool, error: str | None
    ) -> ChatOutcome:
        charged = min(charge, call.hold)
        return ChatOutcome(
            usage=usage.tokens,
            completed=completed,
            at=at,
            latest_error=error,
            billing={
                **direct_receipt(call.batch_id, call.lane, usage, charged, call.hold, at),
                "rejected_lanes": call.rejected,
            },
            lanes=LanesTried(call.lane.lane_id, tuple(call.attempts)),
        )

    def _record(
        self,
        principal: Principal,
        request: ChatRequest,
        plan: DirectPlan,
        batch_id: str,
        hold_id: str,
        amount: Money,
        now: datetime,
    ) -> BatchRecord:
        at = isoformat(now)
        return BatchRecord(
            batch_id=batch_id,
            org_id=principal.org_id,
            state="running",
            source=DIRECT_SOURCE,
            created_at=at,
            deadline_at=isoformat(now + SLA),
            state_changed_at=at,
            routing_mode="cheapest",
            sla_tier="standard",
            privacy_tier=request.privacy_tier,
            item_count=1,
            chunk_count=0,
            counts=item_counts(1, running=1),
            reservation_id=hold_id,
            reserved_micros=amount.micros,
            fee_kind="direct",
            chat_model=request.model,
            stream=request.stream,
            planned_lanes=[lane.lane_id for lane in plan.lanes],
            execution_summary=ExecutionSummary(latest_error=None),
            workflow_steps={},
            created_by=principal.user_id or principal.key_id,
            presets=[request.preset_version] if request.preset_version else None,
        )


def chat_usage(lane: DirectLane, usage: Usage, *, day: str) -> UsageCharge:
    """What one direct request adds to the usage counters: one chat request on its lane."""
    line = direct_usage_line(lane.lane, usage.tokens)
    return UsageCharge(day=day, lines=(line,))


def direct_receipt(
    batch_id: str, lane: DirectLane, usage: Usage, charged: Money, hold: Money, at: str
) -> DirectReceipt:
    """The billing receipt of a direct request: direct prices, no service fee."""
    price = lane.lane.price
    return {
        **direct_totals(batch_id, charged, hold, at),
        "provider_lanes": [
            {
                "lane_id": lane.lane_id,
                "provider": lane.lane.provider,
                "usage": usage.to_dict(),
                "unit_prices": {**direct_unit_prices(price), **_used_tool_prices(lane, usage)},
                "cost": charged.to_api(),
                "proof": lane.proof.to_api() if lane.proof is not None else None,
            }
        ],
        "rejected_lanes": [],
    }


def direct_unit_prices(price: LanePrice) -> dict[str, str]:
    """A lane's direct prices as a receipt shows them; the prompt-cache prices when it has them."""
    shown = {
        "currency": "usd",
        "basis": "direct",
        "input_per_mtok": format(price.input_per_mtok, "f"),
        "output_per_mtok": format(price.output_per_mtok, "f"),
    }
    if price.cached_input_per_mtok is not None:
        shown["cached_input_per_mtok"] = format(price.cached_input_per_mtok, "f")
    if price.cache_write_input_per_mtok is not None:
        shown["cache_write_input_per_mtok"] = format(price.cache_write_input_per_mtok, "f")
    return shown


def _used_tool_prices(lane: DirectLane, usage: Usage) -> dict[str, str]:
    """The lane's prices of the hosted tools the answer used (USD per 1,000 calls)."""
    used = dict(usage.tool_uses)
    return {
        tool_price_key(tool): format(price, "f")
        for tool, price in lane.lane.tool_prices_per_1k
        if tool in used
    }


def _reported(usage: Usage) -> bool:
    """Whether a vendor's usage says anything (a stream that reported none has zeros)."""
    return bool(usage.prompt_tokens or usage.completion_tokens)


def _attempt(lane: DirectLane, error: str | None) -> LaneAttempt:
    return LaneAttempt(lane.lane_id, lane.lane.provider, error)


def _prepend(first: StreamEvent, rest: Iterator[StreamEvent]) -> Iterator[StreamEvent]:
    yield first
    yield from rest


def _describe(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    return str(code) if code else type(exc).__name__
