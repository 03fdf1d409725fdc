"""The vendor-compatible surface's pure rules: rows to items, states to statuses, lines."""

from __future__ import annotations

import json
import tracemalloc
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from openai.types import Batch, CreateEmbeddingResponse
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from batchroute.domain.batches.jsonl import LineError
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.compat.batches import (
    RowCheck,
    RowProblem,
    batch_object,
    input_message,
    input_param,
    output_line,
    read_row,
    request_counts,
    unix,
    vendor_status,
)
from batchroute.domain.compat.uploads import UploadRecord
from batchroute.errors import Conflict
from functions.api.errors import service_error_response

BATCH = "batch_01kb000000000000000000000a"
CREATED = "2026-01-01T00:00:00.000Z"


def _row(**overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "custom_id": "a",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5},
    }
    row.update(overrides)
    return row


@pytest.mark.parametrize(
    ("url", "operation", "given"),
    [
        (
            "/v1/chat/completions",
            "responses",
            {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5},
        ),
        ("/v1/responses", "responses", {"input": "hi", "max_output_tokens": 16}),
        ("/v1/embeddings", "embeddings", {"input": ["hi"]}),
    ],
)
def test_the_url_picks_the_operation_and_the_body_less_its_model_is_the_input(
    url: str, operation: str, given: dict[str, Any]
) -> None:
    read = read_row(1, _row(url=url, body={"model": "m", **given}))
    assert not isinstance(read, RowProblem)
    assert read.url == url
    assert read.item == {"customer_item_id": "a", "operation": operation, "model": "m", "input": given}


@pytest.mark.parametrize(
    ("row", "param"),
    [
        (_row(custom_id=""), "custom_id"),
        (_row(custom_id="x" * 257), "custom_id"),
        (_row(method="post"), "method"),
        (_row(url="/v1/completions"), "url"),
        (_row(body=[]), "body"),
        (_row(body={"messages": []}), "body.model"),
        (_row(body={"model": 3}), "body.model"),
        # the other dialect's name of the endpoint's field, which the vendor's endpoint refuses
        (_row(body={"model": "m", "input": "hi"}), "body.input"),
        (_row(url="/v1/responses", body={"model": "m", "messages": []}), "body.messages"),
        (_row(url="/v1/embeddings", body={"model": "m", "text": "hi"}), "body.text"),
    ],
)
def test_a_bad_row_names_its_line_and_field(row: dict[str, Any], param: str) -> None:
    problem = read_row(7, row)
    assert isinstance(problem, RowProblem) and problem.param == param
    assert problem.text().startswith("Line 7: ")


def test_a_line_that_is_not_json_is_named_once() -> None:
    problem = read_row(3, LineError(3, "invalid_json", "line 3 is not JSON: oops (column 1)"))
    assert isinstance(problem, RowProblem) and problem.text() == "Line 3: not JSON: oops (column 1)"


def test_the_row_check_streams_across_any_chunk_split() -> None:
    data = b"".join(
        json.dumps(r).encode() + b"\n" for r in (_row(), _row(method="GET"), _row(), _row(url="x"))
    )
    for size in (1, 7, 64, len(data)):
        check = RowCheck()
        for start in range(0, len(data), size):
            check.feed(data[start : start + size])
        check.finish()
        assert check.rows == 4 and check.problem_count == 2
        assert [p.line for p in check.problems] == [2, 4]
        assert (
            check.message().startswith("Line 2: method must be POST.")
            and "2 invalid lines" in check.message()
        )


@pytest.mark.parametrize(
    ("path", "param"),
    [
        ("items[3].input.messages[0]", "body.messages[0]"),
        ("items[3].input", "body"),
        ("items[0].model", "body.model"),
        ("items[0].customer_item_id", "custom_id"),
        ("items[0]", None),
        ("webhook.url", "webhook.url"),
        (None, None),
    ],
)
def test_preflight_paths_become_request_fields(path: str | None, param: str | None) -> None:
    assert input_param(path) == param


@pytest.mark.parametrize(
    ("path", "endpoint", "param"),
    [
        # the reader's chat name of a Responses row's input, and its name of an embedding's
        ("items[0].input.messages", "/v1/responses", "body.input"),
        ("items[0].input.messages[2].content", "/v1/responses", "body.input[2].content"),
        ("items[0].input.text", "/v1/embeddings", "body.input"),
        ("items[0].input.messages", "/v1/chat/completions", "body.messages"),
        ("items[0].input.text_format", "/v1/embeddings", "body.text_format"),  # another field
    ],
)
def test_a_field_is_named_as_the_endpoints_body_names_it(path: str, endpoint: str, param: str) -> None:
    assert input_param(path, endpoint) == param


