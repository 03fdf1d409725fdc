"""OpenAI's published request contract, as a check: what the OpenAI adapter (and every
OpenAI-compatible host's) sends, and what the OpenAI emulator accepts (docs/providers.md).

The contract is OpenAI's own OpenAPI document (tests/fixtures/vendors/openai/openapi.yaml,
openai/openai-openapi at commit f85dbe223d40e1a31cba812ab2d755c7e98a92a3). Parsing its 3 MB
of YAML takes a second, so the component schemas the request bodies need (`ROOTS` and
everything they `$ref`, descriptions and examples left out) live in `openai_schemas.json`,
written by `scripts/openai_schemas.py` with `derive_schemas`; a unit test re-derives it from
the vendored YAML, so it cannot drift.

Validation is JSON Schema Draft 2020-12 (jsonschema, refs resolved with `referencing`), with
two readings of the document made explicit (`_readable`):

- `nullable: true` (OpenAPI 3.0's spelling, still in the document) also allows null;
- `oneOf` is a union (`anyOf`): the document's unions overlap (a user message whose content
  is a list of parts is both an `EasyInputMessage` and an `InputMessage`), and the API takes
  a body that fits any of their members;
- strict objects: a request body, and every object schema that declares its properties and
  is never extended through `allOf`, refuses keys it does not declare (as the API does:
  "Unrecognized request argument supplied"), unless the schema says otherwise
  (`additionalProperties`).

A body is first checked by the same schemas compiled with jsonschema-rs (`_quick`): a valid
body, which is nearly every body the emulator sees, is told in about a microsecond where the
jsonschema pass that explains a refusal takes ~0.7 ms (it was half of the emulators' CPU in a
batch of 100,000 items, bench/RESULTS.md); only a body it refuses goes through that pass
(`detailed_violations`) for its errors. Both read the same schemas under the same draft, and
tests/unit/test_openai_contract_quick.py holds them to the same answer over generated bodies.

A body the schemas accept is then held to the API's rules the document says only in prose
(`openai_rules.py`: JSON mode's "json" word, Structured Outputs' strict subset, function
names, tool answers, `tool_choice`, `top_logprobs`, empty embedding inputs).

`request_violations(operation, body)` is [] for a valid body, else one "path: reason" per
violation; `violations` gives the same as (param, reason) pairs, `param` in OpenAI's
spelling (`tools[0].type`), for the emulator's 400. `outgoing(request, endpoint, ...)` is
every body the adapter built from `endpoint` sends for `request` (whole, streamed, batch
line), built by the adapter's own transform functions, on the API the adapter's route picks
for that item (on OpenAI: the Responses API for an item with hosted tools, else Chat
Completions).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final

from batchroute.providers.base import ProviderRequest
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute_tools.contracts.openai_rules import Violation as Violation
from batchroute_tools.contracts.openai_rules import rule_violations

SCHEMAS_FILE: Final = Path(__file__).with_name("openai_schemas.json")
ROOTS: Final = (
    "CreateChatCompletionRequest",
    "CreateResponse",
    "CreateEmbeddingRequest",
    "CreateBatchRequest",
)
# Our operation names -> the component schema of the request body.
OPERATIONS: Final[dict[str, str]] = {
    "chat.completions": "CreateChatCompletionRequest",
    "responses": "CreateResponse",
    "embeddings": "CreateEmbeddingRequest",
    "batches.create": "CreateBatchRequest",
}
# A Batch API input line's `url` -> the operation its body is checked as.
BATCH_URLS: Final[dict[str, str]] = {
    "/v1/chat/completions": "chat.completions",
    "/v1/responses": "responses",
    "/v1/embeddings": "embeddings",
}
_CODES: Final = {
    "unevaluatedProperties": "unknown_parameter",
    "additionalProperties": "unknown_parameter",
    "required": "missing_required_parameter",
    "type": "invalid_type",
}
_NAMING: Final = frozenset({"unevaluatedProperties", "additionalProperties", "required"})
_NAMED_KEY: Final = re.compile(r"'([^']*)'")
_DROPPED_KEYWORDS: Final = frozenset({"description", "example", "examples", "externalDocs"})
_URN: Final = "urn:openai-openapi"


# -- the compact schemas --------------------------------------------------------------------
def derive_schemas(document: Mapping[str, Any], roots: tuple[str, ...] = ROOTS) -> dict[str, Any]:
    """The component schemas of `roots` and everything they reference, transitively, without
    descriptions, examples and `x-` extensions, sorted by name."""
    schemas = document["components"]["schemas"]
    wanted: dict[str, Any] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in wanted:
            continue
        wanted[name] = _compact(schemas[name])
        pending.extend(_refs(wanted[name]))
    return {name: wanted[name] for name in sorted(wanted)}


def _compact(value: Any, *, names: bool = False) -> Any:
    """`value` without documentation keywords; `names`: a map of field names (`properties`),
    whose keys are kept whatever they are called."""
    if isinstance(value, Mapping):
        return {
            k: _compact(v, names=k == "properties" and not names)
            for k, v in value.items()
            if names or (k not in _DROPPED_KEYWORDS and not k.startswith("x-"))
        }
    if isinstance(value, list):
        return [_compact(v) for v in value]
    return value


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            yield ref.rsplit("/", 1)[1]
        for v in value.values():
            yield from _refs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _refs(v)


# -- validation -----------------------------------------------------------------------------
@cache
def _document() -> dict[str, Any]:
    """The schemas as one document under `_URN`, read as OpenAI means them (module doc)."""
    schemas = _readable(json.loads(SCHEMAS_FILE.read_text(encoding="utf-8")))
    return {"$id": _URN, "components": {"schemas": schemas}}


def _root(operation: str) -> dict[str, Any]:
    name = OPERATIONS.get(operation)
    if name is None:
        raise ValueError(f"unknown OpenAI operation {operation!r}")
    return {"$ref": f"{_URN}#/components/schemas/{name}", "unevaluatedProperties": False}


@cache
def _validator(operation: str) -> Any:
    """The jsonschema validator of `operation`'s body: the errors that explain a refusal."""
    from jsonschema import Draft202012Validator
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    registry: Registry[Any] = Registry().with_resource(_URN, DRAFT202012.create_resource(_document()))
    return Draft202012Validator(_root(operation), registry=registry)


