"""The published schema of a body read by a parser, not by its model, says what it does.

A preset body (`parse_preset`) and a route policy update (`parse_update`) are read by the
domain, every problem at once, against the deployment's catalog, and a batch body by its
command's parser (below); their request models only document them, and the OpenAPI document
shows their JSON schema. Here that schema is the judge of the reader and the other way
round: for one field at a time, drawn near every rule's edges, a value the schema admits is
one the reader accepts, and one it refuses is refused (one field at a time, so that a problem
elsewhere cannot hide a disagreement). The catalog's own rules are no schema's (which models
and providers exist, which operations a model serves), nor are rules across fields (exactly
one of `items` and `input_file_id`), so the values keep clear of them.

JSON Schema counts `1.0` an integer; the readers, like the rest of the API, take only an
integer written as one, so no integral float is drawn for an integer field.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jsonschema
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from batchroute.catalog import builtin_catalog
from batchroute.domain.chat.requests import parse_chat_request
from batchroute.domain.presets.presets import (
    DESCRIPTION_MAX,
    PARAMETER_FIELDS,
    ROUTING_FIELDS,
    STOP_CHARS_MAX,
    STOP_MAX,
    SYSTEM_PROMPT_MAX,
    parse_preset,
)
from batchroute.domain.routing.items import MAX_OUTPUT_REQUEST, read_item
from batchroute.domain.routing.policy import EDITABLE_FIELDS, parse_update
from batchroute.errors import InvalidRequest
from batchroute.services.batches.commands import CreateBatch
from functions.api.schemas.batches.batches import BatchCreateRequest
from functions.api.schemas.billing.controls import ControlsUpdate
from functions.api.schemas.billing.payments import AutoTopupUpdate, CheckoutRequest
from functions.api.schemas.billing.retention import RetentionUpdate
from functions.api.schemas.chat.completions import ChatCompletionRequest
from functions.api.schemas.delivery.targets import DeliveryTargetUpdate
from functions.api.schemas.presets.presets import PresetParameters, PresetReplace, PresetRouting
from functions.api.schemas.routing.items import BatchItem
from functions.api.schemas.routing.policy import RoutePolicyUpdate
from functions.api.schemas.schedules.schedules import ScheduleCreate, ScheduleUpdate
from functions.api.schemas.work_orders.work_orders import WorkOrderCreate, WorkOrderUpdate
from tests.unit.item_strategies import accepted_items

CATALOG = builtin_catalog()
MODEL = "gpt-4o-mini"  # serves responses: a preset naming it needs no operation
EMBEDDING_MODEL = "text-embedding-3-small"

_numbers = st.one_of(
    st.integers(-2, 3),
    st.sampled_from([0.0001, 0.5, 1.5, 2.0001, -0.5, MAX_OUTPUT_REQUEST, MAX_OUTPUT_REQUEST + 1]),
)
_texts = st.sampled_from(["", " ", "x", "responses", "x" * STOP_CHARS_MAX, "x" * (STOP_CHARS_MAX + 1)])
_scalars = st.one_of(
    st.none(), st.booleans(), _numbers, _texts, st.sampled_from(["web_search", "teleport", "1.5"])
)
_formats = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "json_object", "json_schema", "xml"])},
    optional={
        "json_schema": st.sampled_from([{}, {"schema": {}}, {"name": "n", "schema": {}}, {"schema": 3}]),
        "strict": st.booleans(),
    },
)
_values = st.one_of(_scalars, _formats, st.lists(_scalars, max_size=STOP_MAX + 1))


@cache
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's published JSON schema, itself checked once against the meta-schema."""
    schema = model.model_json_schema()
    jsonschema.validators.validator_for(schema).check_schema(schema)
    return schema


def _admitted(schema: dict[str, Any], value: object) -> bool:
    return bool(jsonschema.validators.validator_for(schema)(schema).is_valid(value))


def _preset_accepted(body: dict[str, Any]) -> bool:
    try:
        parse_preset({"model": MODEL, **body}, CATALOG, with_name=False)
    except InvalidRequest:
        return False
    return True


@settings(max_examples=300)
@given(st.sampled_from((*PARAMETER_FIELDS, "max_tokens", "seed")), _values)
@example("seed", None)  # an unknown parameter is refused even when null (found by this test)
def test_the_parameters_schema_admits_what_the_reader_accepts(name: str, value: object) -> None:
    parameters = {name: value}
    admitted = _admitted(_schema(PresetParameters), parameters)
    assert admitted == _preset_accepted({"parameters": parameters}), parameters


