"""JSON Lines parsed by orjson with the json module as referee (docs/quote-speed.md): every
value and every malformed-line message is the one the json module gives, pinned here for the
lines where the two parsers part ways (big integers, lone surrogates, NaN, infinities, a BOM
inside the file, control characters, deep nesting)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchroute.domain.batches.jsonl import LineError, _parse_with_json, parse_jsonl
from batchroute.domain.batches.jsonl import parse_line as _parse
from tests.unit.json_strategies import json_values

LINES = [
    b"",  # line 1 is blank: the BOM below is inside the file, not at its start
    b'{"a":1,}',
    b'{"a":NaN}',
    b'{"a":-Infinity}',
    b"[1, 2]",
    b'"text"',
    b"12",
    b"null",
    b'{"a":1} x',
    b'{"a":"\x01"}',
    b'{"a":tru}',
    b'\xef\xbb\xbf{"a":1}',
    b'{"a":"\xff"}',
    b'{"a":' + b"[" * 70 + b"]" * 70 + b"}",
    b'{"a":1e400}',
    b'{"big":123456789012345678901234567890,"f":1.5}',
    b'{"s":"\\ud800","t":"\\ud83d\\ude00"}',
    b'{"a":1,"a":2,"b":[1.0,-0,0.1]}',
    b'{"id":"order 12345678901234567890","n":-9223372036854775808}',
]

EXPECTED: list[tuple[int, Any]] = [
    (2, ("invalid_json", "line 2 is not JSON: Expecting property name enclosed in double quotes (column 8)")),
    (3, ("invalid_json", "line 3 is not JSON: NaN is not valid JSON")),
    (4, ("invalid_json", "line 4 is not JSON: -Infinity is not valid JSON")),
    (5, ("not_an_object", "line 5 is an array, not a JSON object")),
    (6, ("not_an_object", "line 6 is a str, not a JSON object")),
    (7, ("not_an_object", "line 7 is a int, not a JSON object")),
    (8, ("not_an_object", "line 8 is a NoneType, not a JSON object")),
    (9, ("invalid_json", "line 9 is not JSON: Extra data (column 9)")),
    (10, ("invalid_json", "line 10 is not JSON: Invalid control character at (column 7)")),
    (11, ("invalid_json", "line 11 is not JSON: Expecting value (column 6)")),
    (12, ("invalid_json", "line 12 is not JSON: Expecting value (column 1)")),
    (13, ("invalid_encoding", "line 13 is not UTF-8 (byte 7)")),
    (14, ("invalid_json", "line 14 nests deeper than 64 levels")),
    (15, "{'a': inf}"),
    (16, "{'big': 123456789012345678901234567890, 'f': 1.5}"),
    (17, ("invalid_json", "line 17 escapes a lone UTF-16 surrogate")),  # as a JSON body's
    (18, "{'a': 2, 'b': [1.0, 0, 0.1]}"),
    (19, "{'id': 'order 12345678901234567890', 'n': -9223372036854775808}"),
]


def shown(parsed: dict[str, Any] | LineError) -> Any:
    if isinstance(parsed, LineError):
        return (parsed.code, parsed.message)
    return repr(parsed)  # repr: an int and an equal float, 0 and -0.0 are told apart


def test_values_and_messages_are_the_json_modules_where_the_parsers_differ() -> None:
    lines = list(parse_jsonl([b"\n".join(LINES)]))
    assert [(number, shown(parsed)) for number, parsed in lines] == EXPECTED
    assert type(dict(lines)[16]["big"]) is int  # type: ignore[index]


JSON_VALUES = json_values(non_finite=False)


@settings(max_examples=400, deadline=None)
@given(JSON_VALUES, st.booleans())
def test_any_json_line_parses_as_the_json_module_parses_it(value: Any, ascii_only: bool) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert shown(_parse(1, raw)) == shown(_parse_with_json(1, raw))


@settings(max_examples=400, deadline=None)
@given(
    st.binary(max_size=40)
    | st.text(alphabet='{}[]":,.0123456789eE+-\\ untrflsaNI', max_size=30).map(str.encode)
)
def test_any_bytes_give_the_json_modules_value_or_message(raw: bytes) -> None:
    assert shown(_parse(1, raw)) == shown(_parse_with_json(1, raw))


@given(st.integers(min_value=1, max_value=16))
def test_a_parser_that_returns_none_drops_its_line_and_the_numbers_stay(piece: int) -> None:
    body = b'{"n":1}\n\n{"n":2}\n{"n":3}\r\n{"n":4}'
    pieces = [body[i : i + piece] for i in range(0, len(body), piece)]

    def odd_only(number: int, raw: bytes) -> dict[str, Any] | LineError | None:
        value = _parse(number, raw)
        return value if isinstance(value, LineError) or value["n"] % 2 else None

    assert list(parse_jsonl(pieces, parse=odd_only)) == [(1, {"n": 1}), (4, {"n": 3})]
