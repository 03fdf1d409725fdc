"""The one money format (docs/money.md): the service's formatter (error messages) and the
client's (CLI, SDK) read every amount of the shared table the same way; the console's
(console/src/format.ts) is held to the same table in tests/e2e/test_console_money.py."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from batchroute_client.models import Money as ClientMoney
from batchroute_client.money import money_text as client_money_text

from batchroute.money import Money, money_text

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "money_format.json").read_text(encoding="utf-8")
)["cases"]


@pytest.mark.parametrize("case", CASES, ids=[f"{c['amount']} {c['currency']}" for c in CASES])
def test_the_service_and_the_client_read_each_amount_the_same_way(case: dict[str, Any]) -> None:
    assert money_text(Decimal(case["amount"]), case["currency"]) == case["text"]
    assert client_money_text(case["amount"], case["currency"]) == case["text"]
    assert "E" not in case["text"].removesuffix(" " + case["currency"].upper())


def test_money_reads_as_its_amount_and_currency() -> None:
    assert money_text(Money.usd("124.954749")) == "124.95 USD"
    assert money_text(Money.usd("0.000001")) == "0.000001 USD"
    assert ClientMoney(currency="usd", amount="0.02149").text == "0.02 USD"


def test_text_that_is_not_an_amount_is_shown_as_sent() -> None:
    assert client_money_text("n/a", "usd") == "n/a USD"
    assert client_money_text("NaN", "usd") == "NaN USD"
