"""Money in the console (docs/money.md), in a real browser at 390 px and 1280 px against the
local stack: amounts read by the one rule (cents, two significant figures under a cent,
never an exponent), a money field takes plain decimals only and says so (the API refuses
"1e3" too), and the routing receipt shows the fee schedule line behind its service fee,
why a lane at the same price lost and what routing saved (also on the overview). The
console's formatter (console/src/format.ts) is held to the table the service's and the
CLI's formatters are tested against."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from decimal import Decimal
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, ViewportSize, expect

from batchroute.money import money_text
from tests.e2e.local_stack import REPO
from tests.e2e.test_console_browser import (
    BATCH_TIMEOUT_MS,
    PASSWORD,
    PHONE,
    VIEWPORT,
    _jsonl,
    browser,
    nav,
    page,
)

pytestmark = pytest.mark.e2e

__all__ = ["browser", "page"]  # the fixtures of test_console_browser.py

WIDTHS: dict[str, ViewportSize] = {"phone": PHONE, "desktop": VIEWPORT}
FIXTURE = REPO / "tests" / "fixtures" / "money_format.json"
# An amount as docs/money.md shows it: cents (thousands grouped), or under a cent at most
# 6 decimals ending in its (up to) two significant digits.
SHOWN = re.compile(r"^-?(\d{1,3}(,\d{3})*\.\d{2}|0\.00(?=\d{1,4} )0*[1-9]\d?) [A-Z]{3}$")
AMOUNT = re.compile(r"-?[\d,]*\.?\d+(?:[eE][+-]?\d+)? USD")
SMALL_MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture(params=list(WIDTHS), ids=list(WIDTHS))
def sized(request: pytest.FixtureRequest, page: Page) -> Page:
    """The console's page (test_console_browser.py) at 390 px, then at 1280 px."""
    page.set_viewport_size(WIDTHS[request.param])
    return page


def signed_in(page: Page, prefix: str) -> None:
    """A new owner, signed in (the page's request context shares the browser's cookies)."""
    address = f"{prefix}-{uuid.uuid4().hex[:10]}@example.com"
    assert page.request.post("/v1/auth/register", data={"email": address, "password": PASSWORD}).ok
    assert page.request.post("/v1/auth/login", data={"email": address, "password": PASSWORD}).ok


def amounts_in(region: Locator) -> list[str]:
    return AMOUNT.findall(region.inner_text())


def settled_receipt(page: Page, rows: list[dict[str, Any]]) -> tuple[str, Locator]:
    """A new batch of `rows`: its id, and its page's routing receipt once it is settled."""
    created = page.request.post(
        "/v1/batches", data={"items": rows}, headers={"Idempotency-Key": f"money-{uuid.uuid4().hex}"}
    )
    assert created.status == 202, created.text()
    batch_id = str(created.json()["batch"]["id"])
    page.goto(f"/console/batches/{batch_id}")
    expect(page.get_by_test_id("batch-state")).to_have_text("completed", timeout=BATCH_TIMEOUT_MS)
    receipt = page.get_by_role("region", name="Routing receipt")
    expect(receipt).to_be_visible(timeout=30_000)
    return batch_id, receipt


# Loads console/src/format.ts (argv: typescript, the source, then `args`) as `f`.
LOAD_FORMAT_TS = """
const [typescript, source, ...args] = process.argv.slice(1);
const ts = require(typescript), fs = require("fs"), vm = require("vm");
const js = ts.transpileModule(fs.readFileSync(source, "utf8"), {
  compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 },
}).outputText;
const loaded = { exports: {} };
vm.runInNewContext(js, { module: loaded, exports: loaded.exports, require });
const f = loaded.exports;
"""


