"""Reading one item: what the lane must offer (inferred tools and capabilities), and the
model group's bounds on capped output."""

from __future__ import annotations

from typing import Any

import pytest

from batchroute.domain.items import ItemFacts, ModelGroup, read_item
from tests.unit.catalog_fixtures import group_of, item


def facts_of(raw: dict[str, Any]) -> ItemFacts:
    facts, problems = read_item(raw)
    assert facts is not None, problems
    return facts


def chat_input(**extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "hi"}], **extra}


@pytest.mark.parametrize(
    ("tool", "hosted"),
    [
        ({"type": "web_search"}, "web_search"),
        ({"type": "web_search_preview"}, "web_search"),
        ({"type": "web_search_preview_2025_03_11"}, "web_search"),
        ({"type": "code_interpreter", "container": {"type": "auto"}}, "python_execution"),
        ({"type": "file_search", "vector_store_ids": ["vs_1"]}, "file_search"),
        ({"type": "retrieval"}, "retrieval"),
        ({"type": "time"}, "time"),
    ],
)
def test_hosted_tools_declared_in_the_input_are_inferred(tool: dict[str, Any], hosted: str) -> None:
    facts = facts_of(item(0, input=chat_input(tools=[tool])))
    assert facts.tools == frozenset({hosted})
    assert facts.capabilities == frozenset()


def test_tool_choice_names_a_tool_too() -> None:
    facts = facts_of(item(0, input=chat_input(tool_choice={"type": "web_search"})))
    assert facts.tools == frozenset({"web_search"})


def test_declared_and_inferred_tools_are_merged() -> None:
    raw = item(0, required_tools=["calculator"], input=chat_input(tools=[{"type": "web_search"}]))
    assert facts_of(raw).tools == frozenset({"calculator", "web_search"})


def test_function_tools_need_tool_calling_not_a_hosted_tool() -> None:
    function = {"type": "function", "function": {"name": "calculator", "parameters": {}}}
    facts = facts_of(item(0, input=chat_input(tools=[function])))
    assert (facts.tools, facts.capabilities) == (frozenset(), frozenset({"tool_calling"}))


def test_images_need_vision_except_on_the_vision_operation_itself() -> None:
    part = {"type": "input_image", "image_url": "https://example.com/a.png"}
    body = {"messages": [{"role": "user", "content": [{"type": "input_text", "text": "what?"}, part]}]}
    assert facts_of(item(0, input=body)).capabilities == frozenset({"vision"})
    assert facts_of(item(0, operation="vision", input=body)).capabilities == frozenset()


def test_responses_api_message_lists_and_tool_outputs_are_read() -> None:
    body = {
        "input": [
            {"role": "user", "content": "look this up"},
            {"type": "function_call_output", "call_id": "c1", "output": "42"},
        ]
    }
    facts = facts_of(item(0, input=body))
    assert facts.prompt_tokens > 0


def test_an_item_problem_list_is_complete() -> None:
    facts, problems = read_item({"operation": "nope", "input": [], "required_tools": [1]})
    assert facts is None
    assert [(p.code, p.field) for p in problems] == [
        ("missing_field", "customer_item_id"),
        ("missing_field", "model"),
        ("invalid_field", "operation"),
        ("invalid_field", "input"),
        ("invalid_field", "required_tools[0]"),
    ]


def test_a_group_bounds_output_capped_by_a_lane() -> None:
    # Given items asking 100 and 5,000 output tokens
    group = group_of([item(0, max_output_tokens=100), item(1, max_output_tokens=5_000)])
    # Then on a lane producing at most 10,000 the requests stand
    assert group.output_tokens_on(10_000) == 5_100
    # And on a lane producing at most 1,000 the estimate is bounded by count x cap
    assert group.output_tokens_on(1_000) == 2_000  # exact would be 1,100: never under
    assert group.output_tokens_on(50) == 100  # exact


def test_a_group_context_need_is_exact_when_no_item_exceeds_the_cap() -> None:
    group = group_of([item(0, text="x" * 3_000, max_output_tokens=10), item(1, max_output_tokens=900)])
    big_prompt = group.max_prompt_tokens
    assert group.context_tokens_on(1_000) == max(big_prompt + 10, group.max_item_tokens)
    assert group.context_tokens_on(5) == big_prompt + 5


def test_an_empty_group_has_no_demand() -> None:
    group = ModelGroup(model="m", first_index=0)
    assert (group.output_tokens_on(100), group.context_tokens_on(100), group.item_count) == (0, 0, 0)
