"""Reading a `POST /v1/chat/completions` body: the standard chat-completions fields plus
`provider_preferences`, `privacy_tier` and `batch`. Pure: no boto3, no FastAPI.

What is ours is taken out (`model` is kept for the provider too); everything else of the
body (`messages`, `max_tokens`, `temperature`, `tools`, `response_format`, ...) is the
provider input, passed through to the lane. The item reader (domain/routing/items.py) then finds
what the lane must offer (tool calling, strict JSON schema), so lanes that cannot honour a
passed-through field are never chosen. docs/chat.md is the long form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from batchroute.domain.batches.metadata import parse_metadata
from batchroute.domain.catalog.catalog import Catalog, PrivacyTier
from batchroute.domain.routing.gates import PRIVACY_TIERS
from batchroute.domain.routing.items import OUTPUT_LIMIT_KEYS, PRESET_VERSION, BatchItem, ItemFacts, read_item
from batchroute.domain.work_orders.work_orders import parse_work_order_id
from batchroute.errors import InvalidRequest

# Our fields: never sent to a provider.
SERVICE_FIELDS: Final = frozenset(
    {
        "model",
        "stream",
        "stream_options",
        "provider_preferences",
        "privacy_tier",
        "batch",
        "provider",
        "preset",  # expanded before the body is read (docs/presets.md)
        "preset_version",
    }
)
_BATCH_FIELDS: Final = frozenset({"completion_window", "webhook", "metadata", "work_order_id"})
_PREFERENCE_FIELDS: Final = frozenset({"only", "order", "allow_fallbacks"})
CHAT_ITEM_ID: Final = "chat"


@dataclass(frozen=True)
class ProviderPreferences:
    """`only`: the providers that may serve (None = any); `order`: tried first, in this order;
    `allow_fallbacks: false`: no lane after the first is tried."""

    only: frozenset[str] | None = None
    order: tuple[str, ...] = ()
    allow_fallbacks: bool = True


@dataclass(frozen=True)
class QueueOptions:
    """The `batch` object (or `true`): the request is queued as a one-item batch."""

    webhook: Mapping[str, Any] | None = None
    metadata: Mapping[str, str] | None = None
    completion_window: str = "24h"
    work_order_id: str | None = None  # the job joins this work order (docs/work-orders.md)


@dataclass(frozen=True)
class ChatRequest:
    model: str
    provider_input: dict[str, Any]  # what the lane receives: the body less our fields
    facts: ItemFacts  # prompt estimate, requested output, required tools and capabilities
    max_tokens: int | None  # as asked; None = the lane's own output limit
    stream: bool = False
    include_usage: bool = False
    privacy_tier: PrivacyTier = "standard"
    preferences: ProviderPreferences = field(default_factory=ProviderPreferences)
    queue: QueueOptions | None = None
    preset_version: str | None = None  # the preset version the body was expanded from

    def as_item(self) -> BatchItem:
        """The one batch item a queued request becomes."""
        item: BatchItem = {
            "customer_item_id": CHAT_ITEM_ID,
            "operation": self.facts.operation,
            "model": self.model,
            "input": dict(self.provider_input),
        }
        if self.max_tokens is not None:
            item["max_output_tokens"] = self.max_tokens
        if self.preset_version is not None:
            item["preset_version"] = self.preset_version
        return item


def parse_chat_request(body: Any, catalog: Catalog) -> ChatRequest:
    """The request, or InvalidRequest naming the field (`stream_not_supported_for_batch` for
    `stream` with `batch`, `model_not_found` for an id the catalog does not know exactly)."""
    if not isinstance(body, Mapping):
        raise _invalid("body", "The body must be a JSON object.")
    model = _model(body.get("model"), catalog)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _invalid("messages", "messages must be a non-empty list of {role, content} objects.")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise _invalid(f"messages[{i}]", "Each message is an object with a role.")
    stream = _flag(body, "stream", default=False)
    include_usage = _include_usage(body.get("stream_options"))
    if body.get("stream_options") is not None and not stream:  # as OpenAI answers it
        raise _invalid(
            "stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled."
        )
    queue = _queue(body.get("batch"))
    if stream and queue is not None:
        raise InvalidRequest(
            "stream cannot be combined with batch: a queued request answers later, not as a stream.",
            code="stream_not_supported_for_batch",
            details={"field": "stream"},
        )
    choices = body.get("n", 1)
    if choices is not None and choices != 1:
        raise _invalid("n", "Only one choice per request is supported (n = 1).")
    max_tokens = _max_tokens(body)
    provider_input = {k: v for k, v in body.items() if k not in SERVICE_FIELDS}
    operation = "vision" if _has_images(messages) else "responses"
    facts, problems = read_item(
        {
            "customer_item_id": CHAT_ITEM_ID,
            "operation": operation,
            "model": model,
            "input": provider_input,
        }
    )
    if facts is None:
        first = problems[0]
        path = first.field.removeprefix("input.") or "body"
        raise InvalidRequest(first.message, code="invalid_request", details={"field": path})
    return ChatRequest(
        model=model,
        provider_input=provider_input,
        facts=facts,
        max_tokens=max_tokens,
        stream=stream,
        include_usage=include_usage,
        privacy_tier=_privacy_tier(body.get("privacy_tier")),
        preferences=_preferences(body.get("provider_preferences"), catalog),
        queue=queue,
        preset_version=preset_version_ref(body.get("preset_version")),
    )


def preset_version_ref(value: object) -> str | None:
    """The version a preset expanded the body from (`name@3`), as the expander or a retried
    body gives it: nothing else (it is echoed in the `x-service-preset` header and recorded).
    Read before a body's `preset` is expanded too, which would replace a bad one unseen."""
    if value is not None and not (isinstance(value, str) and PRESET_VERSION.fullmatch(value)):
        raise _invalid("preset_version", "preset_version must be a preset version (name@version).")
    return value


