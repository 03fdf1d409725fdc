"""Settlement math and the billing receipt: completed usage at locked prices, credits that add up."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from batchroute.adapters.dynamo.lane_records import lane_from_item
from batchroute.catalog import builtin_catalog
from batchroute.domain.billing.ledger import Reservation, SettlementResult, resolve
from batchroute.domain.billing.settlement import (
    ReceiptCredits,
    build_receipt,
    charged_usage,
    provider_lanes,
    rejected_lanes,
)
from batchroute.domain.catalog.pricing import price_usage
from batchroute.domain.routing.lane_plan import LaneRecord
from batchroute.money import Money, money_text

PLAN = {
    "groups": [
        {
            "model": "m",
            "selected_lanes": [{"lane_id": "a/m", "provider": "a", "proof": {"provider": "a"}}],
            "rejected_lanes": [
                {
                    "lane_id": "b/m",
                    "provider": "b",
                    "model": "m",
                    "rejection": {"code": "outranked", "message": "x"},
                    "proof": {"provider": "b"},
                },
                {
                    "lane_id": "c/m",
                    "provider": "c",
                    "model": "m",
                    "rejection": {"code": "capacity_full", "message": "y"},
                    "proof": {"provider": "c"},
                },
            ],
        }
    ]
}
PRICES = {"input_per_mtok": "2.00", "output_per_mtok": "10.00"}


def _lane(key: str, lane_id: str, status: str, **extra: Any) -> LaneRecord:
    return lane_from_item(
        {
            "lane_key": key,
            "lane_id": lane_id,
            "provider": lane_id.split("/")[0],
            "model": "m",
            "status": status,
            "unit_prices": PRICES,
            **NEVER_READ,
            **extra,
        }
    )


# What a stored lane always has and these receipts never read.
NEVER_READ = {"ordinal_start": 0, "ordinal_end": 0, "item_count": 0, "created_at": ""}

LANES = [
    _lane("01-a-m", "a/m", "failed", failover_to="01f1-b-m"),
    _lane("01f1-b-m", "b/m", "completed", failover_from="01-a-m"),
    _lane("02-x-m", "x/m", "pending"),  # never ran
]
TALLIES = {
    "01-a-m": {"completed": 0, "failed": 2, "prompt_tokens": 0, "completion_tokens": 0},
    "01f1-b-m": {"completed": 3, "failed": 0, "prompt_tokens": 1_000, "completion_tokens": 500},
}


def test_only_lanes_with_completed_rows_are_charged_at_their_locked_prices() -> None:
    usage = charged_usage(LANES, TALLIES)
    assert [(u.lane_id, u.prompt_tokens, u.output_tokens) for u in usage] == [("b/m", 1_000, 500)]
    assert usage[0].input_per_mtok == Decimal("2.00") and usage[0].output_per_mtok == Decimal("10.00")
    price = price_usage(usage, builtin_catalog().fees)
    # 1000 x 2/1e6 + 500 x 10/1e6 = 0.007; one lane's control-plane fee
    assert price.provider_subtotal == Money.usd("0.007")
    assert price.lane_count == 1


def test_the_receipt_lists_the_lanes_that_ran_with_proof_and_the_rejected_ones() -> None:
    shown = provider_lanes(LANES, TALLIES, PLAN)
    assert [lane["lane_key"] for lane in shown] == ["01-a-m", "01f1-b-m"]
    failed_lane, taker = shown
    assert failed_lane["item_counts"] == {"completed": 0, "failed": 2, "canceled": 0}
    assert failed_lane["cost"] == {"currency": "usd", "amount": "0.00"}
    assert taker["failover_from"] == "01-a-m" and taker["proof"] == {"provider": "b"}
    assert taker["cost"] == {"currency": "usd", "amount": "0.007"}
    assert taker["usage"] == {"prompt_tokens": 1_000, "completion_tokens": 500}
    assert [r["lane_id"] for r in rejected_lanes(PLAN)] == ["b/m", "c/m"]


def _settled(reserved: str, cost: str) -> SettlementResult:
    pending = Reservation("res_1", "org_1", "batch", "batch_1", Money.usd(reserved), "pending", "t0")
    return SettlementResult.of(
        resolve(pending, cost=Money.usd(cost).micros, at="t1", void=False), replayed=False
    )


def test_receipt_credits_add_up_and_the_charge_never_exceeds_the_reservation() -> None:
    usage = charged_usage(LANES, TALLIES)
    price = price_usage(usage, builtin_catalog().fees)
    for reserved in ("1.00", "0.01"):
        result = _settled(reserved, str(price.total.amount))
        receipt = build_receipt(
            batch_id="batch_1",
            breakdown_api=price.to_api(),
            credits=ReceiptCredits.of(result),
            absorbed=result.absorbed,
            counts={"total": 5, "completed": 3, "failed": 2, "canceled": 0},
            lanes=provider_lanes(LANES, TALLIES, PLAN),
            rejected=rejected_lanes(PLAN),
            fee_basis=price.fee_basis(builtin_catalog().fees),
        )
        charged = Money.usd(receipt["credit_charged"]["amount"])
        released = Money.usd(receipt["credit_released"]["amount"])
        assert charged + released == Money.usd(receipt["credit_reserved"]["amount"]) == Money.usd(reserved)
        assert receipt["final_settled_price"] == receipt["credit_charged"]
        assert charged == min(price.total, Money.usd(reserved))
        assert Money.usd(receipt["absorbed"]["amount"]) == price.total - charged
        assert receipt["settled_total"] == price.to_api()["total"]
        assert receipt["item_counts"] == {"total": 5, "completed": 3, "failed": 2, "canceled": 0}
        # And the fee schedule line behind the service fee (issue 29)
        assert receipt["service_fee_basis"] == price.fee_basis(builtin_catalog().fees)
        assert receipt["service_fee_basis"]["schedule_line"].startswith(
            f"Service fee {money_text(price.service_fee)}: the "
        )


def test_the_receipt_says_why_a_lane_failed_over() -> None:
    # Given a lane whose vendor failed its job wholesale, and the lane that took over
    why = "lane a/m unavailable: batch_job_failed: the a batch job failed: invalid_request: line 3: bad model"
    lanes = [
        _lane("01-a-m", "a/m", "failed", failover_to="01f1-b-m", latest_error=why),
        _lane("01f1-b-m", "b/m", "completed", failover_from="01-a-m"),
    ]
    # When the receipt lists them
    failed_lane, taker = provider_lanes(lanes, TALLIES, PLAN)
    # Then the failed lane carries the vendor's reason, the other none
    assert failed_lane["latest_error"] == why
    assert taker["latest_error"] is None