def run_format_ts(expression: str, *args: str) -> Any:
    """The JSON value of `expression` (JavaScript: `f` is the module's exports, `args` the
    extra arguments) against the console's own format.ts, compiled as the build compiles it."""
    node = shutil.which("node")
    typescript = REPO / "console" / "node_modules" / "typescript"
    assert node and typescript.is_dir(), "the console's toolchain is missing: `make console`"
    script = LOAD_FORMAT_TS + f"console.log(JSON.stringify({expression}));\n"
    source = REPO / "console" / "src" / "format.ts"
    ran = subprocess.run(
        [node, "-e", script, str(typescript), str(source), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(ran.stdout)


def test_the_console_formatter_reads_the_shared_table_like_the_service_and_the_cli() -> None:
    # Given the console's own format.ts, compiled as the build compiles it (TypeScript)
    expression = """(() => {
  const cases = JSON.parse(fs.readFileSync(args[0], "utf8")).cases;
  const typed = ["1e3", "1000", "12.50", "1,000", "-5", "5.", "1.1234567"];
  return {
    shown: cases.map((c) => f.moneyText(c.amount, c.currency)),
    refused: typed.map((t) => f.plainDecimalProblem(t, 6) ?? null),
  };
})()"""
    answer = run_format_ts(expression, str(FIXTURE))
    # Then every amount of the table reads as it does in the service and the CLI
    cases = json.loads(FIXTURE.read_text(encoding="utf-8"))["cases"]
    assert answer["shown"] == [case["text"] for case in cases]
    # And typed amounts are plain decimals only, saying so
    refused = answer["refused"]
    assert [message is None for message in refused] == [False, True, True, False, False, False, False]
    assert "Plain decimals only, like 1000 or 12.50" in refused[0]


def test_the_console_shows_the_prompt_cache_split_only_when_there_is_one() -> None:
    # Given the console's formatter of a lane's (or a period's) prompt-cache split
    shown = run_format_ts(
        """[
  f.cacheSplitText({ cachedRead: 3000, cacheWrite: 200, cachedReadPrice: "0.0375", cacheWritePrice: "1.00" }),
  f.cacheSplitText({ cachedRead: 1920, cacheWrite: 0, cachedReadPrice: "0.075" }),
  f.cacheSplitText({ cachedRead: 512 }),
  f.cacheSplitText({ cachedRead: 0, cacheWrite: null }),
  f.cacheSplitText({}),
]"""
    )
    # Then each kind reads with its exact rate (a rate, not an amount: docs/money.md), and
    # nothing at all when the vendor reported no cache use
    assert shown == [
        "3000 cached read at 0.0375 USD per million tokens · 200 cache write at 1.00 USD per million tokens",
        "1920 cached read at 0.075 USD per million tokens",
        "512 cached read",
        "",
        "",
    ]


def test_a_limit_typed_as_1e3_is_refused_saying_plain_decimals_only(sized: Page) -> None:
    page = sized
    signed_in(page, "money-limit")
    # Given the overview: the signup credit by the money rule
    page.goto("/console/")
    expect(page.get_by_test_id("available")).to_have_text("25.00 USD")
    nav(page, "Billing")
    limit = page.get_by_label("Limit (USD)")
    # And every money field says what it takes
    expect(limit).to_have_accessible_description(re.compile("A plain decimal, like 1000 or 12.50"))
    expect(page.get_by_label("Amount (USD, 5 to 10,000)")).to_have_accessible_description(
        re.compile("A plain decimal")
    )
    # When a limit is typed as "1e3"
    page.get_by_label("Limit spending").check()
    limit.fill("1e3")
    page.get_by_role("button", name="Save spending controls").click()
    # Then it is refused under the field, saying plain decimals only, and nothing is saved
    field_error = page.locator("#limit-amount-error")
    expect(field_error).to_contain_text("Plain decimals only, like 1000 or 12.50")
    expect(field_error).to_contain_text("1e3")
    expect(limit).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_text("Spending controls saved.")).to_have_count(0)
    stored = page.request.get("/v1/billing/controls").json()["controls"]
    assert stored["limit_amount"] is None
    # And the API refuses the same text itself, in the money format's words
    refused = page.request.put(
        "/v1/billing/controls",
        data={"limit_enabled": True, "limit_period": "monthly", "limit_amount": "1e3"},
    )
    assert refused.status == 400
    error = refused.json()["error"]
    assert error["details"]["field"] == "limit_amount"
    assert "plain decimal number of USD dollars, like 1000 or 12.50" in error["message"]
    # When it is typed as a plain decimal, it saves and reads back by the rule
    limit.fill("1000")
    page.get_by_role("button", name="Save spending controls").click()
    expect(page.get_by_text("Spending controls saved.")).to_be_visible()
    expect(field_error).to_have_count(0)
    nav(page, "Overview")
    expect(page.get_by_text(re.compile(r"limit of 1,000\.00 USD per month"))).to_be_visible()
    # And a purchase outside 5..10,000 is refused with its bounds by the rule, not "1E+4"
    nav(page, "Billing")
    page.get_by_label("Amount (USD, 5 to 10,000)").fill("20000")
    page.get_by_role("button", name="Continue to payment").click()
    expect(page.locator("#buy-amount-error")).to_contain_text("between 5.00 USD and 10,000.00 USD")
    for shown in amounts_in(page.get_by_role("main")):
        assert SHOWN.match(shown), shown


def test_the_receipt_shows_the_fee_schedule_line_and_why_a_lane_at_the_same_price_lost(sized: Page) -> None:
    page = sized
    signed_in(page, "money-receipt")
    # Given a small batch on a model two edge lanes serve at the same price (Llama 3.1 8B,
    # whose edge capacity the cancel tests' 2,500-item batches on Llama 3.3 70B leave alone)
    rows = [{**json.loads(line), "model": SMALL_MODEL} for line in _jsonl(2).splitlines()]
    # When its page shows the settled receipt
    batch_id, receipt = settled_receipt(page, rows)
    # Then the service fee carries the schedule line behind it
    basis = page.get_by_test_id("fee-basis")
    expect(basis).to_have_text(
        re.compile(r"^Service fee [\d.,]+ USD: the [\d.]+% standard batch fee of the provider subtotal")
    )
    expect(basis).to_contain_text("for each lane that delivered answers (1 lane)")
    # And the lane at the same price says what decided, not only "outranked"
    rejected = page.get_by_test_id("rejected-lanes")
    same_price = rejected.get_by_role("row").filter(has_text="same price")
    expect(same_price.first).to_contain_text("outranked")
    expect(same_price.first).to_contain_text(re.compile("comes first by lane id|is more reliable"))
    # And what routing saved is shown as the API says: the charge beside the same tokens at
    # the reference vendor's list and batch prices (docs/routing.md)
    savings = page.request.get(f"/v1/batches/{batch_id}/billing-receipt").json()["savings"]
    shown_as = {"saved-vs-list": "saved_vs_list_price", "saved-vs-batch": "saved_vs_batch_price"}
    for test_id, field in shown_as.items():
        expect(receipt.get_by_test_id(test_id)).to_have_text(money_text(Decimal(savings[field]["amount"])))
    expect(receipt.get_by_test_id("savings")).to_contain_text(
        money_text(Decimal(savings["charged"]["amount"]))
    )
    # And every amount on the receipt reads by the rule
    shown = amounts_in(receipt)
    assert shown and all(SHOWN.match(amount) for amount in shown), shown
    # And the overview shows the period's savings, as GET /v1/usage says
    period = page.request.get("/v1/usage").json()["current_period"]["savings"]
    nav(page, "Overview")
    expect(page.get_by_test_id("period-saved")).to_have_text(
        money_text(Decimal(period["saved_vs_list_price"]["amount"]))
    )


def test_the_receipt_and_usage_show_the_input_the_vendor_read_from_its_prompt_cache(sized: Page) -> None:
    page = sized
    signed_in(page, "money-cache")
    # Given a batch on gpt-4o-mini whose items share a long first message: the OpenAI emulator
    # reads a live prefix of 1,024 tokens or more from its cache, as OpenAI does
    # (docs/emulators.md, "Prompt caching"), so the items after the first report cached input
    shared = " ".join(["Answer as the routing handbook of this batch says, briefly and exactly."] * 200)
    rows = [
        {
            "customer_item_id": f"cached-{n}",
            "operation": "responses",
            "model": "gpt-4o-mini",
            "input": {
                "messages": [
                    {"role": "system", "content": shared},
                    {"role": "user", "content": f"Question {n}: what is routing?"},
                ]
            },
        }
        for n in range(3)
    ]
    # When its page shows the settled receipt
    batch_id, receipt = settled_receipt(page, rows)
    # Then the lane says how much of its input was read from the cache, at the locked rate
    read = page.request.get(f"/v1/batches/{batch_id}", params={"include_billing_receipt": "true"})
    (lane,) = read.json()["billing_receipt"]["provider_lanes"]
    cached = lane["usage"]["cached_input_tokens"]
    price = lane["unit_prices"]["cached_input_per_mtok"]
    assert 0 < cached < lane["usage"]["prompt_tokens"]
    expect(receipt.get_by_test_id("lane-cache")).to_have_text(
        f"of the input: {cached} cached read at {price} USD per million tokens"
    )
    # And the amounts on the receipt still read by the money rule (a rate is not an amount)
    shown = amounts_in(receipt)
    rate = f"{price} USD"
    assert shown and all(SHOWN.match(amount) or amount == rate for amount in shown), shown
    # And the usage page counts the same cached input for the period and for the model
    nav(page, "Usage")
    split = f"of the input: {cached} cached read"
    expect(page.get_by_test_id("tokens-cache").first).to_contain_text(split)
    by_model = page.get_by_role("row", name=re.compile("gpt-4o-mini"))
    expect(by_model.get_by_test_id("tokens-cache")).to_contain_text(split)


def test_the_receipt_shows_the_hosted_tool_calls_each_lane_made(sized: Page) -> None:
    page = sized
    signed_in(page, "money-tools")
    # Given a batch of two items that ask for web search on Claude: the Anthropic emulator runs
    # one search for each, as its Messages API reports (`server_tool_use.web_search_requests`)
    rows = [
        {
            "customer_item_id": f"search-{n}",
            "operation": "responses",
            "model": "claude-sonnet-4",
            "input": {
                "messages": [{"role": "user", "content": f"Search the news, question {n}"}],
                "tools": [{"type": "web_search"}],
            },
        }
        for n in range(2)
    ]
    # When its page shows the settled receipt
    batch_id, receipt = settled_receipt(page, rows)
    # Then the lane shows its two searches beside its tokens at the locked price per 1,000
    # calls, as the API's receipt counts and charges them (two searches at 10.00 USD per
    # 1,000 are 0.02 USD of the lane's cost)
    read = page.request.get(f"/v1/batches/{batch_id}", params={"include_billing_receipt": "true"})
    (lane,) = read.json()["billing_receipt"]["provider_lanes"]
    assert lane["usage"]["tool_uses"] == {"web_search": 2}
    assert lane["unit_prices"]["web_search_per_1k_calls"] == "10.00"
    assert Decimal(lane["cost"]["amount"]) > Decimal("0.02")
    expect(receipt.get_by_test_id("lane-tools")).to_have_text(
        "hosted tool calls: web_search 2 at 10.00 USD per 1,000 calls"
    )
