"""The real provider adapters under the local stack, as `make run` starts it: every lane goes
over HTTP through the adapter production uses, to the vendor emulators (docs/emulators.md).

One mixed batch runs lanes through the OpenAI Batch API, Anthropic Message Batches and an
OpenAI-compatible sync host (the edge pool), with one vendor 429 and one connection reset
halfway through an answer; results, usage and the receipt are checked. Direct chat streams
through each adapter, and fails over to the next lane when a provider errs before the
first byte; a batch lane whose vendor is down fails over to the next vendor's."""

from __future__ import annotations

import time
import uuid
from decimal import Decimal
from typing import Any

import httpx
import pytest

MINI = "gpt-4o-mini"
HAIKU = "claude-3-5-haiku"
LLAMA = "meta-llama/Llama-3.3-70B-Instruct"
FLASH = "gemini-2.0-flash"
TIMEOUT_SECONDS = 60


def _key(api: httpx.Client) -> dict[str, str]:
    created = api.post(
        "/v1/auth/agent-register",
        json={"email": f"providers-{uuid.uuid4().hex[:10]}@example.com", "password": "correct horse battery"},
    )
    assert created.status_code == 200, created.text
    return {"Authorization": f"Bearer {created.json()['api_key']}"}


def _finished(api: httpx.Client, key: dict[str, str], batch_id: str) -> dict[str, Any]:
    """The batch once completed or failed (within TIMEOUT_SECONDS)."""
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while (batch := api.get(f"/v1/batches/{batch_id}", headers=key).json()["batch"])["state"] not in (
        "completed",
        "failed",
    ):
        assert time.monotonic() < deadline, batch
        time.sleep(0.5)
    return batch


def _item(n: int, model: str, text: str) -> dict[str, Any]:
    return {
        "customer_item_id": f"item-{n}",
        "operation": "responses",
        "model": model,
        "input": {"messages": [{"role": "user", "content": text}]},
        "max_output_tokens": 64,
    }


def test_a_mixed_batch_runs_through_three_vendor_adapters(api: httpx.Client) -> None:
    key = _key(api)
    # Given three items per adapter: OpenAI's Batch API (one answered 429 the first time),
    # Anthropic's Message Batches, and the edge pool's OpenAI-compatible server (one reset
    # halfway through its answer the first time)
    texts = {
        MINI: ["Summarize A.", "Summarize B. [simulate:429]", "Summarize C."],
        HAIKU: ["Classify A.", "Classify B.", "Classify C."],
        LLAMA: ["Translate A.", "Translate B. [simulate:reset]", "Translate C."],
    }
    items = [_item(n, model, text) for n, (model, text) in enumerate((m, t) for m in texts for t in texts[m])]
    created = api.post(
        "/v1/batches",
        json={"items": items},
        headers={**key, "Idempotency-Key": f"providers-{uuid.uuid4().hex}"},
    )
    assert created.status_code == 202, created.text
    batch_id = created.json()["batch"]["id"]

    # When it runs
    batch = _finished(api, key, batch_id)

    # Then every item completed, in input order
    assert batch["state"] == "completed" and batch["counts"]["completed"] == 9, batch
    rows = api.get(f"/v1/batches/{batch_id}/results", params={"body_format": "raw"}, headers=key).json()[
        "data"
    ]
    assert [r["customer_item_id"] for r in rows] == [f"item-{n}" for n in range(9)]
    assert all(r["status"] == "completed" and r["error"] is None for r in rows)
    # And each answer is its vendor's own body, as the adapter of the lane's vendor received
    # it, naming the vendor's model id the adapter sent
    raw = {
        model: [rows[n]["output"] for n in range(len(rows)) if items[n]["model"] == model] for model in texts
    }
    assert {(b["object"], b["model"]) for b in raw[MINI]} == {("chat.completion", "gpt-4o-mini-2024-07-18")}
    assert {(b["type"], b["model"]) for b in raw[HAIKU]} == {("message", "claude-3-5-haiku-20241022")}
    assert {(b["object"], b["model"]) for b in raw[LLAMA]} == {
        ("chat.completion", "llama-3.3-70b-instruct-awq")
    }
    assert all(
        b["choices"][0]["message"]["content"].startswith("Simulated answer from edge-eu/") for b in raw[LLAMA]
    )
    # And each lane ran on its vendor, with the usage the vendors reported
    lanes = {
        lane["model"]: lane
        for lane in api.get(
            f"/v1/batches/{batch_id}", params={"include_billing_receipt": "true"}, headers=key
        ).json()["batch"]["lane_statuses"]
    }
    assert {model: lanes[model]["provider"] for model in texts} == {
        MINI: "openai",
        HAIKU: "anthropic",
        LLAMA: "edge-eu",
    }
    reported = {
        MINI: sum(b["usage"]["completion_tokens"] for b in raw[MINI]),
        HAIKU: sum(b["usage"]["output_tokens"] for b in raw[HAIKU]),
        LLAMA: sum(b["usage"]["completion_tokens"] for b in raw[LLAMA]),
    }
    assert {model: lanes[model]["usage"]["completion_tokens"] for model in texts} == reported
    # And the receipt charges those lanes, and balances
    bill = api.get(f"/v1/batches/{batch_id}/billing-receipt", headers=key).json()
    reserved, charged, released = (
        Decimal(bill[k]["amount"]) for k in ("credit_reserved", "credit_charged", "credit_released")
    )
    assert reserved == charged + released and charged > 0
    assert {lane["model"] for lane in bill["provider_lanes"]} == {MINI, HAIKU, LLAMA}


