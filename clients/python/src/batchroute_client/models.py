"""Typed models of the native resources. Each names the service's OpenAPI schema it mirrors
(`SCHEMA`); a test checks every field against `/openapi.json`, so the client cannot drift.
Fields the service adds later are kept, untyped, in `raw`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, dataclass, field, fields
from decimal import Decimal
from typing import Any, ClassVar, Generic, Self, TypeVar, cast

from batchroute_client.money import money_text

TERMINAL_STATES = frozenset({"completed", "failed", "canceled", "expired"})


def _names(cls: type) -> list[str]:
    return [f.name for f in fields(cls)]


RAW = {"client_only": True}  # `raw` is the whole object as received, not a schema field


@dataclass(frozen=True)
class Money:
    SCHEMA: ClassVar[str] = "MoneyOut"
    currency: str
    amount: str

    @property
    def value(self) -> Decimal:
        return Decimal(self.amount)

    @property
    def text(self) -> str:
        """The amount as a person reads it (docs/money.md): `12.50 USD`, `0.0012 USD`."""
        return money_text(self.amount, self.currency)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Money:
        return cls(currency=str(data["currency"]), amount=str(data["amount"]))


def _money(data: Any) -> Money | None:
    return Money.from_dict(data) if isinstance(data, Mapping) else None


def _mapping(data: Any) -> dict[str, Any] | None:
    return dict(data) if isinstance(data, Mapping) else None


@dataclass(frozen=True)
class BatchCounts:
    SCHEMA: ClassVar[str] = "BatchCounts"
    total: int
    pending: int
    running: int
    completed: int
    failed: int
    canceled: int

    @property
    def done(self) -> int:
        return self.completed + self.failed + self.canceled

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BatchCounts:
        return cls(**{name: int(data.get(name) or 0) for name in _names(cls)})


@dataclass(frozen=True)
class ExecutionSummary:
    """Why a batch failed: `latest_error`, the latest batch-level execution error; `preflight`,
    the preflight's answer (`{ok, errors, warnings}`) when its input file failed intake."""

    SCHEMA: ClassVar[str] = "ExecutionSummary"
    latest_error: str | None = None
    preflight: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExecutionSummary:
        return cls(latest_error=data.get("latest_error"), preflight=_mapping(data.get("preflight")))


@dataclass(frozen=True)
class Batch:
    SCHEMA: ClassVar[str] = "BatchOut"
    id: str
    state: str
    counts: BatchCounts
    created_at: str
    deadline_at: str | None = None
    completed_at: str | None = None
    routing_mode: str | None = None
    sla_tier: str | None = None
    privacy_tier: str | None = None
    quote_id: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None
    receipt_file_id: str | None = None
    output_url: str | None = None
    error_url: str | None = None
    receipt_url: str | None = None
    settled_at: str | None = None
    execution_summary: ExecutionSummary | None = None
    cancel_reason: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)
    # Beside the batch in `GET /v1/batches/{id}`'s answer when asked for
    # (`batches.get(..., include_billing_receipt=True)`): None until it is settled.
    billing_receipt: BillingReceipt | None = field(default=None, compare=False, metadata=RAW)

    @property
    def latest_error(self) -> str | None:
        """`execution_summary.latest_error`: why the batch failed, when it did."""
        return self.execution_summary.latest_error if self.execution_summary is not None else None

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def is_settled(self) -> bool:
        """Terminal and settled (`settled_at` set): its work in flight has ended, its results,
        artifacts and receipt are written. A canceled, failed or expired batch is terminal at
        once, but work already dispatched may still be running until it settles."""
        return self.is_terminal and self.settled_at is not None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Batch:
        summary = data.get("execution_summary")
        return cls(
            id=str(data["id"]),
            state=str(data["state"]),
            counts=BatchCounts.from_dict(data.get("counts") or {}),
            created_at=str(data.get("created_at") or ""),
            deadline_at=data.get("deadline_at"),
            completed_at=data.get("completed_at"),
            routing_mode=data.get("routing_mode"),
            sla_tier=data.get("sla_tier"),
            privacy_tier=data.get("privacy_tier"),
            quote_id=data.get("quote_id"),
            metadata=dict(data.get("metadata") or {}),
            output_file_id=data.get("output_file_id"),
            error_file_id=data.get("error_file_id"),
            receipt_file_id=data.get("receipt_file_id"),
            output_url=data.get("output_url"),
            error_url=data.get("error_url"),
            receipt_url=data.get("receipt_url"),
            settled_at=data.get("settled_at"),
            execution_summary=ExecutionSummary.from_dict(summary) if isinstance(summary, Mapping) else None,
            cancel_reason=data.get("cancel_reason"),
            raw=dict(data),
        )


@dataclass(frozen=True)
class RetriedBatch:
    SCHEMA: ClassVar[str] = "RetriedBatch"
    batch: Batch
    source_batch_id: str
    retry_item_count: int

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetriedBatch:
        return cls(
            Batch.from_dict(data["batch"]), str(data["source_batch_id"]), int(data["retry_item_count"])
        )


@dataclass(frozen=True)
class Item:
    SCHEMA: ClassVar[str] = "ItemRow"
    sequence_number: int
    status: str
    customer_item_id: str | None = None
    model: str | None = None
    error: dict[str, Any] | None = None
    output_preview: str | None = None
    provider: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Item:
        return cls(
            sequence_number=int(data["sequence_number"]),
            status=str(data["status"]),
            customer_item_id=data.get("customer_item_id"),
            model=data.get("model"),
            error=data.get("error"),
            output_preview=data.get("output_preview"),
            provider=data.get("provider"),
            raw=dict(data),
        )


@dataclass(frozen=True)
class ResultRow:
    SCHEMA: ClassVar[str] = "ResultRow"
    status: str
    customer_item_id: str | None = None
    sequence_number: int | None = None
    output: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ResultRow:
        return cls(
            status=str(data["status"]),
            customer_item_id=data.get("customer_item_id"),
            sequence_number=data.get("sequence_number"),
            output=data.get("output"),
            error=data.get("error"),
        )