def test_the_parameters_schema_refuses_both_output_limits_as_the_reader_does() -> None:
    both = {"max_output_tokens": 5, "max_tokens": 5}
    assert not _admitted(_schema(PresetParameters), both)
    assert not _preset_accepted({"parameters": both})


_prices = st.dictionaries(
    st.sampled_from(["input_per_mtok", "output_per_mtok", "per_item_usd", "per_token"]),
    st.one_of(_scalars, st.sampled_from(["0.000001", "-1", "1e3", "2"])),
    max_size=1,
)


@settings(max_examples=300)
@example("max_price", {"input_per_mtok": "1e3"})  # read as 1000 before (found by this test)
@given(
    st.sampled_from((*ROUTING_FIELDS, "sla_tier")),
    st.one_of(_scalars, _prices, st.sampled_from(["cheapest", "edge_only", "confidential", "eu", "x" * 65])),
)
def test_the_routing_schema_admits_what_the_reader_accepts(name: str, value: object) -> None:
    routing = {name: value}
    admitted = _admitted(_schema(PresetRouting), routing)
    assert admitted == _preset_accepted({"routing": routing}), routing


_long_texts = st.sampled_from(
    [
        "",
        " ",
        "\n\t",
        "a",
        " a ",
        "d" * DESCRIPTION_MAX,
        "d" * (DESCRIPTION_MAX + 1),
        "s" * (SYSTEM_PROMPT_MAX + 1),
    ]
)
_metadata = st.dictionaries(
    st.sampled_from(["k", "", "k" * 65]),
    st.one_of(st.sampled_from(["v", "", "v" * 513]), st.integers(0, 2), st.none(), st.booleans()),
    max_size=2,
)


@settings(max_examples=200)
@given(
    st.sampled_from(["description", "system_prompt", "metadata", "colour"]),
    st.one_of(_long_texts, _metadata, st.none(), st.integers(0, 1)),
)
def test_the_preset_schema_admits_what_the_reader_accepts(name: str, value: object) -> None:
    body = {name: value}
    admitted = _admitted(_schema(PresetReplace), {"model": MODEL, **body})
    assert admitted == _preset_accepted(body), body


_PROVIDERS = sorted(provider.slug for provider in CATALOG.providers)
_REGIONS = sorted({region for provider in CATALOG.providers for region in provider.regions})
_usd = st.one_of(
    _scalars,
    st.sampled_from(
        [
            "0.000001",
            "-1",
            "1e2",
            {"currency": "usd", "amount": "1.5"},
            {"currency": "USD", "amount": "2"},
            {"amount": "2"},
            {"currency": "usd", "amount": "two"},
            {"currency": "usd", "amount": -1},
            {"currency": "usd", "amount": 1_000_001},
            {},
        ]
    ),
)
_caps = st.dictionaries(
    st.sampled_from(["responses", "embeddings", "vision", "chat"]),
    st.one_of(
        _usd, st.just({}), st.dictionaries(st.sampled_from(["input", "output", "cached"]), _usd, max_size=2)
    ),
    max_size=2,
)
_POLICY_VALUES = {
    "provider_allow": st.lists(st.sampled_from(_PROVIDERS), max_size=2),
    "provider_deny": st.lists(st.sampled_from(_PROVIDERS), max_size=2),
    "allowed_regions": st.lists(st.sampled_from(_REGIONS), max_size=2),
    "routing_mode": st.sampled_from(["cheapest", "edge_only", "fastest"]),
    "privacy_tier_floor": st.sampled_from(["standard", "confidential", "secret"]),
    "max_price_per_million_tokens": _caps,
    "chat_fallbacks_allowed": st.booleans(),
    "version": st.sampled_from([-1, 0, 7, "3"]),
    "colour": st.just("blue"),
}


