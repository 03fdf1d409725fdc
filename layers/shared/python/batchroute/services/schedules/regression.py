"""Golden-set regression runs: answer a schedule's golden set on every candidate lane of its
model, score each lane, record a benchmark per lane and schedule version, and exclude the
lanes below the threshold from the schedule's batches (docs/schedules.md, Golden sets).
A preset version's golden set runs through the same code (`for_preset`: the preset applied
to each input, the benchmark under the preset version; docs/presets.md, Golden sets), and a
schedule without its own golden set uses its input source's preset's.

It is paid work, charged like direct chat: the estimate (every item on every lane, at the
lanes' direct prices, at most GOLDEN_MAX_OUTPUT output tokens each) is held from the wallet
first, under the org's spending limit as every hold is (`Funds.guarded`: batch
create's check, then the reservation bounded by the hard limit's room and its checks in ONE
transaction, decided again when the wallet or the limit moved): 402 `insufficient_credits`
when it does not fit the wallet, 403 `spending_limit_reached` when it would take the
period's spend past a hard limit, nothing held or run either way. Then the tokens actually
used are charged at direct prices and the rest released, in one settlement that also moves
the usage counters (per model and provider, as chat requests) and writes the run's record
(the benchmark): the run is recorded if and only if it was charged.

A run that dies between its hold and its settlement (the function timed out or crashed)
leaves no record and is charged nothing: its hold carries a deadline, the latest the run can
still be running (`run_deadline`: every provider call given up after its time-out, one after
another, then the settlement's allowance), and the sweeper releases it once that has passed
(services/workflow/sweeper.py). The hold resolves once: a run that settles after the release
changes nothing and answers 409 `regression_abandoned`; one that settled first makes the
release a no-op.

The candidate lanes are those the org's route policy admits, read fresh at each run and
applied as quotes and direct chat apply it (`admitted_lanes`: provider allow and deny,
regions, privacy tier floor, price caps at direct prices; docs/routing-policy.md): the
customer's golden prompts go to no provider the policy excludes. None left: 409
`no_candidate_lanes`, nothing held or run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import partial
from typing import Any, Final, Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal
from batchroute.domain.batches.record import FundingMoved
from batchroute.domain.billing.ledger import ReservationTerms, period_keys
from batchroute.domain.billing.usage import ReservationCharge, UsageCharge, UsageLine, usage_day
from batchroute.domain.catalog import tokens
from batchroute.domain.catalog.catalog import Catalog, Lane
from batchroute.domain.catalog.pricing import token_cost
from batchroute.domain.presets.golden_sets import (
    GoldenSet,
    GoldenSetView,
    LaneBenchmark,
    LaneError,
    RegressionOwner,
    RegressionRecord,
    RegressionRunView,
    golden_set_from_api,
    lane_score,
    run_deadline,
    score,
)
from batchroute.domain.presets.presets import PresetVersion, apply_preset
from batchroute.domain.routing.gates import RoutingGuards
from batchroute.domain.routing.policy import Admitted, RoutePolicy, admitted_lanes
from batchroute.domain.schedules.schedules import LaneExclusion, Schedule
from batchroute.errors import Conflict, InvalidRequest
from batchroute.ids import new_id
from batchroute.money import Money
from batchroute.observability import logger
from batchroute.providers.base import CONNECT_SECONDS, ProviderRequest, ProviderResult
from batchroute.services.billing.funding import Funds, funded
from batchroute.services.catalog.ports import SyncProviders
from batchroute.services.presets.resolution import Resolver
from batchroute.services.routing.policy import policy_version
from batchroute.services.routing.ports import OrgPolicies
from batchroute.services.schedules.ports import ScheduleRecords
from batchroute.transactions import TransactItem

GOLDEN_MAX_OUTPUT: Final = 512  # output tokens per golden item
# How long a golden call waits for its whole answer (the request's read time-out, the
# endpoints' default `Timeouts.read`), the connection's CONNECT_SECONDS apart: what a run's
# deadline is made of.
GOLDEN_CALL_TIMEOUT_SECONDS: Final = 120.0

Prepare = Callable[[Mapping[str, Any]], Mapping[str, Any]]
# The Put of a finished run's record (its owner's benchmark item), written in the settlement.
RecordItem = Callable[[RegressionRecord], TransactItem]


@dataclass(frozen=True)
class RegressionSubject:
    """What a run measures, shared by schedules and presets: its owner's key in the record
    (`{"schedule_id": ...}` or `{"preset": name}`), version, golden set, and how each golden
    input is prepared before it is sent (a preset applied), if at all."""

    org_id: str
    owner: RegressionOwner
    version: int
    golden_set: GoldenSetView | None
    label: str  # the ledger memo's
    record: RecordItem  # the finished run's record, written with its charge
    prepare: Prepare | None = None
    no_golden_set: str = "The schedule has no golden set."


def _preset_input(preset: PresetVersion) -> Prepare:
    """A golden input as a batch item naming the preset would be sent (apply_preset)."""

    def prepare(payload: Mapping[str, Any]) -> Mapping[str, Any]:
        filled = apply_preset({"input": dict(payload)}, preset)["input"]
        return filled if isinstance(filled, Mapping) else payload

    return prepare


class PresetBenchmarks(Protocol):
    def benchmark_item(self, org_id: str, name: str, regression: RegressionRecord) -> TransactItem: ...


@dataclass(eq=False, kw_only=True)
class RegressionRuns:
    store: ScheduleRecords
    catalog: Catalog
    providers: SyncProviders
    guards: RoutingGuards
    funds: Funds
    clock: Clock
    # The org's route policy: required, so that no wiring runs golden sets around it.
    policies: OrgPolicies
    # a golden set's input naming a preset runs with it; a preset's run records its benchmark
    presets: Resolver
    preset_benchmarks: PresetBenchmarks
    # Each provider call's time-out (the read's; the connection's on top): the run's deadline.
    call_timeout_seconds: float = GOLDEN_CALL_TIMEOUT_SECONDS

    def __call__(self, principal: Principal, schedule: Schedule, *, trigger: str) -> RegressionRunView:
        """A schedule's run: its own golden set, else its input source's preset's; the
        benchmark under the schedule and the failing lanes excluded from its batches."""
        golden_set, prepare = self._golden_set(schedule)
        subject = RegressionSubject(
            org_id=schedule.org_id,
            owner={"schedule_id": schedule.schedule_id},
            version=schedule.version,
            golden_set=golden_set,
            label=schedule.schedule_id,
            record=partial(self.store.benchmark_item, schedule.schedule_id),
            prepare=prepare,
        )
        regression = self.measure(subject, trigger=trigger)
        self.store.set_exclusions(schedule, self._exclusions(schedule, regression))
        return {"object": "schedule.regression_run", **regression}

    def golden_model(self, schedule: Schedule) -> str | None:
        """The model of the golden set a run of the schedule would use now, if any."""
        golden_set, _ = self._golden_set(schedule)
        return golden_set["model"] if golden_set else None

    def _golden_set(self, schedule: Schedule) -> tuple[GoldenSetView | None, Prepare | None]:
        """The schedule's own golden set, else its input source's preset's (with the preset
        applied to each input), resolved now."""
        if schedule.golden_set:
            return schedule.golden_set, None
        preset = self.schedule_preset(schedule)
        if preset is not None and preset.golden_set:
            return preset.golden_set, _preset_input(preset)
        return None, None

    def for_preset(self, preset: PresetVersion, *, trigger: str) -> RegressionRunView:
        """A preset version's run: the preset applied to each golden input; the benchmark
        under the preset version (no exclusions: a preset routes nothing by itself)."""
        subject = RegressionSubject(
            org_id=preset.org_id,
            owner={"preset": preset.name},
            version=preset.version,
            golden_set=preset.golden_set,
            label=f"preset {preset.ref}",
            record=partial(self.preset_benchmarks.benchmark_item, preset.org_id, preset.name),
            prepare=_preset_input(preset),
            no_golden_set=f"Preset {preset.ref} has no golden set.",
        )
        regression = self.measure(subject, trigger=trigger)
        return {"object": "preset.regression_run", **regression}

    def measure(self, subject: RegressionSubject, *, trigger: str) -> RegressionRecord:
        """Run the subject's golden set on every candidate lane, hold and charge it, and
        record the run with its charge (`subject.record`); returns the record."""
        if not subject.golden_set:
            raise Conflict(subject.no_golden_set, code="no_golden_set")
        golden = golden_set_from_api(subject.golden_set)
        policy = self.policies.current(subject.org_id)  # fresh, as the batch paths read it
        candidates = self.candidate_lanes(golden.model, policy)
        lanes = list(candidates.lanes)
        if not lanes:
            raise _no_candidates(golden.model, policy, candidates)
        now = self.clock.now()
        regression_id = new_id("regr", now)
        terms = ReservationTerms(
            reservation_id=f"res_{regression_id}",
            amount=Money.usd_ceil(
                sum((_estimate(lane, golden, subject.prepare) for lane in lanes), Decimal(0))
            ),
            purpose="regression",
            ref=regression_id,
            expires_at=isoformat(self.deadline(now, calls=len(lanes) * len(golden.items))),
        )
        self._hold(subject.org_id, terms)
        results = [self._run_lane(lane, golden, subject.prepare) for lane in lanes]
        regression = self._settle(_HeldRun(subject, terms, golden, trigger, now), results)
        logger.info(
            "regression run recorded",
            extra={
                **subject.owner,
                "regression_id": regression_id,
                "policy_version": policy_version(policy),
                "policy_rejected_lanes": [r["lane_id"] for r in candidates.rejected],
                "failed_lanes": [lane["lane_id"] for lane in regression["lanes"] if not lane["passed"]],
            },
        )
        return regression

    def deadline(self, started: datetime, *, calls: int) -> datetime:
        """The latest a run of `calls` provider calls holding credit since `started` can
        still be running: each call given up after its time-out (`run_deadline`)."""
        return run_deadline(started, calls=calls, call_seconds=CONNECT_SECONDS + self.call_timeout_seconds)

    def _settle(self, run: _HeldRun, results: list[LaneResult]) -> RegressionRecord:
        """Charge what the lanes used (at most the hold), release the rest and write the run's
        record, in ONE transaction conditional on the hold still pending. A hold resolved
        before (the sweeper released it past its deadline) is left as it is: nothing charged
        or recorded, 409 `regression_abandoned`."""
        org_id, terms = run.subject.org_id, run.terms
        controls = self.funds.controls_of(org_id)
        done = self.clock.now()
        memo = f"golden-set regression {terms.ref} of {run.subject.label}"
        zone = controls.limit_timezone if controls else "UTC"
        charge, charged = _charge(terms.reservation_id, terms.amount, results, done, zone, memo)
        regression = run.record(results, done, charged)
        settled = self.funds.ledger.settle(org_id, charge, extra_items=[run.subject.record(regression)])
        if settled.replayed:
            logger.warning(
                "regression run abandoned",
                extra={**run.subject.owner, "regression_id": terms.ref, "hold": settled.status},
            )
            raise Conflict(
                "This regression run outlasted its deadline and its hold was released; nothing "
                "was charged or recorded. Run it again.",
                code="regression_abandoned",
                details={"regression_id": terms.ref, "deadline": terms.expires_at},
            )
        self.funds.moved(org_id, at=done, controls=controls)
        return regression

    def _hold(self, org_id: str, terms: ReservationTerms) -> None:
        """Hold the run's estimate as batch create holds a batch's (`Funds.guarded`): the
        402 / 403 of the check raises; a hold refused because the wallet or the limit moved
        since the reads is decided again on fresh ones."""

        def attempt() -> bool | None:
            controls = self.funds.controls_of(org_id)
            held = self.funds.guarded(
                terms, controls, org_id=org_id, now=self.clock.now(), surface="regression"
            )
            try:
                self.funds.ledger.reserve_guarded(held.reservation, held.limit_checks)
            except FundingMoved:
                return None
            return True

        funded(attempt, what="regression run")

    def schedule_preset(self, schedule: Schedule) -> PresetVersion | None:
        """The preset the schedule's input source names, when it resolves now."""
        ref = schedule.input_source.preset
        if ref is None:
            return None
        try:
            return self.presets.resolve(schedule.org_id, ref)
        except InvalidRequest:
            return None

    def candidate_lanes(self, model: str, policy: RoutePolicy | None) -> Admitted:
        """The model's `responses` lanes, by lane id, on providers the service may use
        (enabled, launched, allowed) that the org's route policy admits at direct prices
        (what a run pays), and those the policy excluded."""
        lanes = sorted(
            (lane for lane in self.catalog.lanes_for(model) if "responses" in lane.operations),
            key=lambda lane: lane.lane_id,
        )
        return admitted_lanes(
            lanes, self.catalog, self.guards, policy, operations=("responses",), basis="direct"
        )

    def _run_lane(self, lane: Lane, golden: GoldenSet, prepare: Prepare | None) -> LaneResult:
        passed, prompt, completion = 0, 0, 0
        errors: list[LaneError] = []
        for index, item in enumerate(golden.items):
            request = ProviderRequest(
                custom_id=f"golden-{index}",
                customer_item_id=f"golden-{index}",
                operation="responses",
                model=lane.model,
                provider_model_id=lane.provider_model_id or lane.model,
                input=prepare(item.input) if prepare is not None else item.input,
                max_output_tokens=min(lane.max_output_tokens, GOLDEN_MAX_OUTPUT),
                first_byte_timeout_seconds=self.call_timeout_seconds,  # the whole answer's read
                sampling=lane.sampling_parameters,
            )
            try:
                result: ProviderResult = self.providers.sync(lane.provider).complete(request)
            except Exception as exc:  # a lane that cannot answer scores the item as failed
                errors.append({"index": str(index), "code": str(getattr(exc, "code", type(exc).__name__))})
                continue
            prompt += result.usage.prompt_tokens
            completion += result.usage.completion_tokens
            text = (result.output or {}).get("content") if result.status == "completed" else None
            if score(golden.scorer, text if isinstance(text, str) else None, item.expected):
                passed += 1
        cost = token_cost(prompt, completion, lane.price.input_per_mtok, lane.price.output_per_mtok)
        return LaneResult(
            lane=lane,
            score=lane_score(passed, len(golden.items)),
            items_passed=passed,
            items_total=len(golden.items),
            errors=tuple(errors),
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost=cost,
        )

    @staticmethod
    def _exclusions(schedule: Schedule, regression: RegressionRecord) -> dict[str, LaneExclusion]:
        """The latest run decides for each lane it scored: below the threshold excluded,
        at or above it admitted again; other lanes keep their standing."""
        exclusions = dict(schedule.exclusions or {})
        for lane in regression["lanes"]:
            if lane["passed"]:
                exclusions.pop(lane["lane_id"], None)
            else:
                exclusions[lane["lane_id"]] = {
                    "score": lane["score"],
                    "threshold": regression["threshold"],
                    "version": regression["version"],
                    "regression_id": regression["regression_id"],
                    "at": regression["completed_at"],
                }
        return exclusions


