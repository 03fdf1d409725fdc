"""Every console page at a phone's width (390 px) and a desktop's (1280 px), in Debian's
chromium against the local stack (docs/console.md, "Layout, states and accessibility"):

- nothing is wider than the screen (`scrollWidth <= clientWidth` of the document);
- axe-core, injected into the page, finds no serious or critical violation;
- a fresh account sees an empty state, never a table of bare headers;
- times carry their time zone;
- a page or a batch that does not exist says so and links back;
- an empty paste box is answered by the console's own message next to it;
- the payment emulator's checkout page looks like the console.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Protocol

import pytest
from playwright.sync_api import Browser, BrowserContext, Locator, Page, StorageState, ViewportSize, expect

from tests.e2e import test_console_browser as console_browser
from tests.e2e.local_stack import REPO, RunningStack
from tests.e2e.test_console_browser import BATCH_TIMEOUT_MS, MODEL, PASSWORD, PHONE, VIEWPORT

pytestmark = pytest.mark.e2e

# The browser of the main console flow (module scoped): one chromium for this file.
browser = console_browser.browser

AXE = REPO / "console" / "node_modules" / "axe-core" / "axe.min.js"
WIDTHS: dict[str, ViewportSize] = {"390px": PHONE, "1280px": VIEWPORT}
# A time as `when()` writes it (console/src/format.ts): the clock time, then its zone
# ("08:01 AM UTC", "17:01 GMT+9", "09:01 CET"); a bare "08:01 AM" does not match.
ZONED = re.compile(r"\d{2}(\s?[AP]M)?\s(UTC|GMT([+-]\d{1,2}(:\d{2})?)?|[A-Z]{3,5})$")
MISSING_BATCH = "batch_00000000000000000000000000"


@dataclass(frozen=True)
class Account:
    """A signed-in browser's storage (its session cookie), and the account's settled batch."""

    state: StorageState
    batch_id: str = ""


def _signed_up(page: Page, prefix: str) -> None:
    """Register an account and sign in through the API (the page's requests share its cookies)."""
    address = f"{prefix}-{uuid.uuid4().hex[:10]}@example.com"
    for path in ("/v1/auth/register", "/v1/auth/login"):
        answered = page.request.post(path, data={"email": address, "password": PASSWORD})
        assert answered.ok, answered.text()


def _create_batch(page: Page, questions: list[str]) -> str:
    """A batch of one item per question (a model several providers serve)."""
    items = [
        {
            "customer_item_id": f"q-{n}",
            "operation": "responses",
            "model": MODEL,
            "input": {"messages": [message]},
        }
        for n, message in enumerate({"role": "user", "content": q} for q in questions)
    ]
    key = {"Idempotency-Key": f"layout-{uuid.uuid4().hex}"}
    created = page.request.post("/v1/batches", data={"items": items}, headers=key)
    assert created.status == 202, created.text()
    return str(created.json()["batch"]["id"])


@pytest.fixture(scope="module")
def fresh(browser: Browser, local_stack: RunningStack) -> Account:
    """An account that has done nothing yet: every list is empty."""
    context = browser.new_context(base_url=local_stack.base_url)
    try:
        _signed_up(context.new_page(), "layout-fresh")
        return Account(context.storage_state())
    finally:
        context.close()


@pytest.fixture(scope="module")
def busy(browser: Browser, local_stack: RunningStack) -> Account:
    """An account with a settled batch (one item failed), an API key and a spending limit."""
    context = browser.new_context(base_url=local_stack.base_url, viewport=VIEWPORT)
    context.set_default_timeout(20_000)
    try:
        opened = context.new_page()
        _signed_up(opened, "layout-busy")
        batch_id = _create_batch(opened, ["Say hello.", "Say goodbye.", "Fail, please. [simulate:fail]"])
        key = opened.request.post("/v1/auth/account/api-keys", data={"label": "layout key", "role": "member"})
        assert key.ok, key.text()
        limit = {"limit_enabled": True, "limit_period": "monthly", "limit_amount": "100"}
        assert opened.request.put("/v1/billing/controls", data=limit).ok
        opened.goto(f"/console/batches/{batch_id}")
        expect(opened.get_by_test_id("batch-state")).to_have_text("completed", timeout=BATCH_TIMEOUT_MS)
        return Account(context.storage_state(), batch_id)
    finally:
        context.close()


@pytest.fixture(params=sorted(WIDTHS))
def width(request: pytest.FixtureRequest) -> ViewportSize:
    return WIDTHS[request.param]


class Opener(Protocol):
    def __call__(self, account: Account | None = None, *, timezone_id: str | None = None) -> Page: ...


@pytest.fixture
def open_page(browser: Browser, local_stack: RunningStack, width: ViewportSize) -> Iterator[Opener]:
    """Opens a page at the test's width, signed in as `account` (a visitor without one)."""
    contexts: list[BrowserContext] = []

    def opened(account: Account | None = None, *, timezone_id: str | None = None) -> Page:
        context = browser.new_context(
            base_url=local_stack.base_url,
            viewport=width,
            storage_state=account.state if account else None,
            timezone_id=timezone_id,
        )
        context.set_default_timeout(20_000)
        contexts.append(context)
        return context.new_page()

    yield opened
    for context in contexts:
        context.close()


@cache
def _axe_source() -> str:
    if not AXE.exists():
        pytest.fail(f"{AXE} is missing: `npm --prefix console ci` installs axe-core")
    return AXE.read_text(encoding="utf-8")


def serious_violations(page: Page) -> list[str]:
    """axe-core's serious and critical violations on the page as shown, one line each."""
    if not page.evaluate("() => 'axe' in window"):
        page.evaluate(_axe_source())  # evaluated over the debugging protocol: the page's CSP allows it
    found: list[str] = page.evaluate(
        """async () => {
          const result = await window.axe.run(document, { resultTypes: ["violations"] });
          return result.violations
            .filter((v) => v.impact === "serious" || v.impact === "critical")
            .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
        }"""
    )
    return found


def screenshot(page: Page, name: str) -> None:
    """Saved into CONSOLE_SCREENSHOTS when asked to (`make console-screenshots`)."""
    console_browser.Screens(page, os.environ.get("CONSOLE_SCREENSHOTS")).take(name)


def overflow(page: Page) -> int:
    """How many pixels the document is wider than the screen (0 when it fits)."""
    width: int = page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    return width


def settled(page: Page) -> None:
    """Wait until the page has drawn: its heading is shown and nothing is still loading (the
    overview's four reads may take more than expect's 5 s default when make test's e2e suite
    runs two local stacks on two cores)."""
    expect(page.get_by_role("heading", level=1)).to_be_visible()
    expect(page.locator("[aria-busy='true']")).to_have_count(0, timeout=20_000)


def squeezed(page: Page) -> list[str]:
    """What a narrow box has crushed: a value of a fact list (`dd`) or a card's content drawn
    less than three characters wide, or a short code (one word) cut over two lines."""
    found: list[str] = page.evaluate(
        """() => {
          const crushed = [...document.querySelectorAll("main dd, main .card > *")]
            .filter((e) => e.checkVisibility() && e.textContent.trim().length > 3)
            .filter((e) => e.getBoundingClientRect().width < 3 * parseFloat(getComputedStyle(e).fontSize))
            .map((e) => `crushed: ${e.textContent.trim().slice(0, 40)}`);
          const cut = [...document.querySelectorAll("main code")]
            .filter((e) => e.checkVisibility() && /^\\w{1,24}$/.test(e.textContent.trim()))
            .filter((e) => e.getClientRects().length > 1
              || e.getBoundingClientRect().height > 1.8 * parseFloat(getComputedStyle(e).fontSize))
            .map((e) => `cut: ${e.textContent.trim()}`);
          return [...crushed, ...cut];
        }"""
    )
    return found


def bare_tables(page: Page) -> int:
    """Tables shown on the page with headers but no row under them."""
    count: int = page.evaluate(
        """() => [...document.querySelectorAll("main table")]
          .filter((t) => t.checkVisibility() && !t.querySelector("tbody tr")).length"""
    )
    return count


# The console's pages: the path to open (a batch's page names the busy account's batch) and,
# for the ones a visitor sees, whether they need no session.
SIGNED_IN = {
    "overview": "/console/",
    "batches": "/console/batches",
    "new-batch": "/console/quotes",
    "schedules": "/console/schedules",
    "usage": "/console/usage",
    "billing": "/console/billing",
    "keys": "/console/keys",
    "settings": "/console/settings",
    "batch": "/console/batches/{batch_id}",
    "missing-batch": f"/console/batches/{MISSING_BATCH}",
    "not-found": "/console/no-such-page",
}
PUBLIC = {
    "sign-in": "/console/sign-in",
    "sign-up": "/console/sign-up",
    "forgot-password": "/console/forgot-password",
    "reset-password": "/console/reset-password?token=unknown",
}


@pytest.mark.parametrize("name", list(SIGNED_IN))
def test_a_signed_in_page_fits_the_screen_and_passes_axe(
    open_page: Opener, busy: Account, width: ViewportSize, name: str
) -> None:
    page = open_page(busy)
    page.goto(SIGNED_IN[name].format(batch_id=busy.batch_id))
    settled(page)
    if name == "batch":
        expect(page.get_by_role("heading", name="Routing receipt")).to_be_visible(timeout=30_000)
    if (name, width) in (("batch", PHONE), ("not-found", VIEWPORT)):
        screenshot(page, f"{name}-phone" if width == PHONE else name)
    assert overflow(page) <= 0, f"{name} is {overflow(page)}px wider than the screen"
    assert squeezed(page) == []
    assert serious_violations(page) == []


@pytest.mark.parametrize("name", list(PUBLIC))
def test_a_visitor_page_fits_the_screen_and_passes_axe(open_page: Opener, name: str) -> None:
    page = open_page()
    page.goto(PUBLIC[name])
    settled(page)
    assert overflow(page) <= 0, f"{name} is {overflow(page)}px wider than the screen"
    assert serious_violations(page) == []


def test_the_batch_page_shows_the_whole_batch_id(
    open_page: Opener, busy: Account, width: ViewportSize
) -> None:
    page = open_page(busy)
    page.goto(f"/console/batches/{busy.batch_id}")
    heading = page.get_by_role("heading", level=1)
    expect(heading).to_contain_text(busy.batch_id)
    box = heading.locator("code").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width["width"]


# What a fresh account sees on each page that lists things: the empty state's words.
EMPTY_STATES: dict[str, tuple[str, list[str]]] = {
    "overview": ("/console/", ["No batches yet.", "No alerts yet."]),
    "batches": ("/console/batches", ["No batches yet."]),
    "schedules": ("/console/schedules", ["No schedules yet."]),
    "usage": ("/console/usage", ["No usage yet this period."]),
    "billing": ("/console/billing", ["No top-ups yet.", "No changes yet."]),
    "keys": ("/console/keys", ["No API keys yet."]),
    "settings": ("/console/settings", ["No delivery targets yet."]),
}


@pytest.mark.parametrize("name", list(EMPTY_STATES))
def test_a_fresh_account_sees_empty_states_not_bare_headers(
    open_page: Opener, fresh: Account, width: ViewportSize, name: str
) -> None:
    page = open_page(fresh)
    path, messages = EMPTY_STATES[name]
    page.goto(path)
    settled(page)
    for message in messages:
        expect(page.get_by_text(message).first).to_be_visible()
    if (name, width) == ("overview", VIEWPORT):
        screenshot(page, "overview-empty")
    assert bare_tables(page) == 0
    assert overflow(page) <= 0
    assert serious_violations(page) == []


def test_a_batch_without_items_in_a_status_says_so(open_page: Opener, busy: Account) -> None:
    page = open_page(busy)
    page.goto(f"/console/batches/{busy.batch_id}")
    items = page.get_by_role("region", name="Items")
    expect(items.get_by_role("cell", name="q-2")).to_be_visible()  # the items have loaded
    page.get_by_label("Item status").select_option("pending")
    expect(items.get_by_text("No pending items.")).to_be_visible()
    expect(items.locator("table")).to_have_count(0)


# Where each page shows a time: the cells or facts that hold one.
TIMES: dict[str, tuple[str, Callable[[Page], Locator]]] = {
    "overview": (
        "/console/",
        lambda p: p.get_by_role("region", name="Recent batches").locator("tbody td:nth-child(4)"),
    ),
    "batches": ("/console/batches", lambda p: p.locator("main tbody td:nth-child(5)")),
    "batch": ("/console/batches/{batch_id}", lambda p: p.get_by_test_id("batch-created")),
    "keys": ("/console/keys", lambda p: p.locator("main tbody td:nth-child(4)")),
    "billing": (
        "/console/billing",
        lambda p: p.get_by_role("region", name="Audit log").locator("tbody td:nth-child(1)"),
    ),
}


@pytest.mark.parametrize("name", list(TIMES))
def test_times_carry_their_time_zone(open_page: Opener, busy: Account, name: str) -> None:
    page = open_page(busy)
    path, cells = TIMES[name]
    page.goto(path.format(batch_id=busy.batch_id))
    settled(page)
    found = cells(page)
    expect(found.first).to_be_visible()
    for text in found.all_inner_texts():
        assert ZONED.search(text.strip()), f"{name}: {text!r} has no time zone"


def test_times_are_shown_in_the_viewers_zone_and_say_which(open_page: Opener, busy: Account) -> None:
    page = open_page(busy, timezone_id="Asia/Tokyo")
    page.goto(f"/console/batches/{busy.batch_id}")
    expect(page.get_by_test_id("batch-created")).to_have_text(re.compile(r"GMT\+9$"))


def test_a_page_that_does_not_exist_links_back(open_page: Opener, busy: Account) -> None:
    page = open_page(busy)
    page.goto("/console/no-such-page")
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    page.get_by_role("main").get_by_role("link", name="Go to the overview").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def test_a_batch_that_does_not_exist_links_back(open_page: Opener, busy: Account) -> None:
    page = open_page(busy)
    page.goto(f"/console/batches/{MISSING_BATCH}")
    expect(page.get_by_role("heading", name="Batch not found")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("batch_not_found:")
    page.get_by_role("main").get_by_role("link", name="Back to batches").click()
    expect(page.get_by_role("heading", name="Batches")).to_be_visible()


def test_an_empty_paste_box_is_answered_next_to_it(open_page: Opener, fresh: Account) -> None:
    page = open_page(fresh)
    page.goto("/console/quotes")
    page.get_by_role("button", name="Get a free quote").click()
    box = page.get_by_label("Or paste JSONL")
    expect(box).to_have_attribute("aria-invalid", "true")
    expect(box).to_have_accessible_description(re.compile("Paste JSONL or upload a file"))
    expect(page.locator("#jsonl-text-error")).to_be_visible()
    # The console's message, not the browser's own tooltip
    assert page.evaluate("() => document.getElementById('jsonl-text').validationMessage") == ""
    # And the message goes once the box has something to quote
    box.fill("{}")
    expect(page.locator("#jsonl-text-error")).to_have_count(0)


def test_a_bad_pasted_line_is_named_once(open_page: Opener, fresh: Account) -> None:
    # Given a paste whose second line is not JSON
    page = open_page(fresh)
    page.goto("/console/quotes")
    line = {"customer_item_id": "a", "operation": "responses", "model": MODEL, "input": {"messages": []}}
    page.get_by_label("Or paste JSONL").fill(json.dumps(line) + "\n{not json\n")

    # When it is quoted
    page.get_by_role("button", name="Get a free quote").click()

    # Then the refusal names line 2 once (not again from the upload's own list)
    expect(page.get_by_role("alert")).to_be_visible()
    issues = page.locator("ul.issues li")
    expect(issues.filter(has_text="line 2:")).to_have_count(1)


def test_the_refusal_lists_its_issues_in_line_order(open_page: Opener, fresh: Account) -> None:
    # Given a paste whose line 3 has a field problem and whose line 2 asks for a hosted tool
    # no lane of its model runs (found by the model group's check, listed after by the API)
    page = open_page(fresh)
    page.goto("/console/quotes")
    tooled = {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "web_search"}]}
    lines = [
        {"customer_item_id": "a", "operation": "responses", "model": MODEL, "input": tooled},
        {"customer_item_id": "b", "operation": "responses", "model": MODEL, "input": {"messages": []}},
    ]
    page.get_by_label("Or paste JSONL").fill("\n" + "\n".join(json.dumps(line) for line in lines))
    # When it is quoted
    page.get_by_role("button", name="Get a free quote").click()
    # Then the issues read top to bottom as the lines do
    issues = page.locator("ul.issues li")
    expect(issues.first).to_contain_text("line 2:")
    expect(issues.last).to_contain_text("line 3:")


