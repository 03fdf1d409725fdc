"""Recurring schedules: the expression, the time zone, when a schedule fires next, and the
rules of its body (docs/schedules.md).

An expression is either a 5-field cron (`30 2 * * *`, read in the schedule's IANA time zone)
or `rate(N minutes|hours|days)` (fixed elapsed time from the schedule's anchor, whatever the
zone). Two fires are at least MIN_INTERVAL apart.

Daylight saving time (cron only; a rate is elapsed time):
- a wall-clock time the change skips (02:30 on the spring-forward day in America/New_York)
  fires once, at the instant that wall time names with the offset before the change (02:30
  EST = 03:30 EDT): a daily job still runs that day, one hour "late" on the wall clock;
- a wall-clock time that occurs twice (01:30 on the fall-back day) fires once, at its first
  occurrence; the repeated hour does not fire again.

Pure: no I/O; `croniter` only walks wall-clock times, the zone arithmetic is `zoneinfo`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Final, Literal, NotRequired, TypedDict, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, CroniterNotAlphaError, croniter

from batchroute.domain.batches.metadata import parse_metadata
from batchroute.domain.presets.golden_sets import GoldenSet, GoldenSetView, golden_set_from_api
from batchroute.domain.presets.presets import MaxPriceSent
from batchroute.domain.routing.gates import RouteRequest
from batchroute.domain.views import made_from, view_of
from batchroute.errors import InvalidRequest

ScheduleState = Literal["active", "paused"]
RunState = Literal["firing", "created", "failed", "skipped"]

MIN_INTERVAL: Final = timedelta(minutes=5)
# Schedules an organization may keep (each has an EventBridge trigger on AWS): 409 `schedule_limit`.
MAX_SCHEDULES_PER_ORG: Final = 100
MAX_NAME: Final = 100
MAX_DESCRIPTION: Final = 1000
MAX_PREFIX: Final = 512
MAX_TIME_ZONE: Final = 64
MAX_PRESET_REF: Final = 120  # name@version
_RATE: Final = re.compile(r"^rate\((\d{1,6}) (minute|minutes|hour|hours|day|days)\)$")
_UNIT_SECONDS: Final = {"minute": 60, "hour": 3600, "day": 86400}
_CRON_FIELD: Final = re.compile(r"^[0-9A-Za-z*/,\-?]+$")
_SAMPLE_FIRES: Final = 64  # fires checked against MIN_INTERVAL for a cron
_SEARCH_LIMIT: Final = 1000  # wall-clock candidates tried before giving up


@dataclass(frozen=True)
class Expression:
    """A parsed expression: `cron` (5 fields) or `rate` (`every`)."""

    text: str
    kind: Literal["cron", "rate"]
    every: timedelta | None = None

    def next_after(self, after: datetime, zone: ZoneInfo, *, anchor: datetime) -> datetime:
        """The first fire strictly after `after` (UTC). A rate fires at anchor + k * every."""
        if self.kind == "rate":
            assert self.every is not None
            if after < anchor:
                return anchor
            steps = (after - anchor) // self.every + 1
            return anchor + steps * self.every
        return _next_cron(self.text, after, zone)


def parse_expression(raw: object, *, field: str = "expression") -> Expression:
    if not isinstance(raw, str) or not raw.strip():
        raise _invalid(field, "expression must be a 5-field cron or rate(N minutes|hours|days).")
    text = " ".join(raw.split())
    rate = _RATE.match(text)
    if rate is not None:
        count, unit = int(rate.group(1)), rate.group(2).rstrip("s")
        if count < 1 or (count == 1) != (rate.group(2) == unit):
            raise _invalid(field, "rate takes a positive count: rate(1 hour), rate(5 minutes).")
        every = timedelta(seconds=count * _UNIT_SECONDS[unit])
        if every < MIN_INTERVAL:
            raise _invalid(field, f"A schedule fires at most every {_minutes(MIN_INTERVAL)} minutes.")
        return Expression(text, "rate", every)
    fields = text.split(" ")
    if len(fields) != 5:
        raise _invalid(field, "A cron has 5 fields: minute hour day-of-month month day-of-week.")
    unsupported = next((f for f in fields if not _CRON_FIELD.match(f)), None)
    if unsupported is not None:  # e.g. L, W or # (docs/schedules.md)
        raise _invalid(
            field, f"Cron field {unsupported!r} is not supported: numbers, ranges, lists, steps, * and ?."
        )
    if fields[2] not in ("*", "?") and fields[4] not in ("*", "?"):
        # EventBridge Scheduler (the AWS trigger) takes one of the two, never both.
        raise _invalid(field, "A cron may restrict the day of the month or the day of the week, not both.")
    try:
        if not croniter.is_valid(text):
            raise ValueError(text)
        walk = croniter(text, datetime(2026, 1, 1))
        fires = [walk.get_next(datetime) for _ in range(_SAMPLE_FIRES)]
    except (ValueError, KeyError, CroniterBadCronError, CroniterBadDateError, CroniterNotAlphaError):
        raise _invalid(field, f"Not a valid cron: {text}.") from None
    if any(later - earlier < MIN_INTERVAL for earlier, later in pairwise(fires)):
        raise _invalid(field, f"A schedule fires at most every {_minutes(MIN_INTERVAL)} minutes.")
    return Expression(text, "cron")


def parse_time_zone(raw: object, *, field: str = "time_zone") -> ZoneInfo:
    if raw is None:
        return ZoneInfo("UTC")
    if not isinstance(raw, str) or not raw or len(raw) > MAX_TIME_ZONE or ".." in raw or raw.startswith("/"):
        raise _invalid(field, "time_zone must be an IANA time zone name such as Europe/Paris.")
    try:
        return ZoneInfo(raw)
    except (ZoneInfoNotFoundError, ValueError):
        raise _invalid(field, f"Unknown time zone: {raw}.") from None


def _next_cron(text: str, after: datetime, zone: ZoneInfo) -> datetime:
    """Walk the cron's wall-clock times in `zone` from the wall time of `after`; the first
    whose instant (first occurrence; a skipped time with the offset before the change) is
    later than `after`."""
    after_utc = after.astimezone(UTC)
    # Start an hour early: around a fall-back, the wall time of `after` may be the repeated one.
    start = (after_utc - timedelta(hours=1)).astimezone(zone).replace(tzinfo=None)
    walk = croniter(text, start)
    for _ in range(_SEARCH_LIMIT):
        wall: datetime = walk.get_next(datetime)
        instant = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
        if instant > after_utc:
            return instant
    raise _invalid("expression", "The expression never fires.")  # pragma: no cover - validated


def fire_times(
    expression: Expression, zone: ZoneInfo, *, after: datetime, anchor: datetime, count: int
) -> list[datetime]:
    """The next `count` fires after `after` (the API's preview, the tests' walk)."""
    found: list[datetime] = []
    moment = after
    for _ in range(count):
        moment = expression.next_after(moment, zone, anchor=anchor)
        found.append(moment)
    return found


# -- the body ------------------------------------------------------------------------------
_SOURCE_TYPES: Final = ("file", "bucket_prefix")
BATCH_OPTION_FIELDS: Final = frozenset(
    {
        "webhook",
        "routing_mode",
        "privacy_tier",
        "sla_tier",
        "region",
        "regions",
        "max_price",
        "required_tools",
        "metadata",
        "completion_window",
    }
)


class WebhookOption(TypedDict, total=False):
    """batch_options.webhook: {url, secret} as sent, {url, secret_sealed} as stored,
    {url, configured} as shown."""

    url: str | None
    secret: str
    secret_sealed: str
    configured: bool


class BatchOptions(TypedDict, total=False):
    """The batch fields every firing sends (BATCH_OPTION_FIELDS), as the customer gave them;
    batch create reads them with the rules of POST /v1/batches."""

    webhook: WebhookOption
    routing_mode: str
    privacy_tier: str
    sla_tier: str
    region: str
    regions: list[str]
    max_price: MaxPriceSent
    required_tools: list[str]
    metadata: dict[str, str]
    completion_window: str


class FileSourceView(TypedDict):
    type: Literal["file"]
    file_id: str


class BucketSourceView(TypedDict):
    type: Literal["bucket_prefix"]
    delivery_target_id: str
    prefix: str
    preset: NotRequired[str]


InputSourceView = FileSourceView | BucketSourceView


@dataclass(frozen=True, slots=True)
class InputSource:
    """Where each firing reads its items: a stored input file (`file_id`), or every JSONL
    object under a `prefix` of the org's delivery target (items naming no preset get
    `preset`). Stored and shown as its API object."""

    kind: Literal["file", "bucket_prefix"]
    file_id: str = ""
    delivery_target_id: str = ""
    prefix: str = ""
    preset: str | None = None

    @classmethod
    def from_item(cls, item: InputSourceView) -> InputSource:
        """A stored source (checked when it was saved)."""
        if item["type"] == "file":
            return cls("file", file_id=item["file_id"])
        return cls(
            "bucket_prefix",
            delivery_target_id=item["delivery_target_id"],
            prefix=item["prefix"],
            preset=item.get("preset"),
        )

    def to_api(self) -> InputSourceView:
        if self.kind == "file":
            return {"type": "file", "file_id": self.file_id}
        view: BucketSourceView = {
            "type": "bucket_prefix",
            "delivery_target_id": self.delivery_target_id,
            "prefix": self.prefix,
        }
        if self.preset is not None:
            view["preset"] = self.preset
        return view


def parse_input_source(raw: object) -> InputSource:
    """`{"type": "file", "file_id"}` or `{"type": "bucket_prefix", "delivery_target_id",
    "prefix", "preset"?}`; InvalidRequest names the field (`input_source.<name>`)."""
    if not isinstance(raw, Mapping):
        raise _invalid("input_source", "input_source must be an object with a type.")
    kind = raw.get("type")
    if kind not in _SOURCE_TYPES:
        raise _invalid("input_source.type", "input_source.type must be file or bucket_prefix.")
    if kind == "file":
        _only(raw, {"type", "file_id"}, "input_source")
        file_id = raw.get("file_id")
        if not isinstance(file_id, str) or not file_id.startswith("file_"):
            raise _invalid("input_source.file_id", "input_source.file_id must be a file_ id.")
        return InputSource("file", file_id=file_id)
    _only(raw, {"type", "delivery_target_id", "prefix", "preset"}, "input_source")
    target = raw.get("delivery_target_id")
    if not isinstance(target, str) or not target.startswith("dt_"):
        raise _invalid("input_source.delivery_target_id", "input_source.delivery_target_id must be a dt_ id.")
    prefix = raw.get("prefix")
    if not isinstance(prefix, str) or not prefix.strip("/") or len(prefix) > MAX_PREFIX or ".." in prefix:
        raise _invalid(
            "input_source.prefix", f"input_source.prefix must be a folder of 1-{MAX_PREFIX} characters."
        )
    preset = raw.get("preset")
    if preset is not None and (not isinstance(preset, str) or not 1 <= len(preset) <= MAX_PRESET_REF):
        raise _invalid("input_source.preset", "input_source.preset must be a preset name (name@version).")
    return InputSource("bucket_prefix", delivery_target_id=target, prefix=prefix, preset=preset)


def parse_batch_options(raw: object) -> BatchOptions:
    """The batch fields every firing sends; checked here for shape, and by batch create
    (the same rules as POST /v1/batches) when the schedule is saved."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _invalid("batch_options", "batch_options must be an object.")
    unknown = sorted(set(map(str, raw)) - BATCH_OPTION_FIELDS)
    if unknown:
        raise _invalid(f"batch_options.{unknown[0]}", f"batch_options does not take {', '.join(unknown)}.")
    if raw.get("completion_window", "24h") != "24h":
        raise _invalid("batch_options.completion_window", "completion_window must be 24h.")
    webhook = raw.get("webhook")
    if webhook is not None:
        if not isinstance(webhook, Mapping) or not isinstance(webhook.get("url"), str):
            raise _invalid("batch_options.webhook", "batch_options.webhook needs a url and a secret.")
        # a stored webhook's sealed secret is the service's own: never taken from a body
        _only(webhook, {"url", "secret", "configured"}, "batch_options.webhook")
    return cast(BatchOptions, {k: v for k, v in raw.items() if v is not None})  # its fields, checked


