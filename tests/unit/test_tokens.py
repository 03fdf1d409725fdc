"""The conservative token estimate: bytes / 3 plus chat overheads, fixed per image."""

from __future__ import annotations

import base64
import math

from hypothesis import given
from hypothesis import strategies as st

from batchroute.domain.catalog.tokens import (
    BYTES_PER_TOKEN,
    DEFAULT_OUTPUT_TOKENS,
    TOKENS_PER_IMAGE,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_REQUEST,
    output_tokens,
    prompt_tokens,
    utf8_len,
    value_bytes,
)
from batchroute.domain.routing.items import read_item
from tests.unit.catalog_fixtures import item


def estimate(body: dict[str, object]) -> int:
    facts, problems = read_item(body)
    assert facts is not None, problems
    return facts.prompt_tokens


def chat(*contents: object, **extra: object) -> dict[str, object]:
    messages = [{"role": "user", "content": c} for c in contents]
    return item(0, input={"messages": messages, **extra})


def test_the_constants_are_the_documented_ones() -> None:
    assert (BYTES_PER_TOKEN, TOKENS_PER_MESSAGE, TOKENS_PER_REQUEST, TOKENS_PER_IMAGE) == (3, 4, 3, 1600)
    assert DEFAULT_OUTPUT_TOKENS == 1024


def test_utf8_length_counts_bytes_not_characters() -> None:
    assert utf8_len("hello") == 5
    assert utf8_len("héllo") == 6
    assert utf8_len("日本語") == 9
    assert utf8_len("🙂") == 4
    # A lone surrogate is valid in a JSON escape and must not crash the estimate
    assert utf8_len("\ud800") == 3


def test_one_message_is_bytes_over_three_plus_the_chat_overheads() -> None:
    # Given a one-message chat of 11 ASCII bytes
    # When estimated / Then ceil(11/3) + 4 per message + 3 per request
    assert estimate(chat("hello world")) == 4 + 4 + 3
    assert prompt_tokens(text_bytes=11, messages=1, images=0) == 11


def test_every_message_adds_its_overhead() -> None:
    assert estimate(chat("abc", "abc", "abc")) == 3 * (1 + TOKENS_PER_MESSAGE) + TOKENS_PER_REQUEST


def test_an_image_part_costs_a_fixed_amount_whatever_the_data_url_size() -> None:
    # Given two items with the same text, one also carrying a large base64 image
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 224_992).decode()  # 300,000 characters
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + png}}
    text_only = estimate(chat([{"type": "text", "text": "What is this?"}]))
    with_image = estimate(chat([{"type": "text", "text": "What is this?"}, image]))
    # Then the image adds exactly the fixed per-image cost: pixels, not bytes, are billed
    assert with_image - text_only == TOKENS_PER_IMAGE


def test_tool_definitions_and_schemas_count_as_prompt_text() -> None:
    # Given the same message with and without a function tool and an output schema
    bare = estimate(chat("hi"))
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}
    # Then both grow the estimate (providers put them in the prompt)
    assert estimate(chat("hi", tools=tools)) > bare
    assert estimate(chat("hi", response_format=fmt)) > bare


def test_responses_api_inputs_and_instructions_are_counted() -> None:
    as_string = item(0, input={"input": "hello world"})
    with_instructions = item(0, input={"input": "hello world", "instructions": "Be brief."})
    assert estimate(as_string) == 4 + 4 + 3
    assert estimate(with_instructions) == math.ceil(len("hello worldBe brief.") / 3) + 8 + 3


def test_embeddings_count_text_and_token_arrays_without_chat_overheads() -> None:
    def embed(value: object) -> dict[str, object]:
        return item(0, operation="embeddings", input={"input": value})

    assert estimate(embed("abcdef")) == 2 + TOKENS_PER_REQUEST
    assert estimate(embed(["abc", "abc"])) == 2 + TOKENS_PER_REQUEST
    # Token-id arrays count one token per id
    assert estimate(embed([[1, 2, 3], [4, 5]])) == TOKENS_PER_REQUEST + 5
    assert estimate(item(0, operation="embeddings", input={"text": "abcdef"})) == 2 + TOKENS_PER_REQUEST


def test_requested_output_defaults_by_operation_and_is_capped_by_the_lane() -> None:
    # Given items that do and do not say how much output they want
    def wanted(body: dict[str, object]) -> int:
        facts, _ = read_item(body)
        assert facts is not None
        return facts.output_tokens

    assert wanted(item(0)) == DEFAULT_OUTPUT_TOKENS
    assert wanted(item(0, max_output_tokens=50)) == 50
    assert wanted(item(0, input={"input": "x", "max_tokens": 70})) == 70
    assert wanted(item(0, operation="embeddings", input={"input": "x"})) == 0
    # Then a lane never produces more than its own limit
    assert output_tokens(50_000, 16_384) == 16_384
    assert output_tokens(100, 16_384) == 100


def test_free_form_values_are_walked_without_recursion() -> None:
    # Given a value nested far deeper than Python's recursion limit
    deep: object = "leaf"
    for _ in range(5_000):
        deep = [deep]
    # When measured / Then it is counted, not a RecursionError
    assert value_bytes(deep) == 4
    assert value_bytes({"key": ["ab", 12, None, True]}) == 3 + 2 + 2 + 4 + 4


@given(st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), min_size=1))
def test_cjk_text_is_never_under_counted(text: str) -> None:
    # CJK characters are 3 UTF-8 bytes and tokenize at about one token per character
    assert estimate(chat(text)) - TOKENS_PER_MESSAGE - TOKENS_PER_REQUEST >= len(text)


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1).filter(str.strip))
def test_english_like_text_is_over_counted_against_four_characters_a_token(text: str) -> None:
    assert estimate(chat(text)) - TOKENS_PER_MESSAGE - TOKENS_PER_REQUEST >= math.ceil(len(text) / 4)


@given(st.text(), st.text())
def test_more_text_never_lowers_the_estimate(first: str, more: str) -> None:
    first = "." + first  # a message is never blank (the preflight refuses blank text)
    assert estimate(chat(first + more)) >= estimate(chat(first))
