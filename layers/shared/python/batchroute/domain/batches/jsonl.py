"""Streaming JSON Lines: chunks of bytes in, `(line number, object or LineError)` out.

The file is never held whole: at most one partial line plus one chunk is buffered, and a
line longer than the cap is dropped as it streams past (reported once, never buffered).

Rules (docs/files.md):
- a line ends with `\\n`; a `\\r` before it is dropped (CRLF files);
- a UTF-8 byte order mark at the very start is skipped;
- blank (whitespace-only) lines are skipped but still counted, so line numbers are the
  ones an editor shows;
- the last line needs no newline;
- each non-blank line must be one JSON object, in UTF-8, at most `max_line_bytes` long.

Chunks may split a line, a `\\r\\n` or a multi-byte UTF-8 character anywhere: lines are cut
on the newline byte (which never occurs inside a multi-byte UTF-8 sequence) and decoded
only once whole.

Lines are parsed by orjson (about 3x faster than the json module on a 600-byte item: it is
the largest share of a 1M-item quote after the item checks) with the json module as the
referee: whatever orjson refuses or might read differently goes to the json module, which
decides and words the error, so every value and message is the json module's
(docs/quote-speed.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal, TypedDict

import orjson

from batchroute.domain.batches.json_limits import MAX_JSON_DEPTH, has_lone_surrogate, nests_deeper_than
from batchroute.errors import PermanentError

MAX_LINE_BYTES = 1024 * 1024  # a customer's line (an uploaded file, an item)
# The cap on a line of an artifact the service wrote itself (input chunks, lane results,
# results.jsonl, errors.jsonl), which holds far more than a customer's line: a result row
# carries a provider's whole answer, twice (normalized `output` and `raw`), and one
# embeddings request of 2048 inputs answers 2048 vectors of up to 3072 floats (~130 MB of
# JSON). What bounds a row is the memory of the router (1024 MB) that held it whole to write
# it, so no row it wrote reaches this; the cap only keeps a broken object from buffering
# without end.
ARTIFACT_MAX_LINE_BYTES: Final = 1024 * 1024 * 1024
MAX_LISTED_ERRORS = 100  # a file record lists the first line errors; the rest are counted

BOM = b"\xef\xbb\xbf"
_WHITESPACE = b" \t\r\n\f\v"

LineErrorCode = Literal["invalid_json", "not_an_object", "line_too_long", "invalid_encoding"]


class LineErrorView(TypedDict):
    line: int
    code: LineErrorCode
    message: str


@dataclass(frozen=True)
class LineError:
    line_no: int  # 1-based, blank lines included
    code: LineErrorCode
    message: str

    def to_api(self) -> LineErrorView:
        return {"line": self.line_no, "code": self.code, "message": self.message}


LineValue = dict[str, Any] | LineError  # a line's object, or why it has none
ParsedLine = tuple[int, LineValue]
# (line number, its bytes) to its value; None drops the line (a reader that wants some lines only)
LineParser = Callable[[int, bytes], LineValue | None]


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# One decoder for every line: json.loads with options would build a new one per call.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
# orjson reads an integer beyond 64 bits as a float where the json module keeps an int:
# a line with 19 digits in a row (anywhere, strings included) is left to the json module.
# Found by mapping digits to "9" and the rest to a space, then one substring search: about
# 3x faster than the regular expression `\d{19}` on a 600-byte line.
_DIGITS_ONLY: Final = bytes(0x39 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_DIGITS: Final = b"9" * 19


class JsonlReader:
    """Push parser: `feed(chunk)` returns the lines that chunk completed, `finish()` the rest."""

    def __init__(self, *, max_line_bytes: int = MAX_LINE_BYTES, parse: LineParser | None = None) -> None:
        self.max_line_bytes = max_line_bytes
        self._parse = parse or parse_line  # a line's bytes (BOM, CR and blank lines dealt with) to its object
        self._buffer = bytearray()
        self._line_no = 0
        self._skipping = False  # inside an over-long line: dropping bytes until its newline

    def feed(self, chunk: bytes) -> list[ParsedLine]:
        out: list[ParsedLine] = []
        view = memoryview(chunk)
        if self._skipping:
            newline = chunk.find(b"\n")
            if newline < 0:
                return out
            self._skipping = False
            out.append(self._too_long())
            view = view[newline + 1 :]
        buffer = self._buffer
        buffer += view
        start = 0
        while (newline := buffer.find(b"\n", start)) >= 0:
            self._line(buffer, start, newline, out)
            start = newline + 1
        del buffer[:start]
        if len(buffer) > self.max_line_bytes + 1:  # +1: room for the \r of a CRLF
            buffer.clear()
            self._skipping = True
        return out

    def finish(self) -> list[ParsedLine]:
        out: list[ParsedLine] = []
        if self._skipping:
            self._skipping = False
            out.append(self._too_long())
        elif self._buffer:
            self._line(self._buffer, 0, len(self._buffer), out)
            self._buffer.clear()
        return out

    def _line(self, buffer: bytearray, start: int, end: int, out: list[ParsedLine]) -> None:
        self._line_no += 1
        number = self._line_no
        if number == 1 and buffer.startswith(BOM, start, end):
            start += len(BOM)
        if end > start and buffer[end - 1] == 0x0D:  # \r
            end -= 1
        if end - start > self.max_line_bytes:
            out.append((number, self._too_long_error(number)))
            return
        raw = bytes(buffer[start:end])
        if not raw.strip(_WHITESPACE):
            return
        value = self._parse(number, raw)
        if value is not None:
            out.append((number, value))

    def _too_long(self) -> ParsedLine:
        self._line_no += 1
        return (self._line_no, self._too_long_error(self._line_no))

    def _too_long_error(self, number: int) -> LineError:
        return LineError(number, "line_too_long", f"line {number} is longer than {self.max_line_bytes} bytes")


def parse_line(number: int, raw: bytes) -> LineValue:
    """The line's object, or its error. The fast path takes a line orjson reads as an object
    the json module would read the same (valid UTF-8 and JSON: orjson checks both; no long
    integer; no NaN or Infinity: orjson refuses them) and that is not nested too deep."""
    if _LONG_DIGITS not in raw.translate(_DIGITS_ONLY):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # the json module words the error (a lone surrogate: refused below, as orjson does)
        else:
            if type(value) is dict and not nests_deeper_than(raw):
                return value
    return _parse_with_json(number, raw)


def _parse_with_json(number: int, raw: bytes) -> LineValue:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return LineError(number, "invalid_encoding", f"line {number} is not UTF-8 (byte {exc.start + 1})")
    if nests_deeper_than(raw):
        return LineError(number, "invalid_json", f"line {number} nests deeper than {MAX_JSON_DEPTH} levels")
    if has_lone_surrogate(raw):  # as a JSON body's (docs/limits.md): no UTF-8 writer can send it
        return LineError(number, "invalid_json", f"line {number} escapes a lone UTF-16 surrogate")
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        return LineError(number, "invalid_json", f"line {number} is not JSON: {exc.msg} (column {exc.colno})")
    except (ValueError, RecursionError) as exc:
        return LineError(number, "invalid_json", f"line {number} is not JSON: {exc}"[:200])
    if not isinstance(value, dict):
        kind = "an array" if isinstance(value, list) else f"a {type(value).__name__}"
        return LineError(number, "not_an_object", f"line {number} is {kind}, not a JSON object")
    return value


def parse_jsonl(
    chunks: Iterable[bytes], *, max_line_bytes: int = MAX_LINE_BYTES, parse: LineParser | None = None
) -> Iterator[ParsedLine]:
    """Pull form of JsonlReader: every non-blank line of the stream, in order."""
    reader = JsonlReader(max_line_bytes=max_line_bytes, parse=parse)
    for chunk in chunks:
        yield from reader.feed(chunk)
    yield from reader.finish()


class CorruptArtifact(PermanentError):
    """A line of an artifact the service wrote that does not read back as a JSON object."""


def artifact_lines(
    chunks: Iterable[bytes], *, key: str, parse: LineParser | None = None
) -> Iterator[dict[str, Any]]:
    """The objects of an artifact the service wrote (`key` names it in errors), each line up
    to `ARTIFACT_MAX_LINE_BYTES`. A line that is not an object raises CorruptArtifact: a
    reader never skips one, so no row can drop out of what it answers."""
    for line_no, parsed in parse_jsonl(chunks, max_line_bytes=ARTIFACT_MAX_LINE_BYTES, parse=parse):
        if isinstance(parsed, LineError):
            raise CorruptArtifact(f"{key} line {line_no}: {parsed.message}")
        yield parsed


@dataclass(frozen=True)
class ScanResult:
    bytes: int
    sha256: str
    line_count: int  # non-blank lines
    item_count: int  # lines that are JSON objects
    error_count: int
    errors: tuple[LineError, ...]  # the first MAX_LISTED_ERRORS


class JsonlScan:
    """Size, checksum and line checks of one file while its bytes stream past."""

    def __init__(
        self,
        *,
        max_line_bytes: int = MAX_LINE_BYTES,
        on_lines: Callable[[list[ParsedLine]], None] | None = None,
    ) -> None:
        """`on_lines`: handed each chunk's parsed lines, in order (the item profile's builder)."""
        self._reader = JsonlReader(max_line_bytes=max_line_bytes)
        self._on_lines = on_lines
        self._digest = hashlib.sha256()
        self._bytes = 0
        self._lines = 0
        self._items = 0
        self._error_count = 0
        self._errors: list[LineError] = []

    @property
    def bytes_seen(self) -> int:
        return self._bytes

    def feed(self, chunk: bytes) -> None:
        self._bytes += len(chunk)
        self._digest.update(chunk)
        self._count(self._reader.feed(chunk))

    def finish(self) -> ScanResult:
        self._count(self._reader.finish())
        return ScanResult(
            bytes=self._bytes,
            sha256=self._digest.hexdigest(),
            line_count=self._lines,
            item_count=self._items,
            error_count=self._error_count,
            errors=tuple(self._errors),
        )

    def _count(self, lines: list[ParsedLine]) -> None:
        if self._on_lines is not None:
            self._on_lines(lines)
        for _, parsed in lines:
            self._lines += 1
            if isinstance(parsed, LineError):
                self._error_count += 1
                if len(self._errors) < MAX_LISTED_ERRORS:
                    self._errors.append(parsed)
            else:
                self._items += 1
