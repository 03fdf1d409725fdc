"""Console actions that must not run twice or fail silently, in Debian's chromium against the
local stack (docs/console.md): "Create key" is disabled while its request runs, so a double
click makes one key, whose value is shown; a sign-out the service does not confirm says so,
and the person stays signed in; a blank percent threshold is refused, not saved as 0%; the
auto top-up form keeps what is typed while the page looks for a purchase's card."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from tests.e2e.local_stack import RunningStack
from tests.e2e.test_console_browser import (  # noqa: F401 (`browser`: that module's fixture)
    PASSWORD,
    VIEWPORT,
    browser,
    nav,
    signed_in_page,
)

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


def test_a_percent_threshold_left_blank_is_refused_not_saved_as_zero(page: Page) -> None:
    # Given the billing page with a percent-of-limit threshold added
    page.goto("/console/billing")
    before = page.request.get("/v1/billing/controls").json()["controls"]["alert_thresholds"]
    page.get_by_role("button", name="Add threshold").click()
    index = len(before)
    expect(page.get_by_label(f"Threshold {index + 1} kind")).to_have_value("pct_of_limit")

    # When its value is cleared and the controls saved
    page.get_by_label(f"Threshold {index + 1} value").fill("")
    page.get_by_role("button", name="Save spending controls").click()

    # Then the API's refusal shows under that value, and no 0% threshold is stored
    field_error = page.locator(f"#threshold-value-{index}-error")
    expect(field_error).to_contain_text("whole percent from 0 to 100")
    expect(page.get_by_text("Spending controls saved.")).to_have_count(0)
    assert page.request.get("/v1/billing/controls").json()["controls"]["alert_thresholds"] == before

    # When a percent is typed / Then it saves as that number
    page.get_by_label(f"Threshold {index + 1} value").fill("75")
    page.get_by_role("button", name="Save spending controls").click()
    expect(page.get_by_text("Spending controls saved.")).to_be_visible()
    stored = page.request.get("/v1/billing/controls").json()["controls"]["alert_thresholds"]
    assert stored[index] == {"type": "pct_of_limit", "value": 75}


def test_auto_top_up_edits_survive_the_look_for_a_card_after_a_purchase(page: Page) -> None:
    # Given the billing page back from checkout, looking every 1.5 s for the card the
    # purchase saves (none comes: nothing was bought)
    page.goto("/console/billing?checkout=success")
    trigger = page.get_by_label("When the balance falls below (USD)")
    expect(trigger).to_have_value(re.compile(r"\d"))

    # When the person types while the page looks again
    trigger.fill("7.50")
    page.get_by_label("Top up automatically").check()
    with page.expect_response(re.compile(r"/v1/billing/auto-topup$")):
        pass
    with page.expect_response(re.compile(r"/v1/billing/auto-topup$")):
        pass

    # Then what they typed is still there after each look
    expect(trigger).to_have_value("7.50")
    expect(page.get_by_label("Top up automatically")).to_be_checked()


def test_an_ended_session_leads_to_sign_in_and_back_to_the_page(
    browser: Browser,  # noqa: F811
    local_stack: RunningStack,
) -> None:
    # Given a signed-in person on the billing page
    context = browser.new_context(viewport=VIEWPORT, base_url=local_stack.base_url)
    context.set_default_timeout(20_000)
    try:
        page = context.new_page()
        address = f"ended-{uuid.uuid4().hex[:10]}@example.com"
        assert page.request.post("/v1/auth/register", data={"email": address, "password": PASSWORD}).ok
        assert page.request.post("/v1/auth/login", data={"email": address, "password": PASSWORD}).ok
        page.goto("/console/billing")
        expect(page.get_by_role("heading", name="Billing", level=1)).to_be_visible()
        # (every section read: one still reading when the session ends would sign out first)
        expect(page.locator("[aria-busy='true']")).to_have_count(0)

        # When the session ends elsewhere and the person moves on to the batches
        assert page.request.delete("/v1/sessions/current").ok
        nav(page, "Batches")

        # Then the sign-in page is shown (not each section's authentication error)
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
        expect(page.get_by_text("authentication_required")).to_have_count(0)

        # And signing in again leads back to the page they were going to
        page.get_by_label("Email").fill(address)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Batches", level=1)).to_be_visible()
        assert page.url.endswith("/console/batches")
    finally:
        context.close()