@cache
def _quick(operation: str) -> Any:
    """The same schema compiled by jsonschema-rs: whether a body is valid, fast (module doc)."""
    import jsonschema_rs

    registry = jsonschema_rs.Registry([(_URN, _document())])
    return jsonschema_rs.Draft202012Validator(_root(operation), registry=registry)


def _readable(schemas: dict[str, Any]) -> dict[str, Any]:
    """The document's schemas as plain Draft 2020-12 says what OpenAI means (module doc)."""
    extended = _extended(schemas)
    return {name: _nullable(_strict(schema, top=name not in extended)) for name, schema in schemas.items()}


def _extended(schemas: Mapping[str, Any]) -> set[str]:
    """Schemas some `allOf` extends (directly, or as what an extended schema refers to at its
    top): their objects must not refuse the extension's keys."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for member in value.get("allOf") or []:
                found.update(_top_refs(member))
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(schemas)
    pending = list(found)
    while pending:
        for name in _top_refs(schemas.get(pending.pop(), {})):
            if name not in found:
                found.add(name)
                pending.append(name)
    return found


def _top_refs(schema: Any) -> set[str]:
    if not isinstance(schema, Mapping):
        return set()
    names = set()
    if isinstance(schema.get("$ref"), str):
        names.add(schema["$ref"].rsplit("/", 1)[1])
    for key in ("allOf", "anyOf", "oneOf"):
        for member in schema.get(key) or []:
            names |= _top_refs(member)
    return names


def _strict(schema: Any, *, top: bool) -> Any:
    if isinstance(schema, list):
        return [_strict(v, top=True) for v in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, Mapping):
            out[key] = {name: _strict(v, top=True) for name, v in value.items()}
        elif key == "allOf":
            out[key] = [_strict(v, top=False) for v in value]
        else:
            out[key] = _strict(value, top=True)
    declares = isinstance(schema.get("properties"), Mapping)
    if top and declares and "additionalProperties" not in schema and "unevaluatedProperties" not in schema:
        out["unevaluatedProperties"] = False
    return out


def _nullable(schema: Any) -> Any:
    """`nullable: true` as "or null", and `oneOf` as a union (module doc)."""
    if isinstance(schema, list):
        return [_nullable(v) for v in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {
        ("anyOf" if key == "oneOf" else key): (
            {n: _nullable(v) for n, v in value.items()} if key == "properties" else _nullable(value)
        )
        for key, value in schema.items()
        if key != "nullable"
    }
    if schema.get("nullable") is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out


def answer_violations(document: Mapping[str, Any], schema: str, body: Any) -> list[str]:
    """[] when `body` is a valid `schema` of OpenAI's whole OpenAPI `document` (an answer such
    as `Response`, which the compact request schemas do not hold), else one "path: reason" per
    violation; read as OpenAI means it (module doc), no key beyond those declared. Slow (it
    compiles the schemas each call): for tests."""
    from jsonschema import Draft202012Validator
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    schemas = _readable(derive_schemas(document, (schema,)))
    resource = DRAFT202012.create_resource({"$id": _URN, "components": {"schemas": schemas}})
    root = {"$ref": f"{_URN}#/components/schemas/{schema}", "unevaluatedProperties": False}
    validator = Draft202012Validator(root, registry=Registry().with_resource(_URN, resource))
    errors = list(validator.iter_errors(body))
    return sorted(str(_violation(e)) for e in errors if not _shadowed(e, errors))


def violations(operation: str, body: Any) -> list[Violation]:
    """What is wrong with `body` as a request of `operation` (module doc), in document order."""
    if operation == "batch_line":
        return _line_violations(body)
    if _quick(operation).is_valid(body):
        return rule_violations(operation, body)  # what the schemas accept and the API refuses
    return detailed_violations(operation, body)


def detailed_violations(operation: str, body: Any) -> list[Violation]:
    """`violations` by the jsonschema pass, without the quick check in front of it (the API's
    rules beyond the schemas, `openai_rules.py`, for a body the schemas accept)."""
    errors = list(_validator(operation).iter_errors(body))
    found = [_violation(e) for e in errors if not _shadowed(e, errors)]
    return sorted(found, key=lambda v: v.param) or rule_violations(operation, body)


def request_violations(operation: str, body: Any) -> list[str]:
    """[] when `body` is a valid `operation` request per OpenAI's document, else one
    "path: reason" per violation. Operations: chat.completions, responses, embeddings,
    batches.create, batch_line (one line of a Batch API input file)."""
    return [str(v) for v in violations(operation, body)]


def _line_violations(line: Any) -> list[Violation]:
    found = line_shape_violations(line)
    operation = BATCH_URLS.get(str(line.get("url"))) if isinstance(line, Mapping) else None
    if operation is not None:
        for inner in violations(operation, line.get("body")):
            found.append(Violation(_join("body", inner.param), inner.reason, inner.code))
    return found


def line_shape_violations(line: Any) -> list[Violation]:
    """What makes `line` no request line of a Batch API input file, its body left unchecked."""
    if not isinstance(line, Mapping):
        return [Violation("", "a batch input line is a JSON object")]
    found: list[Violation] = []
    for key in sorted(set(line) - {"custom_id", "method", "url", "body"}):
        found.append(Violation(key, "is not a field of a batch input line", "unknown_parameter"))
    if not isinstance(line.get("custom_id"), str) or not line["custom_id"]:
        found.append(Violation("custom_id", "must be a non-empty string", "missing_required_parameter"))
    if line.get("method") != "POST":
        found.append(Violation("method", "must be 'POST'"))
    if str(line.get("url")) not in BATCH_URLS:
        found.append(Violation("url", f"must be one of {sorted(BATCH_URLS)}"))
    if not isinstance(line.get("body"), Mapping):
        found.append(Violation("body", "must be a JSON object", "invalid_type"))
    return found


def _shadowed(error: Any, errors: list[Any]) -> bool:
    """An unknown-keys error at a place where another error is: the failing member left its
    keys unevaluated, so they would be reported as unknown too."""
    if error.validator != "unevaluatedProperties":
        return False
    here = list(error.absolute_path)
    return any(other is not error and list(other.absolute_path)[: len(here)] == here for other in errors)


def _violation(error: Any) -> Violation:
    """The most telling error under `error`. Down a union, the members of another kind (whose
    `type` / `role` differs) are passed over; when every member is of another kind, the
    violation is the kind itself, with the kinds the union takes."""
    best = error
    while best.context:
        members: dict[Any, list[Any]] = {}
        for e in best.context:
            members.setdefault(e.relative_schema_path[0], []).append(e)
        fitting = [
            e for errs in members.values() if not any(_other_kind(x, best) for x in errs) for e in errs
        ]
        if not fitting:
            wrong = [e for errs in members.values() for e in errs if _other_kind(e, best)]
            kinds = sorted({str(k) for e in wrong for k in _allowed(e)})
            return Violation(_param(wrong[0].absolute_path), f"{wrong[0].instance!r} is not one of {kinds}")
        best = min(fitting, key=_telling)
    param = _param(best.absolute_path)
    code = _CODES.get(best.validator, "invalid_value")
    named = _NAMED_KEY.search(best.message) if best.validator in _NAMING else None
    if named is not None:  # OpenAI names the unknown or missing key itself
        param = _join(param, named.group(1))
    return Violation(param, best.message[:300], code)


def _telling(error: Any) -> tuple[bool, int, bool, bool]:
    """Lower is more telling: not a member's "or null", deeper, not a union, of the type."""
    return (
        error.validator == "type" and error.validator_value == "null",
        -len(error.absolute_path),
        error.validator in ("anyOf", "oneOf"),
        not error._matches_type(),
    )


