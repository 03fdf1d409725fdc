"""The paging rule of pages whose rows can be large (domain/batches/pages.py `fill_page`): at most
`limit` rows and PAGE_MAX_BYTES of them, never an empty page, and the cursor of the first row
left out; a row's bytes are what it adds to the answer Lambda carries (`row_bytes`)."""

from __future__ import annotations

import json

from batchroute.domain.batches.pages import PAGE_MAX_BYTES, fill_page, fitting, row_bytes
from batchroute.services.batches.reads import ResultRowView


def _row(seq: int, text: str = "") -> ResultRowView:
    return {
        "customer_item_id": f"item-{seq}",
        "sequence_number": seq,
        "status": "completed",
        "output": {"content": text},
        "error": None,
    }


def _all_pages(rows: list[ResultRowView], *, limit: int, max_bytes: int) -> list[list[ResultRowView]]:
    """Every page, each read from its cursor on, as the API reads them."""
    pages: list[list[ResultRowView]] = []
    start = 0
    while True:
        page, cursor = fill_page(
            ((str(n), row) for n, row in enumerate(rows) if n >= start),
            limit=limit,
            size=row_bytes,
            max_bytes=max_bytes,
        )
        pages.append(page)
        if cursor is None:
            return pages
        start = int(cursor)


def test_a_row_counts_its_json_and_the_escapes_lambda_adds_to_it() -> None:
    # Given a row with quotes, a backslash and accented text in its answer
    row = _row(3, 'He said "déjà vu" \\ again.')
    # Then its bytes are its JSON as the API writes it, escaped once more into Lambda's
    # proxy response, plus a comma
    body = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
    in_lambda = json.dumps(body, ensure_ascii=False).encode()[1:-1]  # without the string's quotes
    assert row_bytes(row) == len(in_lambda) + 1


def test_a_page_stops_at_the_byte_budget_before_the_limit() -> None:
    # Given 10 rows of the same size and a budget of 3.5 of them
    rows = [_row(n, "x" * 1000) for n in range(10)]
    size = row_bytes(rows[0])
    # When they are paged 1,000 a page
    page, cursor = fill_page(
        ((str(n), r) for n, r in enumerate(rows)), limit=1000, size=row_bytes, max_bytes=size * 7 // 2
    )
    # Then the page holds 3 rows and the cursor is the 4th's
    assert page == rows[:3] and cursor == "3"


def test_following_the_cursor_reads_every_row_once_with_no_page_over_the_budget() -> None:
    # Given rows of mixed sizes
    rows = [_row(n, "é" * (n * 37 % 500)) for n in range(200)]
    budget = 5_000
    # When every page is read
    pages = _all_pages(rows, limit=1000, max_bytes=budget)
    # Then every row comes once, in order, and no page is over the budget or empty
    assert [row for page in pages for row in page] == rows
    assert all(page and sum(row_bytes(r) for r in page) <= budget for page in pages)


def test_a_row_over_the_budget_alone_is_a_page_of_its_own() -> None:
    # Given a row larger than the whole budget between two small ones
    rows = [_row(0), _row(1, "x" * 10_000), _row(2)]
    # When every page is read with a budget of 1,000 bytes
    pages = _all_pages(rows, limit=100, max_bytes=1_000)
    # Then the big row is a page alone and no row is lost
    assert pages == [[rows[0]], [rows[1]], [rows[2]]]


def test_the_limit_still_cuts_a_page_and_the_last_page_has_no_cursor() -> None:
    rows = [_row(n) for n in range(5)]
    page, cursor = fill_page(((str(n), r) for n, r in enumerate(rows)), limit=2, size=row_bytes)
    assert page == rows[:2] and cursor == "2"
    page, cursor = fill_page(((str(n), r) for n, r in enumerate(rows[:2])), limit=2, size=row_bytes)
    assert page == rows[:2] and cursor is None  # no row left: no cursor, as the spec says
    assert fill_page(iter([]), limit=2, size=row_bytes) == ([], None)


def test_the_budget_leaves_room_under_the_lambda_response_cap() -> None:
    assert PAGE_MAX_BYTES + 64 * 1024 < 6_291_556


def test_fitting_keeps_the_longest_start_within_the_budget_never_nothing() -> None:
    # For a listing whose cursor names the last row shown (presets, schedules, versions)
    rows = [_row(n, "x" * 1000) for n in range(6)]
    size = row_bytes(rows[0])
    assert fitting(rows, size=row_bytes, max_bytes=size * 5 // 2) == rows[:2]
    assert fitting(rows, size=row_bytes, max_bytes=size * 10) == rows
    assert fitting(rows, size=row_bytes, max_bytes=10) == rows[:1]
    assert fitting([], size=row_bytes) == []
