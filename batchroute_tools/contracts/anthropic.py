"""Anthropic's request contract: what the Messages API (`POST /v1/messages`, whole or
streamed) and the Message Batches API (`POST /v1/messages/batches`) accept, checked against
the official SDK's request types (`anthropic` 2.14.0: `message_create_params`,
`messages.batch_create_params`) and the API's own rules the types cannot say.

    request_violations(operation, body)   [] for a body the vendor takes, else one line per
                                          violation (a JSON path and the reason)
    outgoing(request, endpoint, ...)      every (operation, body) the adapter would send
    required_betas(body)                  the `anthropic-beta` values a body needs

The emulator (emulators/anthropic.py) checks every request it receives with
`request_violations`, and the adapter's tests check every body it builds, so the adapter,
the emulator and the SDK cannot drift apart. The Bedrock adapter's Claude records are
Messages bodies too: `message_violations` checks one without the operation wrapper.

Strict, as the vendor is: pydantic's TypeAdapter over the SDK's TypedDicts in strict mode
(no "5" for 5), every key at every depth one the TypedDict declares (pydantic itself ignores
unknown keys of a TypedDict), and:

- `max_tokens` at least 1 and at most the model's output limit (`output_limit`: the
  catalog's, for the models it has an Anthropic lane of); `messages` not empty;
  consecutive turns of one role count as one (the API merges them), and the first is a
  user's;
- text blocks carry non-whitespace text, a message has content (only a final assistant
  turn may be empty), and a final assistant turn does not end in whitespace;
- every client `tool_use` is answered by a `tool_result` in the next turn, every
  `tool_result` answers a `tool_use` of the turn before, and tool results come first in
  their turn;
- tool names are unique; a `tool` choice names a declared tool, and an `any` or `tool`
  choice comes with tools; `tool_use` ids (and the `tool_use_id` answering one) are
  `[a-zA-Z0-9_-]+`; extended thinking's `budget_tokens` is at least 1,024 and below
  `max_tokens`; a web search takes
  `allowed_domains` or `blocked_domains`, not both, and `max_uses` of at least 1;
- stop sequences carry non-whitespace text;
- cache breakpoints (`cache_control` on tools, system and message blocks, and the top-level
  one): `{type: ephemeral}` with a `ttl` of 5m or 1h, at most four, a 1h one never after a
  5m one (checked here whatever the typed check saw: it does not reach a message block's);
- `temperature` and `top_p` in 0..1, `top_k` a whole number of at least 0: the API version
  the adapter pins (2023-06-01) takes them, though the SDK, written for a newer version, no
  longer declares them (PINNED_ONLY);
- a batch: 1 to 100,000 requests, each `{custom_id, params}`, custom ids of 1 to 64
  characters of `[a-zA-Z0-9_-]`, unique in the batch, params a non-streaming Messages body.

The SDK is imported on first use, and each TypeAdapter is built once: importing this module
is cheap.
"""

from __future__ import annotations

import base64
import binascii
import collections.abc
import itertools
import re
import types
from collections.abc import Iterator, Mapping
from functools import cache
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Final,
    Literal,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
)

from typing_extensions import get_type_hints, is_typeddict  # the SDK's TypedDicts are its own

if TYPE_CHECKING:
    from pydantic import TypeAdapter, ValidationError

    from batchroute.providers.anthropic.client import AnthropicBatches, AnthropicMessages
    from batchroute.providers.base import ProviderRequest
    from batchroute.providers.endpoints import ProviderEndpoint

