"""The streaming JSONL reader: any chunking gives the same lines; CRLF, BOM, blank lines, a last
line without newline, over-long lines, bad JSON and non-objects; the scan's counts and checksum."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchroute.domain.batches.jsonl import (
    MAX_LISTED_ERRORS,
    JsonlReader,
    JsonlScan,
    LineError,
    ParsedLine,
    parse_jsonl,
)


def chunked(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def parse(data: bytes, size: int = 1 << 20, max_line_bytes: int = 1024) -> list[ParsedLine]:
    return list(parse_jsonl(chunked(data, size), max_line_bytes=max_line_bytes))


def codes(lines: list[ParsedLine]) -> list[tuple[int, str]]:
    return [(n, parsed.code if isinstance(parsed, LineError) else "ok") for n, parsed in lines]


SAMPLE = (
    '{"customer_item_id": "a", "input": "héllo wörld ☃ 🎉"}\n'
    "\n"
    '{"customer_item_id": "b", "input": "日本語のテキスト"}\n'
    "   \n"
    '{"customer_item_id": "c"}'
).encode()


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64, 4096])
def test_any_chunking_gives_the_same_lines_even_inside_multibyte_characters(size: int) -> None:
    # Given a file with multi-byte UTF-8 text, blank lines and no final newline
    # When it arrives in chunks of `size` bytes (1 byte splits every character)
    lines = parse(SAMPLE, size)
    # Then the objects come out whole, numbered as an editor numbers them
    assert lines == [
        (1, {"customer_item_id": "a", "input": "héllo wörld ☃ 🎉"}),
        (3, {"customer_item_id": "b", "input": "日本語のテキスト"}),
        (5, {"customer_item_id": "c"}),
    ]


@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=30))
def test_arbitrary_chunk_boundaries_never_change_the_result(cuts: list[int]) -> None:
    # Given CRLF lines with a BOM, and chunk sizes chosen by hypothesis
    data = b"\xef\xbb\xbf" + SAMPLE.replace(b"\n", b"\r\n") + b"\r\n"
    pieces, start = [], 0
    for cut in cuts:
        pieces.append(data[start : start + cut])
        start += cut
    pieces.append(data[start:])
    # When parsed / Then exactly as in one piece
    assert list(parse_jsonl(pieces)) == parse(data)


def test_crlf_endings_and_a_bom_are_dropped() -> None:
    # Given a Windows-made file: BOM, CRLF
    data = b'\xef\xbb\xbf{"a": 1}\r\n{"b": 2}\r\n'
    # When parsed in chunks that split the BOM and the CRLF
    lines = parse(data, 2)
    # Then the first line parses despite the BOM, and no \r reaches the JSON
    assert lines == [(1, {"a": 1}), (2, {"b": 2})]


def test_a_bom_is_only_skipped_at_the_start_of_the_file() -> None:
    lines = parse(b'{"a": 1}\n\xef\xbb\xbf{"b": 2}\n')
    assert codes(lines) == [(1, "ok"), (2, "invalid_json")]


def test_blank_and_whitespace_lines_are_skipped_but_counted() -> None:
    lines = parse(b'\n\n  \t \n{"a": 1}\n\r\n\n{"b": 2}\n\n')
    assert lines == [(4, {"a": 1}), (7, {"b": 2})]


def test_the_last_line_needs_no_newline_and_an_empty_file_has_no_lines() -> None:
    assert parse(b'{"a": 1}') == [(1, {"a": 1})]
    assert parse(b"") == []
    assert parse(b"\n\n") == []


def test_invalid_json_and_non_objects_are_line_errors_that_do_not_stop_the_stream() -> None:
    # Given bad lines between good ones
    data = b'{"a": 1}\n{"a": \n[1, 2]\n"text"\n42\nnull\nNaN\n{"b": 2}\n'
    # When parsed
    lines = parse(data)
    # Then each bad line is one error with its line number, and parsing goes on
    assert codes(lines) == [
        (1, "ok"),
        (2, "invalid_json"),
        (3, "not_an_object"),
        (4, "not_an_object"),
        (5, "not_an_object"),
        (6, "not_an_object"),
        (7, "invalid_json"),
        (8, "ok"),
    ]
    second = lines[1][1]
    assert isinstance(second, LineError) and second.message.startswith("line 2 is not JSON")
    third = lines[2][1]
    assert isinstance(third, LineError) and "an array" in third.message


def test_invalid_utf8_is_an_encoding_error_for_that_line_only() -> None:
    lines = parse(b'{"a": "\xff\xfe"}\n{"b": 1}\n')
    assert codes(lines) == [(1, "invalid_encoding"), (2, "ok")]


@pytest.mark.parametrize("size", [1, 7, 100, 5000])
def test_an_over_long_line_is_reported_once_and_never_buffered(size: int) -> None:
    # Given a 3,000-byte line between short ones, with a 1,024-byte cap
    long_line = json.dumps({"text": "x" * 3000}).encode()
    data = b'{"a": 1}\n' + long_line + b'\n{"b": 2}\n' + long_line
    reader = JsonlReader(max_line_bytes=1024)
    # When fed in chunks
    lines: list[ParsedLine] = []
    for chunk in chunked(data, size):
        lines.extend(reader.feed(chunk))
        # Then the reader never holds much more than the cap plus one chunk
        assert len(reader._buffer) <= 1024 + 1 + size
    lines.extend(reader.finish())
    # And each long line is one `line_too_long`, including the last one without newline
    assert codes(lines) == [(1, "ok"), (2, "line_too_long"), (3, "ok"), (4, "line_too_long")]


def test_a_line_exactly_at_the_cap_passes_even_with_crlf() -> None:
    line = b'{"t": "' + b"y" * (1024 - 9) + b'"}'
    assert len(line) == 1024
    assert codes(parse(line + b"\r\n" + line, 10)) == [(1, "ok"), (2, "ok")]
    assert codes(parse(line[:-2] + b'y"}\n', 10)) == [(1, "line_too_long")]


def test_deeply_nested_json_is_an_error_not_a_crash() -> None:
    data = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    assert codes(parse(data, max_line_bytes=1 << 20)) == [(1, "invalid_json")]


def test_the_scan_counts_lines_items_errors_size_and_checksum() -> None:
    # Given 150 bad lines and 3 good ones
    data = b'{"a": 1}\n' + b"oops\n" * 150 + b'\n{"b": 2}\n{"c": 3}'
    scan = JsonlScan(max_line_bytes=1024)
    # When scanned in small chunks
    for chunk in chunked(data, 13):
        scan.feed(chunk)
    result = scan.finish()
    # Then everything is counted, and only the first errors are kept
    assert (result.line_count, result.item_count, result.error_count) == (153, 3, 150)
    assert len(result.errors) == MAX_LISTED_ERRORS
    assert result.errors[0].line_no == 2
    assert result.bytes == len(data)
    assert result.sha256 == hashlib.sha256(data).hexdigest()
