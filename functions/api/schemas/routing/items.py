"""Batch items as the API takes them: inline in a quote or a batch, or one per line of an
uploaded JSONL file. An item is `{customer_item_id, operation, model, input, required_tools?,
max_output_tokens?}`; the `input` is the provider input (the standard chat, Responses or
embeddings body), passed through to the lane.

Documentation only: items are read by batchroute.domain.routing.items with plain type checks (a
50,000-item batch is read in about a second), and every problem is a preflight issue
(`jsonl_shape`, `json_schema`, `tool_support`) naming the item's path, never a pydantic error.
The models below say what that reader accepts, key by key, and tests/unit/test_body_schemas.py
holds them to it both ways (a chat request's body, schemas/chat/completions.py, too).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from batchroute.domain.catalog.catalog import HostedTool, Operation
from batchroute.domain.presets.presets import REF_PATTERN as PRESET_REF_PATTERN
from batchroute.domain.routing.items import (
    CALL_ID_PATTERN,
    FUNCTION_NAME_PATTERN,
    IMAGE_URL_PATTERN,
    MAX_CUSTOMER_ITEM_ID,
    MAX_EMBEDDING_INPUTS,
    MAX_MODEL_ID,
    MAX_OUTPUT_REQUEST,
    MAX_STOP_SEQUENCES,
    MESSAGE_NAME_PATTERN,
    METADATA_MAX_KEY,
    METADATA_MAX_PAIRS,
    METADATA_MAX_VALUE,
    PRESET_VERSION_PATTERN,
    hosted_tool_types,
)
from functions.api.schemas.common import SOME_TEXT

OutputTokens = Annotated[int, Field(ge=1, le=MAX_OUTPUT_REQUEST)]
HostedTools = list[HostedTool]


# -- an item's input, as read by batchroute.domain.routing.items (docs/routing.md, "Item input")
# The shapes below are what the reader accepts, one key at a time; what no JSON schema says is
# the reader's alone: the order of the turns (a user's first, every tool call answered right
# after it), that a tool call's `arguments` text holds a JSON object, that a function's
# `parameters` or an output schema is a JSON Schema, that `tool_choice` names a declared
# tool, that function names are unique, that hosted tools and `stop` do not go together.
NotBlank = Annotated[str, Field(pattern=SOME_TEXT)]
StopSequence = Annotated[str, Field(min_length=1)]
FunctionName = Annotated[str, Field(pattern=FUNCTION_NAME_PATTERN)]
CallId = Annotated[str, Field(pattern=CALL_ID_PATTERN)]
MessageName = Annotated[
    str,
    Field(
        pattern=MESSAGE_NAME_PATTERN,
        description="Who of several participants of one role speaks: routes only to lanes offering "
        "message_names (OpenAI's); not beside hosted tools",
    ),
]
Detail = Literal["auto", "low", "high"]
_FORBID = ConfigDict(extra="forbid")


class TextPart(BaseModel):
    model_config = _FORBID

    type: Literal["text", "input_text", "output_text"]
    text: NotBlank
    annotations: Any = None


class RefusalPart(BaseModel):
    """An assistant's refusal, as a vendor answered it."""

    model_config = _FORBID

    type: Literal["refusal"]
    refusal: NotBlank
    annotations: Any = None


class ImageUrl(BaseModel):
    model_config = _FORBID

    url: str = Field(pattern=IMAGE_URL_PATTERN)
    detail: Detail | None = None


class ImagePart(BaseModel):
    """An image by URL: http(s), or a base64 data URL of a JPEG, PNG, GIF or WebP image."""

    model_config = _FORBID

    type: Literal["image_url", "input_image"]
    image_url: Annotated[str, Field(pattern=IMAGE_URL_PATTERN)] | ImageUrl
    detail: Detail | None = None


class SystemTurn(BaseModel):
    """A system or developer message: text only."""

    model_config = _FORBID

    role: Literal["system", "developer"]
    content: NotBlank | Annotated[list[TextPart], Field(min_length=1)]
    type: Literal["message"] | None = None