@settings(max_examples=400)
@given(
    st.sampled_from(sorted(_POLICY_VALUES)).flatmap(
        lambda n: st.tuples(st.just(n), _POLICY_VALUES[n] | _scalars)
    )
)
# a price cap's ceiling is the policy's own (1,000,000 USD), not the billing controls' amount's
@example(("max_price_per_million_tokens", {"responses": {"input": 1_000_001}}))
@example(("max_price_per_million_tokens", {"vision": {"output": 1_000_000}}))
# a Money object is the one every USD input takes (`UsdMoney`): its currency given, in any case
@example(("max_price_per_million_tokens", {"responses": {"input": {"amount": "2"}}}))
@example(("max_price_per_million_tokens", {"responses": {"input": {"currency": "USD", "amount": "2"}}}))
# ... and its amount as a plain one is: a decimal, within the cap's bound
@example(("max_price_per_million_tokens", {"vision": {"input": {"currency": "usd", "amount": "two"}}}))
@example(("max_price_per_million_tokens", {"vision": {"input": {"currency": "usd", "amount": 1_000_001}}}))
def test_the_route_policy_schema_admits_what_the_reader_accepts(field: tuple[str, object]) -> None:
    assert set(EDITABLE_FIELDS) <= set(_POLICY_VALUES)
    body = dict([field])
    try:
        parse_update(body, CATALOG)
        accepted = True
    except InvalidRequest:
        accepted = False
    assert _admitted(_schema(RoutePolicyUpdate), body) == accepted, body


# A batch body's fields are read by its command's parser (services/batches/commands.py), but
# for `webhook` and `preset`, which the preflight judges (`batch_preflight_failed`).
_ITEM = {
    "customer_item_id": "a",
    "model": MODEL,
    "operation": "responses",
    "input": {"messages": [{"role": "user", "content": "hi"}]},
}
_BATCH_VALUES = st.one_of(
    _scalars,
    st.lists(_scalars, max_size=2),
    st.sampled_from(["24h", "48h", "sla_aware", "flex", "eu", "qlock_1", "wo_1", "x" * 65, {}, {"k": "v"}]),
    st.sampled_from(
        [{"k": 1}, {"mode": "off"}, {"mode": "x"}, {"input_per_mtok": "1"}, {"per_item_usd": -1}]
    ),
)


@settings(max_examples=400)
@example("required_tools", False)  # read as none before: only null is absent
@example("quote_id", 0)
@example("work_order_id", "confidential")
@given(
    st.sampled_from(
        [
            *ROUTING_FIELDS,
            "sla_tier",
            "regions",
            "required_tools",
            "quote_id",
            "metadata",
            "work_order_id",
            "completion_window",
            "rescue",
            "colour",
        ]
    ),
    _BATCH_VALUES,
)
def test_the_batch_schema_admits_what_its_parser_accepts(name: str, value: object) -> None:
    body = {"items": [_ITEM], name: value}
    try:
        CreateBatch.parse(body)
        accepted = True
    except InvalidRequest:
        accepted = False
    assert _admitted(_schema(BatchCreateRequest), body) == accepted, body


# -- bodies whose fields each run a domain rule as their validator (`domain_rule`) -----------
# The schema shows each field's documented shape; the model's validation is the rule. What no
# JSON schema can say is left out: the bounds of the number a decimal string holds (or a Money
# object's amount), whether a number is in whole cents, and whether a time zone exists.
_MONEY_FIELDS = frozenset({"limit_amount", "low_balance_amount", "amount", "trigger_balance", "monthly_cap"})
_RULE_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 101),
    st.sampled_from([1.5, 1.555, -1.0, 10.0**12, "1", "1.5", "0.001", "-1", "-0", "abc", "", " ", "x" * 65]),
    st.sampled_from(["UTC", "monthly", "daily", "hard", "soft", "alert_only", "my.bucket", "ab", "a" * 64]),
    st.sampled_from(["https://s3.example.com", "https://s3.example.com/path", "1", "AKIA0123456789", "a b"]),
    st.sampled_from(
        [{"currency": "usd", "amount": "1"}, {"currency": "eur", "amount": "1"}, {"amount": "1"}]
    ),
    st.lists(st.sampled_from([{"kind": "percent", "value": 50}, {"kind": "x"}, 3]), max_size=2),
)


RULE_CHECKED: list[type[BaseModel]] = [
    ControlsUpdate,
    DeliveryTargetUpdate,
    AutoTopupUpdate,
    CheckoutRequest,
    RetentionUpdate,
    WorkOrderCreate,
    WorkOrderUpdate,
]


