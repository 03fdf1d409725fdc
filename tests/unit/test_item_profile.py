"""A file's item profile (domain/batches/item_profile.py): it holds exactly what the streamed preflight
learns of the items (count, digest, model groups), its frontier decides the per-item context
window check for every item, anything unusual leaves it unusable, and a quote built from it
is the streamed quote; when some item would fail a lane check, the profile steps aside and
the streamed path answers as before."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchroute.clock import FixedClock
from batchroute.domain.batches.item_profile import (
    MAX_FRONTIER,
    MAX_MODELS,
    ItemProfile,
    ItemProfileBuilder,
    _Frontier,
    profile_items,
)
from batchroute.domain.batches.jsonl import LineError
from batchroute.domain.batches.preflight import Preflight
from batchroute.domain.catalog.catalog import Catalog, LaneLive
from batchroute.domain.routing.gates import RoutingGuards
from batchroute.errors import InvalidRequest
from batchroute.services.batches.commands import QuoteRequest, Routing
from batchroute.services.batches.quotes import QuoteService, items_digest, quote_lanes
from tests.unit.catalog_fixtures import CHAT, EMBED, NOW, catalog, item, lane, live, provider

# Every lane check passes on WIDE; SMALL has a lane too small for large items (a warning) and
# a largest window a very large item exceeds (an error).
WIDE = catalog(
    [provider("a"), provider("b")],
    [
        lane("a", window=10_000_000, max_output=1_000_000, tools=("web_search", "calculator"),
             operations=("responses", "vision"),
             capabilities=("json_schema", "tool_calling", "tools_with_json_output")),
        lane("b", window=10_000_000, max_output=1_000_000, operations=("responses", "vision")),
        lane("a", model=EMBED, operations=("embeddings",), window=10_000_000),
    ],
)  # fmt: skip
SMALL = catalog(
    [provider("a"), provider("b")],
    [
        lane("a", window=2_000, max_output=1_000),
        lane("b", window=8_000, max_output=4_000),
        lane("a", model=EMBED, operations=("embeddings",), window=8_000),
    ],
)


# -- items -----------------------------------------------------------------------------------------

_TOOLS = [{"type": "web_search"}, {"type": "function", "function": {"name": "f", "parameters": {}}}]
_SCHEMA = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}


@st.composite
def an_item(draw: st.DrawFn, n: int) -> dict[str, Any]:
    kind = draw(st.sampled_from(["chat", "chat", "embed", "vision"]))
    text = "w " * draw(st.integers(0, 3_000)) + "w"  # never blank: the preflight refuses blank text
    if kind == "embed":  # one text, or a list of them (each must fit the window, not their sum)
        inputs = draw(st.sampled_from([text, [text] * draw(st.integers(1, 6))]))
        return {
            "customer_item_id": f"id-{n}",
            "operation": "embeddings",
            "model": EMBED,
            "input": {"input": inputs},
        }
    extra: dict[str, Any] = {}
    if draw(st.booleans()):
        extra["max_output_tokens"] = draw(st.integers(1, 6_000))
    if draw(st.integers(0, 4)) == 0:
        extra["required_tools"] = ["calculator"]
    payload: dict[str, Any] = {"messages": [{"role": "user", "content": text}]}
    if draw(st.integers(0, 4)) == 0:
        payload["tools"] = [draw(st.sampled_from(_TOOLS))]
    if draw(st.integers(0, 4)) == 0:
        payload["response_format"] = _SCHEMA
    if kind == "vision":
        payload["messages"][0]["content"] = [
            {"type": "text", "text": text},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        ]
    model = draw(st.sampled_from([CHAT, CHAT, "m-other"]))
    return {
        "customer_item_id": f"id-{n}",
        "operation": "vision" if kind == "vision" else "responses",
        "model": model,
        "input": payload,
        **extra,
    }


@st.composite
def item_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(1, 25))
    return [draw(an_item(n)) for n in range(count)]


def _with_other_model(base: Catalog, **wide: Any) -> Catalog:
    """`base` plus the model m-other on a wide lane of provider b."""
    extra = lane("b", model="m-other", window=10_000_000, max_output=1_000_000, **wide)
    return catalog(list(base.providers), [*base.lanes, extra])


WIDE = _with_other_model(
    WIDE,
    operations=("responses", "vision"),
    tools=("web_search", "calculator"),
    capabilities=("json_schema", "tool_calling", "tools_with_json_output"),
)
SMALL_ALL = _with_other_model(SMALL)


def streamed(items: list[dict[str, Any]], cat: Catalog) -> Preflight:
    """The preflight of `items` read as the lines of a file (as `profile_items` profiles them)."""
    preflight = Preflight(cat)
    for index, raw in enumerate(items):
        preflight.add_item(index, raw, line=index + 1)
    return preflight


# -- the profile equals what the streamed preflight builds --------------------------------------------


@settings(max_examples=80, deadline=None)
@given(item_lists())
def test_the_profile_holds_the_streamed_count_digest_and_groups(items: list[dict[str, Any]]) -> None:
    # Given items every lane check passes, read by the streamed preflight
    expected = streamed(items, WIDE)
    assert expected.result().ok, expected.result().to_api()  # tools and capabilities too
    # When they are profiled and a preflight is built from the profile
    profile = profile_items(items)
    from_profile = Preflight.from_profile(profile, WIDE)
    # Then count, digest and every model group are the streamed ones
    assert profile.usable and from_profile is not None
    assert profile.item_count == len(items) == from_profile.item_count
    assert profile.digest == items_digest(items)
    assert from_profile.groups == expected.groups
    assert from_profile.result() == expected.result()


def test_the_profile_survives_its_stored_form() -> None:
    items = [item(0), item(1, model=EMBED, operation="embeddings", input={"input": "x"}), item(2)]
    profile = profile_items(items)
    stored = profile.to_json()
    assert len(stored) < 2_000 and json.loads(stored)["usable"] is True
    assert ItemProfile.from_json(stored) == profile


@pytest.mark.parametrize(
    "stored",
    [
        None,
        "",
        "not json",
        "[]",
        '{"v": 99}',
        '{"apart":"files/o/f.item-profile.x.json"}',  # where it is, not the profile itself
        json.dumps({"v": 1, "facts": "0:other", "usable": True}),
    ],
)
def test_a_profile_this_code_cannot_trust_is_none(stored: str | None) -> None:
    assert ItemProfile.from_json(stored) is None


# -- the frontier ----------------------------------------------------------------------------------


def _maximal(points: list[tuple[int, int]]) -> set[tuple[int, int]]:
    return {(p, w) for p, w in points if not any((q >= p and v >= w) and (q, v) != (p, w) for q, v in points)}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=1, max_size=60))
def test_the_frontier_is_the_set_of_maximal_points(points: list[tuple[int, int]]) -> None:
    frontier = _Frontier()
    for p, w in points:
        frontier.add(p, w)
    kept = frontier.points()
    assert set(kept) == _maximal(points)
    assert [p for p, _ in kept] == sorted(p for p, _ in kept)  # prompts ascending
    assert all(a[1] > b[1] for a, b in itertools.pairwise(kept))  # outputs descending


@settings(max_examples=80, deadline=None)
@given(item_lists())
def test_the_frontier_decides_the_context_window_check_of_every_item(items: list[dict[str, Any]]) -> None:
    # Given items over lanes whose windows some items exceed
    expected = streamed(items, SMALL_ALL).result()
    window_errors = [e for e in expected.errors if e.code == "preflight_context_window_exceeded"]
    other_errors = [e for e in expected.errors if e.code != "preflight_context_window_exceeded"]
    # When a preflight is built from the profile
    from_profile = Preflight.from_profile(profile_items(items), SMALL_ALL)
    # Then it stands in exactly when no item fails a lane check (window, tools aside)
    per_item_window_errors = [e for e in window_errors if (e.path or "").endswith(".input")]
    if per_item_window_errors or any(e.code == "operation_not_supported" for e in other_errors):
        assert from_profile is None
    else:
        assert from_profile is not None
        assert from_profile.result() == expected


def test_an_item_asking_more_dimensions_than_the_model_makes_is_streamed_not_profiled() -> None:
    """The profile stands in only when every item would pass its lane checks: `dimensions`
    above the model's vector size (text-embedding-3-small: 1536) is one, reported per line."""
    from batchroute.catalog import builtin_catalog
    from batchroute.catalog.environments import load_deployment

    cat = load_deployment(builtin_catalog(), "local").catalog

    def embedding(index: int, dimensions: int) -> dict[str, Any]:
        body = {"input": f"hello world {index}", "dimensions": dimensions}
        return item(index, model="text-embedding-3-small", operation="embeddings", input=body)

    fine = [embedding(0, 256), embedding(1, 1536)]
    assert Preflight.from_profile(profile_items(fine), cat) is not None
    too_many = [embedding(0, 256), embedding(1, 5000), embedding(2, 256)]
    assert Preflight.from_profile(profile_items(too_many), cat) is None
    assert [e.path for e in streamed(too_many, cat).result().errors] == ["items[1].input.dimensions"]