class UserTurn(BaseModel):
    model_config = _FORBID

    role: Literal["user"]
    content: NotBlank | Annotated[list[TextPart | ImagePart], Field(min_length=1)]
    type: Literal["message"] | None = None
    name: MessageName | None = None


class CalledFunction(BaseModel):
    name: FunctionName
    arguments: str = Field(description="The arguments: a JSON object, as text")


class ToolCall(BaseModel):
    model_config = _FORBID

    id: CallId
    type: Literal["function"] = "function"
    function: CalledFunction
    extra_content: Any = None


class AssistantTurn(BaseModel):
    """Text, or tool calls or a refusal (its content may then be blank or null). What OpenAI's
    answer carries besides is taken back as the SDK sends it: the refusal is the turn's text,
    annotations are left out, audio and function_call must be null."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "anyOf": [
                {
                    "properties": {
                        "content": {"anyOf": [{"type": "string", "pattern": SOME_TEXT}, {"type": "array"}]}
                    },
                    "required": ["content"],
                },
                {"properties": {"tool_calls": {"type": "array"}}, "required": ["tool_calls"]},
                {
                    "properties": {"refusal": {"type": "string", "pattern": SOME_TEXT}},
                    "required": ["refusal"],
                },
            ]
        },
    )

    role: Literal["assistant"]
    content: str | Annotated[list[TextPart | RefusalPart], Field(min_length=1)] | None = None
    tool_calls: Annotated[list[ToolCall], Field(min_length=1)] | None = None
    type: Literal["message"] | None = None
    name: MessageName | None = None
    refusal: str | None = None
    annotations: list[Any] | None = None
    audio: None = None
    function_call: None = None


class ToolTurn(BaseModel):
    """A tool's answer to the call it names."""

    model_config = _FORBID

    role: Literal["tool"]
    content: NotBlank | Annotated[list[TextPart], Field(min_length=1)]
    tool_call_id: CallId


class FunctionCallItem(BaseModel):
    """Responses API: the model's call of a function."""

    model_config = _FORBID

    type: Literal["function_call"]
    call_id: CallId
    name: FunctionName
    arguments: str = Field(description="A JSON object, as text")
    id: Any = None
    status: Any = None


class FunctionCallOutput(BaseModel):
    """Responses API: a function's answer."""

    model_config = _FORBID

    type: Literal["function_call_output"]
    call_id: CallId
    output: str
    id: Any = None
    status: Any = None


Turn = SystemTurn | UserTurn | AssistantTurn | ToolTurn
Message = Turn | FunctionCallItem | FunctionCallOutput
Messages = Annotated[list[Message], Field(min_length=1)]


class FunctionSpec(BaseModel):
    model_config = _FORBID

    name: FunctionName
    description: str | None = None
    parameters: dict[str, Any] | None = Field(default=None, description="An object JSON Schema")
    strict: bool | None = None


class FunctionTool(BaseModel):
    """A custom function (needs a lane with tool calling): chat nests it under `function`."""

    model_config = _FORBID

    type: Literal["function"]
    function: FunctionSpec


class FlatFunctionTool(FunctionSpec):
    """A custom function as the Responses API writes it."""

    type: Literal["function"]


class HostedToolSpec(BaseModel):
    """A hosted tool the lane must run, with the vendor's defaults."""

    model_config = _FORBID

    type: str = Field(
        pattern=hosted_tool_types(without=frozenset({"file_search", "python_execution"})),
        description="web_search (or web_search_preview, dated variants), python_execution "
        "(or code_interpreter), calculator, time, retrieval",
    )


class FileSearchTool(BaseModel):
    model_config = _FORBID

    type: Literal["file_search"]
    vector_store_ids: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]


class AutoContainer(BaseModel):
    model_config = _FORBID

    type: Literal["auto"]


