"""Google's Gemini API wire format, both ways, as pure functions (no I/O): the bodies of
`generateContent`, `embedContent`, `batchEmbedContents` and a batch-mode job
(`batchGenerateContent` with inlined requests) from a ProviderRequest, and ProviderResults
from Gemini's answers, stream chunks, batch operations and error bodies
(docs/providers.md, Google Gemini). The client (`client.py`) only moves these over HTTP.

Field map, requests (ours -> Gemini, REST JSON of API version v1beta):

    system / instructions / system turns  -> systemInstruction {parts: [{text}]}
    messages / input turns               -> contents [{role: user | model, parts}]
      user text, assistant text          -> {text}   (role assistant -> model; consecutive
                                            assistant turns -> one model turn)
      image_url  data:<type>;base64,...  -> {inlineData: {mimeType, data}} (other data: URLs
                                            base64-encoded)
      image_url  any other URL           -> {fileData: {fileUri, mimeType}}, the type its
                                            path's extension names (domain/routing/images.py)
      (only Gemini's image types: png, jpeg, webp, heic, heif; an image of another type, or
      by a URL that tells none, is refused: unsupported_image_format / _source)
      assistant tool_calls               -> {functionCall: {id, name, args}} (+ thoughtSignature
                                            from tool_call.extra_content.google, as Google's
                                            OpenAI layer carries it)
      tool / function turns              -> role user, {functionResponse: {id, name, response}}
    max_output_tokens                    -> generationConfig.maxOutputTokens
    temperature, top_p, stop, seed       -> generationConfig.temperature, topP, stopSequences, seed
                                            (temperature, top_p only when request.sampling)
    response_format json_object          -> generationConfig.responseMimeType application/json
    response_format json_schema          -> + responseSchema (Gemini's OpenAPI subset, converted)
                                            or responseJsonSchema (as given) when the schema
                                            uses anything the subset cannot say
    tools [{type: function}]             -> tools [{functionDeclarations: [{name, description,
                                            parameters | parametersJsonSchema}]}] (no
                                            parameters for an object without properties)
    hosted tools (web_search, python_execution)
                                         -> vendor_tool("gemini", name): [{googleSearch: {}}],
                                            [{codeExecution: {}}] (catalog/data/hosted_tools.toml)
    tool_choice auto/none/required/named -> toolConfig.functionCallingConfig AUTO/NONE/ANY(+names),
                                            only beside function declarations
    tool_choice a hosted tool            -> the tool declared, NONE for the functions (Gemini
                                            cannot force a built-in tool); `none` leaves the
                                            hosted tools out
    parallel_tool_calls false (tools),   -> refused: unsupported_parameter (Gemini has no
    penalties                               such switch; penalties are not mapped); routing
                                            sends neither here
    embeddings input (string | [strings])-> embedContent {content} | batchEmbedContents
                                            {requests: [{model, content}]}; dimensions ->
                                            outputDimensionality
    a batch job                          -> {batch: {displayName, inputConfig: {requests:
                                            {requests: [{request, metadata: {key: custom_id}}]}}}}

Field map, answers (Gemini -> ours):

    candidates[0].content.parts[].text   -> output.content (joined; thought parts left out)
    parts[].functionCall                 -> output.tool_calls (OpenAI form, arguments as JSON)
    finishReason MAX_TOKENS / other      -> finish_reason length / stop (tool_calls when
                                            the answer has a functionCall)
    a stream's functionCall parts        -> StreamDelta.tool_calls, each call whole in one
    promptFeedback.blockReason, finishReason SAFETY (and the other content filters)
                                         -> a failed result, error `content_blocked`
    finishReason MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL, TOO_MANY_TOOL_CALLS,
    MALFORMED_RESPONSE                   -> a transient failure `model_output_malformed`
    usageMetadata promptTokenCount (+ toolUsePromptTokenCount)   -> usage.prompt_tokens
    usageMetadata cachedContentTokenCount                        -> usage.cached_input_tokens
    usageMetadata candidatesTokenCount (+ thoughtsTokenCount)    -> usage.completion_tokens
                                            (Google bills thinking tokens as output)
    groundingMetadata.webSearchQueries   -> usage.tool_uses web_search 1 (per grounded prompt)
    executableCode parts                 -> usage.tool_uses python_execution, one per part
    embedding.values / embeddings[].values -> output.embedding / output.embeddings
    metadata.state BATCH_STATE_* (the SDK's JOB_STATE_* accepted too) -> JobStatus.state
    metadata.batchStats                  -> JobStatus counts
    inlinedResponses[] {response | error, metadata.key} -> one ProviderResult per custom_id
    batches.list operations[] {name, metadata {displayName, model, state, createTime}}
                                         -> ListedBatch: a retried submission's batch, found
    `raw`                                -> the vendor's body as sent (a GenerateContentResponse,
                                            {"embedding"}); {"embeddings"} of every call, in order

Refused before sending (PermanentProviderError), never dropped: participant names, a
conversation opening with tool calls, function names starting with a digit or a dash,
unpaired tool calls and results, non-object tool arguments, seeds outside int32, hosted tool
settings, token-id embedding inputs, images Gemini cannot be told the type of or does not take.

Embeddings carry no token usage on the Gemini API: prompt tokens are estimated from the text
with the quote's conservative rule (domain/catalog/tokens.py: ceil(UTF-8 bytes / 3) + 3), the same
figure the quote held; a body that does report `usageMetadata.promptTokenCount` wins.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import urllib.parse
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from batchroute.domain.catalog import tokens
from batchroute.domain.routing.images import GEMINI_IMAGE_TYPES, sent_image_type
from batchroute.domain.routing.items import PENALTY_KEYS
from batchroute.providers import base
from batchroute.providers.conversation import (
    Conversation,
    HostedToolUse,
    ToolChoice,
    conversation,
    data_url_parts,
)
from batchroute.providers.hosted_tools import vendor_tool
from batchroute.providers.http import error_for_status, retry_after_seconds, vendor_message

API_VERSION: Final = "v1beta"
API_ROOT: Final = f"/{API_VERSION}"
MODELS_PATH: Final = f"{API_ROOT}/models"
BATCHES_PATH: Final = f"{API_ROOT}/batches"
MAX_EMBED_BATCH: Final = 100  # batchEmbedContents takes at most 100 requests per call
MAX_INLINE_BYTES = 20 * 1024 * 1024  # batch mode takes at most 20 MB of inlined requests
JSON_MIME: Final = "application/json"

# Batch mode's wire states (GenerateContentBatch.state) and the SDK's names for them.
JOB_STATES: Final[dict[str, base.JobState]] = {
    "PENDING": "validating",
    "RUNNING": "in_progress",
    "SUCCEEDED": "completed",
    "FAILED": "failed",
    "CANCELLED": "cancelled",
    "EXPIRED": "expired",
}
# A listed batch in one of these states is not taken for a retried submission's (`listed_batches`).
_OF_NO_USE: Final[frozenset[base.JobState]] = frozenset({"failed", "cancelled", "expired"})
# ... and for a canceled batch's look-up of the job a dead invocation made: only a failed one
# holds no finished answers.
NOTHING_KEPT: Final[frozenset[base.JobState]] = frozenset({"failed"})
# Finish reasons that mean a content filter stopped the answer: the item fails.
BLOCKED_FINISHES: Final = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)
# Finish reasons that mean the model made no usable answer (a function call it could not
# write, or one to a tool not offered, too many calls, a response it could not form): a
# transient failure (tried again, or failed over), never a finished answer stored and billed.
MALFORMED_FINISHES: Final = frozenset(
    {"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS", "MALFORMED_RESPONSE"}
)
# google.rpc.Code of a failed inlined batch response -> (our error code, transient).
RPC_CODES: Final[dict[int, tuple[str, bool]]] = {
    1: ("cancelled", True),
    2: ("provider_5xx", True),
    3: ("provider_rejected", False),
    4: ("provider_timeout", True),
    5: ("not_found", False),
    7: ("provider_auth_failed", False),
    8: ("rate_limited", True),
    9: ("provider_rejected", False),
    10: ("provider_5xx", True),
    11: ("provider_rejected", False),
    12: ("provider_rejected", False),
    13: ("provider_5xx", True),
    14: ("overloaded", True),
    15: ("provider_5xx", True),
    16: ("provider_auth_failed", False),
}
ADAPTER: Final = "gemini"  # this adapter's table in catalog/data/hosted_tools.toml
# The hosted tools' settings an item may give that the Gemini tool already means: the code
# interpreter's fresh container ({type: auto}) is how Gemini's code execution always runs.
_IMPLIED_SETTINGS: Final[dict[str, dict[str, Any]]] = {"python_execution": {"container": {"type": "auto"}}}
SEED_RANGE: Final = (-(2**31), 2**31 - 1)  # Gemini's seed is an int32
FUNCTION_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}")  # Gemini's function names
_BATCH_NAME: Final = re.compile(r"(batches/)?[A-Za-z0-9_-]{1,128}")
_DURATION: Final = re.compile(r"\s*(\d+(?:\.\d+)?)s\s*")
_MESSAGE_CHARS: Final = 300


# -- paths ---------------------------------------------------------------------------------
def model_name(provider_model_id: str) -> str:
    """The model's resource name: `models/<id>` (a tuned model's `tunedModels/...` as is)."""
    if provider_model_id.startswith(("models/", "tunedModels/")):
        return provider_model_id
    return f"models/{provider_model_id}"


def model_path(provider_model_id: str, method: str) -> str:
    return f"{API_ROOT}/{model_name(provider_model_id)}:{method}"


def batch_name(job_id: str) -> str | None:
    """The batch's resource name (`batches/<id>`); None for an id Gemini could not have given."""
    if not _BATCH_NAME.fullmatch(job_id):
        return None
    return job_id if job_id.startswith("batches/") else f"batches/{job_id}"