def _model(value: object, catalog: Catalog) -> str:
    if not isinstance(value, str) or not value:
        raise _invalid("model", "model must be an exact catalog model id.")
    if catalog.model(value) is not None:
        return value
    near = next((m.id for m in catalog.models if m.id.casefold() == value.casefold()), None)
    hint = f" Did you mean {near!r}?" if near else " GET /v1/catalog/models lists them."
    raise InvalidRequest(
        f"Unknown model {value!r}: model must be an exact catalog id.{hint}",
        code="model_not_found",
        details={"field": "model", **({"suggestion": near} if near else {})},
    )


def _flag(body: Mapping[str, Any], name: str, *, default: bool) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _invalid(name, f"{name} must be a boolean.")
    return value


def _include_usage(options: object) -> bool:
    if options is None:
        return False
    if not isinstance(options, Mapping):
        raise _invalid("stream_options", "stream_options must be an object.")
    return _flag(options, "include_usage", default=False)


def _max_tokens(body: Mapping[str, Any]) -> int | None:
    for name in OUTPUT_LIMIT_KEYS:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1_000_000:
            raise _invalid(name, f"{name} must be an integer from 1 to 1000000.")
        return value
    return None


def _privacy_tier(value: object) -> PrivacyTier:
    if value is None:
        return "standard"
    if value not in PRIVACY_TIERS:
        raise _invalid("privacy_tier", f"privacy_tier must be one of {', '.join(PRIVACY_TIERS)}.")
    return value


def _preferences(value: object, catalog: Catalog) -> ProviderPreferences:
    if value is None:
        return ProviderPreferences()
    value = _object_of(value, "provider_preferences", _PREFERENCE_FIELDS, "must be an object.")
    known = {p.slug for p in catalog.providers}
    only = value.get("only")
    order = value.get("order") or []
    for name, slugs in (("only", only if only is not None else []), ("order", order)):
        if not isinstance(slugs, list) or not all(isinstance(s, str) for s in slugs):
            raise _invalid(f"provider_preferences.{name}", f"{name} must be a list of provider slugs.")
        strangers = sorted(set(slugs) - known)
        if strangers:
            raise _invalid(
                f"provider_preferences.{name}",
                f"Unknown provider(s) {', '.join(strangers)}; GET /v1/providers lists them.",
            )
    return ProviderPreferences(
        only=frozenset(only) if only is not None else None,
        order=tuple(dict.fromkeys(order)),
        allow_fallbacks=_flag(value, "allow_fallbacks", default=True),
    )


def _object_of(value: object, name: str, fields: frozenset[str], must: str) -> Mapping[str, Any]:
    """`value`, the request's JSON object `name` of the given fields only (else `name must ...`)."""
    if not isinstance(value, Mapping):
        raise _invalid(name, f"{name} {must}")
    unknown = sorted(set(value) - fields)
    if unknown:
        raise _invalid(name, f"{name} does not take {', '.join(unknown)}.")
    return value


def _queue(value: object) -> QueueOptions | None:
    if value is None or value is False:
        return None
    if value is True:
        return QueueOptions()
    value = _object_of(
        value, "batch", _BATCH_FIELDS, "must be true or an object {completion_window, webhook, metadata}."
    )
    window = value.get("completion_window", "24h")
    if window != "24h":
        raise _invalid("batch.completion_window", "completion_window must be 24h.")
    metadata = parse_metadata(value.get("metadata"), field="batch.metadata")
    webhook = value.get("webhook")
    if webhook is not None and not isinstance(webhook, Mapping):
        raise _invalid("batch.webhook", "webhook must be {url, secret}.")
    work_order_id = parse_work_order_id(value.get("work_order_id"), field_path="batch.work_order_id")
    return QueueOptions(
        webhook=webhook, metadata=metadata, completion_window="24h", work_order_id=work_order_id
    )


def _has_images(messages: list[Any]) -> bool:
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list) and any(
            isinstance(part, Mapping) and part.get("type") in ("image_url", "input_image") for part in content
        ):
            return True
    return False


def _invalid(field_name: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, code="invalid_request", details={"field": field_name})