@dataclass(frozen=True)
class PricingEstimate:
    SCHEMA: ClassVar[str] = "PricingEstimate"
    provider_subtotal: Money
    service_fee: Money
    customer_discount: Money
    total: Money

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PricingEstimate:
        return cls(**{name: Money.from_dict(data[name]) for name in _names(cls)})


@dataclass(frozen=True)
class Quote:
    SCHEMA: ClassVar[str] = "QuoteOut"
    quote_id: str
    expires_at: str
    item_count: int
    pricing_estimate: PricingEstimate
    quote_lanes: list[dict[str, Any]]
    customer_explanation: str
    routing_mode: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)

    @property
    def selected_lanes(self) -> list[dict[str, Any]]:
        return [lane for lane in self.quote_lanes if lane.get("selected")]

    @property
    def rejected_lanes(self) -> list[dict[str, Any]]:
        return [lane for lane in self.quote_lanes if not lane.get("selected")]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Quote:
        return cls(
            quote_id=str(data["quote_id"]),
            expires_at=str(data["expires_at"]),
            item_count=int(data["item_count"]),
            pricing_estimate=PricingEstimate.from_dict(data["pricing_estimate"]),
            quote_lanes=list(data.get("quote_lanes") or []),
            customer_explanation=str(data.get("customer_explanation") or ""),
            routing_mode=data.get("routing_mode"),
            raw=dict(data),
        )


@dataclass(frozen=True)
class BillingReceipt:
    SCHEMA: ClassVar[str] = "BillingReceipt"
    batch_id: str
    final_settled_price: Money
    provider_subtotal: Money
    service_fee: Money
    credit_reserved: Money
    credit_charged: Money
    credit_released: Money
    settled_at: str
    provider_lanes: list[dict[str, Any]] = field(default_factory=list)
    rejected_lanes: list[dict[str, Any]] = field(default_factory=list)
    # The fee schedule line behind `service_fee` (`schedule_line`, ...); None on older receipts.
    service_fee_basis: dict[str, Any] | None = None
    # The lanes of a deadline rescue (docs/batches.md): empty when the batch had none.
    rescues: list[dict[str, Any]] = field(default_factory=list)
    # What routing saved: the charge beside the same tokens at the reference vendors' list and
    # batch prices (`saved_vs_list_price`, ...); None on older receipts.
    savings: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BillingReceipt:
        money = ("final_settled_price", "provider_subtotal", "service_fee")
        credit = ("credit_reserved", "credit_charged", "credit_released")
        return cls(
            batch_id=str(data["batch_id"]),
            settled_at=str(data["settled_at"]),
            provider_lanes=list(data.get("provider_lanes") or []),
            rejected_lanes=list(data.get("rejected_lanes") or []),
            service_fee_basis=_mapping(data.get("service_fee_basis")),
            rescues=list(data.get("rescues") or []),
            savings=_mapping(data.get("savings")),
            raw=dict(data),
            **{name: Money.from_dict(data[name]) for name in money + credit},
        )


@dataclass(frozen=True)
class Usage:
    SCHEMA: ClassVar[str] = "UsageOut"
    org_id: str
    balance: Money
    reserved: Money
    available: Money
    period: str
    timezone: str
    current_period: dict[str, Any]
    previous_period: dict[str, Any]
    generated_at: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        return cls(
            org_id=str(data["org_id"]),
            balance=Money.from_dict(data["balance"]),
            reserved=Money.from_dict(data["reserved"]),
            available=Money.from_dict(data["available"]),
            period=str(data["period"]),
            timezone=str(data["timezone"]),
            current_period=dict(data["current_period"]),
            previous_period=dict(data["previous_period"]),
            generated_at=str(data["generated_at"]),
            raw=dict(data),
        )


@dataclass(frozen=True)
class BillingControls:
    """An org's billing controls (the spec's "Billing controls"): `configured` is False until
    they are first saved, and until then the fields hold the spec's defaults (e-mail alerts
    on, the rest off) and `created_at`/`updated_at` are None. A field an answer leaves out
    takes the same default, so a missing `alert_email_enabled` is True, as the spec has it."""

    SCHEMA: ClassVar[str] = "ControlsOut"
    org_id: str
    limit_enabled: bool
    limit_mode: str
    limit_timezone: str
    limit_period: str | None = None
    limit_amount: Money | None = None
    low_balance_amount: Money | None = None
    alert_thresholds: list[dict[str, Any]] = field(default_factory=list)
    alert_email_enabled: bool = True
    alert_webhook_enabled: bool = False
    configured: bool = False
    created_at: str | None = None
    updated_at: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BillingControls:
        return cls(
            org_id=str(data["org_id"]),
            limit_enabled=bool(data["limit_enabled"]),
            limit_mode=str(data["limit_mode"]),
            limit_timezone=str(data["limit_timezone"]),
            limit_period=data.get("limit_period"),
            limit_amount=_money(data.get("limit_amount")),
            low_balance_amount=_money(data.get("low_balance_amount")),
            alert_thresholds=list(data.get("alert_thresholds") or []),
            alert_email_enabled=bool(data.get("alert_email_enabled", True)),
            alert_webhook_enabled=bool(data.get("alert_webhook_enabled")),
            configured=bool(data.get("configured")),
            created_at=data.get("created_at"),
            updated_at=data.get("updated_at"),
            raw=dict(data),
        )


@dataclass(frozen=True)
class ChatJob:
    SCHEMA: ClassVar[str] = "ChatJob"
    id: str
    status: str
    batch_id: str
    created: int
    model: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChatJob:
        return cls(
            id=str(data["id"]),
            status=str(data["status"]),
            batch_id=str(data["batch_id"]),
            created=int(data["created"]),
            model=data.get("model"),
            result=data.get("result"),
            error=data.get("error"),
            raw=dict(data),
        )


