"""Google's Gemini API request contract: what `generateContent` / `streamGenerateContent`,
`embedContent`, `batchEmbedContents` and `batchGenerateContent` (a batch with inlined
requests) accept, checked against the official google-genai SDK's request types (the
version pinned in pyproject.toml's dev extras, 3.6.1; REST JSON of API version v1beta) and the rules the API
enforces beyond the types (docs/providers.md, Google Gemini).

`request_violations(operation, body)` is [] for a body Google takes, else one string per
violation (its path, then why). The checks:

- the request envelopes the SDK has no type for (GenerateContentRequest, EmbedContentRequest,
  BatchEmbedContentsRequest, the batch and its inlined requests) are checked here by hand;
  every piece inside them is walked against the SDK's pydantic type (types.Content, Part,
  Tool, ToolConfig, GenerationConfig, SafetySetting, ...) by its REST name: a key the type
  lacks is a violation (so is a snake_case key: Google's proto JSON parser would take it, but
  what we send is camelCase, the REST reference's spelling), and so are a wrong JSON type,
  a value outside an enum (the SDK's enums take unknown values with a warning), a bad
  base64 string and a null;
- fields the SDK's Gemini Developer API converters refuse (Vertex AI only: a Tool's
  `retrieval`, a SafetySetting's `method`, ...) and GenerationConfig fields that are not the
  REST GenerationConfig's are violations, as are Schema keywords outside the Gemini API's
  OpenAPI subset (`additionalProperties`, `$ref`, `$defs`: they go in the *JsonSchema fields);
- the API's own rules: a Part holds exactly one datum (text, inlineData, ...), and no empty
  text; inlineData and fileData name their mimeType (the SDK's types leave it optional, the API
  requires it), an image one of Gemini's image types (png, jpeg, webp, heic, heif); roles are
  `user` or `model`; no empty `parts`; temperature 0-2, topP 0-1, candidateCount 1-8,
  maxOutputTokens >= 1, at most 5 stop sequences, seed an int32; responseSchema and
  responseJsonSchema (parameters and parametersJsonSchema) not both, and a schema only with a
  JSON (or enum) response type; an OBJECT Schema names its properties; function names are
  Google's (letter or underscore first, then letters, digits, `_ . : -`, at most 64) and
  unique; a functionCallingConfig only beside function declarations, allowedFunctionNames
  only with mode ANY (or VALIDATED) and naming declared functions; a function call turn
  follows a user turn, and a function response turn answers the call turn just before it with
  as many responses as it has calls; embedding requests 1-100 per batch, one model;
  a batch's inputConfig, inlined requests 20 MB at most.

`outgoing(request, endpoint, lane_max_output_tokens=...)` is every (operation, body) the
Gemini adapters send for a request, built by the transform functions the client calls.
Cheap to import: the SDK is loaded on the first check.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
import math
import re
import types as pytypes
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any, Final, Literal, Union, get_args, get_origin

if TYPE_CHECKING:
    from pydantic import BaseModel

    from batchroute.providers.base import ProviderRequest
    from batchroute.providers.endpoints import ProviderEndpoint

OPERATIONS: Final = ("generateContent", "embedContent", "batchEmbedContents", "batchGenerateContent")

GENERATE_FIELDS: Final = frozenset(
    {
        "model",
        "contents",
        "systemInstruction",
        "tools",
        "toolConfig",
        "safetySettings",
        "generationConfig",
        "cachedContent",
    }
)
# The REST GenerationConfig (what the SDK's converter writes under generationConfig).
CONFIG_FIELDS: Final = frozenset(
    {
        "stopSequences",
        "responseMimeType",
        "responseSchema",
        "responseJsonSchema",
        "responseModalities",
        "candidateCount",
        "maxOutputTokens",
        "temperature",
        "topP",
        "topK",
        "seed",
        "presencePenalty",
        "frequencyPenalty",
        "responseLogprobs",
        "logprobs",
        "enableEnhancedCivicAnswers",
        "speechConfig",
        "thinkingConfig",
        "mediaResolution",
        "imageConfig",
    }
)
# Fields of the SDK's types that its Gemini Developer API converters refuse (Vertex AI only),
# by type name, REST spelling (google-genai models.py `_*_to_mldev`).
NOT_IN_GEMINI_API: Final[dict[str, frozenset[str]]] = {
    "Tool": frozenset({"retrieval", "enterpriseWebSearch", "parallelAiSearch", "exaAiSearch"}),
    "SafetySetting": frozenset({"method"}),
    "FunctionCall": frozenset({"partialArgs", "willContinue"}),
    "FunctionCallingConfig": frozenset({"streamFunctionCallArguments"}),
    "GoogleSearch": frozenset({"blockingConfidence", "excludeDomains"}),
    "GoogleMaps": frozenset({"groundingTypes"}),
    "ImageConfig": frozenset(
        {
            "personGeneration",
            "prominentPeople",
            "outputMimeType",
            "outputCompressionQuality",
            "imageOutputOptions",
        }
    ),
    # the Gemini API's Schema is the OpenAPI subset: JSON Schema's own words go in *JsonSchema
    "Schema": frozenset({"additionalProperties", "defs", "ref"}),
}
EMBED_FIELDS: Final = frozenset({"model", "content", "taskType", "title", "outputDimensionality"})
TASK_TYPES: Final = frozenset(
    {
        "TASK_TYPE_UNSPECIFIED",
        "RETRIEVAL_QUERY",
        "RETRIEVAL_DOCUMENT",
        "SEMANTIC_SIMILARITY",
        "CLASSIFICATION",
        "CLUSTERING",
        "QUESTION_ANSWERING",
        "FACT_VERIFICATION",
        "CODE_RETRIEVAL_QUERY",
    }
)
BATCH_FIELDS: Final = frozenset({"model", "displayName", "inputConfig", "priority"})
# A Part's `data` oneof: exactly one of these.
PART_DATA: Final = (
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
    "toolCall",
    "toolResponse",
)
ROLES: Final = frozenset({"user", "model"})
RESPONSE_MIME_TYPES: Final = frozenset({"text/plain", "application/json", "text/x.enum"})
SCHEMA_MIME_TYPES: Final = frozenset({"application/json", "text/x.enum"})
JSON_MIME: Final = "application/json"
MAX_STOP_SEQUENCES: Final = 5
MAX_CANDIDATES: Final = 8
MAX_EMBED_REQUESTS: Final = 100
MAX_INLINE_BYTES: Final = 20 * 1024 * 1024
INT32: Final = (-(2**31), 2**31 - 1)
FUNCTION_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}")
MODEL_NAME: Final = re.compile(r"(models|tunedModels)/[A-Za-z0-9._-]+")
CACHED_CONTENT: Final = re.compile(r"cachedContents/[A-Za-z0-9_-]+")
MIME_TYPE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*")
# The image types Gemini takes (an inlineData / fileData image of another type is refused).
GEMINI_IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"})

Violations = list[str]


# -- the operations ----------------------------------------------------------------------------
def request_violations(operation: str, body: Any) -> list[str]:
    """[] when `body` is a request Google takes for `operation` ("generateContent", also the
    streamed call's; "embedContent"; "batchEmbedContents"; "batchGenerateContent"), else one
    string per violation: path, then why."""
    check = _CHECKS.get(operation)
    if check is None:
        return [f"{operation!r} is not a Gemini operation ({', '.join(OPERATIONS)})"]
    out: Violations = []
    check(body, "", out)
    return out


def _generate(body: Any, path: str, out: Violations) -> None:
    """A GenerateContentRequest."""
    if not _object(body, path or "(body)", out, GENERATE_FIELDS, "GenerateContentRequest"):
        return
    if "model" in body and not (isinstance(body["model"], str) and MODEL_NAME.fullmatch(body["model"])):
        out.append(f"{_at(path, 'model')}: a model resource name (models/<id>) is required here")
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        out.append(f"{_at(path, 'contents')}: contents is not specified (a non-empty list)")
    else:
        for index, content in enumerate(contents):
            _content(content, _at(path, f"contents[{index}]"), out)
        _turns(contents, path, out)
    if "systemInstruction" in body:
        _content(body["systemInstruction"], _at(path, "systemInstruction"), out, system=True)
    names = _tools(body.get("tools"), _at(path, "tools"), out) if "tools" in body else None
    if names and _built_in(body.get("tools")):
        # Gemini 2.x and 1.5 (the catalog's): a built-in tool and function declarations in one
        # request are refused, 400 INVALID_ARGUMENT (only Gemini 3 takes both, behind a flag)
        out.append(f"{_at(path, 'tools')}: Tool use with function calling is unsupported by the model.")
    config = body.get("generationConfig")
    json_answer = isinstance(config, Mapping) and config.get("responseMimeType") == JSON_MIME
    if _list(body.get("tools")) and json_answer:
        # Gemini 2.x and 1.5 answer JSON or call tools, not both: 400 INVALID_ARGUMENT
        kind = "Function calling" if names else "Tool use"
        out.append(f"{_at(path, 'tools')}: {kind} with a response mime type: '{JSON_MIME}' is unsupported")
    if "toolConfig" in body:
        _tool_config(body["toolConfig"], names, _at(path, "toolConfig"), out)
    if "safetySettings" in body:
        _safety(body["safetySettings"], _at(path, "safetySettings"), out)
    if "generationConfig" in body:
        _generation_config(body["generationConfig"], _at(path, "generationConfig"), out)
    cached = body.get("cachedContent")
    if "cachedContent" in body and not (isinstance(cached, str) and CACHED_CONTENT.fullmatch(cached)):
        out.append(f"{_at(path, 'cachedContent')}: a cachedContents/<id> name is required")


def _embed(body: Any, path: str, out: Violations, *, batched: bool = False) -> None:
    """An EmbedContentRequest (alone, or one of a batchEmbedContents)."""
    if not _object(body, path or "(body)", out, EMBED_FIELDS, "EmbedContentRequest"):
        return
    model = body.get("model")
    if (batched or "model" in body) and not (isinstance(model, str) and MODEL_NAME.fullmatch(model)):
        out.append(f"{_at(path, 'model')}: a model resource name (models/<id>) is required")
    if "content" not in body:
        out.append(f"{_at(path, 'content')}: content is not specified")
    else:
        _content(body["content"], _at(path, "content"), out, system=True)
    task = body.get("taskType")
    if "taskType" in body and not _among(task, TASK_TYPES):
        out.append(f"{_at(path, 'taskType')}: {task!r} is not a TaskType ({', '.join(sorted(TASK_TYPES))})")
    if "title" in body:
        if not isinstance(body["title"], str):
            out.append(f"{_at(path, 'title')}: a string is required")
        if task != "RETRIEVAL_DOCUMENT":
            out.append(f"{_at(path, 'title')}: a title is only applicable with taskType RETRIEVAL_DOCUMENT")
    if "outputDimensionality" in body:
        _integer(body["outputDimensionality"], _at(path, "outputDimensionality"), out, low=1)


def _embed_single(body: Any, path: str, out: Violations) -> None:
    _embed(body, path, out)


def _batch_embed(body: Any, path: str, out: Violations) -> None:
    """A BatchEmbedContentsRequest: 1-100 EmbedContentRequests, one model."""
    if not _object(body, path or "(body)", out, frozenset({"requests"}), "BatchEmbedContentsRequest"):
        return
    requests = body.get("requests")
    if not isinstance(requests, list) or not requests:
        out.append(f"{_at(path, 'requests')}: requests is not specified (a non-empty list)")
        return
    if len(requests) > MAX_EMBED_REQUESTS:
        out.append(f"{_at(path, 'requests')}: at most {MAX_EMBED_REQUESTS} requests, not {len(requests)}")
    for index, request in enumerate(requests):
        _embed(request, _at(path, f"requests[{index}]"), out, batched=True)
    models = {json.dumps(r.get("model"), default=str) for r in requests if isinstance(r, Mapping)}
    if len(models) > 1:
        out.append(f"{_at(path, 'requests')}: every request must name the same model")


def _batch_generate(body: Any, path: str, out: Violations) -> None:
    """A batchGenerateContent body: {batch: GenerateContentBatch} with inlined requests."""
    if not _object(body, path or "(body)", out, frozenset({"batch"}), "BatchGenerateContentRequest"):
        return
    batch = body.get("batch")
    where = _at(path, "batch")
    if not _object(batch, where, out, BATCH_FIELDS, "GenerateContentBatch"):
        return
    if "displayName" in batch and not isinstance(batch["displayName"], str):
        out.append(f"{_at(where, 'displayName')}: a string is required")
    if "model" in batch and not (isinstance(batch["model"], str) and MODEL_NAME.fullmatch(batch["model"])):
        out.append(f"{_at(where, 'model')}: a model resource name (models/<id>) is required here")
    if "priority" in batch and not isinstance(batch["priority"], int | str):
        out.append(f"{_at(where, 'priority')}: an int64 is required")
    source = batch.get("inputConfig")
    where = _at(where, "inputConfig")
    if not _object(source, where, out, frozenset({"fileName", "requests"}), "InputConfig"):
        return
    if len(source) != 1:
        out.append(f"{where}: exactly one of fileName and requests is required")
    if "fileName" in source and not isinstance(source["fileName"], str):
        out.append(f"{_at(where, 'fileName')}: a files/<id> name is required")
    if "requests" in source:
        _inlined(source["requests"], _at(where, "requests"), out)
    size = len(json.dumps(body, separators=(",", ":"), default=str).encode())
    if size > MAX_INLINE_BYTES:
        out.append(f"{where}: {size} bytes of inlined requests; at most {MAX_INLINE_BYTES}")


def _inlined(value: Any, path: str, out: Violations) -> None:
    if not _object(value, path, out, frozenset({"requests"}), "InlinedRequests"):
        return
    requests = value.get("requests")
    if not isinstance(requests, list) or not requests:
        out.append(f"{_at(path, 'requests')}: requests is not specified (a non-empty list)")
        return
    for index, entry in enumerate(requests):
        where = _at(path, f"requests[{index}]")
        if not _object(entry, where, out, frozenset({"request", "metadata"}), "InlinedRequest"):
            continue
        if "request" not in entry:
            out.append(f"{_at(where, 'request')}: request is not specified")
        else:
            _generate(entry["request"], _at(where, "request"), out)
        if "metadata" in entry and not isinstance(entry["metadata"], Mapping):
            out.append(f"{_at(where, 'metadata')}: an object (google.protobuf.Struct) is required")


_CHECKS: Final[dict[str, Callable[[Any, str, Violations], None]]] = {
    "generateContent": _generate,
    "streamGenerateContent": _generate,
    "embedContent": _embed_single,
    "batchEmbedContents": _batch_embed,
    "batchGenerateContent": _batch_generate,
}


# -- the pieces --------------------------------------------------------------------------------
def _content(value: Any, path: str, out: Violations, *, system: bool = False) -> None:
    if not _typed(_sdk().Content, value, path, out):
        return
    role = value.get("role")
    if "role" in value and not _among(role, ROLES) and not system:
        out.append(f"{_at(path, 'role')}: {role!r} is not a role; please use a valid role: user, model")
    parts = value.get("parts")
    if not isinstance(parts, list) or not parts:
        out.append(f"{_at(path, 'parts')}: parts must not be empty")
        return
    for index, part in enumerate(parts):
        if not isinstance(part, Mapping):
            continue
        data = [key for key in PART_DATA if key in part]
        if len(data) != 1:
            found = ", ".join(data) or "none"
            out.append(f"{_at(path, f'parts[{index}]')}: a Part holds exactly one datum ({found})")
        if part.get("text") == "":
            out.append(f"{_at(path, f'parts[{index}].text')}: an empty text parameter; add a value")
        for media in ("inlineData", "fileData"):
            if media in part:
                _media(part[media], media, _at(path, f"parts[{index}].{media}"), out)
        if "functionCall" in part:
            _required(part["functionCall"], ("name",), _at(path, f"parts[{index}].functionCall"), out)
        if "functionResponse" in part:
            _required(
                part["functionResponse"],
                ("name", "response"),
                _at(path, f"parts[{index}].functionResponse"),
                out,
            )
        if system and any(key in part for key in ("functionCall", "functionResponse")):
            out.append(f"{_at(path, f'parts[{index}]')}: function calls and responses belong to contents")


def _media(value: Any, kind: str, path: str, out: Violations) -> None:
    """An inlineData (Blob) or fileData (FileData) part's datum: its bytes or URI and its
    mimeType, both required (the SDK types them optional, the API refuses a part without
    them); an image's type one Gemini takes for images."""
    _required(value, ("mimeType", "data") if kind == "inlineData" else ("mimeType", "fileUri"), path, out)
    mime = value.get("mimeType") if isinstance(value, Mapping) else None
    if isinstance(mime, str) and mime:
        if not MIME_TYPE.fullmatch(mime):
            out.append(f"{path}.mimeType: {mime!r} is not a MIME type (type/subtype)")
        elif mime.lower().startswith("image/") and mime.lower() not in GEMINI_IMAGE_TYPES:
            out.append(
                f"{path}.mimeType: Unsupported MIME type: {mime} (images: "
                f"{', '.join(sorted(GEMINI_IMAGE_TYPES))})"
            )


def _turns(contents: list[Any], path: str, out: Violations) -> None:
    """Function call turns follow a user turn; a function response turn answers the call turn
    just before it, one response per call."""
    before: Mapping[str, Any] = {}
    for index, content in enumerate(contents):
        found = content if isinstance(content, Mapping) else {}
        parts = [p for p in _list(found.get("parts")) if isinstance(p, Mapping)]
        calls = sum("functionCall" in p for p in parts)
        answers = sum("functionResponse" in p for p in parts)
        role = found.get("role", "user")
        where = _at(path, f"contents[{index}]")
        if calls and role != "model":
            out.append(f"{where}: functionCall parts belong to a model turn")
        if answers and role != "user":
            out.append(f"{where}: functionResponse parts belong to a user turn")
        if calls and (index == 0 or before.get("role", "user") != "user"):
            out.append(
                f"{where}: a function call turn comes immediately after a user turn or a function "
                "response turn"
            )
        if answers:
            asked = sum("functionCall" in p for p in _list(before.get("parts")) if isinstance(p, Mapping))
            if not asked:
                out.append(f"{where}: a function response turn comes immediately after a function call turn")
            elif asked != answers:
                out.append(
                    f"{where}: {answers} function response parts answer {asked} function call parts; "
                    "the numbers must be equal"
                )
        before = found


def _tools(value: Any, path: str, out: Violations) -> set[str]:
    """Tools; the names of the functions they declare."""
    names: set[str] = set()
    if not isinstance(value, list):
        out.append(f"{path}: a list of Tool is required")
        return names
    for index, tool in enumerate(value):
        where = f"{path}[{index}]"
        if not _typed(_sdk().Tool, tool, where, out):
            continue
        if not tool:
            out.append(f"{where}: a Tool names one kind of tool at least")
        for number, declaration in enumerate(_list(tool.get("functionDeclarations"))):
            if not isinstance(declaration, Mapping):
                continue
            at = f"{where}.functionDeclarations[{number}]"
            name = declaration.get("name")
            if not isinstance(name, str) or not FUNCTION_NAME.fullmatch(name):
                out.append(
                    f"{at}.name: {name!r} is not a function name (a letter or _ first, then letters, "
                    "digits, _ . : -, at most 64)"
                )
            elif name in names:
                out.append(f"{at}.name: {name!r} is declared twice")
            names.add(str(name))
            for subset, json_key in (
                ("parameters", "parametersJsonSchema"),
                ("response", "responseJsonSchema"),
            ):
                if subset in declaration and json_key in declaration:
                    out.append(f"{at}: {subset} and {json_key} cannot both be set")
                if isinstance(declaration.get(subset), Mapping):
                    _schema_rules(declaration[subset], f"{at}.{subset}", out)
    return names


def _built_in(tools: Any) -> bool:
    """Whether `tools` holds one of Google's built-in tools (search, code execution, ...)."""
    kinds = {kind for tool in _list(tools) if isinstance(tool, Mapping) for kind in tool}
    return bool(kinds - {"functionDeclarations"})


def _tool_config(value: Any, names: set[str] | None, path: str, out: Violations) -> None:
    if not _typed(_sdk().ToolConfig, value, path, out):
        return
    calling = value.get("functionCallingConfig")
    if not isinstance(calling, Mapping):
        return
    where = f"{path}.functionCallingConfig"
    if not names:
        out.append(f"{where}: function calling config is set without function declarations")
    allowed = calling.get("allowedFunctionNames")
    if allowed is not None:
        if calling.get("mode") not in ("ANY", "VALIDATED"):
            out.append(f"{where}.allowedFunctionNames: only with mode ANY (or VALIDATED)")
        for name in allowed if isinstance(allowed, list) else []:
            if names and not _among(name, names):
                out.append(f"{where}.allowedFunctionNames: {name!r} is not a declared function")


def _safety(value: Any, path: str, out: Violations) -> None:
    if not isinstance(value, list):
        out.append(f"{path}: a list of SafetySetting is required")
        return
    seen: set[str] = set()
    for index, setting in enumerate(value):
        where = f"{path}[{index}]"
        if not _typed(_sdk().SafetySetting, setting, where, out):
            continue
        _required(setting, ("category", "threshold"), where, out)
        category = str(setting.get("category"))
        if category in seen:
            out.append(f"{where}.category: {category} is set twice")
        seen.add(category)


def _generation_config(value: Any, path: str, out: Violations) -> None:
    if not isinstance(value, Mapping):
        out.append(f"{path}: a GenerationConfig object is required")
        return
    for key in sorted(set(value) - CONFIG_FIELDS, key=str):
        out.append(f'{path}.{key}: Unknown name "{key}" in GenerationConfig: Cannot find field')
    known = {k: v for k, v in value.items() if k in CONFIG_FIELDS}
    # imageConfig is the REST GenerationConfig's, the SDK's GenerateContentConfig's (not in
    # its GenerationConfig type): checked as its own type
    _typed(_sdk().GenerationConfig, {k: v for k, v in known.items() if k != "imageConfig"}, path, out)
    if "imageConfig" in known:
        _typed(_sdk().ImageConfig, known["imageConfig"], f"{path}.imageConfig", out)
    ranges: dict[str, tuple[float, float]] = {"temperature": (0.0, 2.0), "topP": (0.0, 1.0)}
    for key, (low, high) in ranges.items():
        number = known.get(key)
        if isinstance(number, int | float) and not isinstance(number, bool) and not low <= number <= high:
            out.append(f"{path}.{key}: {number} is out of range [{low:g}, {high:g}]")
    for key in ("presencePenalty", "frequencyPenalty"):
        number = known.get(key)
        if isinstance(number, int | float) and not isinstance(number, bool) and not -2.0 <= number < 2.0:
            out.append(f"{path}.{key}: {number} is out of range [-2, 2)")
    if "maxOutputTokens" in known:
        _integer(known["maxOutputTokens"], f"{path}.maxOutputTokens", out, low=1)
    if "candidateCount" in known:
        _integer(known["candidateCount"], f"{path}.candidateCount", out, low=1, high=MAX_CANDIDATES)
    if "topK" in known:
        _integer(known["topK"], f"{path}.topK", out, low=1)
    if "seed" in known:
        _integer(known["seed"], f"{path}.seed", out, low=INT32[0], high=INT32[1])
    stops = known.get("stopSequences")
    if isinstance(stops, list):
        if len(stops) > MAX_STOP_SEQUENCES:
            out.append(f"{path}.stopSequences: at most {MAX_STOP_SEQUENCES} stop sequences, not {len(stops)}")
        if any(isinstance(s, str) and not s for s in stops):
            out.append(f"{path}.stopSequences: a stop sequence is not empty")
    mime = known.get("responseMimeType")
    if "responseMimeType" in known and not _among(mime, RESPONSE_MIME_TYPES):
        out.append(
            f"{path}.responseMimeType: {mime!r} is not one of {', '.join(sorted(RESPONSE_MIME_TYPES))}"
        )
    schemas = [k for k in ("responseSchema", "responseJsonSchema") if k in known]
    if len(schemas) == 2:
        out.append(f"{path}: responseSchema and responseJsonSchema cannot both be set")
    if schemas and not _among(mime, SCHEMA_MIME_TYPES):
        out.append(
            f"{path}.{schemas[0]}: a response schema needs responseMimeType application/json or text/x.enum"
        )
    if isinstance(known.get("responseSchema"), Mapping):
        _schema_rules(known["responseSchema"], f"{path}.responseSchema", out)


def _schema_rules(schema: Mapping[str, Any], path: str, out: Violations) -> None:
    """What the API checks of a Schema beyond its type: an OBJECT names its properties."""
    if schema.get("type") == "OBJECT" and not schema.get("properties"):
        out.append(f"{path}.properties: should be non-empty for OBJECT type")
    for key, inner in (
        (schema.get("properties") or {}).items() if isinstance(schema.get("properties"), Mapping) else ()
    ):
        if isinstance(inner, Mapping):
            _schema_rules(inner, f"{path}.properties.{key}", out)
    if isinstance(schema.get("items"), Mapping):
        _schema_rules(schema["items"], f"{path}.items", out)
    for index, inner in enumerate(_list(schema.get("anyOf"))):
        if isinstance(inner, Mapping):
            _schema_rules(inner, f"{path}.anyOf[{index}]", out)


def warm() -> None:
    """Import the SDK now (about a second), so the first check is as quick as the rest (the
    emulator calls it in the background at start)."""
    request_violations("generateContent", {"contents": [{"role": "user", "parts": [{"text": "warm"}]}]})


# -- the SDK's types, walked by their REST names ------------------------------------------------
@cache
def _sdk() -> Any:
    from google.genai import types

    return types


@cache
def _fields(model: type[BaseModel]) -> dict[str, Any]:
    """REST name -> annotation of an SDK type's fields."""
    return {(info.alias or name): info.annotation for name, info in model.model_fields.items()}


@cache
def _snake(model: type[BaseModel]) -> dict[str, str]:
    return {name: info.alias or name for name, info in model.model_fields.items() if info.alias}


def _typed(model: type[BaseModel], value: Any, path: str, out: Violations) -> bool:
    """Walk `value` as the SDK type `model`; True when it is an object at all."""
    if not isinstance(value, Mapping):
        out.append(f"{path}: a {model.__name__} object is required, not {_kind(value)}")
        return False
    fields = _fields(model)
    refused = NOT_IN_GEMINI_API.get(model.__name__, frozenset())
    for key, item in value.items():
        where = _at(path, str(key))
        if key not in fields:
            camel = _snake(model).get(str(key))
            hint = f" (the REST name is {camel!r})" if camel else ""
            out.append(f'{where}: Unknown name "{key}" in {model.__name__}: Cannot find field{hint}')
        elif key in refused:
            out.append(f"{where}: {model.__name__}.{key} is not in the Gemini API (Vertex AI only)")
        else:
            _value(fields[key], item, where, out)
    return True


def _value(annotation: Any, value: Any, path: str, out: Violations) -> None:
    from pydantic import BaseModel

    origin = get_origin(annotation)
    if origin in (Union, pytypes.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        if value is None and options != [Any]:  # a free value (google.protobuf.Value) may be null
            out.append(f"{path}: null is not a value here (leave the field out)")
        elif len(options) == 1:
            _value(options[0], value, path, out)
        return
    if annotation is Any:
        return
    if origin is list:
        if not isinstance(value, list):
            out.append(f"{path}: a list is required, not {_kind(value)}")
            return
        (inner,) = get_args(annotation)
        for index, item in enumerate(value):
            _value(inner, item, f"{path}[{index}]", out)
        return
    if origin is dict:
        if not isinstance(value, Mapping):
            out.append(f"{path}: an object is required, not {_kind(value)}")
            return
        _, inner = get_args(annotation)
        for key, item in value.items():
            _value(inner, item, f"{path}.{key}", out)
        return
    if origin is Literal:
        if value not in get_args(annotation):
            out.append(f"{path}: {value!r} is not one of {', '.join(map(str, get_args(annotation)))}")
        return
    if not isinstance(annotation, type):
        return
    if issubclass(annotation, BaseModel):
        _typed(annotation, value, path, out)
    elif issubclass(annotation, enum.Enum):
        allowed = [str(m.value) for m in annotation]
        if value not in allowed:
            out.append(f"{path}: {value!r} is not a {annotation.__name__} ({', '.join(allowed)})")
    elif annotation is bool:
        if not isinstance(value, bool):
            out.append(f"{path}: a boolean is required, not {_kind(value)}")
    elif annotation is int:
        if not isinstance(value, int) or isinstance(value, bool):
            out.append(f"{path}: an integer is required, not {_kind(value)}")
    elif annotation is float:
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            out.append(f"{path}: a number is required, not {_kind(value)}")
    elif annotation is str:
        if not isinstance(value, str):
            out.append(f"{path}: a string is required, not {_kind(value)}")
    elif annotation is bytes:
        if not isinstance(value, str) or not _base64(value):
            out.append(f"{path}: base64-encoded bytes are required")
    elif annotation is datetime and not isinstance(value, str):
        out.append(f"{path}: an RFC 3339 timestamp string is required")


def _base64(text: str) -> bool:
    """Base64 as proto JSON reads bytes: the standard or the URL-safe alphabet."""
    padded = text + "=" * (-len(text) % 4)
    for altchars in (None, b"-_"):
        try:
            base64.b64decode(padded, altchars=altchars, validate=True)
            return True
        except (binascii.Error, ValueError):
            continue
    return False


# -- small checks --------------------------------------------------------------------------------
def _object(value: Any, path: str, out: Violations, allowed: frozenset[str], name: str) -> bool:
    if not isinstance(value, Mapping):
        out.append(f"{path}: a {name} object is required, not {_kind(value)}")
        return False
    for key in sorted(set(value) - allowed, key=str):
        out.append(f'{_at(path, str(key))}: Unknown name "{key}" in {name}: Cannot find field')
    return True


def _required(value: Any, keys: tuple[str, ...], path: str, out: Violations) -> None:
    if isinstance(value, Mapping):
        for key in keys:
            if key not in value or value[key] in ("", None):
                out.append(f"{_at(path, key)}: {key} is required")


def _integer(value: Any, path: str, out: Violations, *, low: int, high: int | None = None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        out.append(f"{path}: an integer is required, not {_kind(value)}")
    elif value < low or (high is not None and value > high):
        out.append(f"{path}: {value} is out of range [{low}, {high if high is not None else '...'}]")


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _among(value: object, options: frozenset[str] | set[str]) -> bool:
    return isinstance(value, str) and value in options


def _at(path: str, key: str) -> str:
    if not path or path == "(body)":
        return key
    return f"{path}{key}" if key.startswith("[") else f"{path}.{key}"


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


# -- what the adapter sends ----------------------------------------------------------------------
def outgoing(
    request: ProviderRequest, endpoint: ProviderEndpoint, *, lane_max_output_tokens: int
) -> list[tuple[str, Any]]:
    """Every (operation, body) the Gemini adapters built from `endpoint` send for `request`
    (the lane's output limit standing in where the request sets none): for a chat item the
    whole call, the streamed call and a batch job of that one request; for embeddings the
    embedContent call, or each batchEmbedContents call. The bodies do not depend on the
    endpoint (one API, one key header). A request the adapter refuses raises its
    PermanentProviderError, as the adapter does before sending anything."""
    from batchroute.providers.gemini import transform

    del endpoint  # every Gemini endpoint is sent the same bodies
    sized = (
        request
        if request.max_output_tokens > 0
        else replace(request, max_output_tokens=lane_max_output_tokens)
    )
    if sized.operation == "embeddings":
        texts, single = transform.embed_inputs(sized)
        if single:
            return [("embedContent", transform.embed_body(sized, texts[0]))]
        return [("batchEmbedContents", body) for body in transform.batch_embed_bodies(sized, texts)]
    return [
        ("generateContent", transform.generate_body(sized)),
        ("generateContent", transform.generate_body(sized)),  # the streamed call's body
        ("batchGenerateContent", transform.batch_body([sized])),
    ]
