"""The items the benches upload: deterministic JSONL support tickets, the same bytes on every
run and every commit, so two measurements differ only by the code under test.

- `pipeline_items` (bench/pipeline.py): 60% an open-weight model served by sync hosts, 25%
  gpt-4o-mini and 15% claude-3-5-haiku (vendor batch APIs), so every 1,000-item chunk is run by
  three lanes; the user message is random words from `WORDS` (seeded).
- `quote_items` (bench/quote.py): the same mix of models, with some items needing a tool or
  asking for a JSON schema (what preflight checks); the user message is cut from a seeded
  text pool of `QUOTE_WORDS`.

Either fills each line to about `item_bytes`. `write_jsonl` streams the items to a file, never
holding it whole.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

LLAMA = "meta-llama/Llama-3.3-70B-Instruct"  # open weight: together, groq, fireworks, deepinfra, edge-*
GPT = "gpt-4o-mini"  # OpenAI Batch API
HAIKU = "claude-3-5-haiku"  # Anthropic Message Batches API

WORDS = (
    "invoice",
    "order",
    "refund",
    "shipment",
    "delayed",
    "customer",
    "account",
    "password",
    "reset",
    "billing",
    "charge",
    "subscription",
    "renewal",
    "cancel",
    "upgrade",
    "plan",
    "printer",
    "laptop",
    "screen",
    "battery",
    "warranty",
    "return",
    "label",
    "carrier",
    "tracking",
    "number",
    "address",
    "payment",
    "card",
    "declined",
    "bank",
    "transfer",
    "receipt",
    "tax",
    "quarterly",
    "report",
    "revenue",
    "margin",
    "forecast",
    "churn",
    "retention",
    "onboarding",
    "ticket",
    "escalation",
    "priority",
    "urgent",
)
QUOTE_WORDS = (
    *WORDS,
    "please",
    "help",
    "thanks",
    "regards",
    "support",
    "agent",
    "manager",
    "team",
    "deadline",
    "friday",
)
_QUOTE_SYSTEM = (
    "You are a support assistant. Classify the ticket, summarize it in two sentences and "
    "propose the next action. Be concise and do not invent facts."
)
_TICKET_SCHEMA = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "enum": ["billing", "shipping", "account", "hardware", "other"]},
        "summary": {"type": "string"},
        "next_action": {"type": "string"},
    },
    "required": ["category", "summary", "next_action"],
    "additionalProperties": False,
}
_POOL_BYTES = 2 * 1024 * 1024


def _dumps(body: dict[str, Any]) -> str:
    return json.dumps(body, separators=(",", ":"))


def _room(body: dict[str, Any], item_bytes: int) -> int:
    """Characters of user message that bring `body`'s JSON line to ~`item_bytes`."""
    return max(16, item_bytes - len(_dumps(body)) - 1)


def _draw_words(rng: random.Random, vocabulary: tuple[str, ...], size: int) -> list[str]:
    """Words drawn from `vocabulary` until they fill `size` characters, a space after each."""
    words: list[str] = []
    total = 0
    while total < size:
        word = rng.choice(vocabulary)
        words.append(word)
        total += len(word) + 1
    return words


def write_jsonl(path: Path, items: Iterable[dict[str, Any]]) -> int:
    """The JSONL file, written as it is generated (never held whole); its size in bytes."""
    with path.open("wb") as out:
        for body in items:
            out.write(_dumps(body).encode() + b"\n")
    return path.stat().st_size


# -- the pipeline's items ----------------------------------------------------------------------


def pipeline_item(index: int, rng: random.Random, item_bytes: int) -> dict[str, Any]:
    """Item `index`: 60% an open-weight model (sync lanes), 25% gpt-4o-mini and 15%
    claude-3-5-haiku (vendor batch APIs); the user message fills the line to ~`item_bytes`."""
    slot = index % 20
    model = LLAMA if slot < 12 else GPT if slot < 17 else HAIKU
    body: dict[str, Any] = {
        "customer_item_id": f"ticket-{index:07d}",
        "operation": "responses",
        "model": model,
        "input": {
            "messages": [
                {"role": "system", "content": "Classify the ticket and propose the next action."},
                {"role": "user", "content": ""},
            ]
        },
        "max_output_tokens": 128,
    }
    room = _room(body, item_bytes)
    body["input"]["messages"][1]["content"] = " ".join(_draw_words(rng, WORDS, room))[:room]
    return body


def pipeline_items(count: int, item_bytes: int) -> Iterator[dict[str, Any]]:
    rng = random.Random(5)
    for index in range(count):
        yield pipeline_item(index, rng, item_bytes)


# -- the quote's items -------------------------------------------------------------------------


def text_pool(seed: int, size: int = _POOL_BYTES) -> str:
    return " ".join(_draw_words(random.Random(seed), QUOTE_WORDS, size))


def quote_item(index: int, pool: str, item_bytes: int) -> dict[str, Any]:
    """Item `index`, deterministic: 60% the open-weight model, 25% gpt-4o-mini (a quarter of
    those need web_search, a third ask for a JSON schema), 15% claude-3-5-haiku (a fifth need
    python_execution). The user message is filled so the JSON line is ~`item_bytes`."""
    slot, cycle = index % 20, index // 20
    body: dict[str, Any] = {
        "customer_item_id": f"ticket-{index:07d}",
        "operation": "responses",
        "model": LLAMA,
        "input": {
            "messages": [{"role": "system", "content": _QUOTE_SYSTEM}, {"role": "user", "content": ""}],
            "temperature": 0.2,
        },
        "max_output_tokens": 256 + (index % 4) * 64,
    }
    if 12 <= slot < 17:
        body["model"] = GPT
        if cycle % 4 == 0:
            body["required_tools"] = ["web_search"]
        if index % 3 == 0:
            body["input"]["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "ticket", "schema": _TICKET_SCHEMA},
            }
    elif slot >= 17:
        body["model"] = HAIKU
        if cycle % 5 == 0:
            body["required_tools"] = ["python_execution"]
    room = _room(body, item_bytes)
    start = (index * 7919) % (len(pool) - room)
    body["input"]["messages"][1]["content"] = pool[start : start + room]
    return body


def quote_items(count: int, item_bytes: int) -> Iterator[dict[str, Any]]:
    pool = text_pool(seed=4)
    for index in range(count):
        yield quote_item(index, pool, item_bytes)
