"""The pure rules of work orders (domain/work_orders/work_orders.py): the status derived from the
counters, a settled member's items, and the request bodies."""

from __future__ import annotations

from typing import Any, TypeVar

import pytest
from pydantic import ValidationError

from batchroute.domain.work_orders.work_orders import (
    MAX_MEMBERS,
    Tallies,
    WorkOrder,
    derive_status,
    member_outcome,
    settled_items,
)
from batchroute.errors import InvalidRequest
from batchroute.services.work_orders.commands import AddMember, CreateWorkOrder, UpdateWorkOrder
from functions.api.schemas.common import ContractBody
from functions.api.schemas.work_orders.work_orders import WorkOrderCreate, WorkOrderMemberAdd, WorkOrderUpdate


@pytest.mark.parametrize(
    ("tallies", "status"),
    [
        (Tallies(), "empty"),
        (Tallies(members=2, members_active=1, members_completed=1), "in_progress"),
        (Tallies(members=2, members_completed=2, items_total=4, items_completed=4), "completed"),
        (
            Tallies(members=2, members_completed=2, items_total=4, items_completed=3, items_failed=1),
            "completed_with_failures",
        ),
        (
            Tallies(
                members=2,
                members_completed=1,
                members_canceled=1,
                items_total=2,
                items_completed=1,
                items_canceled=1,
            ),
            "completed_with_failures",
        ),
        (
            Tallies(members=1, members_completed=1, items_total=3, items_completed=2, items_canceled=1),
            "completed_with_failures",
        ),
        (Tallies(members=2, members_failed=1, members_expired=1), "failed"),
        (Tallies(members=2, members_failed=1, members_canceled=1), "failed"),
        (Tallies(members=2, members_canceled=2), "canceled"),
    ],
)
def test_the_status_follows_from_the_members(tallies: Tallies, status: str) -> None:
    assert derive_status(tallies) == status


def test_a_settled_members_items_and_outcome() -> None:
    # Items that neither completed nor failed (canceled, expired, never run) count as canceled
    assert settled_items({"completed": 3, "failed": 1, "pending": 2}, 6) == {
        "items_completed": 3,
        "items_failed": 1,
        "items_canceled": 2,
    }
    assert settled_items(None, 2) == {"items_completed": 0, "items_failed": 0, "items_canceled": 2}
    # Settle makes a batch still finalizing completed; terminal states keep theirs
    assert [member_outcome(s) for s in ("finalizing", "completed", "failed", "canceled", "expired")] == [
        "completed",
        "completed",
        "failed",
        "canceled",
        "expired",
    ]


def test_the_view_shows_pending_items_and_money() -> None:
    order = WorkOrder(
        work_order_id="wo_1",
        org_id="org_1",
        name=None,
        client_reference="PO-1",
        metadata={},
        created_at="t",
        updated_at="t",
        tallies=Tallies(
            members=1, members_active=1, items_total=5, items_completed=0, reserved_micros=1_500_000
        ),
    )
    view = order.to_api()
    assert view["items"]["pending"] == 5 and view["members"]["limit"] == MAX_MEMBERS
    assert view["cost"]["reserved"] == {"currency": "usd", "amount": "1.50"}
    assert order.reference.to_mapping() == {"id": "wo_1", "client_reference": "PO-1"}


M = TypeVar("M", bound=ContractBody)


def parse_create(body: dict[str, Any]) -> CreateWorkOrder:
    """The command the create route hands the service, or the refusal the API answers."""
    return _as_the_client_sees_it(WorkOrderCreate, body).command()


def parse_update(body: dict[str, Any]) -> UpdateWorkOrder:
    """The command the update route hands the service, or the refusal the API answers."""
    return _as_the_client_sees_it(WorkOrderUpdate, body).command()


def parse_member(body: dict[str, Any]) -> AddMember:
    return _as_the_client_sees_it(WorkOrderMemberAdd, body).command()


def _as_the_client_sees_it(model: type[M], body: Any) -> M:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        [error] = exc.errors()
        details = (error.get("ctx") or {}).get("details")
        raise InvalidRequest(error["msg"], code=error["type"], details=details) from exc


@pytest.mark.parametrize(
    ("parse", "body", "field"),
    [
        (parse_create, {"name": " "}, "name"),
        (parse_create, {"client_reference": "x" * 129}, "client_reference"),
        (parse_create, {"owner": "me"}, "owner"),
        (parse_update, {}, "body"),
        (parse_update, {"closed": "yes"}, "closed"),
        (parse_member, {"batch_id": "batch_1", "chat_job_id": "chatjob_1"}, "batch_id"),
        (parse_member, {"chat_job_id": "batch_1"}, "chat_job_id"),
        (parse_member, {"batch_id": 7}, "batch_id"),
        (parse_member, {"batch_id": "batch_1", "owner": "me"}, "owner"),
        (parse_update, {"name": " "}, "name"),
        (parse_update, {"metadata": "x"}, "metadata"),
    ],
)
def test_bodies_are_refused_with_the_field(parse: Any, body: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse(body)
    assert refused.value.details is not None and refused.value.details["field"] == field


def test_bodies_read_what_is_given() -> None:
    created = parse_create({"metadata": {"n": 1}})
    assert (created.name, created.client_reference, created.metadata) == (None, None, {"n": "1"})
    assert parse_update({"name": None, "closed": True}) == UpdateWorkOrder(
        given=frozenset({"name", "closed"}), name=None, closed=True
    )
    assert parse_member({"chat_job_id": "chatjob_1"}) == AddMember("chat_job", "chatjob_1")
