"""Quotes over HTTP: price-locked snapshots, receipts of chosen and rejected lanes, preflight."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.quotes import QuoteStore
from batchroute.catalog import builtin_catalog
from batchroute.config import get_settings
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.batch_pipeline_support import heartbeat_all_lanes
from tests.integration.principals import TestOrg, new_org

LLAMA = "meta-llama/Llama-3.3-70B-Instruct"


def _item(n: int, model: str = LLAMA, text: str = "Summarize the quarterly report.") -> dict[str, Any]:
    return {
        "customer_item_id": f"item-{n}",
        "operation": "responses",
        "model": model,
        "input": {"messages": [{"role": "user", "content": text}]},
    }


@pytest.fixture
def client(local_aws: LocalStack) -> TestClient:
    identity_store.cache_clear()
    return TestClient(create_app(), raise_server_exceptions=False)


@pytest.fixture
def org(client: TestClient) -> TestOrg:
    heartbeat_all_lanes()
    return new_org(credit_usd="10")


def test_model_quote_locks_prices_and_explains_every_lane(client: TestClient, org: TestOrg) -> None:
    # Given three items for an open-weight model served by several providers
    body = {"items": [_item(n) for n in range(3)], "routing_mode": "cheapest"}
    # When quoted
    response = client.post("/v1/quotes/model", json=body, headers=org.key_headers("member"))
    # Then one lane is selected, every other lane is returned with its reason, prices are Money
    assert response.status_code == 200, response.text
    quote = response.json()
    assert quote["quote_id"].startswith("qlock_")
    assert quote["expires_at"] > quote["created_at"]
    for part in ("provider_subtotal", "service_fee", "customer_discount", "total"):
        assert set(quote["pricing_estimate"][part]) == {"currency", "amount"}
        assert quote["pricing_estimate"][part]["currency"] == "usd"
    lanes = quote["quote_lanes"]
    selected = [lane for lane in lanes if lane["selected"]]
    rejected = [lane for lane in lanes if not lane["selected"]]
    assert len(selected) == 1 and len(rejected) >= 2
    assert all(lane["rejection"]["code"] for lane in rejected)
    assert all("proof" in lane for lane in lanes)
    assert quote["customer_explanation"]
    assert quote["funding"]["sufficient"] is True
    # And the snapshot is stored, versioned, for batch creation
    stored = QuoteStore(get_settings().table_name("batches")).item_at(
        {"pk": {"S": f"QUOTE#{quote['quote_id']}"}, "sk": {"S": "META"}}
    )
    assert stored is not None
    snapshot = json.loads(stored["snapshot"])
    assert snapshot["version"] == 1 and snapshot["org_id"] == org.org_id
    assert snapshot["items"]["kind"] == "inline" and snapshot["items"]["digest"]


def test_cheapest_selects_the_cheapest_eligible_lane(client: TestClient, org: TestOrg) -> None:
    quote = client.post("/v1/quotes/model", json={"items": [_item(0)]}, headers=org.key_headers()).json()
    selected = next(lane for lane in quote["quote_lanes"] if lane["selected"])
    chosen_cost = float(selected["estimated_provider_cost"]["amount"])
    catalog = builtin_catalog()
    cheaper = [
        lane
        for lane in catalog.lanes_for(LLAMA)
        if lane.price.batch_input_per_mtok + lane.price.batch_output_per_mtok
        < float(selected["unit_prices"]["input_per_mtok"]) + float(selected["unit_prices"]["output_per_mtok"])
    ]
    assert chosen_cost > 0 and not cheaper


def test_mixed_models_are_routed_per_model(client: TestClient, org: TestOrg) -> None:
    body = {"items": [_item(0), _item(1, model="gpt-4o-mini")]}
    quote = client.post("/v1/quotes/model", json=body, headers=org.key_headers()).json()
    models = {lane["model"] for lane in quote["quote_lanes"] if lane["selected"]}
    assert models == {LLAMA, "gpt-4o-mini"}


def test_a_stop_of_whitespace_alone_routes_to_the_lanes_that_take_one(
    client: TestClient, org: TestOrg
) -> None:
    def quoted(model: str) -> Any:
        item = {**_item(0, model), "input": {"messages": [{"role": "user", "content": "hi"}], "stop": "\n"}}
        return client.post("/v1/quotes/model", json={"items": [item]}, headers=org.key_headers())

    # A stop of "\n" (as OpenAI's SDK users send it) routes to OpenAI's lane, and among an
    # open-weight model's lanes to those that take it (Bedrock's Llama body carries no stop)
    openai = quoted("gpt-4o-mini")
    assert openai.status_code == 200, openai.text
    assert [lane["lane_id"] for lane in openai.json()["quote_lanes"] if lane["selected"]] == [
        "openai/gpt-4o-mini"
    ]
    llama = {lane["lane_id"]: lane for lane in quoted(LLAMA).json()["quote_lanes"]}
    assert llama[f"bedrock/{LLAMA}"]["rejection"]["code"] == "capability_missing"
    assert llama[f"bedrock/{LLAMA}"]["rejection"]["details"]["missing"] == ["whitespace_stop"]
    assert any(lane["selected"] for lane in llama.values())
    # A Claude model has no such lane (Anthropic refuses it): refused at preflight, saying why
    claude = quoted("claude-sonnet-4")
    assert claude.status_code == 400
    (issue,) = claude.json()["error"]["details"]["preflight"]["errors"]
    assert issue["code"] == "capability_not_supported" and "whitespace_stop" in issue["message"]
    # And a direct chat completion with one is answered on OpenAI's lane
    chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "stop": ["\n"]}
    assert client.post("/v1/chat/completions", json=chat, headers=org.key_headers()).status_code == 200


def test_a_seed_routes_to_the_lanes_that_take_one(client: TestClient, org: TestOrg) -> None:
    def quoted(model: str, seed: int = 7) -> Any:
        item = {**_item(0, model), "input": {"messages": [{"role": "user", "content": "hi"}], "seed": seed}}
        return client.post("/v1/quotes/model", json={"items": [item]}, headers=org.key_headers())

    # A seed routes to OpenAI's lane, and among Llama's lanes not to Bedrock's (it has none)
    assert quoted("gpt-4o-mini").status_code == 200
    llama = {lane["lane_id"]: lane for lane in quoted(LLAMA).json()["quote_lanes"]}
    assert llama[f"bedrock/{LLAMA}"]["rejection"]["details"]["missing"] == ["seed"]
    assert any(lane["selected"] for lane in llama.values())
    # A Claude model has none: refused naming seed; one wider than 32 bits is refused for any
    (issue,) = quoted("claude-sonnet-4").json()["error"]["details"]["preflight"]["errors"]
    assert issue["code"] == "capability_not_supported" and "seed" in issue["message"]
    (wide,) = quoted("gpt-4o-mini", 2**31).json()["error"]["details"]["preflight"]["errors"]
    assert (wide["code"], wide["path"]) == ("invalid_field", "items[0].input.seed")
    # And the OpenAI SDK's chat completion with a seed is answered
    chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "seed": 42}
    assert client.post("/v1/chat/completions", json=chat, headers=org.key_headers()).status_code == 200


def test_a_penalty_routes_to_the_lanes_that_take_one(client: TestClient, org: TestOrg) -> None:
    def quoted(model: str, penalty: float) -> Any:
        said = {"messages": [{"role": "user", "content": "hi"}], "frequency_penalty": penalty}
        return client.post(
            "/v1/quotes/model",
            json={"items": [{**_item(0, model), "input": said}]},
            headers=org.key_headers(),
        )

    # A penalty routes to OpenAI's lane, and among Llama's lanes to the hosts that take one
    assert quoted("gpt-4o-mini", 0.5).status_code == 200
    llama = {lane["lane_id"]: lane for lane in quoted(LLAMA, 0.5).json()["quote_lanes"]}
    assert llama[f"groq/{LLAMA}"]["rejection"]["details"]["missing"] == ["penalties"]
    assert llama[f"together/{LLAMA}"].get("rejection", {}).get("code") != "capability_missing"
    # A Claude model has none: refused naming it; 0, OpenAI's default, is taken everywhere
    (issue,) = quoted("claude-sonnet-4", 0.5).json()["error"]["details"]["preflight"]["errors"]
    assert issue["code"] == "capability_not_supported" and "penalties" in issue["message"]
    assert quoted("claude-sonnet-4", 0).status_code == 200
    # And a chat completion with one is answered
    chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "presence_penalty": -1}
    assert client.post("/v1/chat/completions", json=chat, headers=org.key_headers()).status_code == 200


def test_parallel_tool_calls_false_routes_to_the_lanes_that_can_say_it(
    client: TestClient, org: TestOrg
) -> None:
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}

    def quoted(model: str, **extra: Any) -> Any:
        said = {"messages": [{"role": "user", "content": "hi"}], "parallel_tool_calls": False, **extra}
        return client.post(
            "/v1/quotes/model",
            json={"items": [{**_item(0, model), "input": said}]},
            headers=org.key_headers(),
        )

    # Beside tools, among Llama's lanes only Groq's can be told to make one call at most
    llama = {lane["lane_id"]: lane for lane in quoted(LLAMA, tools=[tool]).json()["quote_lanes"]}
    assert llama[f"together/{LLAMA}"]["rejection"]["details"]["missing"] == ["serial_tool_calls"]
    assert llama[f"groq/{LLAMA}"].get("rejection", {}).get("code") != "capability_missing"
    # Gemini has no such switch: refused naming it; without tools it constrains nothing
    (issue,) = quoted("gemini-2.0-flash", tools=[tool]).json()["error"]["details"]["preflight"]["errors"]
    assert issue["code"] == "capability_not_supported" and "serial_tool_calls" in issue["message"]
    assert quoted("gemini-2.0-flash").status_code == 200
    # And a chat completion with it is answered (OpenAI's emulator checks the body it is sent)
    chat = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [tool],
        "parallel_tool_calls": False,
    }
    assert client.post("/v1/chat/completions", json=chat, headers=org.key_headers()).status_code == 200


def test_a_message_name_routes_to_the_lanes_that_take_one(client: TestClient, org: TestOrg) -> None:
    def quoted(model: str) -> Any:
        said = {"messages": [{"role": "user", "content": "hi", "name": "critic"}]}
        return client.post(
            "/v1/quotes/model",
            json={"items": [{**_item(0, model), "input": said}]},
            headers=org.key_headers(),
        )

    # OpenAI's lane takes a participant's name; no Claude or open-weight lane does (Groq refuses one)
    assert quoted("gpt-4o-mini").status_code == 200
    for model in ("claude-sonnet-4", LLAMA):
        (issue,) = quoted(model).json()["error"]["details"]["preflight"]["errors"]
        assert issue["code"] == "capability_not_supported" and "message_names" in issue["message"]
    # And a chat completion with one is answered (OpenAI's emulator checks the name's pattern)
    chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi", "name": "critic"}]}
    assert client.post("/v1/chat/completions", json=chat, headers=org.key_headers()).status_code == 200


def test_preflight_collects_every_issue(client: TestClient, org: TestOrg) -> None:
    # Given an unknown model, a missing field and a duplicate id
    items = [
        _item(0, model="no-such-model"),
        {"customer_item_id": "x", "operation": "responses"},
        _item(2),
        _item(2),
    ]
    response = client.post("/v1/quotes/model", json={"items": items}, headers=org.key_headers())
    # Then 400 batch_preflight_failed with every issue and its path
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "batch_preflight_failed"
    issues = error["details"]["preflight"]["errors"]
    codes = {issue["code"] for issue in issues}
    assert {"unknown_model", "missing_field", "duplicate_customer_item_id"} <= codes
    assert all({"category", "code", "message", "action"} <= set(issue) for issue in issues)
    assert any(issue.get("path", "").startswith("items[1]") for issue in issues)


def test_unsafe_webhook_fails_preflight(client: TestClient, org: TestOrg) -> None:
    body = {"items": [_item(0)], "webhook": {"url": "http://example.com/hook", "secret": "12345678"}}
    response = client.post("/v1/quotes/model", json=body, headers=org.key_headers())
    assert response.status_code == 400
    issues = response.json()["error"]["details"]["preflight"]["errors"]
    assert any(issue["category"] == "webhook" and issue["code"] == "https_required" for issue in issues)


def test_stale_lanes_are_rejected_with_their_reason(local_aws: LocalStack) -> None:
    # Given no lane has ever sent a heartbeat
    identity_store.cache_clear()
    client = TestClient(create_app(), raise_server_exceptions=False)
    org = new_org(credit_usd="10")
    response = client.post("/v1/quotes/model", json={"items": [_item(0)]}, headers=org.key_headers())
    # Then no lane is eligible, and the preflight says why
    assert response.status_code == 400
    issues = response.json()["error"]["details"]["preflight"]["errors"]
    assert any(issue["category"] == "routing" for issue in issues)
    assert "stale_heartbeat" in response.text


def test_no_items_is_the_preflights_empty_batch(client: TestClient, org: TestOrg) -> None:
    # Given an empty item list (was 400 no_items, with no preflight in its details)
    refused = client.post("/v1/quotes/model", json={"items": []}, headers=org.key_headers())
    # Then it is the preflight's jsonl_shape / empty_batch, as docs/routing.md lists it
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == "batch_preflight_failed"
    [issue] = error["details"]["preflight"]["errors"]
    assert (issue["category"], issue["code"], issue["path"]) == ("jsonl_shape", "empty_batch", "items")


def test_exactly_one_of_items_or_file(client: TestClient, org: TestOrg) -> None:
    both = client.post(
        "/v1/quotes/model", json={"items": [_item(0)], "input_file_id": "file_x"}, headers=org.key_headers()
    )
    assert both.status_code == 400
    neither = client.post("/v1/quotes/model", json={}, headers=org.key_headers())
    assert neither.status_code == 400


def test_a_misspelt_field_is_refused_not_priced_without(client: TestClient, org: TestOrg) -> None:
    # Given quote bodies with a routing constraint misspelt (was a 200 priced, and locked,
    # without the constraint, which a batch from the quote alone then ran without)
    inputs = [{"ticket": {"body": "The printer is on fire."}, "categories": ["hardware", "billing"]}]
    bodies = {
        "/v1/quotes/model": {"items": [_item(0)], "privacy_teir": "confidential", "regoin": "eu"},
        "/v1/quotes/workflow": {"product": "ticket-classification", "inputs": inputs, "privacy_teir": "x"},
    }
    for path, body in bodies.items():
        refused = client.post(path, json=body, headers=org.key_headers())
        # Then each is refused, naming the unknown fields, as a batch body's are
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "invalid_request" and error["details"]["field"] == "privacy_teir"
        assert error["details"]["fields"] == sorted(set(body) - {"items", "product", "inputs"})


def test_quote_from_an_uploaded_file(client: TestClient, org: TestOrg) -> None:
    import json

    lines = "\n".join(json.dumps(_item(n)) for n in range(5)).encode()
    headers = org.key_headers()
    upload = client.post("/v1/files", content=lines, headers={**headers, "content-type": "application/jsonl"})
    assert upload.status_code == 201, upload.text
    quote = client.post(
        "/v1/quotes/model", json={"input_file_id": upload.json()["file"]["id"]}, headers=headers
    )
    assert quote.status_code == 200, quote.text
    assert quote.json()["item_count"] == 5


def test_roles_and_credentials(client: TestClient, org: TestOrg) -> None:
    body = {"items": [_item(0)]}
    assert client.post("/v1/quotes/model", json=body).status_code == 401
    refused = client.post("/v1/quotes/model", json=body, headers=org.key_headers("billing"))
    assert refused.status_code == 403


def test_quote_never_fails_on_funding(client: TestClient, local_aws: LocalStack) -> None:
    # Given an org with no credit at all
    heartbeat_all_lanes()
    broke = new_org(credit_usd="0")
    response = client.post("/v1/quotes/model", json={"items": [_item(0)]}, headers=broke.key_headers())
    # Then the quote is still given, and says funding is short
    assert response.status_code == 200
    assert response.json()["funding"]["sufficient"] is False


def test_workflow_quote_picks_a_model_that_fulfils_the_contract(client: TestClient, org: TestOrg) -> None:
    inputs = [{"ticket": {"body": "The printer is on fire."}, "categories": ["hardware", "billing"]}]
    response = client.post(
        "/v1/quotes/workflow",
        json={"product": "ticket-classification", "inputs": inputs},
        headers=org.key_headers(),
    )
    assert response.status_code == 200, response.text
    quote = response.json()
    assert quote["kind"] == "workflow" and quote["workflow_product"] == "ticket-classification"
    assert quote["chosen_model"] in {m["model"] for m in quote["models_considered"] if m["eligible"]}
    assert any(lane["selected"] for lane in quote["quote_lanes"])


def test_a_workflow_no_model_can_fulfil_is_a_preflight_failure_naming_each_model(
    client: TestClient, org: TestOrg
) -> None:
    # Given a route the workflow's models cannot take (edge lanes only, restricted data)
    inputs = [{"ticket": {"body": "The printer is on fire."}, "categories": ["hardware", "billing"]}]
    response = client.post(
        "/v1/quotes/workflow",
        json={
            "product": "ticket-classification",
            "inputs": inputs,
            "routing_mode": "edge_only",
            "privacy_tier": "restricted",
        },
        headers=org.key_headers(),
    )
    # Then 400 batch_preflight_failed: one no_eligible_lane issue, and each model considered
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "batch_preflight_failed"
    assert [issue["code"] for issue in error["details"]["preflight"]["errors"]] == ["no_eligible_lane"]
    assert error["details"]["preflight"]["ok"] is False and error["details"]["preflight"]["warnings"] == []
    considered = error["details"]["models_considered"]
    assert considered and not any(model["eligible"] for model in considered)


def _contract_breaches(product: str) -> dict[str, list[str]]:
    """Each catalog lane outside the product's contract: the rules it breaks (codes)."""
    catalog = builtin_catalog()
    wanted = next(p for p in catalog.workflow_products if p.slug == product)
    breaches: dict[str, list[str]] = {}
    for lane in catalog.lanes:
        provider = catalog.provider(lane.provider)
        assert provider is not None
        policy = wanted.route_policy
        codes = []
        if lane.context_window < int(policy.get("min_context_window", 0)):
            codes.append("context_window_exceeded")
        tier = policy.get("privacy_tier", "standard")
        zero = policy.get("routing_mode") == "privacy_constrained"
        if tier not in provider.privacy_tiers or (zero and provider.data_retention_days > 0):
            codes.append("privacy_tier_mismatch")
        if codes:
            breaches[lane.lane_id] = codes
    return breaches