@dataclass(frozen=True)
class ChatCompletion:
    SCHEMA: ClassVar[str] = "ChatCompletion"
    id: str
    model: str
    choices: list[dict[str, Any]]
    usage: dict[str, Any]
    provider: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)

    @property
    def text(self) -> str:
        """The first choice's message content."""
        message = self.choices[0].get("message") if self.choices else None
        return str((message or {}).get("content") or "")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChatCompletion:
        return cls(
            id=str(data["id"]),
            model=str(data["model"]),
            choices=list(data.get("choices") or []),
            usage=dict(data.get("usage") or {}),
            provider=str(data.get("provider") or ""),
            raw=dict(data),
        )


@dataclass(frozen=True)
class ChatCompletionChunk:
    SCHEMA: ClassVar[str] = "ChatCompletionChunk"
    id: str
    model: str
    provider: str
    choices: list[dict[str, Any]]
    # With `stream_options.include_usage`: the last chunk's (`choices` empty) token counts, as
    # `ChatCompletion.usage`; None on every other chunk.
    usage: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)

    @property
    def text(self) -> str:
        """This chunk's content delta ('' for the role, finish and usage chunks)."""
        return "".join(str((c.get("delta") or {}).get("content") or "") for c in self.choices)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChatCompletionChunk:
        return cls(
            id=str(data["id"]),
            model=str(data["model"]),
            provider=str(data.get("provider") or ""),
            choices=list(data.get("choices") or []),
            usage=_mapping(data.get("usage")),
            raw=dict(data),
        )


@dataclass(frozen=True)
class File:
    """A model-input JSONL file (docs/files.md): `processed` is usable as `input_file_id`."""

    SCHEMA: ClassVar[str] = "FileOut"
    id: str
    filename: str
    purpose: str
    bytes: int
    status: str
    created_at: str
    content_type: str = ""
    line_count: int = 0
    item_count: int = 0
    error_count: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, str] | None = None
    sha256: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)

    @property
    def usable(self) -> bool:
        return self.status == "processed"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> File:
        return cls(
            id=str(data["id"]),
            filename=str(data.get("filename") or ""),
            purpose=str(data.get("purpose") or ""),
            bytes=int(data.get("bytes") or 0),
            status=str(data["status"]),
            created_at=str(data.get("created_at") or ""),
            content_type=str(data.get("content_type") or ""),
            line_count=int(data.get("line_count") or 0),
            item_count=int(data.get("item_count") or 0),
            error_count=int(data.get("error_count") or 0),
            errors=list(data.get("errors") or []),
            error=data.get("error"),
            sha256=data.get("sha256"),
            raw=dict(data),
        )


@dataclass(frozen=True)
class UploadTarget:
    """Where to PUT a signed upload's bytes: exactly these `headers` (the content type is signed)."""

    SCHEMA: ClassVar[str] = "UploadTarget"
    url: str
    method: str
    headers: dict[str, str]
    expires_at: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UploadTarget:
        return cls(
            url=str(data["url"]),
            method=str(data.get("method") or "PUT"),
            headers={str(k): str(v) for k, v in (data.get("headers") or {}).items()},
            expires_at=str(data.get("expires_at") or ""),
        )


@dataclass(frozen=True)
class PartTarget:
    """One part of a multipart upload: PUT bytes [offset, offset + bytes) of the file to `url`."""

    SCHEMA: ClassVar[str] = "PartTarget"
    part_number: int
    url: str
    offset: int
    bytes: int

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PartTarget:
        return cls(int(data["part_number"]), str(data["url"]), int(data["offset"]), int(data["bytes"]))


@dataclass(frozen=True)
class MultipartPlan:
    """A large signed upload's parts (docs/files.md, Multipart): PUT each, keep its ETag."""

    SCHEMA: ClassVar[str] = "MultipartPlanOut"
    part_bytes: int
    part_count: int
    parts: list[PartTarget]
    expires_at: str
    method: str = "PUT"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MultipartPlan:
        return cls(
            part_bytes=int(data["part_bytes"]),
            part_count=int(data["part_count"]),
            parts=[PartTarget.from_dict(part) for part in data.get("parts") or []],
            expires_at=str(data.get("expires_at") or ""),
            method=str(data.get("method") or "PUT"),
        )


@dataclass(frozen=True)
class SignedUpload:
    SCHEMA: ClassVar[str] = "SignedUploadOut"
    file: File
    upload: UploadTarget
    multipart: MultipartPlan | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SignedUpload:
        plan = data.get("multipart")
        return cls(
            File.from_dict(data["file"]),
            UploadTarget.from_dict(data["upload"]),
            MultipartPlan.from_dict(plan) if plan else None,
        )


@dataclass(frozen=True)
class BucketDelivery:
    """A batch's delivery of its artifacts to the org's bucket targets (docs/delivery-targets.md)."""

    SCHEMA: ClassVar[str] = "BucketDeliveryOut"
    state: str
    attempts: int
    max_attempts: int
    redeliveries: int
    created_at: str | None = None
    last_attempt_at: str | None = None
    next_attempt_at: str | None = None
    delivered_at: str | None = None
    last_error: dict[str, Any] | None = None
    targets: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BucketDelivery:
        return cls(
            state=str(data["state"]),
            attempts=int(data["attempts"]),
            max_attempts=int(data["max_attempts"]),
            redeliveries=int(data["redeliveries"]),
            created_at=data.get("created_at"),
            last_attempt_at=data.get("last_attempt_at"),
            next_attempt_at=data.get("next_attempt_at"),
            delivered_at=data.get("delivered_at"),
            last_error=data.get("last_error"),
            targets=list(data.get("targets") or []),
            raw=dict(data),
        )


