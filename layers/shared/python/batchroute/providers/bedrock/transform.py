"""AWS Bedrock's wire format, both ways, as pure functions (no I/O): the Converse request a
ProviderRequest becomes, the ProviderResult of a Converse answer or a ConverseStream, the
records of a batch inference job (model-native InvokeModel bodies in, `.out` records back),
job states, and Bedrock's error codes as provider errors (docs/providers.md, AWS Bedrock).

Converse (sync lanes and direct chat), ours -> Bedrock (checked against botocore's service
model and the service's documented rules: batchroute_tools/contracts/bedrock.py):

    system / instructions / system turns     -> system: [{text}]
    user / assistant turns                   -> messages: [{role, content: [block]}]
                                                (consecutive turns of one role merged:
                                                Bedrock wants them alternating; blank text
                                                left out)
      text part                              -> {text}
      image part, data: URL                  -> {image: {format, source: {bytes}}} (models
                                                that take images only: unsupported_input)
      image part, any other URL              -> refused: unsupported_image_source
      assistant tool_calls                   -> {toolUse: {toolUseId, name, input}}
      tool turn (tool_call_id)               -> user {toolResult: {toolUseId, content: [{text}]}}
      a tool call id Bedrock refuses         -> `call_` + a digest of it, on both sides
    max_output_tokens                        -> inferenceConfig.maxTokens, at most the model's
                                                limit (ModelTraits; Llama 3: 2048)
    temperature, top_p (clamped to 0..1)     -> inferenceConfig.temperature, .topP; left out
                                                when the model takes no sampling parameters
                                                (request.sampling False)
    stop (string or list)                    -> inferenceConfig.stopSequences, for Llama too
                                                (Claude: a stop of whitespace only is refused,
                                                unsupported_stop)
    tools (function tools)                   -> toolConfig.tools[].toolSpec {name, description,
                                                inputSchema: {json}} (an object schema); a tool
                                                the history calls but the item does not declare
                                                is declared with an open schema
    tool_choice auto / required / a function -> toolConfig.toolChoice {auto} / {any} / {tool};
                                                any and tool only for the models that take them
                                                (Claude): else unsupported_tool_choice
    tool_choice none                         -> no toolConfig (kept, without a choice, when the
                                                turns use tools)
    hosted tools                             -> refused: unsupported_tool (Bedrock runs none)
    response_format json_object              -> an instruction in the system prompt
    response_format json_schema              -> outputConfig.textFormat for a model with
                                                structured output (none in the catalog); else
                                                the schema, as an instruction in the system prompt
    seed, penalties, a message's name,       -> refused: unsupported_parameter (no Bedrock
    parallel_tool_calls false                   body has any of them; routing sends none here)

A conversation Bedrock cannot take is refused before anything is sent: one that does not
start with a user's turn or has no text (invalid_conversation), a tool message that answers
no call of the turn before, or a call the next turn does not answer (invalid_tool_call).

Bedrock -> ours: output.message.content text blocks joined -> output.content; toolUse blocks
-> output.tool_calls (OpenAI's form); stopReason max_tokens (or
model_context_window_exceeded) -> finish_reason `length`, tool_use -> `tool_calls`,
guardrail_intervened / content_filtered -> `content_filter`, malformed_model_output /
malformed_tool_use (output the service could not parse) -> a transient failure
`model_output_malformed` (tried again, never a finished answer), anything else `stop` (a stream's
toolUse contentBlockStart and toolUse input deltas -> StreamDelta.tool_calls, OpenAI's form);
usage.inputTokens (+ cacheReadInputTokens, cacheWriteInputTokens: the cached_input_tokens and
cache_write_input_tokens) / outputTokens -> Usage; `raw` is the Converse response without
ResponseMetadata (blobs as base64). A stream's events (messageStart, contentBlockStart,
contentBlockDelta {delta: {text | toolUse}}, contentBlockStop, messageStop {stopReason},
metadata {usage, metrics}) rebuild the same result.

Batch inference (batch lanes): one JSONL record per request, `{"recordId": <custom_id>,
"modelInput": <the model's own InvokeModel body>}`, the body chosen by the model id
(a geography prefix such as `us.` or a foundation-model ARN is looked through):

    anthropic.*  the Anthropic messages body: anthropic_version "bedrock-2023-05-31",
                 max_tokens, system, messages (text, base64 image, tool_use, tool_result
                 blocks), temperature, top_p, stop_sequences, tools, tool_choice (none
                 included), with the Converse rules above
    meta.*       Llama 3: {prompt (the Llama 3 chat template), max_gen_len (at most 2048),
                 temperature, top_p}; images and tools are refused (the body has no place
                 for them: unsupported_input / _tool). Stop sequences, which the body has
                 no place for either, are applied by the adapter to the answer
                 (`record_stops` at submit, `apply_stops` to the result: the text cut at
                 the first stop, finish_reason stop, the billed usage kept)
    others       refused: unsupported_model

Output records `{recordId, modelInput, modelOutput}` give the model's own answer (an
Anthropic `message`, or Llama's {generation, stop_reason, prompt_token_count,
generation_token_count}), kept as `raw`; `{recordId, modelInput, error: {errorCode,
errorMessage}}` a failed result (429 and 5xx transient). Job status: Submitted, Validating,
Scheduled -> validating; InProgress, Stopping -> in_progress; Completed, PartiallyCompleted
-> completed; Failed -> failed (its `message` the job's error); Stopped -> cancelled; Expired
-> expired.

Embeddings are not offered through Bedrock: PermanentProviderError `unsupported_operation`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final, Literal

from batchroute.domain.routing.items import PENALTY_KEYS
from batchroute.providers import base
from batchroute.providers.anthropic.transform import message_usage
from batchroute.providers.conversation import (
    JSON_OBJECT_INSTRUCTION,
    Conversation,
    add_turn,
    conversation,
    data_url_parts,
    plain_text,
)
from batchroute.providers.http import error_for_status, retry_after_seconds

ANTHROPIC_VERSION: Final = "bedrock-2023-05-31"
# The end of the name of a batch job (and of its input file) whose records have stop
# sequences the adapter applies (`stops_location`).
STOPS_MARK: Final = "-stops"
LLAMA_MAX_GEN_LEN: Final = 2048  # Bedrock's ceiling for Llama 3 models
DEFAULT_MAX_TOKENS: Final = 1024  # Anthropic requires max_tokens; the lane runner's default
IMAGE_FORMATS: Final = ("png", "jpeg", "gif", "webp")
# Cross-region inference profiles put a geography before the model id: us.anthropic....
GEO_PREFIXES: Final = frozenset({"us", "eu", "apac", "us-gov", "global", "jp", "au", "ca"})
_MESSAGE_CHARS: Final = 300
# Bedrock's tool use ids are [a-zA-Z0-9_.:-]{1,64}, Anthropic's [a-zA-Z0-9_-]+: ids outside
# both are replaced by a digest of themselves (the same for a call and its result).
_TOOL_ID: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")
# json_object has no Bedrock form: the instruction it stands for joins the system prompt.
# json_schema, for a model without structured output: the schema joins the system prompt.
JSON_SCHEMA_INSTRUCTION: Final = (
    "Answer with one valid JSON object and nothing else. It must conform to this JSON Schema: "
)


@dataclass(frozen=True)
class ModelTraits:
    """What a Bedrock model takes beyond the common Converse shape (the service model's
    documentation of ToolChoice, SpecificToolChoice and ContentBlock.image; AWS's model
    cards for output limits)."""

    max_output_tokens: int | None  # None: unknown, not clamped
    tool_choices: frozenset[str]  # of auto / any / tool
    images: bool
    structured_output: bool = False  # Converse outputConfig.textFormat


_ALL_CHOICES: Final = frozenset({"auto", "any", "tool"})
# Model id prefixes (geography and ARN looked through), most specific first.
MODEL_TRAITS: Final[tuple[tuple[str, ModelTraits], ...]] = (
    ("anthropic.claude-3-5-haiku", ModelTraits(8192, _ALL_CHOICES, images=False)),
    ("anthropic.claude-3-haiku", ModelTraits(4096, _ALL_CHOICES, images=True)),
    ("anthropic.", ModelTraits(None, _ALL_CHOICES, images=True)),
    ("meta.llama3", ModelTraits(LLAMA_MAX_GEN_LEN, frozenset({"auto"}), images=False)),
    ("meta.", ModelTraits(LLAMA_MAX_GEN_LEN, frozenset({"auto"}), images=False)),
)
_UNKNOWN_MODEL: Final = ModelTraits(None, frozenset({"auto"}), images=False)


def model_traits(model_id: str) -> ModelTraits:
    name = model_id.rsplit("/", 1)[-1] if model_id.startswith("arn:") else model_id
    parts = name.split(".", 1)
    if len(parts) > 1 and parts[0] in GEO_PREFIXES:
        name = parts[1]
    return next((traits for prefix, traits in MODEL_TRAITS if name.startswith(prefix)), _UNKNOWN_MODEL)


ModelFamily = Literal["anthropic", "meta"]

JOB_STATES: Final[dict[str, base.JobState]] = {
    "Submitted": "validating",
    "Validating": "validating",
    "Scheduled": "validating",
    "InProgress": "in_progress",
    "Stopping": "in_progress",
    "Completed": "completed",
    "PartiallyCompleted": "completed",
    "Failed": "failed",
    "Stopped": "cancelled",
    "Expired": "expired",
}

# Bedrock's error codes (the x-amzn-ErrorType of an answer, the exception events of a stream,
# capitalised) -> (transient code) or (permanent code).
_THROTTLED: Final = frozenset(
    {"ThrottlingException", "ServiceQuotaExceededException", "TooManyRequestsException"}
)
_TRANSIENT: Final[dict[str, str]] = {
    "ModelTimeoutException": "provider_timeout",
    "InternalServerException": "provider_5xx",
    "InternalFailure": "provider_5xx",
    "ServiceUnavailableException": "overloaded",
    "ServiceUnavailable": "overloaded",
    "ModelNotReadyException": "model_not_ready",
    "ModelErrorException": "model_error",
    "ModelStreamErrorException": "model_error",
}
_PERMANENT: Final[dict[str, str]] = {
    "ValidationException": "provider_rejected",
    "ResourceNotFoundException": "not_found",
    "ConflictException": "conflict",
}
# The credentials themselves are refused: no request of this lane can succeed.
_AUTH: Final = frozenset(
    {
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "IncompleteSignature",
        "MissingAuthenticationTokenException",
        "MissingAuthenticationToken",
    }
)
# AccessDeniedException for one model (its access is not granted in the Bedrock console),
# as opposed to an IAM denial of the whole action.
_MODEL_ACCESS: Final = re.compile(
    r"access to the model|model access|not (?:been )?enabled|use case details", re.IGNORECASE
)
# ValidationException "Invocation of model ID <id> with on-demand throughput isn't supported.
# Retry your request with the ID or ARN of an inference profile that contains this model."
# (AWS writes the apostrophe as U+2019): the lane names a model the region
# serves on demand only through a cross-region inference profile (`us.` + the model id).
# No item of the lane can succeed until its model id is corrected: the lane is unavailable
# and its items fail over, rather than each failing for good.
_PROFILE_REQUIRED: Final = re.compile(r"on-demand throughput isn.t supported", re.IGNORECASE)
# Converse stop reasons that say the service could not parse what the model produced
# (botocore's bedrock-runtime StopReason: malformed_model_output, malformed_tool_use): the
# answer is not whole, so it is a transient failure (the item is tried again, or fails
# over), never stored and billed as a finished answer.
MALFORMED_STOPS: Final = frozenset({"malformed_model_output", "malformed_tool_use"})


# -- errors ------------------------------------------------------------------------------
def aws_error(
    code: str,
    message: str,
    *,
    vendor: str,
    status: int = 0,
    headers: Mapping[str, str] | None = None,
) -> base.ProviderError:
    """The provider error for Bedrock's error `code` (an answer's or a stream event's)."""
    name = code[:1].upper() + code[1:]  # stream exception events are camelCase
    text = f"{vendor} answered {name}: {message[:_MESSAGE_CHARS] or 'no message'}"
    retry_after = retry_after_seconds(headers or {})
    if name in _THROTTLED:
        return base.TransientProviderError(text, code="rate_limited", retry_after_seconds=retry_after)
    if name in _TRANSIENT:
        return base.TransientProviderError(text, code=_TRANSIENT[name], retry_after_seconds=retry_after)
    if name == "AccessDeniedException":
        if _MODEL_ACCESS.search(message):
            return base.PermanentProviderError(text, code="model_not_enabled")
        return base.ProviderUnavailable(text, code="provider_auth_failed")
    if name in _AUTH:
        return base.ProviderUnavailable(text, code="provider_auth_failed")
    if name == "ValidationException" and _PROFILE_REQUIRED.search(message):
        return base.ProviderUnavailable(text, code="inference_profile_required")
    if name in _PERMANENT:
        return base.PermanentProviderError(text, code=_PERMANENT[name])
    if status:
        return error_for_status(status, headers or {}, json.dumps({"message": message}), vendor=vendor)
    return base.TransientProviderError(text, code="provider_error")


