"""The OpenAPI document is complete: every operation that takes a JSON body documents it, every
2xx answer has a schema (or, when it is not JSON, at least its content type), every `$ref`
resolves, and the whole document is valid OpenAPI 3.1. Walks the document the app serves."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from openapi_spec_validator import validate

from functions.api.app import create_app

BODY_METHODS = frozenset({"post", "put", "patch"})
# Operations that change something but take no body, and why.
BODILESS: dict[tuple[str, str], str] = {
    ("post", "/v1/auth/verify-email/resend"): "resends to the signed-in user",
    ("post", "/v1/auth/account/api-keys/{key_id}/revoke"): "the key is in the path",
    ("post", "/v1/files/{file_id}/cancel"): "cancels the upload in the path",
    ("post", "/v1/batches/{batch_id}/retry"): "retries the batch in the path",
    ("post", "/v1/compat/v1/uploads/{upload_id}/cancel"): "the upload is in the path",
    ("post", "/v1/compat/v1/batches/{batch_id}/cancel"): "the vendor's cancel takes no body",
    ("post", "/v1/batches/{batch_id}/redeliver"): "redelivers the batch in the path",
    ("post", "/v1/delivery-targets/{target_id}/test"): "tests the target in the path",
    ("post", "/v1/schedules/{schedule_id}/pause"): "pauses the schedule in the path",
    ("post", "/v1/schedules/{schedule_id}/resume"): "resumes the schedule in the path",
    ("post", "/v1/schedules/{schedule_id}/regression-runs"): "runs the path's schedule's golden set",
    ("post", "/v1/presets/{name}/regression-runs"): "runs the path's preset's golden set (?version=)",
}
# Operations whose body may be left out.
OPTIONAL_BODY: dict[tuple[str, str], str] = {
    ("post", "/v1/batches/{batch_id}/cancel"): "an optional {reason}",
    ("post", "/v1/files/{file_id}/complete"): "a multipart upload's {parts}; none after one PUT",
    ("post", "/v1/files/{file_id}/parts"): "an optional {part_numbers}; all parts by default",
}
# 2xx answers without a body.
NO_CONTENT: dict[tuple[str, str], str] = {
    ("head", "/v1/health"): "headers only",
}
# Non-JSON answers: their content type must be declared; a schema is optional.
NOT_JSON = frozenset({"application/jsonl", "text/event-stream"})
JSON = "application/json"


@cache
def _document() -> dict[str, Any]:
    return create_app().openapi()


def _operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in _document()["paths"].items():
        for method, operation in item.items():
            yield method, path, operation


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _is_untyped(schema: dict[str, Any]) -> bool:
    """`{}`, or an object that says nothing of its properties (what `dict[str, Any]` gives),
    alone or as every branch of an `anyOf` besides null."""
    branches = [branch for branch in schema.get("anyOf", []) if branch != {"type": "null"}]
    if branches:
        return all(_is_untyped(branch) for branch in branches)
    return not schema or (schema.get("type") == "object" and not {"properties", "$ref"} & set(schema))


def test_the_document_is_valid_openapi_3_1() -> None:
    document = _document()
    assert document["openapi"] == "3.1.0"
    validate(document)


def test_every_ref_resolves() -> None:
    schemas = _document()["components"]["schemas"]
    prefix = "#/components/schemas/"
    refs = set(_refs(_document()))
    assert all(ref.startswith(prefix) for ref in refs), refs
    assert {ref.removeprefix(prefix) for ref in refs} <= set(schemas)


def test_the_exception_lists_name_real_operations() -> None:
    operations = {(method, path) for method, path, _ in _operations()}
    assert set(BODILESS) | set(OPTIONAL_BODY) | set(NO_CONTENT) <= operations


@pytest.mark.parametrize(
    ("method", "path"), [(m, p) for m, p, _ in _operations() if m in BODY_METHODS], ids=str
)
def test_every_operation_that_takes_a_body_documents_it(method: str, path: str) -> None:
    operation = _document()["paths"][path][method]
    body = operation.get("requestBody")
    if (method, path) in BODILESS:
        assert body is None, f"{method} {path} takes no body: {BODILESS[method, path]}"
        return
    assert body is not None, f"{method} {path} documents no request body"
    assert body.get("required", False) is ((method, path) not in OPTIONAL_BODY)
    assert body["content"], f"{method} {path}: the body names no content type"
    for media_type, content in body["content"].items():
        schema = content.get("schema")
        assert schema, f"{method} {path}: no schema for {media_type}"
        if media_type == JSON:
            assert not _is_untyped(schema), f"{method} {path}: the JSON body is an untyped object"


@pytest.mark.parametrize(("method", "path"), [(m, p) for m, p, _ in _operations()], ids=str)
def test_every_2xx_answer_has_a_schema_or_a_declared_content_type(method: str, path: str) -> None:
    responses = _document()["paths"][path][method]["responses"]
    answers = {status: response for status, response in responses.items() if status.startswith("2")}
    assert answers, f"{method} {path} documents no 2xx answer"
    for status, answer in answers.items():
        content = answer.get("content") or {}
        if (method, path) in NO_CONTENT:
            assert not content, f"{method} {path} {status}: {NO_CONTENT[method, path]}"
            continue
        assert content, f"{method} {path} {status}: no content type"
        for media_type, described in content.items():
            if media_type in NOT_JSON:
                continue
            schema = described.get("schema") or {}
            assert media_type == JSON, f"{method} {path} {status}: unexpected {media_type}"
            assert not _is_untyped(schema), f"{method} {path} {status}: the JSON answer has no schema"


def test_the_document_says_how_each_operation_authenticates() -> None:
    # A bearer key or the session cookie (docs/auth.md): generated clients attach the key
    schemes = _document()["components"]["securitySchemes"]
    assert schemes["apiKey"] == {**schemes["apiKey"], "type": "http", "scheme": "bearer"}
    assert (schemes["session"]["in"], schemes["session"]["name"]) == ("cookie", "service_ui_session")
    operations = {(method, path): operation for method, path, operation in _operations()}
    assert operations[("get", "/v1/health")]["security"] == []  # public
    assert operations[("get", "/v1/catalog/models")]["security"] == []
    keyed = [{"apiKey": []}, {"session": []}]
    assert operations[("post", "/v1/batches")]["security"] == keyed
    assert operations[("get", "/v1/compat/v1/batches/{batch_id}")]["security"] == keyed
    # session-only routes name the session alone; optional credentials start with `{}`; the
    # sign-in and reset answer 401 for a wrong password or token, yet take no credentials
    assert operations[("post", "/v1/auth/account/api-keys")]["security"] == [{"session": []}]
    assert operations[("get", "/v1/runtime")]["security"] == [{}, *keyed]
    assert operations[("post", "/v1/chat/completions")]["security"] == keyed
    for public in ("/v1/auth/login", "/v1/auth/password/reset", "/v1/auth/register"):
        assert operations[("post", public)]["security"] == [], public
    # and every other operation that can answer 401 takes credentials
    for (method, path), operation in operations.items():
        if "401" in operation["responses"] and path not in ("/v1/auth/login", "/v1/auth/password/reset"):
            assert operation["security"], (method, path)


def test_the_vendor_compatible_surface_documents_its_own_error_shape_and_codes() -> None:
    vendor = "#/components/schemas/VendorErrorEnvelope"
    for method, path, operation in _operations():
        if path.startswith("/v1/compat/"):
            for status in ("500", "503"):
                if status in operation["responses"]:
                    assert operation["responses"][status]["content"][JSON]["schema"]["$ref"] == vendor, (
                        method,
                        path,
                        status,
                    )
    cancel = dict(_operations_by_key())[("post", "/v1/compat/v1/batches/{batch_id}/cancel")]
    assert "409" in cancel["responses"]  # batch_not_cancellable


def _operations_by_key() -> Iterator[tuple[tuple[str, str], dict[str, Any]]]:
    for method, path, operation in _operations():
        yield (method, path), operation
