"""Cancel to the end on the console's batch page (issue 29), at a phone's width and a desktop's:
after Cancel the page keeps following the batch, without a reload, while the work already
dispatched finishes, and offers "Retry failed and canceled items" (and the results download)
only once the batch is settled, as the spec allows retry only for a finished batch
(docs/console.md, "Cancel").

The batch is large enough (several input chunks of 1,000 items on the local stack's simulated
latency) that a click lands while it runs; the page is polled with time-outs, nothing sleeps."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from tests.e2e import test_console_browser as console
from tests.e2e.test_console_browser import BATCH_TIMEOUT_MS, MODEL, PASSWORD, PHONE, VIEWPORT

pytestmark = pytest.mark.e2e

# The console tests' chromium (one per module) and page, reused.
browser = console.browser
page = console.page

ITEMS = 2500  # three input chunks: the lane stops at the next one after the cancel

# Records, from the moment it is installed, every (state, counts line) the page shows, and
# every moment the retry button is offered while the batch is not settled (terminal with the
# "settling" note, or not terminal at all).
WATCH = """() => {
  window.__seen = [];
  window.__retryTooEarly = 0;
  window.__sameDocument = true;
  const look = () => {
    const counts = document.querySelector('[data-testid="batch-counts"]');
    const state = document.querySelector('[data-testid="batch-state"]');
    if (counts && state) {
      const now = state.textContent + "|" + counts.textContent;
      if (window.__seen[window.__seen.length - 1] !== now) window.__seen.push(now);
    }
    const retry = [...document.querySelectorAll("button")]
      .some((b) => b.textContent.includes("Retry failed"));
    const terminal = state && ["completed", "failed", "canceled", "expired"].includes(state.textContent);
    if (retry && (!terminal || document.querySelector('[data-testid="settling"]'))) window.__retryTooEarly++;
  };
  new MutationObserver(look).observe(document.body, { subtree: true, childList: true, characterData: true });
  look();
}"""


def _items(count: int) -> list[dict[str, object]]:
    return [
        {
            "customer_item_id": f"item-{n}",
            "operation": "responses",
            "model": MODEL,
            "input": {"messages": [{"role": "user", "content": f"Question {n}: what is routing?"}]},
        }
        for n in range(count)
    ]


def _counts(text: str) -> dict[str, int]:
    found = re.findall(r"(\d+) (completed|failed|running|pending|canceled)", text)
    return {name: int(value) for value, name in found}


@pytest.mark.parametrize("viewport", [PHONE, VIEWPORT], ids=["390px", "1280px"])
def test_after_cancel_the_batch_page_follows_the_batch_until_settled_then_offers_retry(
    page: Page, viewport: ViewportSize
) -> None:
    page.set_viewport_size(viewport)
    failures: list[str] = []
    page.on("pageerror", lambda error: failures.append(str(error)))
    # Given a signed-in owner (the page's request context shares the browser's cookies)
    address = f"cancel-{uuid.uuid4().hex[:10]}@example.com"
    assert page.request.post("/v1/auth/register", data={"email": address, "password": PASSWORD}).ok
    assert page.request.post("/v1/auth/login", data={"email": address, "password": PASSWORD}).ok
    # And a batch of several chunks, running
    created = page.request.post(
        "/v1/batches",
        data=json.dumps({"items": _items(ITEMS)}),
        headers={"Idempotency-Key": f"cancel-{uuid.uuid4().hex}", "Content-Type": "application/json"},
    )
    assert created.status == 202, created.text()
    batch_id = created.json()["batch"]["id"]
    page.goto(f"/console/batches/{batch_id}")
    expect(page.get_by_test_id("batch-state")).to_have_text("running", timeout=BATCH_TIMEOUT_MS)
    expect(page.get_by_role("button", name="Retry failed and canceled items")).to_have_count(0)
    page.evaluate(WATCH)

    # When the owner cancels it
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel batch").click()

    # Then it is canceled at once, and the page says its dispatched work is still finishing
    expect(page.get_by_test_id("batch-state")).to_have_text("canceled")
    expect(page.get_by_test_id("settling")).to_contain_text("work already dispatched is finishing")
    expect(page.get_by_role("button", name="Cancel batch")).to_have_count(0)
    expect(page.get_by_role("button", name="Download results (JSONL)")).to_have_count(0)
    # And the page keeps following it, without a reload, until it is settled
    expect(page.get_by_test_id("settling")).to_have_count(0, timeout=BATCH_TIMEOUT_MS)
    expect(page.get_by_test_id("batch-state")).to_have_text("canceled")
    final = _counts(page.get_by_test_id("batch-counts").inner_text())
    assert final["running"] == 0 and final["pending"] == 0 and final["canceled"] > 0, final
    assert final["completed"] + final["failed"] + final["canceled"] == ITEMS, final
    assert page.evaluate("() => window.__sameDocument") is True
    seen = [entry.split("|", 1) for entry in page.evaluate("() => window.__seen")]
    canceled = [_counts(counts) for state, counts in seen if state == "canceled"]
    # it showed the canceled batch with work in flight, then that work ending, on one page
    assert canceled[0]["running"] + canceled[0]["pending"] > 0, seen
    assert canceled[-1] == final, seen
    # And only now are its receipt, results download and retry offered, never before
    expect(page.get_by_role("heading", name="Routing receipt")).to_be_visible(timeout=30_000)
    expect(page.get_by_role("button", name="Download results (JSONL)")).to_be_visible()
    retry = page.get_by_role("button", name="Retry failed and canceled items")
    expect(retry).to_be_visible()
    assert page.evaluate("() => window.__retryTooEarly") == 0

    # When the canceled items are retried, a new batch of just those is created and opened
    retry.click()
    page.wait_for_function(f"() => !location.pathname.endsWith('{batch_id}')")
    expect(page.get_by_role("heading", name=re.compile("^Batch batch_"))).to_be_visible()
    retried = page.url.rsplit("/", 1)[-1]
    again = page.request.get(f"/v1/batches/{retried}").json()["batch"]
    assert again["counts"]["total"] == final["canceled"] + final["failed"]
    page.request.post(f"/v1/batches/{retried}/cancel", data={})  # nothing more to run here
    assert failures == []
