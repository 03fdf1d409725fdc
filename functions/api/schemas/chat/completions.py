"""Request and response models: chat completions (docs/chat.md). A request is answered
directly (a `chat.completion`, or with `stream: true` a `text/event-stream` of
`chat.completion.chunk` events ending with `data: [DONE]`), or with `batch` queued as a
one-item batch at the batch price and answered 202 with a chat job.

The route reads the body itself, off FastAPI's dependencies (see routes/chat/completions.py), and
batchroute.domain.chat.requests validates it: these models only document it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from batchroute.domain.catalog.catalog import PrivacyTier
from batchroute.domain.chat.objects import JobStatus
from batchroute.domain.presets.presets import REF_PATTERN as PRESET_REF_PATTERN
from batchroute.domain.routing.items import PRESET_VERSION_PATTERN
from functions.api.schemas.batches.batches import Metadata
from functions.api.schemas.common import Absent
from functions.api.schemas.delivery.webhooks import WebhookTarget
from functions.api.schemas.routing.items import ChatOptions, OutputTokens, Turn


# -- the request -------------------------------------------------------------------------
class StreamOptions(BaseModel):
    include_usage: bool = Field(default=False, description="A last chunk with `choices: []` and the usage")


class ProviderPreferences(BaseModel):
    """Which providers may serve a direct request, and in which order they are tried."""

    model_config = ConfigDict(extra="forbid")

    only: list[str] | None = Field(
        default=None, description="Provider slugs that may serve; others are rejected"
    )
    order: list[str] | None = Field(default=None, description="Providers tried first, in this order")
    allow_fallbacks: bool = Field(default=True, description="false: only the first lane is tried")


class ChatQueueOptions(BaseModel):
    """Queue the request as a one-item batch at the batch price."""

    model_config = ConfigDict(extra="forbid")

    completion_window: Literal["24h"] = "24h"
    webhook: WebhookTarget | None = None
    metadata: Metadata | None = None
    work_order_id: str | None = Field(
        default=None, description="(beta) An open work order (`wo_...`) the job joins (docs/work-orders.md)"
    )


class ChatCompletionRequest(ChatOptions):
    """The standard chat-completions body plus `provider_preferences`, `privacy_tier` and
    `batch`. What rides along with the messages is a chat item's input (ChatOptions), passed
    to the provider; a lane that cannot honour it (custom tools need tool calling, a JSON schema
    needs structured outputs, image parts need vision) is never chosen. Any other field is
    refused, never dropped silently."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={  # stream_options (not null) only with stream true, as OpenAI answers
            "if": {
                "properties": {"stream_options": {"not": {"type": "null"}}},
                "required": ["stream_options"],
            },
            "then": {"properties": {"stream": {"const": True}}, "required": ["stream"]},
        },
    )

    model: str = Field(  # type: ignore[assignment]
        default=None,
        min_length=1,
        description="An exact model id from GET /v1/catalog/models; required unless the preset gives it",
    )
    messages: Annotated[list[Turn], Field(min_length=1)]
    preset: str | None = Field(
        default=None,
        pattern=PRESET_REF_PATTERN,
        description="A preset, `name` or `name@version` (docs/presets.md): it fills what the body leaves "
        "out (model, system prompt, parameters, privacy_tier)",
    )
    preset_version: str | None = Field(
        default=None,
        pattern=PRESET_VERSION_PATTERN,
        description="The preset version (`name@version`) a body was expanded from, as the service "
        "records it; sent again with a retried body, it is recorded as the version used",
    )
    max_tokens: OutputTokens | None = Field(
        default=None, description="The most tokens to generate; else the lane's own output limit"
    )
    max_completion_tokens: OutputTokens | None = Field(default=None, description="Same as max_tokens")
    stream: bool | None = Field(  # type: ignore[assignment]
        default=False, description="Answer with server-sent events; not with `batch`"
    )
    stream_options: StreamOptions | None = None
    n: Literal[1] = Field(default=1, description="One choice per request")
    provider_preferences: ProviderPreferences | None = Field(
        default=None, description="Direct requests only: a queued request is routed by the batch router"
    )
    privacy_tier: PrivacyTier | None = Field(
        default="standard", description="A lane's provider must declare the tier"
    )
    batch: bool | ChatQueueOptions | None = Field(
        default=None, description="true or an object: queue the request (202, a chat job)"
    )


