"""The batch record: what the batches table keeps about one batch (docs/batches.md, "The batch
record, exactly"), as one frozen dataclass.

`POST /v1/batches` (and the vendor-compatible and queued-chat surfaces through it) writes the
record `priced`; the workflow steps and the sweeper update it field by field; a direct chat
request writes its own (`source = chat_direct`). Money is integer micros, times are the ISO
8601 strings as stored. A field that only some records carry is Optional (None: absent).
Nested structures are small dataclasses where their shape is fixed, the routing context's
RoutePlanView for the quote's `plan` (kept verbatim), plain mappings where they are free-form
(the `billing` receipt, `lane_tallies`).

`to_mapping` / `from_mapping` are the record's plain-value form (what the DynamoDB adapter
stores, `adapters/dynamo/batch_records.py`); values keep the stored key names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal, NotRequired, TypedDict, TypeVar, cast

from batchroute.domain.batches.states import BatchState
from batchroute.domain.billing.settlement import DirectReceipt, InlineReceipt
from batchroute.domain.catalog.catalog import FeeSchedule
from batchroute.domain.catalog.pricing import NO_USAGE, TokenUsage, UsageFields
from batchroute.domain.routing.engine import RoutePlanView
from batchroute.domain.routing.gates import RoutingFields, stored_routing_fields
from batchroute.domain.routing.lanes import LaneAttempt
from batchroute.domain.stored import from_stored, sparse
from batchroute.ids import has_prefix, suffix_of
from batchroute.money import Money
from batchroute.transactions import TransactItem

BatchSource = Literal["native", "compat", "chat", "chat_direct"]
BatchFeeKind = Literal["batch", "workflow", "direct"]
T = TypeVar("T")


class ExecutionSummaryItem(TypedDict):
    latest_error: str | None


class BatchChanges(TypedDict, total=False):
    """The META attributes the workflow steps, the sweeper and cancel SET on a stored batch
    (`BatchStore.update`, and a transition's `extra`), under their stored names."""

    completed_at: str
    cancel_reason: str
    execution_arn: str
    retry_of: str
    execution_summary: ExecutionSummaryItem
    chunk_count: int
    presets: list[str]
    artifacts: dict[str, str | int]  # ArtifactKeys.to_mapping
    counts: dict[str, int]
    lane_tallies: dict[str, dict[str, int]]
    finalizing_at: str
    finalized_at: str
    billing: InlineReceipt
    settled_at: str


class PlanChanges(TypedDict, total=False):
    """What Intake SETs on the batch's PLAN item: the chunk model counts and the intake."""

    chunk_models: list[dict[str, int]]
    intake: BatchIntake


class BatchWebhookItem(TypedDict):
    url: str
    secret_sealed: str


class _LaneIdField(TypedDict, total=False):
    lane_id: str


class _AnsweredField(TypedDict, total=False):
    answered: bool  # only when true: the answer was delivered whole (UsageCheckpoint)


class UsageCheckpointItem(UsageFields, _LaneIdField, _AnsweredField):
    pass


class WorkOrderRefItem(TypedDict):
    id: str
    client_reference: str | None


@dataclass(frozen=True, slots=True)
class ExecutionSummary:
    latest_error: str | None = None

    def to_mapping(self) -> ExecutionSummaryItem:
        return {"latest_error": self.latest_error}


@dataclass(frozen=True, slots=True)
class BatchWebhook:
    """The batch's own webhook: its URL and the KMS-sealed secret (never the secret)."""

    url: str
    secret_sealed: str

    def to_mapping(self) -> BatchWebhookItem:
        return {"url": self.url, "secret_sealed": self.secret_sealed}


@dataclass(frozen=True, kw_only=True, slots=True)
class ArtifactKeys:
    """The S3 keys of the final artifacts (Finalize; the receipt's at Settle) and the number
    of result and error rows."""

    results_key: str | None = None
    errors_key: str | None = None
    result_count: int | None = None
    error_count: int | None = None
    receipt_key: str | None = None

    def to_mapping(self) -> dict[str, str | int]:
        """The keys and counts the record has, under their field names."""
        return sparse(self)  # every field defaults to None: the ones set


@dataclass(frozen=True, kw_only=True, slots=True)
class CompatFields:
    """What a batch made on the vendor-compatible surface keeps (docs/compat.md): its endpoint,
    input file, body format and the ids its output and error files will have."""

    endpoint: str | None = None
    input_file_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    completion_window: str | None = None
    body_format: str | None = None

    def to_mapping(self) -> dict[str, str | int]:
        """The fields the record has, under their names (all strings)."""
        return sparse(self)  # every field defaults to None: the ones set


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageCheckpoint:
    """A direct chat request's usage streamed so far (what the sweeper charges if it dies),
    or its final usage once its answer was delivered whole (`answered`) but its own
    settlement failed: the sweeper then completes the record rather than failing it."""

    lane_id: str | None = None
    usage: TokenUsage = NO_USAGE  # as the vendor reported it so far
    answered: bool = False

    def to_mapping(self) -> UsageCheckpointItem:
        lane: _LaneIdField = {"lane_id": self.lane_id} if self.lane_id is not None else {}
        answered: _AnsweredField = {"answered": True} if self.answered else {}
        return {**lane, **self.usage.to_fields(), **answered}


@dataclass(frozen=True, slots=True)
class WorkOrderRef:
    """The work order a batch belongs to, as its record keeps it (docs/work-orders.md)."""

    id: str
    client_reference: str | None = None

    def to_mapping(self) -> WorkOrderRefItem:
        return {"id": self.id, "client_reference": self.client_reference}

    @classmethod
    def from_mapping(cls, value: WorkOrderRefItem) -> WorkOrderRef | None:
        """None for a stored value without an id."""
        if not value.get("id"):
            return None
        return cls(str(value["id"]), _str(value.get("client_reference")))


@dataclass(frozen=True, slots=True)
class IntakeError:
    """Why the input file failed the Intake step: the API error it ends the batch with
    (`details` is the answer the client sees, the preflight's whole answer included)."""

    code: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BatchIntake:
    """An input file still to read (the Intake step): the file, the item count and digest
    create priced, and the batch body's options its items are read with (its routing
    fields and batch-wide preset); `done` once the chunks are written, `error` when the
    file failed."""

    file_id: str
    digest: str
    item_count: int
    options: RoutingFields
    done: bool = False
    error: IntakeError | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SurfaceFields:
    """What the surface that made a batch keeps on its record besides `source`: the
    vendor-compatible surface its `compat` fields, a queued chat request its model and job."""

    compat: CompatFields | None = None
    chat_model: str | None = None
    chat_job_id: str | None = None
    schedule_id: str | None = None  # a recurring schedule's firing (docs/schedules.md)
    schedule_version: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchRecord:
    """One batch as stored. Batch create writes every field of the first two groups; those
    that are Optional there are None on a record that lacks them (readers apply the defaults
    the API shows; a webhook event's summary carries only what the record has)."""

    # -- identity and state (every record) --------------------------------------------------
    batch_id: str
    org_id: str
    state: BatchState
    created_at: str
    source: BatchSource = "native"
    deadline_at: str | None = None
    state_changed_at: str | None = None
    completed_at: str | None = None  # once terminal
    # -- the request ---------------------------------------------------------------------
    routing_mode: str | None = None
    sla_tier: str | None = None
    privacy_tier: str | None = None
    quote_id: str | None = None
    created_by: str | None = None  # the user or API key id
    metadata: Mapping[str, str] | None = None
    webhook: BatchWebhook | None = None
    # deadline rescue: {mode, max_overage_micros} (domain/routing/rescue.py:RescueSetting);
    # absent: within_reservation
    rescue: Mapping[str, str] | None = None
    # -- the work: items in S3 chunks, the quote's plan and the request's routing (PLAN item)
    item_count: int = 0
    chunk_count: int = 0
    chunk_models: Sequence[Mapping[str, int]] | None = None  # per chunk: model -> its items
    plan: RoutePlanView | None = None  # the quote snapshot's `routing`, verbatim
    intake: BatchIntake | None = None  # an input file still to read (the Intake step)
    # the routing fields the request gave and its batch-wide preset (a batch from a quote:
    # the quote's); None on a record written before they were kept. A retry replays them.
    routing_fields: RoutingFields | None = None
    # -- money ---------------------------------------------------------------------------
    reservation_id: str | None = None
    reserved_micros: int = 0
    # deadline rescue's allow_overage: the second holds taken (ids) and their sum (docs/ledger.md)
    overage_hold_ids: Sequence[str] | None = None
    overage_held_micros: int | None = None
    fee_kind: BatchFeeKind = "batch"
    # the workflow product whose contract the batch fulfils (a workflow quote's, or its retry's)
    workflow_product: str | None = None
    # the fee schedule its price was locked with (its quote's; an internal quote's at create),
    # which Settle charges with (PLAN item); None on a record written before it was kept
    fees: FeeSchedule | None = None
    # -- progress ------------------------------------------------------------------------
    counts: Mapping[str, int] | None = None  # total, pending, running, completed, failed, canceled
    execution_arn: str | None = None
    workflow_steps: Mapping[str, str] = field(default_factory=dict)  # step -> when it ran
    execution_summary: ExecutionSummary | None = None
    cancel_reason: str | None = None
    retry_of: str | None = None  # the batch whose failed items this one retries
    work_order: WorkOrderRef | None = None  # the work order it belongs to (docs/work-orders.md)
    presets: Sequence[str] | None = None  # preset versions its items used, `name@N` (docs/presets.md)
    # -- the end: Finalize, Settle --------------------------------------------------------
    artifacts: ArtifactKeys | None = None
    lane_tallies: Mapping[str, Mapping[str, int]] | None = None  # lane key -> rows and tokens
    finalizing_at: str | None = None  # when Finalize moved it to `finalizing` (none if terminal before)
    finalized_at: str | None = None
    # the billing receipt (docs/batches.md, Settle); a direct chat request's, its own
    billing: InlineReceipt | DirectReceipt | None = None
    settled_at: str | None = None
    artifacts_reclaimed_at: str | None = None  # retention took the result bytes (docs/retention.md)
    # -- the vendor-compatible surface ------------------------------------------------------
    compat: CompatFields | None = None
    # -- chat: a queued request (source chat) and a direct one (source chat_direct) ---------
    chat_model: str | None = None
    chat_job_id: str | None = None
    stream: bool | None = None
    planned_lanes: Sequence[str] | None = None
    lane_id: str | None = None  # the lane that served a direct request
    provider: str | None = None
    attempts: tuple[LaneAttempt, ...] | None = None  # per lane tried: lane_id, provider, error
    # domain/catalog/pricing.py:UsageFields (the tool uses a map of their own)
    usage: Mapping[str, int | Mapping[str, int]] | None = None
    usage_checkpoint: UsageCheckpoint | None = None
    checkpoint_at: str | None = None
    # -- a recurring schedule's firing (docs/schedules.md) -----------------------------------
    schedule_id: str | None = None
    schedule_version: int | None = None

    @property
    def latest_error(self) -> str | None:
        return self.execution_summary.latest_error if self.execution_summary is not None else None

    @property
    def held_micros(self) -> int:
        """What the batch holds on the wallet: its reservation and any rescue overage holds."""
        return self.reserved_micros + (self.overage_held_micros or 0)

    @property
    def work_order_id(self) -> str | None:
        return self.work_order.id if self.work_order is not None else None

    @property
    def results_key(self) -> str | None:
        """The final results artifact, once Finalize wrote it."""
        return self.artifacts.results_key if self.artifacts is not None else None

    def to_mapping(self) -> dict[str, Any]:
        """The record as stored: plain values under the stored names, absent fields left out."""
        values: dict[str, Any] = {}
        for name in FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, _NESTED):
                value = value.to_mapping()
            elif isinstance(value, BatchIntake):
                value = sparse(value)
            elif name == "attempts":
                value = [attempt.to_item() for attempt in value]
            elif name in _SEQUENCES:
                value = [dict(v) if isinstance(v, Mapping) else v for v in value]
            elif isinstance(value, Mapping):
                value = dict(value)
            values[name] = value
        return values

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> BatchRecord:
        """The record of its stored values (numbers may be Decimals); other keys are ignored."""
        return cls(
            **{name: _str(values.get(name)) for name in _TEXT_FIELDS},
            batch_id=str(values["batch_id"]),
            org_id=str(values["org_id"]),
            state=cast(BatchState, str(values["state"])),
            created_at=str(values["created_at"]),
            source=cast(BatchSource, str(values.get("source") or "native")),
            metadata=_strings(values.get("metadata")),
            webhook=_webhook(values.get("webhook")),
            rescue=_strings(values.get("rescue")),
            item_count=int(values.get("item_count") or 0),
            chunk_count=int(values.get("chunk_count") or 0),
            chunk_models=_chunk_models(values.get("chunk_models")),
            plan=_plan(values.get("plan")),
            intake=_intake(values.get("intake")),
            routing_fields=stored_routing_fields(values.get("routing_fields")),
            reserved_micros=int(values.get("reserved_micros") or 0),
            overage_hold_ids=_list(values.get("overage_hold_ids"), str),
            overage_held_micros=_int(values.get("overage_held_micros")),
            fee_kind=cast(BatchFeeKind, str(values.get("fee_kind") or "batch")),
            fees=FeeSchedule.from_mapping(values.get("fees")),
            counts=_ints(values.get("counts")),
            workflow_steps=_strings(values.get("workflow_steps")) or {},
            execution_summary=_execution_summary(values.get("execution_summary")),
            work_order=_work_order(values.get("work_order")),
            presets=_list(values.get("presets"), str),
            artifacts=_artifacts(values.get("artifacts")),
            lane_tallies=_tallies(values.get("lane_tallies")),
            billing=_receipt(values.get("billing")),
            compat=_compat(values.get("compat")),
            stream=bool(values["stream"]) if values.get("stream") is not None else None,
            planned_lanes=_list(values.get("planned_lanes"), str),
            attempts=_attempts(values.get("attempts")),
            usage=_usage(values.get("usage")),
            usage_checkpoint=_checkpoint(values.get("usage_checkpoint")),
            schedule_version=_int(values.get("schedule_version")),
        )