class CodeTool(BaseModel):
    model_config = _FORBID

    type: Literal["python_execution", "code_interpreter"]
    container: AutoContainer = Field(default_factory=lambda: AutoContainer(type="auto"))


Tool = FunctionTool | FlatFunctionTool | FileSearchTool | CodeTool | HostedToolSpec


class ChosenFunction(BaseModel):
    name: str


class FunctionChoice(BaseModel):
    type: Literal["function"]
    function: ChosenFunction | None = None
    name: str | None = None


class HostedChoice(BaseModel):
    model_config = _FORBID

    type: str = Field(pattern=hosted_tool_types())


ToolChoice = Literal["auto", "none", "required"] | FunctionChoice | HostedChoice


class SchemaFormat(BaseModel):
    """A structured-output schema (needs a lane with json_schema support)."""

    model_config = _FORBID

    name: FunctionName
    description: str | None = None
    schema_: dict[str, Any] = Field(alias="schema", description="A JSON Schema")
    strict: bool | None = None


class PlainFormat(BaseModel):
    model_config = _FORBID

    type: Literal["text", "json_object"]


class ChatSchemaFormat(BaseModel):
    model_config = _FORBID

    type: Literal["json_schema"]
    json_schema: SchemaFormat


class FlatSchemaFormat(SchemaFormat):
    type: Literal["json_schema"]


class TextOptions(BaseModel):
    """Responses API: `format` asks for structured output."""

    format: PlainFormat | FlatSchemaFormat | None = None


_INERT = "Accepted and not sent: it changes nothing"
_PENALTY = "0 (the default) is not sent; another value routes only to lanes offering penalties"


class InertKeys(BaseModel):
    """What an input may carry that changes nothing, so is accepted and not sent."""

    model: str | None = Field(default=None, description=_INERT)
    user: str | None = Field(default=None, description=_INERT)
    metadata: (
        Annotated[
            dict[
                Annotated[str, Field(max_length=METADATA_MAX_KEY)],
                Annotated[str, Field(max_length=METADATA_MAX_VALUE)],
            ],
            Field(max_length=METADATA_MAX_PAIRS),
        ]
        | None
    ) = Field(default=None, description=_INERT)
    store: bool | None = Field(default=None, description=_INERT)
    n: Literal[1] = Field(default=1, description=_INERT)
    stream: Literal[False] = Field(default=False, description=_INERT)
    # OpenAI's defaults, as clients send them unasked (any other value is refused)
    logprobs: Literal[False] = Field(default=False, description=_INERT)
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] = Field(default=0, description=_PENALTY)
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] = Field(default=0, description=_PENALTY)


def _one_of(first: str, second: str) -> dict[str, Any]:
    """The schema of "exactly one of two keys, not null" (null is as good as left out)."""
    given = {"not": {"type": "null"}}
    return {
        "anyOf": [{"properties": {name: given}, "required": [name]} for name in (first, second)],
        "not": {"properties": {first: given, second: given}, "required": [first, second]},
    }


class ChatOptions(InertKeys):
    """What may ride along with a chat item's messages (and a chat request's): any other key is
    refused, never dropped silently."""

    model_config = ConfigDict(extra="forbid")

    instructions: str | None = None
    system: str | None = None
    tools: list[Tool] | None = Field(
        default=None,
        description="function tools need a lane with tool_calling; hosted tools a lane offering them",
    )
    tool_choice: ToolChoice | None = None
    response_format: PlainFormat | ChatSchemaFormat | None = None
    text: TextOptions | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    stop: (
        StopSequence
        | Annotated[list[StopSequence], Field(min_length=1, max_length=MAX_STOP_SEQUENCES)]
        | None
    ) = Field(
        default=None,
        description='one of whitespace alone ("\\n") routes only to lanes offering whitespace_stop',
    )
    seed: Annotated[int, Field(ge=-(2**31), le=2**31 - 1)] | None = Field(
        default=None, description="routes only to lanes offering seed (not Claude's, nor Bedrock's)"
    )
    parallel_tool_calls: bool = Field(
        default=True,
        description="false, beside tools, routes only to lanes offering serial_tool_calls "
        "(OpenAI's, Anthropic's, Groq's): at most one tool call an answer",
    )
    max_output_tokens: OutputTokens | None = None
    max_completion_tokens: OutputTokens | None = None
    max_tokens: OutputTokens | None = None


