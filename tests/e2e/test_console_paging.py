"""Long lists in the console, in Debian's chromium against the local stack (docs/console.md,
"Long lists"): the batch list and a batch's items show the API's first page, and "Load more"
appends the next one by the API's `next_cursor` until there is none; a filter change starts
over. The billing audit log (no cursor) reads older changes the same way. And a settled
batch's file buttons sign their URL again when pressed, so they still work after the 15
minutes a URL read with the page lasts.

The console asks for 50 batches and 100 items a page; these tests shrink the page in the
browser's request (`limit` to 2) so that a few batches and items make several pages. The
cursors the console passes are the API's own: the pages come from the real API.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Request, Route, expect

from tests.e2e.local_stack import RunningStack
from tests.e2e.test_console_browser import (  # noqa: F401 (`browser`: that module's fixture)
    BATCH_TIMEOUT_MS,
    MODEL,
    PASSWORD,
    VIEWPORT,
    browser,
    signed_in_page,
)

pytestmark = pytest.mark.e2e

SMALL_PAGE = 2


@pytest.fixture
def page(browser: Browser, local_stack: RunningStack) -> Iterator[Page]:  # noqa: F811
    """A signed-in owner's page (a fresh account: the signup credit, no batches)."""
    with signed_in_page(browser, local_stack, VIEWPORT, "paging") as opened:
        yield opened


def _create_batch(page: Page, items: int) -> str:
    rows = [
        {
            "customer_item_id": f"item-{n}",
            "operation": "responses",
            "model": MODEL,
            "input": {"messages": [{"role": "user", "content": f"Question {n}: what is paging?"}]},
        }
        for n in range(items)
    ]
    created = page.request.post(
        "/v1/batches",
        data=json.dumps({"items": rows}),
        headers={"Idempotency-Key": f"paging-{uuid.uuid4().hex}", "Content-Type": "application/json"},
    )
    assert created.status == 202, created.text()
    return str(created.json()["batch"]["id"])


def _small_pages(page: Page, path: str, console_limit: int) -> list[str]:
    """Reads of `path` (a regular expression) ask for SMALL_PAGE rows instead of the
    console's `console_limit`; returns the URLs asked for, as they go out."""
    asked: list[str] = []

    def shrink(route: Route, request: Request) -> None:
        url = request.url.replace(f"limit={console_limit}", f"limit={SMALL_PAGE}")
        asked.append(url)
        route.continue_(url=url)

    page.route(re.compile(path), shrink)
    return asked


def test_load_more_batches_follows_the_cursor_to_the_end_and_a_filter_starts_over(page: Page) -> None:
    # Given five batches, listed newest first by the API
    for _ in range(5):
        _create_batch(page, 1)
    listed = [batch["id"] for batch in page.request.get("/v1/batches?limit=100").json()["data"]]
    assert len(listed) == 5
    asked = _small_pages(page, r"/v1/batches\?", 50)
    page.goto("/console/batches")
    rows = page.locator("tbody tr")

    # Then the list shows the first page, says how many there are, and offers more
    expect(rows).to_have_count(SMALL_PAGE)
    expect(page.get_by_test_id("batches-shown")).to_have_text("Showing 2 of 5 batches.")
    more = page.get_by_role("button", name="Load more batches")

    # When "Load more" is pressed (by keyboard, then by a click) / Then the next pages are appended
    more.focus()
    page.keyboard.press("Enter")
    expect(rows).to_have_count(4)
    expect(page.get_by_test_id("batches-shown")).to_have_text("Showing 4 of 5 batches.")
    more.click()
    expect(rows).to_have_count(5)
    # And at the end of the list the button is gone, every batch shown once, in the API's order
    expect(more).to_have_count(0)
    assert rows.locator("td:first-child").all_inner_texts() == listed
    assert any("cursor=batch_" in url for url in asked), asked

    # When the filter changes / Then the list starts over from its first page
    page.get_by_label("Show", exact=True).select_option("failed")
    expect(page.get_by_text("No batches in state failed.")).to_be_visible()
    expect(more).to_have_count(0)
    page.get_by_label("Show", exact=True).select_option(label="all")
    expect(rows).to_have_count(SMALL_PAGE)
    expect(more).to_be_visible()