def _refuse_embeddings(request: base.ProviderRequest) -> None:
    if request.operation == "embeddings":
        raise base.PermanentProviderError(
            "embeddings are not offered through Bedrock by this service", code="unsupported_operation"
        )


def _refuse_unsayable(talk: Conversation) -> None:
    """No Bedrock body has a seed, OpenAI's penalties or a parallel tool use switch: one is
    refused, never dropped (routing sends none here: Bedrock's lanes offer neither `seed`,
    `penalties` nor `serial_tool_calls`)."""
    for option in ("seed", *PENALTY_KEYS):
        if talk.options.get(option) is not None:
            raise base.PermanentProviderError(f"Bedrock takes no {option}", code="unsupported_parameter")
    if talk.serial_tools:
        raise base.PermanentProviderError(
            "Bedrock takes no parallel_tool_calls: false (Converse has no such switch)",
            code="unsupported_parameter",
        )


# -- the conversation, vendor-neutral ----------------------------------------------------
@dataclass(frozen=True)
class _Block:
    kind: Literal["text", "image", "tool_use", "tool_result"]
    text: str = ""
    media_type: str = ""  # image: image/png ...
    data: str = ""  # image: base64
    tool_id: str = ""
    name: str = ""
    input: Any = None


def _model_turns(
    request: base.ProviderRequest, talk: Conversation, traits: ModelTraits
) -> list[tuple[str, list[_Block]]]:
    """The conversation's turns, refused when they hold an image the model does not take."""
    turns = _turns(talk.messages)
    if not traits.images and any(b.kind == "image" for _, blocks in turns for b in blocks):
        raise base.PermanentProviderError(
            f"{request.provider_model_id} on Bedrock takes no images", code="unsupported_input"
        )
    return turns