@dataclass(frozen=True)
class WebhookDelivery:
    """One delivery of a batch's signed webhook event (docs/webhooks.md)."""

    SCHEMA: ClassVar[str] = "WebhookDeliveryOut"
    id: str
    status: str
    attempt_count: int
    event_id: str | None = None
    event_type: str | None = None
    url: str | None = None
    last_attempt_at: str | None = None
    next_attempt_at: str | None = None
    last_response_status: int | None = None
    last_error: str | None = None
    created_at: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WebhookDelivery:
        return cls(
            id=str(data["id"]),
            status=str(data["status"]),
            attempt_count=int(data["attempt_count"]),
            event_id=data.get("event_id"),
            event_type=data.get("event_type"),
            url=data.get("url"),
            last_attempt_at=data.get("last_attempt_at"),
            next_attempt_at=data.get("next_attempt_at"),
            last_response_status=data.get("last_response_status"),
            last_error=data.get("last_error"),
            created_at=data.get("created_at"),
            raw=dict(data),
        )


# -- models read by name -------------------------------------------------------------------
Build = Callable[[Any], Any]
R = TypeVar("R")
T = TypeVar("T")


def each(build: Callable[[Any], T]) -> Callable[[Any], list[T]]:
    """A list of what `build` reads."""
    return lambda rows: [build(row) for row in rows]


class Model:
    """A model read by name: each field from the key of its name (a field without a default is
    required: its absence raises `KeyError`), built by `NESTED[name]` when it is not null; null
    or absent where the field has a default keeps the default. Keys the model does not name are
    ignored (the service adds fields): `raw`, when the model has it, is the object as received."""

    NESTED: ClassVar[Mapping[str, Build]] = {}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        values: dict[str, Any] = {}
        for spec in fields(cast(Any, cls)):
            if spec.metadata.get("client_only"):
                values[spec.name] = dict(data)
                continue
            required = spec.default is MISSING and spec.default_factory is MISSING
            value = data[spec.name] if required else data.get(spec.name)
            build = cls.NESTED.get(spec.name)
            if value is not None and build is not None:
                value = build(value)
            if value is not None or required:
                values[spec.name] = value
        model: Self = cast(Any, cls)(**values)
        return model


class Rows(Model, Generic[R]):
    """A list answer: its rows in `data`, and the model iterates over them (`len` counts them)."""

    data: list[R]

    def __iter__(self) -> Iterator[R]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


# -- account and settings ------------------------------------------------------------------
@dataclass(frozen=True)
class Org(Model):
    SCHEMA: ClassVar[str] = "OrgOut"
    id: str
    display_name: str
    plan: str
    created_at: str


@dataclass(frozen=True)
class Member(Model):
    SCHEMA: ClassVar[str] = "MemberOut"
    user_id: str
    email: str
    role: str
    full_name: str | None = None
    display_name: str | None = None
    email_verified: bool = False
    created_at: str | None = None


@dataclass(frozen=True)
class DeliveryWebhook(Model):
    """The org's default webhook: its URL only; the secret is write-only, never returned."""

    SCHEMA: ClassVar[str] = "DeliveryWebhookOut"
    url: str
    configured: bool
    updated_at: str | None = None


@dataclass(frozen=True)
class Account(Model):
    """The account as `PUT /v1/auth/account/profile` answers it (`client.account()` reads the
    same document as a dict)."""

    SCHEMA: ClassVar[str] = "AccountOut"
    NESTED: ClassVar[Mapping[str, Build]] = {
        "org": Org.from_dict,
        "credit_balance": Money.from_dict,
        "members": each(Member.from_dict),
        "user": Member.from_dict,
        "delivery_webhook": DeliveryWebhook.from_dict,
    }
    org: Org
    plan: str
    credit_balance: Money
    members: list[Member] = field(default_factory=list)
    user: Member | None = None  # the caller's own user: the key's (None for a key with no user)
    delivery_webhook: DeliveryWebhook | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)


@dataclass(frozen=True)
class RetentionSettings(Model):
    """How long the org's result files are kept (docs/billing-controls.md, Retention settings)."""

    SCHEMA: ClassVar[str] = "RetentionSettingsOut"
    org_id: str
    retention_tier: str  # grace_only, extended_fixed, until_deleted
    extended_days: int | None = None
    never_charge: bool = False
    grace_hours: int = 0
    updated_at: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)


# -- delivery targets ----------------------------------------------------------------------
@dataclass(frozen=True)
class BucketError(Model):
    SCHEMA: ClassVar[str] = "BucketErrorOut"
    code: str  # the bucket's own (AccessDenied, NoSuchBucket, ...) or the service's
    message: str


@dataclass(frozen=True)
class LastTest(Model):
    SCHEMA: ClassVar[str] = "LastTestOut"
    NESTED: ClassVar[Mapping[str, Build]] = {"error": BucketError.from_dict}
    ok: bool
    at: str
    key: str
    error: BucketError | None = None


@dataclass(frozen=True)
class TargetTest(Model):
    """A target's test: a sample object written with its credentials; `ok` False carries the
    bucket's refusal in `error` (the answer is a 200 either way)."""

    SCHEMA: ClassVar[str] = "TargetTestOut"
    NESTED: ClassVar[Mapping[str, Build]] = {"error": BucketError.from_dict}
    target_id: str
    bucket: str
    ok: bool
    at: str
    key: str
    error: BucketError | None = None


@dataclass(frozen=True)
class DeliveryTarget(Model):
    """A bucket the org's finished batches are pushed to (docs/delivery-targets.md). The secret
    access key is write-only: no answer carries it, only `secret_access_key_set`."""

    SCHEMA: ClassVar[str] = "DeliveryTargetOut"
    NESTED: ClassVar[Mapping[str, Build]] = {"last_test": LastTest.from_dict}
    id: str
    name: str
    bucket: str
    prefix: str
    enabled: bool
    access_key_id_last4: str
    secret_access_key_set: bool
    created_at: str
    updated_at: str
    endpoint_url: str | None = None
    region: str | None = None
    last_test: LastTest | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)