# -- requests ------------------------------------------------------------------------------
def generate_body(request: base.ProviderRequest) -> dict[str, Any]:
    """A `generateContent` / `streamGenerateContent` request body (GenerateContentRequest).
    Raises PermanentProviderError (`unsupported_parameter`, `invalid_item`) for what Gemini
    cannot be sent as the item says it: nothing is dropped on the way."""
    talk = conversation(request.input)
    contents = _contents(talk)
    if not contents:
        raise base.PermanentProviderError("the item has no message to send", code="invalid_item")
    body: dict[str, Any] = {"contents": contents}
    if talk.system:
        body["systemInstruction"] = {"parts": [{"text": talk.system}]}
    tools, config = _tools(talk)
    if tools:
        body["tools"] = tools
    if config is not None:
        body["toolConfig"] = {"functionCallingConfig": config}
    generation = _generation_config(request, talk)
    if generation:
        body["generationConfig"] = generation
    return body


def _contents(talk: Conversation) -> list[dict[str, Any]]:
    """The turns as Gemini's contents: consecutive assistant turns become one model turn (a
    text then its tool calls), a tool turn's answers one user turn of functionResponses."""
    names: dict[str, str] = {}  # tool_call id -> function name, for the answers that follow
    contents: list[dict[str, Any]] = []
    for message in talk.messages:
        role = message.get("role")
        if isinstance(message.get("name"), str):
            raise base.PermanentProviderError(
                "Gemini's turns carry no participant name (`name`)", code="unsupported_parameter"
            )
        last = contents[-1] if contents else None
        if role in ("tool", "function"):
            part = _function_response(message, names)
            if last is not None and last["role"] == "user" and "functionResponse" in last["parts"][-1]:
                last["parts"].append(part)  # one turn answers all the calls of the one before
            else:
                contents.append({"role": "user", "parts": [part]})
            continue
        parts = _parts(message.get("content"))
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                if isinstance(call, Mapping):
                    parts.append(_function_call(call, names))
        if not parts:
            continue
        gemini_role = "model" if role == "assistant" else "user"
        if gemini_role == "model" and last is not None and last["role"] == "model":
            last["parts"].extend(parts)
        else:
            contents.append({"role": gemini_role, "parts": parts})
    _check_turns(contents)
    return contents


