"""The canonical line of an item (the items digest's bytes, docs/quote-speed.md): pinned bytes
for tricky items, and byte-for-byte parity with `json.dumps(sort_keys=True, separators=(",",
":"))` on floats of every magnitude, non-ASCII text and values orjson refuses."""

from __future__ import annotations

import hashlib
import json
import random
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchroute.domain.batches.canonical_json import canonical_line
from batchroute.services.batches.quotes import items_digest
from tests.unit.json_strategies import json_values


def reference(item: Any) -> bytes:
    """The canonical form as it was first defined: what the digest of every stored quote used."""
    return json.dumps(item, sort_keys=True, separators=(",", ":")).encode() + b"\n"


# Pinned: a change to any of these bytes changes the digest of every quote that holds such an
# item, and a batch created from a quote made before a deploy would fail its Intake check.
PINNED: list[tuple[dict[str, Any], bytes]] = [
    (
        {"model": "m", "customer_item_id": "a", "input": {"messages": [{"role": "user", "content": "hi"}]}},
        b'{"customer_item_id":"a","input":{"messages":[{"content":"hi","role":"user"}]},"model":"m"}\n',
    ),
    (
        {
            "b": "caf\u00e9 \u20ac \u4e2d\u6587 \U0001f600",
            "a": 'tab\tquote"back\\slash/ del\x7f nul\x00 \u2028',
        },
        b'{"a":"tab\\tquote\\"back\\\\slash/ del\\u007f nul\\u0000 \\u2028",'
        b'"b":"caf\\u00e9 \\u20ac \\u4e2d\\u6587 \\ud83d\\ude00"}\n',
    ),
    (
        {"t": 0.2, "p": 1e-07, "q": 1e-05, "r": 0.0001, "s": 1e16, "u": 1e15, "v": -0.0, "w": 5e-324},
        b'{"p":1e-07,"q":1e-05,"r":0.0001,"s":1e+16,"t":0.2,"u":1000000000000000.0,"v":-0.0,"w":5e-324}\n',
    ),
    (
        {
            "big": 2**64,
            "neg": -(2**63) - 1,
            "i": 9223372036854775807,
            "inf": float("inf"),
            "nan": float("nan"),
        },
        b'{"big":18446744073709551616,"i":9223372036854775807,"inf":Infinity,"nan":NaN,'
        b'"neg":-9223372036854775809}\n',
    ),
    (
        {"z": [1, {"y": None, "x": [True, False, {}]}], "\u00e9": {"\U0001f600": 1, "\uffff": 2, "a": []}},
        b'{"z":[1,{"x":[true,false,{}],"y":null}],"\\u00e9":{"a":[],"\\uffff":2,"\\ud83d\\ude00":1}}\n',
    ),
    ({"lone": "\ud800x"}, b'{"lone":"\\ud800x"}\n'),
]


@pytest.mark.parametrize(("item", "expected"), PINNED)
def test_tricky_items_have_pinned_canonical_bytes(item: dict[str, Any], expected: bytes) -> None:
    assert canonical_line(item) == expected
    assert reference(item) == expected


def test_the_items_digest_of_the_pinned_items_is_pinned() -> None:
    digest = items_digest(item for item, _ in PINNED)
    assert digest == hashlib.sha256(b"".join(expected for _, expected in PINNED)).hexdigest()
    # what main computed before orjson (commit e0c3b67): the digest of stored quotes
    assert digest == "d48738e83778df623c500627c2e3c9533164be54e93e66d549360845be8b4ef4"


def test_floats_of_every_magnitude_are_written_as_repr_writes_them() -> None:
    values = [
        sign * mantissa * 10.0**exponent
        for exponent in range(-325, 309)
        for mantissa in (1.0, 1.5, 2.2250738585072014, 4.462470814360678, 9.999999999999998)
        for sign in (1, -1)
    ]
    rng = random.Random(18)  # noqa: S311 -- reproducible test data, not secrets
    values += [struct.unpack("<d", rng.randbytes(8))[0] for _ in range(20_000)]
    for start in range(0, len(values), 50):
        item = {"values": values[start : start + 50], "one": values[start]}
        assert canonical_line(item) == reference(item)


JSON_VALUES = json_values(non_finite=True)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=6))
def test_any_item_has_the_bytes_json_dumps_writes(item: dict[str, Any]) -> None:
    assert canonical_line(item) == reference(item)
