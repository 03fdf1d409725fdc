"""Deadline rescue on the local stack (issue 31.1; docs/batches.md, "Deadline rescue"): a
batch whose vendor-batch lane the emulator holds back is rescued onto a sync lane and
completes before its deadline, with the receipt's `rescues`, the `batch.rescue_started`
webhook and the ledger showing it, all over HTTP.

The stack is started as `make run` starts it, with two documented local knobs:
`RESCUE_MIN_OBSERVATION_SECONDS` (a lane is judged after a few seconds, not 10 minutes) and
`SIMULATED_STUCK_BATCH_PERCENT=0` (the held-back job has answered nothing, so it has no finish
in sight: on the real clock a job at 40 % after seconds would project a finish well inside the
24 h deadline). The batch is placed with what the product offers: the org's route policy
allows `together` (a vendor batch API) and `fireworks` (sync); `together` is cheaper, so it
takes the model and `fireworks` stays eligible, `outranked`, the rescue's candidate.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from batchroute.money import money_text
from tests.e2e.local_stack import RunningStack, api_client, running_stack
from tests.e2e.test_batches_e2e import (  # noqa: F401  (receiver: a fixture)
    SECRET,
    TERMINAL,
    Receiver,
    _agent_key,
    _amount,
    _balance,
    _verify,
    receiver,
)
from tests.e2e.test_batches_e2e import _item as batch_item
from tests.e2e.test_console_browser import VIEWPORT, browser
from tests.e2e.test_console_money import settled_receipt, signed_in

pytestmark = pytest.mark.e2e

__all__ = ["browser"]  # the fixture of test_console_browser.py

POLICY = {"provider_allow": ["together", "fireworks"]}  # a vendor batch API and a sync host
LLAMA_70B = "meta-llama/Llama-3.3-70B-Instruct"  # together (batch API) and fireworks (sync)
QWEN = "Qwen/Qwen2.5-72B-Instruct"  # together (batch API): finishes fast, under its estimate
OBSERVATION_SECONDS = 6
TIMEOUT_SECONDS = 60.0
POLL_SECONDS = 0.25
STUCK = "[simulate:stuck_batch]"


@pytest.fixture(scope="module")
def rescue_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    knobs = {"RESCUE_MIN_OBSERVATION_SECONDS": str(OBSERVATION_SECONDS), "SIMULATED_STUCK_BATCH_PERCENT": "0"}
    with running_stack(tmp_path_factory.mktemp("rescue-stack"), knobs) as stack:
        yield stack


@pytest.fixture
def api(rescue_stack: RunningStack) -> Iterator[httpx.Client]:
    """This module's own stack (the knobs above), not the suite's."""
    with api_client(rescue_stack) as client:
        yield client


def _item(n: int, model: str, text: str, max_output_tokens: int) -> dict[str, Any]:
    return {**batch_item(n, model, text), "max_output_tokens": max_output_tokens}


def _items() -> list[dict[str, Any]]:
    """Three items of the model the emulator holds back (one carries the marker: its whole
    job is stuck), and two of another model whose lane answers at once, well under the
    quote's estimate (a large max_output_tokens): what they leave unspent is the headroom
    that pays the dearer sync lane (within_reservation, the default)."""
    held = [_item(n, LLAMA_70B, f"Question {n}." + (f" {STUCK}" if n == 0 else ""), 16) for n in range(3)]
    quick = [_item(n, QWEN, f"Question {n}.", 4000) for n in range(3, 5)]
    return held + quick


def _wait(api: httpx.Client, key: dict[str, str], batch_id: str, started: float) -> dict[str, Any]:
    while True:
        response = api.get(f"/v1/batches/{batch_id}", headers=key)
        assert response.status_code == 200, response.text
        batch: dict[str, Any] = response.json()["batch"]
        if batch["state"] in TERMINAL and batch["settled_at"]:
            return batch
        assert time.monotonic() - started < TIMEOUT_SECONDS, f"not settled in {TIMEOUT_SECONDS}s: {batch}"
        time.sleep(POLL_SECONDS)


def test_a_held_back_vendor_batch_lane_is_rescued_onto_a_sync_lane_before_the_deadline(
    api: httpx.Client,
    receiver: Receiver,  # noqa: F811  (the fixture imported above)
    rescue_stack: RunningStack,
) -> None:
    key = _agent_key(api, "rescue")
    # Given an org whose route policy allows a vendor batch API and a sync host only
    policy = api.put("/v1/routing/policy", json=POLICY, headers=key)
    assert policy.status_code == 200, policy.text
    before = _balance(api, key)
    # And a batch the quote places on the vendor batch lane, the sync lane outranked
    created = api.post(
        "/v1/batches",
        json={"items": _items(), "webhook": {"url": receiver.url, "secret": SECRET}},
        headers={**key, "Idempotency-Key": f"e2e-{uuid.uuid4().hex}"},
    )
    assert created.status_code == 202, created.text
    batch_id = created.json()["batch"]["id"]
    started = time.monotonic()

    # When the emulator holds the vendor job back: the lane is judged after a few seconds
    batch = _wait(api, key, batch_id, started)
    elapsed = time.monotonic() - started
    print(f"\nrescued batch: created -> {batch['state']} in {elapsed:.1f}s")

    # Then the batch completed before its deadline, every item answered once
    assert batch["state"] == "completed", (batch, rescue_stack.log_tail())
    assert batch["completed_at"] < batch["deadline_at"]
    assert batch["counts"]["completed"] == 5 and batch["counts"]["failed"] == 0
    rows = api.get(f"/v1/batches/{batch_id}/results", headers=key).json()["data"]
    assert [r["customer_item_id"] for r in rows] == [f"item-{n}" for n in range(5)]
    assert {r["status"] for r in rows} == {"completed"}
    # And the held-back lane handed its items to the sync lane
    detail = api.get(
        f"/v1/batches/{batch_id}", params={"include_billing_receipt": "true"}, headers=key
    ).json()
    lanes = {lane["lane_key"]: lane for lane in detail["batch"]["lane_statuses"]}
    [old] = [lane for lane in lanes.values() if lane["model"] == LLAMA_70B and lane["provider"] == "together"]
    [rescue] = [lane for lane in lanes.values() if lane["provider"] == "fireworks"]
    assert old["status"] == "failed" and old["latest_error"].startswith("deadline rescue:"), old
    assert rescue["status"] == "completed" and rescue["failover_from"] == old["lane_key"], rescue

    # And the receipt lists the rescue: the lane, where from, why, its items and cost difference
    bill = api.get(f"/v1/batches/{batch_id}/billing-receipt", headers=key).json()
    assert detail["billing_receipt"] == bill
    [rescued] = bill["rescues"]
    assert rescued["lane_key"] == rescue["lane_key"] and rescued["provider"] == "fireworks"
    assert rescued["from_lane_key"] == old["lane_key"] and rescued["reason"] == "deadline_rescue"
    assert rescued["item_counts"] == {"completed": 3, "failed": 0, "canceled": 0}
    cost, quoted, difference = (
        _amount(rescued[k]) for k in ("cost", "cost_at_quoted_prices", "cost_difference")
    )
    assert difference == cost - quoted and cost > quoted > 0  # the sync lane costs more
    rejected = {lane["provider"]: lane["rejection"]["code"] for lane in bill["rejected_lanes"]}
    assert rejected.get("fireworks") == "outranked"

    # And the ledger is exact: reserved = charged + released, the balance moved by the charge
    reserved, charged, released = (
        _amount(bill[k]) for k in ("credit_reserved", "credit_charged", "credit_released")
    )
    assert reserved == charged + released and charged > 0
    assert _amount(bill["absorbed"]) == Decimal(0)
    assert _balance(api, key) == before - charged

    # And the customer was told: a signed batch.rescue_started event
    delivery = receiver.wait_for(lambda d: b"batch.rescue_started" in d.body, TIMEOUT_SECONDS)
    assert delivery.headers["x-service-event"] == "batch.rescue_started"
    assert _verify(SECRET, delivery)
    event = json.loads(delivery.body)
    assert event["batch"]["id"] == batch_id
    assert event["rescue"]["lane_key"] == rescue["lane_key"]
    assert event["rescue"]["from_lane_key"] == old["lane_key"] and event["rescue"]["items"] == 3


@pytest.fixture
def console_page(browser: Browser, rescue_stack: RunningStack) -> Iterator[Page]:
    """A browser page on this module's stack (the console it serves: `make console` built it)."""
    context = browser.new_context(viewport=VIEWPORT, base_url=rescue_stack.base_url)
    context.set_default_timeout(20_000)
    try:
        yield context.new_page()
    finally:
        context.close()