def _editable(model: type[BaseModel]) -> list[str]:
    """The model's fields but the read-only ones a GET answer sends back."""
    return [
        name
        for name, info in model.model_fields.items()
        if not (isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("readOnly"))
    ]


def _beyond_a_schema(name: str, value: object) -> bool:
    amount = value.get("amount") if isinstance(value, dict) and value.get("currency") == "usd" else value
    bounded_string = (
        name in _MONEY_FIELDS and isinstance(amount, str) and amount.replace(".", "", 1).isdigit()
    )
    # whole cents: JSON Schema's multipleOf 0.01 is not exact in binary floats (1.1 fails it)
    fine_float = name in _MONEY_FIELDS and isinstance(amount, float) and round(amount, 2) != amount
    return bounded_string or fine_float or name == "limit_timezone"


@settings(max_examples=400)
@example((DeliveryTargetUpdate, "prefix", None))  # each found by this test, now documented
@example((DeliveryTargetUpdate, "region", ""))
@example((AutoTopupUpdate, "amount", 1))
@example((WorkOrderUpdate, "name", " "))
@example((WorkOrderCreate, "client_reference", " "))
# an amount typed as text is the schemas' pattern: not signed, not even "-0"
@example((ControlsUpdate, "low_balance_amount", "-0"))
@given(
    st.sampled_from(RULE_CHECKED).flatmap(
        lambda model: st.tuples(st.just(model), st.sampled_from(_editable(model)), _RULE_VALUES)
    )
)
def test_a_rule_checked_field_documents_what_its_rule_accepts(
    case: tuple[type[BaseModel], str, object],
) -> None:
    model, name, value = case
    assume(not _beyond_a_schema(name, value))
    try:
        model.model_validate({name: value})
        accepted = True
    except ValidationError:
        accepted = False
    assert _admitted(_schema(model), {name: value}) == accepted, (model.__name__, name, value)


