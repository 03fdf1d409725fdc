"""OpenAI refuses an embeddings request whose inputs sum past 300,000 tokens, however small
each input is; text-embedding-3-small runs only on OpenAI, so a quote (inline items, or an
input file) with such an item is refused 400 at preflight, naming the item, instead of
priced and accepted onto a lane the vendor then refuses."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from batchroute.catalog import builtin_catalog
from tests.integration.principals import TestOrg
from tests.integration.test_quotes import client as client  # the fixtures: the API, an org with credit
from tests.integration.test_quotes import org as org

EMBEDDER = "text-embedding-3-small"


def _embedding(n: int, inputs: list[str]) -> dict[str, Any]:
    return {
        "customer_item_id": f"emb-{n}",
        "operation": "embeddings",
        "model": EMBEDDER,
        "input": {"input": inputs},
    }


# 100 inputs of 3,203 tokens each (under the model's 8,191): 320,003 tokens in all, in a
# line under 1 MiB. And a short item beside it.
OVER = ["word " * 1_920] * 100
SHORT = ["a short review", "another one"]


def _errors(answer: Any) -> list[tuple[str, str, int | None]]:
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "batch_preflight_failed"
    found = error["details"]["preflight"]["errors"]
    assert all(e["details"] == {"needed_tokens": 320_003, "request_token_limit": 300_000} for e in found)
    return [(e["code"], e["path"], e.get("line")) for e in found]


def test_only_openai_serves_the_model() -> None:
    assert {lane.provider for lane in builtin_catalog().lanes_for(EMBEDDER)} == {"openai"}


def test_a_quote_with_an_embeddings_item_over_300000_tokens_is_refused_at_preflight(
    client: TestClient, org: TestOrg
) -> None:
    # Given items of text-embedding-3-small, the second summing past OpenAI's 300,000 tokens
    body = {"items": [_embedding(0, SHORT), _embedding(1, OVER)]}
    # When quoted
    answer = client.post("/v1/quotes/model", json=body, headers=org.key_headers())
    # Then 400, naming the item
    assert _errors(answer) == [("preflight_context_window_exceeded", "items[1].input", None)]
    # And without it the batch is quoted
    fine = client.post("/v1/quotes/model", json={"items": [_embedding(0, SHORT)]}, headers=org.key_headers())
    assert fine.status_code == 200, fine.text


def test_an_input_file_with_such_an_item_is_refused_with_its_line(client: TestClient, org: TestOrg) -> None:
    # Given an uploaded file whose third line sums past 300,000 tokens
    lines = [_embedding(0, SHORT), _embedding(1, SHORT), _embedding(2, OVER)]
    content = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    assert len(json.dumps(lines[2])) < 1024 * 1024
    uploaded = client.post(
        "/v1/files", content=content, headers={**org.key_headers(), "Content-Type": "application/jsonl"}
    )
    assert uploaded.status_code == 201, uploaded.text
    file_id = uploaded.json()["file"]["id"]
    # When quoted, and when a batch is created over it without a quote
    quoted = client.post("/v1/quotes/model", json={"input_file_id": file_id}, headers=org.key_headers())
    created = client.post(
        "/v1/batches",
        json={"input_file_id": file_id},
        headers={**org.key_headers(), "Idempotency-Key": "emb-over-300k"},
    )
    # Then both are refused, naming the item and its line
    expected = [("preflight_context_window_exceeded", "items[2].input", 3)]
    assert _errors(quoted) == expected
    assert _errors(created) == expected
