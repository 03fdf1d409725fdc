"""Customer metadata on a batch or a queued chat job: a small object of key-value pairs.

At most 16 pairs; keys are strings of 1-64 characters; values are strings (numbers and
booleans are taken as their text) of at most 512 characters. Anything else is refused with
the field's path, never silently dropped or cut (docs/batches.md, Metadata).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from batchroute.errors import InvalidRequest

MAX_METADATA_PAIRS: Final = 16
MAX_KEY_CHARS: Final = 64
MAX_VALUE_CHARS: Final = 512


def parse_metadata(value: object, *, field: str = "metadata") -> dict[str, str] | None:
    """The metadata as stored (`None` when absent), or InvalidRequest naming the field."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _invalid(field, f"{field} must be an object of key-value pairs.")
    if len(value) > MAX_METADATA_PAIRS:
        raise _invalid(field, f"{field} holds at most {MAX_METADATA_PAIRS} pairs.")
    pairs: dict[str, str] = {}
    for key, raw in value.items():
        if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_CHARS:
            raise _invalid(field, f"{field} keys are 1-{MAX_KEY_CHARS} characters.")
        if isinstance(raw, bool):
            text = "true" if raw else "false"
        elif isinstance(raw, str | int | float):
            text = str(raw)
        else:
            message = f"{field}.{key} must be a string, a number or a boolean (kept as text)."
            raise _invalid(f"{field}.{key}", message)
        if len(text) > MAX_VALUE_CHARS:
            raise _invalid(f"{field}.{key}", f"{field}.{key} is at most {MAX_VALUE_CHARS} characters.")
        pairs[key] = text
    return pairs


def _invalid(field: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, code="invalid_request", details={"field": field})