# -- not clean: no usable profile -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "reason"),
    [
        ([item(0), LineError(2, "invalid_json", "line 2 is not JSON")], "line_error"),
        ([item(0), {"customer_item_id": "x", "operation": "responses", "input": {}}], "item_problem"),
        ([item(0), item(1, input={"messages": []})], "item_problem"),
        ([item(0), item(1), item(0)], "duplicate_customer_item_id"),
        ([item(0), item(1, preset="house-style")], "preset"),
        ([item(0), item(1, preset=None)], "preset"),
        ([], "empty"),
    ],
)
def test_a_file_that_is_not_clean_has_no_usable_profile(
    lines: list[dict[str, Any] | LineError], reason: str
) -> None:
    profile = profile_items(lines)
    assert (profile.usable, profile.reason) == (False, reason)
    assert Preflight.from_profile(profile, WIDE) is None
    assert ItemProfile.from_json(profile.to_json()) == profile


def test_too_many_models_or_frontier_points_leave_no_usable_profile() -> None:
    models = [item(n, model=f"m-{n}") for n in range(MAX_MODELS + 1)]
    assert profile_items(models).reason == "too_many_models"
    # an antichain: each item has a larger prompt and a smaller output than the one before
    spread = [
        item(n, text="w " * (10 * n) + "w", max_output_tokens=10_000 - n) for n in range(MAX_FRONTIER + 1)
    ]
    assert profile_items(spread).reason == "frontier_too_large"
    assert profile_items(spread[:MAX_FRONTIER]).usable


