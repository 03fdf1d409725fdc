"""bench/cost_model.py: the arithmetic of the AWS bill per 1M items (no run, no timing)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.cost_model import (
    GIB,
    LIST_PRICES,
    Prices,
    Usage,
    biggest,
    lines,
    storage_bytes,
    total,
)

# Round prices, so each line's figure can be worked out by hand.
PRICES = Prices(
    as_of="2026-11-29",
    lambda_request=1e-6,
    lambda_gb_second=1e-5,
    sfn_transition=1e-4,
    sqs_request=1e-6,
    s3_put=1e-5,
    s3_get=1e-6,
    s3_gb_month=0.02,
    dynamodb_wru=1e-6,
    dynamodb_rru=1e-7,
    dynamodb_gb_month=0.25,
    egress_gb=0.1,
    api_request=2e-6,
)

USAGE = Usage(
    items=10_000,
    lambda_seconds={"router": 20.0, "webhook": 2.0},
    memory_mb={"router": 1024, "webhook": 512},
    lambda_requests=6,
    api_requests=4,
    transitions=11,
    sqs_units=20,
    s3_put=50,
    s3_get=100,
    wru=500,
    rru=40,
    s3_reclaimed_bytes=2 * GIB,
    s3_kept_bytes=GIB,
    dynamodb_bytes=0.5 * GIB,
    egress_bytes=3 * GIB,
    window_hours=73.0,
    kept_months=1.0,
)


def by_name() -> dict[str, float]:
    return {line.name: line.usd_per_million for line in lines(USAGE, PRICES)}


def test_each_line_is_its_quantity_times_its_price_per_million_items() -> None:
    bill = by_name()
    per_m = 1e6 / 10_000  # 100 batches of 10,000 items
    assert bill["DynamoDB write units"] == pytest.approx(500 * 1e-6 * per_m)
    assert bill["DynamoDB read units"] == pytest.approx(40 * 1e-7 * per_m)
    assert bill["S3 PUT/COPY/POST/LIST"] == pytest.approx(50 * 1e-5 * per_m)
    assert bill["S3 GET/HEAD"] == pytest.approx(100 * 1e-6 * per_m)
    assert bill["SQS requests"] == pytest.approx(20 * 1e-6 * per_m)
    assert bill["Step Functions transitions"] == pytest.approx(11 * 1e-4 * per_m)
    assert bill["Lambda requests"] == pytest.approx((6 + 4) * 1e-6 * per_m)  # handlers + API
    assert bill["API Gateway requests"] == pytest.approx(4 * 2e-6 * per_m)


def test_lambda_duration_is_wall_seconds_times_configured_memory() -> None:
    bill = by_name()
    assert bill["Lambda duration: router (1024 MB)"] == pytest.approx(20.0 * 1.0 * 1e-5 * 100)
    assert bill["Lambda duration: webhook (512 MB)"] == pytest.approx(2.0 * 0.5 * 1e-5 * 100)


def test_storage_is_priced_for_how_long_it_is_kept() -> None:
    bill = by_name()
    # 2 GiB for 73 of a month's 730 hours; 1 GiB and 0.5 GiB for one month.
    assert bill["S3 storage, inputs+results (73 h)"] == pytest.approx(2 * 0.1 * 0.02 * 100)
    assert bill["S3 storage, file+receipt (1 mo)"] == pytest.approx(1 * 0.02 * 100)
    assert bill["DynamoDB storage (1 mo)"] == pytest.approx(0.5 * 0.25 * 100)
    assert bill["Data transfer out to the vendors"] == pytest.approx(3 * 0.1 * 100)
    two_months = {line.name: line.usd_per_million for line in lines(replace(USAGE, kept_months=2.0), PRICES)}
    assert two_months["DynamoDB storage (2 mo)"] == pytest.approx(2 * bill["DynamoDB storage (1 mo)"])


def test_the_total_is_the_sum_of_the_lines_and_the_biggest_line_is_named() -> None:
    bill = lines(USAGE, PRICES)
    assert total(bill) == pytest.approx(sum(by_name().values()))
    assert total(bill) == pytest.approx(
        0.05 + 0.0004 + 0.05 + 0.01 + 0.002 + 0.11 + 0.001 + 0.0008 + 0.02 + 0.001 + 0.4 + 2 + 12.5 + 30
    )
    top = biggest(bill)
    assert (top.name, top.usd_per_million) == ("Data transfer out to the vendors", pytest.approx(30.0))
    cheap_egress = lines(replace(USAGE, egress_bytes=0.0), PRICES)
    assert biggest(cheap_egress).name == "DynamoDB storage (1 mo)"


def test_per_item_units_are_the_batch_totals_over_its_items() -> None:
    bill = {line.name: line for line in lines(USAGE, PRICES)}
    assert bill["DynamoDB write units"].per_item == pytest.approx(0.05)
    assert bill["DynamoDB write units"].unit == "WRU"
    assert bill["Lambda duration: router (1024 MB)"].per_item == pytest.approx(20.0 / 10_000)


def test_storage_left_by_a_run_is_split_into_reclaimed_kept_and_dynamodb() -> None:
    before = {
        "moto": {
            "s3_bytes_by_class": {"p-uploads-1:files": 100},
            "dynamodb_by_table": {"batches": [2, 300]},
        }
    }
    after = {
        "moto": {
            "s3_bytes_by_class": {
                "p-uploads-1:files": 1_100,  # the input file: kept
                "p-artifacts-1:batches/input": 400,  # reclaimed after the window
                "p-artifacts-1:batches/results": 500,
                "p-artifacts-1:batches/results.jsonl": 600,
                "p-artifacts-1:batches/errors.jsonl": 7,
                "p-artifacts-1:batches/partial": 20,  # all of batches/<id>/ but the receipt
                "p-artifacts-1:bedrock-batch": 3,  # expired by the operator's lifecycle rule
                "p-artifacts-1:batches/receipt.json": 30,  # kept
                "p-artifacts-1:tmp": 999,  # expires in 2 days by lifecycle: not counted
            },
            "dynamodb_by_table": {"batches": [5, 1_300], "ledger": [1, 50]},
        }
    }
    reclaimed, kept, dynamodb = storage_bytes(after, before)
    assert reclaimed == 400 + 500 + 600 + 7 + 20 + 3
    assert kept == 1_000 + 30
    assert dynamodb == (1_000 + 3 * 100) + (50 + 100)  # bytes grown + 100 B an item


def test_the_list_prices_are_dated_and_match_the_request_prices() -> None:
    assert LIST_PRICES.as_of == "2026-11-29"
    assert LIST_PRICES.lambda_gb_second == pytest.approx(0.0000166667)
    assert LIST_PRICES.sfn_transition == pytest.approx(0.000025)
    assert LIST_PRICES.s3_gb_month == pytest.approx(0.023)