def _check_turns(contents: Sequence[Mapping[str, Any]]) -> None:
    """Gemini's turn rules for tool calls: a call turn follows a user turn, and the turn after
    it answers every call (and only those)."""
    for index, content in enumerate(contents):
        calls = [p["functionCall"] for p in content["parts"] if "functionCall" in p]
        if not calls:
            if content["role"] == "user" and "functionResponse" in content["parts"][0]:
                before = contents[index - 1] if index else None
                if before is None or not any("functionCall" in p for p in before["parts"]):
                    raise base.PermanentProviderError(
                        "a tool result must answer the tool calls of the turn just before it",
                        code="invalid_item",
                    )
            continue
        if index == 0 or contents[index - 1]["role"] != "user":
            raise base.PermanentProviderError(
                "Gemini wants a user turn before the assistant's tool calls; the conversation opens "
                "with them",
                code="unsupported_parameter",
            )
        after = contents[index + 1]["parts"] if index + 1 < len(contents) else []
        answers = [p["functionResponse"] for p in after if "functionResponse" in p]
        asked = {str(c.get("id") or c.get("name")) for c in calls}
        answered = {str(a.get("id") or a.get("name")) for a in answers}
        if len(answers) != len(calls) or asked != answered:
            missing = sorted((asked - answered) | (answered - asked)) or sorted(asked)
            raise base.PermanentProviderError(
                "every tool call needs its result in the next turn, and every result a call in the "
                f"turn before: {', '.join(missing)}",
                code="invalid_item",
            )


