"""Work orders (beta): one id that groups the batches and queued chat jobs of one business job
(docs/work-orders.md).

A work order keeps counters, not a list it re-reads: members joined, still in progress and
finished per outcome, items per status, credit reserved by the members still running and
credit charged by those settled. They move when a member joins (batch create or attach) and
once when it settles (the workflow's Settle step), so a read is one `GetItem` whatever the
number of members. The status is derived from those counters by `derive_status`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypedDict, get_args

from batchroute.domain.batches.metadata import parse_metadata
from batchroute.domain.batches.record import WorkOrderRef, job_id_for
from batchroute.domain.request_fields import invalid
from batchroute.domain.views import view_of
from batchroute.money import Money, MoneyView

MAX_MEMBERS: Final = 1000
NAME_MAX: Final = 200
CLIENT_REFERENCE_MAX: Final = 128
LIST_LIMIT_MAX: Final = 100

WorkOrderStatus = Literal[
    "empty", "in_progress", "completed", "completed_with_failures", "failed", "canceled"
]
WORK_ORDER_STATUSES: Final[tuple[str, ...]] = get_args(WorkOrderStatus)
MemberOutcome = Literal["completed", "failed", "canceled", "expired"]
MEMBER_OUTCOMES: Final[tuple[str, ...]] = get_args(MemberOutcome)
MemberKind = Literal["batch", "chat_job"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Tallies:
    """The counters a work order keeps (stored under these names)."""

    members: int = 0
    members_active: int = 0
    members_completed: int = 0
    members_failed: int = 0
    members_canceled: int = 0
    members_expired: int = 0
    items_total: int = 0
    items_completed: int = 0
    items_failed: int = 0
    items_canceled: int = 0
    reserved_micros: int = 0
    charged_micros: int = 0

    @property
    def items_pending(self) -> int:
        """Items of members still in progress: not yet completed, failed or canceled."""
        return max(0, self.items_total - self.items_completed - self.items_failed - self.items_canceled)


def derive_status(t: Tallies) -> WorkOrderStatus:
    """The work order's status from its members (docs/work-orders.md, Status):

    - `empty`: no member yet;
    - `in_progress`: at least one member has not settled;
    - `completed`: every member completed and no item failed or was canceled;
    - `canceled`: every member was canceled;
    - `failed`: no member completed (each failed, expired or was canceled);
    - `completed_with_failures`: otherwise (some completed, some items or members did not).
    """
    if t.members == 0:
        return "empty"
    if t.members_active > 0:
        return "in_progress"
    if t.members_completed == t.members and t.items_failed == 0 and t.items_canceled == 0:
        return "completed"
    if t.members_canceled == t.members:
        return "canceled"
    if t.members_completed == 0:
        return "failed"
    return "completed_with_failures"


def member_outcome(batch_state: str) -> MemberOutcome:
    """A settled member's outcome from its batch's terminal state (Settle makes a batch still
    finalizing `completed`)."""
    return batch_state if batch_state in MEMBER_OUTCOMES else "completed"  # type: ignore[return-value]


def settled_items(counts: Mapping[str, int] | None, total: int) -> dict[str, int]:
    """A settled member's items by final status: those that did not complete or fail
    (canceled, expired, never run) count as canceled."""
    counts = counts or {}
    completed = max(0, int(counts.get("completed", 0)))
    failed = max(0, int(counts.get("failed", 0)))
    return {
        "items_completed": completed,
        "items_failed": failed,
        "items_canceled": max(0, total - completed - failed),
    }


class MembersView(TypedDict):
    total: int
    in_progress: int
    completed: int
    failed: int
    canceled: int
    expired: int
    limit: int


class ItemsView(TypedDict):
    total: int
    pending: int
    completed: int
    failed: int
    canceled: int


class CostView(TypedDict):
    reserved: MoneyView
    charged: MoneyView


class WorkOrderView(TypedDict):
    id: str
    object: Literal["work_order"]
    name: str | None
    client_reference: str | None
    metadata: dict[str, str]
    status: WorkOrderStatus
    closed: bool
    closed_at: str | None
    created_at: str
    updated_at: str
    members: MembersView
    items: ItemsView
    cost: CostView


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkOrder:
    work_order_id: str
    org_id: str
    name: str | None
    client_reference: str | None
    metadata: Mapping[str, str]
    created_at: str
    updated_at: str
    created_by: str | None = None
    closed_at: str | None = None
    tallies: Tallies = field(default_factory=Tallies)

    @property
    def status(self) -> WorkOrderStatus:
        return derive_status(self.tallies)

    @property
    def reference(self) -> WorkOrderRef:
        """What a member batch shows of its work order (the detailed view's `work_order`)."""
        return WorkOrderRef(self.work_order_id, self.client_reference)

    def to_api(self) -> WorkOrderView:
        t = self.tallies
        return {
            "id": self.work_order_id,
            "object": "work_order",
            "name": self.name,
            "client_reference": self.client_reference,
            "metadata": dict(self.metadata),
            "status": self.status,
            "closed": self.closed_at is not None,
            "closed_at": self.closed_at,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "members": {
                "total": t.members,
                "in_progress": t.members_active,
                "completed": t.members_completed,
                "failed": t.members_failed,
                "canceled": t.members_canceled,
                "expired": t.members_expired,
                "limit": MAX_MEMBERS,
            },
            "items": {
                "total": t.items_total,
                "pending": t.items_pending,
                "completed": t.items_completed,
                "failed": t.items_failed,
                "canceled": t.items_canceled,
            },
            "cost": {
                "reserved": Money(max(0, t.reserved_micros)).to_api(),
                "charged": Money(t.charged_micros).to_api(),
            },
        }


class MemberView(TypedDict):
    batch_id: str
    kind: MemberKind
    chat_job_id: str | None
    joined_at: str
    items: int
    reserved: MoneyView
    settled_at: str | None
    outcome: MemberOutcome | None


class MemberListView(TypedDict):
    object: Literal["list"]
    data: list[MemberView]
    next_cursor: str | None


class MemberAddedView(TypedDict):
    work_order: WorkOrderView
    member: MemberView


@dataclass(frozen=True, slots=True)
class WorkOrderChange:
    """A PATCH as the store applies it: `updated_at` always, the other fields when set
    (a None name is removed; `closed_at` only when the work order closes now)."""

    updated_at: str
    name: str | None = None
    metadata: dict[str, str] | None = None
    closed_at: str | None = None
    renamed: bool = False

    def to_item(self) -> dict[str, str | dict[str, str] | None]:
        """The fields to SET (a None value is REMOVEd)."""
        values: dict[str, str | dict[str, str] | None] = {"updated_at": self.updated_at}
        if self.renamed:
            values["name"] = self.name
        if self.metadata is not None:
            values["metadata"] = self.metadata
        if self.closed_at is not None:
            values["closed_at"] = self.closed_at
        return values


@dataclass(frozen=True, slots=True)
class WorkOrderIdempotency:
    """The first answer to a create under an Idempotency-Key, replayed for 24 h (`ttl`)."""

    key: str
    request_hash: str
    body: str
    work_order_id: str
    ttl: int


@dataclass(frozen=True, slots=True)
class CounterMove:
    """A move of one work order's counters by a member: which work order, by how much
    (`deltas`, by tally name), and when."""

    org_id: str
    work_order_id: str
    deltas: Mapping[str, int]
    at: str


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkOrderMember:
    """A batch or queued chat job in a work order, as its member marker holds it (the store
    writes these fields; a marker from before chat jobs joined has no `member_kind`)."""

    batch_id: str
    joined_at: str
    items_total: int
    reserved_micros: int
    settled_at: str | None = None
    outcome: MemberOutcome | None = None
    member_kind: MemberKind = "batch"

    def to_api(self) -> MemberView:
        return view_of(
            self,
            MemberView,
            kind=self.member_kind,
            chat_job_id=job_id_for(self.batch_id) if self.member_kind == "chat_job" else None,
            items=self.items_total,
            reserved=Money(self.reserved_micros).to_api(),
        )


@dataclass(frozen=True)
class Attachment:
    """An existing batch joining a work order (`attach`), written in one transaction: the
    counters' `move`, the `member` marker and the batch's `work_order` field (`reference`),
    conditional on the batch having no work order yet, on its settlement being as read
    (`settled`) and on its rescue overage holds being as read (`overage_held_micros`), so
    a member is never counted as running after its Settle looked for its work order and the
    reserved counted is what Settle takes off."""

    move: CounterMove
    member: WorkOrderMember
    reference: WorkOrderRef
    settled: bool
    overage_held_micros: int = 0


class MemberRefused(Exception):
    """An attach refused by its transaction: `what` is `work_order` (gone, closed or full),
    `member` (already a member) or `batch` (in another work order, or settled meanwhile)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


# -- request bodies ------------------------------------------------------------------------
def _text(value: Any, name: str, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > limit or not value.isprintable():
        raise invalid(name, f"{name} must be 1-{limit} printable characters.")
    return value


# The rules of the request models' fields (functions/api/schemas/work_orders/work_orders.py).
def parse_name(value: Any, name: str = "name") -> str | None:
    return _text(value, name, NAME_MAX)


def parse_client_reference(value: Any, name: str = "client_reference") -> str | None:
    return _text(value, name, CLIENT_REFERENCE_MAX)


def parse_metadata_map(value: Any, name: str = "metadata") -> dict[str, str]:
    """Metadata replacing the whole map; null clears it."""
    return parse_metadata(value, field=name) or {}


def parse_closed(value: Any, name: str = "closed") -> Literal[True]:
    if value is not True:
        raise invalid(name, "closed may only be true: a closed work order stays closed.")
    return True


def require_changes(given: frozenset[str]) -> frozenset[str]:
    """A PATCH changes at least one field."""
    if not given:
        raise invalid("body", "Give at least one of name, metadata, closed.")
    return given


def member_of(batch_id: str | None, chat_job_id: str | None) -> tuple[MemberKind, str]:
    """`{batch_id}` or `{chat_job_id}`, exactly one."""
    ids = (("batch_id", batch_id), ("chat_job_id", chat_job_id))
    given = [(name, value) for name, value in ids if value is not None]
    if len(given) != 1:
        raise invalid("batch_id", "Give exactly one of batch_id, chat_job_id.")
    name, value = given[0]
    prefix = "batch_" if name == "batch_id" else "chatjob_"
    if not value.startswith(prefix) or len(value) > 64:
        raise invalid(name, f"{name} must be a {prefix} id.")
    return ("batch" if name == "batch_id" else "chat_job"), value


def parse_work_order_id(value: Any, *, field_path: str = "work_order_id") -> str | None:
    """A `work_order_id` given with a batch or a queued chat request."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith("wo_") or len(value) > 64:
        raise invalid(field_path, f"{field_path} must be a wo_ id.")
    return value
