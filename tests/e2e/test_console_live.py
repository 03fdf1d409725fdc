"""The console takes what the CLI takes and shows what just happened (issue 29, points 2 and 4),
in Debian's chromium against the local stack as `make run` serves it, at a phone's width
(390 px) and a laptop's (1280 px):

- vendor batch lines (tests/fixtures/vendor_lines.jsonl) pasted or uploaded are quoted and
  created, converted as the CLI converts them (docs/compat.md);
- a save shows in the billing audit log at once, its change in words; the "Payment received"
  banner gives way to the credit once it landed;
- a batch's progress reads the same on the overview, the batch list and its page;
- a quote past the hard spending limit warns, and the create's refusal shows by its button;
- a file larger than the direct upload takes goes straight to the uploads bucket by signed
  URL, in parts, under the console's own Content-Security-Policy (docs/files.md,
  docs/console.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, FilePayload, Page, Route, ViewportSize, expect

from tests.e2e.local_stack import MULTIPART_BYTES, REPO, RunningStack
from tests.e2e.test_console_browser import (  # noqa: F401 (`browser`: that module's fixture)
    BATCH_TIMEOUT_MS,
    PASSWORD,
    PHONE,
    VIEWPORT,
    _jsonl,
    browser,
    nav,
    signed_in_page,
)

pytestmark = pytest.mark.e2e

VENDOR_LINES = REPO / "tests" / "fixtures" / "vendor_lines.jsonl"
WIDTHS: list[ViewportSize] = [PHONE, VIEWPORT]


@pytest.fixture(params=WIDTHS, ids=lambda size: f"{size['width']}px")
def page(request: pytest.FixtureRequest, browser: Browser, local_stack: RunningStack) -> Iterator[Page]:  # noqa: F811
    """A signed-in owner's page at each width (a fresh account: the signup credit, no batches)."""
    with signed_in_page(browser, local_stack, request.param, "live") as opened:
        yield opened


def _quote(page: Page) -> None:
    page.get_by_role("button", name="Get a free quote").click()
    expect(page.get_by_role("heading", name=re.compile("^Quote qlock_"))).to_be_visible()


def _no_overflow(page: Page) -> None:
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page is {overflow}px wider than the window"


def test_vendor_batch_lines_are_pasted_or_uploaded_quoted_and_created(page: Page) -> None:
    lines = VENDOR_LINES.read_text(encoding="utf-8")
    page.goto("/console/quotes")
    # When the vendor lines (and one native item) are pasted / Then they are quoted, all four
    page.get_by_label("Or paste JSONL").fill(lines)
    _quote(page)
    facts = page.get_by_role("region", name=re.compile("^Quote qlock_"))
    expect(facts.locator("dt", has_text="Items").locator("xpath=following-sibling::dd[1]")).to_have_text("4")
    expect(page.get_by_text("Preflight found")).to_have_count(0)
    # When the same file is uploaded instead / Then it is quoted the same way
    upload: FilePayload = {"name": "vendor.jsonl", "mimeType": "application/jsonl", "buffer": lines.encode()}
    page.get_by_label("Upload a JSONL file").set_input_files(files=upload)
    expect(page.get_by_label("Or paste JSONL")).to_have_value(lines)
    _quote(page)
    _no_overflow(page)
    # And the batch is created from the quote, with the vendor lines' custom_ids as its items
    page.get_by_role("button", name="Create batch from this quote").click()
    page.wait_for_url(re.compile(r"/console/batches/batch_"))
    expect(page.get_by_test_id("batch-state")).to_have_text("completed", timeout=BATCH_TIMEOUT_MS)
    items = page.get_by_role("region", name="Items")
    for item_id in ("chat-1", "resp-1", "emb-1", "native-1"):
        expect(items.get_by_role("cell", name=item_id, exact=True)).to_be_visible()


# What S3 answers a PUT on a presigned URL past its expiry
EXPIRED_URL = "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"


