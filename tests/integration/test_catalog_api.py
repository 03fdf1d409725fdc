"""The public catalog, provider, fee and content endpoints over HTTP, on moto."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.lanes import LaneStateStore
from batchroute.catalog import builtin_catalog
from batchroute.clock import FixedClock, isoformat
from batchroute.config import Settings
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.deps import get_clock

CATALOG = builtin_catalog()
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
LLAMA_70B = "meta-llama/Llama-3.3-70B-Instruct"


@pytest.fixture
def lanes(local_aws: LocalStack) -> LaneStateStore:
    """Every lane heartbeating at NOW with its full daily capacity, except Groq (no record)."""
    store = LaneStateStore(local_aws.tables["controls"])
    for lane in CATALOG.lanes:
        if lane.provider != "groq":
            store.heartbeat(lane.lane_id, lane.daily_capacity_items, isoformat(NOW))
    return store


@pytest.fixture
def client(lanes: LaneStateStore) -> TestClient:
    app = create_app()
    app.dependency_overrides[get_clock] = lambda: FixedClock(NOW)
    return TestClient(app, raise_server_exceptions=False)


# -- models --------------------------------------------------------------------------------
def test_model_list_without_credentials(client: TestClient) -> None:
    # Given no credentials / When the model list is asked
    response = client.get("/v1/catalog/models")
    # Then every model, the pricing date and the provider count
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"data", "pricing_updated_at", "provider_count"}
    assert [m["id"] for m in body["data"]] == [m.id for m in CATALOG.models]
    assert body["pricing_updated_at"] == CATALOG.pricing_updated_at
    assert body["provider_count"] == 10
    first = body["data"][0]
    for key in ("routing_eligibility", "context_window", "providers", "capacity", "regions", "retention"):
        assert key in first
    assert first["providers"][0]["pricing"]["batch_input"] == "0.075"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("operation=embeddings", {"text-embedding-3-small", "BAAI/bge-large-en-v1.5"}),
        ("provider=groq", {LLAMA_70B, "meta-llama/Llama-3.1-8B-Instruct"}),
        ("privacy_tier=restricted", set()),
        ("runtime_capability=audio", {"gemini-2.0-flash", "gemini-1.5-flash"}),
        ("hosted_tool=file_search", {"gpt-4o-mini", "gpt-4.1-mini"}),
        ("sla_tier=flex&q=CLAUDE", {"claude-3-5-haiku", "claude-sonnet-4"}),
        ("provider=groq&runtime_capability=json_schema", set()),
        (
            "operation=vision&privacy_tier=confidential&hosted_tool=web_search",
            {"gpt-4o-mini", "gpt-4.1-mini", "claude-sonnet-4"},
        ),
        (
            "q=open-weight&provider=edge-eu",
            {LLAMA_70B, "meta-llama/Llama-3.1-8B-Instruct", "BAAI/bge-large-en-v1.5"},
        ),
    ],
)
def test_model_list_filters(client: TestClient, query: str, expected: set[str]) -> None:
    response = client.get(f"/v1/catalog/models?{query}")
    assert response.status_code == 200
    assert {m["id"] for m in response.json()["data"]} == expected


@pytest.mark.parametrize(
    "query",
    [
        "operation=chat",
        "provider=nope",
        "privacy_tier=secret",
        "sla_tier=urgent",
        "runtime_capability=telepathy",
        "hosted_tool=browser",
        "q=" + "x" * 201,
    ],
)
def test_invalid_filter_values_are_400_in_the_envelope(client: TestClient, query: str) -> None:
    response = client.get(f"/v1/catalog/models?{query}")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["details"]["errors"][0]["path"] == f"query.{query.split('=')[0]}"


def test_model_detail_accepts_ids_with_slashes_and_shows_live_eligibility(client: TestClient) -> None:
    # Given Groq without any live record / When Llama 3.3 70B is read by its exact id
    response = client.get(f"/v1/catalog/models/{LLAMA_70B}")
    # Then the model, with Groq's lane stale and five lanes available
    assert response.status_code == 200
    body = response.json()
    assert body["pricing_updated_at"] == CATALOG.pricing_updated_at
    model = body["model"]
    assert model["id"] == LLAMA_70B
    prices = {lane["provider"]: lane["pricing"]["input"] for lane in model["providers"]}
    assert prices == {
        "bedrock": "0.72",
        "together": "0.88",
        "groq": "0.59",
        "fireworks": "0.90",
        "deepinfra": "0.23",
        "edge-eu": "0.20",
        "edge-us": "0.20",
    }
    eligibility = model["routing_eligibility"]
    assert eligibility["eligible"] is True and eligibility["lanes_available"] == 6
    assert [(r["provider"], r["code"]) for r in eligibility["reasons"]] == [("groq", "stale_heartbeat")]


def test_unknown_model_is_404_in_the_envelope(client: TestClient) -> None:
    response = client.get("/v1/catalog/models/meta-llama/Llama-9-Imaginary")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "model_not_found"


# -- workflow products ---------------------------------------------------------------------
def test_workflow_products_with_provider_capacity(client: TestClient) -> None:
    response = client.get("/v1/catalog/workflow-products")
    assert response.status_code == 200
    body = response.json()
    assert {p["slug"] for p in body["data"]} >= {
        "ticket-classification",
        "document-summary",
        "structured-extraction",
    }
    product = body["data"][0]
    assert product["input_schema"]["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert product["sla_hours"] == 24 and product["route_policy"]["required_capabilities"]
    assert body["provider_capacity"]["openai"] == 900_000  # gpt-4o-mini + gpt-4.1-mini


def test_workflow_product_detail_and_404(client: TestClient) -> None:
    response = client.get("/v1/catalog/workflow-products/pii-redaction")
    assert response.status_code == 200
    body = response.json()
    assert body["product"]["route_policy"]["routing_mode"] == "privacy_constrained"
    assert set(body["provider_capacity"]) == {"fireworks", "edge-eu", "edge-us"}  # Bedrock: no json_schema
    missing = client.get("/v1/catalog/workflow-products/nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "workflow_product_not_found"


# -- providers and fees --------------------------------------------------------------------
def test_provider_directory_and_detail(client: TestClient) -> None:
    providers = client.get("/v1/providers").json()["providers"]
    assert len(providers) == 10
    assert {p["kind"] for p in providers} == {"vendor_batch", "public_host", "edge"}
    detail = client.get("/v1/providers/anthropic")
    assert detail.status_code == 200
    provider = detail.json()["provider"]
    assert (provider["slug"], provider["display_name"], provider["enabled"]) == (
        "anthropic",
        "Anthropic",
        True,
    )
    assert provider["supported_operations"] == ["responses", "vision"]
    missing = client.get("/v1/providers/nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "provider_not_found"


def test_fee_schedule(client: TestClient) -> None:
    response = client.get("/v1/pricing/fees")
    assert response.status_code == 200
    fees = response.json()
    assert (fees["standard_batch_fee_pct"], fees["workflow_product_fee_pct"], fees["margin_floor_pct"]) == (
        "5.90",
        "11.80",
        "5.90",
    )
    assert fees["control_plane_fee_per_lane"] == {"currency": "usd", "amount": "0.01"}


def test_openapi_documents_the_catalog_and_content_routes(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in (
        "/v1/catalog/models",
        "/v1/catalog/models/{slug}",
        "/v1/catalog/workflow-products",
        "/v1/catalog/workflow-products/{slug}",
        "/v1/providers",
        "/v1/providers/{slug}",
        "/v1/pricing/fees",
        "/v1/content/changelog",
        "/v1/content/posts",
        "/v1/content/posts/{slug}",
    ):
        assert path in paths, path
    operation_enum = next(
        p for p in paths["/v1/catalog/models"]["get"]["parameters"] if p["name"] == "operation"
    )
    assert "responses" in str(operation_enum["schema"])


# -- content -------------------------------------------------------------------------------
def test_changelog_and_posts(client: TestClient) -> None:
    entries = client.get("/v1/content/changelog").json()["entries"]
    assert entries[0]["date"] == "November 21, 2026"
    assert set(entries[0]) == {"date", "tag", "title", "items"}
    posts = client.get("/v1/content/posts").json()["posts"]
    assert [p["published_at"] for p in posts] == sorted((p["published_at"] for p in posts), reverse=True)
    post = client.get("/v1/content/posts/why-quotes-are-free-and-price-locked")
    assert post.status_code == 200
    assert post.json()["post"]["title"] == "Why quotes are free and price-locked"
    missing = client.get("/v1/content/posts/nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "post_not_found"


def test_content_is_503_while_the_store_is_disabled() -> None:
    # Given CONTENT_STORE_ENABLED=0
    settings = Settings.from_environ({"CONTENT_STORE_ENABLED": "0"})
    client = TestClient(create_app(settings), raise_server_exceptions=False)
    # When any content endpoint is asked / Then 503 content_disabled in the envelope
    for path in ("/v1/content/changelog", "/v1/content/posts", "/v1/content/posts/how-routing-receipts-work"):
        response = client.get(path)
        assert response.status_code == 503, path
        assert response.json()["error"]["code"] == "content_disabled"
