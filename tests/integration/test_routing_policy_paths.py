"""The org's route policy applies on every entry path: quotes, native batch create (items and
`input_file_id`), compat batches, direct chat and queued chat. Each is driven over HTTP on
moto under a policy that denies the cheapest lane of the model (edge-eu), and each shows the
same outcome: another lane serves, and edge-eu is rejected with code `policy` and rule
`provider_deny` in what the customer sees (quote lanes, the batch's plan that becomes its
receipt, the direct receipt)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.route_policies import RoutePolicyStore
from batchroute.config import get_settings
from batchroute.domain.batches.record import batch_id_for
from batchroute.ids import new_id
from batchroute_tools.local.provision import LocalStack
from tests.integration.principals import TestOrg, instant_chat_client, new_org

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"  # cheapest lane: edge-eu
DENIED = f"edge-eu/{LLAMA}"

# What a path shows: the providers that serve, and the rejected lanes ({lane_id, code, rule}).
Outcome = tuple[set[str], list[dict[str, Any]]]


@pytest.fixture
def client(local_aws: LocalStack) -> Iterator[TestClient]:
    with instant_chat_client() as test_client:
        yield test_client


@pytest.fixture
def org(client: TestClient) -> TestOrg:
    return new_org(credit_usd="10")


def item(n: int) -> dict[str, Any]:
    return {
        "customer_item_id": f"item-{n}",
        "operation": "responses",
        "model": LLAMA,
        "input": {"messages": [{"role": "user", "content": f"Question {n}"}]},
        "max_output_tokens": 16,
    }


def idempotent(org: TestOrg) -> dict[str, str]:
    return {**org.key_headers(), "Idempotency-Key": new_id("batch")}


def planned(batch_id: str) -> Outcome:
    """The batch's routing plan, as its receipt will list it."""
    batch = BatchRecords(get_settings().table_name("batches")).get(batch_id)
    assert batch is not None and batch.plan is not None
    return lanes_of(batch.plan["groups"])


def lanes_of(groups: list[dict[str, Any]]) -> Outcome:
    selected = {lane["provider"] for group in groups for lane in group["selected_lanes"]}
    rejected = [
        {
            "lane_id": lane["lane_id"],
            "code": lane["rejection"]["code"],
            "rule": lane["rejection"]["details"].get("rule"),
        }
        for group in groups
        for lane in group["rejected_lanes"]
    ]
    return selected, rejected


def via_quote(client: TestClient, org: TestOrg) -> Outcome:
    response = client.post("/v1/quotes/model", json={"items": [item(0), item(1)]}, headers=org.key_headers())
    assert response.status_code == 200, response.text
    quote = response.json()
    assert quote["route_policy"] == {"version": 1, "narrowed": []}
    selected = {lane["provider"] for lane in quote["quote_lanes"] if lane["selected"]}
    rejected = [
        {
            "lane_id": lane["lane_id"],
            "code": lane["rejection"]["code"],
            "rule": lane["rejection"]["details"].get("rule"),
        }
        for lane in quote["quote_lanes"]
        if not lane["selected"]
    ]
    return selected, rejected


def via_batch_items(client: TestClient, org: TestOrg) -> Outcome:
    response = client.post("/v1/batches", json={"items": [item(0), item(1)]}, headers=idempotent(org))
    assert response.status_code == 202, response.text
    return planned(response.json()["batch"]["id"])


def via_batch_file(client: TestClient, org: TestOrg) -> Outcome:
    data = b"".join(json.dumps(item(n)).encode() + b"\n" for n in range(2))
    uploaded = client.post(
        "/v1/files", files={"file": ("items.jsonl", data, "application/jsonl")}, headers=org.key_headers()
    )
    assert uploaded.status_code in (200, 201), uploaded.text
    file_id = uploaded.json()["file"]["id"]
    response = client.post("/v1/batches", json={"input_file_id": file_id}, headers=idempotent(org))
    assert response.status_code == 202, response.text
    return planned(response.json()["batch"]["id"])