def test_a_file_too_large_to_paste_goes_to_storage_by_signed_url_and_is_quoted(
    browser: Browser,  # noqa: F811
    local_stack: RunningStack,
) -> None:
    # Given a JSONL file over the direct upload's 4 MiB (MAX_DIRECT_UPLOAD_BYTES) and over the
    # suite's multipart threshold (5 MiB parts: local_stack.py), so it goes in 3 parts; one width
    long = "routing " * 2800
    rows = [
        {
            "customer_item_id": f"big-{n}",
            "operation": "responses",
            "model": "gpt-4o-mini",
            "input": {"messages": [{"role": "user", "content": f"{n}: {long}"}]},
        }
        for n in range(500)
    ]
    content = ("\n".join(json.dumps(row) for row in rows) + "\n").encode()
    assert 2 * MULTIPART_BYTES < len(content) < 3 * MULTIPART_BYTES
    with signed_in_page(browser, local_stack, VIEWPORT, "large") as page:
        # And storage that fails part 1's first PUT (a dropped connection's 500), and refuses
        # part 2's first URL once as an expired one (403), so that part is signed again
        puts: list[str] = []
        dropped: list[str] = []
        refused: list[str] = []
        resigned: list[str] = []

        def storage_fails(route: Route) -> None:
            url = route.request.url
            puts.append(url)
            if "partNumber=1&" in url + "&" and not dropped:
                dropped.append(url)
                route.fulfill(status=500, body="InternalError")
            elif "partNumber=2&" in url + "&" and not refused:
                refused.append(url)
                route.fulfill(status=403, body=EXPIRED_URL, content_type="application/xml")
            else:
                route.continue_()

        page.route(re.compile(r".*/staging/.*"), storage_fails)
        page.on(
            "request",
            lambda r: (
                resigned.append(r.post_data or "") if re.search(r"/v1/files/\w+/parts$", r.url) else None
            ),
        )
        page.goto("/console/quotes")
        # When it is chosen / Then it is named with its size, not put in the box
        upload: FilePayload = {"name": "large.jsonl", "mimeType": "application/jsonl", "buffer": content}
        page.get_by_label("Upload a JSONL file").set_input_files(files=upload)
        expect(page.get_by_test_id("large-file")).to_contain_text(re.compile(r"large\.jsonl \(1\d\.\d MiB\)"))
        expect(page.get_by_label("Or paste JSONL")).to_have_value("")
        # When it is quoted / Then its bytes went to storage by signed URL and every item is quoted
        # (in parts, then checked by the worker while the page polls: more than expect's 5 s
        # when the suite's other worker is busy)
        page.get_by_role("button", name="Get a free quote").click()
        expect(page.get_by_role("heading", name=re.compile("^Quote qlock_"))).to_be_visible(timeout=60_000)
        facts = page.get_by_role("region", name=re.compile("^Quote qlock_"))
        expect(facts.locator("dt", has_text="Items").locator("xpath=following-sibling::dd[1]")).to_have_text(
            "500"
        )
        note = page.get_by_test_id("large-file")
        expect(note).to_contain_text(re.compile(r"was uploaded as file_\w+"))
        file_id = note.locator("code").nth(1).inner_text()
        stored = page.request.get(f"/v1/files/{file_id}").json()["file"]
        assert (stored["bytes"], stored["status"], stored["item_count"]) == (len(content), "processed", 500)
        # three parts; the one that failed sent again; part 2 sent again on a fresh URL
        assert len(puts) == 5
        assert [json.loads(body)["part_numbers"] for body in resigned] == [[2]]
        # And quoting it again (another routing mode) sends nothing again: the same file
        first_quote = page.get_by_role("heading", name=re.compile("^Quote qlock_")).inner_text()
        page.get_by_label("Routing mode").select_option("sla_aware")
        page.get_by_role("button", name="Get a free quote").click()
        heading = page.get_by_role("heading", name=re.compile("^Quote qlock_"))
        expect(heading).not_to_have_text(first_quote, timeout=60_000)
        expect(note).to_contain_text(f"was uploaded as {file_id}")
        assert len(puts) == 5


def test_a_bad_vendor_line_is_named_by_its_line_and_field(page: Page) -> None:
    page.goto("/console/quotes")
    bad = '{"custom_id": "a", "method": "GET", "url": "/v1/chat/completions", "body": {"model": "m"}}'
    page.get_by_label("Or paste JSONL").fill(bad)
    page.get_by_role("button", name="Get a free quote").click()
    expect(page.get_by_role("listitem").filter(has_text="line 1:")).to_contain_text("method must be POST.")


def test_a_save_shows_in_the_audit_log_at_once_in_words(page: Page) -> None:
    page.goto("/console/billing")
    log = page.get_by_role("region", name="Audit log")
    expect(log.get_by_text("No changes yet.")).to_be_visible()
    # When a limit is saved, then made hard
    page.get_by_label("Limit spending").check()
    page.get_by_label("Limit (USD)").fill("100")
    page.get_by_role("button", name="Save spending controls").click()
    expect(page.get_by_text("Spending controls saved.")).to_be_visible()
    # Then the log shows it without a reload, the change in words, not JSON
    expect(log.get_by_text("No changes yet.")).to_have_count(0)
    expect(log.get_by_role("row")).to_have_count(2)  # the header, one entry
    expect(log.get_by_role("listitem").filter(has_text=re.compile(r"^Limit: none → .*100"))).to_be_visible()
    expect(log.get_by_role("listitem").filter(has_text="Spending limit: off → on")).to_be_visible()
    page.get_by_label("When reached").select_option("hard")
    page.get_by_role("button", name="Save spending controls").click()
    expect(log.get_by_role("row")).to_have_count(3)
    expect(log.get_by_role("listitem").filter(has_text="When reached: soft → hard")).to_be_visible()
    assert "{" not in log.inner_text()
    _no_overflow(page)


