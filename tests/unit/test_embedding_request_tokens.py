"""A lane whose vendor limits the tokens of one embeddings request, summed across its inputs
(OpenAI: "all embedding models enforce a maximum of 300,000 tokens summed across all inputs
in a single request"; catalog `max_embedding_request_tokens`), is refused by the routing
gate for an embeddings item over it (`context_window_exceeded`), and the preflight refuses
the item when no lane of its model can take it; each input must still fit the window on its
own (test_preflight.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings

from batchroute.catalog import builtin_catalog
from batchroute.catalog.environments import load_deployment
from batchroute.domain.batches.item_profile import profile_items
from batchroute.domain.batches.preflight import Preflight, PreflightResult
from batchroute.domain.catalog.catalog import Catalog
from batchroute.domain.routing.engine import route
from batchroute.domain.routing.gates import RouteRequest, RoutingGuards, lane_gate_failures
from tests.unit.catalog_fixtures import EMBED, NOW, catalog, group_of, item, lane, live, provider
from tests.unit.test_item_profile import SMALL_ALL, item_lists, streamed

OPENAI_EMBEDDER = "text-embedding-3-small"


def texts(tokens: int, *, each: int = 9_000) -> list[str]:
    """Inputs of `each` bytes (the last one shorter) the estimate sums to `tokens`:
    ceil(bytes / 3) + 3 for the request."""
    total = 3 * (tokens - 3)
    full, rest = divmod(total, each)
    return ["w" * each] * full + (["w" * rest] if rest else [])


def embedding(index: int, inputs: list[str], model: str = EMBED) -> dict[str, Any]:
    return item(index, model=model, operation="embeddings", input={"input": inputs})


def codes(result: PreflightResult, *, warnings: bool = False) -> list[tuple[str, str | None]]:
    return [(issue.code, issue.path) for issue in (result.warnings if warnings else result.errors)]


# Lane a takes 1,000 tokens a request in a large window; lane b has no such limit but a
# window of 600 tokens.
LIMITED = replace(
    lane("a", model=EMBED, operations=("embeddings",), window=8_000), max_embedding_request_tokens=1_000
)
NARROW = lane("b", model=EMBED, operations=("embeddings",), window=600)
TWO = catalog([provider("a"), provider("b")], [LIMITED, NARROW])
FITS_B_ONLY = ["w" * 1_500] * 2  # 503 tokens an input, 1,003 summed
FITS_A_ONLY = ["w" * 2_100]  # 703 tokens
FITS_NONE = ["w" * 2_100] * 2  # 703 an input (over b's window), 1,403 summed (over a's limit)


def _preflight(cat: Catalog, *items: dict[str, Any]) -> Preflight:
    """The preflight of `items` read as the lines of a file (as `profile_items` profiles them)."""
    preflight = Preflight(cat)
    for index, raw in enumerate(items):
        preflight.add_item(index, raw, line=index + 1)
    return preflight


def test_openais_embedding_lanes_take_at_most_300000_tokens_a_request() -> None:
    limits = {one.lane_id: one.max_embedding_request_tokens for one in builtin_catalog().lanes}
    assert limits[f"openai/{OPENAI_EMBEDDER}"] == 300_000
    # only OpenAI documents the limit, and only its embeddings lanes carry it
    assert {lane_id for lane_id, limit in limits.items() if limit is not None} == {
        f"openai/{OPENAI_EMBEDDER}"
    }


def test_the_gate_refuses_a_lane_for_an_embeddings_item_summing_past_its_request_limit() -> None:
    def failures(inputs: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
        found = lane_gate_failures(
            LIMITED,
            provider("a"),
            group_of([embedding(0, inputs)]),
            request=RouteRequest(),
            guards=RoutingGuards(),
            live=live([LIMITED])[LIMITED.lane_id],
            now=NOW,
        )
        return [(f.code, f.message, dict(f.details)) for f in found]

    # Given an item of 1,001 tokens in all, every input well inside the window
    (over,) = failures(texts(1_001, each=900))
    assert over[0] == "context_window_exceeded"
    assert over[2] == {"needed_tokens": 1_001, "request_token_limit": 1_000}
    assert "1,001 tokens summed across its inputs; the lane takes at most 1,000 a request" in over[1]
    # And at the limit the lane is fine
    assert failures(texts(1_000, each=900)) == []


def test_the_router_rejects_the_limited_lane_and_another_lane_serves_the_item() -> None:
    # Given an item over lane a's request limit that fits lane b
    plan = route(
        [group_of([embedding(0, FITS_B_ONLY)])], TWO, live=live(TWO.lanes), request=RouteRequest(), now=NOW
    )
    (group,) = plan.groups
    # Then b serves it and a's receipt says why not
    assert [one.lane_id for one in group.selected] == [NARROW.lane_id]
    (refused,) = group.rejected
    assert (refused.lane_id, refused.code) == (LIMITED.lane_id, "context_window_exceeded")
    assert refused.details == {"needed_tokens": 1_003, "request_token_limit": 1_000}


def test_the_preflight_refuses_an_item_no_lane_takes_and_warns_of_a_lane_left_out() -> None:
    # An item only b's window refuses and one only a's request limit refuses: both pass
    alone = _preflight(TWO, embedding(0, FITS_B_ONLY))
    assert codes(alone.result()) == []
    assert codes(alone.result(), warnings=True) == [("context_window_lanes_excluded", "items[0]")]
    (warning,) = alone.result().warnings
    assert warning.details is not None and warning.details["request_token_limits"] == {LIMITED.lane_id: 1_000}
    # An item both refuse is refused with its path and the limit
    refused = _preflight(TWO, embedding(0, FITS_A_ONLY), embedding(1, FITS_NONE)).result()
    assert codes(refused) == [("preflight_context_window_exceeded", "items[1].input")]
    assert refused.errors[0].details == {"needed_tokens": 1_403, "request_token_limit": 1_000}
    # Items that each fit a lane but no lane all of them: the group is refused, at its
    # largest item (the one whose tokens the message gives)
    neither = _preflight(TWO, embedding(0, FITS_B_ONLY), embedding(1, FITS_A_ONLY)).result()
    assert codes(neither) == [("preflight_context_window_exceeded", "items[1]")]
    assert neither.errors[0].details is not None
    assert neither.errors[0].details["request_token_limits"] == {LIMITED.lane_id: 1_000}


def test_an_openai_embeddings_item_summing_past_300000_tokens_is_refused_at_preflight() -> None:
    """Each input fits text-embedding-3-small's 8,191 tokens; only OpenAI serves the model.
    BAAI/bge-large-en-v1.5's hosts document no such limit."""
    preflight = Preflight(load_deployment(builtin_catalog(), "local").catalog)
    preflight.add_item(0, embedding(0, ["word " * 3_000] * 100, OPENAI_EMBEDDER))  # 5,000 an input
    preflight.add_item(1, embedding(1, texts(300_000), OPENAI_EMBEDDER))
    preflight.add_item(2, embedding(2, texts(300_001), OPENAI_EMBEDDER))
    preflight.add_item(3, embedding(3, ["word " * 240] * 1_000, "BAAI/bge-large-en-v1.5"))  # 400,003
    result = preflight.result()
    assert codes(result) == [
        ("preflight_context_window_exceeded", "items[0].input"),
        ("preflight_context_window_exceeded", "items[2].input"),
    ]
    assert [e.details for e in result.errors] == [
        {"needed_tokens": 500_003, "request_token_limit": 300_000},
        {"needed_tokens": 300_001, "request_token_limit": 300_000},
    ]
    assert "the lanes of text-embedding-3-small take at most 300,000 a request" in result.errors[0].message
    groups = {group.model: group for group in preflight.groups}
    assert groups[OPENAI_EMBEDDER].max_embedding_prompt_tokens == 300_000