def test_a_warning_about_one_item_names_its_line(open_page: Opener, fresh: Account) -> None:
    # Given a paste whose second line holds an item too long for the model's edge lanes
    # (32,768-token windows) but not for its others: a warning, found by the group's check
    page = open_page(fresh)
    page.goto("/console/quotes")
    long = {"messages": [{"role": "user", "content": "word " * 40_000}]}
    short = {"messages": [{"role": "user", "content": "hi"}]}
    lines = [
        {"customer_item_id": "a", "operation": "responses", "model": MODEL, "input": short},
        {"customer_item_id": "b", "operation": "responses", "model": MODEL, "input": long},
    ]
    page.get_by_label("Or paste JSONL").fill("\n".join(json.dumps(line) for line in lines))
    # When it is quoted
    page.get_by_role("button", name="Get a free quote").click()
    # Then the warning names the line of the item it is about
    warnings = page.get_by_test_id("quote-warnings")
    expect(warnings).to_contain_text("line 2: context_window_lanes_excluded")


def test_the_usage_axis_labels_each_tick_differently(open_page: Opener, busy: Account) -> None:
    # Given an account whose spend is a few cents, drawn per day
    page = open_page(busy)
    page.goto("/console/usage")
    ticks = page.locator(".recharts-cartesian-axis-tick-value[orientation='left']")
    expect(ticks.first).to_be_visible()

    # Then no two gridlines read the same, and every label has as many decimals as the others
    labels = [text.strip() for text in ticks.all_text_contents()]
    assert len(labels) >= 2 and len(set(labels)) == len(labels), labels
    assert len({len(label.partition(".")[2]) for label in labels}) == 1, labels