def _other_kind(error: Any, union: Any) -> bool:
    """A union member's discriminator (`type`, `role`) refusing the instance's."""
    path = list(error.absolute_path)
    return (
        error.validator in ("enum", "const")
        and len(path) == len(union.absolute_path) + 1
        and path[-1] in ("type", "role")
    )


def _allowed(error: Any) -> list[Any]:
    value = error.validator_value
    return list(value) if error.validator == "enum" else [value]


def _param(path: Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _join(head: str, tail: str) -> str:
    if not head or not tail:
        return head or tail
    return f"{head}{tail}" if tail.startswith("[") else f"{head}.{tail}"


# -- what the adapter sends -----------------------------------------------------------------
def outgoing(
    request: ProviderRequest, endpoint: ProviderEndpoint, *, lane_max_output_tokens: int
) -> list[tuple[str, Any]]:
    """Every (operation, body) the adapters built from `endpoint` send for `request`: the
    whole call, the streamed one (not for embeddings) and, when the endpoint runs batch jobs,
    the batch input line and the `batches.create` body of the job holding it. The operation
    is the item's route's (`Route.operation`: `responses` for an OpenAI item with hosted tools,
    `chat.completions` for any other chat item); a batch chunk of both APIs is one job per
    endpoint (client.py), so the job's endpoint is always the line's `url`."""
    from batchroute.providers.openai import route_for

    sized = request if request.max_output_tokens > 0 else _with_limit(request, lane_max_output_tokens)
    route = route_for(endpoint)
    sent: list[tuple[str, Any]] = [(route.operation(sized), route.body(sized))]
    if sized.operation != "embeddings":
        sent.append((route.operation(sized), route.body(sized, stream=True)))
    if endpoint.batch_api:
        line = route.batch_line(sized)
        sent.append(("batch_line", line))
        sent.append(
            (
                "batches.create",
                {"input_file_id": "file-0", "endpoint": line["url"], "completion_window": "24h"},
            )
        )
    return sent


def _with_limit(request: ProviderRequest, limit: int) -> ProviderRequest:
    from dataclasses import replace

    return replace(request, max_output_tokens=limit)
