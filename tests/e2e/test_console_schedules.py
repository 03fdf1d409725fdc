"""The console's schedules, in Debian's chromium against the local stack (docs/console.md,
docs/schedules.md): a schedule made through the API is listed, paused and resumed in place
(the row shows what the API answered), opened with its definition and runs (a run's batch
linked, a failed run's error in words), and deleted after a confirmation."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from tests.e2e.local_stack import RunningStack
from tests.e2e.test_console_browser import (  # noqa: F401 (`browser`: that module's fixture)
    VIEWPORT,
    browser,
    nav,
    signed_in_page,
)

pytestmark = pytest.mark.e2e

LLAMA = "meta-llama/Llama-3.3-70B-Instruct"


@pytest.fixture
def page(browser: Browser, local_stack: RunningStack) -> Iterator[Page]:  # noqa: F811
    """A signed-in owner's page (a fresh account)."""
    with signed_in_page(browser, local_stack, VIEWPORT, "schedules") as opened:
        yield opened


def _schedule(page: Page) -> dict[str, str]:
    """A daily schedule of a one-item file, made through the API with the page's session."""
    item = {
        "customer_item_id": "a",
        "operation": "responses",
        "model": LLAMA,
        "input": {"messages": [{"role": "user", "content": "Say hello"}]},
    }
    upload = {
        "name": "items.jsonl",
        "mimeType": "application/jsonl",
        "buffer": (json.dumps(item) + "\n").encode(),
    }
    stored = page.request.post("/v1/files", multipart={"file": upload})
    assert stored.ok, stored.text()
    body = {
        "name": "nightly",
        "expression": "30 2 * * *",
        "time_zone": "America/New_York",
        "input_source": {"type": "file", "file_id": stored.json()["file"]["id"]},
    }
    made = page.request.post("/v1/schedules", data=body)
    assert made.status == 201, made.text()
    return {"id": made.json()["id"], "file_id": body["input_source"]["file_id"]}


def test_a_schedule_is_listed_paused_resumed_and_deleted(page: Page) -> None:
    # Given a schedule made through the API
    made = _schedule(page)
    page.goto("/console/")
    # When the Schedules page is opened from the navigation
    nav(page, "Schedules")
    row = page.get_by_role("row", name=re.compile("nightly"))
    # Then the schedule is listed, active, with its expression and zone
    expect(row).to_contain_text("active")
    expect(row).to_contain_text("30 2 * * * (America/New_York)")
    # When it is paused / Then the row says so, and so does the API
    row.get_by_role("button", name="Pause nightly").click()
    expect(row).to_contain_text("paused")
    assert page.request.get(f"/v1/schedules/{made['id']}").json()["state"] == "paused"
    # When it is resumed / Then it is active again, with a next fire
    row.get_by_role("button", name="Resume nightly").click()
    expect(row).to_contain_text("active")
    assert page.request.get(f"/v1/schedules/{made['id']}").json()["next_fire_at"]
    # When it is deleted, the confirmation accepted / Then it is gone, here and in the API
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete nightly").click()
    expect(page.get_by_text("No schedules yet.")).to_be_visible()
    assert page.request.get(f"/v1/schedules/{made['id']}").status == 404


def test_a_schedule_page_shows_its_definition_and_its_runs(page: Page) -> None:
    # Given a schedule, whose runs the API answers with one that made a batch and one that failed
    made = _schedule(page)
    runs = {
        "object": "list",
        "data": [
            {
                "object": "schedule.run",
                "schedule_id": made["id"],
                "fire_at": "2026-03-09T06:30:00.000Z",
                "version": 1,
                "state": "created",
                "batch_id": "batch_01kk0000000000000000000001",
                "error": None,
                "trigger": "sweeper",
                "created_at": "2026-03-09T06:30:00.000Z",
            },
            {
                "object": "schedule.run",
                "schedule_id": made["id"],
                "fire_at": "2026-03-08T07:30:00.000Z",
                "version": 1,
                "state": "failed",
                "batch_id": None,
                "error": {"code": "insufficient_credits", "message": "Not enough credit for this batch."},
                "trigger": "sweeper",
                "created_at": "2026-03-08T07:30:00.000Z",
            },
        ],
        "next_cursor": None,
    }

    def scripted(route: Route) -> None:
        route.fulfill(status=200, content_type="application/json", body=json.dumps(runs))

    page.route(re.compile(rf"/v1/schedules/{made['id']}/runs"), scripted)
    # When its page is opened from the list
    page.goto("/console/schedules")
    page.get_by_role("link", name="nightly").click()
    # Then it shows the definition, and each run with its batch or its error
    expect(page.get_by_role("heading", name="Schedule nightly")).to_be_visible()
    expect(page.get_by_text(f"file {made['file_id']}")).to_be_visible()
    table = page.get_by_role("table", name="Runs, newest first")
    expect(table.get_by_role("link", name="batch_01kk0000000000000000000001")).to_be_visible()
    expect(table).to_contain_text("insufficient_credits: Not enough credit for this batch.")
    # And with no runs scripted, the page says it has not fired
    page.unroute(re.compile(rf"/v1/schedules/{made['id']}/runs"))
    page.reload()
    expect(page.get_by_text("No runs yet: it has not fired.")).to_be_visible()