def parse_schedule_options(raw: object) -> BatchOptions:
    """A schedule's batch options: their shape, then the routing and metadata rules a batch
    body's get (a problem named at `batch_options.<field>`)."""
    options = parse_batch_options(raw)
    try:
        RouteRequest.from_api(options)
        parse_metadata(options.get("metadata"))
    except InvalidRequest as exc:
        where = (exc.details or {}).get("field")
        raise _invalid(f"batch_options.{where}" if where else "batch_options.metadata", exc.message) from None
    return options


def parse_state(raw: object) -> ScheduleState:
    if raw == "paused":
        return "paused"
    if raw != "active":
        raise _invalid("state", "state must be active or paused.")
    return "active"


def parse_name(raw: object, *, field: str = "name") -> str:
    if not isinstance(raw, str) or not 1 <= len(raw.strip()) <= MAX_NAME:
        raise _invalid(field, f"name must be 1-{MAX_NAME} characters.")
    return raw.strip()


def parse_description(raw: object) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or len(raw) > MAX_DESCRIPTION:
        raise _invalid("description", f"description is at most {MAX_DESCRIPTION} characters.")
    return raw


def fire_key(schedule_id: str, fire_at: str) -> str:
    """The Idempotency-Key of one firing: a duplicated trigger of the same fire time
    replays the same batch."""
    return f"sched-{schedule_id}-{fire_at}"


