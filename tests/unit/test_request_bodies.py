"""The bodies the services still validate themselves (not yet `ContractBody`, issue 28) reach
them exactly as sent: the request models document the schema but refuse nothing but a
non-object (the same `dict_type` error a `dict` body gave), so every other problem is still
answered by the service in its own words. The bodies validated at the edge: test_contract_bodies.py."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from functions.api.schemas.batches import BatchCreateRequest
from functions.api.schemas.common import ServiceValidatedBody
from functions.api.schemas.quotes import QuoteModelRequest, QuoteWorkflowRequest

BODIES: list[type[ServiceValidatedBody]] = [
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


@pytest.mark.parametrize("model", BODIES, ids=lambda model: model.__name__)
def test_the_service_gets_the_body_as_sent(model: type[ServiceValidatedBody]) -> None:
    body = dict(HOSTILE)
    received = model.model_validate(body).as_received()
    assert received is body
    assert received == HOSTILE


@pytest.mark.parametrize("model", BODIES, ids=lambda model: model.__name__)
@pytest.mark.parametrize("value", [[], [{}], "text", 1, None, True, b"{}"], ids=repr)
def test_only_a_non_object_is_refused_as_a_dict_body_was(
    model: type[ServiceValidatedBody], value: Any
) -> None:
    with pytest.raises(ValidationError) as raised:
        model.model_validate(value)
    errors = raised.value.errors()
    assert [(e["type"], e["loc"], e["msg"]) for e in errors] == [
        ("dict_type", (), "Input should be a valid dictionary")
    ]


def test_an_empty_object_is_taken() -> None:
    assert QuoteModelRequest.model_validate({}).as_received() == {}
