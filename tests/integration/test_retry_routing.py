"""A retry asks what its source asked (docs/batches.md, "Retry"): the failed items of a batch
created with a region, a price cap or required hosted tools, or from a quote that gave them,
are routed under the same constraints, which the batch keeps on its PLAN item (written once,
never rewritten by progress)."""

from __future__ import annotations

import json
from typing import Any

import boto3
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.catalog import builtin_catalog
from batchroute.config import get_settings
from batchroute.domain.routing.lanes import contract_exclusions
from batchroute_tools.local.provision import LocalStack
from tests.integration.batch_pipeline_support import LLAMA, item, run_workflow
from tests.integration.principals import TestOrg
from tests.integration.principals import org as org  # the fixtures
from tests.integration.principals import pipeline_client as pipeline_client
from tests.integration.principals import pipeline_stack as pipeline_stack

HAIKU = "claude-3-5-haiku"  # anthropic (hosted web_search) and bedrock (no hosted tools), same price
US_LANES = {"edge-us", "together", "groq", "deepinfra", "fireworks"}  # LLAMA's lanes that serve "us"


def _batch_items(model: str = LLAMA) -> list[dict[str, Any]]:
    return [item(0, model), item(1, model, text="[simulate:fail] always")]


def _run(client: TestClient, org: TestOrg, stack: LocalStack, body: dict[str, Any], key: str) -> str:
    created = client.post("/v1/batches", json=body, headers={**org.key_headers(), "Idempotency-Key": key})
    assert created.status_code == 202, created.text
    batch_id = str(created.json()["batch"]["id"])
    run_workflow(stack, batch_id)
    batch = client.get(f"/v1/batches/{batch_id}", headers=org.key_headers()).json()["batch"]
    assert batch["state"] == "completed" and batch["counts"]["failed"] == 1, batch
    return batch_id


def _retry(client: TestClient, org: TestOrg, batch_id: str) -> str:
    retried = client.post(f"/v1/batches/{batch_id}/retry", headers=org.key_headers())
    assert retried.status_code == 202, retried.text
    assert retried.json()["retry_item_count"] == 1 and retried.json()["source_batch_id"] == batch_id
    return str(retried.json()["batch"]["id"])


def _lanes(batch_id: str) -> tuple[set[str], dict[str, str]]:
    """The providers of the batch plan's selected lanes, and each rejected lane's code."""
    record = BatchRecords(get_settings().table_name("batches")).get(batch_id)
    assert record is not None and record.plan is not None
    groups = record.plan["groups"]
    selected = {lane["provider"] for group in groups for lane in group["selected_lanes"]}
    rejected = {
        lane["provider"]: lane["rejection"]["code"] for group in groups for lane in group["rejected_lanes"]
    }
    return selected, rejected


def _stored_items(batch_id: str) -> dict[str, dict[str, Any]]:
    raw = boto3.client("dynamodb").query(
        TableName=get_settings().table_name("batches"),
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"BATCH#{batch_id}"}},
    )["Items"]
    return {row["sk"]["S"]: row for row in raw}


def _routing_fields(batch_id: str) -> Any:
    record = BatchRecords(get_settings().table_name("batches")).get(batch_id)
    assert record is not None
    return record.routing_fields


def test_a_retry_of_a_batch_in_one_region_stays_in_it_under_the_same_price_cap(
    client: TestClient, org: TestOrg, stack: LocalStack
) -> None:
    # Given a batch in region "us" under a price cap (edge-eu is as cheap as edge-us; the cap
    # rules out the dearer lanes), whose one item always fails
    cap = {"input_per_mtok": "0.04"}
    body = {"items": _batch_items(), "region": "us", "max_price": cap}
    source = _run(client, org, stack, body, "retry-region-0001")
    selected, rejected = _lanes(source)
    assert selected == {"edge-us"} and rejected["edge-eu"] == "region_unavailable"
    assert {rejected[p] for p in ("together", "groq", "fireworks")} == {"price_cap_exceeded"}
    # And it keeps the constraints its request gave on its PLAN item, not on META
    stored = _stored_items(source)
    assert "routing_fields" in stored["PLAN"] and "routing_fields" not in stored["META"]
    assert _routing_fields(source) == {"regions": ["us"], "max_price": cap}
    # When its failed item is retried
    retry = _retry(client, org, source)
    # Then the retry is routed in "us" only, under the same cap
    selected, rejected = _lanes(retry)
    assert selected <= US_LANES and selected == {"edge-us"}
    assert rejected["edge-eu"] == "region_unavailable"
    assert {rejected[p] for p in ("together", "groq", "fireworks")} == {"price_cap_exceeded"}
    assert _routing_fields(retry) == {
        "routing_mode": "cheapest",
        "privacy_tier": "standard",
        "sla_tier": "standard",
        "regions": ["us"],
        "max_price": cap,
    }