# -- the answers -------------------------------------------------------------------------
class PromptTokensDetails(BaseModel):
    cached_tokens: int = Field(description="Of prompt_tokens, the input read from the vendor's prompt cache")


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails | Absent = Field(
        default=None, description="Present when the vendor served some input from its prompt cache"
    )


class ToolCallFunction(BaseModel):
    name: str
    arguments: str = Field(description="The call's arguments, JSON text")


class ToolCall(BaseModel):
    id: str
    type: Literal["function"]
    function: ToolCallFunction


class AssistantMessage(BaseModel):
    role: Literal["assistant"]
    content: str | None = Field(description="null when the answer is only function calls or a refusal")
    refusal: str | None = Field(description="The model's refusal, when it refused")
    tool_calls: list[ToolCall] | Absent = Field(default=None, description="The functions the model calls")


FINISH_REASONS = "stop, length, tool_calls (the model calls functions), content_filter"


class Choice(BaseModel):
    index: int
    message: AssistantMessage
    logprobs: None
    finish_reason: str = Field(description=FINISH_REASONS)


class ChatCompletion(BaseModel):
    """A `chat.completion`, in the reference vendor's shape plus `provider`."""

    id: str = Field(description="chatcmpl-...")
    object: Literal["chat.completion"]
    created: int = Field(description="Unix seconds")
    model: str
    choices: list[Choice]
    usage: Usage
    provider: str = Field(description="The provider that served the request (also x-service-provider)")


class ToolCallFunctionDelta(BaseModel):
    name: str | Absent = Field(default=None, description="In the call's first fragment only")
    arguments: str | Absent = Field(default=None, description="The next piece of the arguments' JSON text")


class ToolCallDelta(BaseModel):
    index: int = Field(description="Which call of the answer the fragment belongs to")
    id: str | Absent = Field(default=None, description="In the call's first fragment only")
    type: Literal["function"] | Absent = Field(default=None, description="In the call's first fragment only")
    function: ToolCallFunctionDelta | Absent = None


class Delta(BaseModel):
    role: Literal["assistant"] | Absent = None
    content: str | Absent = None
    tool_calls: list[ToolCallDelta] | Absent = None
    refusal: str | Absent = None


class ChunkChoice(BaseModel):
    index: int
    delta: Delta
    logprobs: None
    finish_reason: str | None = Field(description=FINISH_REASONS + "; null but in the finish chunk")


class ChatCompletionChunk(BaseModel):
    """One server-sent event's data: a role chunk first, one chunk per delta, a chunk with the
    finish_reason, then with include_usage a last chunk with `choices: []` and the usage."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    provider: str
    choices: list[ChunkChoice]
    usage: Usage | Absent | None = Field(
        default=None, description="With include_usage: null but in the last chunk"
    )


class JobError(BaseModel):
    code: str
    message: str


class ChatJob(BaseModel):
    """A queued request: the view of its one-item batch (`chatjob_<x>` is `batch_<x>`)."""

    id: str = Field(description="chatjob_...")
    object: Literal["chat.completion.job"]
    status: JobStatus
    model: str | None
    batch_id: str = Field(description="batch_..., the same suffix as the job id")
    created: int = Field(description="Unix seconds")
    result: ChatCompletion | None = Field(description="The chat.completion, once completed")
    error: JobError | None = Field(description="Once failed or cancelled")
    metadata: dict[str, str] | Absent = Field(default=None, description="When the request gave metadata")
    preset: str | Absent = Field(
        default=None, description="The preset version the request was expanded from, `name@version`"
    )