# -- a schedule's fields (domain/schedules/schedules.py, domain/presets/golden_sets.py) -------
# What no JSON schema can say is left out: whether a cron or rate is valid and fires at most
# every few minutes (only blank expressions are drawn beside valid ones) and whether a time zone
# exists (only existing ones are drawn beside misshapen ones); how a golden item's expected
# value must suit the scorer (drawn to suit it) and a golden input's messages (a batch item's
# rules, left to its own test).
_SOURCES = st.sampled_from(
    [
        {},
        {"type": "file", "file_id": "file_1"},
        {"type": "file", "file_id": "x"},
        {"type": "file", "file_id": "file_1", "prefix": "a"},
        {"type": "bucket", "file_id": "file_1"},
        {"type": "bucket_prefix", "delivery_target_id": "dt_1", "prefix": "in/"},
        {"type": "bucket_prefix", "delivery_target_id": "dt_1", "prefix": "//"},
        {"type": "bucket_prefix", "delivery_target_id": "dt_1", "prefix": "a/../b"},
        {"type": "bucket_prefix", "delivery_target_id": "dt_1", "prefix": "p" * 513},
        {"type": "bucket_prefix", "delivery_target_id": "dt_1", "prefix": "a", "preset": None},
        {"type": "bucket_prefix", "delivery_target_id": "dt_1", "prefix": "a", "preset": ""},
        {"type": "bucket_prefix", "delivery_target_id": "dt_1", "prefix": "a", "preset": "p@1"},
        {"type": "bucket_prefix", "delivery_target_id": "x", "prefix": "a"},
        {"type": "bucket_prefix", "prefix": "a"},
    ]
)
_OPTIONS = st.sampled_from(
    [
        {},
        {"colour": "blue"},
        {"items": []},
        {"completion_window": "24h"},
        {"completion_window": "48h"},
        {"completion_window": None},
        {"webhook": {"url": "https://hooks.example.com/a", "secret": "s" * 32}},
        {"webhook": {"url": "https://hooks.example.com/a", "configured": True}},
        {"webhook": {"url": "https://hooks.example.com/a", "secret_sealed": "AQID"}},
        {"webhook": {"secret": "s" * 32}},
        {"webhook": 3},
        {"webhook": None},
        {"routing_mode": "cheapest"},
        {"routing_mode": "fastest"},
        {"sla_tier": "24h"},
        {"privacy_tier": "confidential"},
        {"region": "eu-west-1"},
        {"regions": ["eu-west-1"]},
        {"regions": []},
        {"required_tools": ["web_search"]},
        {"required_tools": False},
        {"max_price": {"input_per_mtok": "1"}},
        {"max_price": {"per_item_usd": -1}},
        {"metadata": {"k": "v"}},
        {"metadata": {"k": [1]}},
        {"metadata": 3},
    ]
)
_GOLDEN_ITEM = {"input": "hi", "expected": "a"}
_NUMERIC_ITEM = {"input": "hi", "expected": 2}
_GOLDEN_SETS = st.sampled_from(
    [
        {},
        {"model": MODEL, "items": [_GOLDEN_ITEM], "scorer": "exact"},
        {"model": MODEL, "items": [_GOLDEN_ITEM], "scorer": {"type": "contains"}, "threshold": 0.5},
        {"model": MODEL, "items": [_GOLDEN_ITEM], "scorer": "exact", "threshold": 1.5},
        {"model": MODEL, "items": [_GOLDEN_ITEM], "scorer": "exact", "threshold": True},
        {"model": MODEL, "items": [_GOLDEN_ITEM], "scorer": "bogus"},
        {"model": MODEL, "items": [_GOLDEN_ITEM], "scorer": {"type": "json_field", "path": "a.b"}},
        {"model": MODEL, "items": [_GOLDEN_ITEM], "scorer": {"type": "json_field"}},
        {"model": MODEL, "items": [_NUMERIC_ITEM], "scorer": {"type": "numeric"}},
        {
            "model": MODEL,
            "items": [{"input": "hi", "expected": 2}],
            "scorer": {"type": "numeric", "tolerance": -1},
        },
        {"model": MODEL, "items": [], "scorer": "exact"},
        {"model": MODEL, "items": [_GOLDEN_ITEM] * 51, "scorer": "exact"},
        {"model": MODEL, "items": [3], "scorer": "exact"},
        {"model": MODEL, "items": [{"input": 3, "expected": "a"}], "scorer": "exact"},
        {"model": "", "items": [_GOLDEN_ITEM], "scorer": "exact"},
        {"items": [_GOLDEN_ITEM], "scorer": "exact"},
        {"model": MODEL, "items": [_GOLDEN_ITEM], "scorer": "exact", "seed": 1},
    ]
)
_SCHEDULE_VALUES = {
    "expression": st.sampled_from(
        ["rate(5 minutes)", "30 2 * * *", "", " ", "\t", 5, None, ["rate(1 hour)"]]
    ),
    "time_zone": st.sampled_from(["UTC", "Europe/Paris", "", "/UTC", "Europe/../Paris", "x" * 65, 3, None]),
    "input_source": _SOURCES | _scalars,
    "batch_options": _OPTIONS | _scalars,
    "golden_set": _GOLDEN_SETS | _scalars,
    "name": _long_texts | _scalars | st.just("n" * 101),
    "description": _long_texts | _scalars,
    "state": st.sampled_from(["active", "paused", "running"]),
}


@settings(max_examples=400)
@example(("batch_options", {"webhook": {"url": "https://hooks.example.com/a", "secret_sealed": "AQID"}}))
@example(("time_zone", None))  # each found by this test, now documented or refused
@example(("input_source", {"type": "bucket_prefix", "delivery_target_id": "dt_1", "prefix": "//"}))
@example(("golden_set", {"model": MODEL, "items": [], "scorer": "exact"}))
@given(
    st.sampled_from(sorted(_SCHEDULE_VALUES)).flatmap(lambda n: st.tuples(st.just(n), _SCHEDULE_VALUES[n]))
)
def test_a_schedule_field_documents_what_its_rule_accepts(field: tuple[str, object]) -> None:
    assert set(ScheduleCreate.model_fields) <= set(_SCHEDULE_VALUES)
    name, value = field
    model: type[BaseModel] = ScheduleCreate if name == "state" else ScheduleUpdate
    body = {"name": "n", "expression": "rate(1 hour)", "input_source": {"type": "file", "file_id": "file_1"}}
    body = {**body, name: value} if model is ScheduleCreate else {name: value}
    try:
        model.model_validate(body)
        accepted = True
    except ValidationError:
        accepted = False
    assert _admitted(_schema(model), body) == accepted, (name, value)