def test_a_duplicate_id_far_from_the_first_is_found() -> None:
    builder = ItemProfileBuilder()
    for n in range(5_000):
        builder.add_item(item(n))
    builder.add_item(item(4_321))
    assert builder.usable  # known only once every item is in
    assert builder.finish().reason == "duplicate_customer_item_id"


# -- a quote from the profile is the streamed quote ----------------------------------------------------


class _Live:
    def __init__(self, cat: Catalog) -> None:
        self.states = live(cat.lanes)

    def live_states(self, *, consistent: bool = False) -> dict[str, LaneLive]:
        return self.states


class _Unread:
    """An item source that must not be read."""

    def __iter__(self) -> Iterator[tuple[int, Mapping[str, Any]]]:
        raise AssertionError("the items were read")


def quotes(cat: Catalog) -> QuoteService:
    """Only `plan` is used: what it reads is the catalog, live states, settings, guards, clock."""
    unused: Any = None
    return QuoteService(
        catalog=cat,
        live=_Live(cat),
        snapshots=unused,
        item_sink=unused,
        files=unused,
        balances=unused,
        guards=RoutingGuards(),
        clock=FixedClock(NOW),
        policies=unused,
        presets=unused,
        limits=unused,
        check_url=unused,
    )


def _answer(planned: Any) -> dict[str, Any]:
    plan_api = planned.plan.to_api()
    return {
        "pricing_estimate": planned.price.to_api(),
        "quote_lanes": quote_lanes(plan_api),
        "routing": plan_api,
        "warnings": planned.warnings,
        "item_count": planned.item_count,
        "digest": planned.items_digest,
        "explanation": planned.plan.explanation(),
    }