def test_a_retry_keeps_the_hosted_tools_its_source_required(
    client: TestClient, org: TestOrg, stack: LocalStack
) -> None:
    # Given a batch that requires web_search (only anthropic's lane offers it for the model)
    body = {"items": _batch_items(HAIKU), "required_tools": ["web_search"], "metadata": {"job": "nightly"}}
    source = _run(client, org, stack, body, "retry-tools-0001")
    assert _lanes(source) == ({"anthropic"}, {"bedrock": "tool_support"})
    assert _routing_fields(source) == {"required_tools": ["web_search"]}
    # When its failed item is retried
    retry = _retry(client, org, source)
    # Then the lane without the tool is refused for the retry too (not merely outranked)
    assert _lanes(retry) == ({"anthropic"}, {"bedrock": "tool_support"})
    assert _routing_fields(retry)["required_tools"] == ["web_search"]
    # And the retry carries the source's metadata (its webhook stays with the source)
    shown = client.get(f"/v1/batches/{retry}", headers=org.key_headers()).json()["batch"]
    assert shown["metadata"] == {"job": "nightly"}


def test_a_retry_of_a_batch_from_a_quote_keeps_the_quotes_region(
    client: TestClient, org: TestOrg, stack: LocalStack
) -> None:
    # Given a quote in region "us", and a batch created from it by its id alone
    quote = client.post(
        "/v1/quotes/model", json={"items": _batch_items(), "region": "us"}, headers=org.key_headers()
    )
    assert quote.status_code == 200, quote.text
    source = _run(client, org, stack, {"quote_id": quote.json()["quote_id"]}, "retry-quote-0001")
    assert _lanes(source)[0] == {"edge-us"}
    # Then the batch keeps the quote's routing fields (the batch body gave none)
    assert _routing_fields(source) == {"regions": ["us"]}
    # And its retry is routed in "us" too
    selected, rejected = _lanes(_retry(client, org, source))
    assert selected == {"edge-us"} and rejected["edge-eu"] == "region_unavailable"


def test_a_batch_from_a_quote_stored_before_routing_fields_were_kept_still_works(
    client: TestClient, org: TestOrg
) -> None:
    # Given a quote whose stored snapshot has no routing fields (stored by the previous release)
    quote = client.post("/v1/quotes/model", json={"items": [item(0)]}, headers=org.key_headers())
    assert quote.status_code == 200, quote.text
    key = {"pk": {"S": f"QUOTE#{quote.json()['quote_id']}"}, "sk": {"S": "META"}}
    table = get_settings().table_name("batches")
    dynamodb = boto3.client("dynamodb")
    snapshot = json.loads(dynamodb.get_item(TableName=table, Key=key)["Item"]["snapshot"]["S"])
    assert snapshot["routing_fields"] == {}
    del snapshot["routing_fields"]
    dynamodb.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "snapshot"},
        ExpressionAttributeValues={":s": {"S": json.dumps(snapshot)}},
    )
    # When a batch is created from it
    headers = {**org.key_headers(), "Idempotency-Key": "retry-oldquote-0001"}
    created = client.post("/v1/batches", json={"quote_id": quote.json()["quote_id"]}, headers=headers)
    # Then it is, and keeps the plan's mode and tiers as its routing fields
    assert created.status_code == 202, created.text
    assert _routing_fields(created.json()["batch"]["id"]) == {
        "routing_mode": "cheapest",
        "sla_tier": "standard",
        "privacy_tier": "standard",
    }


def test_a_retry_of_a_workflow_product_is_priced_as_the_product(
    client: TestClient, org: TestOrg, stack: LocalStack
) -> None:
    # Given a workflow product's batch, one of whose inputs always fails
    inputs = [
        {
            "ticket": {"body": f"My order {n} is late{' [simulate:fail]' if n == 0 else ''}"},
            "categories": ["a", "b"],
        }
        for n in range(3)
    ]
    quote = client.post(
        "/v1/quotes/workflow",
        json={"product": "ticket-classification", "inputs": inputs},
        headers=org.key_headers(),
    )
    assert quote.status_code == 200, quote.text
    source = _run(client, org, stack, {"quote_id": quote.json()["quote_id"]}, "retry-wf-0001")
    records = BatchRecords(get_settings().table_name("batches"))
    assert getattr(records.get(source), "fee_kind", None) == "workflow"
    # When its failed input is retried
    retry = _retry(client, org, source)
    # Then the retry pays the product's fee, as its source did (it was priced as a plain batch),
    # and fulfils the same product's contract: no lane outside it is planned
    retried = records.get(retry)
    assert getattr(retried, "fee_kind", None) == "workflow"
    assert getattr(retried, "workflow_product", None) == "ticket-classification"
    catalog = builtin_catalog()
    product = next(p for p in catalog.workflow_products if p.slug == "ticket-classification")
    outside = contract_exclusions(catalog, product)
    assert outside
    plan = getattr(retried, "plan", None) or {}
    planned = {lane["lane_id"] for group in plan["groups"] for lane in group["selected_lanes"]}
    assert planned and not planned & set(outside), planned
    run_workflow(stack, retry)
    receipt = client.get(f"/v1/batches/{retry}/billing-receipt", headers=org.key_headers()).json()
    assert receipt["service_fee_basis"]["fee"] == "workflow_product_fee"