def _estimate(lane: Lane, golden: GoldenSet, prepare: Prepare | None) -> Decimal:
    """The most a lane's answers to the golden set can cost: each input as it is SENT (a
    preset's system prompt, options and schema with it: every string, key and number of the
    prepared input counted), at most GOLDEN_MAX_OUTPUT output tokens each."""
    total = Decimal(0)
    output = min(lane.max_output_tokens, GOLDEN_MAX_OUTPUT)
    for item in golden.items:
        sent = prepare(item.input) if prepare is not None else item.input  # what _run_lane sends
        messages = sent.get("messages")
        prompt = tokens.prompt_tokens(
            text_bytes=tokens.value_bytes(dict(sent)),
            messages=len(messages) if isinstance(messages, list) else 1,
            images=0,
        )
        total += token_cost(prompt, output, lane.price.input_per_mtok, lane.price.output_per_mtok)
    return total


def _no_candidates(model: str, policy: RoutePolicy | None, candidates: Admitted) -> Conflict:
    """409 `no_candidate_lanes`; when the policy excluded lanes, its version and the lanes
    with the rule each broke (as direct chat's `no_direct_lane` names them)."""
    if not candidates.rejected:
        return Conflict(f"No lane can run {model} now.", code="no_candidate_lanes", details={"model": model})
    return Conflict(
        f"No lane can run {model} under the org's route policy.",
        code="no_candidate_lanes",
        details={
            "model": model,
            "policy_version": policy_version(policy),
            "rejected_lanes": [dict(r) for r in candidates.rejected],
        },
    )


