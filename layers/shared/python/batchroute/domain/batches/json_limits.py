"""How large and how deep a JSON document the service takes (docs/limits.md).

Depth is measured on the raw bytes, before anything parses them: parsers and the code that
walks a parsed document recurse, so a document nested a thousand levels deep must be refused
before it reaches either. Brackets inside strings do not count.
"""

from __future__ import annotations

import re
from typing import Final

# Objects and arrays nested deeper than this are refused (a chat message with image parts
# nests 5 levels; a JSON schema for structured output rarely passes 20).
MAX_JSON_DEPTH: Final = 64

_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")
_OPENING: Final = frozenset(b"[{")


def nests_deeper_than(raw: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether any object or array in `raw` (JSON, or JSON Lines) is nested more than
    `limit` levels deep. Malformed input is answered as it lies; the parser rejects it later."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False  # too few brackets to nest that deep: most bodies stop here
    depth = 0
    for byte in _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS):
        if byte in _OPENING:
            depth += 1
            if depth > limit:
                return True
        else:
            depth = max(depth - 1, 0)
    return False


# A \u escape of a UTF-16 surrogate; a high one followed at once by a low one is a pair (one
# character beyond the BMP), any other is a lone surrogate: no text, and no codec encodes it.
_SURROGATE: Final = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_PAIR: Final = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def has_lone_surrogate(raw: bytes) -> bool:
    """Whether a JSON document escapes a lone UTF-16 surrogate (`"\ud800"`): parsers take it
    as a string no UTF-8 writer (DynamoDB, S3, a vendor) can send. Escaped backslashes are
    set aside first, so `"\\ud800"` (a backslash, then text) is not one."""
    if b"\\u" not in raw:
        return False
    escapes = raw.replace(b"\\\\", b"__")
    return _SURROGATE.search(_PAIR.sub(b"", escapes)) is not None
