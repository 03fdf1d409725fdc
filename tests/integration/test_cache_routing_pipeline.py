"""Cache-aware routing end to end (issue 32): a batch whose items share a long system prompt,
on the Anthropic lane, through the real adapter against the Anthropic emulator (which caches
only what `cache_control` marks, by its injected clock). With cache-aware routing the lane
marks the shared prefix, the vendor reports cache reads, the batch is charged less than the
same batch quoted without it, the reservation is the same uncached bound (reserved = charged
+ released) and the receipt says how many items were grouped and what the cache saved."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.batch_artifacts import BatchArtifacts, receipt_key, results_key
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.lanes import LaneStateStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.s3_objects import S3Objects
from batchroute.config import get_settings
from batchroute.domain.routing.lane_plan import lane_done_chunks
from batchroute.money import Money
from batchroute_tools.emulators import build_vendors
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.server import EmulatorServer
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.batch_pipeline_support import (
    CreatedBatch,
    create_batch,
    heartbeat_all_lanes,
    run_workflow,
)
from tests.integration.principals import new_org

HAIKU = "claude-3-5-haiku"
SYSTEM = "You label customer reviews by sentiment and topic, in one word each. " * 180  # ~3,000 tokens
ITEMS = 6


def review(index: int, system: str | None = SYSTEM) -> dict[str, Any]:
    messages = [{"role": "user", "content": f"Review {index}: arrived late but works."}]
    if system is not None:
        messages.insert(0, {"role": "system", "content": system})
    return {
        "customer_item_id": f"review-{index}",
        "operation": "responses",
        "model": HAIKU,
        "input": {"messages": messages},
        "max_output_tokens": 32,
    }


@pytest.fixture
def emulated(local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[LocalStack]:
    """The stack calling the vendor emulators over HTTP (not the in-process simulator), their
    clock standing still: every prefix stays within its cache lifetime."""
    s3 = boto3.client("s3", region_name=local_aws.region)  # Bedrock's batch jobs read and write S3
    vendors = build_vendors(Behaviour(EmulatorConfig()), s3=s3, clock=lambda: 1_700_000_000.0)
    server = EmulatorServer(vendors).start()
    for name, value in {
        "SIMULATED_PROVIDERS": "0",
        "VENDOR_EMULATOR_URL": server.base_url,
        "PROVIDER_BATCH_POLL_INTERVAL_SECONDS": "0.05",
        "PROVIDER_RETRY_BASE_SECONDS": "0",
        "LOCAL_OUTBOX_DIR": str(tmp_path / "outbox"),
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    identity_store.cache_clear()
    heartbeat_all_lanes()
    try:
        yield local_aws
    finally:
        server.stop()
        get_settings.cache_clear()


def _created(monkeypatch: pytest.MonkeyPatch, *, cache_aware: bool) -> CreatedBatch:
    monkeypatch.setenv("CACHE_AWARE_ROUTING", "true" if cache_aware else "false")
    get_settings.cache_clear()
    org = new_org(credit_usd="10")
    return create_batch(org.org_id, [review(n) for n in range(ITEMS)])


def _settled(created: CreatedBatch) -> tuple[Money, Money]:
    """(charged, released), checking reserved = charged + released and a clean ledger."""
    batch = BatchRecords(get_settings().table_name("batches")).get(created.batch_id)
    assert batch is not None and batch.state == "completed", batch
    billing = batch.billing
    charged = Money.usd(billing["credit_charged"]["amount"])
    released = Money.usd(billing["credit_released"]["amount"])
    assert Money.usd(billing["credit_reserved"]["amount"]) == created.reserved
    assert charged + released == created.reserved
    assert LedgerStore(get_settings().table_name("ledger")).violations(created.org_id) == []
    return charged, released


def _result_usage(batch_id: str, lane_id: str | None = None) -> list[dict[str, int]]:
    return [line["usage"] for ran_on, line in _result_lines(batch_id) if lane_id in (None, ran_on)]


def _result_lines(batch_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(lane id, result line) of every lane record's result files."""
    artifacts = BatchArtifacts(S3Objects(get_settings().buckets["artifacts"]))
    records = BatchRecords(get_settings().table_name("batches"))
    return [
        (lane.lane_id, line)
        for lane in records.lanes(batch_id)
        for chunk in sorted(lane_done_chunks(lane))
        for line in artifacts.result_lines(batch_id, lane, int(chunk))
    ]