@dataclass(frozen=True)
class DeliveryTargetList(Rows[DeliveryTarget]):
    """The org's targets (`data`, iterable) and how many it may register (`limit`)."""

    SCHEMA: ClassVar[str] = "DeliveryTargetList"
    NESTED: ClassVar[Mapping[str, Build]] = {"data": each(DeliveryTarget.from_dict)}
    data: list[DeliveryTarget]
    limit: int


@dataclass(frozen=True)
class DeliveryTargetDeleted(Model):
    SCHEMA: ClassVar[str] = "DeliveryTargetDeleted"
    id: str
    deleted: bool


# -- schedules (docs/schedules.md) -----------------------------------------------------------
@dataclass(frozen=True)
class ExcludedLane(Model):
    """A lane the schedule's latest golden-set run scored below its threshold: the schedule's
    batches route around it (`regression_failed`)."""

    SCHEMA: ClassVar[str] = "ExcludedLane"
    lane_id: str
    score: float
    threshold: float
    version: int
    regression_id: str
    at: str


@dataclass(frozen=True)
class ScheduleDefinition(Model):
    """What a schedule does, as a version freezes it (docs/schedules.md, The body)."""

    name: str
    description: str | None
    expression: str
    time_zone: str
    input_source: dict[str, Any]
    batch_options: dict[str, Any]
    golden_set: dict[str, Any] | None


@dataclass(frozen=True)
class Schedule(ScheduleDefinition):
    """A recurring schedule: each fire time creates a batch from `input_source` with
    `batch_options`. A change makes a new `version`; `next_fire_at` is None while paused."""

    SCHEMA: ClassVar[str] = "ScheduleOut"
    NESTED: ClassVar[Mapping[str, Build]] = {"excluded_lanes": each(ExcludedLane.from_dict)}
    id: str
    state: str
    version: int
    next_fire_at: str | None
    last_fire_at: str | None
    excluded_lanes: list[ExcludedLane]
    created_at: str
    created_by: str
    updated_at: str
    updated_by: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)

    @property
    def is_active(self) -> bool:
        return self.state == "active"


@dataclass(frozen=True)
class ScheduleDeleted(Model):
    SCHEMA: ClassVar[str] = "ScheduleDeleted"
    id: str
    deleted: bool


@dataclass(frozen=True)
class RunError(Model):
    SCHEMA: ClassVar[str] = "RunError"
    code: str
    message: str


@dataclass(frozen=True)
class ScheduleRun(Model):
    """One fire time of a schedule: `created` with its `batch_id`, `failed` with its `error`
    (e.g. `insufficient_credits`), `skipped` while paused, `firing` meanwhile."""

    SCHEMA: ClassVar[str] = "ScheduleRun"
    NESTED: ClassVar[Mapping[str, Build]] = {"error": RunError.from_dict}
    schedule_id: str
    fire_at: str
    version: int
    state: str
    batch_id: str | None
    error: RunError | None
    trigger: str
    created_at: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)


@dataclass(frozen=True)
class ScheduleVersion(ScheduleDefinition):
    """A schedule's definition as it was at `version` (frozen)."""

    SCHEMA: ClassVar[str] = "ScheduleVersion"
    schedule_id: str
    version: int
    created_at: str
    created_by: str


@dataclass(frozen=True)
class TokenCounts(Model):
    SCHEMA: ClassVar[str] = "TokenCounts"
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class LaneBenchmark(Model):
    """One lane's golden-set score: `passed` when `score` >= the run's threshold."""

    SCHEMA: ClassVar[str] = "LaneBenchmark"
    NESTED: ClassVar[Mapping[str, Build]] = {"usage": TokenCounts.from_dict, "cost": Money.from_dict}
    lane_id: str
    provider: str
    model: str
    score: float
    passed: bool
    items_passed: int
    items_total: int
    errors: list[dict[str, str]]
    usage: TokenCounts
    cost: Money


@dataclass(frozen=True)
class GoldenSetRun(Model):
    """A golden-set regression run, a score per lane (`lanes`), `charged` to the wallet at
    direct prices (a schedule's `RegressionRun`, a preset's `PresetRegressionRun`)."""

    NESTED: ClassVar[Mapping[str, Build]] = {
        "lanes": each(LaneBenchmark.from_dict),
        "charged": Money.from_dict,
    }
    regression_id: str
    version: int
    trigger: str
    scorer: dict[str, Any]
    threshold: float
    created_at: str
    completed_at: str
    lanes: list[LaneBenchmark]
    charged: Money


@dataclass(frozen=True)
class RegressionRun(GoldenSetRun):
    """A schedule version's golden-set run."""

    SCHEMA: ClassVar[str] = "RegressionRun"
    schedule_id: str


@dataclass(frozen=True)
class RegressionRunList(Rows[RegressionRun]):
    """A version's golden-set regression runs (`data`, iterable), newest first."""

    SCHEMA: ClassVar[str] = "RegressionRunList"
    NESTED: ClassVar[Mapping[str, Build]] = {"data": each(RegressionRun.from_dict)}
    data: list[RegressionRun]


# -- presets (docs/presets.md) ----------------------------------------------------------------
@dataclass(frozen=True)
class PresetParameters(Model):
    SCHEMA: ClassVar[str] = "PresetParametersOut"
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    response_format: dict[str, Any] | None = None
    required_tools: list[str] | None = None
    stop: str | list[str] | None = None


@dataclass(frozen=True)
class PresetRouting(Model):
    SCHEMA: ClassVar[str] = "PresetRoutingOut"
    routing_mode: str | None = None
    privacy_tier: str | None = None
    region: str | None = None
    max_price: dict[str, Any] | None = None


@dataclass(frozen=True)
class PresetTemplate(Model):
    """A preset's template as one version holds it: the model (or workflow product) and
    operation, the system prompt, parameters, routing, metadata and golden set; `ref` is
    `name@version`, what an item's `preset` may name."""

    NESTED: ClassVar[Mapping[str, Build]] = {
        "parameters": PresetParameters.from_dict,
        "routing": PresetRouting.from_dict,
    }
    name: str
    version: int
    ref: str
    description: str | None
    model: str | None
    workflow_product: str | None
    operation: str | None
    system_prompt: str | None
    parameters: PresetParameters
    routing: PresetRouting
    metadata: dict[str, Any] | None
    golden_set: dict[str, Any] | None
    created_by: str | None
    created_at: str


