"""Cancel to the end (issue 29): a batch canceled while items are in flight is `canceled` at
once, its in-flight items read `processing`, and its results, artifact URL and receipt answer
409 until its work has ended and Finalize wrote them; then they are there, settled.

The workflow's steps are called directly (as in test_batch_pipeline.py), so the test decides
when the in-flight chunk ends: no waiting on time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from tests.integration.batch_pipeline_support import create_batch, fast_pipeline, item
from tests.integration.principals import TestOrg, new_org
from tests.integration.test_batch_pipeline import _lane_messages, _task, _workflow


@pytest.fixture
def stack(local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[LocalStack]:
    with fast_pipeline(monkeypatch, tmp_path / "outbox"):
        yield local_aws


@pytest.fixture
def org(stack: LocalStack) -> TestOrg:
    return new_org(credit_usd="10")


def _error(response: Any) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def _two_items_then_out_of_time() -> Any:
    """An invocation's time left: room for a start, then too little to go on."""
    calls = iter(range(1000))
    return lambda: 300_000 if next(calls) < 2 else 30_000


def test_a_batch_canceled_mid_chunk_has_its_results_once_its_work_in_flight_ended(
    stack: LocalStack, org: TestOrg
) -> None:
    client = TestClient(create_app(), raise_server_exceptions=False)
    headers = org.key_headers()
    # Given a batch of two chunks of four whose lane is inside its first chunk: some items
    # answered, the rest still to run, the second chunk not started
    created = create_batch(org.org_id, [item(n) for n in range(8)], chunk_size=4)
    batch_id = created.batch_id
    workflow = _workflow(budget_ms=_two_items_then_out_of_time)
    (lane,) = workflow.route(_task("route", batch_id))["lanes"]
    assert workflow.run_lane(_task("run_lane", batch_id, lane=lane)) is None

    # When the customer cancels it
    answer = client.post(f"/v1/batches/{batch_id}/cancel", headers=headers)
    assert answer.status_code == 200, answer.text

    # Then it is canceled at once, not settled, its first chunk's items still in flight
    batch = client.get(f"/v1/batches/{batch_id}", headers=headers).json()["batch"]
    assert batch["state"] == "canceled" and batch["settled_at"] is None
    assert (batch["counts"]["running"], batch["counts"]["pending"]) == (4, 4)
    assert batch["output_url"] is None and batch["receipt_url"] is None
    rows = client.get(f"/v1/batches/{batch_id}/items", headers=headers).json()["data"]
    assert [row["status"] for row in rows[:4]] == ["processing"] * 4
    assert {row["error"]["code"] for row in rows[4:]} == {"canceled"}
    # And its results, artifact and receipt are not ready: 409 results_not_ready
    not_ready = [
        client.get(f"/v1/batches/{batch_id}/results", headers=headers),
        client.get(f"/v1/batches/{batch_id}/artifact-url", headers=headers),
    ]
    assert [_error(response) for response in not_ready] == [(409, "results_not_ready")] * 2
    assert not_ready[0].json()["error"]["details"] == {"state": "canceled"}
    receipt = client.get(f"/v1/batches/{batch_id}/billing-receipt", headers=headers)
    assert _error(receipt) == (409, "receipt_not_ready")
    # And retry, which the spec allows for a finished batch, is refused until then
    assert _error(client.post(f"/v1/batches/{batch_id}/retry", headers=headers)) == (
        409,
        "batch_not_finished",
    )

    # When the lane's next invocation runs: it stops at the cancel, its chunk's rest canceled
    (task,) = _lane_messages(stack)
    ended = workflow.run_lane(task)
    done = ended["completed"]  # what the invocation before the cancel answered
    assert 0 < done < 4
    assert ended == {"lane_key": lane["lane_key"], "completed": done, "failed": 0, "canceled": 8 - done}
    # Then the lane has ended but nothing is finalized yet: still 409
    assert _error(client.get(f"/v1/batches/{batch_id}/results", headers=headers)) == (
        409,
        "results_not_ready",
    )

    # When Finalize and Settle have run
    workflow.finalize(_task("finalize", batch_id))
    workflow.settle(_task("settle", batch_id))

    # Then the batch is settled, still canceled, with every item accounted for
    batch = client.get(f"/v1/batches/{batch_id}", headers=headers).json()["batch"]
    assert batch["state"] == "canceled" and batch["settled_at"]
    assert batch["counts"] == {
        "total": 8,
        "pending": 0,
        "running": 0,
        "completed": done,
        "failed": 0,
        "canceled": 8 - done,
    }
    assert batch["output_url"] and batch["error_url"] and batch["receipt_url"]
    # And its results hold the work that finished and the canceled rest, in input order
    results = client.get(f"/v1/batches/{batch_id}/results", headers=headers)
    assert results.status_code == 200, results.text
    got = [(row["status"], (row["error"] or {}).get("code")) for row in results.json()["data"]]
    assert got == [("completed", None)] * done + [("failed", "canceled")] * (8 - done)
    # (the items listing words a canceled item as the results do: one error for one item)
    listed = client.get(f"/v1/batches/{batch_id}/items", headers=headers).json()["data"]
    said = {row["error"]["message"] for row in results.json()["data"][done:]}
    assert (
        said
        == {row["error"]["message"] for row in listed[done:]}
        == {"The batch was canceled before this item finished."}
    )
    assert client.get(f"/v1/batches/{batch_id}/artifact-url", headers=headers).json()["url"]
    receipt = client.get(f"/v1/batches/{batch_id}/billing-receipt", headers=headers)
    assert receipt.status_code == 200 and receipt.json()["item_counts"]["canceled"] == 8 - done
    # And the retry the spec allows once it is finished takes the canceled items
    retried = client.post(f"/v1/batches/{batch_id}/retry", headers=headers)
    assert retried.status_code == 202 and retried.json()["retry_item_count"] == 8 - done