def test_the_fee_explanation_starts_on_its_own_line(open_page: Opener, busy: Account) -> None:
    page = open_page(busy)
    page.goto(f"/console/batches/{busy.batch_id}")
    basis = page.get_by_test_id("fee-basis")
    expect(basis).to_be_visible(timeout=30_000)
    amount_box = page.get_by_test_id("settled-price").bounding_box()
    fee = basis.locator("xpath=..")
    fee_box, basis_box = fee.bounding_box(), basis.bounding_box()
    assert amount_box is not None and fee_box is not None and basis_box is not None
    # the explanation's first line is below the amount's line, not run into it
    assert basis_box["y"] >= fee_box["y"] + 0.8 * amount_box["height"], (fee_box, basis_box)


def test_the_payment_page_looks_like_the_console(
    open_page: Opener, fresh: Account, width: ViewportSize
) -> None:
    page = open_page(fresh)
    started = page.request.post("/v1/billing/checkout", data={"amount": "12"})
    assert started.ok, started.text()
    page.goto(started.json()["checkout_url"])
    expect(page.get_by_role("heading", level=1)).to_contain_text("12.00 USD")
    # The console's typeface, page colour and primary button (console/src/styles.css)
    styles = page.evaluate(
        """() => {
          const body = getComputedStyle(document.body);
          const pay = getComputedStyle(document.querySelector('button[type=submit]'));
          const root = getComputedStyle(document.documentElement);
          return [root.backgroundColor, body.fontFamily, pay.backgroundColor];
        }"""
    )
    assert styles == ["rgb(246, 247, 249)", styles[1], "rgb(11, 87, 208)"]
    assert styles[1].startswith("system-ui")
    expect(page.get_by_role("radio").first).to_be_checked()
    if width == VIEWPORT:
        screenshot(page, "checkout")
    assert overflow(page) <= 0
    assert serious_violations(page) == []
