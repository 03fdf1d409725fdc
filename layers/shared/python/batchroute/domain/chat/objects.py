"""The OpenAI-shaped objects the chat endpoint answers with, and the chat job. Pure.

`chat.completion` and `chat.completion.chunk` follow the reference vendor's shape, plus a
`provider` field (which provider served the request; OpenRouter answers the same field and
the official SDK keeps unknown fields). A chat job is the view of the one-item batch behind
a queued request: `chatjob_<x>` <-> `batch_<x>`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal, NotRequired, TypedDict

from batchroute.domain.batches.record import BatchRecord, job_id_for
from batchroute.ids import suffix_of

DONE_EVENT: Final = b"data: [DONE]\n\n"
CHAT_SOURCE: Final = "chat"  # a queued request's batch
DIRECT_SOURCE: Final = "chat_direct"  # the record of a direct request (not cancellable)

JobStatus = Literal["queued", "in_progress", "completed", "failed", "cancelled"]

# Batch state -> chat job status (spec: queued, in_progress, completed, failed, cancelled).
_JOB_STATUS: Final[dict[str, JobStatus]] = {
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


class PromptTokensDetails(TypedDict):
    cached_tokens: int  # of prompt_tokens, read from the vendor's prompt cache


class UsageView(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: NotRequired[PromptTokensDetails]  # when the vendor cached any input


class ToolCallFunction(TypedDict):
    name: str
    arguments: str  # JSON text


class ToolCallView(TypedDict):
    """A function call of the answer (the normalized output's `tool_calls[]`; a Gemini call
    may carry `extra_content` too, its thought signature)."""

    id: str
    type: Literal["function"]
    function: ToolCallFunction


class ToolCallFragmentFunction(TypedDict, total=False):
    name: str  # in the call's first fragment only
    arguments: str


class ToolCallChunkView(TypedDict):
    """A chunk's `delta.tool_calls[]` entry (OpenAI's ChatCompletionMessageToolCallChunk)."""

    index: int
    id: NotRequired[str]  # with `type`, in the call's first fragment only
    type: NotRequired[Literal["function"]]
    function: ToolCallFragmentFunction


class AssistantMessage(TypedDict):
    """`content` null when the answer is only function calls or a refusal."""

    role: Literal["assistant"]
    content: str | None
    refusal: str | None
    tool_calls: NotRequired[list[ToolCallView]]


class ChoiceView(TypedDict):
    index: int
    message: AssistantMessage
    logprobs: None
    finish_reason: str


class DeltaView(TypedDict, total=False):
    """What a chunk adds: the role first, then the content piece by piece, the function
    calls' fragments (OpenAI's ChatCompletionMessageToolCallChunk: `index`, with `id`, `type`
    and `function.name` in a call's first fragment, `function.arguments` pieces), refusal text."""

    role: Literal["assistant"]
    content: str
    tool_calls: list[ToolCallChunkView]
    refusal: str


class ChunkChoiceView(TypedDict):
    index: int
    delta: DeltaView
    logprobs: None
    finish_reason: str | None


class _Served(TypedDict):
    """What a completion and each of its chunks say of the request that served them."""

    id: str
    created: int
    model: str
    provider: str


class ChatCompletionView(_Served):
    object: Literal["chat.completion"]
    choices: list[ChoiceView]
    usage: UsageView


class ChunkView(_Served):
    """A `chat.completion.chunk`; `usage` only with include_usage."""

    object: Literal["chat.completion.chunk"]
    choices: list[ChunkChoiceView]
    usage: NotRequired[UsageView | None]


class JobError(TypedDict):
    code: str
    message: str


class ChatJobView(TypedDict):
    """A queued request's job; `metadata` and `preset` only when the request had them."""

    id: str
    object: Literal["chat.completion.job"]
    status: JobStatus
    model: str | None
    batch_id: str
    created: int
    result: ChatCompletionView | None
    error: JobError | None
    metadata: NotRequired[dict[str, str]]
    preset: NotRequired[str]