def test_load_more_items_follows_the_cursor_and_a_status_filter_starts_over(page: Page) -> None:
    # Given a settled batch of five items
    batch_id = _create_batch(page, 5)
    asked = _small_pages(page, rf"/v1/batches/{batch_id}/items\?", 100)
    page.goto(f"/console/batches/{batch_id}")
    expect(page.get_by_test_id("batch-state")).to_have_text("completed", timeout=BATCH_TIMEOUT_MS)
    expect(page.get_by_role("heading", name="Routing receipt")).to_be_visible(timeout=30_000)
    items = page.get_by_role("region", name="Items")
    rows = items.locator("tbody tr")
    more = items.get_by_role("button", name="Load more items")

    # Then its items come a page at a time, to the end
    expect(rows).to_have_count(SMALL_PAGE)
    more.click()
    expect(rows).to_have_count(4)
    more.click()
    expect(rows).to_have_count(5)
    expect(more).to_have_count(0)
    assert rows.locator("td:nth-child(2)").all_inner_texts() == [f"item-{n}" for n in range(5)]
    assert any("cursor=" in url for url in asked), asked

    # When the status filter changes / Then the list starts over, with that filter on every page
    page.get_by_label("Item status").select_option("completed")
    expect(rows).to_have_count(SMALL_PAGE)
    more.click()
    expect(rows).to_have_count(4)
    assert all("status=completed" in url for url in asked[-2:]), asked
    page.get_by_label("Item status").select_option("failed")
    expect(items.get_by_text("No failed items.")).to_be_visible()
    expect(more).to_have_count(0)


def test_load_more_changes_reads_older_audit_entries(page: Page) -> None:
    # Given more spending-control changes than the audit log shows at first (20)
    for amount in range(100, 122):
        saved = page.request.put(
            "/v1/billing/controls",
            data={"limit_enabled": True, "limit_period": "monthly", "limit_amount": str(amount)},
        )
        assert saved.ok, saved.text()
    total = len(page.request.get("/v1/billing/controls/audit?limit=200").json()["data"])
    assert total > 20
    page.goto("/console/billing")
    log = page.get_by_role("region", name="Audit log")
    rows = log.locator("tbody tr")
    expect(rows).to_have_count(20)

    # When "Load more changes" is pressed / Then the older ones show too, and the button goes
    log.get_by_role("button", name="Load more changes").click()
    expect(rows).to_have_count(total)
    expect(log.get_by_role("button", name="Load more changes")).to_have_count(0)
    expect(log.get_by_text("Limit: none → 100.00 USD")).to_be_visible()


def _signed_urls(page: Page, path: str, url_of: Callable[[Any], str]) -> list[str]:
    """The URLs the API signs on the reads of `path` (a regular expression), as they pass."""
    signed: list[str] = []

    def note(route: Route) -> None:
        answer = route.fetch()
        signed.append(url_of(answer.json()))
        route.fulfill(response=answer)

    page.route(re.compile(path), note)
    return signed


def _served_files(page: Page, body: str) -> list[str]:
    """The signed URLs the page opens, each answered with `body` (no real file behind it)."""
    opened: list[str] = []

    def serve(route: Route, request: Request) -> None:
        opened.append(request.url)
        route.fulfill(status=200, content_type="text/plain", body=body)

    page.route(re.compile(r"X-Amz-Signature="), serve)
    return opened


def test_a_file_button_signs_its_url_again_when_pressed(page: Page) -> None:
    # Given a settled batch's page: no longer polled, its files' URLs signed when it was read
    batch_id = _create_batch(page, 2)
    page.goto(f"/console/batches/{batch_id}")
    expect(page.get_by_test_id("batch-state")).to_have_text("completed", timeout=BATCH_TIMEOUT_MS)
    expect(page.get_by_role("heading", name="Routing receipt")).to_be_visible(timeout=30_000)

    # When "Result file" is pressed / Then the batch is read again and its fresh URL opened
    fresh = _signed_urls(page, rf"/v1/batches/{batch_id}$", lambda body: body["batch"]["output_url"])
    opened = _served_files(page, "the result file")
    button = page.get_by_role("button", name="Result file")
    button.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_text("the result file")).to_be_visible()
    assert len(fresh) == 1 and fresh[0], fresh
    assert opened == fresh


def test_a_result_too_large_for_a_page_downloads_the_results_file_instead(page: Page) -> None:
    # Given a settled batch whose results page answers 413 result_too_large (a row over 6 MB,
    # which no Lambda answer carries: docs/batches.md)
    batch_id = _create_batch(page, 2)
    page.goto(f"/console/batches/{batch_id}")
    expect(page.get_by_test_id("batch-state")).to_have_text("completed", timeout=BATCH_TIMEOUT_MS)
    too_large = {
        "error": {
            "code": "result_too_large",
            "message": "The result of item 'item-1' is 7,000,000 bytes, more than one answer carries.",
            "details": {"sequence_number": 1, "next_cursor": None},
        }
    }
    page.route(
        re.compile(rf"/v1/batches/{batch_id}/results"),
        lambda route: route.fulfill(status=413, content_type="application/json", body=json.dumps(too_large)),
    )
    signed = _signed_urls(page, rf"/v1/batches/{batch_id}/artifact-url", lambda body: body["url"])
    opened = _served_files(page, "the whole results file")
    # When "Download results" is pressed / Then the whole results file is opened, signed anew
    page.get_by_role("button", name="Download results (JSONL)").click()
    expect(page.get_by_text("the whole results file")).to_be_visible()
    assert len(signed) == 1 and opened == signed