@settings(max_examples=100)
@given(_GOLDEN_SETS | _scalars)
def test_a_presets_golden_set_documents_what_the_reader_accepts(golden: object) -> None:
    body = {"golden_set": golden}
    admitted = _admitted(_schema(PresetReplace), {"model": MODEL, **body})
    assert admitted == _preset_accepted(body), body


# -- a batch item (functions/api/schemas/routing/items.py, read by domain/routing/items.py) ---
# One key of the item or of its input at a time, over values near each rule's edge. Left to
# the reader alone, and not drawn: the order of turns (so every conversation drawn is one
# user's turn, or a tool call answered), a call's `arguments` holding a JSON object, a JSON
# Schema's validity, `tool_choice` (it must name a declared tool), hosted tools beside `stop`,
# and what a preset gives (`model`, `operation`, `preset`).
_USER = {"role": "user", "content": "hi"}
_CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
_PARTS = st.sampled_from(
    [
        {"type": "text", "text": "hi"},
        {"type": "input_text", "text": " "},
        {"type": "text", "text": "hi", "annotations": []},
        {"type": "text", "text": "hi", "colour": 1},
        {"type": "refusal", "refusal": "no"},
        {"type": "image_url", "image_url": "https://img.example.com/a.png"},
        {"type": "image_url", "image_url": {"url": "https://img.example.com/a.png", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "https://img.example.com/a.png", "detail": "max"}},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "high"},
        {"type": "input_image", "image_url": "data:image/bmp;base64,AAAA"},
        {"type": "image_url", "image_url": "ftp://img.example.com/a.png"},
        {"type": "input_image", "file_id": "file_1"},
        {"type": "audio", "audio": "x"},
        "hi",
    ]
)
_CONTENTS = st.one_of(
    st.sampled_from(["hi", "", " ", None, 3]),
    st.lists(_PARTS, min_size=0, max_size=2),
)
_MESSAGES = st.one_of(
    # the user's turn, its content and keys drawn
    st.builds(
        lambda content, extra: [{"role": "user", "content": content, **extra}],
        _CONTENTS,
        st.sampled_from([{}, {"type": "message"}, {"type": None}, {"type": "note"}, {"name": "a"}]),
    ),
    # a system text first, then the user's
    st.builds(
        lambda role, content: [{"role": role, "content": content}, _USER],
        st.sampled_from(["system", "developer", "boss"]),
        _CONTENTS,
    ),
    # an assistant's tool call and its answer
    st.builds(
        lambda content, calls, answer: [
            _USER,
            {"role": "assistant", "content": content, "tool_calls": calls},
            answer,
        ],
        _CONTENTS,
        st.sampled_from(
            [
                [_CALL],
                [{**_CALL, "type": "custom"}],
                [{**_CALL, "id": "call 1"}],
                [{**_CALL, "extra_content": {}}],
                [{**_CALL, "function": {"name": "1f", "arguments": "{}"}}],
            ]
        ),
        st.sampled_from(
            [
                {"role": "tool", "tool_call_id": "call_1", "content": "42"},
                {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "42"}]},
                {"role": "tool", "tool_call_id": "call_1", "content": " "},
                {"role": "tool", "tool_call_id": "call_1", "content": "42", "type": "message"},
            ]
        ),
    ),
    # the Responses API's function_call and its output
    st.builds(
        lambda call, output: [_USER, call, output],
        st.sampled_from(
            [
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "f",
                    "arguments": "{}",
                    "status": "completed",
                },
                {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "f",
                    "arguments": "{}",
                    "role": "assistant",
                },
            ]
        ),
        st.sampled_from(
            [
                {"type": "function_call_output", "call_id": "c1", "output": "42"},
                {"type": "function_call_output", "call_id": "c1", "output": 42},
            ]
        ),
    ),
    # an answer sent back as the SDK echoes it (ChatCompletionMessage), then the user's turn
    st.builds(
        lambda content, extra: [_USER, {"role": "assistant", "content": content, **extra}, _USER],
        _CONTENTS,
        st.dictionaries(
            st.sampled_from(["refusal", "annotations", "audio", "function_call", "name", "tool_calls"]),
            st.sampled_from(
                [None, "I can't help with that.", " ", [], [{"type": "url_citation"}], {"id": "a"}, 3]
            ),
            max_size=3,
        ),
    ),
    st.sampled_from([[], [3], "hi", [_USER, {"role": "assistant"}]]),
)
_TOOLS = st.lists(
    st.sampled_from(
        [
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "f", "description": 3}},
            {"type": "function", "function": {"name": "f"}, "strict": True},
            {"type": "function", "name": "g", "strict": True},
            {"type": "function", "name": "g", "colour": 1},
            {"type": "function", "name": "-g"},
            {"type": "web_search"},
            {"type": "web_search_preview_2025_03_11"},
            {"type": "web_search", "search_context_size": "low"},
            {"type": "file_search", "vector_store_ids": ["vs_1"]},
            {"type": "file_search", "vector_store_ids": []},
            {"type": "file_search"},
            {"type": "code_interpreter", "container": {"type": "auto"}},
            {"type": "python_execution", "container": {"type": "x"}},
            {"type": "calculator"},
            {"type": "teleport"},
            {"name": "f"},
        ]
    ),
    max_size=2,
    unique_by=lambda tool: str(tool.get("name") or tool.get("function")),
)
_FORMATS_IN = st.sampled_from(
    [
        {"type": "text"},
        {"type": "json_object"},
        {"type": "json_schema", "json_schema": {"name": "out", "schema": {"type": "object"}}},
        {
            "type": "json_schema",
            "json_schema": {
                "name": "out",
                "schema": {"type": "object", "additionalProperties": False},
                "strict": True,
            },
        },
        {"type": "json_schema", "json_schema": {"name": "o u t", "schema": {}}},
        {"type": "json_schema", "json_schema": {"name": "out"}},
        {"type": "json_schema", "name": "out", "schema": {"type": "object"}},
        {"type": "xml"},
        {},
    ]
)
_CHAT_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "messages": _MESSAGES,
    "input": st.one_of(_MESSAGES, st.sampled_from(["hi", ""])),
    "instructions": _scalars,
    "system": _scalars,
    "tools": _TOOLS | _scalars,
    "response_format": _FORMATS_IN | _scalars,
    "text": st.one_of(
        _scalars, st.builds(lambda f: {"format": f}, _FORMATS_IN), st.just({"verbosity": "low"})
    ),
    "temperature": _scalars,
    "top_p": _scalars,
    "stop": _scalars | st.lists(_scalars, max_size=5),
    "max_output_tokens": _scalars,
    "max_completion_tokens": _scalars,
    "max_tokens": _scalars,
    "model": _scalars,
    "user": _scalars,
    "store": _scalars,
    "metadata": _scalars
    | st.dictionaries(st.text(max_size=66), _scalars | st.text(min_size=511, max_size=513), max_size=17),
    "n": _scalars,
    "stream": _scalars,
    "parallel_tool_calls": _scalars,
    "seed": _scalars,
    "dimensions": _scalars,
}
_EMBEDDING_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "input": st.one_of(
        _scalars,
        st.lists(st.one_of(_scalars, st.lists(st.integers(-1, 3), max_size=2)), max_size=3),
        st.just(["x"] * 2049),
    ),
    "text": st.sampled_from(["hi", None, "", ["a"], 3]),
    "dimensions": _scalars,
    "encoding_format": st.sampled_from(["float", "base64", None]),
    "user": _scalars,
    "stream": _scalars,
    "temperature": _scalars,
}
_ITEM_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "customer_item_id": st.sampled_from(["a", "", "x" * 256, "x" * 257, 3, None]),
    "model": st.sampled_from([MODEL, "", "m" * 257, 3]),
    "operation": st.sampled_from(["responses", "vision", "chat", 3]),
    "required_tools": st.lists(st.sampled_from(["web_search", "calculator", "teleport", 3]), max_size=2)
    | _scalars,
    "max_output_tokens": _scalars,
    "colour": _scalars,
    # the version an item's preset expanded (`name@N`): nothing else, not a bare name
    "preset_version": st.sampled_from(
        ["triage@1", "triage", "triage@0", "Triage@1", "evil@1\r\nx", 3, ["triage@1"], None]
    )
    | _scalars,
}


