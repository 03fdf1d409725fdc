"""A failover on the receipt (review rv_receipts F2, F4, F6): the same items run from the same
quote with and without the quoted lane going down cost the same service fee (a failover lane
counts under its planned lane: docs/batches.md, "Failover"), the lane that took over is not
also listed as a rejected lane, and the lanes' costs add up to the provider subtotal."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.config import get_settings
from batchroute.money import Money
from batchroute_tools.local.provision import LocalStack
from tests.integration.batch_pipeline_support import LLAMA, item, run_until_done
from tests.integration.principals import TestOrg
from tests.integration.principals import org as org  # the fixtures
from tests.integration.principals import pipeline_client as pipeline_client
from tests.integration.principals import pipeline_stack as pipeline_stack


def _items(marker: str) -> list[dict[str, Any]]:
    """12 items, the last carrying `marker` (of one length, so both runs send the same tokens)."""
    items = [item(n, LLAMA) for n in range(12)]
    items[-1]["input"]["messages"][0]["content"] += f" {marker}"
    return items


def _receipt(client: TestClient, org: TestOrg, stack: LocalStack, marker: str, key: str) -> dict[str, Any]:
    """The billing receipt of the items run from their own quote."""
    items = _items(marker)
    quote = client.post("/v1/quotes/model", json={"items": items}, headers=org.key_headers())
    assert quote.status_code == 200, quote.text
    body = {"quote_id": quote.json()["quote_id"], "items": items}
    created = client.post("/v1/batches", json=body, headers={**org.key_headers(), "Idempotency-Key": key})
    assert created.status_code == 202, created.text
    record = BatchRecords(get_settings().table_name("batches")).get(created.json()["batch"]["id"])
    assert record is not None and record.execution_arn
    assert run_until_done(stack, record.execution_arn, budget_seconds=60)["status"] == "SUCCEEDED"
    answer = client.get(f"/v1/batches/{record.batch_id}/billing-receipt", headers=org.key_headers())
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _usd(view: dict[str, str]) -> Money:
    return Money.usd(view["amount"])


def test_a_failover_costs_no_extra_lane_fee_and_the_receipt_adds_up(
    client: TestClient, org: TestOrg, stack: LocalStack
) -> None:
    # Given the same 12 items run twice: once as quoted (edge-eu), once with edge-eu going down
    # on the last item, so that edge-us takes over
    plain = _receipt(client, org, stack, "[simulate:down:nowhere]", "failover-receipt-plain")
    failover = _receipt(client, org, stack, "[simulate:down:edge-eu]", "failover-receipt-down")
    ran = {lane["lane_id"]: lane for lane in failover["provider_lanes"]}
    assert [lane["lane_id"] for lane in plain["provider_lanes"]] == [f"edge-eu/{LLAMA}"]
    assert ran.keys() == {f"edge-eu/{LLAMA}", f"edge-us/{LLAMA}"}
    assert ran[f"edge-us/{LLAMA}"]["failover_from"]
    # Then the customer pays the same service fee: one lane's control-plane fee
    assert failover["service_fee_basis"]["lane_count"] == plain["service_fee_basis"]["lane_count"] == 1
    assert failover["service_fee"] == plain["service_fee"]
    assert "(1 lane)" in failover["service_fee_basis"]["schedule_line"]
    assert failover["absorbed"] == plain["absorbed"] == {"currency": "usd", "amount": "0.00"}
    # And no lane that ran is listed as rejected ("Eligible, but not needed")
    rejected = {lane["lane_id"] for lane in failover["rejected_lanes"]}
    assert rejected and rejected.isdisjoint(ran)
    assert f"edge-us/{LLAMA}" in {lane["lane_id"] for lane in plain["rejected_lanes"]}
    # And each receipt's lane costs add up to its provider subtotal
    for receipt in (plain, failover):
        costs = sum((_usd(lane["cost"]) for lane in receipt["provider_lanes"]), Money.zero())
        assert costs == _usd(receipt["provider_subtotal"])
        assert _usd(receipt["credit_charged"]) + _usd(receipt["credit_released"]) == _usd(
            receipt["credit_reserved"]
        )


def test_a_failover_keeps_to_the_route_policy_as_it_stands_when_it_happens(
    client: TestClient, org: TestOrg, stack: LocalStack
) -> None:
    # Given a batch quoted on edge-eu (whose next lane is edge-us) that will find edge-eu down
    items = _items("[simulate:down:edge-eu]")
    quote = client.post("/v1/quotes/model", json={"items": items}, headers=org.key_headers())
    body = {"quote_id": quote.json()["quote_id"], "items": items}
    headers = {**org.key_headers(), "Idempotency-Key": "failover-policy-0001"}
    created = client.post("/v1/batches", json=body, headers=headers)
    assert created.status_code == 202, created.text
    # And the org denies edge-us after the batch was made
    denied = client.put("/v1/routing/policy", json={"provider_deny": ["edge-us"]}, headers=org.key_headers())
    assert denied.status_code == 200, denied.text
    # When the batch runs and its lane fails over
    record = BatchRecords(get_settings().table_name("batches")).get(created.json()["batch"]["id"])
    assert record is not None and record.execution_arn
    assert run_until_done(stack, record.execution_arn, budget_seconds=60)["status"] == "SUCCEEDED"
    receipt = client.get(f"/v1/batches/{record.batch_id}/billing-receipt", headers=org.key_headers()).json()
    # Then it went to the next lane the policy admits, never to edge-us
    ran = {lane["provider"] for lane in receipt["provider_lanes"]}
    assert "edge-eu" in ran and "edge-us" not in ran and len(ran) == 2, ran
