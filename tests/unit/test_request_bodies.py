"""The quote and batch bodies are validated once, at the edge, by their command's parser
(services/batches/commands.py), in the words the quote and batch services used to answer them
in: a non-object is the same `dict_type` error a `dict` body gave, every other problem the
spec's code naming the field. The other bodies validated at the edge: test_contract_bodies.py."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from batchroute.domain.presets.presets import PARAMETER_FIELDS, ROUTING_FIELDS, TOP_FIELDS, MaxPriceSent
from batchroute.domain.presets.presets import READ_ONLY_FIELDS as PRESET_READ_ONLY
from batchroute.domain.routing.policy import EDITABLE_FIELDS
from batchroute.domain.routing.policy import READ_ONLY_FIELDS as POLICY_READ_ONLY
from batchroute.errors import InvalidRequest
from batchroute.services.batches.commands import BATCH_FIELDS, CreateBatch, QuoteRequest, QuoteWorkflow
from functions.api.schemas.batches.batches import BatchCreateRequest
from functions.api.schemas.batches.quotes import MaxPrice, QuoteModelRequest, QuoteWorkflowRequest
from functions.api.schemas.presets.presets import (
    PresetCreate,
    PresetParameters,
    PresetParametersOut,
    PresetReplace,
    PresetRouting,
    PresetRoutingOut,
)
from functions.api.schemas.routing.policy import RoutePolicyUpdate

BODIES: list[type[BaseModel]] = [
    BatchCreateRequest,
    QuoteModelRequest,
    QuoteWorkflowRequest,
]
# Every documented field of the wrong type, null where null is not allowed, and unknown fields.
HOSTILE: dict[str, Any] = {
    "items": [None, 1, "x"],
    "input_file_id": 5,
    "quote_id": ["qlock_x"],
    "routing_mode": 5,
    "privacy_tier": "secret",
    "required_tools": "web_search",
    "max_price": {"input_per_mtok": -1, "nope": True},
    "webhook": "http://localhost",
    "metadata": {"k": {"nested": 1}},
    "completion_window": None,
    "product": 5,
    "inputs": "x",
    "reason": 5,
    "limit_enabled": "yes",
    "limit_amount": {"currency": "EUR", "amount": "-1"},
    "alert_thresholds": [{"type": "pct_of_limit", "value": 101}],
    "retention_tier": None,
    "extended_days": True,
    "org_id": 7,
    "unknown": {"a": [1, 2]},
}


def refusal_of(model: type[BaseModel], body: Any) -> tuple[str, str, dict[str, Any] | None]:
    with pytest.raises(ValidationError) as raised:
        model.model_validate(body)
    error = raised.value.errors()[0]
    return error["type"], error["msg"], (error.get("ctx") or {}).get("details")


@pytest.mark.parametrize(
    ("model", "field"),
    [(QuoteModelRequest, "items"), (QuoteWorkflowRequest, "inputs")],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_a_hostile_body_is_refused_at_the_edge_naming_the_field(model: type[BaseModel], field: str) -> None:
    # Its unknown fields first, all named (as a batch body's; they were ignored)
    code, message, details = refusal_of(model, dict(HOSTILE))
    known = {info.alias or name for name, info in model.model_fields.items()}
    unknown = sorted(set(HOSTILE) - known)
    assert code == "invalid_request" and message == f"Unknown field(s): {', '.join(unknown)}."
    assert details == {"field": unknown[0], "fields": unknown}
    # Then, those left out, the first bad field
    code, _, details = refusal_of(model, {k: v for k, v in HOSTILE.items() if k in known})
    assert code == "invalid_request"
    assert details == {"field": field}


def test_a_hostile_batch_body_names_its_unknown_fields_first() -> None:
    code, message, details = refusal_of(BatchCreateRequest, dict(HOSTILE))
    unknown = sorted(set(HOSTILE) - BATCH_FIELDS)
    assert code == "invalid_request"
    assert message == f"Unknown field(s): {', '.join(unknown)}."
    assert details == {"field": unknown[0], "fields": unknown}  # as a quote body's


@pytest.mark.parametrize("model", BODIES, ids=lambda model: model.__name__)
@pytest.mark.parametrize("value", [[], [{}], "text", 1, None, True, b"{}"], ids=repr)
def test_only_a_non_object_is_refused_as_a_dict_body_was(model: type[BaseModel], value: Any) -> None:
    with pytest.raises(ValidationError) as raised:
        model.model_validate(value)
    errors = raised.value.errors()
    assert [(e["type"], e["loc"], e["msg"]) for e in errors] == [
        ("dict_type", (), "Input should be a valid dictionary")
    ]


def test_an_empty_quote_body_asks_for_its_items() -> None:
    code, message, details = refusal_of(QuoteModelRequest, {})
    assert (code, message, details) == (
        "invalid_request",
        "Give exactly one of `items` or `input_file_id`.",
        {"field": "items"},
    )


def test_the_model_documents_the_fields_the_command_reads() -> None:
    assert set(BatchCreateRequest.model_fields) == BATCH_FIELDS


def test_the_route_gets_the_command() -> None:
    item = {"customer_item_id": "a", "model": "m", "operation": "responses", "input": {}}
    body = {"items": [item], "routing_mode": "sla_aware", "metadata": {"n": 1}}
    batch = BatchCreateRequest.model_validate(body).command()
    assert batch == CreateBatch.parse(body)
    assert batch.metadata == {"n": "1"} and batch.quote.items == (item,)
    assert batch.quote.routing.request.routing_mode == "sla_aware"
    quoted = {key: value for key, value in body.items() if key != "metadata"}  # a batch's only
    assert QuoteModelRequest.model_validate(quoted).command() == QuoteRequest.parse(quoted)
    workflow = {"product": "p", "inputs": [{"x": 1}]}
    assert QuoteWorkflowRequest.model_validate(workflow).command() == QuoteWorkflow.parse(workflow)


def test_the_preset_and_route_policy_models_document_the_fields_their_readers_read() -> None:
    # These bodies are judged whole by a domain reader (every problem at once, against the
    # deployment's catalog); their models only document them, so the two lists must agree.
    assert set(PresetParametersOut.model_fields) == set(PARAMETER_FIELDS)
    assert set(PresetParameters.model_fields) == {*PARAMETER_FIELDS, "max_tokens"}  # an alias, documented
    assert set(PresetRouting.model_fields) == set(PresetRoutingOut.model_fields) == set(ROUTING_FIELDS)
    assert set(MaxPrice.model_fields) == set(MaxPriceSent.__annotations__)
    assert set(PresetCreate.model_fields) == set(TOP_FIELDS)
    assert set(PresetReplace.model_fields) == set(TOP_FIELDS) | PRESET_READ_ONLY | {"ref"}
    assert set(RoutePolicyUpdate.model_fields) == set(EDITABLE_FIELDS) | POLICY_READ_ONLY


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("required_tools", False, "required_tools"),
        ("regions", 0, "region"),
        ("regions", {}, "region"),
        ("quote_id", 0, "quote_id"),
        ("input_file_id", False, "input_file_id"),
    ],
)
def test_a_field_given_as_false_zero_or_empty_object_is_refused_not_read_as_absent(
    field: str, value: object, named: str
) -> None:
    item = {"customer_item_id": "a", "model": "m", "operation": "responses", "input": {}}
    with pytest.raises(InvalidRequest) as refused:
        CreateBatch.parse({"items": [item], field: value})
    assert refused.value.details == {"field": named}