def test_a_batch_lane_whose_vendor_is_down_fails_over_to_the_next_vendor(api: httpx.Client) -> None:
    key = _key(api)
    # Given Claude items quoted on Anthropic's Message Batches, whose create finds Anthropic
    # down (the emulator drops it unanswered)
    items = [_item(n, HAIKU, f"Classify {n}. [simulate:down:anthropic]") for n in range(2)]
    created = api.post(
        "/v1/batches", json={"items": items}, headers={**key, "Idempotency-Key": f"down-{uuid.uuid4().hex}"}
    )
    assert created.status_code == 202, created.text
    batch_id = created.json()["batch"]["id"]
    # When it runs / Then the lane fails over to Bedrock's, which answers every item
    batch = _finished(api, key, batch_id)
    assert batch["state"] == "completed" and batch["counts"]["completed"] == 2, batch
    lanes = api.get(
        f"/v1/batches/{batch_id}", params={"include_billing_receipt": "true"}, headers=key
    ).json()["batch"]["lane_statuses"]
    assert {(lane["provider"], lane["status"]) for lane in lanes} == {
        ("anthropic", "failed"),
        ("bedrock", "completed"),
    }


@pytest.mark.parametrize(
    ("model", "provider"),
    [(MINI, "openai"), (HAIKU, "anthropic"), (FLASH, "google"), (LLAMA, "edge-eu")],
)
def test_direct_chat_streams_through_each_adapter(api: httpx.Client, model: str, provider: str) -> None:
    key = _key(api)
    body = {
        "model": model,
        "max_tokens": 12,
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "Say hello"}],
    }
    with api.stream("POST", "/v1/chat/completions", json=body, headers=key) as answer:
        assert answer.status_code == 200
        assert answer.headers["x-service-provider"] == provider
        events = [line[6:] for line in answer.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and len(events) > 3
    assert '"usage"' in events[-2]


@pytest.mark.parametrize(("model", "failing"), [(HAIKU, "anthropic"), (LLAMA, "edge-eu")])
def test_direct_chat_fails_over_before_the_first_byte(api: httpx.Client, model: str, failing: str) -> None:
    key = _key(api)
    body = {
        "model": model,
        "max_tokens": 8,
        "stream": True,
        "messages": [{"role": "user", "content": f"Say hello [simulate:5xx:{failing}]"}],
    }
    with api.stream("POST", "/v1/chat/completions", json=body, headers=key) as answer:
        assert answer.status_code == 200
        assert answer.headers["x-service-provider"] != failing
        lines = list(answer.iter_lines())
    assert lines[-1] == "data: [DONE]" or "data: [DONE]" in lines
    whole = api.post(
        "/v1/chat/completions",
        json={
            "model": model,
            "max_tokens": 8,
            "messages": [{"role": "user", "content": f"Hi [simulate:down:{failing}]"}],
        },
        headers=key,
    )
    assert whole.status_code == 200, whole.text
    assert whole.json()["provider"] != failing


def test_direct_chat_without_max_tokens_asks_no_lane_for_more_than_its_window_leaves(
    api: httpx.Client,
) -> None:
    # Given a ~25k-token prompt to a 32,768-token model and no max_tokens: its lanes write up to
    # 16,384 tokens, and the hosts (their emulators as they do) refuse prompt + max_tokens
    # past the window with 400 context_length_exceeded, which no lane fails over from
    body = {"model": "Qwen/Qwen2.5-72B-Instruct", "messages": [{"role": "user", "content": "word " * 15_000}]}
    answer = api.post("/v1/chat/completions", json=body, headers=_key(api))
    # Then the cheapest lane answers, asked only for what fits beside the prompt
    assert answer.status_code == 200, answer.text
    assert answer.json()["provider"] == "deepinfra"


def test_hosted_tools_and_tool_histories_run_where_the_catalog_promises_them(api: httpx.Client) -> None:
    key = _key(api)
    # Given items with hosted tools on three vendors, a plain item with a stop sequence beside a
    # hosted-tool item on OpenAI (one chunk, two APIs), and a Responses-style tool history
    weather = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    inputs: list[tuple[str, dict[str, Any]]] = [
        (MINI, {"input": "Latest news?", "tools": [{"type": "web_search_preview"}]}),
        (MINI, {"messages": [{"role": "user", "content": "Count to ten."}], "stop": ["five"]}),
        (
            "claude-sonnet-4",
            {"messages": [{"role": "user", "content": "Latest news?"}], "tools": [{"type": "web_search"}]},
        ),
        (
            FLASH,
            {
                "messages": [{"role": "user", "content": "Compute 2**10."}],
                "tools": [{"type": "code_interpreter"}],
            },
        ),
        (
            HAIKU,
            {
                "input": [
                    {"role": "user", "content": "Weather in Paris?"},
                    {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
                ],
                "tools": [weather],
            },
        ),
    ]
    items = [
        {"customer_item_id": f"item-{n}", "operation": "responses", "model": model, "input": payload}
        for n, (model, payload) in enumerate(inputs)
    ]
    created = api.post(
        "/v1/batches", json={"items": items}, headers={**key, "Idempotency-Key": f"tools-{uuid.uuid4().hex}"}
    )
    assert created.status_code == 202, created.text
    batch_id = created.json()["batch"]["id"]

    # When it runs
    batch = _finished(api, key, batch_id)

    # Then every item completed on the vendor that runs its tools, as that vendor answers
    assert batch["state"] == "completed" and batch["counts"]["completed"] == len(items), batch
    rows = api.get(f"/v1/batches/{batch_id}/results", params={"body_format": "raw"}, headers=key).json()[
        "data"
    ]
    raw = [row["output"] for row in rows]
    assert raw[0]["object"] == "response" and any(o["type"] == "web_search_call" for o in raw[0]["output"])
    assert raw[1]["object"] == "chat.completion"  # no hosted tool: Chat Completions, where stop works
    assert raw[2]["usage"]["server_tool_use"]["web_search_requests"] >= 1
    parts = raw[3]["candidates"][0]["content"]["parts"]
    assert any("executableCode" in part for part in parts)
    assert raw[4]["type"] == "message"  # the tool call and its result reached Anthropic as such
