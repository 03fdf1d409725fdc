"""The emulators' prompt cache (emulators/cache.py): deterministic by the injected clock,
never more cached than the prompt, bounded in memory, and the vendors' rules."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchroute_tools.emulators.behaviour import prompt_tokens
from batchroute_tools.emulators.cache import (
    OPENAI_CACHE,
    Breakpoint,
    CacheRule,
    PromptCache,
    anthropic_minimum,
    digest,
    gemini_rule,
)

WORDS = st.text(alphabet="abcdefgh ", min_size=1, max_size=3000)
MESSAGES = st.lists(
    st.builds(lambda role, text: {"role": role, "content": text}, st.sampled_from(["system", "user"]), WORDS),
    min_size=1,
    max_size=4,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@settings(max_examples=60, deadline=None)
@given(first=MESSAGES, second=MESSAGES, gap=st.floats(min_value=0, max_value=900))
def test_openai_reads_never_exceed_the_prompt_and_come_in_128_token_steps(
    first: list[dict[str, Any]], second: list[dict[str, Any]], gap: float
) -> None:
    clock = Clock()
    cache = PromptCache(clock)
    assert cache.automatic("openai\nm", first, OPENAI_CACHE) == 0  # nothing seen yet
    clock.now += gap
    read = cache.automatic("openai\nm", first + second, OPENAI_CACHE)
    assert read % 128 == 0 and read <= prompt_tokens(first + second)
    assert read == 0 or (read >= 1024 and gap < OPENAI_CACHE.lifetime)
    if gap < OPENAI_CACHE.lifetime and prompt_tokens(first) >= 1024:
        assert read == prompt_tokens(first) // 128 * 128


@settings(max_examples=40, deadline=None)
@given(prompts=st.lists(MESSAGES, min_size=1, max_size=30), limit=st.integers(min_value=1, max_value=8))
def test_the_cache_holds_at_most_its_limit_of_digests(
    prompts: list[list[dict[str, Any]]], limit: int
) -> None:
    cache = PromptCache(Clock(), limit=limit)
    rule = CacheRule(minimum=1, lifetime=60.0)
    for messages in prompts:
        cache.automatic("s", messages, rule)
        assert len(cache) <= limit


def test_marked_reads_the_longest_live_breakpoint_and_writes_the_rest() -> None:
    clock = Clock()
    cache = PromptCache(clock)
    system = {"role": "system", "content": "x" * 6000}
    long = (system, {"role": "user", "content": "y" * 6000})
    marks = [Breakpoint((system,), 300.0), Breakpoint(long, 300.0)]
    written = cache.marked("s", marks[:1], 1024)
    assert written.read == 0 and written.written == prompt_tokens([system])
    both = cache.marked("s", marks, 1024)
    assert both.read == prompt_tokens([system]) and both.read + both.written == prompt_tokens(long)
    clock.now += 299.0
    assert cache.marked("s", marks, 1024).read == prompt_tokens(long)
    clock.now += 300.0
    assert cache.marked("s", marks, 1024).read == 0
    assert cache.marked("other scope", marks, 1024).read == 0


def test_a_prefix_is_keyed_by_content_not_by_its_cache_markers() -> None:
    plain = ({"role": "system", "content": [{"type": "text", "text": "a"}]},)
    marked = (
        {
            "role": "system",
            "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}],
        },
    )
    assert digest("s", plain) == digest("s", marked) != digest("t", plain)


def test_the_vendors_minimums() -> None:
    assert anthropic_minimum("claude-sonnet-4-20250514") == 1024
    assert anthropic_minimum("claude-3-5-haiku-20241022") == 2048
    assert anthropic_minimum("anthropic.claude-3-5-haiku-20241022-v1:0") == 2048
    assert anthropic_minimum("claude-haiku-4-5") == 4096
    assert gemini_rule("gemini-2.0-flash-001") is None and gemini_rule("gemini-1.5-flash-002") is None
    assert gemini_rule("gemini-2.5-flash") == CacheRule(minimum=2048, lifetime=300.0)
    rule = gemini_rule("gemini-3-pro-preview")
    assert rule is not None and rule.minimum == 4096