@dataclass(frozen=True)
class Preset(PresetTemplate):
    """A preset at its latest version (`archived_at` once deleted)."""

    SCHEMA: ClassVar[str] = "PresetOut"
    latest_version: int
    archived_at: str | None
    updated_at: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)


@dataclass(frozen=True)
class PresetVersion(PresetTemplate):
    SCHEMA: ClassVar[str] = "PresetVersionOut"


@dataclass(frozen=True)
class PresetRegressionRun(GoldenSetRun):
    """A preset version's golden-set run."""

    SCHEMA: ClassVar[str] = "PresetRegressionRun"
    preset: str


@dataclass(frozen=True)
class PresetRegressionRunList(Rows[PresetRegressionRun]):
    SCHEMA: ClassVar[str] = "PresetRegressionRunList"
    NESTED: ClassVar[Mapping[str, Build]] = {"data": each(PresetRegressionRun.from_dict)}
    data: list[PresetRegressionRun]


# -- work orders (docs/work-orders.md) --------------------------------------------------------
@dataclass(frozen=True)
class WorkOrderMembersCount(Model):
    SCHEMA: ClassVar[str] = "WorkOrderMembersCount"
    total: int
    in_progress: int
    completed: int
    failed: int
    canceled: int
    expired: int
    limit: int


@dataclass(frozen=True)
class WorkOrderItems(Model):
    SCHEMA: ClassVar[str] = "WorkOrderItems"
    total: int
    pending: int
    completed: int
    failed: int
    canceled: int


@dataclass(frozen=True)
class WorkOrderCost(Model):
    """What the members hold now (`reserved`) and were charged once settled (`charged`)."""

    SCHEMA: ClassVar[str] = "WorkOrderCost"
    NESTED: ClassVar[Mapping[str, Build]] = {"reserved": Money.from_dict, "charged": Money.from_dict}
    reserved: Money
    charged: Money


@dataclass(frozen=True)
class WorkOrder(Model):
    """A group of batches and queued chat jobs, counted together. `status` is derived from
    the members (`empty`, `in_progress`, `completed`, `canceled`, `failed`,
    `completed_with_failures`); `closed` says only that no more may join."""

    SCHEMA: ClassVar[str] = "WorkOrderOut"
    NESTED: ClassVar[Mapping[str, Build]] = {
        "members": WorkOrderMembersCount.from_dict,
        "items": WorkOrderItems.from_dict,
        "cost": WorkOrderCost.from_dict,
    }
    id: str
    name: str | None
    client_reference: str | None
    metadata: dict[str, str]
    status: str
    closed: bool
    closed_at: str | None
    created_at: str
    updated_at: str
    members: WorkOrderMembersCount
    items: WorkOrderItems
    cost: WorkOrderCost
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)


@dataclass(frozen=True)
class WorkOrderMember(Model):
    """A batch or queued chat job (`kind`) in a work order; `outcome` once it settled."""

    SCHEMA: ClassVar[str] = "WorkOrderMemberOut"
    NESTED: ClassVar[Mapping[str, Build]] = {"reserved": Money.from_dict}
    batch_id: str
    kind: str
    chat_job_id: str | None
    joined_at: str
    items: int
    reserved: Money
    settled_at: str | None
    outcome: str | None


@dataclass(frozen=True)
class WorkOrderMemberAdded(Model):
    SCHEMA: ClassVar[str] = "WorkOrderMemberAdded"
    NESTED: ClassVar[Mapping[str, Build]] = {
        "work_order": WorkOrder.from_dict,
        "member": WorkOrderMember.from_dict,
    }
    work_order: WorkOrder
    member: WorkOrderMember


# -- the route policy (docs/routing-policy.md) -------------------------------------------------
@dataclass(frozen=True)
class RoutePolicy(Model):
    """The org's standing routing rules, applied to every quote, batch and chat request;
    `version` is what `routing.update_policy(version=...)` saves over (`configured` False and
    version 0 until the first save)."""

    SCHEMA: ClassVar[str] = "RoutePolicyOut"
    org_id: str
    configured: bool
    version: int
    provider_allow: list[str]
    provider_deny: list[str]
    allowed_regions: list[str]
    routing_mode: str | None
    privacy_tier_floor: str | None
    max_price_per_million_tokens: dict[str, Any]
    chat_fallbacks_allowed: bool
    created_at: str | None
    updated_at: str | None
    updated_by: str | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)


@dataclass(frozen=True)
class RoutePolicyChange(Model):
    """One save of the route policy: the fields it changed, `before` and `after`, and who."""

    SCHEMA: ClassVar[str] = "RoutePolicyChangeOut"
    id: str
    version: int
    action: str
    before: dict[str, Any]
    after: dict[str, Any]
    actor_user_id: str | None
    actor_key_id: str | None
    actor_role: str | None
    ip_address: str | None
    created_at: str


# -- feedback (docs/feedback.md) --------------------------------------------------------------
@dataclass(frozen=True)
class FeedbackTarget(Model):
    """What feedback rates: a batch item (`batch_id`, `customer_item_id`) or a chat
    completion (`id`)."""

    SCHEMA: ClassVar[str] = "FeedbackTargetOut"
    type: str
    batch_id: str | None = None
    customer_item_id: str | None = None
    id: str | None = None


@dataclass(frozen=True)
class Feedback(Model):
    """One author's rating of one target (`rating_scale` `thumbs`: -1 or 1, `stars`: 1-5), with
    the model and provider that answered it."""

    SCHEMA: ClassVar[str] = "FeedbackOut"
    NESTED: ClassVar[Mapping[str, Build]] = {"target": FeedbackTarget.from_dict}
    id: str
    target: FeedbackTarget
    rating: int
    rating_scale: str
    comment: str | None
    labels: list[str]
    model: str
    provider: str
    author: str
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class Thumbs(Model):
    SCHEMA: ClassVar[str] = "Thumbs"
    up: int
    down: int