def test_a_shared_system_prompt_is_marked_cached_and_charged_less(
    emulated: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the same batch quoted without and with cache-aware routing
    plain = _created(monkeypatch, cache_aware=False)
    grouped = _created(monkeypatch, cache_aware=True)
    # Then both reserve the same uncached bound, and only the second plans the cache
    assert grouped.reserved == plain.reserved
    (plain_lane,) = plain.record.plan["groups"][0]["selected_lanes"]
    (lane,) = grouped.record.plan["groups"][0]["selected_lanes"]
    assert lane["lane_id"] == plain_lane["lane_id"] == "anthropic/claude-3-5-haiku"
    assert "prompt_cache" not in plain_lane
    expected = lane["prompt_cache"]
    assert expected["grouped_items"] == ITEMS and expected["marker"] == "cache_control"
    assert Decimal(expected["expected_cache_savings"]["amount"]) > 0
    # When both run through the Anthropic adapter and emulator
    assert run_workflow(emulated, plain.batch_id)["status"] == "SUCCEEDED"
    assert run_workflow(emulated, grouped.batch_id)["status"] == "SUCCEEDED"
    # Then only the grouped batch's requests were marked: its vendor usage reports one cache
    # write and a read for every other item
    assert all("cached_input_tokens" not in usage for usage in _result_usage(plain.batch_id))
    usages = _result_usage(grouped.batch_id)
    assert len(usages) == ITEMS
    assert sum(1 for usage in usages if usage.get("cache_write_input_tokens")) == 1
    assert sum(1 for usage in usages if usage.get("cached_input_tokens")) == ITEMS - 1
    # And it is charged less, each batch keeping reserved = charged + released
    plain_charged, _ = _settled(plain)
    grouped_charged, _ = _settled(grouped)
    assert grouped_charged < plain_charged
    # And the receipt says how many items were grouped and what the cache saved
    artifacts = BatchArtifacts(S3Objects(get_settings().buckets["artifacts"]))
    receipt = artifacts.read_json(receipt_key(grouped.batch_id))
    assert receipt is not None
    (shown,) = receipt["provider_lanes"]
    cache = shown["prompt_cache"]
    assert cache["grouped_items"] == ITEMS
    assert cache["cached_input_tokens"] == sum(usage.get("cached_input_tokens", 0) for usage in usages) > 0
    assert Decimal(cache["saved"]["amount"]) > 0
    plain_receipt = artifacts.read_json(receipt_key(plain.batch_id))
    assert plain_receipt is not None and "prompt_cache" not in plain_receipt["provider_lanes"][0]


def test_the_quote_shows_each_lanes_expected_cache_and_prices_the_uncached_bound(
    local_aws: LocalStack,
) -> None:
    # Given items sharing a long system prompt, quoted over HTTP
    identity_store.cache_clear()
    client = TestClient(create_app(), raise_server_exceptions=False)
    heartbeat_all_lanes()
    org = new_org(credit_usd="10")
    body = {"items": [review(n) for n in range(ITEMS)]}
    quote = client.post("/v1/quotes/model", json=body, headers=org.key_headers("member")).json()
    # Then the selected lane shows its expected cache use, the lane's estimated cost and the
    # quote's price staying uncached
    (lane,) = [lane for lane in quote["quote_lanes"] if lane["selected"]]
    cache = lane["prompt_cache"]
    assert cache["grouped_items"] == ITEMS and cache["min_prefix_tokens"] == 2048
    assert cache["expected_cached_input_tokens"] == (ITEMS - 1) * cache["expected_cache_write_input_tokens"]
    estimated = Decimal(lane["estimated_provider_cost"]["amount"])
    expected = Decimal(cache["expected_provider_cost"]["amount"])
    assert expected < estimated
    assert Decimal(cache["expected_cache_savings"]["amount"]) == estimated - expected
    assert Decimal(quote["pricing_estimate"]["provider_subtotal"]["amount"]) == estimated
    # And a batch made from the quote keeps the expectation in its plan (read back from DynamoDB)
    headers = {**org.key_headers("member"), "Idempotency-Key": "cache-quote-1"}
    made = client.post("/v1/batches", json={"quote_id": quote["quote_id"]}, headers=headers)
    assert made.status_code == 202, made.text
    batch = BatchRecords(get_settings().table_name("batches")).get(made.json()["batch"]["id"])
    assert batch is not None
    (planned,) = batch.plan["groups"][0]["selected_lanes"]
    assert planned["prompt_cache"] == cache


ANTHROPIC = "anthropic/claude-3-5-haiku"
BEDROCK = "bedrock/claude-3-5-haiku"
OTHER_SYSTEM = SYSTEM.replace("sentiment", "urgency")  # another ~3,000-token prompt


def test_interleaved_prefixes_of_a_split_batch_are_each_written_once_on_one_lane(
    emulated: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given 12 items, two long system prompts and plain items interleaved (A B - A B - ...),
    # and an Anthropic lane with room for 8 of them, Bedrock's for 4: the batch splits, and
    # Bedrock's batch jobs cache nothing. In input order the Anthropic lane would take
    # A B - A B - A B and Bedrock - A B -
    prompts = (SYSTEM, OTHER_SYSTEM, None) * 4
    items = [review(index, system) for index, system in enumerate(prompts)]
    store = LaneStateStore(get_settings().table_name("controls"))
    live = store.live_states(consistent=True)
    for lane_id, room in ((ANTHROPIC, 8), (BEDROCK, 4)):
        assert store.consume_capacity(lane_id, live[lane_id].remaining_capacity_items - room)
    monkeypatch.setenv("CACHE_AWARE_ROUTING", "true")
    get_settings.cache_clear()
    created = create_batch(new_org(credit_usd="10").org_id, items, chunk_size=5)
    # Then the plan puts each prompt whole on the Anthropic lane, the plain items on Bedrock
    group = created.record.plan["groups"][0]
    assert [(lane["lane_id"], lane["item_count"]) for lane in group["selected_lanes"]] == [
        (ANTHROPIC, 8),
        (BEDROCK, 4),
    ]
    assert sorted((view["items"], view.get("lane")) for view in group["shared_prefixes"]) == [(4, 0), (4, 0)]
    # When it runs through the adapters and the emulators
    assert run_workflow(emulated, created.batch_id)["status"] == "SUCCEEDED"
    # Then every item of a prompt ran on the Anthropic lane, which wrote each prompt to the
    # cache once and read it for every other item of it
    ran_on = {int(line["seq"]): lane_id for lane_id, line in _result_lines(created.batch_id)}
    assert sorted(ran_on) == list(range(12))
    assert all(ran_on[seq] == (ANTHROPIC if system else BEDROCK) for seq, system in enumerate(prompts))
    usages = _result_usage(created.batch_id, ANTHROPIC)
    assert sum(1 for usage in usages if usage.get("cache_write_input_tokens")) == 2
    assert sum(1 for usage in usages if usage.get("cached_input_tokens")) == 6
    assert all("cached_input_tokens" not in usage for usage in _result_usage(created.batch_id, BEDROCK))
    # And the results come back complete, in input order
    _settled(created)
    artifacts = BatchArtifacts(S3Objects(get_settings().buckets["artifacts"]))
    rows = list(artifacts.lines(results_key(created.batch_id)))
    assert [row["sequence_number"] for row in rows] == list(range(12))
    assert [row["customer_item_id"] for row in rows] == [item["customer_item_id"] for item in items]
    assert all(row["status"] == "completed" for row in rows), [row["error"] for row in rows]
    # And the receipt counts the 8 grouped items once, with both writes and the 6 reads
    receipt = artifacts.read_json(receipt_key(created.batch_id))
    assert receipt is not None
    cache = [lane["prompt_cache"] for lane in receipt["provider_lanes"] if "prompt_cache" in lane]
    assert sum(shown["grouped_items"] for shown in cache) == 8
    written = sum(usage.get("cache_write_input_tokens", 0) for usage in usages)
    assert sum(shown["cache_write_input_tokens"] for shown in cache) == written > 0
