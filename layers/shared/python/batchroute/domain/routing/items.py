"""Batch items: reading one raw item into the facts routing needs, and a model group's totals.

An item is `{customer_item_id, operation, model, input, required_tools?, max_output_tokens?,
preset_version?}`.
Items are plain dicts from the caller's JSON parser and are read with plain type checks,
not pydantic models: a 50,000-item batch is read, checked and quoted in about a second.

What the router needs from an item is small (ItemFacts): its model and operation, an
estimated prompt size, the output it asks for, and what the lane must offer: hosted tools
(declared in `required_tools`, or inferred from `input.tools` / `input.tool_choice`) and
runtime capabilities (`json_schema` for a structured-output schema or a `strict` function,
`tool_calling` for custom functions or a conversation holding tool calls and their answers, `vision` for image
parts in a `responses` item, `any_image_type` for an image whose URL tells no type or one
Gemini does not take, `embedding_dimensions` for an embeddings item's `dimensions`,
`functions_with_hosted_tools` for functions and hosted tools in one item,
`tools_with_json_output` for tools declared beside a JSON answer format, `whitespace_stop`
for a stop sequence of whitespace alone, `seed` for a seed, `penalties` for a non-zero
frequency or presence penalty, `serial_tool_calls` for `parallel_tool_calls: false` beside tools,
`message_names` for a user or assistant message's `name`).
Problems come back as ItemProblem with a path relative to the item (`input.messages[2]`);
the preflight prefixes it with `items[<index>]`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Set
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, NotRequired, TypedDict, TypeGuard, get_args

from batchroute.domain.catalog.catalog import OPERATIONS, HostedTool, Lane, Operation
from batchroute.domain.catalog.pricing import ToolUses
from batchroute.domain.catalog.tokens import (
    DEFAULT_OUTPUT_TOKENS,
    EMBEDDING_OUTPUT_TOKENS,
    prompt_tokens,
    utf8_len,
    value_bytes,
)
from batchroute.domain.routing.images import data_image_bytes, data_type_mismatch, gemini_takes_image
from batchroute.domain.routing.prompt_cache import (
    MAX_TRACKED_PREFIXES,
    ItemPrefix,
    PrefixRun,
    SharedPrefixView,
    item_prefix,
    shared_views,
)

HOSTED_TOOLS: Final[frozenset[str]] = frozenset(get_args(HostedTool))
# The runtime capability an image needs when its URL tells no type, or one Gemini does not take
# (a GIF): lanes that read the type from the image's bytes offer it, Gemini's do not.
ANY_IMAGE_TYPE: Final = "any_image_type"
FUNCTIONS_WITH_HOSTED_TOOLS: Final = "functions_with_hosted_tools"
# Tools (functions or hosted) declared beside a JSON answer (`json_object`, `json_schema`):
# Gemini 2.x and 1.5 refuse the mix ("Function calling with a response mime type:
# 'application/json' is unsupported").
TOOLS_WITH_JSON_OUTPUT: Final = "tools_with_json_output"
_JSON_FORMATS: Final = frozenset({"json_object", "json_schema"})
# The runtime capability an embeddings item's `dimensions` needs: OpenAI takes it from
# text-embedding-3 on (CreateEmbeddingRequest.dimensions), vLLM's hosts refuse it elsewhere.
EMBEDDING_DIMENSIONS: Final = "embedding_dimensions"
# A stop sequence of whitespace alone (`"\n"`, `"\n\n"`): OpenAI, Gemini, Bedrock and the
# OpenAI-compatible hosts take it, Anthropic refuses it ("stop_sequences: each stop sequence
# must contain non-whitespace"), so an item with one routes only to lanes that offer this.
WHITESPACE_STOP: Final = "whitespace_stop"
# A `seed` (best-effort repeatable sampling): OpenAI, Gemini and the OpenAI-compatible hosts
# take one, Anthropic and Bedrock have none, so an item with one routes only to lanes that
# offer this. Gemini's is a 32-bit integer, the narrowest: a seed outside it is refused.
SEED: Final = "seed"
SEED_RANGE: Final = (-(2**31), 2**31 - 1)
# OpenAI's `frequency_penalty` / `presence_penalty` (-2 to 2) other than 0, their default (which
# clients send unasked, and which is not sent on): OpenAI and the OpenAI-compatible hosts that
# document them take one; Anthropic and Bedrock have none.
PENALTIES: Final = "penalties"
PENALTY_KEYS: Final = ("frequency_penalty", "presence_penalty")
# `parallel_tool_calls: false` beside tools (at most one tool call an answer): OpenAI's APIs
# take it, Anthropic as `tool_choice.disable_parallel_tool_use`, Groq documents it; Gemini and
# Bedrock's Converse have no such switch, and the other hosts do not document one, so an item
# with it routes only to lanes that offer this. Without tools, or under `tool_choice: none`,
# it constrains nothing and is not sent (as `true`, the default, never is).
SERIAL_TOOL_CALLS: Final = "serial_tool_calls"
# A user or assistant message's `name` (who of several participants of one role speaks:
# AutoGen's agents): OpenAI's Chat Completions takes one (`^[a-zA-Z0-9_-]+$`, as its API says
# in a refusal; at most 64 here, as its other names); Anthropic, Bedrock, Gemini and the
# Responses API have no place for one, Groq refuses one (400) and the other hosts document
# none, so an item with one routes only to lanes that offer this; not beside hosted tools.
MESSAGE_NAMES: Final = "message_names"
MESSAGE_NAME_PATTERN: Final = r"^[a-zA-Z0-9_-]{1,64}$"
_MESSAGE_NAME: Final = re.compile(MESSAGE_NAME_PATTERN)
# The sampling options OpenAI's Responses API, which runs the hosted tools, has none of: an
# item with hosted tools may not set them (a penalty of 0, the default, sets nothing).
NOT_WITH_HOSTED_TOOLS: Final = ("stop", "seed", *PENALTY_KEYS)
MAX_CUSTOMER_ITEM_ID = 256
MAX_MODEL_ID = 256
MAX_OUTPUT_REQUEST = 1_000_000
MAX_SCHEMA_DEPTH = 32

# Tool `type`s of chat and Responses bodies that name a hosted tool the lane must run, by
# the service's names (and each hosted tool's own name).
_TOOL_TYPE_ALIASES: Final[dict[str, str]] = {
    "web_search_preview": "web_search",
    "code_interpreter": "python_execution",
    **{name: name for name in HOSTED_TOOLS},
}
# Function tools are answered by the model with a tool call, which needs tool calling.
_FUNCTION_TOOL_TYPE: Final = "function"
_TEXT_PARTS: Final = frozenset({"text", "input_text", "output_text"})
_IMAGE_PARTS: Final = frozenset({"image_url", "input_image"})
_ROLES: Final = frozenset({"system", "developer", "user", "assistant", "tool"})
# What every lane's vendor can be sent (docs/routing.md, "Item input"): the input keys a
# chat item may carry. `model`, `user`, `metadata`, `store`, `n: 1`, `stream: false` and
# `parallel_tool_calls: true` are accepted and not forwarded (they change nothing); any
# other key is refused, never dropped silently.
_CHAT_KEYS: Final = frozenset(
    {
        "messages",
        "input",
        "system",
        "instructions",
        "tools",
        "tool_choice",
        "response_format",
        "text",
        "temperature",
        "top_p",
        "stop",
        "seed",
        "frequency_penalty",
        "presence_penalty",
        "parallel_tool_calls",
        "max_output_tokens",
        "max_completion_tokens",
        "max_tokens",
    }
)
_EMBEDDING_KEYS: Final = frozenset({"input", "text", "dimensions", "encoding_format"})


# OpenAI's `Metadata`: at most 16 pairs, keys of at most 64 characters, string values of at most 512.
METADATA_MAX_PAIRS: Final = 16
METADATA_MAX_KEY: Final = 64
METADATA_MAX_VALUE: Final = 512


def _openai_metadata(value: object) -> bool:
    return value is None or (
        isinstance(value, dict)
        and len(value) <= METADATA_MAX_PAIRS
        and all(isinstance(k, str) and len(k) <= METADATA_MAX_KEY for k in value)
        and all(isinstance(v, str) and len(v) <= METADATA_MAX_VALUE for v in value.values())
    )


# Accepted and not sent, with any value of the type OpenAI's CreateChatCompletionRequest gives
# them; a value OpenAI would refuse is refused here too: key -> (the test, what it must be).
_IGNORED_KEYS: Final[dict[str, tuple[Callable[[object], bool], str]]] = {
    "model": (lambda value: value is None or isinstance(value, str), "a string"),
    "user": (lambda value: value is None or isinstance(value, str), "a string"),
    "store": (lambda value: value is None or isinstance(value, bool), "true, false or null"),
    "metadata": (
        _openai_metadata,
        "null or an object of at most 16 string values (keys of at most 64 characters, "
        "values of at most 512)",
    ),
}
# Accepted and not sent with this one value only.
_INERT_KEYS: Final[dict[str, int | bool]] = {
    "n": 1,
    "stream": False,
    "parallel_tool_calls": True,
    # OpenAI's default, which clients send as it is: it changes no answer
    "logprobs": False,
}
_MESSAGE_KEYS: Final[dict[str, frozenset[str]]] = {
    "system": frozenset({"role", "content", "type"}),
    "developer": frozenset({"role", "content", "type"}),
    "user": frozenset({"role", "content", "type", "name"}),
    "assistant": frozenset(
        {"role", "content", "type", "name", "tool_calls", "refusal", "annotations", "audio", "function_call"}
    ),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}
# What OpenAI's ChatCompletionMessage carries besides the turn itself, as the SDK sends an answer
# back in the next request (`messages.append(completion.choices[0].message)`): `refusal` (the
# refusal's text reaches every vendor as the turn's text, providers/conversation.py) and
# `annotations` (citations of the answer: OpenAI ignores them in a request; no vendor is sent
# them); `audio` and the deprecated `function_call` only as null (we answer neither).
_NULL_ONLY_ASSISTANT_KEYS: Final = {
    "audio": "An assistant message's audio must be null: audio answers are not supported.",
    "function_call": "An assistant message's function_call must be null: send the call in tool_calls.",
}
_CALL_ITEM_KEYS: Final = frozenset({"type", "call_id", "name", "arguments", "id", "status"})
_CALL_OUTPUT_KEYS: Final = frozenset({"type", "call_id", "output", "id", "status"})
_FUNCTION_KEYS: Final = frozenset({"name", "description", "parameters", "strict"})
# A structured-output format, as OpenAI's contract declares it (ResponseFormatText,
# ResponseFormatJsonObject, ResponseFormatJsonSchema; the Responses API's text.format writes the
# schema's keys flat beside its type): anything else is refused, never forwarded or dropped.
_PLAIN_FORMAT_KEYS: Final = frozenset({"type"})
SCHEMA_FORMAT_KEYS: Final = ("name", "description", "schema", "strict")  # a json_schema format's keys
# Gemini wants a letter or an underscore first; every vendor takes the rest.
FUNCTION_NAME_PATTERN: Final = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
CALL_ID_PATTERN: Final = r"^[A-Za-z0-9_-]{1,64}$"
_FUNCTION_NAME: Final = re.compile(FUNCTION_NAME_PATTERN)
# One version of a preset (`name@3`), as an item records the version its preset expanded
# (a chat body's preset_version follows it too: domain/chat/requests.py).
PRESET_VERSION_PATTERN: Final = r"^[a-z0-9][a-z0-9_-]{0,63}@[1-9][0-9]{0,5}$"
PRESET_VERSION: Final = re.compile(PRESET_VERSION_PATTERN)  # fullmatch: `$` alone admits a final newline
_CALL_ID: Final = re.compile(CALL_ID_PATTERN)
# The settings a hosted tool declaration may carry, whatever lane runs it: its type, and
# what the tool cannot run without (file_search's vector stores; the code interpreter's
# automatic container, which every vendor's code execution has).
_HOSTED_TOOL_KEYS: Final[dict[str, frozenset[str]]] = {
    "file_search": frozenset({"type", "vector_store_ids"}),
    "python_execution": frozenset({"type", "container"}),
}
# The vendors' own names of their hosted tools: a function may not take one beside them.
_VENDOR_TOOL_NAMES: Final = frozenset(
    {"web_search", "code_execution", "code_interpreter", "file_search", "google_search"}
)
MAX_EMBEDDING_INPUTS = 2048  # OpenAI's limit of inputs per embeddings request
MAX_STOP_SEQUENCES = 4  # the fewest any vendor takes (OpenAI, Bedrock Converse)
_SCHEMA_TYPES: Final = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
# The names an output limit goes by (ours, then the APIs'): the first one given is used.
OUTPUT_LIMIT_KEYS: Final = ("max_output_tokens", "max_completion_tokens", "max_tokens")
_INPUT_LIMITS: Final = tuple((key, f"input.{key}") for key in OUTPUT_LIMIT_KEYS)
_NO_PROBLEMS: Final[tuple[ItemProblem, ...]] = ()
_NOTHING: Final[frozenset[str]] = frozenset()
_OPERATIONS: Final[dict[str, Operation]] = {name: name for name in OPERATIONS}


def hosted_tool_types(*, without: frozenset[str] = frozenset()) -> str:
    """A pattern of the tool `type`s naming a hosted tool (`hosted_tool_name`), but those
    named in `without` (the service's names): for the documented schemas."""
    names = sorted(kind for kind in _TOOL_TYPE_ALIASES if _TOOL_TYPE_ALIASES[kind] not in without)
    web = [] if "web_search" in without else ["web_search.*"]
    return f"^({'|'.join(web + [re.escape(name) for name in names if not name.startswith('web_search')])})$"


def hosted_tool_name(tool_type: str) -> str | None:
    """The service's name of a hosted tool `type` (dated variants included:
    `web_search_preview_2025_03_11`), or None for a type that names no hosted tool."""
    if tool_type.startswith("web_search"):
        return "web_search"
    return _TOOL_TYPE_ALIASES.get(tool_type)


@dataclass(frozen=True, slots=True)
class ItemProblem:
    category: str  # a preflight category: jsonl_shape, json_schema, tool_support
    code: str
    field: str  # relative to the item; "" for the item itself
    message: str


class BatchItem(TypedDict):
    """An item as a batch keeps it once the preflight read it (each line of its input chunks
    is `{seq, item}`): the envelope typed, `input` the customer's provider body, JSON by nature."""

    customer_item_id: NotRequired[str]
    operation: NotRequired[str]
    model: str
    input: dict[str, Any]
    required_tools: NotRequired[list[str]]
    max_output_tokens: NotRequired[int]
    preset_version: NotRequired[str]


class InputLine(TypedDict):
    """A line of a batch's input chunk: an item and its place in the batch (and, on lines
    written since lanes read the model off the head, the item's model again, before the item:
    domain/batches/artifact_keys.py `input_line`)."""

    seq: int
    model: NotRequired[str]
    item: BatchItem


class ItemFacts(NamedTuple):
    """Immutable; a NamedTuple because it is built once per item (a frozen dataclass costs
    a setattr call per field, a measurable share of a 50,000-item preflight)."""

    customer_item_id: str
    operation: Operation
    model: str
    prompt_tokens: int
    output_tokens: int  # requested, before any lane's max_output_tokens cap
    tools: frozenset[str]  # hosted tools
    capabilities: frozenset[str]  # runtime capabilities: json_schema, tool_calling, vision, ...
    # What one call must fit in the context window: the whole prompt, but for embeddings the
    # largest single input (each input of a list is embedded on its own; OpenAI's limit is
    # per input).
    window_prompt_tokens: int
    prefix: ItemPrefix | None = None  # the cacheable prefix, when long enough (prompt_cache.py)
    dimensions: int = 0  # embeddings: the vector size asked for (`input.dimensions`); 0: the model's
    images: int = 0  # image parts: a lane's `max_images` bounds them (one request holds them all)
    image_bytes: int = 0  # the largest data: image's bytes: a lane's `max_image_bytes` bounds it

    @property
    def request_tokens(self) -> int:
        """What a lane's per-request limit (`max_embedding_request_tokens`) bounds: an
        embeddings item's inputs summed (one request carries them all); 0 for chat."""
        return self.prompt_tokens if self.operation == "embeddings" else 0


def read_item(raw: object) -> tuple[ItemFacts | None, tuple[ItemProblem, ...]]:
    """The item's facts, or None with every problem found in it."""
    if not isinstance(raw, dict):
        return None, (_shape("invalid_field", "", "An item must be a JSON object."),)
    problems: list[ItemProblem] = []
    customer_item_id = _required_string(
        raw, "customer_item_id", MAX_CUSTOMER_ITEM_ID, problems, "a string of 1-256 characters"
    )
    model = _required_string(raw, "model", MAX_MODEL_ID, problems, "an exact catalog model id")
    given_operation = raw.get("operation")
    operation = _OPERATIONS.get(given_operation) if isinstance(given_operation, str) else None
    if given_operation is None:
        problems.append(_shape("missing_field", "operation", "The item needs an operation."))
    elif operation is None:
        problems.append(
            _shape("invalid_field", "operation", f"operation must be one of {', '.join(OPERATIONS)}.")
        )
    payload = raw.get("input")
    if payload is None:
        problems.append(_shape("missing_field", "input", "The item needs an input object."))
    elif not isinstance(payload, dict):
        problems.append(_shape("invalid_field", "input", "input must be a JSON object."))
        payload = None
    tools = _declared_tools(raw.get("required_tools"), problems)
    _check_preset_version(raw.get("preset_version"), problems)
    output_limit = _output_limit(raw, payload, problems)

    if payload is None or operation is None:
        return None, tuple(problems)
    reader = _read_embedding_input if operation == "embeddings" else _read_chat_input
    estimate = reader(payload, problems)
    if problems or customer_item_id is None or model is None:
        return None, tuple(problems)
    if operation == "embeddings":
        requested = EMBEDDING_OUTPUT_TOKENS
    else:
        requested = DEFAULT_OUTPUT_TOKENS if output_limit is None else output_limit
    capabilities = estimate.capabilities
    if operation == "vision":
        capabilities.discard("vision")  # the operation itself already demands it
    return (
        ItemFacts(
            customer_item_id=customer_item_id,
            operation=operation,
            model=model,
            prompt_tokens=estimate.prompt_tokens,
            output_tokens=requested,
            tools=frozenset(tools | estimate.tools) if tools or estimate.tools else _NOTHING,
            capabilities=frozenset(capabilities) if capabilities else _NOTHING,
            prefix=None if operation == "embeddings" else item_prefix(payload),
            dimensions=estimate.dimensions,
            images=estimate.images,
            image_bytes=estimate.image_bytes,
            window_prompt_tokens=estimate.prompt_tokens
            if estimate.window_tokens < 0
            else estimate.window_tokens,
        ),
        _NO_PROBLEMS,
    )


def pro_rata(total: int, share: int, whole: int) -> int:
    """`share` of `whole` items' `total` (their tokens, the items asking for a tool), rounded
    up: the shares of a split never add up to less than the whole."""
    return total if share == whole else -(-total * share // whole)


@dataclass(slots=True)
class ModelGroup:
    """What one model's items ask for, in O(1) memory however many items there are.

    Lanes cap each item's output at their own max_output_tokens, which per-item totals
    would settle exactly; the bounds below are exact whenever no item asks for more than
    the cap (the common case) and otherwise over-estimate, never under-estimate.
    """

    model: str
    first_index: int
    item_count: int = 0
    prompt_tokens: int = 0
    max_prompt_tokens: int = 0
    output_tokens: int = 0  # requested, uncapped
    max_output_tokens: int = 0
    max_item_tokens: int = 0  # the largest prompt + requested output of one item
    largest_index: int = -1  # that item's index (the first such); -1: none added yet
    largest_dimensions: int = 0  # embeddings: the largest `dimensions` an item asks for
    # embeddings: the largest prompt of one item, summed across its inputs (one request: a
    # lane's `max_embedding_request_tokens` bounds it, as `max_prompt_tokens` its window)
    max_embedding_prompt_tokens: int = 0
    max_images: int = 0  # the most image parts one item holds (a lane's `max_images` bounds it)
    max_image_bytes: int = 0  # the largest data: image of any item (a lane's `max_image_bytes`)
    operations: set[str] = field(default_factory=set)
    tools: dict[str, int] = field(default_factory=dict)  # hosted tool -> first item index needing it
    tool_items: dict[str, int] = field(default_factory=dict)  # hosted tool -> items needing it
    capabilities: dict[str, int] = field(default_factory=dict)  # capability -> first item index
    # cacheable prefix key -> its items (model ordinals), for the first MAX_TRACKED_PREFIXES
    # prefixes seen; not compared: a profile keeps only the shared ones (`shared_prefixes`)
    prefixes: dict[str, PrefixRun] = field(default_factory=dict, compare=False)

    def add(self, index: int, facts: ItemFacts) -> None:
        if facts.prefix is not None:
            self._add_prefix(facts.prefix)
        self.item_count += 1
        self.prompt_tokens += facts.prompt_tokens
        self.output_tokens += facts.output_tokens
        self.max_prompt_tokens = max(self.max_prompt_tokens, facts.window_prompt_tokens)
        self.max_output_tokens = max(self.max_output_tokens, facts.output_tokens)
        item_tokens = facts.window_prompt_tokens + facts.output_tokens
        if item_tokens > self.max_item_tokens or self.largest_index < 0:
            self.max_item_tokens, self.largest_index = item_tokens, index
        self.largest_dimensions = max(self.largest_dimensions, facts.dimensions)
        self.max_embedding_prompt_tokens = max(self.max_embedding_prompt_tokens, facts.request_tokens)
        self.max_images = max(self.max_images, facts.images)
        self.max_image_bytes = max(self.max_image_bytes, facts.image_bytes)
        self.operations.add(facts.operation)
        for tool in facts.tools:
            self.tools.setdefault(tool, index)
            self.tool_items[tool] = self.tool_items.get(tool, 0) + 1
        for capability in facts.capabilities:
            self.capabilities.setdefault(capability, index)

    def tool_calls_on(self, lane: Lane, items: int) -> ToolUses:
        """The hosted tool calls a quote counts for `items` of the group's items on `lane`:
        of each tool the lane prices above nothing, its items' share (pro rata, rounded up)
        times the lane's calls per item."""
        calls = []
        for tool, needing in self.tool_items.items():
            price = lane.tool_price(tool)
            if price is not None and price.per_1k_calls > 0:
                calls.append((tool, pro_rata(needing, items, self.item_count) * price.calls_per_item))
        return ToolUses.of(calls)

    @property
    def largest_item(self) -> int:
        """The index of the item with the most tokens (prompt + requested output): what a
        window check of the group is about."""
        return self.largest_index if self.largest_index >= 0 else self.first_index

    def _add_prefix(self, prefix: ItemPrefix) -> None:
        ordinal = self.item_count
        run = self.prefixes.get(prefix.key)
        if run is not None:
            run.items += 1
            run.last = ordinal
        elif len(self.prefixes) < MAX_TRACKED_PREFIXES:
            self.prefixes[prefix.key] = PrefixRun(prefix.tokens, 1, ordinal, ordinal)

    def shared_prefixes(self) -> list[SharedPrefixView]:
        """The prefixes its items share, largest savings first (prompt_cache.shared_runs)."""
        return shared_views(self.prefixes)

    def output_tokens_on(self, lane_max_output_tokens: int) -> int:
        """Σ min(requested, cap), bounded above by min(Σ requested, count x cap)."""
        if self.max_output_tokens <= lane_max_output_tokens:
            return self.output_tokens
        return min(self.output_tokens, self.item_count * lane_max_output_tokens)

    def context_tokens_on(self, lane_max_output_tokens: int) -> int:
        """The largest prompt + capped output of one item, bounded above."""
        return min(self.max_item_tokens, self.max_prompt_tokens + lane_max_output_tokens)


# -- reading inputs ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Estimate:
    prompt_tokens: int
    tools: set[str] = field(default_factory=set)
    capabilities: set[str] = field(default_factory=set)
    dimensions: int = 0  # embeddings: `input.dimensions`, when given
    window_tokens: int = -1  # embeddings: the largest single input's tokens; -1: the whole prompt
    images: int = 0  # image parts in the conversation
    image_bytes: int = 0  # the largest data: image's decoded bytes (an http(s) image's are unknown)


def _read_chat_input(payload: dict[str, object], problems: list[ItemProblem]) -> _Estimate:
    """responses / vision: `messages` (chat) or `input` (Responses API), plus what rides along."""
    found = _Estimate(prompt_tokens=0)
    if not payload.keys() <= _CHAT_KEYS:
        _check_extra_keys(payload, _CHAT_KEYS, problems)
    text_bytes, messages, images = _read_conversation(payload, found, problems)
    for key in ("instructions", "system"):
        extra = payload.get(key)
        if isinstance(extra, str):
            text_bytes += utf8_len(extra)
            messages += 1
        elif extra is not None:
            problems.append(_shape("invalid_field", f"input.{key}", f"{key} must be a string."))
    text_bytes += _read_tools(payload, found, problems)
    if found.tools and MESSAGE_NAMES in found.capabilities:
        problems.append(
            _unsupported(
                "input.messages" if "messages" in payload else "input.input",
                "A message's name cannot be combined with hosted tools: OpenAI's Responses API, "
                "which runs them on OpenAI's lanes, has no message names.",
            )
        )
    if len(payload) > 1:  # sampling options are rare: most items are {messages} alone
        _read_sampling(payload, found, problems)
        for key in NOT_WITH_HOSTED_TOOLS if found.tools else ():
            value = payload.get(key)
            if value is None or (key in PENALTY_KEYS and value == 0):
                continue
            what = "stop sequences" if key == "stop" else key
            problems.append(
                _unsupported(
                    f"input.{key}",
                    f"{key} cannot be combined with hosted tools: OpenAI's Responses API, which "
                    f"runs them on OpenAI's lanes, has no {what}.",
                )
            )
    text_bytes += _read_output_format(payload, found, problems)
    if payload.get("tools") and _asks_json(payload.get("response_format"), payload.get("text")):
        found.capabilities.add(TOOLS_WITH_JSON_OUTPUT)
    if images:
        found.capabilities.add("vision")
    found.images = images
    found.prompt_tokens = prompt_tokens(text_bytes=text_bytes, messages=messages, images=images)
    return found


def _read_conversation(
    payload: dict[str, object], found: _Estimate, problems: list[ItemProblem]
) -> tuple[int, int, int]:
    """(text bytes, messages, image parts) of the conversation: `messages`, or the Responses
    API's `input` (a list of items, or a bare string: one user message)."""
    conversation = payload.get("messages")
    where = "input.messages"
    if conversation is None and payload.get("input") is not None:
        conversation, where = payload.get("input"), "input.input"
        if isinstance(conversation, str):  # Responses API: a bare string is one user message
            return utf8_len(conversation), 1, 0
    elif conversation is not None and payload.get("input") is not None:
        problems.append(_shape("invalid_field", "input.input", "Give messages or input, not both."))
    if conversation is None:
        problems.append(
            _shape(
                "missing_field",
                where,
                "A chat-style input needs messages (or input, as the Responses API names them).",
            )
        )
    elif not isinstance(conversation, list) or not conversation:
        problems.append(_shape("invalid_field", where, "messages must be a non-empty list."))
    else:
        return _read_turns(conversation, where, found, problems)
    return 0, 0, 0


def _read_turns(
    conversation: list[object], where: str, found: _Estimate, problems: list[ItemProblem]
) -> tuple[int, int, int]:
    """(text bytes, messages, image parts) of a non-empty list of messages or input items."""
    text_bytes = 0
    images = 0
    turns_with_tools = False
    for position, message in enumerate(conversation):
        counted = _read_message(message, where, position, problems)
        text_bytes += counted[0]
        images += counted[1]
        turns_with_tools = turns_with_tools or not (
            type(message) is dict and len(message) == 2 and "content" in message
        )  # a plain {role, content} turn holds no tool call or answer
    if not problems:
        _check_turn_order(conversation, where, turns_with_tools, problems)
    if turns_with_tools and any(_named_turn(message) for message in conversation):
        found.capabilities.add(MESSAGE_NAMES)
    if turns_with_tools and any(_tool_turn(message) for message in conversation):
        # The history is sent as tool turns, which only a lane with tool calling takes
        # (Llama's batch prompt on Bedrock has no place for them), tools declared or not.
        found.capabilities.add("tool_calling")
    if images:
        found.image_bytes = max(map(data_image_bytes, _image_urls(conversation)), default=0)
    if images and not all(gemini_takes_image(url) for url in _image_urls(conversation)):
        # Gemini must be told an image's type, and takes only its own (domain/routing/images.py):
        # an image whose URL tells none, or a GIF, goes only to lanes that read any image type.
        found.capabilities.add(ANY_IMAGE_TYPE)
    return text_bytes, len(conversation), images


def _named_turn(message: object) -> bool:
    """A user's or an assistant's turn that names its speaker (a null name is none; a
    function_call item's `name` is the function's)."""
    return (
        type(message) is dict
        and message.get("role") in ("user", "assistant")
        and message.get("name") is not None
    )


def _check_name(name: object, where: str, problems: list[ItemProblem]) -> None:
    if not (isinstance(name, str) and _MESSAGE_NAME.fullmatch(name)):
        problems.append(
            _shape(
                "invalid_field",
                where,
                "name must be 1-64 letters, digits, _ or - (OpenAI's ^[a-zA-Z0-9_-]+$).",
            )
        )


def _image_urls(conversation: list[object]) -> Iterator[str]:
    """The URLs of the image parts of a conversation (read by `_read_message` already)."""
    for message in conversation:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            if not isinstance(part, dict) or part.get("type") not in _IMAGE_PARTS:
                continue
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if isinstance(url, str):
                yield url


def _check_extra_keys(payload: dict[str, object], known: frozenset[str], problems: list[ItemProblem]) -> None:
    """Keys outside `known`: an inert one with an inert value is accepted (and not sent);
    any other is refused, so nothing an item says is dropped silently."""
    for key in sorted(payload.keys() - known):
        if key in _IGNORED_KEYS:
            test, shape = _IGNORED_KEYS[key]
            if not test(payload[key]):
                problems.append(_shape("invalid_field", f"input.{key}", f"input.{key} must be {shape}."))
            continue
        if key in _INERT_KEYS:
            required, value = _INERT_KEYS[key], payload[key]
            if value == required and isinstance(value, bool) == isinstance(required, bool):
                continue  # `n: true` is not `n: 1`, nor `stream: 0` false
            problems.append(
                _unsupported(f"input.{key}", f"input.{key} may only be {_json_word(required)} here.")
            )
            continue
        problems.append(
            _unsupported(
                f"input.{key}",
                f"input.{key} is not supported: not every lane's provider can honour it, and it is "
                "never dropped silently. Remove it (docs/routing.md, Item input).",
            )
        )


def _read_sampling(payload: dict[str, object], found: _Estimate, problems: list[ItemProblem]) -> None:
    for key, high in (("temperature", 2), ("top_p", 1)):
        value = payload.get(key)
        if value is not None and not (_is_number(value) and 0 <= value <= high):
            problems.append(
                _shape("invalid_field", f"input.{key}", f"{key} must be a number from 0 to {high}.")
            )
    for penalty in PENALTY_KEYS:
        value = payload.get(penalty)
        if value is None or (value == 0 and _is_number(value)):
            continue
        if _is_number(value) and -2 <= value <= 2:
            found.capabilities.add(PENALTIES)
        else:
            problems.append(
                _shape("invalid_field", f"input.{penalty}", f"{penalty} must be a number from -2 to 2.")
            )
    seed = payload.get("seed")
    if seed is not None:
        if isinstance(seed, int) and not isinstance(seed, bool) and SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
            found.capabilities.add(SEED)
        else:
            problems.append(
                _shape(
                    "invalid_field",
                    "input.seed",
                    "seed must be a whole number from -2147483648 to 2147483647.",
                )
            )
    stop = payload.get("stop")
    if stop is None:
        return
    entries = [stop] if isinstance(stop, str) else stop
    if not (
        isinstance(entries, list)
        and 1 <= len(entries) <= MAX_STOP_SEQUENCES
        and all(isinstance(entry, str) and entry for entry in entries)
    ):
        problems.append(
            _shape(
                "invalid_field",
                "input.stop",
                f"stop must be a string or a list of 1-{MAX_STOP_SEQUENCES} strings, none empty.",
            )
        )
    elif any(not entry.strip() for entry in entries):
        found.capabilities.add(WHITESPACE_STOP)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _read_tools(payload: dict[str, object], found: _Estimate, problems: list[ItemProblem]) -> int:
    """`tools` and `tool_choice`: the hosted tools and functions they name (into `found`);
    returns the bytes of the tool definitions (they reach the model as text)."""
    text_bytes = 0
    functions: set[str] = set()
    tool_list = payload.get("tools")
    if tool_list is not None:
        if isinstance(tool_list, list):
            for position, tool in enumerate(tool_list):
                _infer_tool(tool, f"input.tools[{position}]", found, problems, functions)
            text_bytes = value_bytes(tool_list)  # tool definitions reach the model as text
        else:
            problems.append(_shape("invalid_field", "input.tools", "tools must be a list."))
    choice = payload.get("tool_choice")
    if choice is not None:
        _read_tool_choice(choice, functions, found, problems)
    if choice == "none":  # no tool may run: its hosted tools are not sent (providers/conversation.py)
        found.tools.clear()
    if "parallel_tool_calls" in payload:
        parallel = payload["parallel_tool_calls"]
        if not isinstance(parallel, bool):
            problems.append(
                _shape(
                    "invalid_field", "input.parallel_tool_calls", "parallel_tool_calls must be true or false."
                )
            )
        elif not parallel and choice != "none" and (functions or found.tools):
            found.capabilities.add(SERIAL_TOOL_CALLS)
    if functions and found.tools:
        found.capabilities.add(FUNCTIONS_WITH_HOSTED_TOOLS)  # Gemini 2.x refuses the mix
        for name in sorted(functions & _VENDOR_TOOL_NAMES):
            problems.append(
                _shape(
                    "invalid_field",
                    "input.tools",
                    f"A function named {name!r} would clash with a hosted tool's own name; rename it.",
                )
            )
    return text_bytes


def _read_message(
    message: object, conversation: str, position: int, problems: list[ItemProblem]
) -> tuple[int, int]:
    """(text bytes, image parts) of one message or Responses input item. Its path
    (`input.messages[2]`) is only formatted when a problem or a list of parts needs it: most
    messages have neither."""
    if (  # the common {role, content} text message
        type(message) is dict
        and len(message) == 2
        and type(content := message.get("content")) is str
        and content
        and not content.isspace()
        and message.get("role") in _ROLES
        and message["role"] != "tool"
    ):
        return utf8_len(content), 0
    where = f"{conversation}[{position}]"
    if not isinstance(message, dict):
        problems.append(_shape("invalid_field", where, "A message must be a JSON object."))
        return 0, 0
    kind = message.get("type")
    if kind == "function_call":
        return _read_call_item(message, where, problems), 0
    if kind == "function_call_output":
        return _read_call_output(message, where, problems), 0
    if kind not in (None, "message"):
        problems.append(
            _unsupported(
                f"{where}.type",
                f"The input item type {kind!r} is not supported; items are messages, function_call "
                "and function_call_output.",
            )
        )
        return 0, 0
    role = message.get("role")
    if role not in _ROLES:
        problems.append(
            _shape("invalid_field", f"{where}.role", f"role must be one of {', '.join(sorted(_ROLES))}.")
        )
        return 0, 0
    for key in sorted(message.keys() - _MESSAGE_KEYS[str(role)]):
        article = "An" if role == "assistant" else "A"  # "a user", "a tool": only assistant takes "an"
        problems.append(_unsupported(f"{where}.{key}", f"{article} {role} message does not take {key!r}."))
    if _named_turn(message):
        _check_name(message["name"], f"{where}.name", problems)
    calls = message.get("tool_calls")
    refusal = _read_assistant_extras(message.get, where, problems) if role == "assistant" else ""
    text_bytes, images = _read_content(message.get("content"), str(role), calls or refusal, where, problems)
    text_bytes += utf8_len(refusal)
    if role == "tool" and not _call_id(message.get("tool_call_id")):
        problems.append(
            _shape(
                "missing_field",
                f"{where}.tool_call_id",
                "A tool message needs the tool_call_id it answers (1-64 letters, digits, _ or -).",
            )
        )
    if calls is not None:
        text_bytes += _read_tool_calls(calls, f"{where}.tool_calls", problems)
    return text_bytes, images


def _read_assistant_extras(get: Callable[[str], object], where: str, problems: list[ItemProblem]) -> str:
    """The keys an assistant message (its `get`) echoes from an answer
    (`_NULL_ONLY_ASSISTANT_KEYS`); returns its refusal's text ("" for none), which stands for
    the content when that is empty."""
    for key, why in _NULL_ONLY_ASSISTANT_KEYS.items():
        if get(key) is not None:
            problems.append(_unsupported(f"{where}.{key}", why))
    annotations = get("annotations")
    if annotations is not None and not isinstance(annotations, list):
        problems.append(
            _shape("invalid_field", f"{where}.annotations", "annotations must be a list or null.")
        )
    refusal = get("refusal")
    if refusal is None:
        return ""
    if not isinstance(refusal, str):
        problems.append(_shape("invalid_field", f"{where}.refusal", "refusal must be some text or null."))
        return ""
    return refusal if refusal.strip() else ""


def _read_content(
    content: object, role: str, calls: object, where: str, problems: list[ItemProblem]
) -> tuple[int, int]:
    """(text bytes, image parts) of a message's `content`: text, or a list of parts. `calls` is
    what lets an assistant's content be empty: its tool calls, or its refusal's text."""
    text_bytes = 0
    images = 0
    if isinstance(content, str) and (content.strip() or (role == "assistant" and calls)):
        text_bytes += utf8_len(content)
    elif isinstance(content, list) and content:
        for index, part in enumerate(content):
            counted = _read_part(part, f"{where}.content[{index}]", role == "assistant", problems)
            text_bytes += counted[0]
            images += counted[1]
        if images and role != "user":
            problems.append(
                _shape("invalid_field", f"{where}.content", "Only user messages may hold images.")
            )
    elif not (content is None and role == "assistant" and calls):
        problems.append(
            _shape(
                "invalid_field",
                f"{where}.content",
                "content must be some text (not blank) or a non-empty list of parts.",
            )
        )
    return text_bytes, images


def _read_tool_calls(calls: object, where: str, problems: list[ItemProblem]) -> int:
    if not isinstance(calls, list) or not calls:
        problems.append(_shape("invalid_field", where, "tool_calls must be a non-empty list."))
        return 0
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not (
            isinstance(call, dict)
            and _call_id(call.get("id"))
            and call.get("type", "function") == "function"
            and isinstance(function, dict)
            and _function_name(function.get("name"))
            and _json_object_text(function.get("arguments"))
            and call.keys() <= {"id", "type", "function", "extra_content"}
        ):
            problems.append(
                _shape(
                    "invalid_field",
                    f"{where}[{index}]",
                    "A tool call is {id (1-64 letters, digits, _ or -), type: function, "
                    "function: {name, arguments: a JSON object as a string}}.",
                )
            )
    return value_bytes(calls)


def _check_turn_order(
    conversation: list[object], where: str, with_tools: bool, problems: list[ItemProblem]
) -> None:
    """The first turn after the system text is a user's, and every tool call is answered by
    the turns right after it (a tool message or function_call_output per call id) and every
    answer answers a call, as every vendor requires."""
    first = next((m for m in conversation if _role_of(m) not in ("system", "developer")), None)
    if first is None or _role_of(first) != "user":
        problems.append(
            _shape("invalid_field", where, "The first message after the system text must be the user's.")
        )
    if not with_tools:
        return
    pending: list[str] = []  # call ids awaiting their answers
    phase = "free"  # or "calling" (function_call items so far), "answering"
    for position, message in enumerate(conversation):
        assert isinstance(message, dict)  # _read_message refused anything else
        here = f"{where}[{position}]"
        answer = _answer_id(message)
        if answer is not None:
            if phase == "free" or answer not in pending:
                problems.append(_shape("invalid_field", here, f"{answer!r} answers no tool call before it."))
                return
            pending.remove(answer)
            phase = "answering"
            continue
        if pending and not (message.get("type") == "function_call" and phase == "calling"):
            problems.append(
                _shape("invalid_field", here, f"The tool call {pending[0]!r} must be answered first.")
            )
            return
        pending.extend(_call_ids(message))
        # consecutive function_call items are one assistant turn
        calling = message.get("type") == "function_call"
        phase = "calling" if calling else "answering" if pending else "free"
    if pending:
        problems.append(
            _shape("invalid_field", where, f"The tool call {pending[0]!r} has no answer in the conversation.")
        )


def _tool_turn(message: object) -> bool:
    """A tool call (an assistant's `tool_calls`, a `function_call` item) or a tool's answer
    (a `tool` message, a `function_call_output` item)."""
    return isinstance(message, dict) and (
        message.get("type") in ("function_call", "function_call_output")
        or message.get("role") == "tool"
        or message.get("tool_calls") is not None
    )


def _role_of(message: object) -> str:
    if not isinstance(message, dict):
        return ""
    kind = message.get("type")
    if kind == "function_call":
        return "assistant"
    if kind == "function_call_output":
        return "tool"
    return str(message.get("role") or "")


def _call_ids(message: dict[str, object]) -> list[str]:
    if message.get("type") == "function_call":
        return [str(message.get("call_id"))]
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        return [str(call.get("id")) for call in calls if isinstance(call, dict)]
    return []


def _answer_id(message: dict[str, object]) -> str | None:
    if message.get("type") == "function_call_output":
        return str(message.get("call_id"))
    if message.get("role") == "tool":
        return str(message.get("tool_call_id"))
    return None


def _read_call_item(item: dict[str, object], where: str, problems: list[ItemProblem]) -> int:
    if not (
        _call_id(item.get("call_id"))
        and _function_name(item.get("name"))
        and _json_object_text(item.get("arguments"))
        and item.keys() <= _CALL_ITEM_KEYS
    ):
        problems.append(
            _shape(
                "invalid_field",
                where,
                "A function_call item is {type, call_id, name, arguments: a JSON object as a string}.",
            )
        )
    return value_bytes(item)


def _read_call_output(item: dict[str, object], where: str, problems: list[ItemProblem]) -> int:
    if not (
        _call_id(item.get("call_id"))
        and isinstance(item.get("output"), str)
        and item.keys() <= _CALL_OUTPUT_KEYS
    ):
        problems.append(
            _shape(
                "invalid_field",
                where,
                "A function_call_output item is {type, call_id, output: a string}.",
            )
        )
    return value_bytes(item)


def _read_part(part: object, where: str, assistant: bool, problems: list[ItemProblem]) -> tuple[int, int]:
    if not isinstance(part, dict):
        problems.append(_shape("invalid_field", where, "A content part must be an object."))
        return 0, 0
    kind = part.get("type")
    if kind in _TEXT_PARTS or (kind == "refusal" and assistant):
        key = "refusal" if kind == "refusal" else "text"
        text = part.get(key)
        if isinstance(text, str) and text.strip() and part.keys() <= {"type", key, "annotations"}:
            return utf8_len(text), 0
        problems.append(
            _shape(
                "invalid_field", f"{where}.{key}", f"A {kind} part is {{type, {key}: some text, not blank}}."
            )
        )
        return 0, 0
    if kind in _IMAGE_PARTS:
        # Images are priced by pixels, not by the bytes of a data URL: a fixed charge each.
        reason = _image_defect(part)
        if reason:
            problems.append(_shape("invalid_field", where, reason))
        return 0, 1
    problems.append(
        _unsupported(
            f"{where}.type",
            f"The content part type {kind!r} is not supported; parts are text "
            "(text, input_text, output_text) and images by URL (image_url, input_image).",
        )
    )
    return 0, 0


# Data URLs of the image types every vision vendor takes (Anthropic, Gemini, Bedrock, OpenAI),
# their data standard padded base64 and nothing else: Anthropic refuses data that does not
# decode ("invalid base64 data"), Gemini's adapter must decode it, so whitespace, stray or
# missing padding are refused here rather than failing on one lane and passing on another.
_BASE64: Final = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)"
IMAGE_URL_PATTERN: Final = rf"^(https?://\S+|data:image/(jpeg|png|gif|webp);base64,{_BASE64})$"
_IMAGE_URL: Final = re.compile(IMAGE_URL_PATTERN, re.S)
_DETAILS: Final = frozenset({"auto", "low", "high"})


def _image_defect(part: dict[str, object]) -> str | None:
    """Why an image part cannot be sent to every vision lane, or None. Images are given by
    URL (http(s) or a base64 `data:image/...` URL); file ids are one vendor's own."""
    image = part.get("image_url")
    detail = part.get("detail")
    keys = {"type", "image_url", "detail"}
    if isinstance(image, dict):
        detail = image.get("detail")
        if not image.keys() <= {"url", "detail"}:
            return "image_url is {url, detail?}."
        image = image.get("url")
    if "file_id" in part:
        return "Images are given by URL (http(s) or a base64 data: URL); file ids are not supported."
    if not part.keys() <= keys:
        return f"An image part is {{type, image_url, detail?}}; {sorted(part.keys() - keys)} not supported."
    if not isinstance(image, str) or not _IMAGE_URL.fullmatch(image):
        return (
            "An image part needs image_url: an http(s) URL or a base64 data URL of a JPEG, PNG, GIF or "
            "WebP image (data:image/png;base64,..., the data padded base64 without spaces or line breaks)."
        )
    if detail is not None and detail not in _DETAILS:
        return "detail must be auto, low or high."
    return data_type_mismatch(image)


def _read_embedding_input(payload: dict[str, object], problems: list[ItemProblem]) -> _Estimate:
    """embeddings: `{input: str | [str] | [int] | [[int]]}`, or `{text: ...}`; token-id arrays
    count one token per id."""
    if not payload.keys() <= _EMBEDDING_KEYS:
        _check_extra_keys(payload, _EMBEDDING_KEYS, problems)
    found = _Estimate(prompt_tokens=0)
    _read_embedding_options(payload, found, problems)
    key = "input" if payload.get("input") is not None else "text"
    value = payload.get(key)
    if key == "input" and payload.get("text") is not None:
        problems.append(_shape("invalid_field", "input.text", "Give input or text, not both."))
    text_bytes = largest_bytes = 0
    given_tokens = largest_given = 0
    valid = True
    if isinstance(value, str) and value:
        text_bytes = largest_bytes = utf8_len(value)
    elif isinstance(value, list) and 0 < len(value) <= MAX_EMBEDDING_INPUTS:
        # One kind per list, as OpenAI's CreateEmbeddingRequest.input is one of [string],
        # [integer] and [[integer]]: a list mixing them is refused, not sent.
        first = value[0]
        if isinstance(first, str):
            valid = all(isinstance(entry, str) and entry for entry in value)
            sizes = [utf8_len(entry) for entry in value] if valid else [0]
            text_bytes, largest_bytes = sum(sizes), max(sizes)
        elif _token_id(first):  # one input given as token ids
            valid = all(_token_id(entry) for entry in value)
            given_tokens = largest_given = len(value)
        else:
            valid = all(
                isinstance(entry, list) and entry and all(_token_id(t) for t in entry) for entry in value
            )
            lengths = [len(entry) for entry in value] if valid else [0]
            given_tokens, largest_given = sum(lengths), max(lengths)
    else:
        valid = False
    if not valid:
        code = "missing_field" if value is None else "invalid_field"
        problems.append(
            _shape(
                code,
                f"input.{key}",
                f"Embeddings need input: a non-empty string, or a list of 1-{MAX_EMBEDDING_INPUTS} "
                "non-empty strings, token ids or token arrays (one kind per list).",
            )
        )
    found.prompt_tokens = prompt_tokens(text_bytes=text_bytes, messages=0, images=0) + given_tokens
    # Each input is embedded on its own: the largest one must fit the window, not their sum.
    found.window_tokens = prompt_tokens(text_bytes=largest_bytes, messages=0, images=0) + largest_given
    return found


def _read_embedding_options(
    payload: dict[str, object], found: _Estimate, problems: list[ItemProblem]
) -> None:
    """`dimensions`, which only some models take (OpenAI: text-embedding-3 and later), so a lane
    must offer `embedding_dimensions` (the preflight holds it to the model's vector size:
    domain/batches/preflight.py); `encoding_format`, float only."""
    dimensions = payload.get("dimensions")
    if isinstance(dimensions, int) and not isinstance(dimensions, bool) and dimensions >= 1:
        found.capabilities.add(EMBEDDING_DIMENSIONS)
        found.dimensions = dimensions
    elif dimensions is not None:
        problems.append(
            _shape("invalid_field", "input.dimensions", "dimensions must be a whole number of at least 1.")
        )
    if payload.get("encoding_format", "float") != "float":
        problems.append(
            _unsupported("input.encoding_format", "Embeddings come back as floats: encoding_format is float.")
        )


def _infer_tool(
    tool: object, where: str, found: _Estimate, problems: list[ItemProblem], functions: set[str]
) -> None:
    """A function tool needs tool calling; a hosted tool declared in the input is a
    requirement on the lane."""
    kind = tool.get("type") if isinstance(tool, dict) else None
    if not isinstance(kind, str) or not isinstance(tool, dict):
        problems.append(_shape("invalid_field", f"{where}.type", "A tool needs a type string."))
        return
    if kind == _FUNCTION_TOOL_TYPE:
        _infer_function(tool, where, found, problems, functions)
        return
    hosted = hosted_tool_name(kind)
    if hosted is None:
        problems.append(
            ItemProblem(
                category="tool_support",
                code="tool_not_supported",
                field=f"{where}.type",
                message=(
                    f"The tool type {kind!r} is not offered by any lane; hosted tools are "
                    f"{', '.join(sorted(HOSTED_TOOLS))}, and custom tools use type 'function'."
                ),
            )
        )
        return
    _check_hosted_settings(tool, kind, hosted, where, problems)
    found.tools.add(hosted)


def _infer_function(
    tool: dict[str, object], where: str, found: _Estimate, problems: list[ItemProblem], functions: set[str]
) -> None:
    """A function tool (chat nests it under `function`; Responses writes it flat): a valid one,
    named once, needs tool calling; a `strict` one also needs a lane that holds output to a
    JSON Schema (`json_schema`: Claude and Bedrock's models refuse or ignore `strict`)."""
    nested = tool.get("function")
    if isinstance(nested, dict):
        spec, outside = nested, tool.keys() - {"type", "function"}
    else:
        spec, outside = {k: v for k, v in tool.items() if k != "type"}, set()
    reason = _function_defect(spec, outside)
    if reason:
        problems.append(_shape("invalid_field", where, reason))
        return
    name = str(spec["name"])
    if name in functions:  # Anthropic, Bedrock and Gemini refuse a name declared twice
        problems.append(
            _shape(
                "invalid_field",
                where,
                f"A function named {name!r} is declared twice: Anthropic, Bedrock and Gemini take "
                "each name once.",
            )
        )
        return
    functions.add(name)
    found.capabilities.add("tool_calling")
    if spec.get("strict") is True:
        found.capabilities.add("json_schema")


def _check_hosted_settings(
    tool: dict[str, object], kind: str, hosted: str, where: str, problems: list[ItemProblem]
) -> None:
    """A hosted tool's declaration carries only what the tool cannot run without."""
    allowed = _HOSTED_TOOL_KEYS.get(hosted, frozenset({"type"}))
    if _refuse_keys(
        tool.keys() - allowed,
        where,
        problems,
        lambda extra: (
            f"The {kind} tool takes no settings here ({extra}): every lane that runs it runs "
            "it with the vendor's defaults."
        ),
    ):
        return
    if hosted == "file_search" and not _string_list(tool.get("vector_store_ids")):
        problems.append(
            _shape("missing_field", f"{where}.vector_store_ids", "file_search needs vector_store_ids.")
        )
    elif hosted == "python_execution" and tool.get("container", {"type": "auto"}) != {"type": "auto"}:
        problems.append(
            _unsupported(
                f"{where}.container", 'The code interpreter runs in {"type": "auto"} containers only.'
            )
        )


def _function_defect(spec: dict[str, object], outside: set[str]) -> str | None:
    if outside or not spec.keys() <= _FUNCTION_KEYS:
        extra = sorted(outside | (spec.keys() - _FUNCTION_KEYS))
        return f"A function tool is {{name, description?, parameters?, strict?}}; {extra} not supported."
    if not _function_name(spec.get("name")):
        return "A function's name is 1-64 letters, digits, _ or -, starting with a letter or _."
    description = spec.get("description")
    if description is not None and not isinstance(description, str):
        return "A function's description is a string."
    strict = spec.get("strict")
    if strict is not None and not isinstance(strict, bool):
        return "strict is true or false."
    parameters = spec.get("parameters")
    if parameters is not None:
        reason = schema_defect(parameters, strict=strict is True)
        if reason is not None:
            return f"The function's parameters are not a JSON Schema: {reason}."
        if not isinstance(parameters, dict) or parameters.get("type", "object") != "object":
            return "A function's parameters are an object schema."
    return None


def _read_tool_choice(
    choice: object, functions: set[str], found: _Estimate, problems: list[ItemProblem]
) -> None:
    """auto / none / required, one declared function (either dialect), or one hosted tool."""
    if choice in ("auto", "none"):
        return
    if not functions and not found.tools:
        problems.append(
            _shape("invalid_field", "input.tool_choice", "tool_choice needs the tools it chooses from.")
        )
        return
    if choice == "required":
        return
    kind = choice.get("type") if isinstance(choice, dict) else None
    if isinstance(choice, dict) and kind == _FUNCTION_TOOL_TYPE:
        nested = choice.get("function")
        name = nested.get("name") if isinstance(nested, dict) else choice.get("name")
        if name in functions:
            return
        problems.append(
            _shape(
                "invalid_field",
                "input.tool_choice",
                f"tool_choice names the function {name!r}, which the item's tools do not declare.",
            )
        )
        return
    hosted = hosted_tool_name(kind) if isinstance(kind, str) else None
    if hosted is not None and isinstance(choice, dict) and choice.keys() == {"type"}:
        if hosted not in found.tools:
            problems.append(
                _shape(
                    "invalid_field",
                    "input.tool_choice",
                    f"tool_choice names the hosted tool {kind!r}, which the item's tools do not declare.",
                )
            )
        return
    problems.append(
        _unsupported(
            "input.tool_choice",
            "tool_choice is auto, none, required, one declared function, or one hosted tool {type}.",
        )
    )


def _read_output_format(payload: dict[str, object], found: _Estimate, problems: list[ItemProblem]) -> int:
    """A structured-output schema (chat `response_format` or Responses `text.format`) needs a
    lane with json_schema support and is sent to the model, so it counts as prompt text."""
    response_format = payload.get("response_format")
    text = payload.get("text")
    if response_format is None and text is None:
        return 0  # most items: no structured output (a hot path of a 1M-item quote)
    if text is not None and not isinstance(text, dict):
        problems.append(_shape("invalid_field", "input.text", "text is an object: {format?}."))
    candidates = (
        ("input.response_format", response_format, "json_schema"),
        ("input.text.format", text.get("format") if isinstance(text, dict) else None, None),
    )
    counted = 0
    for where, spec, nested in candidates:
        if spec is None:
            continue
        if not isinstance(spec, dict):
            problems.append(_schema_problem(where, f"{where} must be an object"))
            continue
        kind = spec.get("type")
        if kind in ("text", "json_object"):
            _check_format_keys(spec, _PLAIN_FORMAT_KEYS, where, problems)
            continue
        if kind != "json_schema":
            problems.append(_schema_problem(f"{where}.type", "type must be text, json_object or json_schema"))
            continue
        before = len(problems)
        if nested:  # chat nests the schema's keys under `json_schema`
            _check_format_keys(spec, frozenset({"type", nested}), where, problems)
        holder = spec.get(nested) if nested else spec
        holder_where = f"{where}.{nested}" if nested else where
        schema = holder.get("schema") if isinstance(holder, dict) else None
        if not isinstance(holder, dict) or not _function_name(holder.get("name")):
            problems.append(
                _schema_problem(f"{holder_where}.name", "name must be 1-64 letters, digits, _ or -")
            )
            continue
        known = frozenset(SCHEMA_FORMAT_KEYS) if nested else frozenset({*SCHEMA_FORMAT_KEYS, "type"})
        _check_format_keys(holder, known, holder_where, problems)
        description = holder.get("description")
        if description is not None and not isinstance(description, str):
            problems.append(_schema_problem(f"{holder_where}.description", "description must be a string"))
        strict = holder.get("strict")
        if strict is not None and not isinstance(strict, bool):
            problems.append(_schema_problem(f"{holder_where}.strict", "strict must be true, false or null"))
        reason = schema_defect(schema, strict=strict is True)
        if reason is not None:
            problems.append(_schema_problem(f"{holder_where}.schema", reason))
        if len(problems) > before:
            continue
        found.capabilities.add("json_schema")
        counted += value_bytes(schema)
    return counted


def _asks_json(response_format: object, text: object) -> bool:
    """Whether an item's chat `response_format` or Responses `text` asks for a JSON answer
    (a format of type json_object or json_schema)."""
    formats = (response_format, text.get("format") if isinstance(text, dict) else None)
    return any(isinstance(spec, dict) and spec.get("type") in _JSON_FORMATS for spec in formats)


def _check_format_keys(
    spec: dict[str, object], known: frozenset[str], where: str, problems: list[ItemProblem]
) -> None:
    """A structured-output format's keys outside `known` (OpenAI's contract): refused, as a
    hosted tool's settings are, since no vendor takes them and none is dropped silently."""
    _refuse_keys(
        spec.keys() - known,
        where,
        problems,
        lambda extra: (
            f"{where} takes {', '.join(sorted(known))} only; {extra} not supported "
            "(docs/routing.md, Item input)."
        ),
    )


def schema_defect(schema: object, *, strict: bool = False) -> str | None:
    """Why `schema` does not look like a JSON Schema, or None. A shape check, not a full
    meta-schema validation: the keywords providers read must have the right types. `strict`
    (a format or function that says `strict: true`): also the subset strict decoding takes
    (OpenAI's Structured Outputs, which refuses the request otherwise): every object schema
    sets `additionalProperties: false` and lists each of its properties in `required`."""
    if not isinstance(schema, dict):
        return "schema is missing or not a JSON object"
    stack: list[tuple[object, str, int]] = [(schema, "schema", 0)]
    while stack:
        node, at, depth = stack.pop()
        if isinstance(node, bool):  # `true` / `false` are schemas too
            continue
        if not isinstance(node, dict):
            return f"{at} must be an object or a boolean"
        if depth > MAX_SCHEMA_DEPTH:
            return f"schema is nested deeper than {MAX_SCHEMA_DEPTH} levels"
        declared = node.get("type")
        if declared is not None:
            names = declared if isinstance(declared, list) else [declared]
            if not names or not all(isinstance(n, str) and n in _SCHEMA_TYPES for n in names):
                return f"{at}.type names an unknown type {declared!r}"
        required = node.get("required")
        if required is not None and not (
            isinstance(required, list) and all(isinstance(n, str) for n in required)
        ):
            return f"{at}.required must be a list of property names"
        enum = node.get("enum")
        if enum is not None and not (isinstance(enum, list) and enum):
            return f"{at}.enum must be a non-empty list"
        if "$ref" in node and not isinstance(node["$ref"], str):
            return f"{at}.$ref must be a string"
        if strict and (node.get("type") == "object" or "properties" in node):
            reason = _strict_object_defect(
                node.get("additionalProperties"), node.get("properties"), node.get("required"), at
            )
            if reason is not None:
                return reason
        for keyword in ("properties", "$defs", "definitions", "patternProperties"):
            children = node.get(keyword)
            if children is None:
                continue
            if not isinstance(children, dict):
                return f"{at}.{keyword} must be an object of schemas"
            stack.extend((child, f"{at}.{keyword}.{name}", depth + 1) for name, child in children.items())
        for keyword in ("anyOf", "oneOf", "allOf", "prefixItems"):
            options = node.get(keyword)
            if options is None:
                continue
            if not isinstance(options, list) or not options:
                return f"{at}.{keyword} must be a non-empty list of schemas"
            stack.extend((child, f"{at}.{keyword}[{i}]", depth + 1) for i, child in enumerate(options))
        for keyword in ("items", "additionalProperties", "not", "if", "then", "else", "contains"):
            child = node.get(keyword)
            if child is not None:
                stack.append((child, f"{at}.{keyword}", depth + 1))
    return None


def _strict_object_defect(additional: object, properties: object, required: object, at: str) -> str | None:
    """Why an object schema (its `additionalProperties`, `properties` and `required`) falls
    outside strict decoding's subset (`schema_defect`), or None."""
    if additional is not False:
        return f"{at}.additionalProperties must be false under strict: true (or set strict to false)"
    listed = set(required) if isinstance(required, list) else set()
    missing = [name for name in properties if name not in listed] if isinstance(properties, dict) else []
    if missing:
        return (
            f"{at}.required must list every property under strict: true ({missing[0]!r} is missing; "
            "make it nullable to keep it optional, or set strict to false)"
        )
    return None


# -- small helpers ----------------------------------------------------------------------------


def _required_string(
    raw: dict[str, object], key: str, limit: int, problems: list[ItemProblem], what: str
) -> str | None:
    value = raw.get(key)
    if value is None:
        problems.append(_shape("missing_field", key, f"The item needs {key}."))
        return None
    if not isinstance(value, str) or not value or len(value) > limit:
        problems.append(_shape("invalid_field", key, f"{key} must be {what}."))
        return None
    return value


def _check_preset_version(value: object, problems: list[ItemProblem]) -> None:
    """The preset version the item was expanded from (`name@3`): recorded with the item and
    shown as its preset, so nothing else is taken (null is absent, as for every item field)."""
    if value is not None and not (isinstance(value, str) and PRESET_VERSION.fullmatch(value)):
        problems.append(
            _shape(
                "invalid_field",
                "preset_version",
                "preset_version must be one preset version, name@version (docs/presets.md).",
            )
        )


def _declared_tools(value: object, problems: list[ItemProblem]) -> set[str]:
    if value is None:
        return set()
    if not isinstance(value, list):
        problems.append(_shape("invalid_field", "required_tools", "required_tools must be a list."))
        return set()
    tools: set[str] = set()
    for position, tool in enumerate(value):
        if isinstance(tool, str) and tool in HOSTED_TOOLS:
            tools.add(tool)
        else:
            problems.append(
                _shape(
                    "invalid_field",
                    f"required_tools[{position}]",
                    f"Unknown tool {tool!r}; tools are {', '.join(sorted(HOSTED_TOOLS))}.",
                )
            )
    return tools


def _output_limit(
    raw: dict[str, object], payload: dict[str, object] | None, problems: list[ItemProblem]
) -> int | None:
    """The item's max_output_tokens, else the input's own limit (max_output_tokens,
    max_completion_tokens, max_tokens: whichever the body's API calls it)."""
    chosen: int | None = None
    value = raw.get("max_output_tokens")
    if value is not None:
        chosen = _limit(value, "max_output_tokens", problems)
        if chosen is None:
            return None
    if payload is None:
        return chosen
    for key, where in _INPUT_LIMITS:
        value = payload.get(key)
        if value is None:
            continue
        limit = _limit(value, where, problems)  # each one given is checked; the first is used
        if limit is None:
            return None
        chosen = limit if chosen is None else chosen
    return chosen


def _limit(value: object, where: str, problems: list[ItemProblem]) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_OUTPUT_REQUEST:
        return value
    problems.append(
        _shape("invalid_field", where, f"{where} must be a whole number from 1 to {MAX_OUTPUT_REQUEST}.")
    )
    return None


def _token_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _nonempty_string(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _function_name(value: object) -> bool:
    return isinstance(value, str) and _FUNCTION_NAME.fullmatch(value) is not None


def _json_object_text(value: object) -> bool:
    """A tool call's arguments: every vendor but OpenAI takes them as an object."""
    if not isinstance(value, str):
        return False
    try:
        return isinstance(json.loads(value), dict)
    except ValueError:
        return False


def _call_id(value: object) -> bool:
    return isinstance(value, str) and _CALL_ID.fullmatch(value) is not None


def _string_list(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(_nonempty_string(v) for v in value)


def _json_word(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _refuse_keys(extra: Set[str], where: str, problems: list[ItemProblem], why: Callable[[str], str]) -> bool:
    """Refuses the keys `extra` (the first named as the field, `why` given them all, in
    order); True when there are any."""
    if extra:
        names = sorted(extra)
        problems.append(_unsupported(f"{where}.{names[0]}", why(", ".join(names))))
    return bool(extra)


def _unsupported(where: str, message: str) -> ItemProblem:
    return ItemProblem(category="jsonl_shape", code="unsupported_parameter", field=where, message=message)


def _shape(code: str, where: str, message: str) -> ItemProblem:
    return ItemProblem(category="jsonl_shape", code=code, field=where, message=message)


def _schema_problem(where: str, reason: str) -> ItemProblem:
    return ItemProblem(
        category="json_schema",
        code="json_schema_invalid",
        field=where,
        message=f"Invalid structured-output schema at {where}: {reason}.",
    )
