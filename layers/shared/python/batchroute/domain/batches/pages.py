"""How much one page of a listing may hold, in bytes as well as rows.

The API's buffered function answers through Lambda, whose synchronous response is at most
6 MB (6,291,556 bytes, the JSON Lambda wraps the body in included); over it API Gateway
answers 502, with no error envelope. So a page whose rows can be large (a batch's results,
presets and schedules with their golden sets, their versions) also stops at PAGE_MAX_BYTES of
rows, whatever its `limit`, and is never empty: a row over the cap alone is a page of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Final, TypeVar

from batchroute.domain.batches.artifact_keys import JsonObject, jsonl_line

# 4 MiB leaves room for the page's envelope and the headers.
PAGE_MAX_BYTES: Final = 4 * 1024 * 1024
# The most one row may be and still leave the function in an answer (6,291,556 bytes, less
# room for the headers and the envelope): a larger one is answered `result_too_large`.
ROW_MAX_BYTES: Final = 6_000_000

Row = TypeVar("Row")


def row_bytes(row: JsonObject) -> int:
    """What one row adds to a page's answer: its JSON as the API writes it (compact, UTF-8,
    unescaped) and a comma, plus a backslash for every `"` and `\\` in it: Lambda carries the
    answer's body as a JSON string, so its escapes count against the 6 MB cap too."""
    line = jsonl_line(row)  # the newline stands for the comma
    return len(line) + line.count(b'"') + line.count(b"\\")


def fill_page(
    rows: Iterable[tuple[str, Row]],
    *,
    limit: int,
    size: Callable[[Row], int],
    max_bytes: int = PAGE_MAX_BYTES,
) -> tuple[list[Row], str | None]:
    """One page of `rows` (each with the cursor that starts at it), in order: at most `limit`
    rows and `max_bytes` of them (`size`), but never empty. Also the cursor of the first row
    left out: None when none was."""
    page: list[Row] = []
    used = 0
    for cursor, row in rows:
        if len(page) == limit:
            return page, cursor
        bytes_ = size(row)
        if page and used + bytes_ > max_bytes:
            return page, cursor
        page.append(row)
        used += bytes_
    return page, None


def fitting(rows: Sequence[Row], *, size: Callable[[Row], int], max_bytes: int = PAGE_MAX_BYTES) -> list[Row]:
    """The longest start of `rows` within `max_bytes` (`size`), never empty when `rows` is
    not: for a listing whose cursor names the last row shown, cut where this cut it."""
    page, _ = fill_page(
        ((str(n), row) for n, row in enumerate(rows)), limit=len(rows), size=size, max_bytes=max_bytes
    )
    return page
