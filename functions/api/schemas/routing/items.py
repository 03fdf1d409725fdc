"""Batch items as the API takes them: inline in a quote or a batch, or one per line of an
uploaded JSONL file. An item is `{customer_item_id, operation, model, input, required_tools?,
max_output_tokens?}`; the `input` is the provider input (the standard chat, Responses or
embeddings body), passed through to the lane.

Documentation only: items are read by batchroute.domain.routing.items with plain type checks (a
50,000-item batch is read in about a second), and every problem is a preflight issue
(`jsonl_shape`, `json_schema`, `tool_support`) naming the item's path, never a pydantic error.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from batchroute.domain.catalog.catalog import HostedTool, Operation
from batchroute.domain.presets.presets import REF_PATTERN as PRESET_REF_PATTERN
from batchroute.domain.routing.items import MAX_CUSTOMER_ITEM_ID, MAX_MODEL_ID, MAX_OUTPUT_REQUEST

OutputTokens = Annotated[int, Field(ge=1, le=MAX_OUTPUT_REQUEST)]
HostedTools = list[HostedTool]


class ChatMessage(BaseModel):
    """One message: a role and its content; tool calls, names and function outputs ride along."""

    model_config = ConfigDict(extra="allow")

    role: str | None = Field(
        default=None,
        description="system, user, assistant, tool, ...; required unless the message is a "
        "Responses API item with a `type`",
    )
    content: str | list[str | dict[str, Any]] | None = Field(
        default=None,
        description="Text, or a list of parts: `{type: text, text}` (also input_text, output_text) "
        "or an image `{type: image_url, image_url: {url}}` (also input_image, image; or a `file_id`); "
        "an image part needs a lane with vision",
    )


class ItemInput(BaseModel):
    """The provider input. `responses` and `vision`: `messages` (chat) or `input` (Responses
    API); `embeddings`: `input` (or `text`). Any other field is passed through to the provider."""

    model_config = ConfigDict(extra="allow")

    messages: Annotated[list[ChatMessage], Field(min_length=1)] | None = None
    input: str | list[Any] | None = Field(
        default=None,
        description="Responses API: a string (one user message) or a list of messages. "
        "embeddings: a string, a non-empty list of strings, or token ids ([int] or [[int]])",
    )
    text: str | list[str] | dict[str, Any] | None = Field(
        default=None,
        description="embeddings: what to embed when `input` is absent. Responses API: "
        "`{format: {type: json_schema, schema}}` asks for structured output",
    )
    instructions: str | None = None
    system: str | None = None
    tools: list[dict[str, Any]] | None = Field(
        default=None,
        description="Each tool has a `type`: function or custom tools need a lane with tool_calling; "
        "hosted tools (web_search, code_interpreter = python_execution, ...) a lane offering them",
    )
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = Field(
        default=None,
        description="`{type: text}`, `{type: json_object}` or `{type: json_schema, json_schema: "
        "{name, schema}}`; a JSON schema needs a lane with structured outputs",
    )
    max_output_tokens: OutputTokens | None = None
    max_completion_tokens: OutputTokens | None = None
    max_tokens: OutputTokens | None = None


class BatchItem(BaseModel):
    """One unit of work."""

    model_config = ConfigDict(extra="allow")

    customer_item_id: str = Field(
        min_length=1,
        max_length=MAX_CUSTOMER_ITEM_ID,
        description="Your id for the item, unique within the batch; echoed on its result",
    )
    operation: Operation | None = Field(
        default=None, description="Required unless the item's preset gives it"
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_MODEL_ID,
        description="An exact model id from GET /v1/catalog/models; required unless the item's "
        "preset gives it",
    )
    preset: str | None = Field(
        default=None,
        pattern=PRESET_REF_PATTERN,
        description="A preset, `name` (its latest version) or `name@version`: it fills what the item "
        "leaves out (docs/presets.md); the item then records `preset_version`",
    )
    input: ItemInput
    required_tools: HostedTools | None = Field(
        default=None, description="Hosted tools the lane must offer, besides those the input declares"
    )
    max_output_tokens: OutputTokens | None = Field(
        default=None,
        description="The most output tokens to generate; else the input's own max_output_tokens, "
        "max_completion_tokens or max_tokens",
    )
