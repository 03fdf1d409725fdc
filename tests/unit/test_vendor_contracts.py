"""Whatever the service accepts, the vendors accept (issue 26).

Hypothesis generates items across everything the preflight accepts (tests/unit/
item_strategies.py), finds every lane of the catalog each item can route to (the routing
gates that read the item: operation, hosted tools, runtime capabilities, context window),
sends it through that lane's adapter's transforms (the whole call, the streamed call and the
vendor batch line or record: `outgoing` in batchroute_tools/contracts/), and validates each
body against the vendor's published contract: OpenAI's OpenAPI document for OpenAI and the
OpenAI-compatible hosts, the official SDKs' request types for Anthropic and Gemini,
botocore's service model for Bedrock. Zero violations, and no transform refuses an item the
preflight let through to its lane.

The number of examples is bounded (`CONTRACT_EXAMPLES` per provider, default 60) so `make
test` runs it;
run it longer with e.g. `CONTRACT_EXAMPLES=5000 pytest tests/unit/test_vendor_contracts.py`.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchroute.catalog import builtin_catalog
from batchroute.catalog.environments import load_deployment
from batchroute.domain.catalog.catalog import Lane, LaneLive
from batchroute.domain.routing.gates import RouteRequest, RoutingGuards, lane_gate_failures
from batchroute.domain.routing.items import ModelGroup, read_item
from batchroute.providers.base import PermanentProviderError, ProviderRequest
from batchroute_tools.contracts import contract
from tests.unit.item_strategies import accepted_items

DEPLOYMENT = load_deployment(builtin_catalog(), "local")  # every provider enabled, edges too
CATALOG = DEPLOYMENT.catalog
# The gates that read the item itself; the others (heartbeat, capacity, privacy, region,
# price, policy) say nothing about what the item's body holds.
CONTENT_GATES = frozenset(
    {"operation_not_supported", "tool_support", "capability_missing", "context_window_exceeded"}
)
NOW = datetime(2026, 11, 28, tzinfo=UTC)
EXAMPLES = int(os.environ.get("CONTRACT_EXAMPLES", "60"))  # per provider
JOB_OPERATIONS = frozenset({"batches.create", "CreateModelInvocationJob"})


def _models() -> dict[str, list[str]]:
    served: dict[str, set[str]] = {}
    for lane in CATALOG.lanes:
        if DEPLOYMENT.endpoint(lane.provider) is None:
            continue
        for operation in lane.operations:
            served.setdefault(operation, set()).add(lane.model)
    return {operation: sorted(models) for operation, models in served.items()}


MODELS = _models()


def routable_lanes(raw: dict[str, Any]) -> list[Lane]:
    facts, problems = read_item(raw)
    assert facts is not None, problems
    group = ModelGroup(model=facts.model, first_index=0)
    group.add(0, facts)
    providers = {p.slug: p for p in CATALOG.providers}
    lanes = []
    for lane in CATALOG.lanes:
        if lane.model != facts.model or DEPLOYMENT.endpoint(lane.provider) is None:
            continue
        live = LaneLive(lane.lane_id, 1_000_000, NOW.isoformat())
        failures = lane_gate_failures(
            lane,
            providers.get(lane.provider),
            group,
            request=RouteRequest(),
            guards=RoutingGuards(),
            live=live,
            now=NOW,
        )
        if not any(f.code in CONTENT_GATES for f in failures):
            lanes.append(lane)
    return lanes


def provider_request(raw: dict[str, Any], lane: Lane) -> ProviderRequest:
    facts, _ = read_item(raw)
    assert facts is not None
    limit = 0 if facts.operation == "embeddings" else min(facts.output_tokens, lane.max_output_tokens)
    return ProviderRequest(
        custom_id="seq-0",
        customer_item_id=facts.customer_item_id,
        operation=facts.operation,
        model=lane.model,
        provider_model_id=lane.provider_model_id or lane.model,
        input=raw["input"],
        max_output_tokens=limit,
    )


def violations_on(raw: dict[str, Any], lane: Lane) -> list[str]:
    endpoint = DEPLOYMENT.endpoint(lane.provider)
    assert endpoint is not None
    vendor = contract(endpoint.adapter)
    request = provider_request(raw, lane)
    try:
        sent = vendor.outgoing(request, endpoint, lane_max_output_tokens=lane.max_output_tokens)
    except PermanentProviderError as refused:
        return [f"{lane.lane_id}: the transform refused an item routed to it: {refused.code}: {refused}"]
    assert sent, f"{lane.lane_id}: nothing would be sent"
    return [
        f"{lane.lane_id} {operation}: {problem}"
        for operation, body in sent
        for problem in vendor.request_violations(operation, body)
    ]


def test_every_lane_with_an_endpoint_has_a_contract() -> None:
    for lane in CATALOG.lanes:
        endpoint = DEPLOYMENT.endpoint(lane.provider)
        if endpoint is not None:
            vendor = contract(endpoint.adapter)
            assert callable(vendor.outgoing) and callable(vendor.request_violations), lane.lane_id


PROVIDERS = sorted(
    {lane.provider for lane in CATALOG.lanes if DEPLOYMENT.endpoint(lane.provider) is not None}
)


def models_of(provider: str) -> dict[str, list[str]]:
    served: dict[str, set[str]] = {}
    for lane in CATALOG.lanes:
        if lane.provider == provider:
            for operation in lane.operations:
                served.setdefault(operation, set()).add(lane.model)
    return {operation: sorted(models) for operation, models in served.items()}


@pytest.mark.parametrize("provider", PROVIDERS)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_every_body_sent_for_an_accepted_item_fits_the_vendors_contract(
    provider: str, data: st.DataObject
) -> None:
    # Items for the provider's own models, so every provider's lanes are exercised
    raw = data.draw(accepted_items(models_of(provider)))
    lanes = [lane for lane in routable_lanes(raw) if lane.provider == provider]
    problems = [problem for lane in lanes for problem in violations_on(raw, lane)]
    assert problems == [], "\n".join(problems[:10])


# Today's five bad bodies (issue 26), as items: each reaches an OpenAI lane and must leave it valid.
REGRESSIONS = [
    # a hosted tool, once sent to Chat Completions
    {"messages": [{"role": "user", "content": "News?"}], "tools": [{"type": "web_search"}]},
    {"messages": [{"role": "user", "content": "2+2"}], "tools": [{"type": "code_interpreter"}]},
    # Responses-style function tool and tool_choice, once passed unchanged
    {
        "input": "Weather?",
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
        "tool_choice": {"type": "function", "name": "get_weather"},
    },
    # a tool call and its result, once two empty user messages
    {
        "input": [
            {"role": "user", "content": "Weather?"},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ],
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
    },
]


@pytest.mark.parametrize("payload", REGRESSIONS)
@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-4.1-mini", "claude-sonnet-4", "gemini-2.0-flash"])
def test_todays_bad_bodies_leave_every_lane_valid(payload: dict[str, Any], model: str) -> None:
    raw = {"customer_item_id": "a", "operation": "responses", "model": model, "input": payload}
    lanes = routable_lanes(raw)
    assert lanes, "the item routes somewhere"
    assert [p for lane in lanes for p in violations_on(raw, lane)] == []


def test_a_tool_call_and_its_result_reach_the_vendor() -> None:
    raw = {"customer_item_id": "a", "operation": "responses", "model": "gpt-4o-mini", "input": REGRESSIONS[3]}
    for lane in routable_lanes(raw):
        endpoint = DEPLOYMENT.endpoint(lane.provider)
        assert endpoint is not None
        sent = contract(endpoint.adapter).outgoing(
            provider_request(raw, lane), endpoint, lane_max_output_tokens=lane.max_output_tokens
        )
        for operation, body in sent:
            if operation in JOB_OPERATIONS:  # the job itself names a file, not the items
                continue
            text = str(body)
            assert "c1" in text and "sunny" in text and "get_weather" in text, (lane.lane_id, body)


def test_more_than_four_stop_sequences_never_reach_a_vendor() -> None:
    raw = {
        "customer_item_id": "a",
        "operation": "responses",
        "model": "gpt-4o-mini",
        "input": {"messages": [{"role": "user", "content": "x"}], "stop": ["a", "b", "c", "d", "e"]},
    }
    facts, problems = read_item(raw)
    assert facts is None and [(p.code, p.field) for p in problems] == [("invalid_field", "input.stop")]
