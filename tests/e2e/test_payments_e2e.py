"""Buying credits as `make run` serves it: a signed-in user opens a checkout, pays on the payment
emulator's hosted page with a test card, is sent back to the console, and the processor's
signed webhook (posted by the emulator to the running API) credits the wallet once and saves
the card for auto top-up (docs/payments.md)."""

from __future__ import annotations

import email
import email.policy
import re
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.e2e.local_stack import RunningStack

pytestmark = pytest.mark.e2e

PASSWORD = "correct horse battery"


def _verification_link(outbox: Path, address: str) -> str:
    for path in sorted(outbox.glob("*.eml"), reverse=True):
        message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
        if message["To"] == address:
            text = message.get_content()  # type: ignore[attr-defined]
            return next(line.strip() for line in text.splitlines() if "/v1/auth/verify-email?token=" in line)
    raise AssertionError(f"no verification email for {address} in {outbox}")


def _balance(api: httpx.Client, key: dict[str, str]) -> str:
    amount: str = api.get("/v1/auth/account", headers=key).json()["credit_balance"]["amount"]
    return amount


def test_a_user_buys_credits_through_the_hosted_checkout(
    local_stack: RunningStack, api: httpx.Client
) -> None:
    # Given a registered, verified owner with the local signup credit
    address = f"buyer-{uuid.uuid4().hex[:10]}@example.com"
    agent = api.post("/v1/auth/agent-register", json={"email": address, "password": PASSWORD}).json()
    key = {"Authorization": f"Bearer {agent['api_key']}"}
    link = urlsplit(_verification_link(local_stack.stack_file.parent / "outbox", address))
    api.get(f"{link.path}?{link.query}")
    assert _balance(api, key) == "25.00"

    with httpx.Client(base_url=local_stack.base_url, timeout=10) as browser:
        assert (
            browser.post("/v1/auth/login", json={"email": address, "password": PASSWORD}).status_code == 200
        )
        # When the dashboard opens a checkout for 40 USD (a key may not)
        assert api.post("/v1/billing/checkout", json={"amount": 40}, headers=key).status_code == 403
        opened = browser.post("/v1/billing/checkout", json={"amount": 40})
        assert opened.status_code == 200, opened.text
        checkout = opened.json()
        # And the user pays on the hosted page with the test card
        page = httpx.get(checkout["checkout_url"], timeout=10)
        assert page.status_code == 200 and "40.00 USD" in page.text
        action = re.search(r'<form method="post" action="([^"]+)"', page.text)
        assert action is not None
        paid = httpx.post(
            urlsplit(checkout["checkout_url"])._replace(path=action.group(1)).geturl(),
            data={"card": "4242424242424242"},
            timeout=10,
        )
        # Then the user is sent back to the console's billing page
        assert paid.status_code == 303
        assert paid.headers["location"] == (
            f"{local_stack.base_url}/console/billing?checkout=success&session_id={checkout['session_id']}"
        )

    # And the processor's webhook credits the wallet, once
    deadline = time.monotonic() + 15
    while _balance(api, key) != "65.00" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _balance(api, key) == "65.00", local_stack.log_tail()
    time.sleep(1.0)  # a repeated delivery would land by now
    assert _balance(api, key) == "65.00"
    # And the card is saved for auto top-up
    settings = api.get("/v1/billing/auto-topup", headers=key).json()["auto_topup"]
    assert settings["payment_method"] == {"brand": "visa", "last4": "4242"}