@pytest.mark.parametrize(
    ("product", "inputs", "routing"),
    [
        # privacy_constrained and confidential: the customer's own public_only narrows, never widens
        ("pii-redaction", [{"text": "John Doe, john@example.com"}], {"routing_mode": "public_only"}),
        ("pii-redaction", [{"text": "John Doe, john@example.com"}], {}),
        # a 128k context window
        ("document-summary", [{"document": {"text": "A short memo."}}], {}),
    ],
)
def test_a_workflow_quote_routes_only_to_lanes_inside_the_products_contract(
    client: TestClient, org: TestOrg, product: str, inputs: list[dict[str, Any]], routing: dict[str, str]
) -> None:
    # Given a product whose contract (route_policy) rules out some of its models' lanes
    breaches = _contract_breaches(product)
    assert breaches
    # When it is quoted (with or without the customer's own routing constraints)
    response = client.post(
        "/v1/quotes/workflow",
        json={"product": product, "inputs": inputs, **routing},
        headers=org.key_headers(),
    )
    # Then no lane outside the contract is selected, and each one considered says which rule
    # of the contract it breaks, in the routing gates' own codes
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:  # no lane inside both the contract and the request
        assert response.json()["error"]["code"] == "batch_preflight_failed"
        return
    lanes = response.json()["quote_lanes"]
    selected = [lane["lane_id"] for lane in lanes if lane["selected"]]
    assert selected and not set(selected) & set(breaches), selected
    outside = [lane for lane in lanes if lane["lane_id"] in breaches]
    assert outside
    for lane in outside:
        assert set(lane["rejection"]["reasons"]) & set(breaches[lane["lane_id"]]), lane
    assert any(f"The {product} workflow contract" in lane["rejection"]["message"] for lane in outside)