@pytest.mark.parametrize(
    "body",
    [{}, {"routing_mode": "sla_aware"}, {"privacy_tier": "standard", "required_tools": []}],
)
def test_a_quote_from_the_profile_is_the_streamed_quote(body: dict[str, Any]) -> None:
    # Given items of two models, one large enough that the small lane is excluded (a warning)
    items = [item(n) for n in range(6)] + [item(6, text="w " * 9_000, max_output_tokens=500)]
    items += [item(n, model=EMBED, operation="embeddings", input={"input": "x"}) for n in range(7, 9)]
    service = quotes(SMALL)
    want = _answer(service.plan(QuoteRequest(Routing.parse(body)), enumerate(items, start=1)))
    assert [w["code"] for w in want["warnings"]] == ["context_window_lanes_excluded"]
    # When the same body is quoted from the file's profile, without reading an item
    got = _answer(service.plan(QuoteRequest(Routing.parse(body)), _Unread(), profile=profile_items(items)))
    # Then the answer is the same, field for field
    assert got == want


def test_a_profile_whose_frontier_fails_a_window_falls_back_to_the_same_400() -> None:
    # Given a file with one item no lane's window fits
    items = [item(0), item(1, text="w " * 30_000), item(2)]
    profile = profile_items(items)
    assert profile.usable and Preflight.from_profile(profile, SMALL) is None
    service = quotes(SMALL)
    with pytest.raises(InvalidRequest) as streamed_answer:
        service.plan(QuoteRequest(), enumerate(items))
    # When it is quoted with its profile, then the items are streamed and the 400 is the same
    read: list[int] = []

    def reading() -> Iterator[tuple[int, Mapping[str, Any]]]:
        for index, raw in enumerate(items):
            read.append(index)
            yield index, raw

    with pytest.raises(InvalidRequest) as answer:
        service.plan(QuoteRequest(), reading(), profile=profile)
    assert read == [0, 1, 2]
    assert (answer.value.code, answer.value.details) == (
        streamed_answer.value.code,
        streamed_answer.value.details,
    )
    errors = answer.value.details["preflight"]["errors"]  # type: ignore[index]
    assert [e["path"] for e in errors] == ["items[1].input"]


def test_an_unknown_model_or_operation_falls_back() -> None:
    unknown = profile_items([item(0, model="m-nope")])
    assert unknown.usable and Preflight.from_profile(unknown, SMALL) is None
    wrong_op = profile_items([item(0, operation="vision")])
    assert wrong_op.usable and Preflight.from_profile(wrong_op, SMALL) is None


def test_a_profile_keeps_where_the_items_stand_so_a_group_issue_names_its_line() -> None:
    # Given a file: a blank line, an item, two blank lines, an item offering a tool no lane has
    builder = ItemProfileBuilder()
    tooled = item(
        1, input={"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "web_search"}]}
    )
    builder.add_lines([(2, item(0)), (5, tooled)])
    profile = ItemProfile.from_json(builder.finish().to_json())  # as stored with the file
    assert profile is not None and profile.usable
    # When the quote's preflight stands on the profile, without reading the file
    preflight = Preflight.from_profile(profile, SMALL)
    assert preflight is not None
    # Then the tool no lane offers is named at its item and its line, as reading the file names it
    issues = [(i.code, i.path, i.line) for i in preflight.result().errors]
    assert issues == [("tool_not_supported", "items[1]", 5)]
    # And a profile stored before it kept lines names none, never a wrong one
    older = json.loads(builder.finish().to_json())
    del older["lines"]
    del older["models"][0]["largest_index"]  # nor the index of each model's largest item
    stored = ItemProfile.from_json(json.dumps(older))
    assert stored is not None
    assert [i.line for i in (Preflight.from_profile(stored, SMALL) or preflight).result().errors] == [None]
    assert stored.models[0].largest_index == stored.models[0].first_index
