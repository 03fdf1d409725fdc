"""A request model is the contract (issue 28 point 1): pydantic checks the body once, at the
edge, and the one error mapper answers every problem in the spec's terms: the body's own code,
`details.field` naming the first problem, the domain's own words for the rules it owns; a body
that is not a JSON object stays the plain `invalid_request`."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from batchroute.errors import InvalidRequest
from functions.api.errors import install_error_handlers
from functions.api.schemas.batches.batches import CancelRequest
from functions.api.schemas.common import ContractBody, ContractUpdate, domain_rule, field_path, omittable


def even(value: Any, name: str) -> int:
    if not isinstance(value, int) or value % 2:
        raise InvalidRequest(f"{name} must be even.", code="odd_number", details={"field": name})
    return value // 2  # the domain value: half of it


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    size: Annotated[int, Field(ge=0)]


class Widget(ContractUpdate):
    error_code: ClassVar[str] = "invalid_widget"

    name: Annotated[str, Field(min_length=1)] = omittable()
    entries: list[Entry] = omittable()
    halves: Annotated[int, domain_rule(even, int)] = omittable()


class Loose(ContractBody):
    note: str = "none"


@pytest.fixture(scope="module")
def client() -> TestClient:
    app = FastAPI()
    install_error_handlers(app)

    @app.put("/widget")
    def put_widget(body: Widget) -> dict[str, Any]:
        return {"given": {name: repr(value) for name, value in sorted(body.given().items())}}

    @app.post("/loose")
    def post_loose(body: Loose) -> dict[str, Any]:
        return {"note": body.note}

    return TestClient(app)


def error_of(client: TestClient, body: Any) -> dict[str, Any]:
    response = client.put("/widget", json=body)
    assert response.status_code == 400
    error: dict[str, Any] = response.json()["error"]
    return error


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": 5}, "name"),
        ({"entries": "x"}, "entries"),
        ({"entries": [{"size": 1}, {"size": -1}]}, "entries[1].size"),
        ({"entries": [{"size": 1, "colour": "red"}]}, "entries[0].colour"),
    ],
)
def test_a_type_or_bound_problem_is_the_bodys_code_naming_the_field(
    client: TestClient, body: dict[str, Any], field: str
) -> None:
    error = error_of(client, body)
    assert error["code"] == "invalid_widget"
    assert error["details"] == {"field": field}
    assert error["message"].startswith(f"{field}: ")


def test_an_unknown_field_is_refused_first_naming_them_all(client: TestClient) -> None:
    error = error_of(client, {"name": "", "b": 1, "a": 2})
    assert error == {
        "code": "invalid_widget",
        "message": "Unknown field 'a'.",
        "details": {"field": "a", "unknown": ["a", "b"]},
    }


def test_a_domain_rule_answers_in_its_own_words(client: TestClient) -> None:
    assert error_of(client, {"halves": 3}) == {
        "code": "odd_number",
        "message": "halves must be even.",
        "details": {"field": "halves"},
    }


def test_the_service_gets_the_given_fields_in_domain_values_without_read_only_ones(
    client: TestClient,
) -> None:
    response = client.put("/widget", json={"halves": 8, "org_id": 7, "updated_at": None})
    assert response.status_code == 200
    assert response.json() == {"given": {"halves": "4"}}


@pytest.mark.parametrize("content", [b"[1]", b"1", b'"x"'])
def test_a_body_that_is_not_an_object_is_the_plain_invalid_request(
    client: TestClient, content: bytes
) -> None:
    response = client.put("/widget", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"


def test_a_body_without_extra_forbid_ignores_unknown_fields(client: TestClient) -> None:
    response = client.post("/loose", json={"note": "hi", "other": 1})
    assert response.status_code == 200 and response.json() == {"note": "hi"}


def test_field_paths_read_as_the_spec_writes_them() -> None:
    assert field_path(("alert_thresholds", 0, "value")) == "alert_thresholds[0].value"
    assert field_path(("items", 3)) == "items[3]"
    assert field_path(()) == ""


@pytest.mark.parametrize("reason", [5, "x" * 501, ["why"]])
def test_a_cancel_reason_is_a_short_string(reason: Any) -> None:
    with pytest.raises(ValidationError) as refused:
        CancelRequest.model_validate({"reason": reason})
    [error] = refused.value.errors()
    assert (error["type"], error["ctx"]["details"]) == ("invalid_request", {"field": "reason"})
    assert CancelRequest.model_validate({"reason": "changed my mind", "other": 1}).reason == "changed my mind"


def test_a_bad_query_parameter_is_answered_first_as_it_always_was() -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.put("/widget")
    def put_widget(body: Widget, limit: int = 1) -> dict[str, Any]:
        return {}

    response = TestClient(app).put("/widget?limit=x", json={"name": ""})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert [issue["path"] for issue in error["details"]["errors"]] == ["query.limit", "body"]


def test_no_request_body_of_the_app_is_only_documented() -> None:
    """Issue 28 point 1: every JSON body a route takes is validated by its model at the edge;
    none of its fields skips validation (as the bodies the services checked by hand did)."""
    from fastapi.routing import APIRoute

    from functions.api.lazy_routes import route_modules, router_of

    annotations = [
        route.body_field.field_info.annotation
        for module, _ in route_modules()
        for route in router_of(module).routes
        if isinstance(route, APIRoute) and route.body_field is not None
    ]
    bodies = {a for a in annotations if isinstance(a, type) and issubclass(a, BaseModel)}
    assert len(bodies) >= 30
    skipped = [
        f"{body.__name__}.{name}"
        for body in bodies
        for name, info in body.model_fields.items()
        if any(type(meta).__name__ == "SkipValidation" for meta in info.metadata)
    ]
    assert skipped == []