def item_counts(
    total: int, *, pending: int = 0, running: int = 0, completed: int = 0, failed: int = 0, canceled: int = 0
) -> dict[str, int]:
    """A batch's `counts`: its items in each state, every state named (none left out)."""
    return {
        "total": total,
        "pending": pending,
        "running": running,
        "completed": completed,
        "failed": failed,
        "canceled": canceled,
    }


# The fields stored as plain text or absent (None), read back as they are.
_TEXT_FIELDS: Final[tuple[str, ...]] = (
    "deadline_at",
    "state_changed_at",
    "completed_at",
    "routing_mode",
    "sla_tier",
    "privacy_tier",
    "quote_id",
    "created_by",
    "reservation_id",
    "workflow_product",
    "execution_arn",
    "cancel_reason",
    "retry_of",
    "finalizing_at",
    "finalized_at",
    "settled_at",
    "artifacts_reclaimed_at",
    "chat_model",
    "chat_job_id",
    "lane_id",
    "provider",
    "checkpoint_at",
    "schedule_id",
)


FIELDS: Final[tuple[str, ...]] = tuple(f.name for f in fields(BatchRecord))
_SEQUENCES: Final = frozenset({"chunk_models", "planned_lanes", "presets", "overage_hold_ids"})
_NESTED: Final = (
    FeeSchedule,
    ExecutionSummary,
    BatchWebhook,
    ArtifactKeys,
    CompatFields,
    UsageCheckpoint,
    WorkOrderRef,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class IdempotencyRecord:
    """The first answer to a create request under an Idempotency-Key, replayed byte for byte
    to a repeat of the same request for 24 h (`ttl`, epoch seconds)."""

    org_id: str
    key: str
    request_hash: str
    status_code: int
    body: str
    batch_id: str
    created_at: str
    ttl: int


# -- what the create transaction can refuse (adapters/dynamo/batch_records.py) -----------------
class DuplicateIdempotencyKey(Exception):
    """Another request with the same Idempotency-Key committed first: answer as it did."""


class ExtraItemRefused(Exception):
    """A caller's extra item of the create transaction (`extra_items`) was refused by its
    condition (a work order closed or full meanwhile: docs/work-orders.md)."""

    def __init__(self, index: int) -> None:
        super().__init__(f"extra item {index} refused")
        self.index = index


class FundingMoved(Exception):
    """The wallet, the spending limit's room or its controls moved since they were read (or
    another transaction collided): decide the funding again on fresh reads."""


class OverageRefused(Exception):
    """An overage hold's batch condition refused it: the batch is no longer running (or was
    settled), or the hold would take its overage holds past the `allow_overage` cap."""


@dataclass(frozen=True)
class OverageHold:
    """A deadline rescue's overage hold (docs/ledger.md, "The overage hold of a rescue"),
    written in ONE transaction (`hold_overage`): the `reservation` (`LedgerStore.reserve_items`,
    bounded by the hard limit's guard), the batch's record of the hold (`hold_id` appended to
    its `overage_hold_ids`, `amount` to its `overage_held_micros`, only while the batch runs
    unsettled and its holds stay within `cap`, and its work order is as read: none when
    `membership` is empty), the spending limit's `limit_checks`, then `membership` (the work
    order's count of the hold, services/work_orders/service.py:overage_items)."""

    batch_id: str
    hold_id: str
    amount: Money
    cap: Money
    reservation: Sequence[TransactItem]
    limit_checks: Sequence[TransactItem] = ()
    membership: Sequence[TransactItem] = ()


# -- reading stored values ---------------------------------------------------------------------
def _attempts(value: Any) -> tuple[LaneAttempt, ...] | None:
    """A direct chat request's lanes tried, as stored (`LaneAttempt.to_item`)."""
    if not isinstance(value, list):
        return None
    return tuple(
        LaneAttempt(str(a.get("lane_id")), str(a.get("provider")), _str(a.get("error")))
        for a in value
        if isinstance(a, Mapping)
    )


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    """A whole number as stored (a Decimal from DynamoDB); absent or zero reads None."""
    return int(value) if value else None


def _work_order(value: Any) -> WorkOrderRef | None:
    return WorkOrderRef.from_mapping(cast(WorkOrderRefItem, value)) if isinstance(value, Mapping) else None


def _intake(value: Any) -> BatchIntake | None:
    """The stored intake (`dataclasses.asdict` of it; numbers may be Decimals)."""
    if not isinstance(value, Mapping):
        return None
    error = value.get("error")
    return from_stored(
        BatchIntake,
        value,
        item_count=int(value["item_count"]),
        options=stored_routing_fields(value.get("options")) or RoutingFields(),
        done=bool(value.get("done")),
        error=from_stored(IntakeError, error, details=dict(error.get("details") or {})) if error else None,
    )


def _plan(value: Any) -> RoutePlanView | None:
    """The snapshot's routing as the batch keeps it (verbatim: numbers may be Decimals)."""
    return cast(RoutePlanView, dict(value)) if isinstance(value, Mapping) else None


def _receipt(value: Any) -> InlineReceipt | DirectReceipt | None:
    """The receipt as Settle (or a direct request's settlement) wrote it, verbatim: numbers
    may be Decimals."""
    return cast("InlineReceipt | DirectReceipt", dict(value)) if isinstance(value, Mapping) else None


def _strings(value: Any) -> dict[str, str] | None:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else None


def _ints(value: Any) -> dict[str, int] | None:
    return {str(k): int(v) for k, v in value.items()} if isinstance(value, Mapping) else None


def _usage(value: Any) -> dict[str, int | Mapping[str, int]] | None:
    """A direct request's usage: its token counts, and the hosted tool uses by name."""
    if not isinstance(value, Mapping):
        return None
    return {str(k): _ints(v) or {} if isinstance(v, Mapping) else int(v) for k, v in value.items()}


def _list(value: Any, kind: Callable[[Any], T]) -> list[T] | None:
    return None if value is None else [kind(v) for v in value]


def _chunk_models(value: Any) -> list[dict[str, int]] | None:
    if value is None:
        return None
    return [{str(model): int(n) for model, n in chunk.items()} for chunk in value]


def _tallies(value: Any) -> dict[str, Mapping[str, int]] | None:
    if not isinstance(value, Mapping):
        return None
    return {str(key): _ints(tally) or {} for key, tally in value.items()}


def _webhook(value: Any) -> BatchWebhook | None:
    if not isinstance(value, Mapping):
        return None
    return BatchWebhook(url=str(value.get("url") or ""), secret_sealed=str(value.get("secret_sealed") or ""))


def _execution_summary(value: Any) -> ExecutionSummary | None:
    if not isinstance(value, Mapping):
        return None
    return ExecutionSummary(_str(value.get("latest_error")))


def _artifacts(value: Any) -> ArtifactKeys | None:
    if not isinstance(value, Mapping):
        return None
    return ArtifactKeys(
        results_key=_str(value.get("results_key")),
        errors_key=_str(value.get("errors_key")),
        result_count=None if value.get("result_count") is None else int(value["result_count"]),
        error_count=None if value.get("error_count") is None else int(value["error_count"]),
        receipt_key=_str(value.get("receipt_key")),
    )


def _compat(value: Any) -> CompatFields | None:
    if not isinstance(value, Mapping):
        return None
    return CompatFields(
        endpoint=_str(value.get("endpoint")),
        input_file_id=_str(value.get("input_file_id")),
        output_file_id=_str(value.get("output_file_id")),
        error_file_id=_str(value.get("error_file_id")),
        completion_window=_str(value.get("completion_window")),
        body_format=_str(value.get("body_format")),
    )


def _checkpoint(value: Any) -> UsageCheckpoint | None:
    if not isinstance(value, Mapping):
        return None
    return UsageCheckpoint(
        lane_id=_str(value.get("lane_id")),
        usage=TokenUsage.from_fields(value),
        answered=value.get("answered") is True,
    )


class BatchEventSummary(TypedDict):
    """The `batch` object of an event: id, state and the public summary fields the record has."""

    id: str
    state: BatchState
    counts: NotRequired[dict[str, int]]
    created_at: str
    deadline_at: NotRequired[str]
    completed_at: NotRequired[str]
    routing_mode: NotRequired[str]
    sla_tier: NotRequired[str]
    privacy_tier: NotRequired[str]
    execution_summary: NotRequired[ExecutionSummaryItem]


_SUMMARY_TEXTS: Final[
    tuple[Literal["deadline_at", "completed_at", "routing_mode", "sla_tier", "privacy_tier"], ...]
] = ("deadline_at", "completed_at", "routing_mode", "sla_tier", "privacy_tier")


def batch_summary(batch: BatchRecord) -> BatchEventSummary:
    """The `batch` object of an event, from the batch record: id, state and the public
    summary fields it has, as stored. Never the webhook, its secret or internal bookkeeping."""
    summary: BatchEventSummary
    if batch.counts is not None:  # between state and created_at, as the record stores them
        summary = {
            "id": batch.batch_id,
            "state": batch.state,
            "counts": dict(batch.counts),
            "created_at": batch.created_at,
        }
    else:
        summary = {"id": batch.batch_id, "state": batch.state, "created_at": batch.created_at}
    for name in _SUMMARY_TEXTS:
        if (text := getattr(batch, name)) is not None:
            summary[name] = text
    if batch.execution_summary is not None:
        summary["execution_summary"] = batch.execution_summary.to_mapping()
    return summary


def missing_reason(batch: BatchRecord) -> tuple[str, str]:
    """The error code and message of an item that got no result, in the results artifacts
    and the items listing alike. "Finished", not "ran": the item may have been in flight (a
    vendor job the cancel stopped) as much as never sent."""
    state = batch.state
    if state == "canceled":
        return "canceled", "The batch was canceled before this item finished."
    if state == "expired":
        return "expired", "The batch passed its SLA deadline before this item finished."
    if state == "failed":
        latest = batch.latest_error
        return "batch_failed", f"The batch failed before this item finished: {latest or 'workflow error'}"[
            :1000
        ]
    return "not_run", "The item got no result."


def job_id_for(batch_id: str) -> str:
    return f"chatjob_{suffix_of(batch_id)}"


def batch_id_for(job_id: str) -> str | None:
    """The batch behind a chat job id, or None for anything that is not one."""
    return f"batch_{suffix_of(job_id)}" if has_prefix(job_id, "chatjob") else None
