"""The OpenAPI 3.1.0 document: FastAPI's, with validation failures shown as the spec's 400
envelope, and the schemas of answers and bodies FastAPI cannot infer.

Two kinds of operation are documented by reference rather than inferred:
- a route that answers a plain dict built by a service uses `response_model=documented_as(M)`:
  FastAPI checks and encodes the answer as `dict[str, Any]`, exactly as without a model (no key
  dropped, no value converted), and the document shows `M`;
- a route that reads its own request (chat completions) puts `schema_ref(M)` in `openapi_extra`.
Either way `M` is registered here and `document` adds its schema to `components.schemas`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI
from fastapi.encoders import jsonable_encoder
from fastapi.openapi.models import Schema
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, WithJsonSchema
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from batchroute.domain.request_fields import IDEMPOTENCY_KEY_LENGTH

COMPONENT_REF = "#/components/schemas/{model}"

_referenced: dict[type[BaseModel], JsonSchemaMode] = {}


def schema_ref(model: type[BaseModel], mode: JsonSchemaMode = "serialization") -> dict[str, str]:
    """A `$ref` to `model` in components (`validation` for a request body, `serialization`
    for an answer); `document` emits the schema."""
    _referenced[model] = mode
    return {"$ref": COMPONENT_REF.format(model=model.__name__)}


def documented_as(model: type[BaseModel]) -> Any:
    """The response model of a route whose answer is a service's dict: `dict[str, Any]` at run
    time, `model` in the document."""
    return Annotated[dict[str, Any], WithJsonSchema(schema_ref(model))]


def _add_referenced(components: dict[str, Any]) -> None:
    _, top = models_json_schema(list(_referenced.items()), ref_template=COMPONENT_REF)
    for name, generated in top.get("$defs", {}).items():
        # Encoded as FastAPI encodes its own (no null defaults), so equal models compare equal.
        schema = jsonable_encoder(Schema.model_validate(generated), by_alias=True, exclude_none=True)
        present = components.setdefault(name, schema)
        if present != schema:
            raise ValueError(f"two different schemas are named {name} in the OpenAPI document")


# What the middleware answers a write before any route runs (functions/api/middleware.py):
# every POST, PUT, PATCH and DELETE may get these, whatever its route declares.
WRITE_REFUSALS: dict[str, str] = {
    "403": "A write with the session cookie from another site's page (`forbidden_origin`)",
    "413": "The JSON body is over the size limit (`payload_too_large`)",
}
WRITE_METHODS = frozenset({"post", "put", "patch", "delete"})


# How a caller authenticates (docs/auth.md): a bearer API key, or the console's session cookie.
SECURITY_SCHEMES: dict[str, Any] = {
    "apiKey": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key: `Authorization: Bearer brk_...`",
    },
    "session": {
        "type": "apiKey",
        "in": "cookie",
        "name": "service_ui_session",
        "description": "The signed-in session (`POST /v1/auth/login`); some routes take only this",
    },
}


KEY_OR_SESSION: list[dict[str, list[str]]] = [{"apiKey": []}, {"session": []}]
SESSION: list[dict[str, list[str]]] = [{"session": []}]
# Routes that authenticate in their own body, not by a dependency the document can read.
AUTHENTICATING_ITSELF: dict[tuple[str, str], list[dict[str, list[str]]]] = {
    ("post", "/v1/chat/completions"): KEY_OR_SESSION,  # ChatCaller: a key's cached copy first
    ("delete", "/v1/sessions/current"): SESSION,  # ends the cookie's own session
}


def route_security() -> dict[tuple[str, str], list[dict[str, list[str]]]]:
    """(method, path) -> how it authenticates, read from each route's dependencies: a session
    only (key management, billing controls), a key or the session, or optionally either
    (`{}` first: none needed); routes without them are public (docs/auth.md)."""
    from fastapi.routing import APIRoute

    from functions.api import auth
    from functions.api.lazy_routes import route_modules, router_of

    found = dict(AUTHENTICATING_ITSELF)
    for module, _ in route_modules():
        for route in router_of(module).routes:
            if not isinstance(route, APIRoute):
                continue
            calls = {dependant.call for dependant in _dependants(route.dependant)}
            if auth.session_principal in calls or any(getattr(c, "session_only", False) for c in calls):
                security = SESSION
            elif auth.current_principal in calls:
                security = KEY_OR_SESSION
            elif auth.optional_principal in calls:
                security = [{}, *KEY_OR_SESSION]
            else:
                continue
            for method in route.methods or ():
                found[(method.lower(), route.path)] = security
    return found


def _dependants(dependant: Any) -> Any:
    yield dependant
    for sub in dependant.dependencies:
        yield from _dependants(sub)


def _describe_security(paths: dict[str, Any]) -> None:
    """Each operation's `security` (`route_security`); a public one `[]`."""
    found = route_security()
    for path, item in paths.items():
        for method, operation in item.items():
            operation["security"] = found.get((method, path), [])