def _item_accepted(item: dict[str, Any]) -> bool:
    return not read_item(item)[1]


def _draw_case(values: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[tuple[str, Any]]:
    return st.sampled_from(sorted(values)).flatmap(lambda name: st.tuples(st.just(name), values[name]))


@settings(max_examples=600)
@given(_draw_case(_CHAT_VALUES))
def test_a_chat_inputs_schema_admits_what_the_item_reader_accepts(case: tuple[str, Any]) -> None:
    name, value = case
    given = {"messages": [_USER]} if name not in ("messages", "input") else {}
    item = {**_ITEM, "input": {**given, name: value}}
    assert _admitted(_schema(BatchItem), item) == _item_accepted(item), item["input"]


@settings(max_examples=300)
@given(_draw_case(_EMBEDDING_VALUES))
def test_an_embedding_inputs_schema_admits_what_the_item_reader_accepts(case: tuple[str, Any]) -> None:
    name, value = case
    given = {"input": "hi"} if name not in ("input", "text") else {}
    item = {**_ITEM, "operation": "embeddings", "model": EMBEDDING_MODEL, "input": {**given, name: value}}
    assert _admitted(_schema(BatchItem), item) == _item_accepted(item), item["input"]


@settings(max_examples=200)
@example(("preset_version", "triage"))  # was accepted as any value (a bare name, a number)
@example(("preset_version", 3))
@given(_draw_case(_ITEM_VALUES))
def test_an_items_schema_admits_what_the_item_reader_accepts(case: tuple[str, Any]) -> None:
    name, value = case
    item = {**_ITEM, name: value}
    assert _admitted(_schema(BatchItem), item) == _item_accepted(item), item


@settings(max_examples=150)
@given(accepted_items({"responses": [MODEL], "vision": [MODEL], "embeddings": [EMBEDDING_MODEL]}))
def test_every_item_the_reader_accepts_is_one_the_schema_admits(item: dict[str, Any]) -> None:
    """The other way round, over whole items: conversations with tool rounds in both dialects,
    images, tools, output formats and embeddings inputs (item_strategies.py)."""
    assert _admitted(_schema(BatchItem), item), item


# -- a chat request (functions/api/schemas/chat/completions.py, read by domain/chat/requests.py)
# Its messages and what rides along are a chat item's input; a preset is expanded before the
# body is read, and which models exist is the catalog's.
_CHAT_REQUEST_VALUES: dict[str, st.SearchStrategy[Any]] = {
    **{name: values for name, values in _CHAT_VALUES.items() if name != "input"},
    "model": st.sampled_from([MODEL, "", 3, None]),
    "stream": _scalars,
    "stream_options": st.sampled_from([{}, {"include_usage": True}, {"include_usage": 1}, 3, None]),
    "provider_preferences": st.sampled_from(
        [{}, {"only": ["openai"]}, {"order": ["openai"]}, {"allow_fallbacks": False}, {"first": 1}, 3]
    ),
    "privacy_tier": st.sampled_from(["standard", "confidential", "secret", None, 3]),
    "batch": st.sampled_from(
        [True, False, None, {}, {"completion_window": "24h"}, {"completion_window": "1h"}, {"colour": 1}, 3]
    ),
    "input": st.sampled_from(["hi", [_USER]]),
    "preset_version": st.sampled_from(
        [
            "support@3",
            3,
            None,
            ["support@3"],
            "support",
            "evil@1\r\nSet-Cookie: a=b",
            "\u20acuro@1",
            "Support@3",
        ]
    ),
}


def _chat_accepted(body: dict[str, Any]) -> bool:
    try:
        parse_chat_request(body, CATALOG)
    except InvalidRequest:
        return False
    return True


@settings(max_examples=600)
@example(("preset_version", 3))  # was ignored, now refused (found by this test)
@example(("preset_version", "evil@1\r\nSet-Cookie: a=b"))  # was echoed in a response header
@given(_draw_case(_CHAT_REQUEST_VALUES))
def test_a_chat_requests_schema_admits_what_its_reader_accepts(case: tuple[str, Any]) -> None:
    name, value = case
    body = {"model": MODEL, "messages": [_USER], name: value}
    assert _admitted(_schema(ChatCompletionRequest), body) == _chat_accepted(body), body


# Each schema is built (and checked) once, at import: no example's time includes it.
_BODIES = (PresetParameters, PresetRouting, PresetReplace, RoutePolicyUpdate, BatchCreateRequest)
for _model in (*_BODIES, *RULE_CHECKED, ScheduleCreate, ScheduleUpdate, BatchItem, ChatCompletionRequest):
    _schema(_model)
