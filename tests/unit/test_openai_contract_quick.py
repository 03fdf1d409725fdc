"""The quick check in front of OpenAI's contract (batchroute_tools/contracts/openai.py, `_quick`:
the schemas compiled by jsonschema-rs) gives the answer the jsonschema pass gives, so the
emulator refuses and accepts exactly what it did: over every body the OpenAI adapters build
for generated items (all valid), and over the same bodies broken at a random place (a value
replaced by any JSON value, a key added, a key removed), `violations` equals
`detailed_violations`, the jsonschema pass alone.

`CONTRACT_EXAMPLES` (default 60) bounds the examples, as in test_vendor_contracts.py.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchroute.providers.base import PermanentProviderError
from batchroute_tools.contracts.openai import BATCH_URLS, detailed_violations, outgoing, violations
from tests.unit.item_strategies import NAMES, accepted_items
from tests.unit.test_vendor_contracts import DEPLOYMENT, models_of, provider_request, routable_lanes

EXAMPLES = int(os.environ.get("CONTRACT_EXAMPLES", "60"))
OPENAI_PROVIDERS = sorted(
    {
        lane.provider
        for lane in DEPLOYMENT.catalog.lanes
        if (endpoint := DEPLOYMENT.endpoint(lane.provider)) is not None
        and endpoint.adapter in ("openai", "openai_compatible")
    }
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | NAMES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=6,
)
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)


@st.composite
def sent_bodies(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """(operation, body) for each body an OpenAI adapter sends for a generated item."""
    provider = draw(st.sampled_from(OPENAI_PROVIDERS))
    raw = draw(accepted_items(models_of(provider)))
    sent: list[tuple[str, Any]] = []
    for lane in routable_lanes(raw):
        endpoint = DEPLOYMENT.endpoint(lane.provider)
        if lane.provider != provider or endpoint is None:
            continue
        try:
            sent += outgoing(
                provider_request(raw, lane), endpoint, lane_max_output_tokens=lane.max_output_tokens
            )
        except PermanentProviderError:
            continue  # test_vendor_contracts.py says whether the refusal is right
    return sent


def places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every value inside `value` (the body itself is ())."""
    found = [path]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += places(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += places(inner, (*path, index))
    return found


def broken(body: Any, path: tuple[Any, ...], how: str, value: Any, key: str) -> Any:
    """`body` with the value at `path` replaced by `value`, given a key `key`, or removed."""
    if not path:
        if how == "add_key" and isinstance(body, dict):
            body[key] = value
        return value if how == "replace" else body
    parent = body
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if how == "replace":
        parent[last] = value
    elif how == "add_key" and isinstance(parent[last], dict):
        parent[last][key] = value
    elif how == "remove":
        del parent[last]
    return body


def assert_same_answer(operation: str, body: Any) -> None:
    if operation == "batch_line":  # the line's body is checked as a request of its url
        operation, body = BATCH_URLS[body["url"]], body["body"]
    assert violations(operation, body) == detailed_violations(operation, body), (operation, body)


@SETTINGS
@given(sent=sent_bodies())
def test_every_body_the_adapters_send_gets_the_same_answer_from_both_checks(
    sent: list[tuple[str, Any]],
) -> None:
    for operation, body in sent:
        assert_same_answer(operation, body)
        assert violations(operation, body) == [], (operation, body)


@SETTINGS
@given(data=st.data())
def test_a_body_broken_anywhere_gets_the_same_answer_from_both_checks(data: st.DataObject) -> None:
    sent = data.draw(sent_bodies())
    if not sent:
        return
    operation, body = data.draw(st.sampled_from(sent))
    path = data.draw(st.sampled_from(places(body)))
    how = data.draw(st.sampled_from(["replace", "add_key", "remove"]))
    mutated = broken(body, path, how, data.draw(JSON_VALUES), data.draw(NAMES))
    line_body, url = (mutated.get("body"), mutated.get("url")) if isinstance(mutated, dict) else (None, None)
    # (a url broken into a list or an object is no key of BATCH_URLS: `in` would raise)
    if operation == "batch_line" and not (
        isinstance(line_body, dict) and isinstance(url, str) and url in BATCH_URLS
    ):
        return  # the line's own shape is checked by hand (line_shape_violations), not by the schemas
    assert_same_answer(operation, mutated)


def test_known_refusals_keep_their_violations() -> None:
    user = [{"role": "user", "content": "hi"}]
    for operation, body in [
        ("chat.completions", {"model": "m", "messages": user, "tools": [{"type": "web_search"}]}),
        ("chat.completions", {"model": "m", "messages": user, "bogus": 1}),
        ("chat.completions", {"model": 5, "messages": user}),
        ("responses", {"model": "m", "input": "x", "tools": [{"type": "function", "function": {}}]}),
        ("embeddings", {"model": "m"}),
    ]:
        found = violations(operation, body)
        assert found and found == detailed_violations(operation, body), (operation, body)
