"""Items and results pages of long answers, on moto: the buffered API function answers through
Lambda, whose synchronous response is at most 6 MB, so a page stops at PAGE_MAX_BYTES of rows
whatever its `limit`, and following `next_cursor` reads every row exactly once
(services/batches/reads.py, docs/batches.md "Reading items and results")."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.batch_artifacts import results_key
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.s3_objects import S3Objects
from batchroute.config import get_settings
from batchroute.domain.batches.artifact_keys import jsonl_line, lane_result_key
from batchroute.domain.batches.jsonl import artifact_lines
from batchroute.domain.batches.pages import PAGE_MAX_BYTES, ROW_MAX_BYTES
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from tests.integration.batch_pipeline_support import create_batch, item, run_workflow
from tests.integration.principals import TestOrg, new_org

LAMBDA_SYNC_RESPONSE_MAX = 6_291_556  # bytes of the JSON a Lambda function answers with
ROWS = 120
# ~60 KB of text an answer: quotes, a backslash and accents, which JSON and then Lambda escape
LONG_TEXT = 'He said "déjà vu" \\ again. ' * 2_200


@pytest.fixture
def org(stack: LocalStack) -> TestOrg:
    return new_org(credit_usd="10")


@pytest.fixture
def client(stack: LocalStack) -> TestClient:
    return TestClient(create_app(), raise_server_exceptions=False)


def _objects() -> S3Objects:
    return S3Objects(get_settings().buckets["artifacts"])


def _finished_batch(stack: LocalStack, org: TestOrg) -> str:
    created = create_batch(org.org_id, [item(n) for n in range(ROWS)])
    assert run_workflow(stack, created.batch_id)["status"] == "SUCCEEDED"
    return created.batch_id


def _rewrite(key: str, change: Any) -> None:
    """The artifact at `key` with `change` applied to each of its lines."""
    lines = list(artifact_lines(_objects().chunks(key), key=key))
    body = b"".join(jsonl_line(change(line)) for line in lines)
    _objects().put(key, body, content_type="application/x-ndjson")


def _lambda_payload_bytes(answer: httpx.Response) -> int:
    """The size of what the API function hands Lambda for this answer (Mangum's proxy
    response; the Python 3.12 runtime writes it as JSON, non-ASCII unescaped)."""
    proxy = {
        "statusCode": answer.status_code,
        "headers": dict(answer.headers),
        "multiValueHeaders": {},
        "body": answer.text,
        "isBase64Encoded": False,
    }
    return len(json.dumps(proxy, ensure_ascii=False).encode())


def _every_page(client: TestClient, path: str, headers: dict[str, str], **query: Any) -> list[dict[str, Any]]:
    """Every page of `path` asked with `query`, following `next_cursor`; each answer checked
    to fit Lambda."""
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = {**query, "cursor": cursor} if cursor else query
        answer = client.get(path, params=params, headers=headers)
        assert answer.status_code == 200, answer.text[:500]
        size = _lambda_payload_bytes(answer)
        assert size <= LAMBDA_SYNC_RESPONSE_MAX, f"page {len(pages)}: {size} bytes"
        page = answer.json()
        assert page["data"], "a page holds at least one row"
        pages.append(page)
        cursor = page["next_cursor"]
        if cursor is None:
            return pages


def test_results_pages_of_long_answers_fit_the_lambda_response_and_hold_every_row_once(
    stack: LocalStack, org: TestOrg, client: TestClient
) -> None:
    # Given a finished batch whose every answer is ~60 KB (7 MB of rows in all)
    batch_id = _finished_batch(stack, org)
    long = {"content": LONG_TEXT}
    _rewrite(results_key(batch_id), lambda row: {**row, "output": long, "raw": long})
    # When a client reads its results 1,000 rows a page (the console's download)
    for body_format in ("normalized", "raw"):
        path = f"/v1/batches/{batch_id}/results"
        pages = _every_page(client, path, org.key_headers(), limit=1000, body_format=body_format)
        # Then every page fits Lambda's response (asserted above), so there are several
        assert len(pages) > 1
        # And following the cursor reads every row once, in order, each whole
        rows = [row for page in pages for row in page["data"]]
        assert [row["sequence_number"] for row in rows] == list(range(ROWS))
        assert all(row["output"] == long for row in rows)


def _with_huge_row_1(stack: LocalStack, org: TestOrg, size: int) -> tuple[str, dict[str, str]]:
    """A finished batch whose result row 1 answers `size` characters; its id and that answer."""
    batch_id = _finished_batch(stack, org)
    huge = {"content": "x" * size}
    _rewrite(
        results_key(batch_id), lambda row: {**row, "output": huge} if row["sequence_number"] == 1 else row
    )
    return batch_id, huge


def test_a_result_row_over_the_page_budget_is_a_page_of_its_own(
    stack: LocalStack, org: TestOrg, client: TestClient
) -> None:
    # Given a finished batch whose row 1 alone is over the page budget (5 MB)
    batch_id, huge = _with_huge_row_1(stack, org, PAGE_MAX_BYTES + 1_000_000)
    # When the results are read 1,000 rows a page
    pages = _every_page(client, f"/v1/batches/{batch_id}/results", org.key_headers(), limit=1000)
    # Then row 0 ends the first page, row 1 is the second page alone, the rest the third
    assert [[row["sequence_number"] for row in page["data"]] for page in pages] == [
        [0],
        [1],
        list(range(2, ROWS)),
    ]
    assert pages[1]["data"][0]["output"] == huge


def test_a_result_row_no_answer_can_carry_is_refused_in_the_envelope_with_a_way_on(
    stack: LocalStack, org: TestOrg, client: TestClient
) -> None:
    # Given a finished batch whose row 1 alone is over what one Lambda answer carries (6 MB)
    batch_id, _ = _with_huge_row_1(stack, org, ROW_MAX_BYTES + 1000)
    path = f"/v1/batches/{batch_id}/results"
    first = client.get(path, params={"limit": 1000}, headers=org.key_headers())
    assert first.status_code == 200 and [r["sequence_number"] for r in first.json()["data"]] == [0]
    # When the page that holds row 1 alone is read
    refused = client.get(
        path, params={"limit": 1000, "cursor": first.json()["next_cursor"]}, headers=org.key_headers()
    )
    # Then 413 in the spec's envelope (not a 502 from the gateway), naming the row, where the
    # whole results file is read, and the cursor that goes on past it
    assert refused.status_code == 413
    error = refused.json()["error"]
    assert error["code"] == "result_too_large"
    details = error["details"]
    assert (details["sequence_number"], details["max_bytes"]) == (1, ROW_MAX_BYTES)
    assert (
        details["bytes"] > ROW_MAX_BYTES
        and details["artifact_url_path"] == f"/v1/batches/{batch_id}/artifact-url"
    )
    rest = client.get(
        path, params={"limit": 1000, "cursor": details["next_cursor"]}, headers=org.key_headers()
    )
    assert [r["sequence_number"] for r in rest.json()["data"]] == list(range(2, ROWS))
    # And the row is whole in the results file
    url = client.get(details["artifact_url_path"], headers=org.key_headers()).json()["url"]
    assert url


def test_items_pages_of_long_errors_fit_the_lambda_response_and_hold_every_item_once(
    stack: LocalStack, org: TestOrg, client: TestClient
) -> None:
    # Given a finished batch whose lanes failed every item with a ~60 KB error message
    batch_id = _finished_batch(stack, org)
    error = {"code": "provider_error", "message": LONG_TEXT}
    records = BatchRecords(get_settings().table_name("batches"))
    for lane in records.lanes(batch_id):
        key = lane_result_key(batch_id, lane, 0)
        if _objects().size(key) is not None:
            _rewrite(key, lambda row: {**row, "status": "failed", "output": None, "error": error})
    # When a client reads its failed items 500 a page, and all its items
    for status in ({"status": "failed"}, {}):
        pages = _every_page(client, f"/v1/batches/{batch_id}/items", org.key_headers(), limit=500, **status)
        # Then every page fits Lambda's response (asserted above), so there are several
        assert len(pages) > 1
        # And following the cursor reads every item once, in order, each with its error
        rows = [row for page in pages for row in page["data"]]
        assert [row["sequence_number"] for row in rows] == list(range(ROWS))
        assert all(row["status"] == "failed" and row["error"] == error for row in rows)