@pytest.mark.parametrize(
    ("message", "path", "endpoint", "said"),
    [
        (
            "input.n may only be 1 here.",
            "items[1].input.n",
            "/v1/chat/completions",
            "body.n may only be 1 here.",
        ),
        (
            "customer_item_id 'a' is already used by items[0].",
            "items[1].customer_item_id",
            "/v1/chat/completions",
            "custom_id 'a' is already used by another line.",
        ),
        (  # the first use's file line, when the preflight knew it
            "customer_item_id 'a' is already used by items[0] (line 3).",
            "items[1].customer_item_id",
            "/v1/chat/completions",
            "custom_id 'a' is already used by line 3.",
        ),
        (
            "input.messages is required.",
            "items[0].input.messages",
            "/v1/responses",
            "body.input is required.",
        ),
        # a name that only contains the field's is left alone
        ("input.nx is fine; input.n is not.", "items[0].input.n", "", "input.nx is fine; body.n is not."),
        ("The file holds no items.", None, "", "The file holds no items."),
    ],
)
def test_a_preflight_message_names_fields_as_a_vendor_row_has_them(
    message: str, path: str | None, endpoint: str, said: str
) -> None:
    assert input_message(message, path, endpoint) == said


def _batch(state: str, *, finalized: bool = False, **extra: Any) -> BatchRecord:
    batch: dict[str, Any] = {
        "batch_id": BATCH,
        "org_id": "org_1",
        "state": state,
        "created_at": CREATED,
        "deadline_at": "2026-01-02T00:00:00.000Z",
        "state_changed_at": "2026-01-01T00:05:00.000Z",
        "counts": {"total": 4, "completed": 2, "failed": 1, "canceled": 1},
        "compat": {
            "endpoint": "/v1/chat/completions",
            "input_file_id": "file_in",
            "body_format": "normalized",
            "output_file_id": "file_out",
            "error_file_id": "file_err",
        },
        "workflow_steps": {"route": "2026-01-01T00:01:00.000Z"},
        **extra,
    }
    if finalized:
        batch["finalized_at"] = "2026-01-01T00:04:00.000Z"
        batch["artifacts"] = {"results_key": "k", "errors_key": "e", "result_count": 4, "error_count": 2}
    return BatchRecord.from_mapping(batch)


@pytest.mark.parametrize(
    ("state", "finalized", "status"),
    [
        ("received", False, "validating"),
        ("validated", False, "validating"),
        ("priced", False, "validating"),
        ("queued", False, "validating"),
        ("dispatching", False, "in_progress"),
        ("running", False, "in_progress"),
        ("finalizing", False, "finalizing"),
        ("finalizing", True, "finalizing"),
        ("completed", True, "completed"),
        ("failed", False, "finalizing"),
        ("failed", True, "failed"),
        ("expired", False, "finalizing"),
        ("expired", True, "expired"),
        ("canceled", False, "cancelling"),
        ("canceled", True, "cancelled"),
    ],
)
def test_native_states_map_to_vendor_statuses(state: str, finalized: bool, status: str) -> None:
    assert vendor_status(_batch(state, finalized=finalized)) == status


def test_a_completed_batch_object_fills_counts_times_and_files() -> None:
    batch = batch_object(_batch("completed", finalized=True, completed_at="2026-01-01T00:06:00.000Z"))
    assert batch["status"] == "completed"
    assert batch["request_counts"] == {"total": 4, "completed": 2, "failed": 2}
    assert batch["output_file_id"] == "file_out" and batch["error_file_id"] == "file_err"
    assert batch["created_at"] == unix(CREATED) and batch["expires_at"] == unix(CREATED) + 86_400
    assert batch["in_progress_at"] == unix(CREATED) + 60
    assert batch["finalizing_at"] == unix(CREATED) + 240
    assert batch["completed_at"] == unix(CREATED) + 360
    assert batch["failed_at"] is None and batch["cancelled_at"] is None and batch["errors"] is None


