"""The web console in a real browser (Debian's chromium driven by Playwright) against the
local stack as `make run` serves it: sign up, buy credits through the payment emulator's
hosted checkout, see a validation error on a field and set a hard limit, create and revoke
a key, paste JSONL, quote, create, watch the batch complete, open its receipt, download
results (docs/console.md).

With CONSOLE_SCREENSHOTS=<dir> (`make console-screenshots`) each page is also saved at
1280x800 into that directory.
"""

from __future__ import annotations

import email
import email.policy
import json
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import pytest
from playwright.sync_api import Browser, FilePayload, Page, ViewportSize, expect, sync_playwright

from tests.e2e.local_stack import REPO, RunningStack
from tests.integration.customer_bucket import BUCKET, CustomerS3

pytestmark = pytest.mark.e2e

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
PASSWORD = "correct horse battery"
BATCH_TIMEOUT_MS = 120_000
# Served by several providers: the receipt has lanes that were not chosen, with reasons.
MODEL = "meta-llama/Llama-3.3-70B-Instruct"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make browser` installs Debian's chromium")
    if not (REPO / "console" / "dist" / "index.html").exists():
        pytest.fail("the console is not built: `make console`")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def customer() -> Iterator[CustomerS3]:
    """The customer's own S3-compatible store: a moto server of its own (checking keys)."""
    with CustomerS3.start() as server:
        yield server


@pytest.fixture
def page(browser: Browser, local_stack: RunningStack) -> Iterator[Page]:
    context = browser.new_context(viewport=VIEWPORT, base_url=local_stack.base_url, accept_downloads=True)
    context.set_default_timeout(20_000)
    opened = context.new_page()
    try:
        yield opened
    finally:
        context.close()


@contextmanager
def signed_in_page(
    browser: Browser, stack: RunningStack, viewport: ViewportSize, label: str
) -> Iterator[Page]:
    """A page signed in as the owner of a fresh account (the signup credit, no batches),
    registered and logged in through the API; its context closed afterwards."""
    context = browser.new_context(viewport=viewport, base_url=stack.base_url)
    context.set_default_timeout(20_000)
    opened = context.new_page()
    address = f"{label}-{uuid.uuid4().hex[:10]}@example.com"
    assert opened.request.post("/v1/auth/register", data={"email": address, "password": PASSWORD}).ok
    assert opened.request.post("/v1/auth/login", data={"email": address, "password": PASSWORD}).ok
    try:
        yield opened
    finally:
        context.close()


class Screens:
    """Saves a full-viewport screenshot per page when asked to (CONSOLE_SCREENSHOTS)."""

    def __init__(self, page: Page, target: str | None) -> None:
        self.page = page
        self.target = Path(target) if target else None
        if self.target is not None:
            self.target.mkdir(parents=True, exist_ok=True)

    def take(self, name: str) -> None:
        if self.target is not None:
            self.page.mouse.move(1, 1)  # no chart tooltip under a pointer left by a click
            self.page.screenshot(path=str(self.target / f"{name}.png"))


def nav(page: Page, name: str) -> None:
    """Follow a link of the console's navigation (keyboard reachable, as a person would)."""
    link = page.get_by_role("navigation", name="Console").get_by_role("link", name=name, exact=True)
    link.focus()
    page.keyboard.press("Enter")


def _jsonl(count: int) -> str:
    rows = [
        {
            "customer_item_id": f"item-{n}",
            "operation": "responses",
            "model": MODEL,
            "input": {"messages": [{"role": "user", "content": f"Question {n}: what is routing?"}]},
        }
        for n in range(count)
    ]
    return "\n".join(json.dumps(row) for row in rows) + "\n"


def test_a_customer_runs_the_whole_console_flow(page: Page, local_stack: RunningStack) -> None:
    shots = Screens(page, os.environ.get("CONSOLE_SCREENSHOTS"))
    address = f"console-{uuid.uuid4().hex[:10]}@example.com"
    failures: list[str] = []
    page.on("pageerror", lambda error: failures.append(str(error)))

    # Given a visitor: the console sends them to sign in, and from there to sign up
    page.goto("/console/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    shots.take("sign-in")
    page.get_by_role("link", name="Create an account").click()
    page.get_by_label("Email").fill(address)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_label("Organization name (optional)").fill("Console Co")
    shots.take("sign-up")
    page.get_by_role("button", name="Create account").click()

    # Then they land signed in on the overview with the local signup credit
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.get_by_test_id("available")).to_have_text("25.00 USD")

    # When they buy 40 USD of credits on the payment emulator's hosted page
    nav(page, "Billing")
    page.get_by_label("Amount (USD, 5 to 10,000)").fill("40")
    page.get_by_role("button", name="Continue to payment").click()
    expect(page.get_by_text("40.00 USD")).to_be_visible()
    page.get_by_role("button", name="Pay").click()
    # Then they are back on the billing page and the webhook's credit shows up
    page.wait_for_url(re.compile(r"/console/billing\?checkout=success"))
    expect(page.get_by_test_id("billing-available")).to_have_text("65.00 USD", timeout=30_000)
    # And the card the purchase saved is offered for auto top-up
    expect(page.get_by_text("Saved card: visa ending 4242")).to_be_visible(timeout=30_000)
    page.get_by_label("Top up automatically").check()
    page.get_by_label("When the balance falls below (USD)").fill("5")
    page.get_by_role("button", name="Save auto top-up").click()
    expect(page.get_by_text("Auto top-up saved.")).to_be_visible()

    # When they set a negative limit, the server's validation error shows on that field
    page.get_by_label("Limit spending").check()
    page.get_by_label("Limit (USD)").fill("-5")
    page.get_by_role("button", name="Save spending controls").click()
    field_error = page.locator("#limit-amount-error")
    expect(field_error).to_be_visible()
    expect(field_error).to_contain_text("invalid_controls")
    expect(page.get_by_label("Limit (USD)")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Limit (USD)")).to_have_accessible_description(re.compile("invalid_controls"))
    shots.take("billing-validation-error")
    # And a valid hard limit saves and is audited
    page.get_by_label("Limit (USD)").fill("100")
    page.get_by_label("When reached").select_option("hard")
    page.get_by_role("button", name="Save spending controls").click()
    expect(page.get_by_text("Spending controls saved.")).to_be_visible()
    expect(field_error).to_have_count(0)
    page.reload()
    expect(page.get_by_label("Limit (USD)")).to_have_value("100.00")
    expect(page.get_by_label("When reached")).to_have_value("hard")
    expect(page.get_by_role("region", name="Audit log").get_by_role("cell").first).to_be_visible()
    shots.take("billing")

    # When they create a key, its value is shown once; then they revoke it
    nav(page, "API keys")
    page.get_by_label("Label").fill("ci runner")
    page.get_by_role("button", name="Create key").click()
    value = page.get_by_test_id("new-key-value").inner_text()
    assert value.startswith("brk_local_")
    expect(page.get_by_role("row", name=re.compile("ci runner"))).to_be_visible()
    shots.take("api-keys")
    page.get_by_role("button", name="Done").click()
    expect(page.get_by_test_id("new-key-value")).to_have_count(0)
    assert value not in page.content()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Revoke ci runner").click()
    expect(page.get_by_role("row", name=re.compile("ci runner")).get_by_text("revoked")).to_be_visible()

    # When they upload a JSONL file, get the free quote and create the batch from it
    nav(page, "New batch")
    jsonl = _jsonl(3)
    upload: FilePayload = {"name": "items.jsonl", "mimeType": "application/jsonl", "buffer": jsonl.encode()}
    page.get_by_label("Upload a JSONL file").set_input_files(files=upload)
    expect(page.get_by_label("Or paste JSONL")).to_have_value(jsonl)
    page.get_by_role("button", name="Get a free quote").click()
    expect(page.get_by_role("heading", name=re.compile("^Quote qlock_"))).to_be_visible()
    expect(page.get_by_role("table", name="Lanes considered").get_by_role("row")).not_to_have_count(1)
    shots.take("quote")
    page.get_by_role("button", name="Create batch from this quote").click()

    # Then the batch page follows it to completion, polling, and shows its receipt
    page.wait_for_url(re.compile(r"/console/batches/batch_"))
    batch_id = page.url.rsplit("/", 1)[-1]
    expect(page.get_by_test_id("batch-state")).to_have_text("completed", timeout=BATCH_TIMEOUT_MS)
    expect(page.get_by_role("heading", name="Routing receipt")).to_be_visible(timeout=30_000)
    expect(page.get_by_test_id("settled-price")).to_contain_text("USD")
    expect(page.get_by_role("heading", name="Lanes not chosen, and why")).to_be_visible()
    rejected = page.get_by_test_id("rejected-lanes")
    expect(rejected.get_by_role("row").nth(1)).to_be_visible()  # a header row, then lanes
    expect(rejected.locator("code").first).to_have_text(re.compile(r"^[a-z_]+$"))
    reasons = page.get_by_role("figure", name="Lanes not chosen, by reason")
    expect(reasons.locator(".recharts-bar-rectangle path").first).to_be_visible()
    expect(page.get_by_role("cell", name=MODEL).first).to_be_visible()
    expect(page.get_by_text("3 completed")).to_be_visible()
    expect(
        page.get_by_role("figure", name="Items per lane").locator(".recharts-bar-rectangle path").first
    ).to_be_visible()
    shots.take("batch")
    page.get_by_role("heading", name="Routing receipt").evaluate("e => e.scrollIntoView({block: 'start'})")
    shots.take("batch-receipt")
    page.evaluate("() => window.scrollTo(0, 0)")

    # And the results download as JSONL, one row per item
    with page.expect_download() as download_info:
        page.get_by_role("button", name="Download results (JSONL)").click()
    downloaded = Path(download_info.value.path())
    rows = [json.loads(line) for line in downloaded.read_text(encoding="utf-8").splitlines()]
    assert sorted(row["customer_item_id"] for row in rows) == ["item-0", "item-1", "item-2"]
    assert all(row["status"] == "completed" and row["output"] for row in rows)

    # And the batch list shows it completed; the other pages render
    nav(page, "Batches")
    listed = page.get_by_role("row", name=re.compile(batch_id))
    expect(listed.get_by_text("completed", exact=True)).to_be_visible()
    expect(listed.get_by_role("progressbar")).to_have_attribute("value", "3")
    shots.take("batches")
    nav(page, "Usage")
    chart = page.get_by_role("figure", name="Spend per day by model")
    expect(chart.locator(".recharts-bar-rectangle path").first).to_be_visible()
    expect(page.get_by_role("table", name="By model").get_by_role("cell", name=MODEL)).to_be_visible()
    shots.take("usage")
    nav(page, "Settings")
    expect(page.get_by_role("heading", name="Delivery targets")).to_be_visible()
    expect(page.get_by_label("Organization name")).to_have_value("Console Co")
    expect(page.get_by_text(f"Signed in as {address}")).to_be_visible()
    expect(page.get_by_text("Loading delivery targets")).to_have_count(0)
    shots.take("settings")

    # And the overview shows the wallet, the spend against the hard limit and the batch
    nav(page, "Overview")
    expect(page.get_by_role("progressbar", name="Spend against the limit")).to_be_visible()
    expect(page.get_by_text("hard limit of 100.00 USD per month")).to_be_visible()
    expect(page.get_by_role("link", name=batch_id)).to_be_visible()
    shots.take("overview")

    # And at a phone's width the pages reflow: nothing wider than the screen but the tables
    page.set_viewport_size(PHONE)
    loaded = {
        "Overview": page.get_by_test_id("available"),
        "Billing": page.get_by_role("button", name="Save spending controls"),
        "Batches": page.get_by_role("link", name=batch_id),
    }
    for name, content in loaded.items():
        nav(page, name)
        expect(content).to_be_visible()
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{name} is {overflow}px wider than a phone"
    shots.take("batches-phone")
    page.set_viewport_size(VIEWPORT)

    # And no secret was kept in the browser's storage, and no script error happened
    stored = page.evaluate("() => JSON.stringify({...localStorage}) + JSON.stringify({...sessionStorage})")
    assert value not in stored and PASSWORD not in stored
    assert failures == []

    # When they sign out, the console is closed to them
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.goto("/console/billing")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def test_the_console_is_served_with_an_spa_fallback(page: Page) -> None:
    # A deep link answers index.html, so the app's own route renders after a reload
    response = page.goto("/console/batches/batch_unknown")
    assert response is not None and response.status == 200
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    # A missing asset is a 404, not the page
    assert page.request.get("/console/assets/missing.js").status == 404


def test_an_api_error_is_shown_as_code_and_message(page: Page) -> None:
    page.goto("/console/sign-in")
    page.get_by_label("Email").fill(f"nobody-{uuid.uuid4().hex[:8]}@example.com")
    page.get_by_label("Password").fill("wrong password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("invalid_credentials:")


def _reset_link(outbox: Path, address: str) -> str:
    """The reset link of the newest email to `address` in the local outbox (.eml files)."""
    marker = "/console/reset-password?token="
    for path in sorted(outbox.glob("*.eml"), reverse=True):
        message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
        body = message.get_body(preferencelist=("plain",))
        text = str(body.get_content()) if body is not None else ""
        if message["To"] == address and marker in text:
            return next(line.strip() for line in text.splitlines() if marker in line)
    raise AssertionError(f"no reset email for {address} in {outbox}")


def test_a_forgotten_password_is_reset_through_the_emailed_console_link(
    page: Page, local_stack: RunningStack
) -> None:
    # Given an account
    address = f"forgot-{uuid.uuid4().hex[:10]}@example.com"
    registered = page.request.post("/v1/auth/register", data={"email": address, "password": PASSWORD})
    assert registered.status == 200, registered.text()
    # When its owner asks for a reset link on the console
    page.goto("/console/sign-in")
    page.get_by_role("link", name="Forgot password?").click()
    page.get_by_label("Email").fill(address)
    page.get_by_role("button", name="Send reset link").click()
    expect(page.get_by_role("status")).to_contain_text("a reset link is on its way")
    # And follows the emailed link to the console's reset page and chooses a new password
    page.goto(_reset_link(local_stack.stack_file.parent / "outbox", address))
    page.get_by_label("New password").fill("a brand new passphrase")
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_role("status")).to_contain_text("Password changed")
    # Then the new password signs in and the old one does not
    page.get_by_role("link", name="Sign in").click()
    page.get_by_label("Email").fill(address)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("invalid_credentials:")
    page.get_by_label("Password").fill("a brand new passphrase")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def test_failed_items_are_filtered_and_retried_from_the_batch_page(page: Page) -> None:
    # Given a signed-in owner (the page's request context shares the browser's cookies)
    address = f"retry-{uuid.uuid4().hex[:10]}@example.com"
    assert page.request.post("/v1/auth/register", data={"email": address, "password": PASSWORD}).ok
    assert page.request.post("/v1/auth/login", data={"email": address, "password": PASSWORD}).ok
    # And a batch of two items, one of which always fails
    rows = [json.loads(line) for line in _jsonl(2).splitlines()]
    rows[1]["input"]["messages"][0]["content"] += " [simulate:fail]"
    created = page.request.post(
        "/v1/batches", data={"items": rows}, headers={"Idempotency-Key": f"console-{uuid.uuid4().hex}"}
    )
    assert created.status == 202, created.text()
    batch_id = created.json()["batch"]["id"]

    # When its page is opened, it follows the batch to the end
    page.goto(f"/console/batches/{batch_id}")
    expect(page.get_by_test_id("batch-state")).to_have_text("completed", timeout=BATCH_TIMEOUT_MS)
    expect(page.get_by_text("1 completed · 1 failed")).to_be_visible()
    # And the items filter shows the failed one with its error
    page.get_by_label("Item status").select_option("failed")
    items = page.get_by_role("region", name="Items")
    expect(items.get_by_role("cell", name="item-1")).to_be_visible()
    expect(items.get_by_role("cell", name="item-0")).to_have_count(0)

    # When the failed item is retried, a new batch is created and opened
    page.get_by_role("button", name="Retry failed and canceled items").click()
    page.wait_for_url(re.compile(r"/console/batches/batch_"))
    page.wait_for_function(f"() => !location.pathname.endsWith('{batch_id}')")
    expect(page.get_by_test_id("batch-state")).to_have_text(
        re.compile("completed|failed"), timeout=BATCH_TIMEOUT_MS
    )
    # Then the new batch holds only the retried item
    expect(page.get_by_text("0 completed · 1 failed")).to_be_visible()


def test_settings_save_a_delivery_target_that_tests_ok_and_show_webhook_errors(
    page: Page, local_stack: RunningStack, customer: CustomerS3
) -> None:
    # Given a signed-in owner and a bucket on an S3-compatible store of the customer's (a moto
    # server of its own: the stack's own store is never a target)
    bucket = BUCKET
    address = f"settings-{uuid.uuid4().hex[:10]}@example.com"
    assert page.request.post("/v1/auth/register", data={"email": address, "password": PASSWORD}).ok
    assert page.request.post("/v1/auth/login", data={"email": address, "password": PASSWORD}).ok
    page.goto("/console/settings")
    expect(page.get_by_role("heading", name="Settings")).to_be_visible()

    # The keyboard's first stop skips the navigation to the page itself
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()

    # When a plain-http webhook is saved, the server's refusal is shown
    page.get_by_label("HTTPS URL").fill("http://example.com/hooks")
    page.get_by_label("Signing secret (8-256 characters)").fill("a webhook secret")
    page.get_by_role("button", name="Save webhook").click()
    expect(page.get_by_role("region", name="Delivery webhook").get_by_role("alert")).to_contain_text(
        "https_required:"
    )

    # When a delivery target is added and tested
    page.get_by_label("Bucket", exact=True).fill(bucket)
    page.get_by_label("Key prefix (optional)").fill("console")
    page.get_by_label("S3-compatible endpoint URL (optional)").fill(customer.endpoint_url)
    page.get_by_label("Access key id").fill(customer.access_key_id)
    page.get_by_label("Secret access key (write-only)").fill(customer.secret_access_key)
    page.get_by_role("button", name="Add delivery target").click()
    row = page.get_by_role("row", name=re.compile(bucket))
    expect(row).to_be_visible()
    expect(page.get_by_label("Secret access key (write-only)")).to_have_value("")
    row.get_by_role("button", name="Test").click()
    # Then the test wrote a sample object and says so
    expect(row.get_by_role("status")).to_contain_text("ok (console/batchroute-test-")
    assert customer.secret_access_key not in page.content()

    # And retention saves
    page.get_by_label("Keep results").select_option("extended_fixed")
    page.get_by_label("Days (1-3650)").fill("30")
    page.get_by_role("button", name="Save retention").click()
    expect(page.get_by_text("Retention saved.")).to_be_visible()
    page.reload()
    expect(page.get_by_label("Days (1-3650)")).to_have_value("30")
    # And after the reload the target's last test reads as a line, not as raw JSON
    last = page.get_by_role("row", name=re.compile(bucket)).get_by_role("status")
    expect(last).to_contain_text("ok (console/batchroute-test-")
    expect(last).not_to_contain_text("{")


def test_the_keys_page_offers_only_the_roles_the_user_may_grant(
    page: Page, local_stack: RunningStack
) -> None:
    failures: list[str] = []
    page.on("pageerror", lambda error: failures.append(str(error)))
    # Given a signed-in owner whose org has an owner, a billing and a member key
    address = f"grants-{uuid.uuid4().hex[:10]}@example.com"
    registered = page.request.post("/v1/auth/register", data={"email": address, "password": PASSWORD})
    assert registered.status == 200, registered.text()
    user_id = registered.json()["user_id"]
    assert page.request.post("/v1/auth/login", data={"email": address, "password": PASSWORD}).ok
    for label, role in (("money", "owner"), ("books", "billing"), ("runner", "member")):
        made = page.request.post("/v1/auth/account/api-keys", data={"label": label, "role": role})
        assert made.status == 201, made.text()
    roles = page.locator("#key-role option")

    # Then the owner's keys page offers every role and may revoke every key
    page.goto("/console/keys")
    expect(roles).to_have_text(["owner", "admin", "member", "billing"])
    expect(page.get_by_label("Role")).to_have_value("member")
    for label in ("money", "books", "runner"):
        expect(page.get_by_role("button", name=f"Revoke {label}")).to_be_visible()

    # When the user becomes an admin (no API call makes one: the stack's table is written)
    stack = local_stack.describe()
    make_client: Any = boto3.client
    make_client(
        "dynamodb",
        endpoint_url=stack["endpoint_url"],
        region_name=stack["region"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ).update_item(
        TableName=stack["tables"]["identity"],
        Key={"pk": {"S": f"USER#{user_id}"}, "sk": {"S": "META"}},
        UpdateExpression="SET #role = :role",
        ExpressionAttributeNames={"#role": "role"},
        ExpressionAttributeValues={":role": {"S": "admin"}},
    )
    # And the page, loaded before the change, asks for an owner key anyway
    page.get_by_label("Label").fill("escalate")
    page.get_by_label("Role").select_option("owner")
    page.get_by_role("button", name="Create key").click()
    # Then the API's refusal is shown as its code and message, and no key is made
    expect(page.get_by_role("alert")).to_contain_text("permission_denied:")
    expect(page.get_by_role("alert")).to_contain_text("billing:manage")
    expect(page.get_by_test_id("new-key-value")).to_have_count(0)

    # When the admin opens the keys page again
    page.reload()
    # Then it offers only the roles an admin may grant, and Revoke only on keys of those roles
    expect(roles).to_have_text(["admin", "member"])
    expect(page.get_by_label("Role")).to_have_value("member")
    expect(page.get_by_role("button", name="Revoke runner")).to_be_visible()
    for label in ("money", "books"):
        row = page.get_by_role("row", name=re.compile(label))
        expect(row).to_contain_text("you may not revoke it")
        expect(row.get_by_role("button")).to_have_count(0)
    expect(page.get_by_role("row", name=re.compile("escalate"))).to_have_count(0)
    # And an admin key is still created from it
    page.get_by_label("Label").fill("deputy")
    page.get_by_label("Role").select_option("admin")
    page.get_by_role("button", name="Create key").click()
    expect(page.get_by_test_id("new-key-value")).to_have_text(re.compile("^brk_local_"))
    expect(page.get_by_role("row", name=re.compile("deputy"))).to_contain_text("admin")
    assert failures == []