OPERATIONS: Final = ("messages", "messages.batches")
# Sampling parameters of anthropic-version 2023-06-01 that the SDK's newer API version no
# longer declares: (least, most) of each; None for no bound.
PINNED_ONLY: Final[dict[str, tuple[float, float | None]]] = {
    "temperature": (0.0, 1.0),
    "top_p": (0.0, 1.0),
    "top_k": (0, None),
}
# Parameters the SDK's TypedDicts declare that its client sends as headers, never in a body.
HEADER_PARAMS: Final = frozenset({"user_profile_id", "workspace_id"})
# Server tool types that only run with an `anthropic-beta` header -> that header's value.
TOOL_BETAS: Final[dict[str, str]] = {"code_execution_20250522": "code-execution-2025-05-22"}
CUSTOM_ID: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")
TOOL_NAME: Final = re.compile(r"[a-zA-Z0-9_-]{1,128}")
TOOL_USE_ID: Final = re.compile(r"[a-zA-Z0-9_-]+")
MIN_THINKING_BUDGET: Final = 1024
MAX_BATCH_REQUESTS: Final = 100_000
MAX_MESSAGES: Final = 100_000
# Anthropic's vision guide: up to 100 images a request on the API (200k-window models); a
# request with more is refused (400 invalid_request_error). The preflight does not bound an
# item's images per vendor yet: such an item fails on its Anthropic lane, as it would there.
MAX_IMAGES: Final = 100
# An image's base64 source: at most 5 MB of base64 (the API measures the encoded data, "image
# exceeds 5 MB maximum: 6275800 bytes > 5242880 bytes" for a 4.7 MB file: 3.75 MB decoded),
# and of the media type the block names ("Image does not match the provided media type").
MAX_IMAGE_BYTES: Final = 5 * 1024 * 1024
IMAGE_SIGNATURES: Final[dict[str, tuple[bytes, int]]] = {  # media type: (first bytes, at offset)
    "image/png": (b"\x89PNG\r\n\x1a\n", 0),
    "image/jpeg": (b"\xff\xd8\xff", 0),
    "image/gif": (b"GIF8", 0),
    "image/webp": (b"WEBP", 8),
}
_SCALARS: Final = frozenset({"str", "int", "float", "bool", "none", "list", "dict", "bytes"})


def request_violations(operation: str, body: Any) -> list[str]:
    """Why the vendor would refuse `body` as a request of `operation` ([] when it would not)."""
    if operation == "messages":
        return message_violations(body)
    if operation == "messages.batches":
        return _batch_violations(body)
    raise ValueError(f"no Anthropic operation {operation!r}: one of {', '.join(OPERATIONS)}")


def message_violations(body: Any, path: str = "$", *, in_batch: bool = False) -> list[str]:
    """Why the Messages API would refuse this body; `in_batch`: as a batch request's params
    (never streamed)."""
    if not isinstance(body, dict):
        return [f"{path}: should be a JSON object"]
    from anthropic.types.message_create_params import (
        MessageCreateParamsNonStreaming,
        MessageCreateParamsStreaming,
    )

    streamed = body.get("stream") is True and not in_batch
    kind = MessageCreateParamsStreaming if streamed else MessageCreateParamsNonStreaming
    typed = {k: v for k, v in body.items() if k not in PINNED_ONLY}
    found = _header_params(typed, path) + _typed(kind, typed, path) + _undeclared(kind, typed, path)
    found += _sampling(body, path)
    return found or _message_rules(body, path)


def warm() -> None:
    """Import the SDK and build the TypeAdapters now (about two seconds), so the first
    check is as quick as the rest (the emulator calls it in the background at start)."""
    message_violations(
        {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "warm"}], "stream": True}
    )
    message_violations({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "warm"}]})


def required_betas(body: Mapping[str, Any]) -> set[str]:
    """The `anthropic-beta` values a Messages body needs (its server tools')."""
    tools = body.get("tools")
    kinds = {t.get("type") for t in tools if isinstance(t, Mapping)} if isinstance(tools, list) else set()
    return {beta for kind, beta in TOOL_BETAS.items() if kind in kinds}


def outgoing(
    request: ProviderRequest, endpoint: ProviderEndpoint, *, lane_max_output_tokens: int
) -> list[tuple[str, Any]]:
    """Every (operation, body) the Anthropic adapters built from `endpoint` would send for
    `request` (the lane's output limit standing in where the request sets none): the whole
    call, the streamed call and the batch of that one request. A request the adapter refuses
    raises its PermanentProviderError (with the code an item fails with), as the adapter does
    before sending anything."""
    sync, batches = _adapters(endpoint, request.model, lane_max_output_tokens)
    return [
        ("messages", sync.body(request)),
        ("messages", sync.body(request, stream=True)),
        ("messages.batches", batches.batch_body([request])),
    ]