class ChatInput(ChatOptions):
    """`responses` and `vision`: `messages` (chat) or `input` (Responses API), one of them."""

    model_config = ConfigDict(json_schema_extra=_one_of("messages", "input"))

    messages: Messages | None = None
    input: str | Messages | None = Field(
        default=None, description="Responses API: a string (one user message) or a list of input items"
    )


TokenId = Annotated[int, Field(ge=0)]
_TOKEN_ID: dict[str, Any] = {"type": "integer", "minimum": 0}
# A list holds one kind (OpenAI's [string], [integer] or [[integer]]): its first entry's, as the
# reader reads it. Said with if/then, so a validator checks each entry once (an anyOf of three
# lists checks 2,048 entries against every kind).
_EMBEDDING_LIST: dict[str, Any] = {
    "type": "array",
    "minItems": 1,
    "maxItems": MAX_EMBEDDING_INPUTS,
    "description": "Strings, token ids or token arrays: one kind per list",
    "if": {"prefixItems": [{"type": "string"}]},
    "then": {"items": {"type": "string", "minLength": 1}},
    "else": {
        "if": {"prefixItems": [{"type": "integer"}]},
        "then": {"items": _TOKEN_ID},
        "else": {"items": {"type": "array", "minItems": 1, "items": _TOKEN_ID}},
    },
}
EmbeddingText = (
    Annotated[str, Field(min_length=1)]
    | Annotated[
        list[Annotated[str, Field(min_length=1)]]
        | list[TokenId]
        | list[Annotated[list[TokenId], Field(min_length=1)]],
        WithJsonSchema(_EMBEDDING_LIST),
    ]
)


class EmbeddingInput(InertKeys):
    """`embeddings`: `input` (or `text`): a string, strings, or token ids ([int] or [[int]]): one
    kind per list."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_one_of("input", "text"))

    input: EmbeddingText | None = None
    text: EmbeddingText | None = Field(default=None, description="What to embed when `input` is left out")
    dimensions: Annotated[int, Field(ge=1)] | None = None
    encoding_format: Literal["float"] = Field(default="float", description="Embeddings come back as floats")
    parallel_tool_calls: Literal[True] = Field(default=True, description=_INERT)


def _input_by_operation(schema: dict[str, Any]) -> None:
    """The input its operation reads: chat for responses and vision, embeddings for embeddings
    (left out, the preset's operation decides)."""
    chat, embeddings = schema["properties"]["input"]["anyOf"]  # their references, as rendered
    schema["allOf"] = [
        {
            "if": {"properties": {"operation": {"enum": kinds}}, "required": ["operation"]},
            "then": {"properties": {"input": reference}},
        }
        for kinds, reference in ((["responses", "vision"], chat), (["embeddings"], embeddings))
    ]


class BatchItem(BaseModel):
    """One unit of work. `model` and `operation` are required unless the item's preset gives them."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_input_by_operation)

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
    preset_version: str | None = Field(
        default=None,
        pattern=PRESET_VERSION_PATTERN,
        description="The preset version (`name@version`) the item was expanded from, as a retried or "
        "quoted item carries it: an item with it and no `preset` is taken as already expanded",
    )
    input: ChatInput | EmbeddingInput
    required_tools: HostedTools | None = Field(
        default=None, description="Hosted tools the lane must offer, besides those the input declares"
    )
    max_output_tokens: OutputTokens | None = Field(
        default=None,
        description="The most output tokens to generate; else the input's own max_output_tokens, "
        "max_completion_tokens or max_tokens",
    )
