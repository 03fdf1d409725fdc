"""The canonical JSON line of an item: the bytes the items digest hashes and a quote keeps.

The canonical form is, byte for byte, what
`json.dumps(item, sort_keys=True, separators=(",", ":")).encode() + b"\\n"` writes: keys
sorted, no spaces, every character outside printable ASCII escaped as `\\uXXXX` (lowercase
hex, astral characters as a surrogate pair), floats as `repr` writes them. The items digest
stored in a quote snapshot is compared by the Intake step of a batch created from it, possibly
after a deploy, so these bytes must never change (docs/quote-speed.md;
tests/unit/test_canonical_json.py pins them).

`json.dumps` costs about 18 us for a 600-byte item, the largest single share of a 1M-item
quote, so the line is written by orjson (about 2 us) and brought to the same bytes:
- orjson writes non-ASCII characters and DEL (0x7f) as raw UTF-8: they only ever occur
  inside strings, so escaping them afterwards gives exactly `json.dumps`'s escapes (orjson
  already escapes `"`, `\\` and control characters as `json.dumps` does);
- orjson writes the floats of magnitude 1e-9 to 1e-4 differently from `repr` (`1e-7` for
  `1e-07`, `0.00001` for `1e-05`; every other finite float alike, tests pin it), and
  infinities and NaN (which Python's json parser accepts) as `null`: a line holding `e-`,
  `0.0000` or `null` anywhere (strings included: a false alarm only costs the slow path)
  is written by `json.dumps`;
- what orjson refuses (integers beyond 64 bits, lone surrogates, nesting past its limit)
  falls back to `json.dumps` as well.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

_NOT_PRINTABLE_ASCII: Final = re.compile("[\x7f-\U0010ffff]+")
_HEX_UNIT: Final = re.compile("(....)")


def canonical_line(item: Mapping[str, Any]) -> bytes:
    """The item as one canonical JSON line, newline included."""
    try:
        dumped = orjson.dumps(item, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        return _json_line(item)
    if b"e-" in dumped or b"0.0000" in dumped or b"null" in dumped:
        return _json_line(item)
    if not dumped.isascii() or b"\x7f" in dumped:
        return _NOT_PRINTABLE_ASCII.sub(_escape, dumped.decode("utf-8")).encode("ascii")
    return dumped


def _json_line(item: Mapping[str, Any]) -> bytes:
    return json.dumps(item, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def _escape(match: re.Match[str]) -> str:
    """`json.dumps`'s ensure_ascii escapes of a run of characters: `\\uXXXX` per UTF-16 code
    unit (so an astral character is a surrogate pair), lowercase hex. Done on the run's
    UTF-16 bytes in C rather than per character in Python: CJK text is all such runs."""
    return _HEX_UNIT.sub(r"\\u\1", match.group().encode("utf-16-be").hex())


class ItemsDigest:
    """Order-sensitive digest of the items (sha256 of their canonical lines), so a batch can
    prove it runs what was quoted; a file's item profile (domain/batches/item_profile.py) holds the
    same digest."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def add(self, item: Mapping[str, Any]) -> bytes:
        line = canonical_line(item)
        self._hash.update(line)
        return line

    def hexdigest(self) -> str:
        return self._hash.hexdigest()