def test_a_batch_from_a_workflow_quote_names_its_product(client: TestClient, org: TestOrg) -> None:
    inputs = [{"text": "Jane Roe, +1 555 0100"}]
    quote = client.post(
        "/v1/quotes/workflow", json={"product": "pii-redaction", "inputs": inputs}, headers=org.key_headers()
    )
    assert quote.status_code == 200, quote.text
    headers = {**org.key_headers(), "Idempotency-Key": "wf-product-0001"}
    created = client.post("/v1/batches", json={"quote_id": quote.json()["quote_id"]}, headers=headers)
    assert created.status_code == 202, created.text
    batch_id = created.json()["batch"]["id"]
    detailed = client.get(f"/v1/batches/{batch_id}?include_details=true", headers=org.key_headers())
    assert detailed.json()["batch"]["details"]["workflow_product"] == "pii-redaction"
    plain = client.post(
        "/v1/batches", json={"items": [_item(0)]}, headers={**headers, "Idempotency-Key": "wf-plain-0002"}
    )
    assert plain.status_code == 202, plain.text
    plain_id = plain.json()["batch"]["id"]
    detailed = client.get(f"/v1/batches/{plain_id}?include_details=true", headers=org.key_headers())
    assert detailed.json()["batch"]["details"]["workflow_product"] is None


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        (["a", "a"], ("duplicate_customer_item_id", "inputs[1].id")),
        (["input-1", None], ("duplicate_customer_item_id", "inputs[1].id")),  # the generated id
        ([5, None], ("invalid_field", "inputs[0].id")),
        (["", None], ("invalid_field", "inputs[0].id")),
        (["x" * 257, None], ("invalid_field", "inputs[0].id")),
    ],
)
def test_a_workflow_inputs_ids_are_checked_as_item_ids(
    client: TestClient, org: TestOrg, ids: list[object], expected: tuple[str, str]
) -> None:
    # Given inputs whose ids cannot be their items' customer_item_ids
    ticket = {"ticket": {"body": "The printer is on fire."}, "categories": ["hardware", "billing"]}
    inputs = [ticket if given is None else {**ticket, "id": given} for given in ids]
    response = client.post(
        "/v1/quotes/workflow",
        json={"product": "ticket-classification", "inputs": inputs},
        headers=org.key_headers(),
    )
    # Then the refusal names the id (not "no lane of any model satisfies the route policy")
    assert response.status_code == 400, response.text
    issues = response.json()["error"]["details"]["preflight"]["errors"]
    assert [(issue["code"], issue["path"]) for issue in issues] == [expected]
    if expected[0] == "duplicate_customer_item_id":
        assert issues[0]["details"] == {"first_index": 0}


