"""An item's chat input in one normal form, for every vendor transform to start from.

Items come in two chat dialects (domain/items.py): chat-completions (`messages`, with
`system` / `instructions` beside them) and the Responses API (`input`: a string or a list
of turns whose parts are `input_text` / `input_image`). `conversation(input)` turns either
into a `Conversation`: the system text apart, the turns as chat-completions messages whose
content is a string or a list of `text` / `image_url` parts, and the generation options the
item set (temperature, top_p, stop, tools, tool_choice, a structured-output format). Pure:
no I/O, no vendor names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

# Generation options carried over to every vendor that has them (each transform maps names).
OPTIONS: Final = ("temperature", "top_p", "stop", "seed", "tools", "tool_choice")


@dataclass(frozen=True)
class Conversation:
    system: str | None
    messages: tuple[dict[str, Any], ...]  # chat-completions messages (no system role)
    options: dict[str, Any] = field(default_factory=dict)
    # A structured-output request as chat-completions writes it: {"type": "json_schema",
    # "json_schema": {...}} or {"type": "json_object"}; None for free text.
    response_format: dict[str, Any] | None = None

    @property
    def has_images(self) -> bool:
        return any(
            isinstance(m.get("content"), list) and any(p.get("type") == "image_url" for p in m["content"])
            for m in self.messages
        )


def conversation(payload: Mapping[str, Any]) -> Conversation:
    """The normal form of a `responses` / `vision` item's input."""
    system_parts: list[str] = []
    for key in ("system", "instructions"):
        value = payload.get(key)
        if isinstance(value, str) and value:
            system_parts.append(value)
    turns: list[dict[str, Any]] = []
    raw = payload.get("messages")
    if raw is None:
        raw = payload.get("input")
    if isinstance(raw, str):
        raw = [{"role": "user", "content": raw}]
    for turn in raw if isinstance(raw, list) else []:
        if not isinstance(turn, Mapping):
            continue
        role = str(turn.get("role") or "user")
        content = _content(turn.get("content"))
        if role in ("system", "developer"):
            text = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
            system_parts.append(text)
            continue
        message: dict[str, Any] = {"role": role, "content": content}
        for key in ("name", "tool_calls", "tool_call_id"):
            if key in turn:
                message[key] = turn[key]
        turns.append(message)
    options = {key: payload[key] for key in OPTIONS if payload.get(key) is not None}
    return Conversation(
        system="\n\n".join(system_parts) or None,
        messages=tuple(turns),
        options=options,
        response_format=_response_format(payload),
    )


def plain_text(content: str | list[dict[str, Any]]) -> str:
    """The text of a message's content (image parts left out)."""
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in content if part.get("type") == "text")


def _content(value: object) -> str | list[dict[str, Any]]:
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return "" if value is None else str(value)
    parts: list[dict[str, Any]] = []
    for part in value:
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
            continue
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text"):
            parts.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            detail = image.get("detail") if isinstance(image, Mapping) else None
            parts.append(
                {
                    "type": "image_url",
                    "image_url": {"url": str(url), **({"detail": detail} if detail else {})},
                }
            )
        elif kind == "input_image":
            url = part.get("image_url") or part.get("url")
            parts.append({"type": "image_url", "image_url": {"url": str(url)}})
    return parts


def _response_format(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    given = payload.get("response_format")
    if isinstance(given, Mapping) and given.get("type") in ("json_schema", "json_object"):
        return dict(given)
    text = payload.get("text")  # the Responses API's `text.format`
    fmt = text.get("format") if isinstance(text, Mapping) else None
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return {"type": "json_schema", "json_schema": schema}
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_object":
        return {"type": "json_object"}
    return None


def data_url_parts(url: str) -> tuple[str, str] | None:
    """(media type, base64 data) of a `data:` image URL; None for any other URL."""
    if not url.startswith("data:") or ";base64," not in url:
        return None
    head, data = url[5:].split(";base64,", 1)
    return (head or "image/png"), data
