"""The client's work-order and route-policy calls (docs/client.md, docs/work-orders.md,
docs/routing-policy.md) against `httpx.MockTransport`: what each sends, the typed models it
reads, listings followed to their last page, and the retries each write allows: a work
order's create carries one `Idempotency-Key` on every attempt and is repeated; an attach is
not; a policy save is repeated without a version and not with one."""

from __future__ import annotations

from typing import Any

import pytest
from batchroute_client import (
    APIConnectionError,
    ConflictError,
    InternalServerError,
    Money,
    RoutePolicy,
    RoutePolicyChange,
    WorkOrder,
    WorkOrderMember,
)

from tests.unit.test_client_sdk import error
from tests.unit.test_client_settings import AT, LATER, client_for, money, ok, sent
from tests.unit.test_client_unsafe_retries import GENERATED_KEY, LOST, keys, lost_answer

BATCH = "batch_01j0000000000000000000000a"
REFERENCE = {"client_reference": "PO-4711"}


def work_order(*, closed: bool = False, members: int = 0) -> dict[str, Any]:
    return {
        "id": "wo_1",
        "object": "work_order",
        "name": "Q3 invoices",
        "client_reference": "PO-4711",
        "metadata": {"team": "ap"},
        "status": "in_progress" if members else "empty",
        "closed": closed,
        "closed_at": AT if closed else None,
        "created_at": AT,
        "updated_at": AT,
        "members": {
            "total": members,
            "in_progress": members,
            "completed": 0,
            "failed": 0,
            "canceled": 0,
            "expired": 0,
            "limit": 1000,
        },
        "items": {"total": 2 * members, "pending": 2 * members, "completed": 0, "failed": 0, "canceled": 0},
        "cost": {"reserved": money("0.02" if members else "0.00"), "charged": money("0.00")},
        **LATER,
    }


def member(batch_id: str = BATCH) -> dict[str, Any]:
    return {
        "batch_id": batch_id,
        "kind": "batch",
        "chat_job_id": None,
        "joined_at": AT,
        "items": 2,
        "reserved": money("0.02"),
        "settled_at": None,
        "outcome": None,
    }


def policy(version: int = 1) -> dict[str, Any]:
    return {
        "policy": {
            "object": "route_policy",
            "org_id": "org_1",
            "configured": version > 0,
            "version": version,
            "provider_allow": [],
            "provider_deny": ["edge-eu"],
            "allowed_regions": [],
            "routing_mode": None,
            "privacy_tier_floor": None,
            "max_price_per_million_tokens": {},
            "chat_fallbacks_allowed": True,
            "created_at": AT,
            "updated_at": AT,
            "updated_by": "key_1",
            **LATER,
        }
    }


def change(version: int) -> dict[str, Any]:
    return {
        "object": "route_policy.change",
        "id": f"audit_{version}",
        "org_id": "org_1",
        "version": version,
        "action": "route_policy.updated",
        "before": {"provider_deny": []},
        "after": {"provider_deny": ["edge-eu"]},
        "actor_user_id": None,
        "actor_key_id": "key_1",
        "actor_role": "admin",
        "ip_address": None,
        "created_at": AT,
    }


