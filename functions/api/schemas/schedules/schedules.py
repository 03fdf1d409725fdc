"""Request and response models: recurring schedules, their runs, versions and golden-set
regression runs (docs/schedules.md).

Each body is checked here, once, by the rules of domain/schedules/schedules.py as its fields'
validators, and becomes the service's command (services/schedules/commands.py); each problem
is `invalid_schedule` with `details.field` (a path such as `golden_set.items[2].expected`).
The service then checks what only it can: the source exists, the webhook URL, the golden
set's model in the catalog. A webhook secret is write-only: it is stored sealed (KMS) and
shown as `{url, configured: true}`.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic_core import PydanticCustomError

from batchroute.domain.delivery.webhook_targets import WEBHOOK_SECRET_MAX, WEBHOOK_SECRET_MIN
from batchroute.domain.presets.golden_sets import (
    DEFAULT_THRESHOLD,
    MAX_EXPECTED_CHARS,
    MAX_GOLDEN_ITEMS,
    MAX_GOLDEN_MODEL,
    MAX_SCORER_PATH,
    GoldenSet,
    parse_golden_set,
)
from batchroute.domain.schedules.schedules import (
    BATCH_OPTION_FIELDS,
    MAX_DESCRIPTION,
    MAX_NAME,
    MAX_PREFIX,
    MAX_PRESET_REF,
    MAX_TIME_ZONE,
    MIN_INTERVAL,
    InputSource,
    ScheduleDefinition,
    ScheduleState,
    parse_description,
    parse_expression,
    parse_input_source,
    parse_name,
    parse_schedule_options,
    parse_state,
    parse_time_zone,
)
from batchroute.domain.schedules.schedules import BatchOptions as ScheduleBatchOptions
from batchroute.errors import InvalidRequest
from batchroute.services.schedules.commands import CreateSchedule, UpdateSchedule
from functions.api.schemas.batches.batches import BatchCreateRequest
from functions.api.schemas.common import SOME_TEXT, ContractBody, MoneyOut, domain_rule, omittable, refusal

_MINUTES = int(MIN_INTERVAL.total_seconds() // 60)
_EXPRESSION = (
    "A 5-field cron (`30 2 * * *`, read in time_zone) or `rate(N minutes|hours|days)`; "
    f"fires at most every {_MINUTES} minutes"
)
_SOURCE = (
    'Where each firing reads its items: `{"type": "file", "file_id"}` (a stored input file) or '
    '`{"type": "bucket_prefix", "delivery_target_id", "prefix", "preset"?}` (every JSONL object '
    "under the prefix in the org's delivery target; items naming no preset get `preset`)"
)
_OPTIONS = (
    "The batch fields every firing sends, as in POST /v1/batches: webhook {url, secret}, "
    "routing_mode, privacy_tier, sla_tier, region(s), max_price, required_tools, metadata, "
    "completion_window (24h)"
)
GOLDEN_SET_DOC = (
    f"A golden set: {{model, items: [{{input, expected}}] (1-{MAX_GOLDEN_ITEMS}), scorer: "
    "{type: exact|contains|json_field (path)|numeric (tolerance)}, threshold (0-1)}; "
    "null: none"
)


# -- what the OpenAPI document shows of each field: the shapes its rule accepts -------------
class FileSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["file"]
    file_id: str = Field(pattern=r"^file_", description="A stored input file (POST /v1/files)")


class BucketPrefixSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["bucket_prefix"]
    delivery_target_id: str = Field(pattern=r"^dt_", description="One of the org's delivery targets")
    prefix: str = Field(
        max_length=MAX_PREFIX,
        pattern=r"[^/]",
        description="A folder of the target's bucket: not only slashes, no `..`",
        json_schema_extra={"not": {"pattern": r"\.\."}},
    )
    preset: Annotated[str, Field(min_length=1, max_length=MAX_PRESET_REF)] | None = Field(
        default=None, description="The preset (`name@version`) of the items that name none"
    )


class ScheduleWebhook(BaseModel):
    """batch_options.webhook: checked as a batch's webhook when the schedule is saved."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="A public https URL, as a batch's webhook")
    secret: str | None = Field(
        default=None,
        description="Write-only; may be left out on an update that keeps the URL (the stored one is kept)",
        # Checked with the batch's webhook rules when the schedule is saved (their codes), so
        # documented here rather than enforced twice.
        json_schema_extra={"minLength": WEBHOOK_SECRET_MIN, "maxLength": WEBHOOK_SECRET_MAX},
    )
    configured: bool | None = Field(default=None, description="read-only: accepted and ignored")


def _batch_options_model() -> type[BaseModel]:
    """The batch body's own fields (their documented shapes), as many as a schedule sends."""
    sent = {
        name: (info.annotation, info)
        for name, info in BatchCreateRequest.model_fields.items()
        if name in BATCH_OPTION_FIELDS - {"webhook"}
    }
    options: type[BaseModel] = create_model(
        "ScheduleBatchOptions",
        __config__=ConfigDict(extra="forbid"),
        webhook=(ScheduleWebhook | None, None),
        **sent,  # type: ignore[call-overload]
    )
    return options


