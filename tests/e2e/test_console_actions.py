"""Console actions that must not run twice or fail silently, in Debian's chromium against the
local stack (docs/console.md): "Create key" is disabled while its request runs, so a double
click makes one key, whose value is shown; a sign-out the service does not confirm says so,
and the person stays signed in."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from tests.e2e.local_stack import RunningStack
from tests.e2e.test_console_browser import VIEWPORT, browser, nav, signed_in_page  # noqa: F401 (`browser`: that module's fixture)

pytestmark = pytest.mark.e2e


@pytest.fixture
def page(browser: Browser, local_stack: RunningStack) -> Iterator[Page]:  # noqa: F811
    """A signed-in owner's page (a fresh account)."""
    with signed_in_page(browser, local_stack, VIEWPORT, "actions") as opened:
        yield opened


def test_a_double_click_on_create_key_makes_one_key(page: Page) -> None:
    # Given the keys page
    page.goto("/console/keys")
    page.get_by_label("Label").fill("double click")

    # When "Create key" is double-clicked
    page.get_by_role("button", name="Create key").dblclick()

    # Then one key is made, and its value is the one shown
    expect(page.get_by_test_id("new-key-value")).to_be_visible()
    expect(page.get_by_role("row", name=re.compile("double click"))).to_have_count(1)
    keys = [
        key
        for key in page.request.get("/v1/auth/account/api-keys").json()["data"]
        if key["label"] == "double click"
    ]
    assert len(keys) == 1, keys
    assert page.get_by_test_id("new-key-value").inner_text().startswith(keys[0]["prefix"])
    expect(page.get_by_role("button", name="Create key")).to_be_enabled()


def test_a_failed_sign_out_says_so_and_stays_signed_in(page: Page) -> None:
    # Given a signed-in page, and a sign-out the service answers with an error
    page.goto("/console/")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()

    def refuse(route: Route) -> None:
        if route.request.method != "DELETE":
            route.continue_()
            return
        route.fulfill(
            status=503,
            content_type="application/json",
            body='{"error": {"code": "service_unavailable", "message": "Try again shortly."}}',
        )

    page.route(re.compile(r"/v1/sessions/current$"), refuse)

    # When they sign out / Then the error is said, and they are still signed in
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("alert")).to_have_text(
        "Sign out failed, you are still signed in: service_unavailable: Try again shortly."
    )
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()

    # When the service answers again / Then sign out works, and the message is gone
    page.unroute(re.compile(r"/v1/sessions/current$"))
    nav(page, "Batches")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_role("alert")).to_have_count(0)
