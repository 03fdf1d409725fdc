"""A compat batch's results as the official SDK reads them, on moto: a result row longer than
a customer's line (1 MiB) is finalized and served like any other; function calls reach the
normalized output files; an output file's `expires_at` is when retention takes it; and
`finalizing_at` is one time from `finalizing` to `completed` (docs/compat.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from batchroute.adapters.aws import client as aws_client
from batchroute.adapters.batch_artifacts import results_key
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.clock import FixedClock, isoformat
from batchroute.config import get_settings
from batchroute.domain.batches.jsonl import MAX_LINE_BYTES
from batchroute.domain.compat.batches import batch_object, unix
from batchroute.providers import simulated
from batchroute.wiring import wiring_for
from batchroute_tools.contracts.openai import answer_violations
from batchroute_tools.local.provision import LocalStack
from functions.api.schemas.billing.retention import RetentionUpdate
from tests.integration import test_compat_api as compat_api
from tests.integration.batch_pipeline_support import create_batch, item
from tests.integration.principals import TestOrg
from tests.integration.test_chat_tool_calls import MESSAGES, TOOLS
from tests.integration.test_compat_api import jsonl, openai_document, row, run, sdk

SMALL = "text-embedding-3-small"  # OpenAI answers 1536 floats per input
MINI = "gpt-4o-mini"
# The compat API tests' fixtures: the app over moto, a fresh org and its key's headers.
client = compat_api.client
org = compat_api.org
auth = compat_api.auth


def _records() -> BatchRecords:
    return BatchRecords(get_settings().table_name("batches"))


def _file_lines(vendor: Any, *file_ids: str | None) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for file_id in file_ids:
        if file_id:
            for line in vendor.files.content(file_id).text.splitlines():
                parsed = json.loads(line)
                found[parsed["custom_id"]] = parsed
    return found


def test_a_result_row_over_a_mib_is_finalized_and_served(
    client: TestClient, auth: dict[str, str], local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an embeddings batch with one small request and one of 64 texts, whose answer
    # (64 vectors of 1536 floats, kept normalized and raw) is a result row over 1 MiB
    monkeypatch.setattr(simulated, "EMBEDDING_DIMENSIONS", 1536)
    vendor = sdk(client, auth)
    big = {
        "custom_id": "big",
        "method": "POST",
        "url": "/v1/embeddings",
        "body": {"model": SMALL, "input": [f"text number {i}" for i in range(64)]},
    }
    file = vendor.files.create(
        file=("a.jsonl", jsonl([row(0, url="/v1/embeddings", model=SMALL), big])), purpose="batch"
    )
    batch = vendor.batches.create(input_file_id=file.id, endpoint="/v1/embeddings", completion_window="24h")
    # When the workflow runs
    run(local_aws, batch.id)
    # Then the batch completes, both requests in its output file, the big one whole
    batch = vendor.batches.retrieve(batch.id)
    assert batch.status == "completed" and batch.request_counts.completed == 2, batch
    found = _file_lines(vendor, batch.output_file_id, batch.error_file_id)
    assert set(found) == {"req-0", "big"}
    vectors = found["big"]["response"]["body"]["data"]
    assert len(vectors) == 64 and len(vectors[0]["embedding"]) == 1536
    stored = aws_client("s3").get_object(Bucket=local_aws.buckets["artifacts"], Key=results_key(batch.id))
    assert max(len(line) for line in stored["Body"].read().splitlines()) > MAX_LINE_BYTES
    # And the native results page has both rows too
    page = client.get(f"/v1/batches/{batch.id}/results", headers=auth).json()
    assert sorted(r["customer_item_id"] for r in page["data"]) == ["big", "req-0"]
    # And finalizing_at is when Finalize started, no later than when it finished
    record = _records().get(batch.id)
    assert record is not None and record.finalizing_at and record.finalized_at
    assert batch.finalizing_at == unix(record.finalizing_at)
    assert record.finalizing_at <= record.finalized_at


def test_function_calls_reach_the_normalized_output_files(
    client: TestClient, auth: dict[str, str], local_aws: LocalStack
) -> None:
    # Given a chat batch and a responses batch whose requests must call a function
    vendor = sdk(client, auth)
    responses_tools = [{"type": "function", **tool["function"]} for tool in TOOLS]
    cases = {
        "/v1/chat/completions": {"messages": MESSAGES, "tools": TOOLS, "max_tokens": 50},
        "/v1/responses": {"input": "Weather in Paris?", "tools": responses_tools, "max_output_tokens": 50},
    }
    for endpoint, body in cases.items():
        request = {"model": MINI, "tool_choice": "required", **body}
        rows = [{"custom_id": "r0", "method": "POST", "url": endpoint, "body": request}]
        file = vendor.files.create(file=("a.jsonl", jsonl(rows)), purpose="batch")
        batch = vendor.batches.create(input_file_id=file.id, endpoint=endpoint, completion_window="24h")
        # When it runs and its output file is read in the default (normalized) format
        run(local_aws, batch.id)
        batch = vendor.batches.retrieve(batch.id)
        answer = _file_lines(vendor, batch.output_file_id)["r0"]["response"]["body"]
        # Then the calls are there, in the shape the vendor's endpoint answers
        if endpoint == "/v1/responses":
            assert answer_violations(openai_document(), "Response", answer) == [], answer
            calls = [o for o in Response.model_validate(answer).output if o.type == "function_call"]
            assert calls and calls[0].name == "get_weather" and calls[0].call_id, answer
        else:
            shape = {k: v for k, v in answer.items() if k != "provider"}
            assert answer_violations(openai_document(), "CreateChatCompletionResponse", shape) == []
            message = ChatCompletion.model_validate(answer).choices[0].message
            assert message.tool_calls and message.tool_calls[0].function.name == "get_weather", answer


def test_output_and_error_files_expire_when_retention_takes_them(
    client: TestClient, auth: dict[str, str], org: TestOrg, local_aws: LocalStack
) -> None:
    vendor = sdk(client, auth)
    wiring = wiring_for(get_settings())
    # Given a finished compat batch of an org on the default tier (grace_only)
    batch = vendor.batches.create(
        input_file_id=vendor.files.create(file=("a.jsonl", jsonl([row(0)])), purpose="batch").id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    run(local_aws, batch.id)
    batch = vendor.batches.retrieve(batch.id)
    record = _records().get(batch.id)
    assert record is not None and record.finalized_at
    # Then its output file expires when the grace window ends, as the native view says
    expires = datetime.fromisoformat(record.finalized_at) + timedelta(
        hours=get_settings().retention_grace_hours
    )
    assert vendor.files.retrieve(batch.output_file_id).expires_at == int(expires.timestamp())
    view = client.get(f"/v1/batches/{batch.id}?include_details=true", headers=auth).json()["batch"]
    assert view["details"]["artifacts"]["expires_at"] == isoformat(expires)
    # And listed files say the same
    listed = {f.id: f.expires_at for f in vendor.files.list(purpose="batch_output")}
    assert listed[batch.output_file_id] == int(expires.timestamp())
    # When the org keeps its files until deleted
    wiring.retention.update(
        org.org_id, RetentionUpdate.model_validate({"retention_tier": "until_deleted"}).command()
    )
    # Then the File object says they never expire
    assert vendor.files.retrieve(batch.output_file_id).expires_at is None


class _TickingClock(FixedClock):
    """A minute passes at every reading: each step's time is its own."""

    def now(self) -> datetime:
        moment = super().now()
        self.advance(minutes=1)
        return moment