class GoldenItemBody(BaseModel):
    input: str | dict[str, Any] = Field(
        description="A prompt, or `{messages: [...]}` as a batch item's input may hold"
    )
    expected: Any = Field(
        description=f"exact, contains: a text of 1-{MAX_EXPECTED_CHARS} characters; numeric: a number; "
        f"json_field: any JSON value (at most {MAX_EXPECTED_CHARS} characters of JSON)"
    )


class TextScorer(BaseModel):
    type: Literal["exact", "contains"]


class JsonFieldScorer(BaseModel):
    type: Literal["json_field"]
    path: str = Field(min_length=1, max_length=MAX_SCORER_PATH, description="e.g. a.b.0.c")


class NumericScorer(BaseModel):
    type: Literal["numeric"]
    tolerance: float = Field(default=0, ge=0)


Scorers = Annotated[TextScorer | JsonFieldScorer | NumericScorer, Field(discriminator="type")]


class GoldenSetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, max_length=MAX_GOLDEN_MODEL, description="An exact catalog model id")
    items: list[GoldenItemBody] = Field(min_length=1, max_length=MAX_GOLDEN_ITEMS)
    scorer: Scorers | Literal["exact", "contains", "json_field", "numeric"] = Field(
        description="An object, or its type alone"
    )
    threshold: float = Field(
        default=DEFAULT_THRESHOLD, ge=0, le=1, description="The share of items that must pass"
    )


def _expression(value: Any, name: str) -> str:
    return parse_expression(value, field=name).text


def _time_zone(value: Any, name: str) -> str:
    return parse_time_zone(value, field=name).key


def _golden_set(value: Any, name: str) -> GoldenSet | None:
    return parse_golden_set(value, field=name)


# The fields in the order their rules run: the first problem is the one answered.
Expression = Annotated[str, domain_rule(_expression, Annotated[str, Field(pattern=SOME_TEXT)])]
TimeZone = Annotated[
    str,
    domain_rule(
        _time_zone,
        Annotated[
            str,
            Field(max_length=MAX_TIME_ZONE, pattern="^[^/]", json_schema_extra={"not": {"pattern": r"\.\."}}),
        ]
        | None,
    ),
]
Source = Annotated[
    InputSource,
    domain_rule(
        lambda value, _name: parse_input_source(value),
        Annotated[FileSource | BucketPrefixSource, Field(discriminator="type")],
    ),
]
BatchOptions = Annotated[
    ScheduleBatchOptions,
    domain_rule(lambda value, _name: parse_schedule_options(value), _batch_options_model() | None),
]
GoldenSetField = Annotated[GoldenSet | None, domain_rule(_golden_set, GoldenSetBody | None)]
Name = Annotated[
    str,
    domain_rule(
        lambda value, name: parse_name(value, field=name),
        Annotated[str, Field(min_length=1, max_length=MAX_NAME, pattern=SOME_TEXT)],
    ),
]
Description = Annotated[
    str | None,
    domain_rule(
        lambda value, _name: parse_description(value),
        Annotated[str, Field(max_length=MAX_DESCRIPTION)] | None,
    ),
]


class _ScheduleBody(ContractBody):
    model_config = ConfigDict(extra="forbid")
    error_code: ClassVar[str] = "invalid_schedule"

    @classmethod
    def unknown_fields(cls, unknown: list[str]) -> PydanticCustomError:
        return refusal(cls.error_code, f"Unknown field(s): {', '.join(unknown)}.", {"field": unknown[0]})


class ScheduleCreate(_ScheduleBody):
    """A recurring schedule. Unknown fields are refused."""

    model_config = ConfigDict(
        json_schema_extra={"additionalProperties": False, "required": ["name", "expression", "input_source"]}
    )

    expression: Expression = omittable(_EXPRESSION)
    time_zone: TimeZone = omittable("An IANA time zone; default UTC")
    input_source: Source = omittable(_SOURCE)
    batch_options: BatchOptions = omittable(_OPTIONS)
    golden_set: GoldenSetField = omittable(GOLDEN_SET_DOC)
    name: Name = omittable(f"1-{MAX_NAME} characters")
    description: Description = omittable(f"At most {MAX_DESCRIPTION} characters")
    state: Annotated[ScheduleState, domain_rule(lambda value, _name: parse_state(value), ScheduleState)] = (
        omittable("Default active")
    )

    @model_validator(mode="before")
    @classmethod
    def _required_first(cls, data: Any) -> Any:
        """The required fields (null is not given), then the state, before any other rule."""
        for required in ("name", "expression", "input_source"):
            if data.get(required) is None:
                raise InvalidRequest(
                    f"{required} is required.", code="invalid_schedule", details={"field": required}
                )
        parse_state(data.get("state", "active"))
        return data

    def command(self) -> CreateSchedule:
        return CreateSchedule(
            ScheduleDefinition(
                name=self.name,
                expression=self.expression,
                input_source=self.input_source,
                time_zone=self.time_zone or "UTC",
                description=self.description,
                batch_options=self.batch_options or {},
                golden_set=self.golden_set,
            ),
            state=self.state or "active",
        )


