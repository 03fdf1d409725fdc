"""What a client asks of work orders, as the request models build it
(functions/api/schemas/work_orders/work_orders.py validates each field once, at the edge)."""

from __future__ import annotations

from dataclasses import dataclass, field

from batchroute.domain.work_orders.work_orders import MemberKind


@dataclass(frozen=True, slots=True)
class CreateWorkOrder:
    """A new, empty work order; `request_hash` is the body as sent, for its Idempotency-Key."""

    request_hash: str
    name: str | None = None
    client_reference: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UpdateWorkOrder:
    """A PATCH: only the fields named in `given` change (a null name clears it; metadata
    replaces the whole map; `closed` is only ever true: closing is final)."""

    given: frozenset[str]
    name: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    closed: bool = False


@dataclass(frozen=True, slots=True)
class AddMember:
    """An existing batch or queued chat job of the org joining a work order."""

    kind: MemberKind
    member_id: str