def test_finalizing_at_stays_the_same_from_finalizing_to_completed(
    local_aws: LocalStack, org: TestOrg
) -> None:
    # Given a batch whose lanes are done, finalized with a clock that moves on every reading
    created = create_batch(org.org_id, [item(0)], state="running", mutate=_as_compat)
    clock = _TickingClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    finalizer = wiring_for(get_settings(), clock).pipeline.finalizer
    assert finalizer.finalize(created.record) is not None
    records = _records()
    during = records.get(created.batch_id)
    assert during is not None and during.state == "finalizing" and during.finalized_at
    # When it shows `finalizing`, then `completed` once settled later
    first = batch_object(during)
    assert first["status"] == "finalizing"
    assert records.transition(created.batch_id, "completed", at=isoformat(clock.now()))
    done = records.get(created.batch_id)
    assert done is not None
    second = batch_object(done)
    # Then both polls give the moment Finalize moved it to `finalizing`
    assert second["status"] == "completed"
    assert second["finalizing_at"] == first["finalizing_at"] == unix(during.state_changed_at)
    assert second["finalizing_at"] < unix(done.finalized_at)


def _as_compat(record: dict[str, Any]) -> None:
    record["source"] = "compat"
    record["compat"] = {
        "endpoint": "/v1/chat/completions",
        "input_file_id": "file_in",
        "completion_window": "24h",
    }