class ScheduleUpdate(_ScheduleBody):
    """The fields to change; a change makes a new version. Unknown fields are refused."""

    model_config = ConfigDict(json_schema_extra={"additionalProperties": False})

    expression: Expression = omittable(_EXPRESSION)
    time_zone: TimeZone = omittable("An IANA time zone")
    input_source: Source = omittable(_SOURCE)
    batch_options: BatchOptions = omittable(
        _OPTIONS + "; a webhook given without its secret keeps the stored one when the URL is unchanged"
    )
    golden_set: GoldenSetField = omittable(GOLDEN_SET_DOC)
    name: Name = omittable(f"1-{MAX_NAME} characters")
    description: Description = omittable(f"At most {MAX_DESCRIPTION} characters")

    def command(self) -> UpdateSchedule:
        given = self.given()
        return UpdateSchedule(frozenset(given), **given)


class ExcludedLane(BaseModel):
    lane_id: str
    score: float = Field(description="The lane's latest golden-set score (0-1)")
    threshold: float
    version: int = Field(description="The schedule version the failing run benchmarked")
    regression_id: str
    at: str


class ScheduleOut(BaseModel):
    id: str = Field(description="sched_...")
    object: Literal["schedule"]
    name: str
    description: str | None
    expression: str
    time_zone: str
    input_source: dict[str, Any]
    batch_options: dict[str, Any] = Field(description="A webhook shows {url, configured: true}")
    golden_set: dict[str, Any] | None
    state: Literal["active", "paused"]
    version: int
    next_fire_at: str | None = Field(description="The next fire (UTC); null while paused")
    last_fire_at: str | None
    excluded_lanes: list[ExcludedLane] = Field(
        description="Lanes the latest regression run scored below the threshold: the schedule's "
        "batches route around them (`regression_failed`)"
    )
    created_at: str
    created_by: str = Field(description="The user (or key) that created the schedule")
    updated_at: str
    updated_by: str


class ScheduleList(BaseModel):
    object: Literal["list"]
    data: list[ScheduleOut]
    next_cursor: str | None


class ScheduleDeleted(BaseModel):
    id: str
    object: Literal["schedule"]
    deleted: Literal[True]


class RunError(BaseModel):
    code: str
    message: str


class ScheduleRun(BaseModel):
    object: Literal["schedule.run"]
    schedule_id: str
    fire_at: str = Field(description="The fire time this run is for (UTC)")
    version: int
    state: Literal["firing", "created", "failed", "skipped"]
    batch_id: str | None = Field(description="The batch the firing created")
    error: RunError | None = Field(description="Why no batch was created (e.g. insufficient_credits)")
    trigger: str = Field(description="scheduler (EventBridge), sweeper (the due index)")
    created_at: str


class ScheduleRunList(BaseModel):
    object: Literal["list"]
    data: list[ScheduleRun]
    next_cursor: str | None


class ScheduleVersion(BaseModel):
    object: Literal["schedule.version"]
    schedule_id: str
    version: int
    name: str
    description: str | None
    expression: str
    time_zone: str
    input_source: dict[str, Any]
    batch_options: dict[str, Any]
    golden_set: dict[str, Any] | None
    created_at: str
    created_by: str


class ScheduleVersionList(BaseModel):
    object: Literal["list"]
    data: list[ScheduleVersion]
    next_cursor: str | None = Field(description="the older versions: pass as `cursor`; null at version 1")


class TokenCounts(BaseModel):
    prompt_tokens: int
    completion_tokens: int


class LaneBenchmark(BaseModel):
    lane_id: str
    provider: str
    model: str
    score: float = Field(description="Share of golden items that passed (0-1)")
    passed: bool = Field(description="score >= threshold")
    items_passed: int
    items_total: int
    errors: list[dict[str, str]] = Field(description="Items the lane could not answer: index, code")
    usage: TokenCounts
    cost: MoneyOut


class RegressionRunFields(BaseModel):
    """A golden-set regression run's record, shared by schedules and presets."""

    regression_id: str
    version: int
    trigger: Literal["version_change", "on_demand"]
    scorer: dict[str, Any]
    threshold: float
    created_at: str
    completed_at: str
    lanes: list[LaneBenchmark]
    charged: MoneyOut = Field(description="Charged to the wallet at direct prices")


class RegressionRun(RegressionRunFields):
    object: Literal["schedule.regression_run"]
    schedule_id: str


class RegressionRunList(BaseModel):
    object: Literal["list"]
    data: list[RegressionRun]
