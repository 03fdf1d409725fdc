"""What a compat batch answers from its results (docs/compat.md): normalized bodies keep the
model's function calls and refusal, a batch whose failure path settled it without artifacts
has a terminal status, `finalizing_at` is one time in every poll, and the service's own
artifacts are read whole, never a row skipped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai.types import Batch
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from batchroute.domain.batches import jsonl
from batchroute.domain.batches.artifact_keys import jsonl_line
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.compat.batches import OutputFile, batch_object, unix, vendor_body, vendor_status
from batchroute.services.compat.files import CompatFiles
from batchroute_tools.contracts.openai import answer_violations
from tests.unit.test_chat_tool_calls import WEATHER, openai_document

BATCH = "batch_01kb000000000000000000000a"
REFUSAL = "I can't help with that."


def _row(**output: Any) -> dict[str, Any]:
    return {
        "customer_item_id": "r",
        "sequence_number": 0,
        "status": "completed",
        "model": "gpt-4o-mini",
        "provider": "openai",
        "usage": {"prompt_tokens": 5, "completion_tokens": 3},
        "output": {"type": "message", "role": "assistant", "content": "", "finish_reason": "stop", **output},
    }


def _chat(row: dict[str, Any]) -> dict[str, Any]:
    body = dict(vendor_body("/v1/chat/completions", row, request_id="x_0", created=1))
    assert answer_violations(openai_document(), "CreateChatCompletionResponse", _less_provider(body)) == []
    ChatCompletion.model_validate(body)
    return body


def _response(row: dict[str, Any]) -> Response:
    body = vendor_body("/v1/responses", row, request_id="x_0", created=1)
    assert answer_violations(openai_document(), "Response", body) == [], body
    return Response.model_validate(body)


def _less_provider(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "provider"}


# -- function calls and refusals ------------------------------------------------------------------
def test_a_chat_body_keeps_the_function_calls_and_the_refusal() -> None:
    # Given normalized outputs with a function call, and with a refusal
    calls = _chat(_row(finish_reason="tool_calls", tool_calls=[WEATHER]))
    refused = _chat(_row(refusal=REFUSAL))
    # Then the chat.completion carries them as OpenAI does (content null)
    assert calls["choices"][0]["message"] == {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "tool_calls": [WEATHER],
    }
    assert calls["choices"][0]["finish_reason"] == "tool_calls"
    assert refused["choices"][0]["message"] == {"role": "assistant", "content": None, "refusal": REFUSAL}


def test_a_responses_body_has_function_call_items_and_a_refusal_part() -> None:
    # Given a function call only: no message item, one function_call item
    calls = _response(_row(finish_reason="tool_calls", tool_calls=[WEATHER]))
    assert [o.type for o in calls.output] == ["function_call"]
    call = calls.output[0]
    assert call.type == "function_call"
    assert (call.call_id, call.name, call.arguments) == ("call_abc", "get_weather", '{"city":"Paris"}')
    assert calls.status == "completed"
    # Given text and a call: the message, then the call
    both = _response(_row(content="Let me look.", finish_reason="tool_calls", tool_calls=[WEATHER]))
    assert [o.type for o in both.output] == [
        "message",
        "function_call",
    ] and both.output_text == "Let me look."
    # Given a refusal: a refusal content part
    refused = _response(_row(refusal=REFUSAL))
    message = refused.output[0]
    assert message.type == "message"
    assert [(p.type, getattr(p, "refusal", None)) for p in message.content] == [("refusal", REFUSAL)]
    # And a plain answer stays one message of text
    plain = _response(_row(content="Hi"))
    assert [o.type for o in plain.output] == ["message"] and plain.output_text == "Hi"


# -- statuses and times ----------------------------------------------------------------------------
def _batch(state: str, **extra: Any) -> BatchRecord:
    return BatchRecord.from_mapping(
        {
            "batch_id": BATCH,
            "org_id": "org_1",
            "state": state,
            "created_at": "2026-01-01T00:00:00.000Z",
            "deadline_at": "2026-01-02T00:00:00.000Z",
            "state_changed_at": "2026-01-01T00:05:00.000Z",
            "counts": {"total": 2, "completed": 2},
            "compat": {"endpoint": "/v1/chat/completions", "input_file_id": "f", "output_file_id": "o"},
            "workflow_steps": {"route": "2026-01-01T00:01:00.000Z"},
            **extra,
        }
    )


@pytest.mark.parametrize(
    ("state", "status"), [("failed", "failed"), ("expired", "expired"), ("canceled", "cancelled")]
)
def test_a_batch_settled_without_artifacts_shows_its_end_not_finalizing(state: str, status: str) -> None:
    # Given a batch whose Finalize gave up (no artifacts) but whose failure path settled it
    given = _batch(state, settled_at="2026-01-01T00:06:00.000Z", execution_summary={"latest_error": "x"})
    # Then it shows its terminal status, with no files: nothing more is coming
    assert vendor_status(given) == status
    shown = batch_object(given)
    assert shown["output_file_id"] is None and shown["error_file_id"] is None
    Batch.model_validate(shown)
    # While it is not settled yet, its files may still come: finalizing (cancelling)
    assert vendor_status(_batch(state)) == ("cancelling" if state == "canceled" else "finalizing")


def test_finalizing_at_is_the_same_while_finalizing_and_once_completed() -> None:
    entered = "2026-01-01T00:10:00.000Z"
    # Poll 1: Finalize started at 00:10 and is still writing
    during = batch_object(_batch("finalizing", state_changed_at=entered, finalizing_at=entered))
    # Poll 2: Finalize finished at 00:25, then the batch completed at 00:26
    after = batch_object(
        _batch(
            "completed",
            state_changed_at="2026-01-01T00:26:00.000Z",
            completed_at="2026-01-01T00:26:00.000Z",
            finalizing_at=entered,
            finalized_at="2026-01-01T00:25:00.000Z",
            artifacts={"results_key": "k", "errors_key": "e", "result_count": 2, "error_count": 0},
        )
    )
    assert (during["status"], after["status"]) == ("finalizing", "completed")
    assert during["finalizing_at"] == after["finalizing_at"] == unix(entered)


# -- reading the service's own artifacts -----------------------------------------------------------
VECTOR = [0.0123456789] * 1536


def _artifact_rows() -> list[dict[str, Any]]:
    small = {"type": "embedding", "embedding": VECTOR[:8]}
    big = {"type": "embedding", "embeddings": [VECTOR] * 40}
    return [
        {**_row(), "customer_item_id": "small", "output": small, "raw": None},
        {
            **_row(),
            "customer_item_id": "big",
            "sequence_number": 1,
            "output": big,
            "raw": {"data": [VECTOR] * 40},
        },
    ]


def _chunks(data: bytes, size: int = 256 * 1024) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def test_an_artifact_row_longer_than_a_customer_line_reads_back() -> None:
    blob = b"".join(jsonl_line(r) for r in _artifact_rows())
    assert max(len(line) for line in blob.splitlines()) > jsonl.MAX_LINE_BYTES
    assert [r["customer_item_id"] for r in jsonl.artifact_lines(_chunks(blob), key="k")] == ["small", "big"]


def test_a_line_that_does_not_read_raises_rather_than_being_skipped() -> None:
    blob = jsonl_line(_artifact_rows()[0]) + b"[1, 2]\n"
    with pytest.raises(jsonl.CorruptArtifact, match="k line 2"):
        list(jsonl.artifact_lines(_chunks(blob), key="k"))


class _Artifacts:
    def __init__(self, blob: bytes) -> None:
        self.blob = blob

    def chunks(self, key: str, start: int = 0) -> Iterator[bytes]:
        return _chunks(self.blob)


def _rendered(blob: bytes) -> list[str]:
    files = object.__new__(CompatFiles)
    files.artifacts = _Artifacts(blob)  # type: ignore[assignment]
    batch = _batch(
        "completed",
        finalized_at="2026-01-01T00:06:00.000Z",
        compat={"endpoint": "/v1/embeddings", "input_file_id": "f", "output_file_id": "o"},
        artifacts={"results_key": "k", "errors_key": "e", "result_count": 2, "error_count": 0},
    )
    output = OutputFile("org_1", BATCH, "output")
    return [
        json.loads(line)["custom_id"]
        for line in b"".join(files._render(output, batch, "normalized")).splitlines()
    ]


def test_the_output_file_renders_every_row_and_never_skips_one() -> None:
    # Given a results.jsonl with a row over 1 MiB: both rows are in the output file
    blob = b"".join(jsonl_line(r) for r in _artifact_rows())
    assert _rendered(blob) == ["small", "big"]
    # Given one that does not read: the rendering fails instead of leaving it out
    with pytest.raises(jsonl.CorruptArtifact):
        _rendered(blob + b"not json\n")