@dataclass(frozen=True)
class Stars(Model):
    """How many star ratings, and their mean as a decimal string (None without any)."""

    SCHEMA: ClassVar[str] = "Stars"
    count: int
    mean: str | None


@dataclass(frozen=True)
class LabelCount(Model):
    SCHEMA: ClassVar[str] = "LabelCount"
    label: str
    count: int


@dataclass(frozen=True)
class FeedbackFigures(Model):
    SCHEMA: ClassVar[str] = "FeedbackFigures"
    NESTED: ClassVar[Mapping[str, Build]] = {
        "thumbs": Thumbs.from_dict,
        "stars": Stars.from_dict,
        "top_labels": each(LabelCount.from_dict),
    }
    count: int
    thumbs: Thumbs
    stars: Stars
    top_labels: list[LabelCount]


@dataclass(frozen=True)
class ModelProviderFeedback(FeedbackFigures):
    SCHEMA: ClassVar[str] = "ModelProviderFeedback"
    model: str
    provider: str


@dataclass(frozen=True)
class FeedbackSummary(Model):
    """The current UTC day's or month's feedback (`period`), in all and per model and provider
    (`by_model_provider`, most feedback first)."""

    SCHEMA: ClassVar[str] = "FeedbackSummary"
    NESTED: ClassVar[Mapping[str, Build]] = {
        "total": FeedbackFigures.from_dict,
        "by_model_provider": each(ModelProviderFeedback.from_dict),
    }
    period: str
    start: str
    end: str
    total: FeedbackFigures
    by_model_provider: list[ModelProviderFeedback]


# -- billing -------------------------------------------------------------------------------
@dataclass(frozen=True)
class AuditEntry(Model):
    """One change of the billing controls: `before` and `after` hold the changed fields."""

    SCHEMA: ClassVar[str] = "AuditEntryOut"
    id: str
    org_id: str
    action: str
    created_at: str
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    actor_user_id: str | None = None
    actor_role: str | None = None
    ip_address: str | None = None


@dataclass(frozen=True)
class BillingEvent(Model):
    """A billing alert event (docs/billing-alerts.md): its `type` (e.g. `balance.low`), its
    `data`, and the delivery of its signed webhook when the org has one."""

    SCHEMA: ClassVar[str] = "BillingEventOut"
    NESTED: ClassVar[Mapping[str, Build]] = {"webhook": WebhookDelivery.from_dict}
    id: str
    type: str
    org_id: str
    created_at: str
    data: dict[str, Any]
    webhook: WebhookDelivery | None


@dataclass(frozen=True)
class Card(Model):
    SCHEMA: ClassVar[str] = "CardOut"
    brand: str
    last4: str


@dataclass(frozen=True)
class AutoTopupStatus(Model):
    SCHEMA: ClassVar[str] = "AutoTopupStatusOut"
    NESTED: ClassVar[Mapping[str, Build]] = {"month_committed": Money.from_dict}
    consecutive_failures: int
    month_committed: Money  # pending and succeeded top-ups of `month`
    in_flight_attempt_id: str | None = None
    retry_after: str | None = None  # back-off: no attempt before this time
    disabled_reason: str | None = None  # payment_failed, payment_disputed, payment_refunded
    month: str | None = None


@dataclass(frozen=True)
class AutoTopup(Model):
    """Auto top-up settings (docs/payments.md): `configured` False until the first save."""

    SCHEMA: ClassVar[str] = "AutoTopupOut"
    NESTED: ClassVar[Mapping[str, Build]] = {
        "trigger_balance": Money.from_dict,
        "amount": Money.from_dict,
        "monthly_cap": Money.from_dict,
        "payment_method": Card.from_dict,
        "status": AutoTopupStatus.from_dict,
    }
    org_id: str
    configured: bool
    enabled: bool
    trigger_balance: Money
    amount: Money
    monthly_cap: Money
    status: AutoTopupStatus
    payment_method: Card | None = None
    created_at: str | None = None
    updated_at: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)


@dataclass(frozen=True)
class TopupAttempt(Model):
    SCHEMA: ClassVar[str] = "AttemptOut"
    NESTED: ClassVar[Mapping[str, Build]] = {"amount": Money.from_dict}
    id: str
    amount: Money
    status: str  # pending, succeeded, failed
    created_at: str
    updated_at: str
    processor_reference: str | None = None
    failure_code: str | None = None
    failure_reason: str | None = None


