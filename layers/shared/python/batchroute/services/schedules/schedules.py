"""Recurring schedules: create, read, change (a new version), pause, resume, delete, and
fire (docs/schedules.md; the rules in domain/schedules/schedules.py).

A firing creates an ordinary batch through the same `BatchService.create` as
`POST /v1/batches` (funding, hard limits, idempotency) with the Idempotency-Key
`sched-<id>-<fire time>`, so a duplicated trigger of the same fire time makes one batch.
The run is recorded once per fire time with its batch or its error; a failed run (say
`insufficient_credits`) never stops the schedule. Both triggers call `fire`: the AWS
EventBridge Scheduler schedule the service manages (`Triggers`), and the sweeper's scan of
the due index (the only trigger locally, and the catch-up for a missed one on AWS).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal, authorize
from batchroute.domain.batches.pages import fitting, row_bytes
from batchroute.domain.batches.record import SurfaceFields
from batchroute.domain.catalog.catalog import Catalog
from batchroute.domain.delivery.webhook_targets import webhook_target_problems
from batchroute.domain.presets.golden_sets import (
    MAX_RUN_SECONDS,
    SETTLE_ALLOWANCE_SECONDS,
    RegressionRunView,
    golden_model_problem,
)
from batchroute.domain.routing.gates import Exclusions, GateFailure
from batchroute.domain.schedules.eventbridge import eventbridge_expression
from batchroute.domain.schedules.schedules import (
    MAX_SCHEDULES_PER_ORG,
    BatchOptions,
    LaneExclusion,
    RunView,
    Schedule,
    ScheduleDefinition,
    ScheduleRun,
    ScheduleView,
    VersionView,
    fire_key,
    parse_expression,
    parse_time_zone,
)
from batchroute.errors import Conflict, InvalidRequest, NotFound, ServiceError
from batchroute.ids import new_id
from batchroute.observability import logger
from batchroute.services.batches.commands import CreateBatch
from batchroute.services.batches.create import BatchService, Surface
from batchroute.services.batches.files import FileService
from batchroute.services.delivery.ports import Sealer
from batchroute.services.delivery.targets import DeliveryTargets
from batchroute.services.schedules.commands import CreateSchedule, UpdateSchedule
from batchroute.services.schedules.ports import ScheduleRecords

MAX_SOURCE_FILES = 100  # input files read under a bucket prefix per firing
MAX_SOURCE_BYTES = 50 * 1024 * 1024  # per input file under a bucket prefix
SAME_FIRE = timedelta(hours=1)
CATCH_UP_AFTER = timedelta(minutes=10)
# A deleted schedule's history: what its delete deletes itself (20 BatchWriteItems, well under
# a second), and when the sweeper purges the rest: once any firing or regression run under
# way at the delete has ended (neither outlives a Lambda invocation, and a regression run's
# settlement has its allowance after it), so nothing it writes late is left behind. A sweep
# purges at most PURGE_PER_SWEEP items.
PURGE_INLINE = 500
PURGE_AFTER = timedelta(seconds=MAX_RUN_SECONDS + SETTLE_ALLOWANCE_SECONDS, minutes=1)
PURGE_PER_SWEEP = 5000
# Syncs of one schedule's trigger racing each other settle in two rounds at most.
SYNC_TRIES = 3

# A read-change-write of a schedule: what it wrote (or found unchanged, False), None when
# another write came between its read and its write.
_Write = tuple[Schedule, bool] | None
# Writes in between (a fire, a regression's exclusions, another change) are rare and brief.
_WRITE_ATTEMPTS = 3


class Triggers(Protocol):
    """The schedule's trigger on AWS (adapters/event_scheduler.py): one EventBridge
    Scheduler schedule per active schedule; locally None (the sweeper fires them)."""

    def put(self, schedule: Schedule) -> None: ...

    def remove(self, schedule_id: str) -> None: ...


class RegressionStarter(Protocol):
    """services/schedules/regression.py:RegressionRuns."""

    def __call__(self, principal: Principal, schedule: Schedule, *, trigger: str) -> RegressionRunView: ...

    def golden_model(self, schedule: Schedule) -> str | None:
        """The model of the schedule's golden set: its own, else its input source's preset's
        (resolved now); None without one."""
        ...


def _webhook_context(org_id: str, schedule_id: str) -> dict[str, str]:
    return {"org_id": org_id, "schedule_id": schedule_id, "purpose": "schedule_webhook"}


@dataclass(eq=False, kw_only=True)
class Schedules:
    store: ScheduleRecords
    batches: Callable[[], BatchService]
    files: FileService
    targets: DeliveryTargets
    sealer: Sealer
    catalog: Catalog
    check_url: Callable[[str], object]
    clock: Clock
    regression: RegressionStarter  # a version with a golden set is benchmarked (docs/schedules.md)
    triggers: Triggers | None = None  # EventBridge Scheduler's; None: the sweeper fires due schedules
    max_schedules: int = MAX_SCHEDULES_PER_ORG

    # -- reads -----------------------------------------------------------------------------
    def get(self, principal: Principal, schedule_id: str) -> Schedule:
        """The caller's schedule; another org's is as unknown as a missing one (404)."""
        authorize(principal, "batches:read")
        found = self.store.get(principal.org_id, schedule_id) if schedule_id.startswith("sched_") else None
        if found is None:
            raise NotFound("No such schedule.", code="schedule_not_found")
        return found

    def page(
        self, principal: Principal, *, cursor: str | None, limit: int
    ) -> tuple[list[ScheduleView], str | None]:
        authorize(principal, "batches:read")
        if cursor is not None and not cursor.startswith("sched_"):
            raise InvalidRequest("cursor is not a cursor of this list.", details={"field": "cursor"})
        found, more = self.store.for_org(principal.org_id, limit=limit, start_after=cursor)
        # The page also stops at PAGE_MAX_BYTES: a golden set makes a schedule large
        views = fitting([schedule.to_api() for schedule in found], size=row_bytes)
        return views, (views[-1]["id"] if len(views) < len(found) else more)

    def runs(
        self, principal: Principal, schedule_id: str, *, cursor: str | None, limit: int
    ) -> tuple[list[RunView], str | None]:
        schedule = self.get(principal, schedule_id)
        found, next_cursor = self.store.runs(schedule.schedule_id, limit=limit, start_after=cursor)
        return [run.to_api() for run in found], next_cursor

    def versions(
        self, principal: Principal, schedule_id: str, *, cursor: str | None, limit: int
    ) -> tuple[list[VersionView], str | None]:
        """A page of the versions, newest first, within `limit` and PAGE_MAX_BYTES; the
        cursor (the last version's number) of the older ones."""
        schedule = self.get(principal, schedule_id)
        if cursor is not None and not (cursor.isdecimal() and int(cursor) >= 1):
            raise InvalidRequest("cursor is not a cursor of this list.", details={"field": "cursor"})
        before = int(cursor) if cursor is not None else None
        found, more = self.store.versions(schedule.schedule_id, limit=limit, before=before)
        views = fitting([version.to_api() for version in found], size=row_bytes)
        if len(views) < len(found):
            more = views[-1]["version"]
        return views, (str(more) if more is not None else None)

    def benchmarks(self, principal: Principal, schedule_id: str, version: int) -> list[RegressionRunView]:
        """The regression runs of one version, newest first."""
        schedule = self.get(principal, schedule_id)
        return [
            {"object": "schedule.regression_run", **run}
            for run in self.store.benchmarks(schedule.schedule_id, version)
        ]

    # -- changes -----------------------------------------------------------------------------
    def create(self, principal: Principal, command: CreateSchedule) -> Schedule:
        authorize(principal, "batches:create")
        state = command.state
        now = self.clock.now()
        schedule_id = new_id("sched", now)
        actor = _actor(principal)
        definition = self._checked(principal, schedule_id, command.definition, current=None)
        at = isoformat(now)
        schedule = Schedule(
            schedule_id=schedule_id,
            org_id=principal.org_id,
            state=state,
            version=1,
            created_at=at,
            created_by=actor,
            updated_at=at,
            updated_by=actor,
            anchor_at=at,
            next_fire_at=None,
            **definition.stored(),
        )
        schedule = replace(schedule, next_fire_at=self._next(schedule, now) if state == "active" else None)
        if not self.store.create(schedule, limit=self.max_schedules):
            raise Conflict(
                f"An organization may keep at most {self.max_schedules} schedules; delete one first.",
                code="schedule_limit",
                details={"limit": self.max_schedules},
            )
        self._sync_trigger(schedule)
        logger.info("schedule created", extra={"org_id": principal.org_id, "schedule_id": schedule_id})
        self._regress(principal, schedule, "version_change")
        return self.store.get(principal.org_id, schedule_id) or schedule

    def update(self, principal: Principal, schedule_id: str, command: UpdateSchedule) -> Schedule:
        """A change of definition makes a new version (the old one stays listed, its runs and
        benchmarks keep their version number); a regression run follows when it has a golden set.
        A body that changes nothing (`{}`, or the fields as they are) is answered the schedule as
        it is: no version, no run, nothing charged."""
        authorize(principal, "batches:create")
        changed, wrote = _written(lambda: self._update_once(principal, schedule_id, command))
        if not wrote:
            return changed
        self._sync_trigger(changed)
        self._regress(principal, changed, "version_change")
        return self.store.get(principal.org_id, schedule_id) or changed

    def _update_once(self, principal: Principal, schedule_id: str, command: UpdateSchedule) -> _Write:
        current = self.get(principal, schedule_id)
        merged = command.over(current.defined())  # batch_options not given: the sealed webhook kept
        definition = self._checked(principal, schedule_id, merged, current=current)
        if current.redefined(definition) == current:
            return current, False
        now = self.clock.now()
        changed = replace(
            current.redefined(definition),
            version=current.version + 1,
            updated_at=isoformat(now),
            updated_by=_actor(principal),
        )
        if changed.expression != current.expression or changed.time_zone != current.time_zone:
            changed = replace(changed, anchor_at=isoformat(now))
        if changed.state == "active":
            changed = replace(changed, next_fire_at=self._next(changed, now))
        changed = replace(changed, exclusions=self._kept_exclusions(changed))
        return (changed, True) if self.store.replace(changed, new_version=True) else None

    def set_state(self, principal: Principal, schedule_id: str, state: str) -> Schedule:
        """Pause (off the due index, trigger removed) or resume (next fire from now: the
        fires missed while paused are not made up)."""
        authorize(principal, "batches:create")
        changed, wrote = _written(lambda: self._set_state_once(principal, schedule_id, state))
        if wrote:
            self._sync_trigger(changed)
        return changed

    def _set_state_once(self, principal: Principal, schedule_id: str, state: str) -> _Write:
        current = self.get(principal, schedule_id)
        if current.state == state:
            return current, False
        now = self.clock.now()
        changed = replace(
            current,
            state=state,  # type: ignore[arg-type]
            next_fire_at=self._next(current, now) if state == "active" else None,
            updated_at=isoformat(now),
            updated_by=_actor(principal),
        )
        return (changed, True) if self.store.replace(changed, new_version=False) else None

    def delete(self, principal: Principal, schedule_id: str) -> None:
        authorize(principal, "batches:create")
        schedule = self.get(principal, schedule_id)
        purge_at = isoformat(self.clock.now() + PURGE_AFTER)
        if not self.store.delete(principal.org_id, schedule.schedule_id, purge_at=purge_at):
            raise NotFound("No such schedule.", code="schedule_not_found")
        if self.triggers is not None:
            self.triggers.remove(schedule.schedule_id)
        # its history (the batches it made stay, as any batch): what one request may delete
        # now, the rest and anything a firing under way writes after by the sweeper's purge
        self.store.purge_history(schedule.schedule_id, at_most=PURGE_INLINE)
        logger.info("schedule deleted", extra={"org_id": principal.org_id, "schedule_id": schedule_id})

    def purge_deleted(self, *, limit: int = 100, at_most: int = PURGE_PER_SWEEP) -> list[str]:
        """The sweeper's: purge the history of schedules deleted `PURGE_AFTER` ago, at most
        `at_most` items in all (a long history takes several sweeps); the ids whose purge
        ended."""
        ended: list[str] = []
        for schedule_id in self.store.purges_due(isoformat(self.clock.now()), limit=limit):
            deleted, done = self.store.purge_history(schedule_id, at_most=at_most)
            if done:
                self.store.end_purge(schedule_id)
                ended.append(schedule_id)
            at_most -= deleted
            if at_most <= 0:
                break
        return ended

    def regress_now(self, principal: Principal, schedule_id: str) -> RegressionRunView:
        authorize(principal, "batches:create")
        schedule = self.get(principal, schedule_id)
        return self.regression(principal, schedule, trigger="on_demand")

    # -- firing ------------------------------------------------------------------------------
    def fire_due(self, *, limit: int = 100) -> dict[str, list[str]]:
        """The sweeper's trigger: fire every schedule due by now (earliest first)."""
        now = self.clock.now()
        if self.triggers is not None:  # on AWS only a trigger EventBridge missed is caught up
            now -= CATCH_UP_AFTER
        fired: dict[str, list[str]] = {"created": [], "failed": [], "skipped": []}
        for schedule in self.store.due(isoformat(now), limit=limit):
            if schedule.next_fire_at is None:
                continue
            run = self.fire(
                schedule.org_id,
                schedule.schedule_id,
                datetime.fromisoformat(schedule.next_fire_at),
                trigger="sweeper",
            )
            fired[run.state].append(schedule.schedule_id)
        return fired

    def fire(
        self, org_id: str, schedule_id: str, fire_at: datetime, *, trigger: str = "scheduler"
    ) -> ScheduleRun:
        """One firing of `schedule_id` for `fire_at`: its run (created, failed or skipped).
        Idempotent per (schedule, fire time): a repeat returns the first run, and a repeat
        racing the first makes no second batch (the batch's Idempotency-Key)."""
        at = isoformat(fire_at)
        now = isoformat(self.clock.now())
        schedule = self.store.get(org_id, schedule_id)
        if schedule is None:
            if trigger == "scheduler" and self.triggers is not None:
                # A trigger that outlived its schedule (a delete that died before removing it,
                # or an update's sync of the trigger that came after the delete): it goes now,
                # as ids are never used again.
                self.triggers.remove(schedule_id)
            return ScheduleRun(schedule_id, at, 0, "skipped", created_at=now, trigger=trigger)
        if trigger == "scheduler":
            at = _named_fire(schedule, fire_at)
        existing = self.store.run(schedule_id, at)
        if existing is not None and existing.state != "firing":
            self._advance(schedule, at)
            return existing
        run = ScheduleRun(schedule_id, at, schedule.version, "firing", created_at=now, trigger=trigger)
        if schedule.state != "active":
            run = replace(
                run, state="skipped", error={"code": "schedule_paused", "message": "The schedule was paused."}
            )
            self.store.create_run(run)
            return run
        self.store.create_run(run)  # a concurrent duplicate also goes on: the batch key dedups
        try:
            run = replace(run, state="created", batch_id=self._create_batch(schedule, at))
        except ServiceError as exc:
            run = replace(run, state="failed", error={"code": exc.code, "message": exc.message})
            logger.info(
                "schedule firing failed",
                extra={"schedule_id": schedule_id, "fire_at": at, "code": exc.code},
            )
        self.store.finish_run(run)
        self._advance(schedule, at)
        return run

    def _create_batch(self, schedule: Schedule, fire_at: str) -> str:
        body = self._batch_body(schedule)
        principal = Principal(
            org_id=schedule.org_id, role="member", via="api_key", key_id=schedule.schedule_id
        )
        surface = Surface(
            excluded_lanes=_exclusions(schedule),
            fields=_surface_fields(schedule),
        )
        answer = self.batches().create(
            principal, CreateBatch.parse(body), fire_key(schedule.schedule_id, fire_at), surface
        )
        return str(json.loads(answer.body)["batch"]["id"])

    def _batch_body(self, schedule: Schedule) -> dict[str, Any]:
        options = schedule.batch_options.copy()
        webhook = options.get("webhook")
        if isinstance(webhook, Mapping):
            options["webhook"] = {
                "url": webhook["url"],
                "secret": self.sealer.unseal(
                    str(webhook["secret_sealed"]),
                    context=_webhook_context(schedule.org_id, schedule.schedule_id),
                ),
            }
        source = schedule.input_source
        if source.kind == "file":
            return {**options, "input_file_id": source.file_id}
        preset = source.preset
        items: list[Any] = []
        for key, data in self.targets.read_prefix(
            schedule.org_id,
            source.delivery_target_id,
            source.prefix,
            max_files=MAX_SOURCE_FILES,
            max_bytes=MAX_SOURCE_BYTES,
        ):
            for number, line in enumerate(data.splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except ValueError:
                    raise InvalidRequest(
                        f"{key} line {number} is not JSON.", code="schedule_input_invalid"
                    ) from None
                if isinstance(item, dict) and preset and "preset" not in item:
                    item["preset"] = preset
                items.append(item)
        if not items:
            raise InvalidRequest("No input lines under the prefix.", code="schedule_input_empty")
        return {**options, "items": items}

    def _advance(self, schedule: Schedule, fired_at: str) -> None:
        """Move the schedule to its next fire after this one (if it was due for it)."""
        if schedule.state != "active" or schedule.next_fire_at is None:
            return
        if schedule.next_fire_at > fired_at:
            return
        after = max(datetime.fromisoformat(fired_at), self.clock.now())
        next_at = self._next(schedule, after)
        # The EventBridge schedule follows the expression itself: nothing to change there.
        self.store.advance(schedule, fired_at=fired_at, next_fire_at=next_at)

    def _next(self, schedule: Schedule, after: datetime) -> str:
        expression = parse_expression(schedule.expression)
        zone = parse_time_zone(schedule.time_zone)
        return isoformat(
            expression.next_after(after, zone, anchor=datetime.fromisoformat(schedule.anchor_at))
        )

    def _sync_trigger(self, schedule: Schedule) -> None:
        """Bring the EventBridge trigger to the schedule as stored: apply what `schedule` (just
        written) asks, then read it again, and while a write since has changed what the
        trigger is made of (a pause racing a resume, two updates, a delete), apply the stored
        one. Syncs that race so end with the last write's trigger, whatever order their calls
        reach EventBridge in. One still changing after SYNC_TRIES is left to the next write's
        sync and the sweeper's catch-up (logged)."""
        if self.triggers is None:
            return
        current: Schedule | None = schedule
        for _ in range(SYNC_TRIES):
            made_of = _trigger_of(current)
            if current is not None and made_of is not None:
                self.triggers.put(current)
            else:
                self.triggers.remove(schedule.schedule_id)
            current = self.store.get(schedule.org_id, schedule.schedule_id)
            if _trigger_of(current) == made_of:
                return
        logger.warning(
            "schedule trigger kept changing while synced", extra={"schedule_id": schedule.schedule_id}
        )

    def _kept_exclusions(self, schedule: Schedule) -> dict[str, LaneExclusion]:
        """The exclusions a new version keeps: those of lanes of its golden set's model (its
        next run decides them again); none when it has no golden set, so nothing is left
        excluded that no run can lift."""
        if not schedule.exclusions:
            return {}
        model = self.regression.golden_model(schedule)
        return {
            lane_id: exclusion
            for lane_id, exclusion in schedule.exclusions.items()
            if model is not None and lane_id.partition("/")[2] == model  # lane id: <provider>/<model>
        }

    def _regress(self, principal: Principal, schedule: Schedule, trigger: str) -> None:
        """A new version with a golden set is benchmarked at once; a run that cannot be made
        (402 `insufficient_credits`, 403 `spending_limit_reached` over a hard limit, say) is
        skipped, its reason logged, not raised: the version is saved either way, nothing held."""
        if not (schedule.golden_set or schedule.input_source.preset):
            return
        try:
            self.regression(principal, schedule, trigger=trigger)
        except ServiceError as exc:
            logger.info(
                "regression run not made",
                extra={
                    "org_id": schedule.org_id,
                    "schedule_id": schedule.schedule_id,
                    "version": schedule.version,
                    "trigger": trigger,
                    "code": exc.code,
                    "details": exc.details,
                },
            )

    # -- checks against the org's resources ------------------------------------------------------
    def _checked(
        self,
        principal: Principal,
        schedule_id: str,
        definition: ScheduleDefinition,
        *,
        current: Schedule | None,
    ) -> ScheduleDefinition:
        """The definition (its fields checked at the edge) once its source, webhook and golden
        set's model are checked against what the org and the catalog hold; the webhook's
        secret sealed."""
        source = definition.input_source
        if source.kind == "file":
            self.files.file(principal.org_id, source.file_id)
        else:
            # reading the org's bucket through a delivery target is the target's own power: a
            # caller who may not manage targets may not point a schedule's input at one (a
            # change that keeps the input as it was needs no more than any other change)
            if current is None or current.input_source != source:
                authorize(principal, "delivery:manage")
            self.targets.get(principal.org_id, source.delivery_target_id)
        options = self._sealed_webhook(
            principal.org_id, schedule_id, definition.batch_options.copy(), current
        )
        eventbridge_expression(definition.expression)  # the AWS trigger runs it (400 if it cannot)
        golden = definition.golden_set
        problem = golden_model_problem(golden.model, self.catalog) if golden is not None else None
        if problem is not None:
            raise InvalidRequest(problem, code="invalid_schedule", details={"field": "golden_set.model"})
        return replace(definition, batch_options=options)

    def _sealed_webhook(
        self, org_id: str, schedule_id: str, options: BatchOptions, current: Schedule | None
    ) -> BatchOptions:
        webhook = options.get("webhook")
        if webhook is None:
            return options
        if "secret_sealed" in webhook:  # unchanged from the stored version
            return options
        stored = current.batch_options.get("webhook") if current is not None else None
        if isinstance(stored, Mapping) and stored.get("url") == webhook.get("url"):
            secret = webhook.get("secret")
            sealed = stored.get("secret_sealed")
            if secret is None or self._same_secret(org_id, schedule_id, sealed, str(secret)):
                return {**options, "webhook": stored.copy()}  # unchanged: no new version
        problems = webhook_target_problems(webhook, check_url=self.check_url, field="batch_options.webhook")
        if problems:
            raise InvalidRequest(
                problems[0].message, code="invalid_schedule", details={"field": problems[0].path}
            )
        sealed = self.sealer.seal(str(webhook["secret"]), context=_webhook_context(org_id, schedule_id))
        return {**options, "webhook": {"url": webhook["url"], "secret_sealed": sealed}}

    def _same_secret(self, org_id: str, schedule_id: str, sealed: object, secret: str) -> bool:
        """Whether `secret` is the one the stored webhook sealed (sealing anew would make another
        ciphertext of it: a PATCH that resends it would look like a change)."""
        if not isinstance(sealed, str):
            return False
        try:
            held = self.sealer.unseal(sealed, context=_webhook_context(org_id, schedule_id))
        except Exception:  # a key changed, KMS throttled: seal the secret anew (a new version)
            logger.warning(
                "stored webhook secret unreadable; sealing anew", extra={"schedule_id": schedule_id}
            )
            return False
        return hmac.compare_digest(held.encode(), secret.encode())


def _written(attempt: Callable[[], _Write]) -> tuple[Schedule, bool]:
    """Run `attempt` again on a fresh read while another write comes between its read and its
    write (which is refused: adapters/dynamo/schedules.py, `revision`), a few times; then 409."""
    for _ in range(_WRITE_ATTEMPTS):
        done = attempt()
        if done is not None:
            return done
    raise Conflict("The schedule changed while this update was applied; retry.", code="concurrent_update")


def _trigger_of(schedule: Schedule | None) -> tuple[str, str, str] | None:
    """What a schedule's EventBridge trigger is made of; None: it has none (paused, deleted)."""
    if schedule is None or schedule.state != "active":
        return None
    return schedule.expression, schedule.time_zone, schedule.anchor_at


def _named_fire(schedule: Schedule, fire_at: datetime) -> str:
    """The fire time of ours an EventBridge delivery for `fire_at` names: one fire key for
    both triggers. A time at least as close to the last fire as to the next one is the last
    fire delivered again (a retry, or a delivery after the sweeper caught it up): its run is
    found, no batch made. Else a time within SAME_FIRE of the next fire is that fire, early or
    late (the DST rules of croniter and EventBridge may differ by the hour); else its own."""
    at = isoformat(fire_at)
    if schedule.next_fire_at is None:
        return at
    due = datetime.fromisoformat(schedule.next_fire_at)
    if schedule.last_fire_at is not None:
        last = datetime.fromisoformat(schedule.last_fire_at)
        if abs(fire_at - last) <= abs(due - fire_at):
            return schedule.last_fire_at
    if abs(due - fire_at) <= SAME_FIRE:
        return schedule.next_fire_at
    return at


def _exclusions(schedule: Schedule) -> Exclusions:
    return {
        lane_id: (
            GateFailure(
                "regression_failed",
                f"The schedule's golden set scored the lane {details['score']} "
                f"(threshold {details['threshold']}).",
                {
                    "schedule_id": schedule.schedule_id,
                    "score": details["score"],
                    "threshold": details["threshold"],
                    "version": details["version"],
                    "regression_id": details["regression_id"],
                    "at": details["at"],
                },
            ),
        )
        for lane_id, details in (schedule.exclusions or {}).items()
    }


def _surface_fields(schedule: Schedule) -> SurfaceFields:
    return SurfaceFields(schedule_id=schedule.schedule_id, schedule_version=schedule.version)


def _actor(principal: Principal) -> str:
    return principal.acting_user_id or principal.key_id or "unknown"