def completion_id(batch_id: str) -> str:
    return f"chatcmpl-{suffix_of(batch_id)}"


def usage_object(prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> UsageView:
    """A chat completion's usage, with `prompt_tokens_details.cached_tokens` as the
    reference vendor reports it when any input came from the prompt cache."""
    usage: UsageView = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return usage


@dataclass(frozen=True, slots=True)
class ServedBy:
    """Who answered a request, as its completion and each of its chunks say: the completion
    id, when (Unix seconds), the model asked for and the provider that served it."""

    completion: str
    created: int
    model: str
    provider: str


def chat_completion(
    served: ServedBy,
    *,
    content: str,
    finish_reason: str,
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int = 0,
    tool_calls: Sequence[ToolCallView] = (),
    refusal: str | None = None,
) -> ChatCompletionView:
    """A `chat.completion`: `content` null when there is no text but function calls or a
    refusal (OpenAI's shape); no `system_fingerprint` (OpenAI's is a string, never null)."""
    message: AssistantMessage = {
        "role": "assistant",
        "content": content if content or not (tool_calls or refusal) else None,
        "refusal": refusal or None,
    }
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    return {
        "id": served.completion,
        "object": "chat.completion",
        "created": served.created,
        "model": served.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
        "usage": usage_object(prompt_tokens, completion_tokens, cached_tokens),
        "provider": served.provider,
    }


def tool_call_chunks(calls: Sequence[ToolCallView]) -> list[ToolCallChunkView]:
    """Whole function calls as one chunk's `delta.tool_calls` (each with its `index`)."""
    return [
        {
            "index": i,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": call["function"]["arguments"]},
        }
        for i, call in enumerate(calls)
    ]


def chunk(
    served: ServedBy,
    *,
    delta: DeltaView | None = None,
    finish_reason: str | None = None,
    usage: UsageView | None = None,
    include_usage: bool = False,
) -> ChunkView:
    """One `chat.completion.chunk`. With include_usage every chunk carries `usage: null`
    except the last, which has no choices and the usage (the reference vendor's shape)."""
    body: ChunkView = {
        "id": served.completion,
        "object": "chat.completion.chunk",
        "created": served.created,
        "model": served.model,
        "provider": served.provider,
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }
    if include_usage:
        body["usage"] = usage
    return body


def sse(event: ChunkView) -> bytes:
    return b"data: " + json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


def job_status(batch_state: str, item_status: str | None) -> JobStatus:
    """The job is its one item: once the batch is over, a completed item is a completed job
    (also under a cancel or a failure that came after it ran: it was charged, its result is
    there) and a completed batch without one is a failed job."""
    status = _JOB_STATUS.get(batch_state, "queued")
    if item_status == "completed" and status in ("failed", "cancelled"):
        return "completed"
    if status == "completed" and item_status != "completed":
        return "failed"
    return status


def chat_job(
    batch: BatchRecord,
    *,
    result: ChatCompletionView | None = None,
    error: JobError | None = None,
    item_status: str | None = None,
) -> ChatJobView:
    """The chat job view of a queued request's batch."""
    batch_id = batch.batch_id
    status = job_status(batch.state, item_status)
    view: ChatJobView = {
        "id": job_id_for(batch_id),
        "object": "chat.completion.job",
        "status": status,
        "model": batch.chat_model,
        "batch_id": batch_id,
        "created": epoch_seconds(batch.created_at),
        "result": result if status == "completed" else None,
        "error": None,
    }
    if status == "failed":
        view["error"] = error or {"code": "job_failed", "message": "The request failed."}
    elif status == "cancelled":
        view["error"] = {"code": "cancelled", "message": "The batch behind this job was cancelled."}
    if batch.metadata:
        view["metadata"] = dict(batch.metadata)
    if batch.presets:
        view["preset"] = batch.presets[0]
    return view


def epoch_seconds(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())