# -- catalog -------------------------------------------------------------------------------
@dataclass(frozen=True)
class LanePricing(Model):
    """A lane's prices: decimal strings, USD per million tokens (`unit`)."""

    SCHEMA: ClassVar[str] = "LanePricingOut"
    currency: str
    unit: str
    input: str
    output: str
    batch_input: str
    batch_output: str
    # prompt-cache reads and writes (a service before them sends none)
    cached_input: str | None = None
    cache_write_input: str | None = None
    batch_cached_input: str | None = None
    batch_cache_write_input: str | None = None
    # hosted tool -> {"per_1k_calls": USD per 1,000 billed calls, "calls_per_item": the calls a
    # quote counts per item asking for it} (a service before them sends none)
    hosted_tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelLane(Model):
    """One provider serving a catalog model; `capacity`: `daily_capacity_items`,
    `remaining_capacity_items`, `last_heartbeat_at`."""

    SCHEMA: ClassVar[str] = "ModelLaneOut"
    NESTED: ClassVar[Mapping[str, Build]] = {"pricing": LanePricing.from_dict}
    lane_id: str
    provider: str
    pricing: LanePricing
    status: str
    eligible: bool
    provider_name: str = ""
    provider_kind: str = ""
    execution_mode: str = ""
    provider_model_id: str = ""
    context_window: int = 0
    max_output_tokens: int = 0
    operations: list[str] = field(default_factory=list)
    runtime_capabilities: list[str] = field(default_factory=list)
    hosted_tools: list[str] = field(default_factory=list)
    regions: list[str] = field(default_factory=list)
    privacy_tiers: list[str] = field(default_factory=list)
    data_retention_days: int = 0
    capacity: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CatalogModel(Model):
    """A model of the catalog with its provider lanes (`providers`); `retention`, `capacity`
    and `routing_eligibility` are the aggregates of docs/catalog.md, The model object."""

    SCHEMA: ClassVar[str] = "ModelOut"
    NESTED: ClassVar[Mapping[str, Build]] = {"providers": each(ModelLane.from_dict)}
    id: str
    title: str
    providers: list[ModelLane]
    summary: str = ""
    description: str = ""
    tags: list[str] = field(default_factory=list)
    family: str = ""
    open_weight: bool = False
    operations: list[str] = field(default_factory=list)
    runtime_capabilities: list[str] = field(default_factory=list)
    hosted_tools: list[str] = field(default_factory=list)
    privacy_tiers: list[str] = field(default_factory=list)
    regions: list[str] = field(default_factory=list)
    context_window: int = 0
    max_output_tokens: int = 0
    retention: dict[str, Any] = field(default_factory=dict)
    capacity: dict[str, Any] = field(default_factory=dict)
    routing_eligibility: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)


@dataclass(frozen=True)
class CatalogModelList(Rows[CatalogModel]):
    """The models a filter matched (`data`, iterable); `provider_count`: the providers serving them."""

    SCHEMA: ClassVar[str] = "ModelListOut"
    NESTED: ClassVar[Mapping[str, Build]] = {"data": each(CatalogModel.from_dict)}
    data: list[CatalogModel]
    provider_count: int
    pricing_updated_at: str | None = None


@dataclass(frozen=True)
class WorkflowProduct(Model):
    SCHEMA: ClassVar[str] = "WorkflowProductOut"
    slug: str
    title: str
    operation: str
    fee_pct: str
    summary: str = ""
    sla_hours: int = 0
    completion_window: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] = field(default_factory=dict)
    route_policy: dict[str, Any] = field(default_factory=dict)
    typical_input_tokens: int = 0
    typical_output_tokens: int = 0
    models: list[str] = field(default_factory=list)
    lanes_able: int = 0
    lanes_available: int = 0
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)


@dataclass(frozen=True)
class WorkflowProductList(Rows[WorkflowProduct]):
    """The workflow products (`data`, iterable) and the remaining capacity, in items, of each
    provider able to serve them (`provider_capacity`)."""

    SCHEMA: ClassVar[str] = "WorkflowProductListOut"
    NESTED: ClassVar[Mapping[str, Build]] = {"data": each(WorkflowProduct.from_dict)}
    data: list[WorkflowProduct]
    provider_capacity: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Provider(Model):
    """A provider of the directory: `enabled` says whether this deployment routes to it,
    `status` why not."""

    SCHEMA: ClassVar[str] = "ProviderOut"
    slug: str
    display_name: str
    kind: str
    enabled: bool
    status: str
    execution_mode: str = ""
    launched: bool = False
    supported_operations: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    regions: list[str] = field(default_factory=list)
    privacy_tiers: list[str] = field(default_factory=list)
    data_retention_days: int = 0
    website: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)


@dataclass(frozen=True)
class FeeSchedule(Model):
    """The fee schedule quotes and settlement use: percentages as decimal strings."""

    SCHEMA: ClassVar[str] = "FeeScheduleOut"
    NESTED: ClassVar[Mapping[str, Build]] = {"control_plane_fee_per_lane": Money.from_dict}
    currency: str
    standard_batch_fee_pct: str
    workflow_product_fee_pct: str
    margin_floor_pct: str
    control_plane_fee_per_lane: Money
    catalog_version: str
    basis: str = ""
    effective_at: str = ""
    pricing_updated_at: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=RAW)


ALL_MODELS: tuple[type, ...] = (
    Money,
    BatchCounts,
    ExecutionSummary,
    Batch,
    RetriedBatch,
    Item,
    ResultRow,
    PricingEstimate,
    Quote,
    BillingReceipt,
    Usage,
    BillingControls,
    ChatJob,
    ChatCompletion,
    ChatCompletionChunk,
    File,
    UploadTarget,
    PartTarget,
    MultipartPlan,
    SignedUpload,
    BucketDelivery,
    WebhookDelivery,
    Org,
    Member,
    DeliveryWebhook,
    Account,
    RetentionSettings,
    BucketError,
    LastTest,
    TargetTest,
    DeliveryTarget,
    DeliveryTargetList,
    DeliveryTargetDeleted,
    ExcludedLane,
    Schedule,
    ScheduleDeleted,
    RunError,
    ScheduleRun,
    ScheduleVersion,
    TokenCounts,
    LaneBenchmark,
    RegressionRun,
    RegressionRunList,
    PresetParameters,
    PresetRouting,
    Preset,
    PresetVersion,
    PresetRegressionRun,
    PresetRegressionRunList,
    WorkOrderMembersCount,
    WorkOrderItems,
    WorkOrderCost,
    WorkOrder,
    WorkOrderMember,
    WorkOrderMemberAdded,
    RoutePolicy,
    RoutePolicyChange,
    FeedbackTarget,
    Feedback,
    Thumbs,
    Stars,
    LabelCount,
    FeedbackFigures,
    ModelProviderFeedback,
    FeedbackSummary,
    AuditEntry,
    BillingEvent,
    Card,
    AutoTopupStatus,
    AutoTopup,
    TopupAttempt,
    LanePricing,
    ModelLane,
    CatalogModel,
    CatalogModelList,
    WorkflowProduct,
    WorkflowProductList,
    Provider,
    FeeSchedule,
)