def test_a_profile_over_a_lanes_request_limit_steps_aside_and_the_file_is_streamed() -> None:
    fine = [embedding(0, FITS_B_ONLY), embedding(1, ["w" * 300])]
    from_profile = Preflight.from_profile(profile_items(fine), TWO)
    assert from_profile is not None and from_profile.result() == _preflight(TWO, *fine).result()
    over = [embedding(0, ["w" * 300]), embedding(1, FITS_NONE)]
    assert Preflight.from_profile(profile_items(over), TWO) is None
    assert codes(_preflight(TWO, *over).result()) == [("preflight_context_window_exceeded", "items[1].input")]


# test_item_profile.py's items on its small lanes, the embeddings lane taking 3,000 tokens a
# request: its embeddings items (up to 6 inputs of up to 2,003 tokens) fall on both sides.
LIMITED_SMALL = catalog(
    list(SMALL_ALL.providers),
    [
        replace(one, max_embedding_request_tokens=3_000) if one.model == EMBED else one
        for one in SMALL_ALL.lanes
    ],
)


@settings(max_examples=80, deadline=None)
@given(item_lists())
def test_the_profile_stands_in_exactly_when_every_item_fits_a_lane_and_its_request_limit(
    items: list[dict[str, Any]],
) -> None:
    expected = streamed(items, LIMITED_SMALL).result()
    from_profile = Preflight.from_profile(profile_items(items), LIMITED_SMALL)
    per_item = [
        e
        for e in expected.errors
        if e.code in ("preflight_context_window_exceeded", "operation_not_supported")
        and (e.path or "").endswith((".input", ".operation"))
    ]
    if per_item:
        assert from_profile is None
    else:
        assert from_profile is not None
        assert from_profile.result() == expected