def _turns(messages: Iterable[Mapping[str, Any]]) -> list[tuple[str, list[_Block]]]:
    """(role, blocks) turns, user and assistant alternating (same-role neighbours merged)."""
    turns: list[tuple[str, list[_Block]]] = []
    for message in messages:
        if "name" in message:  # the preflight refuses it first
            raise base.PermanentProviderError(
                "Bedrock's messages carry no participant name (`name`)", code="unsupported_parameter"
            )
        if message.get("role") == "tool":
            role = "user"
            blocks = [
                _Block(
                    "tool_result",
                    text=plain_text(message.get("content") or ""),
                    tool_id=_tool_id(message.get("tool_call_id")),
                )
            ]
        else:
            role = "assistant" if message.get("role") == "assistant" else "user"
            blocks = _content_blocks(message.get("content") or "")
            if role == "assistant":
                blocks.extend(_tool_use(call) for call in message.get("tool_calls") or [])
        add_turn(turns, role, blocks)
    for _, blocks in turns:  # Claude wants a turn's tool results before anything else in it
        blocks.sort(key=lambda block: block.kind != "tool_result")
    _trim_prefill(turns)
    _check_turns(turns)
    return turns


def _trim_prefill(turns: list[tuple[str, list[_Block]]]) -> None:
    """A final assistant turn (a prefill) may not end in whitespace (Claude refuses it):
    its trailing whitespace goes, and the turn with it when nothing is left."""
    if not turns or turns[-1][0] != "assistant":
        return
    blocks = turns[-1][1]
    if blocks and blocks[-1].kind == "text":
        text = blocks[-1].text.rstrip()
        if text:
            blocks[-1] = replace(blocks[-1], text=text)
        else:
            blocks.pop()
    if not blocks:
        turns.pop()


def _check_turns(turns: Sequence[tuple[str, list[_Block]]]) -> None:
    """Refuse what Bedrock refuses of a conversation and nothing can translate: one that does
    not start with a user's turn, a tool result that answers no call of the turn before, a
    tool call the next turn does not answer."""
    if not turns:
        raise base.PermanentProviderError("the conversation has no text to send", code="invalid_conversation")
    if turns[0][0] != "user":
        raise base.PermanentProviderError(
            "Bedrock takes conversations that start with a user's message", code="invalid_conversation"
        )
    asked: set[str] = set()
    for _, blocks in turns:
        answers = {block.tool_id for block in blocks if block.kind == "tool_result"}
        if answers - asked:
            raise base.PermanentProviderError(
                "a tool message answers no tool call of the assistant message before it",
                code="invalid_tool_call",
            )
        if asked - answers:
            raise base.PermanentProviderError(
                "an assistant's tool call is not answered by the tool messages after it",
                code="invalid_tool_call",
            )
        asked = {block.tool_id for block in blocks if block.kind == "tool_use"}


def _tool_id(value: object) -> str:
    """A tool call's id as Bedrock and Anthropic take it ([a-zA-Z0-9_-], 1 to 64)."""
    ident = str(value or "")
    if _TOOL_ID.fullmatch(ident):
        return ident
    return "call_" + hashlib.sha256(ident.encode()).hexdigest()[:32]


def _content_blocks(content: str | list[dict[str, Any]]) -> list[_Block]:
    if isinstance(content, str):
        return [_Block("text", text=content)] if content.strip() else []
    blocks: list[_Block] = []
    for part in content:
        if part.get("type") == "text" and str(part.get("text") or "").strip():
            blocks.append(_Block("text", text=str(part["text"])))
        elif part.get("type") == "image_url":
            blocks.append(_image(str((part.get("image_url") or {}).get("url") or "")))
    return blocks


