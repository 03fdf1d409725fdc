"""A preset body's published schema says what its reader does.

A preset body is judged whole by the domain's reader (`parse_preset`: every problem at once,
against the deployment's catalog); its request models only document it, and the OpenAPI
document shows their JSON schema. Here that schema is the judge of the reader and the other
way round: over bodies drawn near every rule's edges, a value the schema admits is one the
reader accepts, and one it refuses is refused. The catalog's own rules (which models exist,
which operations a model serves) are no schema's, so the bodies name a model that serves
`responses` and give no `operation`.

JSON Schema counts `1.0` an integer; the reader, like the rest of the API, takes only an
integer written as one, so no integral float is drawn for an integer field.
"""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import given
from hypothesis import strategies as st

from batchroute.catalog import builtin_catalog
from batchroute.domain.presets.presets import (
    DESCRIPTION_MAX,
    PARAMETER_FIELDS,
    ROUTING_FIELDS,
    STOP_CHARS_MAX,
    STOP_MAX,
    SYSTEM_PROMPT_MAX,
    parse_preset,
)
from batchroute.domain.routing.items import MAX_OUTPUT_REQUEST
from batchroute.errors import InvalidRequest
from functions.api.schemas.presets.presets import PresetParameters, PresetReplace, PresetRouting

CATALOG = builtin_catalog()
MODEL = "gpt-4o-mini"

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


def _admitted(schema: dict[str, Any], value: object) -> bool:
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError:
        return False
    return True


def _accepted(body: dict[str, Any], prefix: str) -> bool:
    """No problem the reader finds in `body` is under `prefix` (a field, or a field's part)."""
    try:
        parse_preset({"model": MODEL, **body}, CATALOG, with_name=False)
    except InvalidRequest as refused:
        return not any(e["field"].startswith(prefix) for e in (refused.details or {})["errors"])
    return True


@given(st.dictionaries(st.sampled_from((*PARAMETER_FIELDS, "max_tokens")), _values, max_size=3))
def test_the_parameters_schema_admits_what_the_reader_accepts(parameters: dict[str, Any]) -> None:
    schema = PresetParameters.model_json_schema()
    assert _admitted(schema, parameters) == _accepted({"parameters": parameters}, "parameters"), parameters


_prices = st.dictionaries(
    st.sampled_from(["input_per_mtok", "output_per_mtok", "per_item_usd", "per_token"]),
    st.one_of(_scalars, st.sampled_from(["0.000001", "-1", "1e3", "2"])),
    max_size=3,
)


@given(
    st.dictionaries(
        st.sampled_from((*ROUTING_FIELDS, "sla_tier")),
        st.one_of(
            _scalars, _prices, st.sampled_from(["cheapest", "edge_only", "confidential", "eu", "x" * 65])
        ),
        max_size=3,
    )
)
def test_the_routing_schema_admits_what_the_reader_accepts(routing: dict[str, Any]) -> None:
    schema = PresetRouting.model_json_schema()
    assert _admitted(schema, routing) == _accepted({"routing": routing}, "routing"), routing


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


@given(
    st.dictionaries(
        st.sampled_from(["description", "system_prompt", "metadata"]),
        st.one_of(_long_texts, _metadata, st.none(), st.integers(0, 1)),
        max_size=3,
    )
)
def test_the_body_schema_admits_what_the_reader_accepts(fields: dict[str, Any]) -> None:
    body = {"model": MODEL, **fields}
    assert _admitted(PresetReplace.model_json_schema(), body) == _accepted(fields, ""), fields