def _adapters(
    endpoint: ProviderEndpoint, model: str, limit: int
) -> tuple[AnthropicMessages, AnthropicBatches]:
    """The adapters `make_sync` / `make_batch` build from `endpoint` with the lane's limit,
    kept by the endpoint's description (building one opens an HTTP client; no call is ever
    made through it here)."""
    from batchroute.providers.anthropic import make_batch, make_sync

    key = (repr(endpoint), model, limit)
    if key not in _ADAPTERS:
        limits = {model: limit}
        _ADAPTERS[key] = (
            make_sync(endpoint, None, output_limits=limits),
            make_batch(endpoint, None, output_limits=limits),
        )
    return _ADAPTERS[key]


_ADAPTERS: dict[tuple[str, str, int], tuple[AnthropicMessages, AnthropicBatches]] = {}


# -- the SDK's types ---------------------------------------------------------------------------
@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    return TypeAdapter(kind)


def _typed(kind: Any, value: object, path: str) -> list[str]:
    """Pydantic's strict validation of `value` as `kind`; its lazily validated iterables
    (the SDK's `Iterable[...]` fields) consumed, so their items are checked too."""
    from pydantic import ValidationError

    try:
        validated = _adapter(kind).validate_python(value, strict=True)
    except ValidationError as exc:
        return _described(exc, path)
    return list(_consumed(validated, path))