def _image(url: str) -> _Block:
    parts = data_url_parts(url)
    if parts is None:
        raise base.PermanentProviderError(
            "Bedrock takes images as data: URLs (base64) only", code="unsupported_image_source"
        )
    media_type, data = parts
    if _image_format(media_type) not in IMAGE_FORMATS:
        raise base.PermanentProviderError(
            f"Bedrock takes png, jpeg, gif and webp images, not {media_type}", code="unsupported_image_format"
        )
    return _Block("image", media_type=media_type, data=data)


def _image_format(media_type: str) -> str:
    subtype = media_type.lower().split("/", 1)[-1]
    return "jpeg" if subtype == "jpg" else subtype


def _tool_use(call: Mapping[str, Any]) -> _Block:
    function = _function(call)
    arguments = function.get("arguments")
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else (arguments or {})
    except ValueError as exc:
        raise base.PermanentProviderError(
            "a tool call's arguments are not JSON", code="invalid_tool_call"
        ) from exc
    if not isinstance(parsed, dict):
        raise base.PermanentProviderError(
            "a tool call's arguments must be a JSON object", code="invalid_tool_call"
        )
    return _Block(
        "tool_use", tool_id=_tool_id(call.get("id")), name=str(function.get("name") or ""), input=parsed
    )


def _function(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    """A tool or tool call's function: nested (chat completions) or flat (Responses API)."""
    nested = entry.get("function")
    return nested if isinstance(nested, Mapping) else entry


@dataclass(frozen=True)
class _Tools:
    specs: tuple[tuple[str, str, dict[str, Any]], ...]  # (name, description, JSON schema)
    choice: str | None  # auto | any | none | tool:<name> | None (the model's default)


def _tools(talk: Conversation, turns: Sequence[tuple[str, list[_Block]]]) -> _Tools | None:
    """The function tools and the choice among them. Turns that used tools need the tools
    declared (Bedrock refuses toolUse blocks without a toolConfig): a tool the history
    names but the item does not declare is declared with an open schema."""
    hosted = [tool.name for tool in talk.hosted_tools]
    if talk.tool_choice is not None and talk.tool_choice.mode == "hosted":
        hosted.append(str(talk.tool_choice.name))
    if hosted:
        names = ", ".join(dict.fromkeys(hosted))
        raise base.PermanentProviderError(f"Bedrock runs no hosted tools ({names})", code="unsupported_tool")
    specs = [(tool.name, tool.description or "", _object_schema(tool.parameters)) for tool in talk.functions]
    declared = {name for name, _, _ in specs}
    used = [block.name for _, blocks in turns for block in blocks if block.kind == "tool_use"]
    for name in dict.fromkeys(used):
        if name not in declared:
            specs.append((name, "", {"type": "object", "properties": {}}))
    uses_tools = bool(used) or any(block.kind == "tool_result" for _, blocks in turns for block in blocks)
    if not specs:
        if uses_tools:
            raise base.PermanentProviderError("a tool message answers no tool call", code="invalid_tool_call")
        return None
    choice = talk.tool_choice
    if choice is not None and choice.mode == "none":
        # Without tools the model cannot call one; a conversation that already used tools
        # must still declare them (Claude's batch body then says none; Converse cannot).
        return _Tools(tuple(specs), "none") if uses_tools else None
    if choice is None or choice.mode == "auto":
        return _Tools(tuple(specs), "auto" if choice is not None else None)
    if choice.mode == "required":
        return _Tools(tuple(specs), "any")
    if choice.mode == "function" and choice.name not in {name for name, _, _ in specs}:
        raise base.PermanentProviderError(
            f"tool_choice names {choice.name!r}, which the item does not declare", code="invalid_tool_call"
        )
    return _Tools(tuple(specs), f"tool:{choice.name}")


def _object_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """A tool's parameters as an input schema: an object schema (Claude requires `type`)."""
    if schema is None:
        return {"type": "object", "properties": {}}
    return dict(schema) if "type" in schema else {"type": "object", **schema}


def _check_choice(tools: _Tools | None, traits: ModelTraits, model_id: str) -> None:
    choice = (tools.choice or "auto") if tools is not None else "auto"
    kind = "tool" if choice.startswith("tool:") else choice
    if kind in ("any", "tool") and kind not in traits.tool_choices:
        raise base.PermanentProviderError(
            f"{model_id} on Bedrock cannot be made to call a tool (tool_choice required or a named "
            "function): it takes tool_choice auto only",
            code="unsupported_tool_choice",
        )


def _sampling(request: base.ProviderRequest, talk: Conversation) -> dict[str, float]:
    """temperature and top_p, for a model that takes them, in Bedrock's 0..1 (OpenAI's
    temperature reaches 2: above 1 is Bedrock's 1)."""
    if not request.sampling:
        return {}
    found: dict[str, float] = {}
    for key in ("temperature", "top_p"):
        value = _unit_interval(talk.options.get(key))
        if value is not None:
            found[key] = value
    return found


def _unit_interval(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return min(max(float(value), 0.0), 1.0)


def _stop_sequences(value: object, *, family: ModelFamily) -> list[str]:
    """The item's stop sequences (empty strings stop nothing and are left out). Claude
    refuses a stop sequence of whitespace only, and Llama's native body has none."""
    given = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    stops = [s for s in given if isinstance(s, str) and s]
    if family == "anthropic" and any(not s.strip() for s in stops):
        raise base.PermanentProviderError(
            "Claude on Bedrock takes no stop sequence of whitespace only", code="unsupported_stop"
        )
    return stops


def _output_limit(request: base.ProviderRequest, traits: ModelTraits) -> int:
    """The request's output limit within the model's (the lane runner's default when unset)."""
    limit = request.max_output_tokens if request.max_output_tokens > 0 else DEFAULT_MAX_TOKENS
    return min(limit, traits.max_output_tokens) if traits.max_output_tokens else limit


def _system(talk: Conversation, traits: ModelTraits) -> str | None:
    """The system prompt, with what a response format asks for that the model's API cannot
    say as an instruction: json_object, and json_schema (with the schema) for a model
    without structured output. Prompted, not enforced: docs/providers.md, AWS Bedrock."""
    fmt = talk.response_format
    kind = fmt.get("type") if fmt is not None else None
    instruction = None
    if kind == "json_object":
        instruction = JSON_OBJECT_INSTRUCTION
    elif fmt is not None and kind == "json_schema" and not traits.structured_output:
        given = fmt.get("json_schema")
        schema = given.get("schema") if isinstance(given, Mapping) else None
        instruction = JSON_SCHEMA_INSTRUCTION + json.dumps(schema or {}, separators=(",", ":"))
    return "\n\n".join(part for part in (talk.system, instruction) if part and part.strip()) or None


def _family_of(model_id: str) -> ModelFamily:
    try:
        return model_family(model_id)
    except base.PermanentProviderError:
        return "meta"  # Converse runs other models too: the strictest known rules apply


# -- Converse requests ---------------------------------------------------------------------
def converse_request(request: base.ProviderRequest) -> dict[str, Any]:
    """The keyword arguments of boto3's `converse` / `converse_stream` for one request."""
    _refuse_embeddings(request)
    talk = conversation(request.input)
    _refuse_unsayable(talk)
    traits = model_traits(request.provider_model_id)
    family = _family_of(request.provider_model_id)
    turns = _model_turns(request, talk, traits)
    kwargs: dict[str, Any] = {
        "modelId": request.provider_model_id,
        "messages": [
            {"role": role, "content": [_converse_block(block) for block in blocks]} for role, blocks in turns
        ],
    }
    system = _system(talk, traits)
    if system:
        kwargs["system"] = [{"text": system}]
    # No limit given: Converse's default is the model's own.
    config: dict[str, Any] = {}
    if request.max_output_tokens > 0:
        config["maxTokens"] = _output_limit(request, traits)
    sampling = _sampling(request, talk)
    for ours, theirs in (("temperature", "temperature"), ("top_p", "topP")):
        if ours in sampling:
            config[theirs] = sampling[ours]
    stops = _stop_sequences(talk.options.get("stop"), family=family)
    if stops:
        config["stopSequences"] = stops
    if config:
        kwargs["inferenceConfig"] = config
    tools = _tools(talk, turns)
    _check_choice(tools, traits, request.provider_model_id)
    if tools is not None:
        kwargs["toolConfig"] = _converse_tools(tools)
    output = _output_config(talk.response_format) if traits.structured_output else None
    if output is not None:
        kwargs["outputConfig"] = output
    if request.cache_prefix and family == "anthropic":
        _cache_point(kwargs)
    return kwargs


def _cache_point(kwargs: dict[str, Any]) -> None:
    """A `cachePoint` after the item's shared prefix (cache-aware routing): after the last
    message before the final user turn, else after the system prompt; none where the body
    has its own (Bedrock takes at most four)."""
    messages: list[dict[str, Any]] = kwargs["messages"]
    system: list[dict[str, Any]] = kwargs.get("system") or []
    blocks = [*system, *(block for message in messages for block in message["content"])]
    if any("cachePoint" in block for block in blocks):
        return
    asking = [at for at, m in enumerate(messages) if m["role"] == "user" and _asks(m["content"])]
    point = {"cachePoint": {"type": "default"}}
    if asking and asking[-1] > 0:
        messages[asking[-1] - 1]["content"].append(point)
    elif system:
        system.append(point)


def _asks(content: list[dict[str, Any]]) -> bool:
    return any("toolResult" not in block for block in content)


def _converse_block(block: _Block) -> dict[str, Any]:
    if block.kind == "image":
        try:
            raw = base64.b64decode(block.data, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise base.PermanentProviderError(
                "an image's base64 data is invalid", code="invalid_image"
            ) from exc
        return {"image": {"format": _image_format(block.media_type), "source": {"bytes": raw}}}
    if block.kind == "tool_use":
        return {"toolUse": {"toolUseId": block.tool_id, "name": block.name, "input": block.input}}
    if block.kind == "tool_result":
        content = [{"text": block.text}] if block.text.strip() else []
        return {"toolResult": {"toolUseId": block.tool_id, "content": content}}
    return {"text": block.text}


def _converse_tools(tools: _Tools) -> dict[str, Any]:
    specs = []
    for name, description, schema in tools.specs:
        spec: dict[str, Any] = {"name": name, "inputSchema": {"json": schema}}
        if description:
            spec["description"] = description
        specs.append({"toolSpec": spec})
    config: dict[str, Any] = {"tools": specs}
    if tools.choice in ("auto", "any"):
        config["toolChoice"] = {tools.choice: {}}
    elif tools.choice is not None and tools.choice.startswith("tool:"):
        config["toolChoice"] = {"tool": {"name": tools.choice.removeprefix("tool:")}}
    return config


def _output_config(response_format: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if response_format is None or response_format.get("type") != "json_schema":
        return None
    given = response_format.get("json_schema")
    spec = given if isinstance(given, Mapping) else {}
    schema: dict[str, Any] = {"schema": json.dumps(spec.get("schema") or {}, separators=(",", ":"))}
    for key in ("name", "description"):
        if spec.get(key):
            schema[key] = str(spec[key])
    return {"textFormat": {"type": "json_schema", "structure": {"jsonSchema": schema}}}


# -- Converse answers ----------------------------------------------------------------------
def finish_reason(stop_reason: object) -> base.FinishReason:
    if stop_reason in ("max_tokens", "model_context_window_exceeded"):
        return "length"
    if stop_reason == "tool_use":
        return "tool_calls"
    if stop_reason in ("guardrail_intervened", "content_filtered", "refusal"):
        return "content_filter"
    return "stop"


def malformed_output(stop_reason: object) -> base.ItemError | None:
    """The transient failure a malformed_* stop reason stands for (None for any other)."""
    if stop_reason not in MALFORMED_STOPS:
        return None
    return base.ItemError(
        "model_output_malformed",
        f"Bedrock could not parse the model's output (stopReason {stop_reason})",
        transient=True,
    )


def converse_usage(usage: object) -> base.Usage:
    """Converse's TokenUsage: `inputTokens` leaves out the cache reads and writes
    (`cacheReadInputTokens`, `cacheWriteInputTokens`), which were input too."""
    if not isinstance(usage, Mapping):
        return base.Usage()
    read = int(usage.get("cacheReadInputTokens") or 0)
    written = int(usage.get("cacheWriteInputTokens") or 0)
    return base.Usage(
        int(usage.get("inputTokens") or 0) + read + written,
        int(usage.get("outputTokens") or 0),
        cached_input_tokens=read,
        cache_write_input_tokens=written,
    )


def converse_result(custom_id: str, response: Mapping[str, Any]) -> base.ProviderResult:
    """A Converse answer as our normalized message; a transient failure for an answer the
    service could not parse (`malformed_output`)."""
    raw = jsonable({k: v for k, v in response.items() if k != "ResponseMetadata"})
    malformed = malformed_output(response.get("stopReason"))
    if malformed is not None:
        return base.ProviderResult.failure(custom_id, malformed, raw=raw)
    message = _mapping(_mapping(response.get("output")).get("message"))
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in message.get("content") or []:
        if not isinstance(block, Mapping):
            continue
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        use = block.get("toolUse")
        if isinstance(use, Mapping):
            calls.append(_tool_call(use.get("toolUseId"), use.get("name"), use.get("input")))
    output = _message("".join(texts), finish_reason(response.get("stopReason")), calls)
    return base.ProviderResult(
        custom_id, "completed", output=output, raw=raw, usage=converse_usage(response.get("usage"))
    )


def _message(content: str, finish: base.FinishReason, calls: list[dict[str, Any]]) -> dict[str, Any]:
    output: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "content": content,
        "finish_reason": finish,
    }
    if calls:
        output["tool_calls"] = calls
    return output


def _tool_call(ident: object, name: object, arguments: object) -> dict[str, Any]:
    """A tool call in OpenAI's form (what the service's chat completions carry)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {}, separators=(",", ":"))
    return {
        "id": str(ident or ""),
        "type": "function",
        "function": {"name": str(name or ""), "arguments": text},
    }


STREAM_EXCEPTIONS: Final = (
    "internalServerException",
    "modelStreamErrorException",
    "validationException",
    "throttlingException",
    "serviceUnavailableException",
)


@dataclass
class StreamAccumulator:
    """What a ConverseStream has said so far: the text deltas, tool uses, the stop reason,
    the final usage (the `metadata` event), and enough to rebuild the Converse answer
    (`raw`). An exception event raises its provider error."""

    custom_id: str
    vendor: str = "bedrock"
    role: str = "assistant"
    pieces: list[str] = field(default_factory=list)
    tools: dict[int, dict[str, Any]] = field(default_factory=dict)  # block index -> tool use
    stop_reason: str | None = None
    usage: base.Usage = field(default_factory=base.Usage)
    metrics: dict[str, Any] = field(default_factory=dict)
    calls: dict[int, int] = field(default_factory=dict)  # block index -> tool call index
    fresh: list[base.ToolCallDelta] = field(default_factory=list)  # since the last delta()

    @property
    def finished(self) -> bool:
        """The stream said messageStop: the answer is whole."""
        return self.stop_reason is not None

    def add(self, event: Mapping[str, Any]) -> str:
        """Take one event (as boto3 yields it); the text it adds ("" for none)."""
        for name in STREAM_EXCEPTIONS:
            if name in event:
                raise aws_error(name, str(_mapping(event[name]).get("message") or ""), vendor=self.vendor)
        if "messageStart" in event:
            self.role = str(_mapping(event["messageStart"]).get("role") or self.role)
        start = _mapping(event.get("contentBlockStart"))
        use = _mapping(_mapping(start.get("start")).get("toolUse"))
        if use:
            block = int(start.get("contentBlockIndex") or 0)
            self.tools[block] = {"toolUseId": use.get("toolUseId"), "name": use.get("name"), "input": ""}
            self.calls[block] = len(self.calls)
            self.fresh.append(
                base.ToolCallDelta(
                    self.calls[block], str(use.get("toolUseId") or ""), str(use.get("name") or "")
                )
            )
        text = ""
        delta_event = _mapping(event.get("contentBlockDelta"))
        delta = _mapping(delta_event.get("delta"))
        if isinstance(delta.get("text"), str):
            text = delta["text"]
        tool_delta = _mapping(delta.get("toolUse"))
        if isinstance(tool_delta.get("input"), str):
            index = int(delta_event.get("contentBlockIndex") or 0)
            self.tools.setdefault(index, {"toolUseId": "", "name": "", "input": ""})["input"] += tool_delta[
                "input"
            ]
            if index in self.calls and tool_delta["input"]:
                self.fresh.append(base.ToolCallDelta(self.calls[index], arguments=tool_delta["input"]))
        stopped = _mapping(event.get("contentBlockStop"))
        if stopped:
            index = int(stopped.get("contentBlockIndex") or 0)
            if index in self.calls and not self.tools[index]["input"]:  # a call without input
                self.fresh.append(base.ToolCallDelta(self.calls[index], arguments="{}"))
        if "messageStop" in event:
            self.stop_reason = str(_mapping(event["messageStop"]).get("stopReason") or "end_turn")
        metadata = _mapping(event.get("metadata"))
        if metadata:
            self.usage = converse_usage(metadata.get("usage"))
            self.metrics = dict(_mapping(metadata.get("metrics")))
        if text:
            self.pieces.append(text)
        return text

    def delta(self, text: str) -> base.StreamDelta | None:
        """What the last event adds to the answer (None for nothing)."""
        return base.stream_delta(text, self.fresh)

    def result(self) -> base.ProviderResult:
        content = "".join(self.pieces)
        blocks: list[dict[str, Any]] = [{"text": content}] if content else []
        calls = []
        for _, use in sorted(self.tools.items()):
            try:
                arguments = json.loads(use["input"]) if use["input"] else {}
            except ValueError:
                arguments = {}
            blocks.append(
                {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"], "input": arguments}}
            )
            calls.append(_tool_call(use["toolUseId"], use["name"], arguments))
        stop = self.stop_reason or "end_turn"
        raw = {
            "output": {"message": {"role": self.role, "content": blocks}},
            "stopReason": stop,
            "usage": converse_usage_body(self.usage),
            "metrics": jsonable(self.metrics),
        }
        malformed = malformed_output(stop)
        if malformed is not None:
            return base.ProviderResult.failure(self.custom_id, malformed, raw=raw)
        output = _message(content, finish_reason(stop), calls)
        return base.ProviderResult(self.custom_id, "completed", output=output, raw=raw, usage=self.usage)


def converse_usage_body(usage: base.Usage) -> dict[str, int]:
    """Our usage as Converse's TokenUsage (the inverse of `converse_usage`)."""
    body = {
        "inputTokens": usage.fresh_input_tokens,
        "outputTokens": usage.completion_tokens,
        "totalTokens": usage.prompt_tokens + usage.completion_tokens,
    }
    if usage.cached_input_tokens:
        body["cacheReadInputTokens"] = usage.cached_input_tokens
    if usage.cache_write_input_tokens:
        body["cacheWriteInputTokens"] = usage.cache_write_input_tokens
    return body


# -- batch inference records ---------------------------------------------------------------
def model_family(model_id: str) -> ModelFamily:
    """Whose native body a model takes, from its id (`anthropic.claude-...`,
    `us.meta.llama3-1-...`, or a foundation-model / inference-profile ARN)."""
    name = model_id.rsplit("/", 1)[-1] if model_id.startswith("arn:") else model_id
    parts = name.split(".")
    if len(parts) > 1 and parts[0] in GEO_PREFIXES:
        parts = parts[1:]
    if parts[0] == "anthropic":
        return "anthropic"
    if parts[0] == "meta":
        return "meta"
    raise base.PermanentProviderError(
        f"Bedrock batch inference here takes Anthropic and Meta Llama models, not {model_id}",
        code="unsupported_model",
    )


def batch_record(request: base.ProviderRequest) -> dict[str, Any]:
    """One line of a batch inference input file."""
    _refuse_embeddings(request)
    talk = conversation(request.input)
    _refuse_unsayable(talk)
    if model_family(request.provider_model_id) == "anthropic":
        body = anthropic_body(request, talk)
    else:
        body = llama_body(request, talk)
    return {"recordId": request.custom_id, "modelInput": body}


def anthropic_body(request: base.ProviderRequest, talk: Conversation) -> dict[str, Any]:
    """The Anthropic messages body of InvokeModel on Bedrock."""
    traits = model_traits(request.provider_model_id)
    turns = _model_turns(request, talk, traits)
    body: dict[str, Any] = {
        "anthropic_version": ANTHROPIC_VERSION,
        "max_tokens": _output_limit(request, traits),
        "messages": [
            {"role": role, "content": [_anthropic_block(block) for block in blocks]} for role, blocks in turns
        ],
    }
    system = _system(talk, traits)
    if system:
        body["system"] = system
    body.update(_sampling(request, talk))
    stops = _stop_sequences(talk.options.get("stop"), family="anthropic")
    if stops:
        body["stop_sequences"] = stops
    tools = _tools(talk, turns)
    _check_choice(tools, traits, request.provider_model_id)
    if tools is not None:
        body["tools"] = [
            {"name": name, **({"description": text} if text else {}), "input_schema": schema}
            for name, text, schema in tools.specs
        ]
        if tools.choice in ("auto", "any", "none"):
            body["tool_choice"] = {"type": tools.choice}
        elif tools.choice is not None:
            body["tool_choice"] = {"type": "tool", "name": tools.choice.removeprefix("tool:")}
    return body


def _anthropic_block(block: _Block) -> dict[str, Any]:
    if block.kind == "image":
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": block.media_type, "data": block.data},
        }
    if block.kind == "tool_use":
        return {"type": "tool_use", "id": block.tool_id, "name": block.name, "input": block.input}
    if block.kind == "tool_result":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_id}
        if block.text.strip():
            result["content"] = block.text
        return result
    return {"type": "text", "text": block.text}


def llama_body(request: base.ProviderRequest, talk: Conversation) -> dict[str, Any]:
    """Meta Llama 3's InvokeModel body: the chat as one prompt in Llama 3's template. The
    body has no tools and no stop sequences (AWS's Meta Llama model parameters): an item
    with tools is refused, never sent without them; its stop sequences are the adapter's
    to apply to the answer (`record_stops`, `apply_stops`)."""
    if talk.functions or talk.hosted_tools:
        raise base.PermanentProviderError(
            "Llama models on Bedrock batch take no tools", code="unsupported_tool"
        )
    traits = model_traits(request.provider_model_id)
    system = _system(talk, traits)
    turns = _turns(talk.messages)
    prompt = ["<|begin_of_text|>"]
    if system:
        prompt.append(_llama_turn("system", system))
    for role, blocks in turns:
        if any(block.kind != "text" for block in blocks):
            raise base.PermanentProviderError(
                "Llama models on Bedrock batch take text only (no images or tool turns)",
                code="unsupported_input",
            )
        prompt.append(_llama_turn(role, "".join(block.text for block in blocks)))
    prompt.append("<|start_header_id|>assistant<|end_header_id|>\n\n")
    limit = request.max_output_tokens if request.max_output_tokens > 0 else DEFAULT_MAX_TOKENS
    body: dict[str, Any] = {"prompt": "".join(prompt), "max_gen_len": min(limit, LLAMA_MAX_GEN_LEN)}
    body.update(_sampling(request, talk))
    return body


def _llama_turn(role: str, text: str) -> str:
    return f"<|start_header_id|>{role}<|end_header_id|>\n\n{text}<|eot_id|>"


def record_stops(request: base.ProviderRequest) -> list[str]:
    """The stop sequences the adapter applies itself to this request's batch answer: a
    Llama record's (its body has no place for them; [] for Claude, whose body says them)."""
    if model_family(request.provider_model_id) != "meta":
        return []
    return _stop_sequences(conversation(request.input).options.get("stop"), family="meta")


def apply_stops(result: base.ProviderResult, stops: Sequence[str]) -> base.ProviderResult:
    """A completed result's text cut at the first occurrence of any of `stops` (the stop
    itself left out, as a vendor leaves it out), finish_reason `stop`; the usage stays as
    the vendor billed it and `raw` as the vendor answered. Unchanged when no stop occurs."""
    output = result.output
    if result.status != "completed" or output is None or not isinstance(output.get("content"), str):
        return result
    content: str = output["content"]
    found = [index for stop in stops if stop and (index := content.find(stop)) >= 0]
    if not found:
        return result
    return replace(result, output={**output, "content": content[: min(found)], "finish_reason": "stop"})


def stops_key(input_key: str) -> str:
    """The S3 key of a job's stop sequences (its `record_stops`, by record id), next to its
    input file: `<name>.stops.json` beside `<name>.jsonl` (not a `.jsonl`, so not an input)."""
    return input_key.removesuffix(".jsonl") + ".stops.json"


def stops_location(job: Mapping[str, Any]) -> tuple[str, str] | None:
    """(bucket, key) of the stop sequences of a job (GetModelInvocationJob's answer); None
    for a job without any: only a job whose name (its input file's) ends in STOPS_MARK has
    them, so a job without is never looked for (S3 may answer a missing key with 403)."""
    source = _mapping(_mapping(job.get("inputDataConfig")).get("s3InputDataConfig")).get("s3Uri")
    bucket, key = split_s3_uri(str(source))
    if not key.endswith(f"{STOPS_MARK}.jsonl"):
        return None
    return bucket, stops_key(key)


def parse_stops(body: bytes) -> dict[str, list[str]]:
    """A stops file ({"stops": {record id: [stop, ...]}}) as a mapping; {} for anything else."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    stops = parsed.get("stops") if isinstance(parsed, Mapping) else None
    if not isinstance(stops, Mapping):
        return {}
    return {
        str(key): [s for s in value if isinstance(s, str) and s]
        for key, value in stops.items()
        if isinstance(value, list)
    }


def anthropic_result(custom_id: str, body: Mapping[str, Any]) -> base.ProviderResult:
    """An Anthropic `message` (a batch record's modelOutput) as our normalized message."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in body.get("content") or []:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text") or ""))
        elif block.get("type") == "tool_use":
            calls.append(_tool_call(block.get("id"), block.get("name"), block.get("input")))
    usage = _mapping(body.get("usage"))
    return base.ProviderResult(
        custom_id,
        "completed",
        output=_message("".join(texts), finish_reason(body.get("stop_reason")), calls),
        raw=dict(body),
        usage=message_usage(usage),
    )


def llama_result(custom_id: str, body: Mapping[str, Any]) -> base.ProviderResult:
    """Llama's {generation, stop_reason, ...} (a batch record's modelOutput) as our message."""
    finish: base.FinishReason = "length" if body.get("stop_reason") == "length" else "stop"
    return base.ProviderResult(
        custom_id,
        "completed",
        output=_message(str(body.get("generation") or ""), finish, []),
        raw=dict(body),
        usage=base.Usage(
            int(body.get("prompt_token_count") or 0), int(body.get("generation_token_count") or 0)
        ),
    )


def batch_record_result(record: Mapping[str, Any]) -> base.ProviderResult | None:
    """One record of a batch `.out` file as a result; None when it names no request."""
    record_id = record.get("recordId")
    if not isinstance(record_id, str) or not record_id:
        return None
    error = record.get("error")
    if isinstance(error, Mapping):
        return base.ProviderResult.failure(record_id, record_error(error), raw={"error": dict(error)})
    output = record.get("modelOutput")
    if isinstance(output, Mapping) and "generation" in output:
        return llama_result(record_id, output)
    if isinstance(output, Mapping) and isinstance(output.get("content"), list):
        return anthropic_result(record_id, output)
    return base.ProviderResult.failure(
        record_id,
        base.ItemError(
            "provider_bad_response", "the batch record has neither modelOutput nor error", transient=True
        ),
    )


def record_error(error: Mapping[str, Any]) -> base.ItemError:
    """A batch record's {errorCode, errorMessage}: an HTTP status (429 and 5xx transient) or
    an AWS error code."""
    code = error.get("errorCode")
    message = str(error.get("errorMessage") or "the record failed")[:_MESSAGE_CHARS]
    status = int(code) if isinstance(code, int) or (isinstance(code, str) and code.isdecimal()) else 0
    if status:
        if status == 429:
            return base.ItemError("rate_limited", message, transient=True)
        if status == 408:
            return base.ItemError("provider_timeout", message, transient=True)
        if status >= 500:
            return base.ItemError("provider_5xx", message, transient=True)
        return base.ItemError("provider_rejected", message)
    mapped = aws_error(str(code or "ValidationException"), message, vendor="bedrock")
    if isinstance(mapped, base.ProviderUnavailable):  # in a record, one item's failure
        return base.ItemError(mapped.code, message, transient=True)
    return base.ItemError(mapped.code, message, transient=mapped.transient)


# -- batch jobs ----------------------------------------------------------------------------
def job_status(job: Mapping[str, Any]) -> base.JobStatus:
    """GetModelInvocationJob's answer as our job status; a failed job's `message` is its
    error (Bedrock says why the whole job failed there: an unreadable input, a role it
    cannot assume)."""
    state = JOB_STATES.get(str(job.get("status")), "in_progress")
    message = str(job.get("message") or "")
    errors = (
        (base.ItemError("provider_rejected", message[:_MESSAGE_CHARS]),)
        if state == "failed" and message
        else ()
    )
    return base.JobStatus(
        state=state,
        total=int(job.get("totalRecordCount") or 0),
        completed_count=int(job.get("successRecordCount") or 0),
        failed_count=int(job.get("errorRecordCount") or 0),
        errors=errors,
    )


def s3_uri(bucket: str, key: str) -> str:
    return f"s3://{bucket}/{key}"


def split_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, key) of s3://bucket/key."""
    if not uri.startswith("s3://"):
        raise ValueError(f"not an S3 URI: {uri}")
    bucket, _, key = uri[5:].partition("/")
    return bucket, key


def job_id(job_arn: str) -> str:
    """The job's own id: the end of its ARN (the output folder's name)."""
    return job_arn.rsplit("/", 1)[-1]


def output_location(job: Mapping[str, Any]) -> tuple[str, str]:
    """(bucket, key) of the job's output records: Bedrock writes `<input file name>.out` in
    the folder `<job id>` under the job's output URI."""
    source = _mapping(_mapping(job.get("inputDataConfig")).get("s3InputDataConfig")).get("s3Uri")
    target = _mapping(_mapping(job.get("outputDataConfig")).get("s3OutputDataConfig")).get("s3Uri")
    _, input_key = split_s3_uri(str(source))
    bucket, prefix = split_s3_uri(str(target))
    name = input_key.rsplit("/", 1)[-1]
    key = "/".join(
        part for part in (prefix.strip("/"), job_id(str(job.get("jobArn"))), f"{name}.out") if part
    )
    return bucket, key


# -- helpers -------------------------------------------------------------------------------
def jsonable(value: Any) -> Any:
    """A boto3 answer as plain JSON: blobs as base64, timestamps as ISO 8601."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
