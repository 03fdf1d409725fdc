"""Hosted tool calls as usage keeps them (`ToolUses`): read from result lines, summed in the
lane tallies Finalize keeps and in the lane records the runner adds to, shown on receipts."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from batchroute.adapters.dynamo.lane_records import lane_from_item, lane_item
from batchroute.domain.billing.settlement import lane_usage, token_usage
from batchroute.domain.catalog.pricing import NO_TOOL_USES, TokenUsage, ToolUses
from batchroute.domain.routing.lane_plan import LaneRecord, new_lane_record
from batchroute.domain.workflow.results import LaneTally, MergeTally, ResultLine
from batchroute.providers.base import Usage

_TOOLS = st.sampled_from(["web_search", "python_execution", "file_search"])
_CALLS = st.lists(st.tuples(_TOOLS, st.integers(min_value=0, max_value=50)), max_size=6)


def _lane() -> LaneRecord:
    return new_lane_record(
        lane_key="01-a",
        lane_id="openai/gpt-4o-mini",
        provider="openai",
        model="gpt-4o-mini",
        ordinal_start=0,
        ordinal_end=2,
        chunks=[0],
        unit_prices={"input_per_mtok": "0.075", "output_per_mtok": "0.300"},
        at="2026-12-04T00:00:00Z",
    )


def _line(seq: int, status: str, tool_uses: dict[str, int] | None = None) -> ResultLine:
    usage: dict[str, object] = {"prompt_tokens": 10, "completion_tokens": 5}
    if tool_uses is not None:
        usage["tool_uses"] = tool_uses
    return {"seq": seq, "status": status, "lane_key": "01-a", "usage": usage}  # type: ignore[typeddict-item]


@given(_CALLS, _CALLS)
def test_calls_sum_by_tool_and_keep_only_tools_with_calls(first: list, second: list) -> None:
    summed = ToolUses.of(first) + ToolUses.of(second)
    expected: dict[str, int] = {}
    for name, count in [*first, *second]:
        expected[name] = expected.get(name, 0) + count
    assert dict(summed.calls) == {name: count for name, count in expected.items() if count}
    assert [name for name, _ in summed.calls] == sorted(dict(summed.calls))
    # both stored shapes read back the same calls
    assert ToolUses.from_usage(summed.to_usage()) == summed
    assert ToolUses.from_tally(summed.to_tally()) == summed


def test_no_calls_leave_no_key() -> None:
    assert NO_TOOL_USES.to_usage() == {} and NO_TOOL_USES.to_tally() == {}
    assert TokenUsage(3, 4).to_fields() == {"prompt_tokens": 3, "completion_tokens": 4}


def test_a_stored_count_that_is_no_whole_number_of_calls_counts_none() -> None:
    usage = {"tool_uses": {"web_search": Decimal(2), "a": True, "b": -1, "c": "3", "d": Decimal("1.5")}}
    assert ToolUses.from_usage(usage) == ToolUses((("web_search", 2),))  # type: ignore[arg-type]
    assert ToolUses.from_usage({"tool_uses": ["web_search"]}) == NO_TOOL_USES  # type: ignore[typeddict-item]


def test_a_lane_tally_counts_the_calls_of_completed_rows_only() -> None:
    tally = LaneTally()
    tally.add(_line(0, "completed", {"web_search": 2}))
    tally.add(_line(1, "failed", {"web_search": 7}))
    tally.add(_line(2, "completed", {"web_search": 1, "python_execution": 1}))
    tally.add(_line(3, "completed"))
    assert tally.usage.tool_uses == ToolUses((("python_execution", 1), ("web_search", 3)))
    stored = tally.to_dict()
    assert stored["tool_uses.web_search"] == 3 and stored["tool_uses.python_execution"] == 1
    assert LaneTally.from_dict(stored) == tally
    # and Finalize's cursor carries them between invocations
    merge = MergeTally()
    merge.add(_line(0, "completed", {"web_search": 2}))
    assert MergeTally.from_dict(merge.to_dict()).lanes["01-a"].usage.tool_uses == ToolUses(
        (("web_search", 2),)
    )


def test_the_receipt_shows_a_lanes_calls_beside_its_tokens() -> None:
    lane = _lane()
    tally = {"completed": 2, "prompt_tokens": 20, "completion_tokens": 10, "tool_uses.web_search": 3}
    assert token_usage(lane_usage(lane, tally)) == {
        "prompt_tokens": 20,
        "completion_tokens": 10,
        "tool_uses": {"web_search": 3},
    }


def test_a_lane_record_keeps_its_calls_in_its_flat_usage_map() -> None:
    lane = _lane()
    used = replace(lane, usage=TokenUsage(prompt_tokens=5, tool_uses=ToolUses((("web_search", 4),))))
    item = lane_item(used)
    assert item["usage"] == {"prompt_tokens": 5, "completion_tokens": 0, "tool_uses.web_search": 4}
    assert lane_from_item({**item, "usage": {k: Decimal(v) for k, v in item["usage"].items()}}) == used
    assert used.usage.to_fields() == {
        "prompt_tokens": 5,
        "completion_tokens": 0,
        "tool_uses": {"web_search": 4},
    }


def test_a_providers_usage_sums_calls_by_tool() -> None:
    total = Usage(1, 1, (("web_search", 1),)) + Usage(2, 2, (("python_execution", 1), ("web_search", 2)))
    assert total.tool_uses == (("python_execution", 1), ("web_search", 3))
