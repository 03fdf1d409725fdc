"""A quote locks the fee schedule too (the spec: a quote is a price-locked snapshot): a fee change
deployed between a batch's quote (or its create) and its Settle does not reprice it. The batch
keeps the schedule its price was locked with (its quote's; an internal quote's at create) on
its PLAN item, and Settle charges with it (docs/batches.md, Settle)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.catalog import builtin_catalog
from batchroute.config import get_settings
from batchroute.domain.billing.settlement import charged_usage
from batchroute.domain.catalog.catalog import FeeSchedule
from batchroute.domain.catalog.pricing import price_usage
from batchroute_tools.local.provision import LocalStack
from tests.integration.batch_pipeline_support import item, run_workflow
from tests.integration.principals import TestOrg
from tests.integration.principals import org as org  # the fixtures
from tests.integration.principals import pipeline_client as pipeline_client
from tests.integration.principals import pipeline_stack as pipeline_stack

TEXT = "Summarise this paragraph about logistics and shipping routes in detail. " * 20


@pytest.fixture
def raise_fees_later() -> Iterator[Any]:
    """`raise_fees()` deploys a fee schedule with the standard batch fee at 20%; undone after."""
    catalog = builtin_catalog()
    quoted = catalog.fees

    def raise_fees() -> FeeSchedule:
        object.__setattr__(catalog, "fees", replace(quoted, standard_batch_fee_pct=Decimal("20")))
        return quoted

    yield raise_fees
    object.__setattr__(catalog, "fees", quoted)


@pytest.mark.parametrize("from_quote", [True, False], ids=["from-a-quote", "internal-quote"])
def test_a_fee_change_deployed_before_settle_does_not_reprice_the_batch(
    client: TestClient, org: TestOrg, stack: LocalStack, raise_fees_later: Any, from_quote: bool
) -> None:
    headers = org.key_headers()
    items = [item(n, text=TEXT) for n in range(20)]
    body: dict[str, Any] = {"items": items}
    if from_quote:
        quote = client.post("/v1/quotes/model", json=body, headers=headers)
        assert quote.status_code == 200, quote.text
        body["quote_id"] = quote.json()["quote_id"]
    created = client.post(
        "/v1/batches", json=body, headers={**headers, "Idempotency-Key": f"fee-lock-{from_quote}"}
    )
    assert created.status_code == 202, created.text
    batch_id = created.json()["batch"]["id"]
    # When a deploy raises the standard batch fee while the batch runs
    quoted = raise_fees_later()
    assert run_workflow(stack, batch_id)["status"] == "SUCCEEDED"
    # Then it is charged at the schedule its price was locked with, and its receipt says so
    records = BatchRecords(get_settings().table_name("batches"))
    batch = records.get(batch_id)
    assert batch is not None and batch.fees == quoted and batch.lane_tallies is not None
    expected = price_usage(charged_usage(records.lanes(batch_id), batch.lane_tallies), quoted)
    receipt = client.get(f"/v1/batches/{batch_id}/billing-receipt", headers=headers).json()
    assert Decimal(receipt["service_fee_basis"]["fee_pct"]) == quoted.standard_batch_fee_pct
    assert receipt["service_fee"] == expected.service_fee.to_api()
    assert receipt["credit_charged"] == expected.total.to_api()