def _compat_server_errors(paths: dict[str, Any]) -> None:
    """The vendor-compatible surface answers its 500 and 503 in the vendor's error shape too
    (functions/api/errors.py), whatever the app-wide defaults say."""
    vendor = {"application/json": {"schema": {"$ref": COMPONENT_REF.format(model="VendorErrorEnvelope")}}}
    for path, item in paths.items():
        if not path.startswith("/v1/compat/"):
            continue
        for operation in item.values():
            for status in ("500", "503"):
                if status in operation.get("responses", {}):
                    operation["responses"][status]["content"] = vendor


def _add_write_refusals(paths: dict[str, Any]) -> None:
    for path, item in paths.items():
        envelope = "VendorErrorEnvelope" if path.startswith("/v1/compat/") else "ErrorEnvelope"
        answer = {"application/json": {"schema": {"$ref": COMPONENT_REF.format(model=envelope)}}}
        for method, operation in item.items():
            if method in WRITE_METHODS:
                for status, description in WRITE_REFUSALS.items():
                    operation["responses"].setdefault(status, {"description": description, "content": answer})


# The Idempotency-Key header as the spec limits it. The routes read it as optional and check it
# themselves (services/batches/create.py check_idempotency_key), so that a missing or malformed
# key answers its own stable code; the document says what they enforce.
IDEMPOTENCY_KEY = "Idempotency-Key"
IDEMPOTENCY_KEY_REQUIRED = frozenset({("/v1/batches", "post")})
_IDEMPOTENCY_KEY_CHECKED = ("/v1/batches", "/v1/work-orders")


def _describe_idempotency_keys(paths: dict[str, Any]) -> None:
    shortest, longest = IDEMPOTENCY_KEY_LENGTH
    for path in _IDEMPOTENCY_KEY_CHECKED:
        for method, operation in paths.get(path, {}).items():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "header" and parameter["name"] == IDEMPOTENCY_KEY:
                    parameter["required"] = (path, method) in IDEMPOTENCY_KEY_REQUIRED
                    parameter["schema"] = {
                        "type": "string",
                        "minLength": shortest,
                        "maxLength": longest,
                        "title": IDEMPOTENCY_KEY,
                    }


def document(app: FastAPI) -> dict[str, Any]:
    schema = get_openapi(title=app.title, version=app.version, routes=app.routes, openapi_version="3.1.0")
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    # This service answers validation failures with 400, never FastAPI's default 422.
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            operation.get("responses", {}).pop("422", None)
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    _add_write_refusals(schema.get("paths", {}))
    _compat_server_errors(schema.get("paths", {}))
    _describe_idempotency_keys(schema.get("paths", {}))
    _describe_security(schema.get("paths", {}))
    schema["components"]["securitySchemes"] = SECURITY_SCHEMES
    _add_referenced(components)
    return schema
