"""OpenAI's wire format, both ways, as pure functions (no I/O): the request bodies of Chat
Completions, Embeddings and Batch API lines from a ProviderRequest, and ProviderResults from
OpenAI's answers, stream chunks and batch output lines (docs/providers.md, OpenAI).

The same transform serves every OpenAI-compatible host (Together, Groq, Fireworks, DeepInfra,
vLLM, llama.cpp's server, Ollama): those take `max_tokens` where OpenAI itself now takes
`max_completion_tokens`, which is the one difference (`token_field`).

Field map (ours -> OpenAI): the item's messages (chat-completions or Responses-API form,
providers/conversation.py) -> `messages` with the system text first; `max_output_tokens` ->
`max_completion_tokens` / `max_tokens`; temperature, top_p, stop, seed, tools, tool_choice ->
the same names; a structured-output format -> `response_format`. Embeddings: `input` (or
`text`) -> `input`; `dimensions` when the item sets it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from batchroute.providers.base import (
    FinishReason,
    ItemError,
    JobState,
    JobStatus,
    ProviderRequest,
    ProviderResult,
    Usage,
)
from batchroute.providers.conversation import conversation

TokenField = Literal["max_completion_tokens", "max_tokens"]
OPENAI_TOKEN_FIELD: Final[TokenField] = "max_completion_tokens"  # noqa: S105 - a field name
CHAT_PATH: Final = "/v1/chat/completions"
EMBEDDINGS_PATH: Final = "/v1/embeddings"
# A batch line's custom_id is ours, plus this suffix when an embeddings item sent one string
# (not a list): the answer's shape depends on it and the output line does not say.
SINGLE_SUFFIX: Final = "~single"

# Batch API status -> ours. finalizing and cancelling are still in progress.
JOB_STATES: Final[dict[str, JobState]] = {
    "validating": "validating",
    "in_progress": "in_progress",
    "finalizing": "in_progress",
    "cancelling": "in_progress",
    "completed": "completed",
    "failed": "failed",
    "expired": "expired",
    "cancelled": "cancelled",
}


# -- requests ------------------------------------------------------------------------------
def chat_body(
    request: ProviderRequest, *, token_field: TokenField = OPENAI_TOKEN_FIELD, stream: bool = False
) -> dict[str, Any]:
    talk = conversation(request.input)
    messages: list[dict[str, Any]] = []
    if talk.system:
        messages.append({"role": "system", "content": talk.system})
    messages.extend(talk.messages)
    body: dict[str, Any] = {"model": request.provider_model_id, "messages": messages, **talk.options}
    if talk.functions:
        body["tools"] = talk.chat_tools()
        if talk.tool_choice is not None:
            body["tool_choice"] = talk.tool_choice.chat()
    if request.max_output_tokens > 0:
        body[token_field] = request.max_output_tokens
    if talk.response_format is not None:
        body["response_format"] = talk.response_format
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def embeddings_body(request: ProviderRequest) -> dict[str, Any]:
    value = request.input.get("input", request.input.get("text"))
    body: dict[str, Any] = {"model": request.provider_model_id, "input": value}
    dimensions = request.input.get("dimensions")
    if isinstance(dimensions, int) and not isinstance(dimensions, bool):
        body["dimensions"] = dimensions
    return body


def is_single_embedding(request: ProviderRequest) -> bool:
    return not isinstance(request.input.get("input", request.input.get("text")), list)


def batch_line(request: ProviderRequest, *, token_field: TokenField = OPENAI_TOKEN_FIELD) -> dict[str, Any]:
    """One line of a Batch API input file."""
    if request.operation == "embeddings":
        suffix = SINGLE_SUFFIX if is_single_embedding(request) else ""
        return {
            "custom_id": request.custom_id + suffix,
            "method": "POST",
            "url": EMBEDDINGS_PATH,
            "body": embeddings_body(request),
        }
    return {
        "custom_id": request.custom_id,
        "method": "POST",
        "url": CHAT_PATH,
        "body": chat_body(request, token_field=token_field),
    }


def batch_endpoint(request: ProviderRequest) -> str:
    return EMBEDDINGS_PATH if request.operation == "embeddings" else CHAT_PATH


# -- answers -------------------------------------------------------------------------------
def finish_reason(value: object) -> FinishReason:
    return "length" if value == "length" else "stop"


def chat_usage(usage: object) -> Usage:
    if not isinstance(usage, Mapping):
        return Usage()
    return Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))


def chat_result(custom_id: str, body: Mapping[str, Any]) -> ProviderResult:
    """A `chat.completion` as our normalized message."""
    choices = body.get("choices") or []
    choice = _mapping(choices[0] if choices else None)
    message = _mapping(choice.get("message"))
    output: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "content": message.get("content") or "",
        "finish_reason": finish_reason(choice.get("finish_reason")),
    }
    if message.get("tool_calls"):
        output["tool_calls"] = message["tool_calls"]
    if message.get("refusal"):
        output["refusal"] = message["refusal"]
    return ProviderResult(
        custom_id, "completed", output=output, raw=dict(body), usage=chat_usage(body.get("usage"))
    )


def embeddings_result(custom_id: str, body: Mapping[str, Any], *, single: bool) -> ProviderResult:
    """An embeddings `list` as our normalized embedding(s), in input order."""
    data = sorted(
        (d for d in body.get("data") or [] if isinstance(d, Mapping)), key=lambda d: int(d.get("index") or 0)
    )
    vectors = [list(d.get("embedding") or []) for d in data]
    output: dict[str, Any] = {"type": "embedding", "dimensions": len(vectors[0]) if vectors else 0}
    if single and len(vectors) == 1:
        output["embedding"] = vectors[0]
    else:
        output["embeddings"] = vectors
    usage = _mapping(body.get("usage"))
    return ProviderResult(
        custom_id,
        "completed",
        output=output,
        raw=dict(body),
        usage=Usage(int(usage.get("prompt_tokens") or 0), 0),
    )


@dataclass
class StreamAccumulator:
    """What a chat stream has said so far: text deltas, the finish reason, the final usage
    (the last chunk, with `stream_options.include_usage`), and enough to rebuild the
    `chat.completion` the vendor would have answered (`raw`)."""

    custom_id: str
    pieces: list[str] = field(default_factory=list)
    finish: FinishReason = "stop"
    usage: Usage = field(default_factory=Usage)
    ident: str = ""
    model: str = ""
    created: int = 0

    def add(self, chunk: Mapping[str, Any]) -> str:
        """Take one `chat.completion.chunk`; the text it adds ("" for none)."""
        self.ident = str(chunk.get("id") or self.ident)
        self.model = str(chunk.get("model") or self.model)
        self.created = int(chunk.get("created") or self.created)
        if isinstance(chunk.get("usage"), Mapping):
            self.usage = chat_usage(chunk["usage"])
        text = ""
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") if isinstance(choice, Mapping) else None
            if isinstance(delta, Mapping) and isinstance(delta.get("content"), str):
                text += delta["content"]
            if isinstance(choice, Mapping) and choice.get("finish_reason"):
                self.finish = finish_reason(choice["finish_reason"])
        if text:
            self.pieces.append(text)
        return text

    def result(self) -> ProviderResult:
        content = "".join(self.pieces)
        raw = {
            "id": self.ident,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": self.finish,
                }
            ],
            "usage": {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
                "total_tokens": self.usage.prompt_tokens + self.usage.completion_tokens,
            },
        }
        output = {"type": "message", "role": "assistant", "content": content, "finish_reason": self.finish}
        return ProviderResult(self.custom_id, "completed", output=output, raw=raw, usage=self.usage)


# -- batch jobs ----------------------------------------------------------------------------
def job_status(batch: Mapping[str, Any]) -> JobStatus:
    counts = _mapping(batch.get("request_counts"))
    return JobStatus(
        state=JOB_STATES.get(str(batch.get("status")), "in_progress"),
        total=int(counts.get("total") or 0),
        completed_count=int(counts.get("completed") or 0),
        failed_count=int(counts.get("failed") or 0),
    )


def batch_line_result(line: Mapping[str, Any]) -> ProviderResult | None:
    """One line of a batch output or error file as a result; None when it names no request."""
    custom_id = line.get("custom_id")
    if not isinstance(custom_id, str):
        return None
    single = custom_id.endswith(SINGLE_SUFFIX)
    ours = custom_id.removesuffix(SINGLE_SUFFIX)
    response = _mapping(line.get("response"))
    status = int(response.get("status_code") or 0)
    body = _mapping(response.get("body"))
    if 200 <= status < 300 and body:
        if body.get("object") == "list":
            return embeddings_result(ours, body, single=single)
        return chat_result(ours, body)
    source = _mapping(body.get("error")) or _mapping(line.get("error"))
    vendor_code = str(source.get("code") or source.get("type") or "")
    message = str(source.get("message") or f"the batch line failed with status {status}")[:300]
    code, transient = _line_error(status, vendor_code)
    detail = f"{message} ({vendor_code})" if vendor_code and vendor_code not in message else message
    error = ItemError(code=code, message=detail[:300], transient=transient)
    return ProviderResult.failure(ours, error, raw=dict(body) if body else None)


def _line_error(status: int, vendor_code: str) -> tuple[str, bool]:
    """Our code for a failed batch line, and whether a resubmission may succeed: the same
    codes a synchronous call's HTTP answer maps to (providers/http.py)."""
    if status == 429 or vendor_code == "rate_limit_exceeded":
        return "rate_limited", True
    if vendor_code == "batch_expired":
        return "batch_expired", True
    if status >= 500 or vendor_code == "server_error":
        return "provider_5xx", True
    return "provider_rejected", False


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