def _consumed(value: object, path: str) -> Iterator[str]:
    from pydantic import ValidationError

    if isinstance(value, dict):
        for key, item in value.items():
            yield from _consumed(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _consumed(item, f"{path}[{index}]")
    elif isinstance(value, collections.abc.Iterator):  # pydantic's ValidatorIterator
        try:
            for index, item in enumerate(value):
                yield from _consumed(item, f"{path}[{index}]")
        except ValidationError as exc:
            yield from _described(exc, path)


def _described(exc: ValidationError, path: str) -> list[str]:
    """Pydantic's errors as `path: reason` lines. A union reports every member's failure;
    what is kept: the errors of the innermost union that failed, and of its members whose
    `type` (or `role`) matched, so a bad field of a text block is reported as that; where no
    member's `type` matched, one line says the value is none of the union's forms."""
    groups: dict[str, list[tuple[str, str, str]]] = {}
    given: dict[str, str] = {}
    for error in exc.errors(include_url=False):
        where, union_at, member = path, None, ""
        for part in error["loc"]:
            if isinstance(part, int):
                where += f"[{part}]"
            elif _is_type_tag(part):
                union_at, member = where, str(part)  # the innermost union wins
            else:
                where += f".{part}"
        group = union_at or where
        if where in (f"{group}.type", f"{group}.role"):
            given[group] = f" ({where.rsplit('.', 1)[1]} {error.get('input')!r})"
        groups.setdefault(group, []).append((member, where, error["msg"]))
    lines: list[str] = []
    for group, found in groups.items():
        if any(other.startswith((f"{group}.", f"{group}[")) for other in groups):
            continue  # a member got further: its own (deeper) errors say more
        members = {member for member, _, _ in found}
        if members == {""}:
            lines.extend(dict.fromkeys(f"{where}: {msg}" for _, where, msg in found))
            continue
        selectors = (f"{group}.type", f"{group}.role")
        matched = members - {member for member, where, _ in found if where in selectors}
        chosen = matched if 1 <= len(matched) <= 2 else members if len(members) <= 2 else set()
        if not chosen:
            forms = f"is none of the {len(members)} forms the SDK's types allow here"
            lines.append(f"{group}: {forms}{given.get(group, '')}")
            continue
        lines.extend(dict.fromkeys(f"{where}: {msg}" for member, where, msg in found if member in chosen))
    return lines


def _is_type_tag(part: object) -> bool:
    """A location part that names a union member (`TextBlockParam`, `str`, `list[...]`),
    not a key of the body."""
    return isinstance(part, str) and ("[" in part or part[:1].isupper() or part in _SCALARS)


def _undeclared(kind: Any, value: object, path: str) -> list[str]:
    """Every key of `value`, at every depth, that the SDK's type `kind` does not declare."""
    return _extra(kind, value, path) or []


def _extra(kind: Any, value: object, path: str) -> list[str] | None:
    """The undeclared keys of `value` as `kind`; None when `value` is not of `kind`'s shape
    at all (a union then tries its other members)."""
    origin, args = get_origin(kind), get_args(kind)
    if origin in (Annotated, Required, NotRequired):
        return _extra(args[0], value, path)
    if origin in (Union, types.UnionType):
        fits = [found for arm in args if (found := _extra(arm, value, path)) is not None]
        return min(fits, key=len) if fits else None
    if origin is Literal:
        return [] if value in args else None
    if is_typeddict(kind):
        return _extra_keys(kind, value, path)
    if isinstance(kind, type) and _is_model(kind):
        return None  # a response model inside a request union: never what a body holds
    if kind in (object, Any):
        return []
    if origin in (dict, collections.abc.Mapping) or kind is dict:
        return [] if isinstance(value, dict) else None
    if origin is not None and args and (origin in (list, tuple) or _is_sequence(origin)):
        if not isinstance(value, list):
            return None
        keys: list[str] = []
        for index, item in enumerate(value):
            inner = _extra(args[0], item, f"{path}[{index}]")
            if inner is None:
                return None
            keys.extend(inner)
        return keys
    if kind in (str, int, float, bool, type(None)):
        same = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        return [] if same or (kind is float and isinstance(value, int)) else None
    return []  # anything else (file inputs and the like): no keys to check


def _extra_keys(kind: Any, value: object, path: str) -> list[str] | None:
    if not isinstance(value, dict) or not kind.__required_keys__ <= value.keys():
        return None
    hints = _hints(kind)
    extra_allowed = (getattr(kind, "__pydantic_config__", None) or {}).get("extra") == "allow"
    found = [] if extra_allowed else [f"{path}.{k}: unknown field" for k in value if k not in hints]
    for key, item in value.items():
        if key in hints:
            inner = _extra(hints[key], item, f"{path}.{key}")
            if inner is None:
                return None
            found.extend(inner)
    return found


@cache
def _hints(kind: Any) -> dict[str, Any]:
    return get_type_hints(kind, include_extras=True)


def _is_model(kind: type) -> bool:
    from pydantic import BaseModel

    return issubclass(kind, BaseModel)


def _is_sequence(origin: object) -> bool:
    named = getattr(origin, "__name__", "")
    return named == "SequenceNotStr" or origin in (collections.abc.Iterable, collections.abc.Sequence)


def _header_params(body: Mapping[str, Any], path: str) -> list[str]:
    return [f"{path}.{k}: unknown field (the SDK sends it as a header)" for k in body if k in HEADER_PARAMS]


def _sampling(body: Mapping[str, Any], path: str) -> list[str]:
    found: list[str] = []
    for name, (least, most) in PINNED_ONLY.items():
        if name not in body:
            continue
        value = body[name]
        whole = name == "top_k"
        if isinstance(value, bool) or not isinstance(value, int if whole else int | float):
            found.append(f"{path}.{name}: should be {'an integer' if whole else 'a number'}")
        elif value < least or (most is not None and value > most):
            bounds = f"between {least:g} and {most:g}" if most is not None else f"at least {least:g}"
            found.append(f"{path}.{name}: should be {bounds}")
    return found


# -- the API's rules ---------------------------------------------------------------------------
def _message_rules(body: Mapping[str, Any], path: str) -> list[str]:
    """The rules the types cannot say; `body` already fits the types."""
    found: list[str] = []
    limit = output_limit(body.get("model"))
    if body["max_tokens"] < 1:
        found.append(f"{path}.max_tokens: should be at least 1")
    elif limit is not None and body["max_tokens"] > limit:
        found.append(
            f"{path}.max_tokens: {body['max_tokens']} > {limit}, which is the maximum allowed number of "
            f"output tokens for {body['model']}"
        )
    for index, stop in enumerate(body.get("stop_sequences") or []):
        if not stop.strip():
            found.append(f"{path}.stop_sequences[{index}]: each stop sequence must contain non-whitespace")
    system = body.get("system")
    if isinstance(system, list):
        found.extend(_text_problems(system, f"{path}.system"))
    found.extend(_turn_problems(list(body["messages"]), f"{path}.messages"))
    found.extend(_tool_problems(body, path))
    found.extend(_cache_control_problems(body, path))
    images = 0
    for turn, message in enumerate(body["messages"]):
        for index, block in enumerate(message["content"] if isinstance(message.get("content"), list) else []):
            if isinstance(block, Mapping) and block.get("type") == "image":
                images += 1
                where = f"{path}.messages.{turn}.content.{index}.image"
                found.extend(_image_problems(block["source"], where))
    if images > MAX_IMAGES:
        found.append(f"{path}.messages: too many images ({images}); at most {MAX_IMAGES} images a request")
    return found


def output_limit(model: object) -> int | None:
    """The most output tokens (`max_tokens`) the API lets a request to `model` ask for: its
    Anthropic lane's `max_output_tokens` in the built-in catalog (catalog/data/lanes.toml,
    the limit the adapter sends a request without one with), which are Anthropic's own
    per-model limits (its models overview: 8,192 for Claude 3.5 Haiku, 64,000 for Claude
    Sonnet 4); None for a model the catalog has no Anthropic lane of (nothing checked)."""
    return _output_limits().get(model) if isinstance(model, str) else None


@cache
def _output_limits() -> dict[str, int]:
    from batchroute.catalog import builtin_catalog

    return {
        lane.provider_model_id: lane.max_output_tokens
        for lane in builtin_catalog().lanes
        if lane.provider == "anthropic" and lane.provider_model_id
    }


MAX_CACHE_BREAKPOINTS: Final = 4  # "A maximum of 4 blocks with cache_control may be provided"
CACHE_TTLS: Final = {"5m": 300.0, "1h": 3600.0}


def cache_controls(body: Mapping[str, Any], path: str = "$") -> list[tuple[str, Any]]:
    """Every `cache_control` of a Messages body, in the cache's prefix order (tools, system,
    messages, then the top-level one, which marks the last block), with its path."""
    found: list[tuple[str, Any]] = []
    for where in ("tools", "system"):
        blocks = body.get(where)
        for index, block in enumerate(blocks if isinstance(blocks, list) else []):
            if isinstance(block, Mapping) and "cache_control" in block:
                found.append((f"{path}.{where}[{index}].cache_control", block["cache_control"]))
    for turn, message in enumerate(body.get("messages") or []):
        content = message.get("content") if isinstance(message, Mapping) else None
        for index, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, Mapping) and "cache_control" in block:
                found.append(
                    (f"{path}.messages[{turn}].content[{index}].cache_control", block["cache_control"])
                )
    if "cache_control" in body:
        found.append((f"{path}.cache_control", body["cache_control"]))
    return [(where, control) for where, control in found if control is not None]