def via_compat(client: TestClient, org: TestOrg) -> Outcome:
    row = {
        "custom_id": "req-0",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": LLAMA, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16},
    }
    uploaded = client.post(
        "/v1/compat/v1/files",
        files={"file": ("input.jsonl", json.dumps(row).encode() + b"\n", "application/jsonl")},
        data={"purpose": "batch"},
        headers=org.key_headers(),
    )
    assert uploaded.status_code == 200, uploaded.text
    created = client.post(
        "/v1/compat/v1/batches",
        json={
            "input_file_id": uploaded.json()["id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
        },
        headers=org.key_headers(),
    )
    assert created.status_code == 200, created.text
    return planned(created.json()["id"])


def via_chat_direct(client: TestClient, org: TestOrg) -> Outcome:
    body = {"model": LLAMA, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}
    response = client.post("/v1/chat/completions", json=body, headers=org.key_headers())
    assert response.status_code == 200, response.text
    record = BatchRecords(get_settings().table_name("batches")).get(response.headers["x-service-batch-id"])
    assert record is not None and record.billing is not None
    rejected = [  # the receipt's shape, a batch receipt's (domain/chat/routing.py Rejected)
        {
            "lane_id": lane["lane_id"],
            "code": lane["rejection"]["code"],
            "rule": lane["rejection"]["details"].get("rule"),
        }
        for lane in record.billing["rejected_lanes"]
    ]
    return {response.headers["x-service-provider"]}, rejected


def via_chat_queued(client: TestClient, org: TestOrg) -> Outcome:
    body = {"model": LLAMA, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "batch": True}
    response = client.post("/v1/chat/completions", json=body, headers=org.key_headers())
    assert response.status_code == 202, response.text
    batch_id = batch_id_for(response.json()["id"])
    assert batch_id is not None
    return planned(batch_id)


PATHS: dict[str, Callable[[TestClient, TestOrg], Outcome]] = {
    "quote": via_quote,
    "batch_items": via_batch_items,
    "batch_input_file": via_batch_file,
    "compat_batch": via_compat,
    "chat_direct": via_chat_direct,
    "chat_queued": via_chat_queued,
}


@pytest.mark.parametrize("path", list(PATHS))
def test_the_policy_applies_on_every_entry_path(client: TestClient, org: TestOrg, path: str) -> None:
    # Given an org whose route policy denies the model's cheapest provider
    saved = client.put(
        "/v1/routing/policy", json={"provider_deny": ["edge-eu"]}, headers=org.key_headers("owner")
    )
    assert saved.status_code == 200, saved.text
    # When work enters through this path
    selected, rejected = PATHS[path](client, org)
    # Then another provider serves it
    assert selected and "edge-eu" not in selected
    # And the denied lane is rejected by the policy, naming the rule
    assert {"lane_id": DENIED, "code": "policy", "rule": "provider_deny"} in rejected
    # And no lane the policy admits was rejected for it
    assert all(entry["rule"] == "provider_deny" for entry in rejected if entry["code"] == "policy")
    assert [entry["lane_id"] for entry in rejected if entry["code"] == "policy"] == [DENIED]


# -- a request may narrow the policy, never widen it ---------------------------------------------
def test_a_request_is_narrowed_to_the_policy_or_refused_when_nothing_is_left(
    client: TestClient, org: TestOrg
) -> None:
    # Given a policy that allows only the EU and requires the confidential tier
    policy = {"allowed_regions": ["eu"], "privacy_tier_floor": "confidential", "routing_mode": "hybrid"}
    assert client.put("/v1/routing/policy", json=policy, headers=org.key_headers("owner")).status_code == 200
    # When a quote asks for the standard tier in the US or the EU, naming no routing mode
    body = {"items": [item(0)], "privacy_tier": "standard", "regions": ["us", "eu"]}
    quote = client.post("/v1/quotes/model", json=body, headers=org.key_headers())
    # Then it is narrowed to the policy, and the quote says how
    assert quote.status_code == 200, quote.text
    answer = quote.json()
    assert answer["privacy_tier"] == "confidential" and answer["routing_mode"] == "hybrid"
    assert answer["route_policy"]["narrowed"] == [
        {"field": "routing_mode", "requested": None, "effective": "hybrid", "rule": "routing_mode"},
        {
            "field": "privacy_tier",
            "requested": "standard",
            "effective": "confidential",
            "rule": "privacy_tier_floor",
        },
        {"field": "regions", "requested": ["us", "eu"], "effective": ["eu"], "rule": "allowed_regions"},
    ]
    served = {lane["provider"] for lane in answer["quote_lanes"] if lane["selected"]}
    assert served == {"edge-eu"}
    # And a request whose regions all lie outside the policy is refused, on quotes and creates alike
    for path, headers in (("/v1/quotes/model", org.key_headers()), ("/v1/batches", idempotent(org))):
        refused = client.post(path, json={"items": [item(0)], "region": "us"}, headers=headers)
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "policy_conflict"
        assert error["details"] == {
            "field": "region",
            "rule": "allowed_regions",
            "allowed_regions": ["eu"],
            "requested": ["us"],
        }


def test_a_quote_made_under_an_older_policy_cannot_become_a_batch(client: TestClient, org: TestOrg) -> None:
    # Given a quote, then a change of the route policy
    quote = client.post("/v1/quotes/model", json={"items": [item(0)]}, headers=org.key_headers()).json()
    assert quote["route_policy"] is None
    assert (
        client.put(
            "/v1/routing/policy", json={"provider_deny": ["edge-eu"]}, headers=org.key_headers("owner")
        ).status_code
        == 200
    )
    # When a batch is created from the quote
    response = client.post("/v1/batches", json={"quote_id": quote["quote_id"]}, headers=idempotent(org))
    # Then it is refused: the quote's lanes were chosen under the old policy
    assert response.status_code == 409, response.text
    assert response.json()["error"]["code"] == "quote_policy_changed"
    assert response.json()["error"]["details"] == {"quoted_policy_version": 0, "policy_version": 1}
    # And a fresh quote under the new policy becomes a batch
    fresh = client.post("/v1/quotes/model", json={"items": [item(0)]}, headers=org.key_headers()).json()
    created = client.post("/v1/batches", json={"quote_id": fresh["quote_id"]}, headers=idempotent(org))
    assert created.status_code == 202, created.text


def test_warm_direct_chat_spends_no_aws_call_on_the_policy(
    client: TestClient, org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a saved policy and a count of every policy read from DynamoDB
    reads: list[str] = []
    original = RoutePolicyStore.policy

    def counted(self: RoutePolicyStore, org_id: str, *, consistent: bool = True) -> Any:
        reads.append(org_id)
        return original(self, org_id, consistent=consistent)

    monkeypatch.setattr(RoutePolicyStore, "policy", counted)
    owner = org.key_headers("owner")
    assert (
        client.put("/v1/routing/policy", json={"provider_deny": ["edge-eu"]}, headers=owner).status_code
        == 200
    )
    reads.clear()
    # When direct requests follow within the cache's lifetime
    body = {"model": LLAMA, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    for _ in range(3):
        response = client.post("/v1/chat/completions", json=body, headers=org.key_headers())
        assert response.status_code == 200 and response.headers["x-service-provider"] != "edge-eu"
    # Then none of them read the policy from DynamoDB, yet each obeyed it
    assert reads == []
