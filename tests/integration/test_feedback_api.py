"""Feedback over HTTP on moto (docs/feedback.md): on a batch item of a batch run to its end by
the workflow, on a direct and a queued chat completion; one per target and author, updatable;
the model and provider recorded from what served the target; the batch item view; the
summary from counters; validation with field paths, another org, roles."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.config import get_settings
from batchroute.providers import simulated
from batchroute_tools.local.provision import LocalStack
from tests.integration.batch_pipeline_support import (
    LLAMA,
    item,
    run_until_done,
)
from tests.integration.principals import TestOrg, new_org
from tests.integration.principals import org as org  # the fixtures
from tests.integration.principals import pipeline_client as pipeline_client
from tests.integration.principals import pipeline_stack as pipeline_stack

PATH = "/v1/feedback"


@pytest.fixture
def finished(client: TestClient, org: TestOrg, stack: LocalStack) -> str:
    """A batch of three items run to its end; item-1 fails."""
    created = client.post(
        "/v1/batches",
        json={"items": [item(0), item(1, text="[simulate:fail] please"), item(2)]},
        headers={**org.key_headers(), "Idempotency-Key": "fb-batch-0001"},
    )
    assert created.status_code == 202, created.text
    batch_id = str(created.json()["batch"]["id"])
    record = BatchRecords(get_settings().table_name("batches")).get(batch_id)
    assert record is not None and record.execution_arn
    run_until_done(stack, record.execution_arn, budget_seconds=60)
    return batch_id


def _item_target(batch_id: str, item_id: str) -> dict[str, Any]:
    return {"type": "batch_item", "batch_id": batch_id, "customer_item_id": item_id}


def _give(client: TestClient, headers: dict[str, str], body: dict[str, Any]) -> Any:
    return client.post(PATH, json=body, headers=headers)


def _error(response: Any) -> tuple[int, str, Any]:
    error = response.json()["error"]
    return response.status_code, error["code"], (error.get("details") or {}).get("field")


def test_feedback_on_batch_items_is_kept_per_author_shown_on_the_item_and_summarized(
    client: TestClient, org: TestOrg, finished: str
) -> None:
    alice = org.session_headers("member")
    bob = org.session_headers("admin")
    results = client.get(f"/v1/batches/{finished}/results?body_format=raw", headers=alice).json()["data"]
    assert [r["status"] for r in results] == ["completed", "failed", "completed"]
    # When a member rates item-0 thumbs down with labels
    given = _give(
        client,
        alice,
        {
            "target": _item_target(finished, "item-0"),
            "rating": -1,
            "comment": "wrong date",
            "labels": ["wrong_format"],
        },
    )
    # Then it is created with the model and provider that served the item
    assert given.status_code == 201, given.text
    first = given.json()
    items = client.get(f"/v1/batches/{finished}/items", headers=alice).json()["data"]
    served = next(i for i in items if i["customer_item_id"] == "item-0")
    assert (
        first["id"].startswith("fb_") and first["model"] == LLAMA and first["provider"] == served["provider"]
    )
    assert first["target"] == _item_target(finished, "item-0") and first["labels"] == ["wrong_format"]
    # When the same author sends it again, it changes (200, same id); another author adds their own
    again = _give(
        client, alice, {"target": _item_target(finished, "item-0"), "rating": 1, "labels": ["good"]}
    )
    assert again.status_code == 200 and again.json()["id"] == first["id"] and again.json()["rating"] == 1
    stars = {
        "target": _item_target(finished, "item-2"),
        "rating": 4,
        "rating_scale": "stars",
        "labels": ["good"],
    }
    assert _give(client, bob, stars).status_code == 201
    assert _give(client, bob, {**stars, "rating": 2}).status_code == 200
    # And a failed item's result may be rated too
    assert _give(client, bob, {"target": _item_target(finished, "item-1"), "rating": -1}).status_code == 201
    # Then the item view shows each item's feedback
    items = client.get(f"/v1/batches/{finished}/items", headers=org.key_headers("billing")).json()["data"]
    by_id = {i["customer_item_id"]: i["feedback"] for i in items}
    assert [f["rating"] for f in by_id["item-0"]] == [1] and by_id["item-0"][0]["comment"] is None
    assert [(f["rating"], f["rating_scale"]) for f in by_id["item-2"]] == [(2, "stars")]
    assert [f["rating"] for f in by_id["item-1"]] == [-1]
    # And the summary counts the current feedback only (the changes moved the counters)
    summary = client.get(f"{PATH}/summary?period=daily", headers=org.key_headers("billing")).json()
    assert summary["total"] == {
        "count": 3,
        "thumbs": {"up": 1, "down": 1},
        "stars": {"count": 1, "mean": "2.00"},
        "top_labels": [{"label": "good", "count": 2}],
    }
    assert sum(row["count"] for row in summary["by_model_provider"]) == 3
    assert {row["model"] for row in summary["by_model_provider"]} == {LLAMA}
    unserved = [row for row in summary["by_model_provider"] if row["provider"] == "unserved"]
    assert [(row["count"], row["thumbs"]) for row in unserved] == [(1, {"up": 0, "down": 1})]
    monthly = client.get(f"{PATH}/summary", headers=org.key_headers()).json()
    assert monthly["period"] == "monthly" and monthly["total"] == summary["total"]
    # And the listing pages newest first and filters
    seen: list[str] = []
    cursor = None
    while True:
        page = client.get(
            PATH, params={"limit": 2, **({"cursor": cursor} if cursor else {})}, headers=alice
        ).json()
        seen += [f["id"] for f in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 3
    whole = client.get(PATH, params={"limit": 3}, headers=alice).json()
    assert len(whole["data"]) == 3 and whole["next_cursor"] is None  # no cursor to an empty page
    starred = client.get(PATH, params={"rating_scale": "stars", "batch_id": finished}, headers=alice).json()
    assert [f["target"]["customer_item_id"] for f in starred["data"]] == ["item-2"]
    # a listed target has the keys the one a submit answers has (no `id: null` beside them)
    assert set(starred["data"][0]["target"]) == {"type", "batch_id", "customer_item_id"}
    assert client.get(PATH, params={"model": "nope"}, headers=alice).json()["data"] == []


def test_feedback_on_direct_and_queued_chat_completions(
    client: TestClient, org: TestOrg, stack: LocalStack
) -> None:
    headers = org.key_headers()
    messages = [{"role": "user", "content": "Say hello."}]
    direct = client.post(
        "/v1/chat/completions", json={"model": LLAMA, "messages": messages, "max_tokens": 8}, headers=headers
    )
    assert direct.status_code == 200, direct.text
    completion = direct.json()
    given = _give(
        client, headers, {"target": {"type": "chat_completion", "id": completion["id"]}, "rating": 1}
    )
    assert given.status_code == 201, given.text
    assert given.json()["model"] == LLAMA and given.json()["provider"] == completion["provider"]
    job = client.post(
        "/v1/chat/completions",
        json={"model": LLAMA, "messages": messages, "max_tokens": 8, "batch": True},
        headers=headers,
    ).json()
    record = BatchRecords(get_settings().table_name("batches")).get(job["batch_id"])
    assert record is not None and record.execution_arn
    # A queued job's completion can be rated once it ran
    queued_target = {"type": "chat_completion", "id": "chatcmpl-" + job["id"].removeprefix("chatjob_")}
    early = _give(client, headers, {"target": queued_target, "rating": 5, "rating_scale": "stars"})
    assert _error(early)[:2] == (409, "results_not_ready")
    run_until_done(stack, record.execution_arn, budget_seconds=60)
    done = client.get(f"/v1/chat/completions/{job['id']}", headers=headers).json()
    assert done["result"]["id"] == queued_target["id"]
    rated = _give(client, headers, {"target": queued_target, "rating": 5, "rating_scale": "stars"})
    assert rated.status_code == 201 and rated.json()["provider"] == done["result"]["provider"]
    listed = client.get(PATH, params={"target_type": "chat_completion"}, headers=headers).json()["data"]
    assert {f["target"]["id"] for f in listed} == {completion["id"], queued_target["id"]}
    # And the job's batch item is the same answer: not a second target to rate it by
    as_item = {"type": "batch_item", "batch_id": job["batch_id"], "customer_item_id": "chat"}
    again = _give(client, headers, {"target": as_item, "rating": 1})
    assert _error(again)[:2] == (404, "feedback_target_not_found")
    assert again.json()["error"]["details"]["chat_completion_id"] == queued_target["id"]
    assert len(client.get(PATH, headers=headers).json()["data"]) == 2


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"rating": 1}, "target"),
        ({"target": {"type": "batch"}, "rating": 1}, "target.type"),
        (
            {"target": {"type": "batch_item", "batch_id": "x", "customer_item_id": "a"}, "rating": 1},
            "target.batch_id",
        ),
        (
            {"target": {"type": "batch_item", "batch_id": "batch_1", "customer_item_id": ""}, "rating": 1},
            "target.customer_item_id",
        ),
        ({"target": {"type": "chat_completion", "id": "x"}, "rating": 1}, "target.id"),
        (
            {"target": {"type": "chat_completion", "id": "chatcmpl-1", "extra": 1}, "rating": 1},
            "target.extra",
        ),
        ({"target": {"type": "chat_completion", "id": "chatcmpl-1"}, "rating": 0}, "rating"),
        ({"target": {"type": "chat_completion", "id": "chatcmpl-1"}, "rating": True}, "rating"),
        (
            {"target": {"type": "chat_completion", "id": "chatcmpl-1"}, "rating": 6, "rating_scale": "stars"},
            "rating",
        ),
        (
            {"target": {"type": "chat_completion", "id": "chatcmpl-1"}, "rating": 1, "rating_scale": "ten"},
            "rating_scale",
        ),
        (
            {"target": {"type": "chat_completion", "id": "chatcmpl-1"}, "rating": 1, "comment": "x" * 4001},
            "comment",
        ),
        (
            {
                "target": {"type": "chat_completion", "id": "chatcmpl-1"},
                "rating": 1,
                "labels": ["ok", "Bad Label"],
            },
            "labels[1]",
        ),
        (
            {
                "target": {"type": "chat_completion", "id": "chatcmpl-1"},
                "rating": 1,
                "labels": [f"l{n}" for n in range(11)],
            },
            "labels",
        ),
        ({"target": {"type": "chat_completion", "id": "chatcmpl-1"}, "rating": 1, "score": 3}, "score"),
    ],
)
def test_invalid_bodies_name_the_field(
    client: TestClient, org: TestOrg, body: dict[str, Any], field: str
) -> None:
    assert _error(_give(client, org.key_headers(), body)) == (400, "invalid_request", field)


def test_filters_and_summary_period_are_checked(client: TestClient, org: TestOrg) -> None:
    assert _error(client.get(f"{PATH}/summary?period=weekly", headers=org.key_headers())) == (
        400,
        "invalid_request",
        "period",
    )
    # the listing's query is refused at the edge, every bad filter listed by its path
    refused = client.get(
        PATH, params={"target_type": "x", "rating_scale": "y", "limit": 0}, headers=org.key_headers()
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid_request"
    assert [problem["path"] for problem in refused.json()["error"]["details"]["errors"]] == [
        "query.target_type",
        "query.rating_scale",
        "query.limit",
    ]
    assert _error(client.get(PATH, params={"cursor": "!!"}, headers=org.key_headers()))[:2] == (
        400,
        "invalid_cursor",
    )


def test_another_orgs_targets_are_not_found_and_its_feedback_unseen(
    client: TestClient, org: TestOrg, finished: str
) -> None:
    assert (
        _give(
            client, org.key_headers(), {"target": _item_target(finished, "item-0"), "rating": 1}
        ).status_code
        == 201
    )
    other = new_org(credit_usd="1")
    theirs = _give(client, other.key_headers(), {"target": _item_target(finished, "item-0"), "rating": -1})
    assert _error(theirs) == (404, "feedback_target_not_found", "target.customer_item_id")
    missing = _give(client, org.key_headers(), {"target": _item_target(finished, "item-9"), "rating": 1})
    assert _error(missing) == (404, "feedback_target_not_found", "target.customer_item_id")
    unknown = _give(
        client, org.key_headers(), {"target": {"type": "chat_completion", "id": "chatcmpl-nope"}, "rating": 1}
    )
    assert _error(unknown) == (404, "feedback_target_not_found", "target.id")
    assert client.get(PATH, headers=other.key_headers()).json()["data"] == []
    assert client.get(f"{PATH}/summary", headers=other.key_headers()).json()["total"]["count"] == 0
    assert client.get(f"/v1/batches/{finished}/items", headers=other.key_headers()).status_code == 403


def test_roles_billing_reads_and_may_not_give_feedback(client: TestClient, org: TestOrg) -> None:
    body = {"target": {"type": "chat_completion", "id": "chatcmpl-1"}, "rating": 1}
    denied = _give(client, org.key_headers("billing"), body)
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "permission_denied"
    assert client.get(PATH, headers=org.key_headers("billing")).status_code == 200
    assert client.get(f"{PATH}/summary", headers=org.session_headers("billing")).status_code == 200
    assert client.get(PATH).status_code == 401


def test_feedback_reaches_an_item_whose_result_row_is_over_a_mib(
    client: TestClient, org: TestOrg, stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a finished embeddings batch whose one item (64 texts: 64 vectors of 1536 floats,
    # kept normalized and raw) has a result row longer than a customer's line (1 MiB)
    monkeypatch.setattr(simulated, "EMBEDDING_DIMENSIONS", 1536)
    texts = [f"text number {i}" for i in range(64)]
    big = {"customer_item_id": "big", "operation": "embeddings", "model": "text-embedding-3-small"}
    created = client.post(
        "/v1/batches",
        json={"items": [{**big, "input": {"input": texts}}]},
        headers={**org.key_headers(), "Idempotency-Key": "fb-big-row-0001"},
    )
    assert created.status_code == 202, created.text
    batch_id = str(created.json()["batch"]["id"])
    record = BatchRecords(get_settings().table_name("batches")).get(batch_id)
    assert record is not None and record.execution_arn
    run_until_done(stack, record.execution_arn, budget_seconds=60)
    # When the item is rated
    given = _give(
        client, org.session_headers("member"), {"target": _item_target(batch_id, "big"), "rating": 1}
    )
    # Then its row is found (it was skipped as unreadable: 404 target_not_found)
    assert given.status_code == 201, given.text