def _cache_control_problems(body: Mapping[str, Any], path: str) -> list[str]:
    """The API's rules of cache breakpoints: `{type: ephemeral}` with a `ttl` of 5m or 1h,
    at most four, and a longer ttl never after a shorter one."""
    controls = cache_controls(body, path)
    found: list[str] = []
    for where, control in controls:
        if not isinstance(control, Mapping) or control.get("type") != "ephemeral":
            found.append(f"{where}.type: Input should be 'ephemeral'")
        elif control.get("ttl", "5m") not in CACHE_TTLS:
            found.append(f"{where}.ttl: Input should be '5m' or '1h'")
        elif set(control) - {"type", "ttl"}:
            found.extend(
                f"{where}.{key}: Extra inputs are not permitted" for key in set(control) - {"type", "ttl"}
            )
    if len(controls) > MAX_CACHE_BREAKPOINTS:
        most = f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided."
        found.append(f"{most} Found {len(controls)}.")
    ttls = [CACHE_TTLS.get(str(c.get("ttl", "5m")), 0.0) for _, c in controls if isinstance(c, Mapping)]
    if any(later > earlier for earlier, later in itertools.pairwise(ttls)):
        found.append(f"{path}: a cache_control ttl='1h' breakpoint must come before any ttl='5m' one")
    return found