def test_the_payment_banner_gives_way_to_the_credit_once_it_landed(page: Page) -> None:
    page.goto("/console/billing")
    page.get_by_label(re.compile(r"^Amount \(USD")).fill("40")
    page.get_by_role("button", name="Continue to payment").click()
    # A checkout session made at the processor, then its page: two round trips (under a loaded
    # machine's two test workers, more than the default 5 s has been seen)
    checkout = page.get_by_role("heading", name=re.compile("credits: 40.00 USD"))
    expect(checkout).to_be_visible(timeout=20_000)
    page.get_by_role("button", name="Pay", exact=True).click()
    page.wait_for_url(re.compile(r"/console/billing\?checkout=success&session_id=cs_"))
    # Then the credit shows, with the new balance, and the "Payment received" banner is gone
    expect(page.get_by_text("of credits added.")).to_be_visible(timeout=30_000)
    expect(page.get_by_text("Payment received.")).to_have_count(0)
    expect(page.get_by_test_id("billing-available")).to_contain_text("65")


def test_progress_reads_the_same_on_the_overview_the_list_and_the_batch(page: Page) -> None:
    # Given a batch of two items, one of which always fails, created in the console
    page.goto("/console/quotes")
    page.get_by_label("Or paste JSONL").fill(_jsonl(2).replace("Question 1:", "[simulate:fail] Question 1:"))
    _quote(page)
    page.get_by_role("button", name="Create batch from this quote").click()
    page.wait_for_url(re.compile(r"/console/batches/batch_"))
    batch_id = page.url.rsplit("/", 1)[-1]
    # When the overview is opened at once / Then it follows the batch to its end without a reload
    nav(page, "Overview")
    row = page.get_by_role("row", name=re.compile(batch_id))
    expect(row.get_by_text("completed", exact=True)).to_be_visible(timeout=BATCH_TIMEOUT_MS)
    page.get_by_role("link", name=batch_id).click()
    expect(page.get_by_test_id("batch-state")).to_have_text("completed", timeout=BATCH_TIMEOUT_MS)
    expect(page.get_by_text("1 completed · 1 failed")).to_be_visible()
    # Then every page shows the same progress: both items ended
    on_batch = page.get_by_role("progressbar", name="Batch progress")
    expect(on_batch).to_have_attribute("value", "2")
    shown = page.locator(".progress").first.inner_text()
    assert "2/2" in shown  # both items ended, the failed one included
    for name in ("Overview", "Batches"):
        nav(page, name)
        bar = page.get_by_role("progressbar", name=f"Progress of {batch_id}")
        expect(bar).to_have_attribute("value", "2")
        expect(page.get_by_role("row", name=re.compile(batch_id)).locator(".progress")).to_have_text(shown)
        _no_overflow(page)


def test_a_quote_past_the_hard_limit_warns_and_the_refusal_shows_by_the_button(page: Page) -> None:
    # Given a hard daily limit below any batch's price
    limit = {"limit_enabled": True, "limit_period": "daily", "limit_amount": "0.000001", "limit_mode": "hard"}
    assert page.request.put("/v1/billing/controls", data=limit).ok
    page.goto("/console/quotes")
    page.get_by_label("Or paste JSONL").fill(_jsonl(2))
    _quote(page)
    # Then the quote warns that creating it would pass the limit
    warnings = page.get_by_test_id("quote-warnings")
    expect(warnings).to_contain_text("spending_limit_exceeded")
    expect(warnings).to_contain_text("hard spending limit")
    # When the batch is created anyway / Then the 402 shows right by the button
    button = page.get_by_role("button", name="Create batch from this quote")
    button.click()
    refusal = page.locator("#create-error").get_by_role("alert")
    expect(refusal).to_contain_text("insufficient_credits:")
    expect(button).to_have_accessible_description(re.compile("insufficient_credits"))
    below, above = refusal.bounding_box(), button.bounding_box()
    assert below is not None and above is not None
    assert 0 <= below["y"] - (above["y"] + above["height"]) < 40, (above, below)
    _no_overflow(page)