def test_the_model_is_the_one_its_requests_name_whatever_prefix_counts_the_chunks_keep() -> None:
    # A model split over lanes by shared prompt prefix keeps per-prefix counts beside it
    # (lane_plan.prefix_count_key): still one model
    one = replace(_batch("completed", finalized=True), chunk_models=[{"m": 3, "m#ab12": 2}, {"m": 1}])
    assert batch_object(one)["model"] == "m"
    two = replace(one, chunk_models=[{"m": 3}, {"n": 1}])
    assert batch_object(two)["model"] is None


def test_usage_is_the_delivered_answers_tokens_once_finalize_counted_them() -> None:
    running = _batch("running", finalized=False)
    assert batch_object(running)["usage"] is None
    tallies = {
        "L1": {"completed": 2, "prompt_tokens": 30, "completion_tokens": 8, "cached_input_tokens": 10},
        "L2": {"completed": 1, "failed": 0, "prompt_tokens": 5, "completion_tokens": 2, "late": 1},
    }
    done = replace(_batch("completed", finalized=True), lane_tallies=tallies)
    usage = Batch.model_validate(batch_object(done)).usage
    assert usage is not None
    assert (usage.input_tokens, usage.input_tokens_details.cached_tokens) == (35, 10)
    assert (usage.output_tokens, usage.total_tokens) == (10, 45)


def test_files_appear_only_when_terminal_and_only_with_lines() -> None:
    running = batch_object(_batch("running"))
    assert running["output_file_id"] is None and running["finalizing_at"] is None
    all_failed = _batch("failed", finalized=True, execution_summary={"latest_error": "lane down"})
    all_failed = replace(all_failed, artifacts=replace(all_failed.artifacts, result_count=2, error_count=2))
    failed = batch_object(all_failed)
    assert failed["output_file_id"] is None and failed["error_file_id"] == "file_err"
    assert failed["failed_at"] == unix("2026-01-01T00:05:00.000Z")
    assert failed["errors"]["data"][0]["message"] == "lane down"
    cancelling = batch_object(_batch("canceled"))
    assert cancelling["cancelling_at"] and cancelling["cancelled_at"] is None


def test_request_counts_never_go_negative() -> None:
    assert request_counts(replace(_batch("running"), counts={"total": 1, "completed": -1})) == {
        "total": 1,
        "completed": 0,
        "failed": 0,
    }


def test_output_lines_carry_a_response_or_an_error() -> None:
    ok = {
        "customer_item_id": "a",
        "sequence_number": 3,
        "status": "completed",
        "output": {"type": "message", "role": "assistant", "content": "Hi.", "finish_reason": "stop"},
        "raw": {"r": 1},
        "model": "gpt-4o-mini",
        "provider": "openai",
        "usage": {"prompt_tokens": 7, "completion_tokens": 2},
    }
    line = output_line(BATCH, ok, "normalized", created=1_700_000_000)
    assert line["id"] == "batch_req_01kb000000000000000000000a_3" and line["error"] is None
    assert line["response"]["status_code"] == 200
    # the body is what the vendor's /v1/chat/completions answers: the SDK's ChatCompletion parses it
    completion = ChatCompletion.model_validate(line["response"]["body"])
    assert completion.choices[0].message.content == "Hi." and completion.choices[0].finish_reason == "stop"
    assert completion.model == "gpt-4o-mini" and completion.created == 1_700_000_000
    assert completion.usage is not None and completion.usage.total_tokens == 9
    assert output_line(BATCH, ok, "raw")["response"]["body"] == {"r": 1}
    # /v1/responses: a Response object; /v1/embeddings: an embedding list
    response = Response.model_validate(
        output_line(BATCH, ok, "normalized", endpoint="/v1/responses")["response"]["body"]
    )
    assert response.output_text == "Hi." and response.usage is not None and response.usage.output_tokens == 2
    vectors = {**ok, "output": {"type": "embedding", "dimensions": 2, "embedding": [0.5, -0.5]}}
    embedded = CreateEmbeddingResponse.model_validate(
        output_line(BATCH, vectors, "normalized", endpoint="/v1/embeddings")["response"]["body"]
    )
    assert embedded.data[0].embedding == [0.5, -0.5] and embedded.usage.prompt_tokens == 7
    failed = {
        "customer_item_id": "b",
        "sequence_number": 4,
        "status": "failed",
        "error": {"code": "x", "message": "y"},
    }
    assert output_line(BATCH, failed, "normalized") == {
        "id": "batch_req_01kb000000000000000000000a_4",
        "custom_id": "b",
        "response": None,
        "error": {"code": "x", "message": "y"},
    }


