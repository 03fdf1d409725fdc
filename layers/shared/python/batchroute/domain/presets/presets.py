"""Presets: an org's named, versioned request templates (docs/presets.md). Pure: no boto3,
no FastAPI.

A preset names a model (or a workflow product), an operation, a system prompt, generation
parameters and routing settings. A batch item, a chat body or a vendor-compatible row that
says `preset: "name"` (the latest version) or `preset: "name@3"` (that version) is expanded
by `apply_preset` before it is read: the preset fills only what the request leaves out, and
the request then records the version it used (`preset_version: "name@3"`) in place of its
`preset`, so expanding it again changes nothing and a retry or a quoted batch never resolves
it twice.

Here are the rules of what a preset may hold (`parse_preset`, every problem with its field
path), the stored version (`PresetVersion`) and the preset's head (`Preset`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal, TypedDict, TypeGuard

from batchroute.domain.batches.metadata import parse_metadata
from batchroute.domain.catalog.catalog import OPERATIONS, Catalog, WorkflowProduct
from batchroute.domain.presets.golden_sets import (
    GoldenSetView,
    golden_model_problem,
    golden_set_from_api,
    parse_golden_set,
)
from batchroute.domain.routing.gates import RouteRequest
from batchroute.domain.routing.items import HOSTED_TOOLS, MAX_OUTPUT_REQUEST, OUTPUT_LIMIT_KEYS
from batchroute.domain.views import view_of
from batchroute.errors import InvalidRequest

MAX_PRESETS_PER_ORG: Final = 200
NAME_MAX: Final = 64
DESCRIPTION_MAX: Final = 500
SYSTEM_PROMPT_MAX: Final = 32_000
STOP_MAX: Final = 4
STOP_CHARS_MAX: Final = 256
VERSION_MAX: Final = 999_999
# A response_format's JSON: a preset version is one DynamoDB item (400 KB), beside a system
# prompt of up to 32,000 characters and a golden set of up to 200 KiB.
RESPONSE_FORMAT_MAX_BYTES: Final = 32 * 1024

NAME_PATTERN: Final = r"^[a-z0-9][a-z0-9_-]{0,63}$"
_NAME = re.compile(NAME_PATTERN)
_NAME_RULE = "1-64 lowercase letters, digits, '-' or '_', starting with a letter or digit"
REF_PATTERN: Final = r"^[a-z0-9][a-z0-9_-]{0,63}(@[1-9][0-9]{0,5})?$"
_REF = re.compile(r"^(?P<name>[a-z0-9][a-z0-9_-]{0,63})(?:@(?P<version>[1-9][0-9]{0,5}))?$")

TOP_FIELDS: Final = (
    "name",
    "description",
    "model",
    "workflow_product",
    "operation",
    "system_prompt",
    "parameters",
    "routing",
    "metadata",
    "golden_set",
)
ParameterField = Literal[
    "max_output_tokens", "temperature", "top_p", "response_format", "required_tools", "stop"
]
PARAMETER_FIELDS: Final[tuple[ParameterField, ...]] = (
    "max_output_tokens",
    "temperature",
    "top_p",
    "response_format",
    "required_tools",
    "stop",
)
RoutingField = Literal["routing_mode", "privacy_tier", "region", "max_price"]
ROUTING_FIELDS: Final[tuple[RoutingField, ...]] = ("routing_mode", "privacy_tier", "region", "max_price")
# Shown by GET: a body copied from a GET answer into PUT/PATCH may carry them unchanged.
READ_ONLY_FIELDS: Final = frozenset(
    {"object", "version", "latest_version", "archived_at", "created_at", "updated_at", "created_by"}
)
# Generation options that live in an item's input (and a chat body) under the same name.
_INPUT_OPTIONS: Final[tuple[Literal["temperature", "top_p", "stop"], ...]] = ("temperature", "top_p", "stop")
_SYSTEM_ROLES: Final = frozenset({"system", "developer"})


class PresetParameters(TypedDict, total=False):
    """The generation defaults a preset fills (each only where the request gives none)."""

    max_output_tokens: int
    temperature: float
    top_p: float
    response_format: dict[str, Any]  # the customer's format, a JSON schema included
    required_tools: list[str]
    stop: str | list[str]


class MaxPriceSent(TypedDict, total=False):
    """A routing max_price as the customer gave it (USD amounts, numbers or strings)."""

    input_per_mtok: float | str | None
    output_per_mtok: float | str | None
    per_item_usd: float | str | None


class PresetRouting(TypedDict, total=False):
    """The request-level routing settings a preset fills (a batch or quote body's, and a chat
    body's `privacy_tier`)."""

    routing_mode: str
    privacy_tier: str
    region: str
    max_price: MaxPriceSent


class PresetTemplate(TypedDict):
    """A version's content, as a create body would give it (stored as one JSON string)."""

    description: str | None
    model: str | None
    workflow_product: str | None
    operation: str | None
    system_prompt: str | None
    parameters: PresetParameters
    routing: PresetRouting
    metadata: dict[str, str] | None
    golden_set: GoldenSetView | None


class PresetVersionView(PresetTemplate):
    object: Literal["preset.version"]
    name: str
    version: int
    ref: str
    created_at: str
    created_by: str | None


class PresetView(PresetTemplate):
    object: Literal["preset"]
    name: str
    version: int
    latest_version: int
    ref: str
    archived_at: str | None
    created_at: str
    updated_at: str
    created_by: str | None


@dataclass(frozen=True, slots=True)
class PresetContent:
    """What a preset version holds, as `parse_preset` reads it from a create, replace or
    (merged) patch body. `parameters` and `routing` are the request defaults it fills."""

    model: str | None = None
    workflow_product: str | None = None
    operation: str | None = None
    system_prompt: str | None = None
    parameters: PresetParameters = field(default_factory=PresetParameters)
    routing: PresetRouting = field(default_factory=PresetRouting)
    description: str | None = None
    metadata: dict[str, str] | None = None
    golden_set: GoldenSetView | None = None  # domain/presets/golden_sets.py; run by POST .../regression-runs

    def as_version(self, org_id: str, name: str, number: int, *, at: str, by: str | None) -> PresetVersion:
        """This content as version `number` of the preset `name`."""
        content = {item.name: getattr(self, item.name) for item in fields(PresetContent)}
        return PresetVersion(
            org_id=org_id, name=name, version=number, created_at=at, created_by=by, **content
        )


@dataclass(frozen=True, kw_only=True)
class PresetVersion(PresetContent):
    """One immutable version of a preset: what `apply_preset` fills requests from."""

    org_id: str
    name: str
    version: int
    created_at: str = ""
    created_by: str | None = None

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    def template(self) -> PresetTemplate:
        """The preset's content, as a create body would give it."""
        return view_of(
            self,
            PresetTemplate,
            parameters=self.parameters.copy(),
            routing=self.routing.copy(),
            metadata=dict(self.metadata) if self.metadata else None,
            golden_set=self.golden_set.copy() if self.golden_set else None,
        )

    def to_api(self) -> PresetVersionView:
        return {
            "object": "preset.version",
            "name": self.name,
            "version": self.version,
            "ref": self.ref,
            **self.template(),
            "created_at": self.created_at,
            "created_by": self.created_by,
        }


@dataclass(frozen=True)
class Preset:
    """A preset's head: its latest version, and whether it is archived (deleted)."""

    latest: PresetVersion
    created_at: str
    updated_at: str
    archived_at: str | None = None

    @property
    def name(self) -> str:
        return self.latest.name

    def to_api(self) -> PresetView:
        return {
            "object": "preset",
            "name": self.name,
            "version": self.latest.version,
            "latest_version": self.latest.version,
            "ref": self.latest.ref,
            **self.latest.template(),
            "archived_at": self.archived_at,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "created_by": self.latest.created_by,
        }


@dataclass(frozen=True)
class PresetRef:
    name: str
    version: int | None  # None: the latest


def parse_ref(value: object) -> PresetRef | None:
    """`name` or `name@<version>`; None when the value is not a preset reference."""
    if not isinstance(value, str):
        return None
    found = _REF.match(value)
    if found is None:
        return None
    version = found.group("version")
    return PresetRef(found.group("name"), int(version) if version else None)


def check_name(value: object, *, field_name: str = "name") -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise _invalid(
            [
                (
                    field_name,
                    f"name must be a slug: {_NAME_RULE}.",
                )
            ]
        )
    return value


# -- reading a create / replace / patch body ------------------------------------------------------
def parse_preset(
    body: Any, catalog: Catalog, *, with_name: bool, kept: PresetTemplate | None = None
) -> PresetContent:
    """The preset's content from a create (`with_name`: its `name` checked too) or replace body:
    every problem found, each with its field path, in one InvalidRequest (`invalid_preset`).
    `kept` is the stored version a PATCH merged onto: a response format or golden set it keeps
    as stored is not held to rules made since it was saved (a format over the size cap, an
    item the preflight now refuses), so an older version never locks its preset's PATCH."""
    if not isinstance(body, Mapping):
        raise _invalid([("body", "The body must be a JSON object.")])
    problems: list[tuple[str, str]] = []
    allowed = set(TOP_FIELDS) | READ_ONLY_FIELDS | {"ref"}  # a replace body's name: checked at the edge
    problems.extend((key, f"Unknown field {key}.") for key in body if key not in allowed)
    if with_name:
        name = body.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            problems.append(("name", f"name is required: {_NAME_RULE}."))
    description = _optional_text(body.get("description"), "description", DESCRIPTION_MAX, problems)
    system_prompt = _optional_text(body.get("system_prompt"), "system_prompt", SYSTEM_PROMPT_MAX, problems)
    model, product, operation = _what_runs(
        body.get("model"), body.get("workflow_product"), body.get("operation"), catalog, problems
    )
    kept_format = kept["parameters"].get("response_format") if kept else None
    parameters = _parameters(body.get("parameters"), problems, kept_format=kept_format)
    routing = _routing(body.get("routing"), problems)
    try:
        metadata = parse_metadata(body.get("metadata"))
    except InvalidRequest as refused:
        metadata = None
        problems.append((str((refused.details or {}).get("field", "metadata")), refused.message))
    kept_golden = kept["golden_set"] if kept else None
    golden_set = _golden_set(body.get("golden_set"), model, catalog, problems, kept=kept_golden)
    if product is not None:
        system_prompt = _fill_from_product(product, system_prompt, parameters)
    if problems:
        raise _invalid(problems)
    return PresetContent(
        model=model,
        workflow_product=product.slug if product is not None else None,
        operation=operation,
        system_prompt=system_prompt,
        parameters=parameters,
        routing=routing,
        description=description,
        metadata=metadata,
        golden_set=golden_set,
    )


def _what_runs(
    model: Any, product: Any, operation: Any, catalog: Catalog, problems: list[tuple[str, str]]
) -> tuple[str | None, WorkflowProduct | None, str | None]:
    """The model or the workflow product (not both) and the operation: given, or the model's
    own (responses where it serves it), or the product's (each as the body gave it)."""
    if operation is not None and operation not in OPERATIONS:
        problems.append(("operation", f"operation must be one of {', '.join(OPERATIONS)}."))
        operation = None
    if model is not None and product is not None:
        problems.append(("workflow_product", "Give model or workflow_product, not both."))
        return None, None, operation
    if model is not None:
        known = catalog.model(model) if isinstance(model, str) else None
        if known is None:
            problems.append(("model", f"Unknown model {model!r}: an exact id from GET /v1/catalog/models."))
            return None, None, operation
        if operation is not None and operation not in known.operations:
            problems.append(("operation", f"{model} does not serve the {operation} operation."))
        elif operation is None:
            operation = "responses" if "responses" in known.operations else known.operations[0]
        return model, None, operation
    if product is not None:
        found = catalog.workflow_product(product)
        if found is None:
            message = f"Unknown workflow product {product!r}: see GET /v1/catalog/workflow-products."
            problems.append(("workflow_product", message))
            return None, None, operation
        if operation is not None and operation != found.operation:
            problems.append(("operation", f"{found.slug} runs the {found.operation} operation."))
        return None, found, found.operation
    return None, None, operation


def check_same_name(name: str, given: object) -> None:
    """An edit body may carry the preset's own name (a GET answer sent back), no other:
    `given` is the body's `name`, when it has one."""
    if given != name:
        raise InvalidRequest(
            "name cannot change: create a preset under the new name.",
            code="invalid_preset",
            details={"field": "name", "errors": [{"field": "name", "message": "name cannot change."}]},
        )


def merge_patch(current: PresetVersion, body: object) -> dict[str, Any]:
    """A PATCH body over the current version's content: the fields given replace theirs
    (`parameters` and `routing` merge key by key; null removes a key). The merged body is
    the customer's, read again by `parse_preset`."""
    if not isinstance(body, Mapping):
        raise _invalid([("body", "The body must be a JSON object.")])
    merged = dict(current.template())
    for key, value in body.items():
        if key in ("parameters", "routing") and isinstance(value, Mapping):
            base = merged.get(key)
            inner = dict(base) if isinstance(base, Mapping) else {}
            for sub, sub_value in value.items():
                if sub_value is None:
                    inner.pop(sub, None)
                else:
                    inner[sub] = sub_value
            merged[key] = inner
        elif key in ("model", "workflow_product") and value is not None:
            merged["model"] = merged["workflow_product"] = None  # naming one replaces the other
            merged[key] = value
            if "operation" not in body:
                merged["operation"] = None
        else:
            merged[key] = value
    return {k: v for k, v in merged.items() if v is not None}


def _fill_from_product(
    product: WorkflowProduct, system_prompt: str | None, parameters: PresetParameters
) -> str:
    """A workflow product preset carries the product's contract: its instructions (unless
    the preset has its own system prompt) and its output schema as the structured format;
    the system prompt is returned, `parameters` filled in place."""
    parameters.setdefault(
        "response_format",
        {
            "type": "json_schema",
            "json_schema": {"name": product.slug.replace("-", "_"), "schema": product.output_schema},
        },
    )
    if system_prompt is not None:
        return system_prompt
    return (
        f"You perform the '{product.title}' workflow. {product.summary} "
        "Answer with JSON only, matching the output schema."
    )


def _optional_text(value: object, key: str, limit: int, problems: list[tuple[str, str]]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        problems.append((key, f"{key} must be a non-empty string of at most {limit} characters."))
        return None
    return value


def _unchanged(given: object, stored: object) -> bool:
    """Whether a PATCH resends a stored value as it is. As JSON values: `true` is not `1`
    (equal to Python), while `1` and `1.0` are one number (a browser sends 1.0 as 1)."""
    if isinstance(given, bool) or isinstance(stored, bool):
        return given is stored
    if isinstance(given, Mapping) and isinstance(stored, Mapping):
        return given.keys() == stored.keys() and all(_unchanged(given[k], stored[k]) for k in given)
    if isinstance(given, list) and isinstance(stored, list):
        return len(given) == len(stored) and all(map(_unchanged, given, stored))
    if isinstance(given, Mapping | list) or isinstance(stored, Mapping | list):
        return False
    return given == stored


def _golden_set(
    raw: object,
    model: str | None,
    catalog: Catalog,
    problems: list[tuple[str, str]],
    *,
    kept: GoldenSetView | None = None,
) -> GoldenSetView | None:
    """The schedule's golden-set parser, its field paths kept (`golden_set.items[0].expected`);
    `model` defaults to the preset's and, when the preset names one, must be it. The stored
    golden set `kept` unchanged is read as stored, not validated again."""
    if isinstance(raw, Mapping) and raw.get("model") is None and model is not None:
        raw = {**raw, "model": model}
    try:
        same = kept is not None and _unchanged(raw, kept)
        golden = golden_set_from_api(kept) if kept is not None and same else parse_golden_set(raw)
    except InvalidRequest as refused:
        problems.append((str((refused.details or {}).get("field", "golden_set")), refused.message))
        return None
    if golden is None:
        return None
    problem = golden_model_problem(golden.model, catalog)
    if problem is not None:
        problems.append(("golden_set.model", problem))
        return None
    if model is not None and golden.model != model:
        problems.append(("golden_set.model", f"golden_set.model must be the preset's model ({model})."))
        return None
    return golden.to_api()


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_parameter(key: object) -> TypeGuard[ParameterField]:
    return key in PARAMETER_FIELDS


def _is_routing(key: object) -> TypeGuard[RoutingField]:
    return key in ROUTING_FIELDS


def _parameters(
    value: object, problems: list[tuple[str, str]], *, kept_format: object = None
) -> PresetParameters:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(("parameters", "parameters must be an object."))
        return {}
    given = dict(value)
    if "max_tokens" in given:  # the chat-completions name, accepted as an alias
        if "max_output_tokens" in given:
            problems.append(("parameters.max_tokens", "Give max_output_tokens or max_tokens, not both."))
        given["max_output_tokens"] = given.pop("max_tokens")
    out: PresetParameters = {}
    for key, item in given.items():
        where = f"parameters.{key}"
        if not _is_parameter(key):  # even with a null value: a misspelt name is refused
            problems.append((where, f"Unknown parameter {key}: one of {', '.join(PARAMETER_FIELDS)}."))
            continue
        if item is None:
            continue
        if key == "max_output_tokens":
            if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= MAX_OUTPUT_REQUEST:
                problems.append((where, f"max_output_tokens must be an integer of 1-{MAX_OUTPUT_REQUEST}."))
                continue
        elif key == "temperature":
            if not _number(item) or not 0 <= item <= 2:
                problems.append((where, "temperature must be a number from 0 to 2."))
                continue
        elif key == "top_p":
            if not _number(item) or not 0 < item <= 1:
                problems.append((where, "top_p must be a number above 0 and at most 1."))
                continue
        elif key == "response_format":
            same = kept_format is not None and _unchanged(item, kept_format)
            problem = None if same else _response_format_problem(item)
            if problem:
                problems.append((where, problem))
                continue
        elif key == "required_tools":
            if not isinstance(item, list) or not all(isinstance(t, str) and t in HOSTED_TOOLS for t in item):
                problems.append((where, f"required_tools must list tools from {sorted(HOSTED_TOOLS)}."))
                continue
            item = list(dict.fromkeys(item))
        elif key == "stop":
            stops = [item] if isinstance(item, str) else item
            if (
                not isinstance(stops, list)
                or not 1 <= len(stops) <= STOP_MAX
                or not all(isinstance(s, str) and 1 <= len(s) <= STOP_CHARS_MAX for s in stops)
            ):
                problems.append((where, f"stop must be a string or a list of 1-{STOP_MAX} strings."))
                continue
        out[key] = item
    return out


def _response_format_problem(value: object) -> str | None:
    if not isinstance(value, Mapping) or value.get("type") not in ("text", "json_object", "json_schema"):
        return (
            "response_format must be {type: text}, {type: json_object} or {type: json_schema, json_schema}."
        )
    if value.get("type") == "json_schema":
        spec = value.get("json_schema")
        if not isinstance(spec, Mapping) or not isinstance(spec.get("schema"), Mapping):
            return "A json_schema response_format needs json_schema.schema, an object."
    try:
        size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
    except (TypeError, ValueError):  # nothing a JSON body holds; a caller's own object
        return "response_format must be JSON."
    if size > RESPONSE_FORMAT_MAX_BYTES:
        limit = RESPONSE_FORMAT_MAX_BYTES
        return f"response_format is at most {limit:,} bytes of JSON (this one is {size:,})."
    return None


def _routing(value: object, problems: list[tuple[str, str]]) -> PresetRouting:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(("routing", "routing must be an object."))
        return {}
    out: PresetRouting = {}
    for key, item in value.items():
        if not _is_routing(key):
            problems.append(
                (f"routing.{key}", f"Unknown routing setting {key}: one of {', '.join(ROUTING_FIELDS)}.")
            )
        elif item is not None:
            out[key] = item
    if "region" in out and (not isinstance(out["region"], str) or not 1 <= len(out["region"]) <= 64):
        problems.append(("routing.region", "region must be a region name of 1-64 characters."))
        out.pop("region")
    for key in [setting for setting in out if _is_routing(setting)]:  # the settings kept, in order
        try:
            RouteRequest.from_api({key: out[key]})  # the same reading a quote or batch body gets
        except InvalidRequest as refused:
            where = str((refused.details or {}).get("field") or key)
            problems.append((f"routing.{where}", refused.message))
            out.pop(key)
    return out


def _invalid(problems: list[tuple[str, str]]) -> InvalidRequest:
    first_field, first_message = problems[0]
    return InvalidRequest(
        first_message if len(problems) == 1 else f"{first_message} ({len(problems) - 1} more problems)",
        code="invalid_preset",
        details={"field": first_field, "errors": [{"field": f, "message": m} for f, m in problems]},
    )


# -- expanding a request --------------------------------------------------------------------------
def apply_preset(raw: dict[str, Any], preset: PresetVersion) -> dict[str, Any]:
    """The request with the preset's fields filling what it leaves out, `preset` replaced by
    `preset_version: "<name>@<version>"`. A batch item (it has `customer_item_id`, `input`
    or `operation`) and a chat-completions body (otherwise) are filled in their own shapes;
    routing settings are request-level, so they fill a chat body (`privacy_tier`) here and a
    batch or quote body through `apply_preset_to_request`. Never mutates `raw`."""
    if any(key in raw for key in ("customer_item_id", "input", "operation")):
        return _apply_to_item(raw, preset)
    return _apply_to_chat(raw, preset)


def _apply_to_item(raw: dict[str, Any], preset: PresetVersion) -> dict[str, Any]:
    out = {k: v for k, v in raw.items() if k != "preset"}
    if out.get("model") is None and preset.model is not None:
        out["model"] = preset.model
    if out.get("operation") is None and preset.operation is not None:
        out["operation"] = preset.operation
    params = preset.parameters
    if "required_tools" not in out and params.get("required_tools"):
        out["required_tools"] = list(params["required_tools"])
    payload = out.get("input")
    if isinstance(payload, dict):
        payload = dict(payload)
        if out.get("operation") != "embeddings":
            _fill_chat_input(payload, preset)
        out["input"] = payload
        output_limit_given = any(key in out or key in payload for key in OUTPUT_LIMIT_KEYS)
    else:
        output_limit_given = any(key in out for key in OUTPUT_LIMIT_KEYS)
    if not output_limit_given and "max_output_tokens" in params and out.get("operation") != "embeddings":
        out["max_output_tokens"] = params["max_output_tokens"]
    out["preset_version"] = preset.ref
    return out


def _fill_chat_input(payload: dict[str, Any], preset: PresetVersion) -> None:
    """An item's chat input (`messages`, or the Responses API's `input`)."""
    if preset.system_prompt and not _has_system(payload):
        messages = payload.get("messages")
        if isinstance(messages, list):
            payload["messages"] = [{"role": "system", "content": preset.system_prompt}, *messages]
        elif payload.get("input") is not None:
            payload["instructions"] = preset.system_prompt
    _fill_options(payload, preset)


def _apply_to_chat(raw: dict[str, Any], preset: PresetVersion) -> dict[str, Any]:
    out = {k: v for k, v in raw.items() if k != "preset"}
    if out.get("model") is None and preset.model is not None:
        out["model"] = preset.model
    messages = out.get("messages")
    if preset.system_prompt and isinstance(messages, list) and not _has_system(out):
        out["messages"] = [{"role": "system", "content": preset.system_prompt}, *messages]
    _fill_options(out, preset)
    if not any(key in out for key in OUTPUT_LIMIT_KEYS) and "max_output_tokens" in preset.parameters:
        out["max_tokens"] = preset.parameters["max_output_tokens"]
    if out.get("privacy_tier") is None and "privacy_tier" in preset.routing:
        out["privacy_tier"] = preset.routing["privacy_tier"]
    out["preset_version"] = preset.ref
    return out


def apply_preset_to_request(body: Mapping[str, Any], preset: PresetVersion) -> dict[str, Any]:
    """A quote or batch body naming a batch-wide `preset`: its routing settings (and
    `required_tools`) fill the request-level fields the body leaves out. The body keeps its
    `preset`: it is the default of every item that names none."""
    out = dict(body)
    for key in ROUTING_FIELDS:
        if key in preset.routing and out.get(key) is None and not _other_region_given(key, out):
            out[key] = preset.routing[key]
    if out.get("required_tools") is None and preset.parameters.get("required_tools"):
        out["required_tools"] = list(preset.parameters["required_tools"])
    return out


def _other_region_given(key: str, body: Mapping[str, Any]) -> bool:
    """`region` and `regions` are one constraint: a body giving either takes neither from a preset."""
    other = {"region": "regions", "regions": "region"}.get(key)
    return other is not None and body.get(other) is not None


def _has_system(payload: Mapping[str, Any]) -> bool:
    if any(isinstance(payload.get(key), str) and payload.get(key) for key in ("system", "instructions")):
        return True
    turns = payload.get("messages")
    if turns is None:
        turns = payload.get("input")
    return isinstance(turns, list) and any(
        isinstance(turn, Mapping) and turn.get("role") in _SYSTEM_ROLES for turn in turns
    )


def _fill_options(payload: dict[str, Any], preset: PresetVersion) -> None:
    params = preset.parameters
    for key in _INPUT_OPTIONS:
        if key in params and payload.get(key) is None:
            payload[key] = params[key]
    structured = payload.get("response_format") is not None or (
        isinstance(payload.get("text"), Mapping) and "format" in payload["text"]
    )
    if "response_format" in params and not structured:
        payload["response_format"] = params["response_format"]