def test_work_orders_create_list_read_change_attach_and_list_members() -> None:
    client, recorder = client_for(
        ok(work_order(), 201),
        ok({"object": "list", "data": [work_order()], "next_cursor": "wo_1"}),
        ok({"object": "list", "data": [], "next_cursor": None}),
        ok(work_order()),
        ok(work_order(closed=True)),
        ok({"work_order": work_order(members=1), "member": member()}),
        ok({"object": "list", "data": [member()], "next_cursor": None}),
    )
    created = client.work_orders.create(
        name="Q3 invoices", client_reference="PO-4711", metadata={"team": "ap"}, idempotency_key="wo-key-1"
    )
    listed = list(client.work_orders.list(status="empty", client_reference="PO-4711"))
    got = client.work_orders.get("wo_1")
    closed = client.work_orders.update("wo_1", closed=True)
    added = client.work_orders.add_member("wo_1", batch_id=BATCH)
    members = list(client.work_orders.members("wo_1"))
    assert [sent(r) for r in recorder.requests] == [
        (
            "POST",
            "/v1/work-orders",
            {},
            {"name": "Q3 invoices", "client_reference": "PO-4711", "metadata": {"team": "ap"}},
        ),
        ("GET", "/v1/work-orders", {"status": "empty", "client_reference": "PO-4711"}, None),
        (
            "GET",
            "/v1/work-orders",
            {"status": "empty", "client_reference": "PO-4711", "cursor": "wo_1"},
            None,
        ),
        ("GET", "/v1/work-orders/wo_1", {}, None),
        ("PATCH", "/v1/work-orders/wo_1", {}, {"closed": True}),
        ("POST", "/v1/work-orders/wo_1/members", {}, {"batch_id": BATCH}),
        ("GET", "/v1/work-orders/wo_1/members", {}, None),
    ]
    assert keys(recorder)[0] == "wo-key-1" and set(keys(recorder)[1:]) == {None}
    assert isinstance(created, WorkOrder) and created == got and [w.id for w in listed] == ["wo_1"]
    assert created.members.limit == 1000 and created.cost.reserved == Money("usd", "0.00")
    assert created.raw["added_later"] == LATER["added_later"]
    assert closed.closed and closed.closed_at == AT
    assert added.work_order.members.total == 1 and added.member.batch_id == BATCH
    assert members == [added.member] and isinstance(members[0], WorkOrderMember)


@pytest.mark.parametrize("how", LOST)
def test_a_work_order_create_is_repeated_with_one_key_and_an_attach_is_not(how: str) -> None:
    client, recorder = client_for(lost_answer(how), ok(work_order(), 201))
    assert client.work_orders.create(name="Q3 invoices").id == "wo_1"
    (first, again) = keys(recorder)
    assert first == again and first is not None and GENERATED_KEY.match(first)
    client, recorder = client_for(
        lost_answer(how), ok({"work_order": work_order(members=1), "member": member()})
    )
    with pytest.raises((APIConnectionError, InternalServerError)):
        client.work_orders.add_member("wo_1", batch_id=BATCH)
    assert len(recorder.requests) == 1  # a repeat of an attach made would answer 409


def test_the_route_policy_is_read_saved_and_its_history_listed() -> None:
    client, recorder = client_for(
        ok(policy(0)),
        ok(policy(1)),
        ok({"data": [change(2)], "next_cursor": "audit_2"}),
        ok({"data": [change(1)], "next_cursor": None}),
    )
    current = client.routing.policy()
    saved = client.routing.update_policy(version=0, provider_deny=["edge-eu"])
    history = list(client.routing.policy_history(page_size=1))
    assert [sent(r) for r in recorder.requests] == [
        ("GET", "/v1/routing/policy", {}, None),
        ("PUT", "/v1/routing/policy", {}, {"provider_deny": ["edge-eu"], "version": 0}),
        ("GET", "/v1/routing/policy/history", {"limit": "1"}, None),
        ("GET", "/v1/routing/policy/history", {"limit": "1", "cursor": "audit_2"}, None),
    ]
    assert isinstance(current, RoutePolicy) and not current.configured and current.version == 0
    assert saved.configured and saved.version == 1 and saved.provider_deny == ["edge-eu"]
    assert saved.raw["added_later"] == LATER["added_later"]
    assert [c.version for c in history] == [2, 1] and isinstance(history[0], RoutePolicyChange)


def test_a_policy_save_is_repeated_without_a_version_and_not_with_one() -> None:
    client, recorder = client_for(lost_answer("502"), ok(policy(2)))
    assert client.routing.update_policy(provider_deny=["edge-eu"]).version == 2
    assert len(recorder.requests) == 2  # the same body again changes nothing
    client, recorder = client_for(lost_answer("502"), ok(policy(2)))
    with pytest.raises(InternalServerError):
        client.routing.update_policy(version=1, provider_deny=["edge-eu"])
    assert len(recorder.requests) == 1  # a repeat after a save would be refused as a mismatch
    client, _ = client_for(error(409, "policy_version_mismatch", expected_version=1, current_version=2))
    with pytest.raises(ConflictError) as stale:
        client.routing.update_policy(version=1, provider_deny=[])
    assert stale.value.code == "policy_version_mismatch"
    assert stale.value.details == {"expected_version": 1, "current_version": 2}