def test_a_workflow_quote_names_a_request_field_as_the_request_gives_it(
    client: TestClient, org: TestOrg
) -> None:
    # Given valid inputs and a required tool no lane runs
    ticket = {"ticket": {"body": "The printer is on fire."}, "categories": ["hardware", "billing"]}
    body = {"product": "ticket-classification", "inputs": [ticket], "required_tools": ["calculator"]}
    response = client.post("/v1/quotes/workflow", json=body, headers=org.key_headers())
    # Then the refusal names `required_tools` (not a path mangled into the inputs')
    assert response.status_code == 400, response.text
    paths = [issue.get("path") for issue in response.json()["error"]["details"]["preflight"]["errors"]]
    assert paths and all(p is None or p == "required_tools" or p.startswith("inputs[") for p in paths), paths
    assert "required_tools" in paths


def test_workflow_quote_errors(client: TestClient, org: TestOrg) -> None:
    missing = client.post(
        "/v1/quotes/workflow",
        json={"product": "ticket-classification", "inputs": [{}]},
        headers=org.key_headers(),
    )
    assert missing.status_code == 400
    assert missing.json()["error"]["details"]["preflight"]["errors"][0]["code"] == "missing_field"
    # an input the product's input_schema refuses is not quoted (a workflow fee buys its contract)
    broken = {"id": "t1", "ticket": {"body": "", "bogus": 1, "channel": "fax"}, "categories": ["only-one"]}
    refused = client.post(
        "/v1/quotes/workflow",
        json={"product": "ticket-classification", "inputs": [broken]},
        headers=org.key_headers(),
    )
    assert refused.status_code == 400, refused.text
    issues = refused.json()["error"]["details"]["preflight"]["errors"]
    assert [(i["code"], i["path"]) for i in issues] == [
        ("invalid_field", "inputs[0].categories"),  # too few
        ("invalid_field", "inputs[0].ticket"),  # `bogus` is not a property of it
        ("invalid_field", "inputs[0].ticket.body"),  # empty
        ("invalid_field", "inputs[0].ticket.channel"),  # not one of its values
    ]
    unknown = client.post(
        "/v1/quotes/workflow", json={"product": "nope", "inputs": [{}]}, headers=org.key_headers()
    )
    assert unknown.status_code == 404