def _only(raw: Mapping[object, object], allowed: set[str], field: str) -> None:
    unknown = sorted(set(map(str, raw)) - allowed)
    if unknown:
        raise _invalid(f"{field}.{unknown[0]}", f"{field} does not take {', '.join(unknown)}.")


def _minutes(delta: timedelta) -> int:
    return int(delta.total_seconds() // 60)


def _invalid(field: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, code="invalid_schedule", details={"field": field})


# -- records ---------------------------------------------------------------------------------
class LaneExclusion(TypedDict):
    """A lane the latest regression run scored below the threshold."""

    score: float
    threshold: float
    version: int
    regression_id: str
    at: str


class DefinitionView(TypedDict):
    """What a version freezes, as stored and shown (the public view of batch_options)."""

    name: str
    description: str | None
    expression: str
    time_zone: str
    input_source: InputSourceView
    batch_options: BatchOptions
    golden_set: GoldenSetView | None


class ExcludedLaneView(LaneExclusion):
    lane_id: str


class ScheduleView(DefinitionView):
    """A schedule as shown: its current definition, state, times and excluded lanes."""

    id: str
    object: Literal["schedule"]
    state: ScheduleState
    version: int
    next_fire_at: str | None
    last_fire_at: str | None
    excluded_lanes: list[ExcludedLaneView]
    created_at: str
    created_by: str
    updated_at: str
    updated_by: str


@dataclass(frozen=True, slots=True)
class ScheduleDefinition:
    """What a version of a schedule defines. `input_source` and `batch_options` are the
    customer's batch settings (the stored options hold a webhook as {url, secret_sealed})."""

    name: str
    expression: str
    input_source: InputSource
    time_zone: str = "UTC"
    description: str | None = None
    batch_options: BatchOptions = field(default_factory=BatchOptions)
    golden_set: GoldenSet | None = None

    def stored(self) -> StoredDefinition:
        """The definition's fields as a schedule keeps them (its golden set as stored)."""
        golden_set = self.golden_set.to_api() if self.golden_set else None
        return view_of(self, StoredDefinition, batch_options=self.batch_options.copy(), golden_set=golden_set)


class StoredDefinition(TypedDict):
    name: str
    description: str | None
    expression: str
    time_zone: str
    input_source: InputSource
    batch_options: BatchOptions
    golden_set: GoldenSetView | None


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """A schedule as stored: its current version's definition, its state and what the
    trigger needs. `batch_options.webhook` is stored as {url, secret_sealed}."""

    schedule_id: str
    org_id: str
    name: str
    description: str | None
    state: ScheduleState
    version: int
    expression: str
    time_zone: str
    input_source: InputSource
    batch_options: BatchOptions
    golden_set: GoldenSetView | None
    created_at: str
    created_by: str
    updated_at: str
    updated_by: str
    anchor_at: str  # rate(...) fires at anchor + k * interval
    next_fire_at: str | None  # None while paused
    last_fire_at: str | None = None
    # lane id -> {score, threshold, version, regression_id, at}: lanes the latest regression
    # run scored below the threshold; a schedule's batches route around them.
    exclusions: Mapping[str, LaneExclusion] | None = None
    # How many writes the stored record has had (a change, a pause, a fire, a regression's
    # exclusions): a write of the whole record is refused when another came since its read.
    revision: int = 0

    def defined(self) -> ScheduleDefinition:
        """The current version's definition, as stored."""
        golden_set = golden_set_from_api(self.golden_set) if self.golden_set else None
        return made_from(self, ScheduleDefinition, golden_set=golden_set)

    def redefined(self, definition: ScheduleDefinition) -> Schedule:
        """This schedule with another definition (its state, version and times unchanged)."""
        return replace(self, **definition.stored())

    def definition(self) -> DefinitionView:
        """What a version freezes (the public view of batch_options)."""
        return view_of(
            self,
            DefinitionView,
            input_source=self.input_source.to_api(),
            batch_options=public_options(self.batch_options),
            golden_set=self.golden_set.copy() if self.golden_set else None,
        )

    def to_api(self) -> ScheduleView:
        return {
            "id": self.schedule_id,
            "object": "schedule",
            **self.definition(),
            "state": self.state,
            "version": self.version,
            "next_fire_at": self.next_fire_at,
            "last_fire_at": self.last_fire_at,
            "excluded_lanes": [
                {"lane_id": lane_id, **details}
                for lane_id, details in sorted((self.exclusions or {}).items())
            ],
            "created_at": self.created_at,
            "created_by": self.created_by,
            "updated_at": self.updated_at,
            "updated_by": self.updated_by,
        }


def public_options(options: BatchOptions) -> BatchOptions:
    """Batch options as shown: a webhook's URL, never its secret."""
    shown = options.copy()
    webhook = shown.get("webhook")
    if isinstance(webhook, Mapping):
        shown["webhook"] = {"url": webhook.get("url"), "configured": True}
    return shown


class RunError(TypedDict):
    code: str
    message: str


class RunView(TypedDict):
    object: Literal["schedule.run"]
    schedule_id: str
    fire_at: str
    version: int
    state: RunState
    batch_id: str | None
    error: RunError | None
    trigger: str
    created_at: str


@dataclass(frozen=True, slots=True)
class ScheduleRun:
    """One firing of a schedule, recorded once per fire time: `firing` while its batch is
    made, then `created` (with the batch) or `failed` (with the error); `skipped` when the
    schedule was paused."""

    schedule_id: str
    fire_at: str
    version: int
    state: RunState
    created_at: str
    trigger: str = "scheduler"
    batch_id: str | None = None
    error: RunError | None = None

    def to_api(self) -> RunView:
        return view_of(self, RunView, object="schedule.run")


class VersionView(DefinitionView):
    """A version as shown: its definition's fields, with who made it and when."""

    object: Literal["schedule.version"]
    schedule_id: str
    version: int
    created_at: str
    created_by: str


@dataclass(frozen=True, slots=True)
class ScheduleVersion:
    """One version of a schedule: the definition it froze, who made it and when."""

    schedule_id: str
    version: int
    definition: DefinitionView
    created_at: str
    created_by: str

    @classmethod
    def of(cls, schedule: Schedule) -> ScheduleVersion:
        """The version a schedule's current definition makes."""
        return cls(
            schedule.schedule_id,
            schedule.version,
            schedule.definition(),
            schedule.updated_at,
            schedule.updated_by,
        )

    def to_api(self) -> VersionView:
        return {
            "object": "schedule.version",
            "schedule_id": self.schedule_id,
            "version": self.version,
            **self.definition,
            "created_at": self.created_at,
            "created_by": self.created_by,
        }
