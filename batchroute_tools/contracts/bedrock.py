"""AWS Bedrock's request contract: what Bedrock accepts, checked against botocore's own
service models (the `bedrock-runtime` and `bedrock` models of the installed botocore) and,
for batch inference records, against the models' native bodies.

    request_violations(operation, body)   [] for a body Bedrock takes, else one line per
                                          violation (a path and the reason)
    outgoing(request, endpoint, ...)      every (operation, body) the adapter would send

Operations:

    Converse, ConverseStream    the keyword arguments of boto3's `converse` /
                                `converse_stream` (modelId included; image bytes as bytes, or
                                as the base64 text the wire carries)
    CreateModelInvocationJob    the keyword arguments of `create_model_invocation_job`
    batch_record:anthropic      a batch record's modelInput for Anthropic Claude: the
                                Messages API body with anthropic_version
                                "bedrock-2023-05-31", checked by the Anthropic contract's
                                `message_violations` (contracts/anthropic.py: the SDK's
                                types and the API's rules), without `model` or `stream`
    batch_record:meta           a batch record's modelInput for Meta Llama: {prompt,
                                max_gen_len, temperature, top_p}

Checked, beyond botocore's ParamValidator (types, required members, unknown members,
unions, minimums): what the service model documents and botocore leaves to the service
(maximum lengths and values, enums, patterns), and the rules the service applies:

- messages alternate user / assistant, starting with a user's; no empty content; no blank
  text (Bedrock: "The text field in the ContentBlock object is blank");
- toolUse / toolResult blocks need a toolConfig; every toolResult answers a toolUse of the
  turn before, and every toolUse is answered in the next turn; tool names are unique and a
  `tool` choice names a declared tool;
- per model family (the service model's documentation of ToolChoice, SpecificToolChoice,
  ContentBlock.image and ToolResultBlock.status): Meta Llama takes only the `auto` tool
  choice, no images and no toolResult `status`; maxTokens at most the model's output limit;
  outputConfig (structured output) only for models that offer it (none in this catalog);
- images: base64 that decodes, at most 3.75 MB each and 20 per request (Message.content's
  documented limits).

botocore is imported on first use and each service model loaded once: importing this module
is cheap. The emulator (emulators/bedrock.py) checks every request and record it receives
with `request_violations`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from botocore.model import Shape

    from batchroute.providers.base import ProviderRequest
    from batchroute.providers.endpoints import ProviderEndpoint

OPERATIONS: Final[dict[str, tuple[str, str]]] = {
    "Converse": ("bedrock-runtime", "Converse"),
    "ConverseStream": ("bedrock-runtime", "ConverseStream"),
    "CreateModelInvocationJob": ("bedrock", "CreateModelInvocationJob"),
    "ListModelInvocationJobs": ("bedrock", "ListModelInvocationJobs"),
}
RECORD_FAMILIES: Final = ("anthropic", "meta")
ANTHROPIC_VERSION: Final = "bedrock-2023-05-31"
# Message.content's documentation: up to 20 images of at most 3.75 MB each.
MAX_IMAGES: Final = 20
MAX_IMAGE_BYTES: Final = 3_750_000
# The output limit of the models this catalog runs on Bedrock (AWS's model cards): Claude 3.5
# Haiku writes up to 8,192 tokens, Llama 3 models up to 2,048 (max_gen_len).
MAX_OUTPUT_TOKENS: Final[dict[str, int]] = {
    "anthropic.claude-3-5-haiku": 8192,
    "anthropic.claude-3-haiku": 4096,
    "meta.llama3": 2048,
}
# Meta Llama's native InvokeModel body, from AWS's "Meta Llama models" page
# (https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-meta.html): no SDK
# type exists. `prompt` is required; temperature and top_p lie in 0..1; max_gen_len in
# 1..2048. Any other key is refused ("extraneous key [...] is not permitted").
LLAMA_KEYS: Final[dict[str, tuple[type | tuple[type, ...], float, float]]] = {
    "prompt": (str, 0, 0),
    "temperature": ((int, float), 0.0, 1.0),
    "top_p": ((int, float), 0.0, 1.0),
    "max_gen_len": (int, 1, 2048),
}
# The members of Bedrock's Claude body (AWS's "Anthropic Claude Messages API" page:
# https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages-request-response.html);
# the ones Bedrock alone reads are not Messages members, the rest are checked as those.
CLAUDE_KEYS: Final = frozenset(
    {
        "anthropic_version",
        "anthropic_beta",
        "max_tokens",
        "system",
        "messages",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "tools",
        "tool_choice",
    }
)
BEDROCK_ONLY: Final = frozenset({"anthropic_version", "anthropic_beta"})
_GEO: Final = re.compile(r"^(?:us|eu|apac|us-gov|global|jp|au|ca)\.")


def request_violations(operation: str, body: Any) -> list[str]:
    """Why Bedrock would refuse `body` as a request of `operation` ([] when it would not)."""
    if operation.startswith("batch_record:"):
        family = operation.removeprefix("batch_record:")
        if family == "anthropic":
            return anthropic_record_violations(body)
        if family == "meta":
            return llama_record_violations(body)
        raise ValueError(f"no Bedrock batch record family {family!r}: one of {', '.join(RECORD_FAMILIES)}")
    if operation not in OPERATIONS:
        known = ", ".join([*OPERATIONS, *(f"batch_record:{f}" for f in RECORD_FAMILIES)])
        raise ValueError(f"no Bedrock operation {operation!r}: one of {known}")
    if not isinstance(body, Mapping):
        return ["$: should be an object of request parameters"]
    shape = _input_shape(*OPERATIONS[operation])
    found = _botocore(body, shape) + list(_documented(body, shape, "$"))
    if operation in ("Converse", "ConverseStream"):
        found += _converse_rules(body)
    return found


def outgoing(
    request: ProviderRequest, endpoint: ProviderEndpoint, *, lane_max_output_tokens: int
) -> list[tuple[str, Any]]:
    """Every (operation, body) the Bedrock adapters built from `endpoint` would send for
    `request` (the lane's output limit standing in where the request sets none, as the lane
    runner does): the Converse call, the ConverseStream call, and the batch record's
    modelInput. A request the adapter refuses raises its PermanentProviderError, as the
    adapter does before sending anything."""
    from dataclasses import replace

    import batchroute.providers.bedrock.transform as transform

    del endpoint  # one Bedrock transform for every endpoint: the model id picks the body
    limit = request.max_output_tokens if request.max_output_tokens > 0 else lane_max_output_tokens
    if lane_max_output_tokens > 0:
        limit = min(limit, lane_max_output_tokens)
    request = replace(request, max_output_tokens=limit)
    converse = transform.converse_request(request)
    record = transform.batch_record(request)
    family = transform.model_family(request.provider_model_id)
    return [
        ("Converse", converse),
        ("ConverseStream", transform.converse_request(request)),
        (f"batch_record:{family}", record["modelInput"]),
    ]


# -- botocore ----------------------------------------------------------------------------------
@cache
def _input_shape(service: str, operation: str) -> Shape:
    import botocore.session

    model = botocore.session.get_session().get_service_model(service)
    shape = model.operation_model(operation).input_shape
    assert shape is not None
    return shape


def _botocore(body: Mapping[str, Any], shape: Shape) -> list[str]:
    from botocore.validate import ParamValidator

    report = ParamValidator().validate(dict(body), shape)
    if not report.has_errors():
        return []
    return [f"$: {line}" for line in report.generate_report().splitlines() if line.strip()]


def _documented(value: Any, shape: Shape, path: str) -> Iterator[str]:
    """The constraints the service model documents and botocore does not check: maxima,
    enums, patterns (types, minima and membership are botocore's)."""
    meta = shape.metadata
    kind = shape.type_name
    if kind == "structure":
        if meta.get("document") or not isinstance(value, Mapping):
            return
        members = shape.members
        for name, item in value.items():
            if name in members:
                yield from _documented(item, members[name], f"{path}.{name}")
    elif kind == "list":
        if not isinstance(value, list):
            return
        if "max" in meta and len(value) > meta["max"]:
            yield f"{path}: at most {meta['max']} items, not {len(value)}"
        member = shape.member
        for index, item in enumerate(value):
            yield from _documented(item, member, f"{path}[{index}]")
    elif kind == "map":
        if isinstance(value, Mapping):
            for key, item in value.items():
                yield from _documented(item, shape.value, f"{path}.{key}")
    elif kind == "string" and isinstance(value, str):
        if "max" in meta and len(value) > meta["max"]:
            yield f"{path}: at most {meta['max']} characters, not {len(value)}"
        enum = shape.enum
        if enum and value not in enum:
            yield f"{path}: {value!r} is not one of {', '.join(enum)}"
        pattern = _pattern(meta.get("pattern"))
        if pattern is not None and not pattern.fullmatch(value):
            yield f"{path}: {value!r} does not match the pattern {meta['pattern']}"
    elif kind in ("integer", "long", "float", "double") and _number(value):
        if "max" in meta and value > meta["max"]:
            yield f"{path}: at most {meta['max']}, not {value}"
    elif (
        kind == "blob"
        and isinstance(value, bytes | bytearray | str)
        and len(value) > meta.get("max", len(value))
    ):
        yield f"{path}: at most {meta['max']} bytes"


@cache
def _pattern(pattern: object) -> re.Pattern[str] | None:
    if not isinstance(pattern, str):
        return None
    try:
        return re.compile(pattern, re.DOTALL)
    except re.error:  # a pattern in a dialect Python does not read: the service's to check
        return None


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# -- Converse: the service's own rules ---------------------------------------------------------
def model_family(model_id: str) -> str:
    """`anthropic`, `meta`, ... of a model id, inference profile id or ARN."""
    name = model_id.rsplit("/", 1)[-1] if model_id.startswith("arn:") else model_id
    return _GEO.sub("", name).split(".", 1)[0]


def _output_limit(model_id: str) -> int | None:
    name = _GEO.sub("", model_id.rsplit("/", 1)[-1])
    for prefix, limit in MAX_OUTPUT_TOKENS.items():
        if name.startswith(prefix):
            return limit
    return None


def _converse_rules(body: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    model = str(body.get("modelId") or "")
    family = model_family(model)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["$.messages: at least one message"]
    found += _turn_rules(messages)
    for index, block in enumerate(body.get("system") or []):
        if isinstance(block, Mapping) and isinstance(block.get("text"), str) and not block["text"].strip():
            found.append(f"$.system[{index}].text: blank")
    found += _block_rules(messages, family)
    last = messages[-1] if isinstance(messages[-1], Mapping) else {}
    tail = _blocks(last)[-1:] if last.get("role") == "assistant" else []
    if (
        family == "anthropic"
        and tail
        and str(tail[0].get("text", "x")) != str(tail[0].get("text", "x")).rstrip()
    ):
        found.append(f"$.messages[{len(messages) - 1}]: a final assistant turn may not end in whitespace")
    found += _tool_rules(body, messages, family)
    config = body.get("inferenceConfig")
    limit = _output_limit(model)
    tokens = config.get("maxTokens") if isinstance(config, Mapping) else None
    if limit is not None and isinstance(tokens, int | float) and tokens > limit:
        found.append(f"$.inferenceConfig.maxTokens: {model} writes at most {limit} tokens")
    output = body.get("outputConfig")
    if isinstance(output, Mapping) and "textFormat" in output:
        found.append(f"$.outputConfig.textFormat: {model} offers no structured output")
    return found


def _turn_rules(messages: list[Any]) -> list[str]:
    found: list[str] = []
    previous = None
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if index == 0 and role != "user":
            found.append("$.messages[0].role: a conversation must start with a user message")
        if role not in ("user", "assistant"):
            found.append(f"$.messages[{index}].role: user or assistant")
        elif role == previous:
            found.append(f"$.messages[{index}].role: the conversation must alternate user and assistant")
        previous = role
        if not message.get("content"):
            found.append(f"$.messages[{index}].content: at least one content block")
    return found


def _block_rules(messages: list[Any], family: str) -> list[str]:
    found: list[str] = []
    images = 0
    for index, message in enumerate(messages):
        for position, block in enumerate(_blocks(message)):
            where = f"$.messages[{index}].content[{position}]"
            text = block.get("text")
            if isinstance(text, str) and not text.strip():
                found.append(f"{where}.text: blank")
            image = block.get("image")
            if isinstance(image, Mapping):
                images += 1
                if family != "anthropic":
                    found.append(f"{where}.image: {family} models take no images")
                found += _image_rules(image, f"{where}.image")
            result = block.get("toolResult")
            if isinstance(result, Mapping) and "status" in result and family != "anthropic":
                found.append(f"{where}.toolResult.status: {family} models take no status")
    if images > MAX_IMAGES:
        found.append(f"$.messages: at most {MAX_IMAGES} images, not {images}")
    return found


def _image_rules(image: Mapping[str, Any], where: str) -> list[str]:
    source = image.get("source")
    data = source.get("bytes") if isinstance(source, Mapping) else None
    if isinstance(data, str):  # the wire's base64
        try:
            data = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return [f"{where}.source.bytes: not base64"]
    if isinstance(data, bytes | bytearray) and len(data) > MAX_IMAGE_BYTES:
        return [f"{where}.source.bytes: at most {MAX_IMAGE_BYTES} bytes, not {len(data)}"]
    return []


def _tool_rules(body: Mapping[str, Any], messages: list[Any], family: str) -> list[str]:
    found: list[str] = []
    config = body.get("toolConfig")
    config = config if isinstance(config, Mapping) else {}
    names = [
        str(tool["toolSpec"].get("name"))
        for tool in config.get("tools") or []
        if isinstance(tool, Mapping) and isinstance(tool.get("toolSpec"), Mapping)
    ]
    if len(set(names)) != len(names):
        found.append("$.toolConfig.tools: tool names must be unique")
    choice = config.get("toolChoice")
    if isinstance(choice, Mapping):
        if family == "meta" and set(choice) - {"auto"}:
            found.append(f"$.toolConfig.toolChoice: {family} models take only the auto tool choice")
        chosen = choice.get("tool")
        if isinstance(chosen, Mapping) and chosen.get("name") not in names:
            found.append(f"$.toolConfig.toolChoice.tool.name: {chosen.get('name')!r} is not a declared tool")
    uses_tools = False
    asked: set[str] = set()  # the tool uses of the turn before
    for index, message in enumerate(messages):
        uses = {
            str(b["toolUse"].get("toolUseId"))
            for b in _blocks(message)
            if isinstance(b.get("toolUse"), Mapping)
        }
        answers = [
            str(b["toolResult"].get("toolUseId"))
            for b in _blocks(message)
            if isinstance(b.get("toolResult"), Mapping)
        ]
        uses_tools = uses_tools or bool(uses or answers)
        for answer in answers:
            if answer not in asked:
                found.append(
                    f"$.messages[{index}]: toolResult {answer!r} answers no toolUse of the turn before"
                )
        missing = asked - set(answers)
        if missing:
            found.append(f"$.messages[{index}]: toolUse {', '.join(sorted(missing))} not answered")
        asked = uses
    if uses_tools and not config:
        found.append("$.toolConfig: required when the messages hold toolUse or toolResult blocks")
    return found


def _blocks(message: object) -> list[Mapping[str, Any]]:
    content = message.get("content") if isinstance(message, Mapping) else None
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


# -- batch records -----------------------------------------------------------------------------
def llama_record_violations(body: Any) -> list[str]:
    """Why Bedrock would refuse `body` as a Meta Llama InvokeModel body."""
    if not isinstance(body, Mapping):
        return ["$: should be a JSON object"]
    found = [f"$.{key}: extraneous key, not permitted" for key in body if key not in LLAMA_KEYS]
    if "prompt" not in body:
        found.append("$.prompt: required")
    for key, (kind, least, most) in LLAMA_KEYS.items():
        if key not in body:
            continue
        value = body[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            found.append(f"$.{key}: should be {'a string' if kind is str else 'a number'}")
        elif isinstance(value, str):
            if not value.strip():
                found.append(f"$.{key}: blank")
        elif isinstance(value, int | float) and not least <= value <= most:
            found.append(f"$.{key}: between {least} and {most}, not {value}")
    if "max_gen_len" in body and isinstance(body["max_gen_len"], float):
        found.append("$.max_gen_len: a whole number")
    return found


def anthropic_record_violations(body: Any) -> list[str]:
    """Why Bedrock would refuse `body` as a Claude InvokeModel body: Anthropic's Messages
    body, checked by the Anthropic contract (`message_violations`, the SDK's types and the
    API's rules, as a non-streamed request), with what Bedrock's differs in: its
    `anthropic_version` ("bedrock-2023-05-31") required, an optional `anthropic_beta` list,
    no `model` (the job's) and no `stream`, and only the members Bedrock's Claude body has."""
    if not isinstance(body, Mapping):
        return ["$: should be a JSON object"]
    from batchroute_tools.contracts.anthropic import message_violations

    found: list[str] = []
    if body.get("anthropic_version") != ANTHROPIC_VERSION:
        found.append(f"$.anthropic_version: must be {ANTHROPIC_VERSION!r}")
    beta = body.get("anthropic_beta")
    if "anthropic_beta" in body and not (isinstance(beta, list) and all(isinstance(b, str) for b in beta)):
        found.append("$.anthropic_beta: should be a list of strings")
    for key in ("model", "stream"):
        if key in body:
            found.append(f"$.{key}: not permitted in a Bedrock body (the model is the job's)")
    found += [
        f"$.{key}: extraneous key, not permitted in Bedrock's Claude body"
        for key in body
        if key not in CLAUDE_KEYS and key not in ("model", "stream")
    ]
    messages = {k: v for k, v in body.items() if k in CLAUDE_KEYS and k not in BEDROCK_ONLY}
    messages["model"] = "bedrock"  # the Messages API requires one; Bedrock's is the job's
    return found + message_violations(messages, in_batch=True)