def _parts(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if part.get("type") == "text" and part.get("text"):
            parts.append({"text": str(part["text"])})
        elif part.get("type") == "image_url":
            parts.append(_image(str(part["image_url"]["url"])))
    return parts


def _image(url: str) -> dict[str, Any]:
    """An image by URL, with the media type Gemini requires of every image part: a `data:`
    URL's bytes inline (base64, its media type without parameters), any other URL as file data
    for Google to fetch, its type the one its path's extension names. Refused when the URL
    tells no type (Gemini would refuse a `fileData` without one), or one that is not among
    Gemini's image types (a GIF): domain/routing/images.py."""
    media_type = sent_image_type(url)  # a data: URL's bytes tell
    if media_type is None:
        raise base.PermanentProviderError(
            "Gemini needs an image's type, and this image URL does not tell it: give a data: URL "
            f"or a URL whose path ends in .png, .jpg, .webp, .heic or .heif ({url[:80]})",
            code="unsupported_image_source",
        )
    if media_type not in GEMINI_IMAGE_TYPES:
        raise base.PermanentProviderError(
            f"Gemini takes png, jpeg, webp, heic and heif images, not {media_type}",
            code="unsupported_image_format",
        )
    inline = data_url_parts(url)
    if inline is not None:
        return {"inlineData": {"mimeType": media_type, "data": _base64_data(inline[1], url)}}
    if url.startswith("data:"):  # a data URL without ;base64: its bytes, percent-encoded
        data = url[5:].partition(",")[2]
        encoded = base64.b64encode(urllib.parse.unquote_to_bytes(data)).decode("ascii")
        return {"inlineData": {"mimeType": media_type, "data": encoded}}
    return {"fileData": {"fileUri": url, "mimeType": media_type}}


def _base64_data(data: str, url: str) -> str:
    try:
        base64.b64decode(data + "=" * (-len(data) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise base.PermanentProviderError(
            f"the image data URL is not base64 ({url[:40]}...)", code="invalid_item"
        ) from exc
    return data


def _function_call(call: Mapping[str, Any], names: dict[str, str]) -> dict[str, Any]:
    function = _mapping(call.get("function"))
    name = str(function.get("name") or call.get("name") or "")
    arguments = function.get("arguments", call.get("arguments"))
    try:
        args = json.loads(arguments) if isinstance(arguments, str) and arguments else arguments
    except ValueError as exc:
        raise base.PermanentProviderError(
            f"the arguments of tool call {name!r} are not JSON", code="invalid_item"
        ) from exc
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise base.PermanentProviderError(
            f"the arguments of tool call {name!r} are not a JSON object", code="invalid_item"
        )
    ident = call.get("id")
    piece: dict[str, Any] = {"name": name, "args": dict(args)}
    if isinstance(ident, str) and ident:
        piece["id"] = ident
        names[ident] = name
    part: dict[str, Any] = {"functionCall": piece}
    signature = _mapping(_mapping(call.get("extra_content")).get("google")).get("thought_signature")
    if isinstance(signature, str) and signature:
        part["thoughtSignature"] = signature
    return part


def _function_response(message: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    ident = message.get("tool_call_id")
    name = names.get(str(ident)) or message.get("name") or ident or "function"
    text = message.get("content")
    text = text if isinstance(text, str) else json.dumps(text)
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    # Gemini wants an object: a JSON object answer as it is, anything else under "output".
    response = parsed if isinstance(parsed, dict) else {"output": text}
    piece: dict[str, Any] = {"name": str(name), "response": response}
    if isinstance(ident, str) and ident:
        piece["id"] = ident
    return {"functionResponse": piece}


def _generation_config(request: base.ProviderRequest, talk: Conversation) -> dict[str, Any]:
    options = talk.options
    config: dict[str, Any] = {}
    if request.max_output_tokens > 0:
        config["maxOutputTokens"] = request.max_output_tokens
    if request.sampling and "temperature" in options:
        config["temperature"] = options["temperature"]
    if request.sampling and "top_p" in options:
        config["topP"] = options["top_p"]
    stop = options.get("stop")
    stops = [s for s in (stop if isinstance(stop, list) else [stop]) if isinstance(s, str) and s]
    if stops:
        config["stopSequences"] = stops
    for penalty in PENALTY_KEYS:
        if penalty in options:  # routing sends none here: Google's lanes do not offer `penalties`
            raise base.PermanentProviderError(
                f"this service does not send {penalty} to Gemini", code="unsupported_parameter"
            )
    if "seed" in options:
        seed = options["seed"]
        if not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
            raise base.PermanentProviderError(
                f"Gemini's seed is a 32-bit integer; the item's seed {seed} is out of its range",
                code="unsupported_parameter",
            )
        config["seed"] = seed
    fmt = talk.response_format
    if fmt is not None:
        config["responseMimeType"] = JSON_MIME
        schema = _mapping(fmt.get("json_schema")).get("schema")
        if fmt.get("type") == "json_schema" and isinstance(schema, Mapping):
            key, value = schema_field(schema, subset_key="responseSchema", json_key="responseJsonSchema")
            config[key] = value
    return config


def _tools(talk: Conversation) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Gemini's `tools` and functionCallingConfig. Gemini cannot force a built-in tool, nor
    keep a declared one from being used: a tool_choice naming a hosted tool declares it and
    keeps the functions from being called (NONE), `required` without functions leaves the
    model free, and under `none` the normal form holds no hosted tool (providers/conversation.py;
    docs/providers.md, Google Gemini)."""
    if talk.serial_tools:  # routing sends none here: Google's lanes do not offer `serial_tool_calls`
        raise base.PermanentProviderError(
            "Gemini takes no parallel_tool_calls: false (it has no such switch)", code="unsupported_parameter"
        )
    choice = talk.tool_choice
    hosted = list(talk.hosted_tools)
    if choice is not None and choice.mode == "hosted" and all(h.name != choice.name for h in hosted):
        hosted.append(HostedToolUse(str(choice.name)))
    declarations = [_declaration(f.chat()["function"]) for f in talk.functions]
    tools: list[dict[str, Any]] = [{"functionDeclarations": declarations}] if declarations else []
    tools.extend(_hosted_tool(h) for h in hosted)
    config = _calling_config(choice) if declarations and choice is not None else None
    return tools, config


def _hosted_tool(hosted: HostedToolUse) -> dict[str, Any]:
    declared = vendor_tool(ADAPTER, hosted.name)
    if declared is None:
        raise base.PermanentProviderError(f"Gemini runs no {hosted.name} tool", code="tool_not_supported")
    implied = _IMPLIED_SETTINGS.get(hosted.name, {})
    extra = sorted(k for k, v in hosted.config.items() if implied.get(k) != v)
    if extra:
        raise base.PermanentProviderError(
            f"Gemini's {hosted.name} takes no settings ({', '.join(extra)})", code="unsupported_parameter"
        )
    return declared


def _declaration(function: Mapping[str, Any]) -> dict[str, Any]:
    """A function declaration; an object schema without properties (a function of no
    arguments) declares no parameters, as Gemini wants it."""
    name = str(function.get("name") or "")
    if not FUNCTION_NAME.fullmatch(name):
        raise base.PermanentProviderError(
            f"Gemini's function names start with a letter or an underscore; {name!r} does not",
            code="unsupported_parameter",
        )
    declaration: dict[str, Any] = {"name": name}
    if function.get("description"):
        declaration["description"] = str(function["description"])
    parameters = function.get("parameters")
    if isinstance(parameters, Mapping) and parameters and not _no_arguments(parameters):
        key, value = schema_field(parameters, subset_key="parameters", json_key="parametersJsonSchema")
        declaration[key] = value
    return declaration


def _no_arguments(schema: Mapping[str, Any]) -> bool:
    """{type: object} with no properties (and nothing else that says more)."""
    said = {k for k, v in schema.items() if k not in ("$schema", "description", "title")}
    said -= {"additionalProperties"} if schema.get("additionalProperties") is False else set()
    said -= {"properties"} if schema.get("properties") == {} else set()
    said -= {"required"} if schema.get("required") == [] else set()
    return schema.get("type") == "object" and said == {"type"}


def _calling_config(choice: ToolChoice) -> dict[str, Any]:
    if choice.mode == "function":
        return {"mode": "ANY", "allowedFunctionNames": [str(choice.name)]}
    if choice.mode == "hosted":  # the hosted tool, not a function
        return {"mode": "NONE"}
    return {"mode": {"none": "NONE", "required": "ANY"}.get(choice.mode, "AUTO")}


# Gemini's Schema (an OpenAPI 3.0 subset): the keywords a JSON Schema may use to go as-is.
_SCHEMA_WORDS: Final = frozenset(
    {
        "description",
        "title",
        "enum",
        "maxItems",
        "minItems",
        "maximum",
        "minimum",
        "maxLength",
        "minLength",
        "maxProperties",
        "minProperties",
        "pattern",
        "required",
        "nullable",
        "propertyOrdering",
        "default",
        "example",
    }
)
_SCHEMA_TYPES: Final = frozenset({"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"})
_SCHEMA_FORMATS: Final = frozenset({"date-time", "enum", "float", "double", "int32", "int64"})
_SCHEMA_TEXT: Final = frozenset({"description", "title", "pattern"})
_SCHEMA_COUNTS: Final = frozenset(
    {"maxItems", "minItems", "maxLength", "minLength", "maxProperties", "minProperties"}
)


def schema_field(schema: Mapping[str, Any], *, subset_key: str, json_key: str) -> tuple[str, Any]:
    """(`responseSchema`, converted) when Gemini's Schema can say the whole JSON Schema
    (every model takes it), else (`responseJsonSchema`, the schema as given); the same for
    a function's `parameters` / `parametersJsonSchema`."""
    converted = gemini_schema(schema)
    return (subset_key, converted) if converted is not None else (json_key, dict(schema))


def gemini_schema(node: object) -> dict[str, Any] | None:
    """A JSON Schema as Gemini's Schema; None when it uses a keyword the subset lacks
    ($ref, oneOf, several types, a non-string enum...)."""
    if not isinstance(node, Mapping):
        return None
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("$schema", "$id") or (key == "additionalProperties" and value is False):
            continue  # no meaning to Gemini (it never adds properties of its own)
        if key == "type":
            kinds = value if isinstance(value, list) else [value]
            named = [k for k in kinds if k != "null"]
            if len(named) != 1 or not isinstance(named[0], str):
                return None
            out["type"] = named[0].upper()
            if out["type"] not in _SCHEMA_TYPES:
                return None
            if len(named) < len(kinds):
                out["nullable"] = True
        elif key == "properties" and isinstance(value, Mapping):
            props = {str(k): gemini_schema(v) for k, v in value.items()}
            if any(v is None for v in props.values()):
                return None
            out["properties"] = props
        elif key in ("items", "anyOf"):
            inner = [gemini_schema(v) for v in value] if key == "anyOf" else gemini_schema(value)
            if inner is None or (isinstance(inner, list) and (not inner or None in inner)):
                return None
            out[key] = inner
        elif key == "const" and isinstance(value, str):
            out["enum"] = [value]
        elif _subset_word(key, value):
            out[key] = value
        else:
            return None
    if out.get("type") == "OBJECT" and not out.get("properties"):
        return None  # Gemini's OBJECT names its properties; JSON Schema says the rest
    return out


def _subset_word(key: str, value: object) -> bool:
    """A JSON Schema keyword Gemini's Schema has, with a value of the type it takes."""
    if key == "enum":  # Gemini's enums are strings
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if key == "format":
        return value in _SCHEMA_FORMATS
    if key in _SCHEMA_TEXT:
        return isinstance(value, str)
    if key in _SCHEMA_COUNTS:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if key in ("minimum", "maximum"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if key in ("required", "propertyOrdering"):
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if key == "nullable":
        return isinstance(value, bool)
    return key in _SCHEMA_WORDS


def embed_inputs(request: base.ProviderRequest) -> tuple[list[str], bool]:
    """The texts of an embeddings item and whether it gave one string (not a list). Token-id
    arrays have no Gemini form (Gemini embeds text): refused, `unsupported_parameter`."""
    value = request.input.get("input", request.input.get("text"))
    if isinstance(value, str):
        return [value], True
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value), False
    raise base.PermanentProviderError(
        "Gemini embeds text: input must be a string or a list of strings, not token ids",
        code="unsupported_parameter",
    )


def embed_body(request: base.ProviderRequest, text: str) -> dict[str, Any]:
    """An `embedContent` request (EmbedContentRequest); also one of `batchEmbedContents`."""
    body: dict[str, Any] = {
        "model": model_name(request.provider_model_id),
        "content": {"parts": [{"text": text}]},
    }
    dimensions = request.input.get("dimensions")
    if isinstance(dimensions, int) and not isinstance(dimensions, bool):
        body["outputDimensionality"] = dimensions
    return body


def batch_embed_bodies(request: base.ProviderRequest, texts: Sequence[str]) -> list[dict[str, Any]]:
    """`batchEmbedContents` bodies, at most MAX_EMBED_BATCH texts each, in input order."""
    return [
        {"requests": [embed_body(request, text) for text in texts[start : start + MAX_EMBED_BATCH]]}
        for start in range(0, len(texts), MAX_EMBED_BATCH)
    ]


def batch_body(requests: Sequence[base.ProviderRequest], *, key: str | None = None) -> dict[str, Any]:
    """A `batchGenerateContent` body: every request inlined, keyed by its custom_id (at most
    MAX_INLINE_BYTES in all: a larger job is refused, `batch_too_large`); its displayName
    carries the submission's `key` when there is one."""
    inlined = []
    for request in requests:
        if request.operation == "embeddings":
            raise base.PermanentProviderError(
                "Gemini batch mode runs generateContent requests here; embeddings go one by one",
                code="invalid_item",
            )
        inlined.append({"request": generate_body(request), "metadata": {"key": request.custom_id}})
    body = {
        "batch": {
            "displayName": batch_display_name(key) if key else f"batchroute {len(inlined)} requests",
            "inputConfig": {"requests": {"requests": inlined}},
        }
    }
    size = len(json.dumps(body, separators=(",", ":")).encode())
    if size > MAX_INLINE_BYTES:  # refused here rather than after uploading it
        raise base.PermanentProviderError(
            f"the job's inlined requests are {size} bytes; Gemini batch mode takes at most "
            f"{MAX_INLINE_BYTES} inline",
            code="batch_too_large",
        )
    return body


# -- answers -------------------------------------------------------------------------------
def finish_reason(value: object) -> base.FinishReason:
    return "length" if value == "MAX_TOKENS" else "stop"


def usage(meta: object, tools: Mapping[str, int] | None = None) -> base.Usage:
    """Gemini's usageMetadata as ours (tool-use prompt tokens are input, thinking is output),
    with the hosted tool uses Google bills (`tool_uses`)."""
    found = _mapping(meta)
    prompt = _int(found.get("promptTokenCount")) + _int(found.get("toolUsePromptTokenCount"))
    completion = _int(found.get("candidatesTokenCount")) + _int(found.get("thoughtsTokenCount"))
    cached = _int(found.get("cachedContentTokenCount"))  # within promptTokenCount
    return base.Usage(prompt, completion, tuple(sorted((tools or {}).items())), cached_input_tokens=cached)


def tool_uses(candidate: Mapping[str, Any]) -> dict[str, int]:
    """The hosted tools an answer used, by the service's names: `web_search` once when the
    answer was grounded with Google Search (groundingMetadata names its searches: Google bills
    per grounded prompt), `python_execution` once per executableCode part."""
    counts: dict[str, int] = {}
    grounding = _mapping(candidate.get("groundingMetadata"))
    if grounding.get("webSearchQueries"):
        counts["web_search"] = 1
    parts = _mapping(candidate.get("content")).get("parts") or []
    runs = sum(1 for p in parts if isinstance(p, Mapping) and "executableCode" in p)
    if runs:
        counts["python_execution"] = runs
    return counts


def blocked(body: Mapping[str, Any]) -> base.ItemError | None:
    """The content filter's refusal in a GenerateContentResponse, if any."""
    feedback = _mapping(body.get("promptFeedback"))
    reason = feedback.get("blockReason")
    if reason:
        why = f": {feedback['blockReasonMessage']}" if feedback.get("blockReasonMessage") else ""
        return base.ItemError(
            "content_blocked", f"Gemini blocked the prompt ({reason}){why}"[:_MESSAGE_CHARS]
        )
    for candidate in body.get("candidates") or []:
        finish = _mapping(candidate).get("finishReason")
        if finish in BLOCKED_FINISHES:
            return base.ItemError("content_blocked", f"Gemini stopped the answer ({finish})")
    return None


def call_id(call: Mapping[str, Any], response_id: str, index: int) -> str:
    """Gemini's own id of a function call, else one of ours unique to the answer: its response's
    id and the call's place in it. (`call_<index>` alone repeated in every turn of a tool
    loop, and a client keying tool answers by id mixed the turns up.)"""
    given = call.get("id")
    return str(given) if given else f"call_{response_id or uuid.uuid4().hex[:24]}_{index}"


def tool_calls(parts: Sequence[object], response_id: str) -> list[dict[str, Any]]:
    """functionCall parts as chat-completions tool calls (`response_id`: call_id's)."""
    calls: list[dict[str, Any]] = []
    for part in parts:
        call = _mapping(_mapping(part).get("functionCall"))
        if not call:
            continue
        entry: dict[str, Any] = {
            "id": call_id(call, response_id, len(calls)),
            "type": "function",
            "function": {
                "name": str(call.get("name") or ""),
                "arguments": json.dumps(call.get("args") or {}, separators=(",", ":")),
            },
        }
        signature = _mapping(part).get("thoughtSignature")
        if isinstance(signature, str) and signature:
            entry["extra_content"] = {"google": {"thought_signature": signature}}
        calls.append(entry)
    return calls


def answer_text(parts: Sequence[object]) -> str:
    return "".join(
        str(p["text"])
        for p in (_mapping(part) for part in parts)
        if isinstance(p.get("text"), str) and not p.get("thought")
    )


def generate_result(custom_id: str, body: Mapping[str, Any]) -> base.ProviderResult:
    """A GenerateContentResponse as our normalized message (or a failed result)."""
    refusal = blocked(body)
    if refusal is not None:
        return base.ProviderResult.failure(custom_id, refusal, raw=dict(body))
    candidates = body.get("candidates") or []
    if not candidates:
        error = base.ItemError("provider_bad_response", "Gemini answered without a candidate", transient=True)
        return base.ProviderResult.failure(custom_id, error, raw=dict(body))
    candidate = _mapping(candidates[0])
    if candidate.get("finishReason") in MALFORMED_FINISHES:
        finish = candidate["finishReason"]
        error = base.ItemError(
            "model_output_malformed", f"Gemini made no usable answer (finishReason {finish})", transient=True
        )
        return base.ProviderResult.failure(custom_id, error, raw=dict(body))
    parts = _mapping(candidate.get("content")).get("parts") or []
    output: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "content": answer_text(parts),
        "finish_reason": finish_reason(candidate.get("finishReason")),
    }
    calls = tool_calls(parts, str(body.get("responseId") or ""))
    if calls:
        output["tool_calls"] = calls
        if output["finish_reason"] == "stop":  # Gemini says STOP; OpenAI's form says why
            output["finish_reason"] = "tool_calls"
    billed = usage(body.get("usageMetadata"), tool_uses(candidate))
    return base.ProviderResult(custom_id, "completed", output=output, raw=dict(body), usage=billed)


@dataclass
class StreamAccumulator:
    """What a `streamGenerateContent?alt=sse` stream has said so far. Every event is a
    GenerateContentResponse chunk: text (and functionCall) parts to join, the finish reason
    on the last, usageMetadata growing to its final figures on the last. `raw` is the one
    GenerateContentResponse the chunks add up to."""

    custom_id: str
    pieces: list[str] = field(default_factory=list)
    # the other parts as sent (functionCall, executableCode, codeExecutionResult), in order
    calls: list[dict[str, Any]] = field(default_factory=list)
    grounding: dict[str, Any] = field(default_factory=dict)  # the candidate's groundingMetadata
    finish: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    model_version: str = ""
    response_id: str = ""
    fresh: list[base.ToolCallDelta] = field(default_factory=list)  # since the last delta()
    call_count: int = 0

    def add(self, chunk: Mapping[str, Any], *, vendor: str = "google") -> str:
        """Take one chunk; the text it adds ("" for none). Raises the error a chunk carries
        and PermanentProviderError `content_blocked` when a filter stops the answer."""
        if isinstance(chunk.get("error"), Mapping):
            raise stream_error(chunk["error"], vendor=vendor)
        refusal = blocked(chunk)
        if refusal is not None:
            raise base.PermanentProviderError(refusal.message, code=refusal.code)
        self.model_version = str(chunk.get("modelVersion") or self.model_version)
        self.response_id = str(chunk.get("responseId") or self.response_id)
        if isinstance(chunk.get("usageMetadata"), Mapping):
            self.meta = dict(chunk["usageMetadata"])
        text = ""
        for candidate in chunk.get("candidates") or []:
            found = _mapping(candidate)
            parts = _mapping(found.get("content")).get("parts") or []
            text += answer_text(parts)
            self.calls.extend(dict(p) for p in parts if isinstance(p, Mapping) and _tool_part(p))
            for part in parts:  # Gemini sends each functionCall whole: one delta, as tool_calls()
                call = _mapping(_mapping(part).get("functionCall"))
                if not call:
                    continue
                self.fresh.append(
                    base.ToolCallDelta(
                        self.call_count,
                        call_id(call, self.response_id, self.call_count),
                        str(call.get("name") or ""),
                        json.dumps(call.get("args") or {}, separators=(",", ":")),
                    )
                )
                self.call_count += 1
            if isinstance(found.get("groundingMetadata"), Mapping):
                self.grounding = dict(found["groundingMetadata"])
            if found.get("finishReason"):
                self.finish = str(found["finishReason"])
        if text:
            self.pieces.append(text)
        return text

    def delta(self, text: str) -> base.StreamDelta | None:
        """What the last chunk adds to the answer (None for nothing), with the usage Gemini
        has reported so far (every chunk's usageMetadata: the prompt, the output so far)."""
        return base.stream_delta(text, self.fresh, usage=usage(self.meta) if self.meta else None)

    @property
    def finished(self) -> bool:
        return self.finish is not None

    def result(self) -> base.ProviderResult:
        content = "".join(self.pieces)
        parts: list[dict[str, Any]] = [{"text": content}] if content else []
        candidate: dict[str, Any] = {
            "content": {"role": "model", "parts": parts + self.calls},
            "finishReason": self.finish or "STOP",
        }
        if self.grounding:
            candidate["groundingMetadata"] = self.grounding
        raw: dict[str, Any] = {
            "candidates": [candidate],
            "usageMetadata": self.meta,
            "modelVersion": self.model_version,
            "responseId": self.response_id,
        }
        return generate_result(self.custom_id, raw)


def _tool_part(part: Mapping[str, Any]) -> bool:
    return any(key in part for key in ("functionCall", "executableCode", "codeExecutionResult"))


def embeddings_result(
    custom_id: str, texts: Sequence[str], answers: Sequence[Mapping[str, Any]], *, single: bool
) -> base.ProviderResult:
    """`embedContent` ({embedding}) or `batchEmbedContents` ({embeddings}) answers, in input
    order, as our normalized embedding(s)."""
    vectors: list[list[float]] = []
    for answer in answers:
        if isinstance(answer.get("embedding"), Mapping):
            vectors.append(list(answer["embedding"].get("values") or []))
        vectors.extend(list(_mapping(e).get("values") or []) for e in answer.get("embeddings") or [])
    if len(vectors) != len(texts):
        error = base.ItemError(
            "provider_bad_response",
            f"Gemini answered {len(vectors)} embeddings for {len(texts)} inputs",
            transient=True,
        )
        return base.ProviderResult.failure(custom_id, error)
    output: dict[str, Any] = {"type": "embedding", "dimensions": len(vectors[0]) if vectors else 0}
    if single:
        output["embedding"] = vectors[0]
        raw = dict(answers[0])
    else:
        output["embeddings"] = vectors
        raw = {"embeddings": [{"values": v} for v in vectors]}
    return base.ProviderResult(
        custom_id, "completed", output=output, raw=raw, usage=base.Usage(_embedding_tokens(texts, answers), 0)
    )


def _embedding_tokens(texts: Sequence[str], answers: Sequence[Mapping[str, Any]]) -> int:
    reported = [_mapping(a.get("usageMetadata")).get("promptTokenCount") for a in answers]
    if reported and all(isinstance(r, int) for r in reported):
        return sum(_int(r) for r in reported)
    text_bytes = sum(tokens.utf8_len(t) for t in texts)
    return tokens.prompt_tokens(text_bytes=text_bytes, messages=0, images=0)


# -- batch jobs ----------------------------------------------------------------------------
def job_state(value: object) -> base.JobState:
    """GenerateContentBatch.state (`BATCH_STATE_RUNNING`) or the SDK's `JOB_STATE_RUNNING`."""
    name = str(value or "")
    for prefix in ("BATCH_STATE_", "JOB_STATE_"):
        name = name.removeprefix(prefix)
    return JOB_STATES.get(name, "in_progress")


def job_status(operation: Mapping[str, Any]) -> base.JobStatus:
    """A batch's long-running operation (create, get) as our JobStatus."""
    batch = _mapping(operation.get("metadata"))
    stats = _mapping(batch.get("batchStats"))
    failure = _mapping(operation.get("error"))  # a google.rpc.Status: why the whole batch failed
    errors = (
        (
            base.ItemError(
                code="provider_rejected",
                message=f"{failure.get('message') or 'the batch failed'} (code {failure.get('code')})"[:300],
            ),
        )
        if failure
        else ()
    )
    return base.JobStatus(
        state=job_state(batch.get("state")),
        total=_int(stats.get("requestCount")),
        completed_count=_int(stats.get("successfulRequestCount")),
        failed_count=_int(stats.get("failedRequestCount")),
        errors=errors,
    )


def batch_display_name(key: str) -> str:
    """The displayName of submission `key`'s batch, where a retry of the submission finds the
    batch its lost first try made (`listed_batches`)."""
    return f"batchroute {key}"


@dataclass(frozen=True)
class ListedBatch:
    """One operation of a `GET /batches` page, as a retried submission's look-up reads it."""

    name: str  # batches/<id>
    created: float  # metadata.createTime, seconds since the epoch on Google's clock
    taken: bool  # the submission's (displayName) for its model, and not failed, cancelled or expired


def listed_batches(
    page: object, *, key: str, model: str | None, refused: frozenset[base.JobState] | None = None
) -> list[ListedBatch]:
    """The batches of a ListOperationsResponse page (`operations`) that have a name and a
    createTime; `taken` for those whose displayName is submission `key`'s, whose model is
    `model` (`models/<id>`; None: any) and whose state is not `refused` (by default those of
    no use to a submit: failed, cancelled, expired)."""
    refused = _OF_NO_USE if refused is None else refused
    found = []
    for entry in _mapping(page).get("operations") or []:
        operation = _mapping(entry)
        batch = _mapping(operation.get("metadata"))
        name, created = operation.get("name"), _seconds(batch.get("createTime"))
        if not isinstance(name, str) or batch_name(name) is None or created is None:
            continue
        taken = (
            batch.get("displayName") == batch_display_name(key)
            and model in (None, batch.get("model"))
            and job_state(batch.get("state")) not in refused
        )
        found.append(ListedBatch(name, created, taken))
    return found


def made_by(
    listed: Sequence[ListedBatch], *, window_seconds: float, not_before: float | None = None
) -> str | None:
    """The newest batch `taken` among those listed, made at or after `not_before`, else at
    most `window_seconds` before the newest listed: Google documents no list order, so the
    window is measured on the whole listing, never on where in it a batch comes."""
    if not listed:
        return None
    since = not_before if not_before is not None else max(b.created for b in listed) - window_seconds
    kept = [b for b in listed if b.taken and b.created >= since]
    return max(kept, key=lambda b: (b.created, b.name)).name if kept else None


def job_results(operation: Mapping[str, Any]) -> Iterator[base.ProviderResult]:
    """One result per inlined response that names its request (metadata.key)."""
    output = _mapping(_mapping(operation.get("metadata")).get("output")) or _mapping(
        operation.get("response")
    )
    for entry in _mapping(output.get("inlinedResponses")).get("inlinedResponses") or []:
        result = inlined_result(_mapping(entry))
        if result is not None:
            yield result


def inlined_result(entry: Mapping[str, Any]) -> base.ProviderResult | None:
    """One InlinedResponse: a GenerateContentResponse, or the google.rpc.Status it failed with."""
    key = _mapping(entry.get("metadata")).get("key")
    if not isinstance(key, str) or not key:
        return None
    if isinstance(entry.get("response"), Mapping):
        return generate_result(key, entry["response"])
    status = _mapping(entry.get("error"))
    code, transient = RPC_CODES.get(_int(status.get("code")), ("provider_rejected", False))
    message = str(status.get("message") or "the batch request failed")[:_MESSAGE_CHARS]
    return base.ProviderResult.failure(
        key,
        base.ItemError(code, message, transient=transient),
        raw={"error": dict(status)} if status else None,
    )


# -- errors --------------------------------------------------------------------------------
def status_error(
    status: int, headers: Mapping[str, str], body: bytes | str | None, *, vendor: str
) -> base.ProviderError:
    """A non-2xx answer (`{"error": {code, message, status, details}}`) as a provider error:
    the shared mapping (providers/http.py), refined by what Google's body says. A bad key
    is a 400 with reason API_KEY_INVALID and a region Gemini does not serve a 400
    FAILED_PRECONDITION: the lane is unusable, not the item. A 429 names its wait in
    google.rpc.RetryInfo, which wins over a Retry-After header."""
    error = _error_body(body)
    rpc_status = str(error.get("status") or "")
    details = [_mapping(d) for d in error.get("details") or []]
    message = f"{vendor} answered {status}: {vendor_message(body)}"
    reasons = {str(d.get("reason")) for d in details if d.get("reason")}
    if "API_KEY_INVALID" in reasons or rpc_status in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
        return base.ProviderUnavailable(message, code="provider_auth_failed")
    if rpc_status == "FAILED_PRECONDITION":
        return base.ProviderUnavailable(message, code="provider_precondition_failed")
    delay = _retry_delay(details)
    if delay is None:
        delay = retry_after_seconds(headers)
    if rpc_status == "DEADLINE_EXCEEDED":
        return base.TransientProviderError(message, code="provider_timeout", retry_after_seconds=delay)
    mapped = error_for_status(status, headers, body, vendor=vendor)
    if isinstance(mapped, base.TransientProviderError):
        mapped.retry_after_seconds = delay
    return mapped


def stream_error(error: Mapping[str, Any], *, vendor: str) -> base.ProviderError:
    """An error event inside a stream (`data: {"error": {...}}`): its code is an HTTP status."""
    status = _int(error.get("code")) or 500
    return status_error(status, {}, json.dumps({"error": dict(error)}), vendor=vendor)


def _error_body(body: bytes | str | None) -> Mapping[str, Any]:
    try:
        parsed = json.loads(body or b"null")
    except ValueError:
        return {}
    return _mapping(_mapping(parsed).get("error"))


def _retry_delay(details: Sequence[Mapping[str, Any]]) -> float | None:
    for detail in details:
        if str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            found = _DURATION.fullmatch(str(detail.get("retryDelay") or ""))
            if found:
                return min(float(found.group(1)), 900.0)
    return None


def _int(value: object) -> int:
    """A count as Gemini writes it: a number, or an int64 as a JSON string."""
    try:
        return int(value) if isinstance(value, int | str) and not isinstance(value, bool) else 0
    except ValueError:
        return 0


def _seconds(value: object) -> float | None:
    """An RFC 3339 timestamp as Google writes one (`2014-10-02T15:01:23.045123456Z`, or an
    offset) in seconds since the epoch; None for anything else."""
    try:
        found = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return found.timestamp() if found is not None and found.tzinfo is not None else None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
