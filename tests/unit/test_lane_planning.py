"""Lane assignments: ordinal ranges, chunks, lane keys, failover candidates and records."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from batchroute.adapters.dynamo.codec import from_item, to_item
from batchroute.adapters.dynamo.lane_records import lane_from_item, lane_item
from batchroute.catalog import builtin_catalog
from batchroute.domain.batches.record import ArtifactKeys, BatchRecord
from batchroute.domain.catalog.pricing import CacheTokens, TokenUsage
from batchroute.domain.routing.lane_plan import (
    LaneFailError,
    LaneRecord,
    PlanLane,
    PlanMismatch,
    PrefixFilter,
    SubmittedJob,
    chunk_ranges,
    chunks_for_range,
    failover_candidates,
    failover_record,
    handover_lanes,
    lane_chunk_count,
    lane_chunk_done,
    lane_chunk_position,
    lane_chunks,
    lane_done_chunks,
    lane_items,
    lane_key,
    model_offsets,
    new_lane_record,
    plan_groups,
    plan_lanes,
    root_number,
)
from batchroute.domain.routing.policy import PriceCap, RoutePolicy
from batchroute.services.batches.reads import chunk_in_flight
from bench.capacity import item_size

A, B = "model-a", "org/Model-B.1"
PRICES_1 = {"input_per_mtok": "0.10", "output_per_mtok": "0.20"}
PRICES_2 = {"input_per_mtok": "0.30", "output_per_mtok": "0.40"}


def _selected(provider: str, model: str, count: int, prices: dict[str, str]) -> dict[str, Any]:
    return {
        "lane_id": f"{provider}/{model}",
        "provider": provider,
        "model": model,
        "item_count": count,
        "unit_prices": prices,
    }


def _rejected(provider: str, model: str, code: str, cost: str | None) -> dict[str, Any]:
    details = {"estimated_provider_cost": {"currency": "usd", "amount": cost}} if cost else {}
    return {
        "lane_id": f"{provider}/{model}",
        "provider": provider,
        "model": model,
        "rejection": {"code": code, "details": details},
        "proof": {"provider": provider},
    }


# chunk 0: a a b ; chunk 1: b a a ; chunk 2: a   (a: 5 items, b: 2 items)
CHUNK_MODELS = [{A: 2, B: 1}, {B: 1, A: 2}, {A: 1}]
# The fields every stored lane record has, around the chunk fields a test sets
STORED = {
    "lane_key": "01-p1-model-a",
    "lane_id": "p1/model-a",
    "provider": "p1",
    "model": A,
    "ordinal_start": 0,
    "ordinal_end": 3,
    "item_count": 3,
    "unit_prices": PRICES_1,
    "created_at": "t",
}
LINES = [
    [{"seq": 0, "item": {"model": A}}, {"seq": 1, "item": {"model": A}}, {"seq": 2, "item": {"model": B}}],
    [{"seq": 3, "item": {"model": B}}, {"seq": 4, "item": {"model": A}}, {"seq": 5, "item": {"model": A}}],
    [{"seq": 6, "item": {"model": A}}],
]
PLAN = {
    "groups": [
        {
            "model": A,
            "item_count": 5,
            "selected_lanes": [_selected("p1", A, 3, PRICES_1), _selected("p2", A, 2, PRICES_2)],
            "rejected_lanes": [
                _rejected("p3", A, "outranked", "0.009"),
                _rejected("p4", A, "capacity_full", None),
                _rejected("p5", A, "outranked", "0.002"),
            ],
        },
        {
            "model": B,
            "item_count": 2,
            "selected_lanes": [_selected("p1", B, 2, PRICES_1)],
            "rejected_lanes": [],
        },
    ]
}


def test_model_offsets_count_a_models_items_before_each_chunk() -> None:
    assert model_offsets(CHUNK_MODELS, A) == [0, 2, 4, 5]
    assert model_offsets(CHUNK_MODELS, B) == [0, 1, 2, 2]
    assert model_offsets(CHUNK_MODELS, "absent") == [0, 0, 0, 0]


def test_chunks_for_range_are_those_holding_the_ordinals() -> None:
    offsets = model_offsets(CHUNK_MODELS, A)
    assert chunks_for_range(offsets, 0, 3) == [0, 1]
    assert chunks_for_range(offsets, 3, 5) == [1, 2]
    assert chunks_for_range(offsets, 2, 4) == [1]
    assert chunks_for_range(model_offsets(CHUNK_MODELS, B), 0, 2) == [0, 1]  # chunk 2 holds no b


def test_plan_lanes_split_each_group_in_order_and_number_the_lanes() -> None:
    lanes = plan_lanes(plan_groups(PLAN), CHUNK_MODELS, at="2026-01-01T00:00:00.000Z")
    assert [
        (lane.lane_key, lane.ordinal_start, lane.ordinal_end, tuple(lane_chunks(lane))) for lane in lanes
    ] == [
        ("01-p1-model-a", 0, 3, (0, 1)),
        ("02-p2-model-a", 3, 5, (1, 2)),
        ("03-p1-org-model-b-1", 0, 2, (0, 1)),
    ]
    lane = lanes[1]
    record = lane_item(lane)
    assert record["unit_prices"] == PRICES_2 and record["item_count"] == 2
    assert record["status"] == "pending" and lane.chunks_done_n == 0 and record["attempts"] == 0
    assert lane_chunks(lane) == [1, 2] and record["usage"] == {"prompt_tokens": 0, "completion_tokens": 0}


def test_a_plan_that_does_not_add_up_is_refused() -> None:
    with pytest.raises(PlanMismatch):
        plan_lanes(plan_groups(PLAN), [{A: 9, B: 2}], at="t")


def test_lane_items_keep_the_lanes_ordinals_of_its_model_less_excluded_seqs() -> None:
    second = plan_lanes(plan_groups(PLAN), CHUNK_MODELS, at="t")[1]  # ordinals [3, 5) of model a
    offsets = model_offsets(CHUNK_MODELS, A)

    def seqs(chunk: int, exclude: frozenset[int] = frozenset()) -> list[int]:
        kept = lane_items(
            LINES[chunk],
            model=A,
            first_ordinal=offsets[chunk],
            start=second.ordinal_start,
            end=second.ordinal_end,
            exclude=exclude,
        )
        return [seq for seq, _ in kept]

    assert seqs(0) == []
    assert seqs(1) == [5]  # seq 4 is ordinal 2 (first lane), seq 5 is ordinal 3
    assert seqs(2) == [6]
    assert seqs(2, frozenset({6})) == []


def test_lane_keys() -> None:
    assert (
        lane_key(3, "groq", "meta-llama/Llama-3.1-8B-Instruct") == "03-groq-meta-llama-llama-3-1-8b-instruct"
    )
    assert lane_key(3, "groq", A, failover_depth=2) == "03f2-groq-model-a"
    assert root_number("03f2-groq-model-a") == 3 and root_number("12-x-y") == 12


def test_failover_candidates_are_outranked_lanes_cheapest_first_not_used() -> None:
    found = failover_candidates(plan_groups(PLAN), A, used_lane_ids=["p1/model-a", "p2/model-a"])
    assert [c.lane_id for c in found] == ["p5/model-a", "p3/model-a"]
    assert [c.lane_id for c in failover_candidates(plan_groups(PLAN), A, ["p5/model-a"])] == ["p3/model-a"]
    assert failover_candidates(plan_groups(PLAN), B, []) == []


def test_failover_takes_a_lane_that_stops_answers_short_only_after_those_that_do_not() -> None:
    # Given a plan whose cheapest outranked lane was outranked for its output limit (it would
    # stop the group's answers short of what they ask for)
    short = _rejected("p6", A, "outranked", "0.001")
    short["rejection"]["details"]["rank_basis"] = "output_limit"
    plan = {
        "groups": [{**PLAN["groups"][0], "rejected_lanes": [*PLAN["groups"][0]["rejected_lanes"], short]}]
    }
    # When the selected lanes fail over
    found = failover_candidates(plan_groups(plan), A, used_lane_ids=["p1/model-a", "p2/model-a"])
    # Then the lanes able to produce the output come first, cheapest first; the short one last
    assert [c.lane_id for c in found] == ["p5/model-a", "p3/model-a", "p6/model-a"]
    assert [c.stops_short for c in found] == [False, False, True]


def test_a_failover_record_takes_the_unfinished_ordinals_at_the_original_prices() -> None:
    source = plan_lanes(plan_groups(PLAN), CHUNK_MODELS, at="t")[0]  # ordinals [0, 3), chunks 0 and 1
    candidate = failover_candidates(plan_groups(PLAN), A, ["p1/model-a", "p2/model-a"])[0]
    # The lane failed in chunk 0 (first ordinal 0) after answering seq 1
    successor = failover_record(
        source, candidate, chunk=0, chunk_first_ordinal=0, answered={1}, root_number=1, at="t2"
    )
    record = lane_item(successor)
    assert record["lane_key"] == "01f1-p5-model-a"
    assert (record["ordinal_start"], record["ordinal_end"]) == (0, 3)
    assert record["exclude_seqs"] == [1] and record["item_count"] == 2
    assert lane_chunks(successor) == [0, 1]
    assert record["unit_prices"] == PRICES_1  # the quoted prices, not the candidate's
    assert record["failover_from"] == "01-p1-model-a" and record["failover_depth"] == 1
    # Failing again in chunk 1 (first ordinal 2): the excluded seqs of chunk 0 no longer matter
    again_lane = failover_record(
        successor, candidate, chunk=1, chunk_first_ordinal=2, answered=set(), root_number=1, at="t3"
    )
    again = lane_item(again_lane)
    assert (again["ordinal_start"], again["ordinal_end"]) == (2, 3)
    assert again["exclude_seqs"] == [] and again["item_count"] == 1 and lane_chunks(again_lane) == [1]
    assert again["lane_key"] == "01f2-p5-model-a"


# -- a lane's chunks as ranges, its progress as watermarks ---------------------------------------


def test_chunk_ranges_are_the_run_length_of_the_list_and_read_back_in_order() -> None:
    assert chunk_ranges([3, 4, 5, 9, 10, 12]) == [[3, 5], [9, 10], [12, 12]]
    assert chunk_ranges([]) == []
    lane = lane_from_item(
        {**STORED, "chunk_ranges": chunk_ranges([3, 4, 5, 9, 10, 12]), "chunks_done_n": Decimal(4)}
    )
    assert lane_chunks(lane) == [3, 4, 5, 9, 10, 12] and lane_chunk_count(lane) == 6
    assert [lane_chunk_position(lane, c) for c in (3, 5, 9, 12, 6, 2)] == [0, 2, 3, 5, None, None]
    assert lane_done_chunks(lane) == {3, 4, 5, 9}
    assert lane_chunk_done(lane, 9) and not lane_chunk_done(lane, 10) and not lane_chunk_done(lane, 7)


def test_a_lane_record_written_with_lists_reads_the_same() -> None:
    written = {**STORED, "chunks": [3, 4, 9], "chunks_started": [3, 4], "chunks_done": [3]}
    legacy = lane_from_item(written)
    assert lane_chunks(legacy) == [3, 4, 9] and legacy.chunks_done_n == 1
    assert lane_chunk_done(legacy, 3) and not lane_chunk_done(legacy, 4)
    # A watermark once written wins over the list it replaces
    assert lane_done_chunks(lane_from_item({**written, "chunks_done_n": 2})) == {3, 4}


def _stored_size(record: dict[str, Any]) -> int:
    """The item's DynamoDB size (names + values) as the lane's transactions rewrite it."""
    return item_size(
        to_item(
            {
                "pk": "BATCH#batch_01jd0000000000000000000000",
                "sk": f"LANE#{record['lane_key']}",
                "kind": "lane",
                **record,
            }
        )
    )


def _lane(chunks: int, items_per_chunk: int = 1000) -> LaneRecord:
    items = chunks * items_per_chunk
    return new_lane_record(
        lane_key="01-deepinfra-meta-llama-llama-3-1-8b-instruct",
        lane_id="deepinfra/meta-llama/Llama-3.1-8B-Instruct",
        provider="deepinfra",
        model="meta-llama/Llama-3.1-8B-Instruct",
        ordinal_start=0,
        ordinal_end=items,
        chunks=list(range(chunks)),
        unit_prices=PRICES_1,
        at="2026-11-25T00:00:00.000Z",
    )


def _all_done(lane: LaneRecord) -> dict[str, Any]:
    """The record once every chunk started and finished (what the progress writes set)."""
    chunks, items = lane_chunk_count(lane), lane.item_count
    at = "2026-11-25T01:00:00.000Z"
    return {
        **lane_item(lane),
        "status": "completed",
        "chunks_started_n": chunks,
        "chunks_done_n": chunks,
        "attempts": 1,
        "completed": items,
        "usage": {"prompt_tokens": items * 40, "completion_tokens": items * 90},
        "started_at": at,
        "updated_at": at,
        "finished_at": at,
    }


def test_the_lane_record_every_chunk_rewrites_does_not_grow_with_the_batch() -> None:
    # 10 chunks (10k items) against 1,000 chunks (1M items: the lane with all of them)
    small, large = _all_done(_lane(10)), _all_done(_lane(1000))
    assert lane_done_chunks(lane_from_item(large)) == frozenset(range(1000))
    # Only the digits of its counts differ: the same 1 KB write unit either way
    assert abs(_stored_size(large) - _stored_size(small)) <= 16
    assert _stored_size(large) <= 1024
    # Fresh, too
    assert abs(_stored_size(lane_item(_lane(1000))) - _stored_size(lane_item(_lane(10)))) <= 16


def test_a_failover_lane_record_is_bounded_by_one_chunk_not_the_batch() -> None:
    # A lane fails in its third chunk after answering 600 of its 1,000 items there: the
    # successor excludes those 600 seqs, whatever the number of chunks after it
    candidate = PlanLane.from_rejected(
        {"lane_id": "groq/meta-llama/Llama-3.1-8B-Instruct", "provider": "groq"}
    )
    answered = set(range(2000, 2600))

    def successor(chunks: int) -> LaneRecord:
        return failover_record(
            _lane(chunks),
            candidate,
            chunk=2,
            chunk_first_ordinal=2000,
            answered=answered,
            root_number=1,
            at="t",
        )

    small, large = successor(10), successor(1000)
    assert lane_chunks(large) == list(range(2, 1000)) and lane_item(large)["chunk_ranges"] == [[2, 999]]
    assert abs(_stored_size(_all_done(large)) - _stored_size(_all_done(small))) <= 16


def test_a_lane_with_every_field_set_reads_back_from_its_dynamodb_item() -> None:
    job = SubmittedJob("job_1", 2, 40, "t1", seqs=(3, 9), lost_resubmits=1, more=True)
    lane = replace(
        _lane(3),
        status="running",
        chunks_started_n=2,
        chunks_done_n=1,
        usage=TokenUsage(900, 80, CacheTokens(cached_input_tokens=512, cache_write_input_tokens=64)),
        exclude_seqs=(4, 7),
        failover_from="01-p1-model-a",
        failover_depth=1,
        started_at="t0",
        latest_error="slow",
        fail_error=LaneFailError("provider_error", "no"),
        job=job,
        job_chunk=1,
        partial_chunk=0,
        handover_reason="deadline_rescue",
        then_lane="02-p2-model-a",
        cache_prefixes=("k1",),
        prefixes=PrefixFilter(only=False, keys=("k1", "k2")),
    )
    stored = from_item(to_item(lane_item(lane)))  # as DynamoDB gives it back: numbers Decimal
    assert stored["usage"] == {
        "prompt_tokens": 900,
        "completion_tokens": 80,
        "cached_input_tokens": 512,
        "cache_write_input_tokens": 64,
    }
    assert stored["prefixes"] == {"except": ["k1", "k2"]} and "cache" not in stored
    assert lane_from_item(stored) == lane
    assert lane_from_item(from_item(to_item(lane_item(_lane(1))))) == _lane(1)  # nothing unset written


@pytest.mark.parametrize("state", ["running", "canceled"])
def test_a_chunk_is_in_flight_once_its_lane_started_it_not_before(state: str) -> None:
    # Given a running lane holding chunks 0 and 1 that has started chunk 0 only (the batch's
    # counts moved chunk 0's items from pending to running, chunk 1's are still pending)
    lane = replace(
        plan_lanes(plan_groups(PLAN), CHUNK_MODELS, at="t")[0], status="running", chunks_started_n=1
    )
    batch = BatchRecord(batch_id="batch_1", org_id="org_1", state=state, created_at="t")  # type: ignore[arg-type]
    # Then the items listing shows chunk 0's items processing and chunk 1's pending, as the
    # counts do, whether or not the batch is still running
    assert chunk_in_flight(batch, [lane], 0) is True
    assert chunk_in_flight(batch, [lane], 1) is False
    # and nothing once Finalize wrote the results
    done = replace(batch, artifacts=ArtifactKeys(results_key="r"))
    assert chunk_in_flight(done, [lane], 0) is False


def test_a_handover_keeps_to_the_policy_for_the_operations_the_groups_items_run() -> None:
    # Given a vision-capable model's group whose items all run `responses`, its next lane
    # outranked, and a policy that caps only `vision` prices below that lane's
    catalog = builtin_catalog()
    model = next(m for m in catalog.models if {"responses", "vision"} <= set(m.operations))
    lanes = sorted(catalog.lanes_for(model.id), key=lambda lane: lane.lane_id)
    assert lanes
    group = {
        "model": model.id,
        "item_count": 1,
        "selected_lanes": [],
        "rejected_lanes": [
            {**_rejected(lane.provider, model.id, "outranked", "0.01"), "lane_id": lane.lane_id}
            for lane in lanes
        ],
    }
    cap = {"vision": PriceCap(input=Decimal("0"), output=Decimal("0"))}  # every lane is over it
    policy = RoutePolicy(org_id="org_1", max_price_per_million_tokens=cap)

    def handed(operations: list[str] | None) -> list[str]:
        plan = {"groups": [{**group, **({"operations": operations} if operations is not None else {})}]}
        return [c.lane_id for c, _ in handover_lanes(plan_groups(plan), model.id, [], catalog, policy)]

    # Then a group of `responses` items may go to any of them (the cap is on vision)
    assert handed(["responses"]) == [lane.lane_id for lane in lanes]
    # a group with vision items to none, and a plan stored before it kept its operations is
    # judged on every operation of the model: none either
    assert handed(["responses", "vision"]) == [] and handed(None) == []