@dataclass(frozen=True, slots=True)
class _HeldRun:
    """A run whose hold is taken: what its record is made of, with its lanes' results."""

    subject: RegressionSubject
    terms: ReservationTerms
    golden: GoldenSet
    trigger: str
    started: datetime

    def record(self, results: list[LaneResult], done: datetime, charged: Money) -> RegressionRecord:
        """The run's record as stored: each lane's benchmark, the charge, when it ended."""
        return {
            "regression_id": self.terms.ref,
            **self.subject.owner,
            "version": self.subject.version,
            "trigger": self.trigger,
            "scorer": self.golden.scorer.to_api(),
            "threshold": self.golden.threshold,
            "created_at": isoformat(self.started),
            "completed_at": isoformat(done),
            "lanes": [r.to_api(self.golden.threshold) for r in results],
            "charged": charged.to_api(),
        }


@dataclass(frozen=True, slots=True)
class LaneResult:
    """What one lane did with the golden set: its score, usage and cost."""

    lane: Lane
    score: float
    items_passed: int
    items_total: int
    errors: tuple[LaneError, ...]
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal

    def to_api(self, threshold: float) -> LaneBenchmark:
        """The lane's line of the regression record: its score against `threshold`."""
        return {
            "lane_id": self.lane.lane_id,
            "provider": self.lane.provider,
            "model": self.lane.model,
            "score": self.score,
            "passed": self.score >= threshold,
            "items_passed": self.items_passed,
            "items_total": self.items_total,
            "errors": list(self.errors),
            "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens},
            "cost": Money.usd_ceil(self.cost).to_api(),
        }


def _charge(
    hold_id: str, hold: Money, results: list[LaneResult], done: datetime, zone: str, memo: str
) -> tuple[ReservationCharge, Money]:
    """The run's charge (its lanes' cost, on the spend periods of `done`) and what it charges:
    at most the hold. The ledger caps the charge at the hold and records any cost above it as
    `absorbed` (the estimate counts what is sent, so none is expected)."""
    cost = Money.usd_ceil(sum((r.cost for r in results), Decimal(0)))
    at, periods = isoformat(done), tuple(period_keys(done, zone).values())
    charge = ReservationCharge(hold_id, cost, at, periods, memo, _usage_charge(results, done, zone))
    return charge, min(cost, hold)


def _usage_charge(results: list[LaneResult], done: datetime, zone: str) -> UsageCharge:
    """The run's usage, a line per lane (at most 50), counted on the org's day."""
    return UsageCharge(
        day=usage_day(done, zone),
        lines=tuple(
            UsageLine(
                model=r.lane.model,
                provider=r.lane.provider,
                cost=r.cost,
                input_tokens=r.prompt_tokens,
                output_tokens=r.completion_tokens,
                chat_requests=r.items_total,
            )
            for r in results
        )[:50],
    )
