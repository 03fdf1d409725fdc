"""The OpenAI-shaped objects the chat endpoint answers with, and the chat job. Pure.

`chat.completion` and `chat.completion.chunk` follow the reference vendor's shape, plus a
`provider` field (which provider served the request; OpenRouter answers the same field and
the official SDK keeps unknown fields). A chat job is the view of the one-item batch behind
a queued request: `chatjob_<x>` <-> `batch_<x>`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from batchroute.domain.batches.record import BatchRecord, job_id_for
from batchroute.ids import suffix_of

DONE_EVENT: Final = b"data: [DONE]\n\n"
CHAT_SOURCE: Final = "chat"  # a queued request's batch
DIRECT_SOURCE: Final = "chat_direct"  # the record of a direct request (not cancellable)

# Batch state -> chat job status (spec: queued, in_progress, completed, failed, cancelled).
_JOB_STATUS: Final[dict[str, str]] = {
    "received": "queued",
    "validated": "queued",
    "priced": "queued",
    "queued": "queued",
    "dispatching": "in_progress",
    "running": "in_progress",
    "finalizing": "in_progress",
    "completed": "completed",
    "failed": "failed",
    "expired": "failed",
    "canceled": "cancelled",
}


def completion_id(batch_id: str) -> str:
    return f"chatcmpl-{suffix_of(batch_id)}"


def usage_object(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def chat_completion(
    *,
    completion: str,
    created: int,
    model: str,
    content: str,
    finish_reason: str,
    prompt_tokens: int,
    completion_tokens: int,
    provider: str,
) -> dict[str, Any]:
    return {
        "id": completion,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage_object(prompt_tokens, completion_tokens),
        "provider": provider,
        "system_fingerprint": None,
    }


def chunk(
    *,
    completion: str,
    created: int,
    model: str,
    provider: str,
    delta: Mapping[str, Any] | None = None,
    finish_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
    include_usage: bool = False,
) -> dict[str, Any]:
    """One `chat.completion.chunk`. With include_usage every chunk carries `usage: null`
    except the last, which has no choices and the usage (the reference vendor's shape)."""
    body: dict[str, Any] = {
        "id": completion,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "provider": provider,
        "system_fingerprint": None,
        "choices": []
        if delta is None
        else [{"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish_reason}],
    }
    if include_usage:
        body["usage"] = dict(usage) if usage is not None else None
    return body


def sse(event: Mapping[str, Any]) -> bytes:
    return b"data: " + json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


def job_status(batch_state: str, item_status: str | None) -> str:
    """A completed batch whose one item failed is a failed job."""
    status = _JOB_STATUS.get(batch_state, "queued")
    if status == "completed" and item_status != "completed":
        return "failed"
    return status


def chat_job(
    batch: BatchRecord,
    *,
    result: Mapping[str, Any] | None = None,
    error: Mapping[str, Any] | None = None,
    item_status: str | None = None,
) -> dict[str, Any]:
    """The chat job view of a queued request's batch."""
    batch_id = batch.batch_id
    status = job_status(batch.state, item_status)
    view: dict[str, Any] = {
        "id": job_id_for(batch_id),
        "object": "chat.completion.job",
        "status": status,
        "model": batch.chat_model,
        "batch_id": batch_id,
        "created": epoch_seconds(batch.created_at),
        "result": dict(result) if status == "completed" and result is not None else None,
        "error": None,
    }
    if status == "failed":
        view["error"] = dict(error) if error else {"code": "job_failed", "message": "The request failed."}
    elif status == "cancelled":
        view["error"] = {"code": "cancelled", "message": "The batch behind this job was cancelled."}
    if batch.metadata:
        view["metadata"] = dict(batch.metadata)
    if batch.presets:
        view["preset"] = batch.presets[0]
    return view


def epoch_seconds(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())