def test_the_console_shows_the_rescue_on_the_batch_receipt(console_page: Page) -> None:
    page = console_page
    # Given a signed-in owner whose route policy places the batch on the vendor batch lane
    signed_in(page, "rescue-console")
    assert page.request.put("/v1/routing/policy", data=POLICY).ok
    # When a batch the emulator holds back is rescued, and its page is opened (once settled)
    batch_id, receipt = settled_receipt(page, _items())
    # Then the receipt's rescue table shows the lane, where from, why, its items and money
    [rescued] = page.request.get(f"/v1/batches/{batch_id}/billing-receipt").json()["rescues"]
    table = receipt.get_by_test_id("rescues")
    expect(receipt.get_by_role("heading", name="Deadline rescue")).to_be_visible()
    row = table.locator("tbody tr")
    expect(row).to_have_count(1)
    for text in ("fireworks", rescued["lane_key"], rescued["from_lane_key"], "deadline_rescue", "3 / 0 / 0"):
        expect(row).to_contain_text(text)
    expect(row.get_by_test_id("rescue-cost")).to_have_text(money_text(_amount(rescued["cost"])))
    expect(row.get_by_test_id("rescue-difference")).to_have_text(
        money_text(_amount(rescued["cost_difference"]))
    )
    expect(row).to_contain_text(money_text(_amount(rescued["cost_at_quoted_prices"])))