def _image_problems(source: Mapping[str, Any], where: str) -> list[str]:
    """A base64 image's data: base64 that decodes, at most 5 MB of it, of its media type."""
    if source.get("type") != "base64":
        return []
    try:
        data = base64.b64decode(source["data"], validate=True)
    except (binascii.Error, ValueError):
        return [f"{where}.source.base64.data: invalid base64 data"]
    size, media_type = len(source["data"]), source["media_type"]
    if size > MAX_IMAGE_BYTES:
        return [f"{where}.source.base64: image exceeds 5 MB maximum: {size} bytes > {MAX_IMAGE_BYTES} bytes"]
    sign, at = IMAGE_SIGNATURES.get(media_type, (b"", 0))
    if data[at : at + len(sign)] != sign:
        return [f"{where}.source.base64.data: Image does not match the provided media type {media_type}"]
    return []


def _blocks(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [dict(b) for b in content] if isinstance(content, list) else []


def _text_problems(blocks: list[Any], where: str) -> list[str]:
    return [
        f"{where}[{index}]: text content blocks must contain non-whitespace text"
        for index, block in enumerate(blocks)
        if isinstance(block, Mapping) and block.get("type") == "text" and not str(block.get("text")).strip()
    ]


def _turn_problems(messages: list[dict[str, Any]], where: str) -> list[str]:
    if not messages:
        return [f"{where}: at least one message is required"]
    if len(messages) > MAX_MESSAGES:
        return [f"{where}: at most {MAX_MESSAGES} messages"]
    found: list[str] = []
    last = len(messages) - 1
    # The API merges consecutive turns of one role: the rules hold for the merged turns,
    # each kept with the index of its first message.
    turns: list[tuple[int, str, list[dict[str, Any]]]] = []
    for index, message in enumerate(messages):
        content, role = message["content"], message["role"]
        if isinstance(content, list):
            found.extend(_text_problems(content, f"{where}[{index}].content"))
        final_assistant = index == last and role == "assistant"
        if not final_assistant and not (content.strip() if isinstance(content, str) else content):
            found.append(
                f"{where}[{index}]: all messages must have non-empty content except for the optional "
                "final assistant message"
            )
        if turns and turns[-1][1] == role:
            turns[-1][2].extend(_blocks(content))
        else:
            turns.append((index, role, _blocks(content)))
    spoken = [t for t in turns if t[1] != "system"]
    if spoken and spoken[0][1] != "user":
        found.append(f'{where}[{spoken[0][0]}]: the first message must use the "user" role')
    if messages[last]["role"] == "assistant":
        texts = [b for b in _blocks(messages[last]["content"]) if b.get("type") == "text"]
        if texts and texts[-1]["text"] != str(texts[-1]["text"]).rstrip():
            found.append(f"{where}[{last}]: final assistant content cannot end with trailing whitespace")
    for position, (index, role, blocks) in enumerate(turns):
        if role == "user":
            results = [b for b in blocks if b.get("type") == "tool_result"]
            if results and any(b.get("type") != "tool_result" for b in blocks[: len(results)]):
                found.append(f"{where}[{index}]: tool_result blocks must come first in the user content")
            before = turns[position - 1] if position else None
            asked = _tool_use_ids(before[2]) if before and before[1] == "assistant" else set()
            stray = [str(b.get("tool_use_id")) for b in results if b.get("tool_use_id") not in asked]
            if stray:
                found.append(
                    f"{where}[{index}]: unexpected tool_use_id found in tool_result blocks: "
                    f"{', '.join(stray)}. Each tool_result block must have a corresponding tool_use "
                    "block in the previous message."
                )
        elif role == "assistant" and position + 1 < len(turns):
            following = turns[position + 1][2]
            answered = {b.get("tool_use_id") for b in following if b.get("type") == "tool_result"}
            missing = sorted(_tool_use_ids(blocks) - answered)
            if missing:
                found.append(
                    f"{where}[{index}]: tool_use ids were found without tool_result blocks immediately "
                    f"after: {', '.join(missing)}. Each tool_use block must have a corresponding "
                    "tool_result block in the next message."
                )
    return found


def _tool_use_ids(blocks: list[dict[str, Any]]) -> set[str]:
    return {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}


def _tool_problems(body: Mapping[str, Any], path: str) -> list[str]:
    found: list[str] = []
    tools = [dict(t) for t in body.get("tools") or []]
    names = [str(t.get("name")) for t in tools]
    for index, tool in enumerate(tools):
        if tool.get("type") in (None, "custom") and not TOOL_NAME.fullmatch(names[index]):
            found.append(f"{path}.tools[{index}].name: should match ^[a-zA-Z0-9_-]{{1,128}}$")
        if names.count(names[index]) > 1 and names.index(names[index]) == index:
            found.append(f"{path}.tools: tool names must be unique ({names[index]!r} is declared twice)")
        schema = tool.get("input_schema")
        if "input_schema" in tool and not (isinstance(schema, Mapping) and schema.get("type") == "object"):
            found.append(f"{path}.tools[{index}].input_schema.type: should be 'object'")
        if str(tool.get("type", "")).startswith("web_search"):
            if tool.get("allowed_domains") is not None and tool.get("blocked_domains") is not None:
                found.append(f"{path}.tools[{index}]: allowed_domains or blocked_domains, not both")
            uses = tool.get("max_uses")
            if uses is not None and uses < 1:
                found.append(f"{path}.tools[{index}].max_uses: should be at least 1")
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") in ("any", "tool") and not tools:
        found.append(f"{path}.tool_choice: tool_choice may only be specified while providing tools")
    elif isinstance(choice, Mapping) and choice.get("type") == "tool" and choice.get("name") not in names:
        found.append(f"{path}.tool_choice.name: {choice.get('name')!r} names no tool in tools")
    for turn, message in enumerate(body["messages"]):
        for index, block in enumerate(_blocks(message.get("content"))):
            key = {"tool_use": "id", "tool_result": "tool_use_id"}.get(str(block.get("type")))
            if key is not None and not TOOL_USE_ID.fullmatch(str(block.get(key))):
                where = f"{path}.messages.{turn}.content.{index}.{block['type']}.{key}"
                found.append(f"{where}: String should match pattern '^[a-zA-Z0-9_-]+$'")
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if isinstance(budget, int) and budget < MIN_THINKING_BUDGET:
            found.append(
                f"{path}.thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
            )
        elif isinstance(budget, int) and budget >= body["max_tokens"]:
            found.append(f"{path}: `max_tokens` must be greater than `thinking.budget_tokens`")
    return found


# -- message batches ---------------------------------------------------------------------------
def _batch_violations(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return ["$: should be a JSON object"]
    found = [f"$.{k}: unknown field" for k in body if k != "requests"]
    requests = body.get("requests")
    if not isinstance(requests, list):
        return [*found, "$.requests: a list of requests is required"]
    if not 1 <= len(requests) <= MAX_BATCH_REQUESTS:
        found.append(f"$.requests: 1 to {MAX_BATCH_REQUESTS} requests")
    seen: set[str] = set()
    for index, entry in enumerate(requests):
        where = f"$.requests[{index}]"
        if not isinstance(entry, dict):
            found.append(f"{where}: should be a JSON object")
            continue
        found.extend(f"{where}.{k}: unknown field" for k in entry if k not in ("custom_id", "params"))
        custom_id = entry.get("custom_id")
        if not isinstance(custom_id, str) or not CUSTOM_ID.fullmatch(custom_id):
            found.append(f"{where}.custom_id: should be 1 to 64 characters of a-z, A-Z, 0-9, _ and -")
        elif custom_id in seen:
            found.append(f"{where}.custom_id: {custom_id!r} is not unique in the batch")
        else:
            seen.add(custom_id)
        if "params" not in entry:
            found.append(f"{where}.params: field required")
        else:
            found.extend(message_violations(entry["params"], f"{where}.params", in_batch=True))
    return found