def test_a_pending_upload_expires_after_its_hour() -> None:
    upload = UploadRecord(
        upload_id="upload_x",
        org_id="org_x",
        filename="a.jsonl",
        purpose="batch",
        mime_type="application/jsonl",
        bytes=10,
        status="pending",
        created_at=CREATED,
        expires_at="2026-01-01T01:00:00.000Z",
    )
    assert upload.effective_status(datetime(2026, 1, 1, 0, 59, tzinfo=UTC)) == "pending"
    assert upload.to_api(datetime(2026, 1, 1, 1, 0, tzinfo=UTC))["status"] == "expired"


def test_the_row_check_holds_no_more_than_a_chunk_and_a_line() -> None:
    line = json.dumps(
        _row(body={"model": "m", "messages": [{"role": "user", "content": "x" * 400}]})
    ).encode()
    chunk = (line + b"\n") * 600  # about 256 KiB, cut mid-line below
    check = RowCheck()
    tracemalloc.start()
    try:
        for _ in range(40):  # about 10 MB in all
            check.feed(chunk[:1000])
            check.feed(chunk[1000:])
        check.finish()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert check.rows == 40 * 600 and check.problem_count == 0
    # Bounded by one chunk's lines (the reader hands back a chunk's parsed lines at once),
    # never by the ~13 MB that streamed past.
    assert peak < 3 * 1024 * 1024 and 40 * len(chunk) > 4 * peak, peak


@pytest.mark.parametrize(("state", "stamp"), [("failed", "failed_at"), ("expired", "expired_at")])
def test_a_failed_or_expired_batch_writing_its_files_is_finalizing_and_says_so(
    state: str, stamp: str
) -> None:
    entered = unix("2026-01-01T00:05:00.000Z")
    # While its files are written: finalizing since it entered the state; no failure shown yet
    writing = batch_object(_batch(state, execution_summary={"latest_error": "lane down"}))
    assert writing["status"] == "finalizing" and writing["finalizing_at"] == entered
    assert writing["failed_at"] is None and writing["expired_at"] is None and writing["errors"] is None
    assert Batch.model_validate(writing).finalizing_at == entered
    # Once written: failed / expired at that moment, finalizing_at unchanged
    done = batch_object(_batch(state, finalized=True, execution_summary={"latest_error": "lane down"}))
    assert done["status"] == state and done[stamp] == entered and done["finalizing_at"] == entered
    assert (done["errors"] is not None) == (state == "failed")


@pytest.mark.parametrize(
    ("finish", "status", "reason"),
    [
        ("stop", "completed", None),
        ("length", "incomplete", "max_output_tokens"),
        ("content_filter", "incomplete", "content_filter"),
    ],
)
def test_a_responses_body_says_why_it_is_incomplete(finish: str, status: str, reason: str | None) -> None:
    row = {
        "customer_item_id": "a",
        "sequence_number": 1,
        "status": "completed",
        "output": {"type": "message", "role": "assistant", "content": "Hi", "finish_reason": finish},
        "model": "m",
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
    body = output_line(BATCH, row, "normalized", endpoint="/v1/responses")["response"]["body"]
    response = Response.model_validate(body)
    assert response.status == status and response.output[0].status == status
    assert (response.incomplete_details.reason if response.incomplete_details else None) == reason
    for required in ("error", "incomplete_details", "instructions", "metadata", "temperature", "top_p"):
        assert required in body, required
    assert body["output"][0]["content"][0]["logprobs"] == []


@pytest.mark.parametrize(
    ("code", "details", "retry"),
    [
        ("batch_not_cancellable", {"state": "completed"}, "false"),
        ("upload_not_pending", None, "false"),
        ("idempotency_conflict", None, "false"),
        ("file_not_ready", {"status": "uploading"}, "false"),
        # a retry may settle these: the SDK keeps retrying them
        ("idempotency_in_progress", None, None),
        ("concurrent_update", None, None),
        ("file_not_ready", {"status": "uploaded"}, None),
    ],
)
def test_a_compat_conflict_says_whether_a_retry_helps(
    code: str, details: dict[str, Any] | None, retry: str | None
) -> None:
    answer = service_error_response("/v1/compat/v1/batches", Conflict("No.", code=code, details=details))
    assert answer.status_code == 409 and answer.headers.get("x-should-retry") == retry
    # The native surface answers as it always has
    assert "x-should-retry" not in service_error_response("/v1/batches", Conflict("No.", code=code)).headers
