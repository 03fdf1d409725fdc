"""The batch pipeline on moto: Route, RunLane, Finalize, Settle (and HandleFailure) with the real
handlers, the simulated providers and the real ledger; batches made as batch create makes them
(tests/integration/batch_pipeline_support.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.batch_artifacts import BatchArtifacts, errors_key, receipt_key, results_key
from batchroute.adapters.dynamo.batch_progress import BatchProgress
from batchroute.adapters.dynamo.batch_records import BatchRecords, lane_values
from batchroute.adapters.dynamo.billing_events import BillingEvents
from batchroute.adapters.dynamo.controls import ControlsStore
from batchroute.adapters.dynamo.lane_records import lane_from_item, lane_item
from batchroute.adapters.dynamo.lanes import LaneStateStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.s3_objects import S3Objects
from batchroute.adapters.task_queue import TaskQueue
from batchroute.catalog import builtin_catalog
from batchroute.clock import SystemClock
from batchroute.config import get_settings
from batchroute.domain.accounts.audit import AuditEntry
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.batches.states import BatchState
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.catalog.pricing import (
    CacheTokens,
    CacheUse,
    LaneUsage,
    TokenUsage,
    ToolUses,
    price_usage,
)
from batchroute.domain.routing.lane_plan import (
    LaneRecord,
    lane_chunk_done,
    lane_chunks,
    lane_done_chunks,
    new_lane_record,
)
from batchroute.domain.workflow.results import ChunkTally, HandOver
from batchroute.ids import new_id
from batchroute.money import Money
from batchroute.providers.base import ProviderRequest
from batchroute.providers.registry import ProviderRegistry
from batchroute.providers.retry import RetryPolicy
from batchroute.providers.simulated import Simulator
from batchroute.services.batches.views import lane_statuses
from batchroute.services.workflow.execution import LaneExecutor
from batchroute.services.workflow.steps import BatchWorkflow, Pipeline
from batchroute.services.workflow.time_budget import TimeBudget
from batchroute.wiring import Wiring
from batchroute.workflow.tasks import WorkflowTask
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from tests.integration.batch_pipeline_support import (
    GPT,
    LLAMA,
    create_batch,
    item,
    run_until_done,
    run_workflow,
    start,
    states_entered,
    vendor_reports_tool_uses,
)
from tests.integration.principals import TestOrg, new_org
from tests.integration.test_quotes import _item


@pytest.fixture
def org(stack: LocalStack) -> TestOrg:
    return new_org(credit_usd="10")


def _records() -> BatchRecords:
    return BatchRecords(get_settings().table_name("batches"))


def _ledger() -> LedgerStore:
    return LedgerStore(get_settings().table_name("ledger"))


def _artifacts() -> BatchArtifacts:
    return BatchArtifacts(S3Objects(get_settings().buckets["artifacts"]))


def _batch(batch_id: str) -> BatchRecord:
    batch = _records().get(batch_id)
    assert batch is not None
    return batch


def _counts(batch: BatchRecord) -> dict[str, int]:
    return {k: int(v) for k, v in batch.counts.items()}


def _rows(key: str) -> list[dict[str, Any]]:
    return list(_artifacts().lines(key))


def _lanes(batch_id: str) -> dict[str, dict[str, Any]]:
    """Each lane's stored record, by lane key."""
    return {lane.lane_key: lane_item(lane) for lane in _records().lanes(batch_id)}


def _expected_charge(batch_id: str) -> Money:
    """Actual usage of completed items x each lane's locked prices, from the lane result files;
    a failover lane's control-plane fee is its planned lane's (it adds no lane)."""
    usage = []
    artifacts = _artifacts()
    records = _records().lanes(batch_id)
    by_key = {lane.lane_key: lane for lane in records}
    for lane in records:
        root = lane
        while root.failover_from in by_key and not root.handover_reason:
            root = by_key[root.failover_from]
        prompt = completion = cached = 0
        calls: dict[str, int] = {}
        for chunk in lane_done_chunks(lane):
            for line in artifacts.result_lines(batch_id, lane, int(chunk)):
                if line["status"] == "completed":
                    prompt += line["usage"]["prompt_tokens"]
                    completion += line["usage"]["completion_tokens"]
                    cached += line["usage"].get("cached_input_tokens", 0)
                    for tool, count in line["usage"].get("tool_uses", {}).items():
                        calls[tool] = calls.get(tool, 0) + count
        if prompt or completion:
            prices = lane.unit_prices
            per_1k = {
                key.removesuffix("_per_1k_calls"): Decimal(value)
                for key, value in prices.items()
                if key.endswith("_per_1k_calls")
            }
            usage.append(
                LaneUsage(
                    lane.lane_id,
                    prompt,
                    completion,
                    Decimal(prices["input_per_mtok"]),
                    Decimal(prices["output_per_mtok"]),
                    cache=CacheUse(
                        cached_input_tokens=cached,
                        cached_input_per_mtok=Decimal(
                            prices.get("cached_input_per_mtok", prices["input_per_mtok"])
                        ),
                    ),
                    fee_lane=root.lane_id,
                    tool_uses=ToolUses.of(calls.items()),
                    tool_prices=tuple(per_1k.items()),
                )
            )
    return price_usage(usage, builtin_catalog().fees).total


def _workflow(budget_ms: Any = None) -> BatchWorkflow:
    """The router/settle steps, called directly; `budget_ms` scripts the time left."""
    settings = get_settings()
    clock = SystemClock()
    pipeline = Wiring(settings, clock).pipeline
    if budget_ms is not None:
        lanes = LaneExecutor(
            records=_records(),
            progress=BatchProgress(settings.table_name("batches")),
            artifacts=_artifacts(),
            registry=ProviderRegistry(settings, builtin_catalog().providers),
            retry=RetryPolicy.from_settings(settings),
            catalog=builtin_catalog(),
            clock=clock,
            continuations=TaskQueue(settings.queue_urls["lanes"]),
            policies=Wiring(settings, clock).route_policies,
            capacity=pipeline.lanes.capacity,
            rescue=pipeline.lanes.rescue,
            availability=pipeline.lanes.availability,
            budget=lambda: TimeBudget(300, remaining_millis=budget_ms()),
        )
        pipeline = Pipeline(pipeline.planner, lanes, pipeline.finalizer, pipeline.settlement, pipeline.intake)
    return BatchWorkflow(_records(), clock, pipeline=pipeline)


def _calls(monkeypatch: pytest.MonkeyPatch, method: str) -> list[tuple[Any, ...]]:
    """The arguments of each call of `BatchArtifacts.<method>` from now on (passed through)."""
    calls: list[tuple[Any, ...]] = []
    original = getattr(BatchArtifacts, method)

    def noted(self: BatchArtifacts, *args: Any) -> Any:
        calls.append(args)
        return original(self, *args)

    monkeypatch.setattr(BatchArtifacts, method, noted)
    return calls


def _task(step: str, batch_id: str, **extra: Any) -> WorkflowTask:
    return WorkflowTask.model_validate(
        {"step": step, "batch_id": batch_id, "task_token": f"tok-{step}", **extra}
    )


def _lane_messages(stack: LocalStack) -> list[WorkflowTask]:
    sqs = boto3.client("sqs", region_name=stack.region)
    got = sqs.receive_message(QueueUrl=stack.queue_urls["lanes"], MaxNumberOfMessages=10, WaitTimeSeconds=0)
    messages = got.get("Messages", [])
    for message in messages:
        sqs.delete_message(QueueUrl=stack.queue_urls["lanes"], ReceiptHandle=message["ReceiptHandle"])
    return [WorkflowTask.model_validate_json(m["Body"]) for m in messages]


def _assert_settled_exactly(org_id: str, batch: BatchRecord, reserved: Money) -> Money:
    billing = batch.billing
    charged = Money.usd(billing["credit_charged"]["amount"])
    released = Money.usd(billing["credit_released"]["amount"])
    assert Money.usd(billing["credit_reserved"]["amount"]) == reserved
    assert charged + released == reserved
    state = _ledger().state(org_id)
    assert state.balance == Money.usd("10") - charged
    assert state.reserved == Money.zero()
    assert _ledger().violations(org_id) == []
    return charged


# -- the whole workflow ------------------------------------------------------------------------


def test_a_mixed_batch_runs_to_completed_and_settles_actual_usage_once(
    stack: LocalStack, org: TestOrg
) -> None:
    # Given a batch of two models (a sync lane and a vendor batch-API lane) over three chunks,
    # with permanent failures and a transient one
    items = [
        item(0),
        item(1, text="[simulate:fail]"),
        item(2, text="[simulate:transient]"),
        item(3, GPT),
        item(4, GPT, "[simulate:fail]"),
        item(5),
        item(6, GPT),
    ]
    created = create_batch(org.org_id, items, chunk_size=3)
    capacity = LaneStateStore(get_settings().table_name("controls"))
    before = capacity.live_states(consistent=True)
    # When the workflow runs
    result = run_workflow(stack, created.batch_id)
    # Then it succeeds, one lane per model, and the batch is completed with the right counts
    assert result["status"] == "SUCCEEDED"
    output = json.loads(result["output"])
    assert {lane["lane_key"] for lane in output["route"]["lanes"]} == {
        "01-openai-gpt-4o-mini",
        "02-edge-eu-meta-llama-llama-3-1-8b-instruct",
    }
    assert sorted((a["completed"], a["failed"], a["canceled"]) for a in output["lanes"]) == [
        (2, 1, 0),
        (3, 1, 0),
    ]
    batch = _batch(created.batch_id)
    assert batch.state == "completed" and batch.completed_at and batch.settled_at
    assert _counts(batch) == {
        "total": 7,
        "pending": 0,
        "running": 0,
        "completed": 5,
        "failed": 2,
        "canceled": 0,
    }
    # And results.jsonl holds one row per item in input order; errors.jsonl the failed ones
    rows = _rows(results_key(created.batch_id))
    assert [r["sequence_number"] for r in rows] == list(range(7))
    assert [r["customer_item_id"] for r in rows] == [f"item-{n}" for n in range(7)]
    assert [r["status"] for r in rows] == [
        "completed",
        "failed",
        "completed",
        "completed",
        "failed",
        "completed",
        "completed",
    ]
    assert rows[1]["error"]["code"] == "simulated_failure" and rows[1]["output"] is None
    assert rows[2]["output"]["type"] == "message"  # the transient failure succeeded on retry
    assert rows[3]["raw"] is not None  # kept for body_format=raw
    errors = _rows(errors_key(created.batch_id))
    assert [r["customer_item_id"] for r in errors] == ["item-1", "item-4"]
    assert batch.artifacts.result_count == 7 and batch.artifacts.error_count == 2
    # And each lane took its items off its provider's capacity, once
    after = capacity.live_states(consistent=True)
    for lane_id, taken in ((f"edge-eu/{LLAMA}", 4), (f"openai/{GPT}", 3)):
        assert after[lane_id].remaining_capacity_items == before[lane_id].remaining_capacity_items - taken
    # And the lane result line of the transient item shows its retry
    lanes = _lanes(created.batch_id)
    llama = lanes["02-edge-eu-meta-llama-llama-3-1-8b-instruct"]
    lines = [
        line
        for chunk in sorted(lane_done_chunks(lane_from_item(llama)))
        for line in _artifacts().result_lines(created.batch_id, lane_from_item(llama), int(chunk))
    ]
    assert {line["seq"]: line["attempts"] for line in lines}[2] == 2
    assert set(lines[0]) == {
        "seq",
        "customer_item_id",
        "status",
        "output",
        "error",
        "raw",
        "usage",
        "model",
        "provider",
        "lane_id",
        "attempts",
    }
    # And the charge is the completed items' usage at the locked prices (failed ones are free)
    charged = _assert_settled_exactly(org.org_id, batch, created.reserved)
    assert charged == min(_expected_charge(created.batch_id), created.reserved)
    assert int(llama["usage"]["prompt_tokens"]) == sum(
        line["usage"]["prompt_tokens"] for line in lines if line["status"] == "completed"
    )
    # And the receipt lists the lanes that ran (with proof) and the rejected ones
    receipt = _artifacts().read_json(receipt_key(created.batch_id))
    assert receipt is not None
    assert receipt["final_settled_price"] == receipt["credit_charged"]
    assert {lane["lane_key"] for lane in receipt["provider_lanes"]} == set(lanes)
    assert all(lane["proof"]["provider"] == lane["provider"] for lane in receipt["provider_lanes"])
    assert receipt["rejected_lanes"] and all(r["rejection"]["code"] for r in receipt["rejected_lanes"])
    assert set(receipt) >= {
        "final_settled_price",
        "provider_subtotal",
        "service_fee",
        "credit_reserved",
        "credit_charged",
        "credit_released",
        "settled_at",
        "provider_lanes",
        "rejected_lanes",
    }
    # When the Settle message is delivered twice more
    before = _ledger().snapshot(org.org_id)
    workflow = _workflow()
    again = [workflow.settle(_task("settle", created.batch_id)) for _ in range(2)]
    # Then nothing more is charged and the receipt is the same
    assert all(a["replayed"] for a in again)
    assert _ledger().snapshot(org.org_id) == before
    assert _artifacts().read_json(receipt_key(created.batch_id)) == receipt


def test_a_batch_whose_provider_reported_cached_input_is_charged_less(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two orgs with the same batch of long prompts on the OpenAI batch lane, whose
    # locked prices include a cached-input price
    text = " ".join(["shared system prompt words"] * 1500)
    items = [item(n, GPT, text) for n in range(4)]
    plain_org, cached_org = new_org(credit_usd="10"), new_org(credit_usd="10")
    plain = create_batch(plain_org.org_id, items)
    assert run_workflow(stack, plain.batch_id)["status"] == "SUCCEEDED"
    # When the vendor reports three quarters of each prompt as read from its cache
    answer = Simulator.answer

    def cached_answer(self: Simulator, request: ProviderRequest, text: str | None = None) -> Any:
        given = answer(self, request, text)
        usage = replace(given.usage, cached_input_tokens=given.usage.prompt_tokens * 3 // 4)
        return replace(given, usage=usage)

    monkeypatch.setattr(Simulator, "answer", cached_answer)
    cached = create_batch(cached_org.org_id, items)
    assert cached.reserved == plain.reserved  # the same quote
    assert run_workflow(stack, cached.batch_id)["status"] == "SUCCEEDED"
    # Then the cached batch costs less, by the cached tokens at the cached price, and both keep
    # reserved = charged + released
    plain_charged = _assert_settled_exactly(plain_org.org_id, _batch(plain.batch_id), plain.reserved)
    cached_charged = _assert_settled_exactly(cached_org.org_id, _batch(cached.batch_id), cached.reserved)
    assert cached_charged < plain_charged
    assert cached_charged == min(_expected_charge(cached.batch_id), cached.reserved)
    # And the receipt shows the split next to the locked cache price
    receipt = _artifacts().read_json(receipt_key(cached.batch_id))
    assert receipt is not None
    (lane,) = receipt["provider_lanes"]
    assert 0 < lane["usage"]["cached_input_tokens"] < lane["usage"]["prompt_tokens"]
    assert lane["unit_prices"]["cached_input_per_mtok"] == "0.0375"
    plain_receipt = _artifacts().read_json(receipt_key(plain.batch_id))
    assert plain_receipt is not None
    assert "cached_input_tokens" not in plain_receipt["provider_lanes"][0]["usage"]
    # And the lane's live usage (added chunk by chunk as it runs, shown by the batch view's
    # lanes) carries the same split; a batch without cache counts keeps the old shape
    (live,) = lane_statuses(_records().lanes(cached.batch_id))
    assert live["usage"] == lane["usage"]
    (plain_live,) = lane_statuses(_records().lanes(plain.batch_id))
    assert set(plain_live["usage"]) == {"prompt_tokens", "completion_tokens"}


def test_a_batch_whose_vendor_ran_hosted_tools_shows_their_calls_by_lane(
    stack: LocalStack, org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a vendor that reports two web searches and one code execution for each answer
    vendor_reports_tool_uses(monkeypatch, (("python_execution", 1), ("web_search", 2)))
    # When a batch of three items (one failing: a failed row counts no calls) runs in chunks of two
    items = [item(0, GPT), item(1, GPT, text="hi [simulate:fail]"), item(2, GPT)]
    created = create_batch(org.org_id, items, chunk_size=2)
    assert run_workflow(stack, created.batch_id)["status"] == "SUCCEEDED"
    # Then the receipt's lane shows the calls of its two completed items, by tool
    receipt = _artifacts().read_json(receipt_key(created.batch_id))
    assert receipt is not None
    (lane,) = receipt["provider_lanes"]
    assert lane["item_counts"]["completed"] == 2
    assert lane["usage"]["tool_uses"] == {"python_execution": 2, "web_search": 4}
    # And the lane's live usage, added chunk by chunk, shows the same; the money still adds up
    (live,) = lane_statuses(_records().lanes(created.batch_id))
    assert live["usage"] == lane["usage"]
    _assert_settled_exactly(org.org_id, _batch(created.batch_id), created.reserved)


def _searching(text: str, n: int) -> dict[str, Any]:
    """An item of the GPT lane that asks for web search."""
    asks = item(n, GPT, text)
    asks["input"]["tools"] = [{"type": "web_search"}]
    return asks


def test_a_batch_asking_for_web_search_is_quoted_and_charged_for_its_searches(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a vendor that reports two web searches for each answer, and one code execution
    # (a tool the items do not ask for: no price of it is locked, so it costs nothing)
    vendor_reports_tool_uses(monkeypatch, (("python_execution", 1), ("web_search", 2)))
    org = new_org(credit_usd="10")
    # When a batch of three items asking for web search on OpenAI's lane (3 calls counted per
    # item at 10.00 USD per 1,000), one of them failing, is created
    items = [_searching("news", 0), _searching("news [simulate:fail]", 1), _searching("news", 2)]
    created = create_batch(org.org_id, items)
    # Then its quote counted nine searches at the locked price beside the tokens
    ((lane,),) = [group["selected_lanes"] for group in _batch(created.batch_id).plan["groups"]]
    assert lane["estimated_tool_calls"] == {"web_search": 9}
    assert lane["unit_prices"]["web_search_per_1k_calls"] == "10.00"
    assert "python_execution_per_1k_calls" not in lane["unit_prices"]  # not asked for
    tokens = lane["estimated_prompt_tokens"] * Decimal("0.075") + lane["estimated_output_tokens"] * Decimal(
        "0.300"
    )
    estimate = Money.usd_ceil(tokens / 1_000_000 + Decimal("0.09"))
    assert lane["estimated_provider_cost"]["amount"] == estimate.to_api()["amount"]
    # And when it runs, its two answers' four searches are charged at the locked price (the
    # failed row's are not), within the reservation: reserved = charged + released
    assert run_workflow(stack, created.batch_id)["status"] == "SUCCEEDED"
    charged = _assert_settled_exactly(org.org_id, _batch(created.batch_id), created.reserved)
    assert charged == min(_expected_charge(created.batch_id), created.reserved)
    receipt = _artifacts().read_json(receipt_key(created.batch_id))
    assert receipt is not None
    (ran,) = receipt["provider_lanes"]
    assert ran["usage"]["tool_uses"] == {"python_execution": 2, "web_search": 4}
    assert ran["unit_prices"]["web_search_per_1k_calls"] == "10.00"
    used = ran["usage"]["prompt_tokens"] * Decimal("0.075") + ran["usage"]["completion_tokens"] * Decimal(
        "0.300"
    )
    assert ran["cost"] == Money.usd_ceil(used / 1_000_000 + Decimal("0.04")).to_api()


def test_an_unavailable_lane_fails_over_at_the_quoted_prices(stack: LocalStack, org: TestOrg) -> None:
    # Given a batch whose selected lane (edge-eu) and the next one (edge-us) go down on item 1
    down = "[simulate:down:edge-eu] [simulate:down:edge-us]"
    created = create_batch(org.org_id, [item(0), item(1, text=down), item(2), item(3)], chunk_size=2)
    # When it runs
    result = run_workflow(stack, created.batch_id)
    # Then every item completes, on a chain of lanes
    assert result["status"] == "SUCCEEDED"
    batch = _batch(created.batch_id)
    assert batch.state == "completed"
    assert _counts(batch)["completed"] == 4 and _counts(batch)["failed"] == 0
    assert [r["status"] for r in _rows(results_key(created.batch_id))] == ["completed"] * 4
    lanes = _lanes(created.batch_id)
    first = lanes["01-edge-eu-meta-llama-llama-3-1-8b-instruct"]
    second = lanes["01f1-edge-us-meta-llama-llama-3-1-8b-instruct"]
    third = lanes["01f2-deepinfra-meta-llama-llama-3-1-8b-instruct"]
    assert first["status"] == "failed" and first["failover_to"] == second["lane_key"]
    assert second["failover_from"] == first["lane_key"] and third["failover_from"] == second["lane_key"]
    assert third["status"] == "completed" and int(third["completed"]) == 3
    # And the lane that took over keeps the quoted (first lane's) unit prices
    deepinfra = next(lane for lane in builtin_catalog().lanes_for(LLAMA) if lane.provider == "deepinfra")
    assert third["unit_prices"] == first["unit_prices"]
    assert Decimal(third["unit_prices"]["input_per_mtok"]) != deepinfra.price.batch_input_per_mtok
    assert batch.execution_summary.latest_error is None
    output = json.loads(result["output"])
    assert output["lanes"] == [{"lane_key": first["lane_key"], "completed": 4, "failed": 0, "canceled": 0}]
    # And the charge uses those prices, on the lanes that delivered
    charged = _assert_settled_exactly(org.org_id, batch, created.reserved)
    assert charged == min(_expected_charge(created.batch_id), created.reserved)
    receipt_lanes = {lane["lane_key"]: lane for lane in batch.billing["provider_lanes"]}
    assert receipt_lanes[third["lane_key"]]["failover_from"] == second["lane_key"]
    assert receipt_lanes[third["lane_key"]]["proof"]["provider"] == "deepinfra"


def test_with_every_lane_down_the_items_fail_with_the_latest_error(stack: LocalStack, org: TestOrg) -> None:
    # Given an item that takes down every provider
    created = create_batch(org.org_id, [item(0), item(1, text="[simulate:down]"), item(2)])
    # When it runs
    result = run_workflow(stack, created.batch_id)
    # Then the batch completes; that item failed after every lane of its model was tried
    assert result["status"] == "SUCCEEDED"
    batch = _batch(created.batch_id)
    assert batch.state == "completed"
    assert _counts(batch) == {
        "total": 3,
        "pending": 0,
        "running": 0,
        "completed": 2,
        "failed": 1,
        "canceled": 0,
    }
    rows = _rows(results_key(created.batch_id))
    assert rows[1]["status"] == "failed" and rows[1]["error"]["code"] in {
        "provider_unavailable",
        "lane_failed",
    }
    assert batch.execution_summary.latest_error.startswith("lane ")
    assert "unavailable" in batch.execution_summary.latest_error
    lanes = _lanes(created.batch_id)
    assert len(lanes) == len(builtin_catalog().lanes_for(LLAMA))  # the whole chain was used
    _assert_settled_exactly(org.org_id, batch, created.reserved)


def test_the_failure_path_marks_failed_and_releases_the_reservation(stack: LocalStack, org: TestOrg) -> None:
    # Given a batch whose plan does not match its items (Route fails permanently)
    def corrupt(record: dict[str, Any]) -> None:
        record["chunk_models"] = [{LLAMA: 5}]

    created = create_batch(org.org_id, [item(0), item(1)], mutate=corrupt)
    # When the workflow runs
    arn = start(stack, created.batch_id)
    result = run_until_done(stack, arn)
    # Then it ends through HandleFailure; the batch failed, every item has a failed row
    assert result["status"] == "FAILED"
    assert "HandleFailure" in states_entered(stack, arn)
    batch = _batch(created.batch_id)
    assert batch.state == "failed" and "InvalidPlan" in batch.execution_summary.latest_error
    rows = _rows(results_key(created.batch_id))
    assert [r["error"]["code"] for r in rows] == ["batch_failed", "batch_failed"]
    assert _counts(batch)["failed"] == 2
    # And the whole reservation is released
    billing = batch.billing
    assert billing["credit_charged"]["amount"] == "0.00"
    assert Money.usd(billing["credit_released"]["amount"]) == created.reserved
    assert _ledger().state(org.org_id).available == Money.usd("10")
    assert _ledger().violations(org.org_id) == []


def test_a_batch_canceled_before_routing_runs_no_lane_and_releases_all(
    stack: LocalStack, org: TestOrg
) -> None:
    created = create_batch(org.org_id, [item(0), item(1)])
    assert _records().transition(created.batch_id, "canceled", at="2026-11-21T00:00:00.000Z")
    result = run_workflow(stack, created.batch_id)
    assert result["status"] == "SUCCEEDED"
    assert json.loads(result["output"])["route"] == {"lanes": []}
    batch = _batch(created.batch_id)
    assert batch.state == "canceled"
    assert _counts(batch) == {
        "total": 2,
        "pending": 0,
        "running": 0,
        "completed": 0,
        "failed": 0,
        "canceled": 2,
    }
    assert [r["error"]["code"] for r in _rows(results_key(created.batch_id))] == ["canceled", "canceled"]
    assert _ledger().state(org.org_id).available == Money.usd("10")


# -- steps called directly: time budget, cancel and expiry mid-run ---------------------------------


def test_a_lane_out_of_time_continues_in_a_new_message_with_the_same_token(
    stack: LocalStack, org: TestOrg
) -> None:
    # Given a lane of three chunks and an invocation that only ever has 60 s left
    created = create_batch(org.org_id, [item(n) for n in range(6)], chunk_size=2)
    workflow = _workflow(budget_ms=lambda: lambda: 60_000)
    lanes = workflow.route(_task("route", created.batch_id))["lanes"]
    task = _task("run_lane", created.batch_id, lane=lanes[0])
    # When RunLane runs: one chunk per invocation, then it re-enqueues itself
    answers: list[Any] = []
    tokens = []
    while not answers:
        answer = workflow.run_lane(task)
        if answer is not None:
            answers.append(answer)
            break
        (task,) = _lane_messages(stack)
        tokens.append(task.task_token)
    # Then it took three invocations with the same token, and finished every item
    assert tokens == ["tok-run_lane", "tok-run_lane"]
    assert answers == [{"lane_key": lanes[0]["lane_key"], "completed": 6, "failed": 0, "canceled": 0}]
    assert _counts(_batch(created.batch_id))["completed"] == 6


def test_a_half_done_chunk_is_kept_across_invocations(stack: LocalStack, org: TestOrg) -> None:
    # Given a chunk of four items and invocations that may take two items each
    created = create_batch(org.org_id, [item(n) for n in range(4)])

    def budget() -> Any:
        calls = iter(range(1000))
        return lambda: 300_000 if next(calls) < 2 else 30_000

    workflow = _workflow(budget_ms=budget)
    (lane,) = workflow.route(_task("route", created.batch_id))["lanes"]
    task = _task("run_lane", created.batch_id, lane=lane)
    answer = workflow.run_lane(task)
    invocations = 1
    while answer is None:
        (task,) = _lane_messages(stack)
        answer = workflow.run_lane(task)
        invocations += 1
    # Then each item has exactly one result and the counts add up
    assert invocations > 2
    assert answer["completed"] == 4
    (record,) = _records().lanes(created.batch_id)
    assert lane_done_chunks(record) == {0} and "partial_chunk" not in lane_item(record)
    lines = list(_artifacts().result_lines(created.batch_id, record, 0))
    assert [line["seq"] for line in lines] == [0, 1, 2, 3]
    assert _counts(_batch(created.batch_id))["completed"] == 4


@pytest.mark.parametrize("ending", ["canceled", "expired"])
def test_a_batch_ended_mid_run_charges_only_completed_work(
    stack: LocalStack, org: TestOrg, ending: BatchState, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a lane of three chunks that has run its first chunk
    created = create_batch(org.org_id, [item(n) for n in range(6)], chunk_size=2)
    workflow = _workflow(budget_ms=lambda: lambda: 60_000)
    (lane,) = workflow.route(_task("route", created.batch_id))["lanes"]
    assert workflow.run_lane(_task("run_lane", created.batch_id, lane=lane)) is None
    # When the batch is canceled (or the sweeper expires it) and the lane carries on
    assert _records().transition(created.batch_id, ending, at="2026-11-21T00:00:00.000Z")
    (task,) = _lane_messages(stack)
    answer = workflow.run_lane(task)
    # Then the lane stops: its remaining items count as canceled
    assert answer == {"lane_key": lane["lane_key"], "completed": 2, "failed": 0, "canceled": 4}
    # And Finalize and Settle work on the terminal batch without moving it
    parsed = _calls(monkeypatch, "input_lines")
    workflow.finalize(_task("finalize", created.batch_id))
    workflow.settle(_task("settle", created.batch_id))
    # (Finalize parsed the items of the chunks with unanswered items only: the answered
    # chunk's seqs came off its lines' heads)
    assert [chunk for _, chunk in parsed] == [1, 2]
    batch = _batch(created.batch_id)
    assert batch.state == ending
    assert _counts(batch) == {
        "total": 6,
        "pending": 0,
        "running": 0,
        "completed": 2,
        "failed": 0,
        "canceled": 4,
    }
    rows = _rows(results_key(created.batch_id))
    assert [r["status"] for r in rows] == ["completed"] * 2 + ["failed"] * 4
    assert [(r["sequence_number"], r["customer_item_id"]) for r in rows] == [
        (n, f"item-{n}") for n in range(6)
    ]
    assert {r["error"]["code"] for r in rows[2:]} == {ending}
    # And only the completed work is charged; the rest is released
    charged = _assert_settled_exactly(org.org_id, batch, created.reserved)
    assert charged == min(_expected_charge(created.batch_id), created.reserved)
    assert charged > Money.zero()


# -- spending limits --------------------------------------------------------------------------


def test_settlement_reaching_a_hard_limit_records_limit_reached_once(
    stack: LocalStack, org: TestOrg, tmp_path: Path
) -> None:
    # Given a hard daily limit of one cent
    controls = BillingControls(
        org_id=org.org_id,
        configured=True,
        limit_enabled=True,
        limit_period="daily",
        limit_amount=Money.usd("0.01"),
        limit_mode="hard",
        version=1,
    )
    audit = AuditEntry(
        new_id("aud"), org.org_id, None, None, "test", {}, {}, None, "2026-11-21T00:00:00.000Z"
    )
    ControlsStore(get_settings().table_name("controls")).save_billing_controls(
        controls, expected_version=0, audit=audit
    )
    # When two batches settle (each charges a lane fee of one cent and more)
    for n in range(2):
        created = create_batch(org.org_id, [item(n)])
        assert run_workflow(stack, created.batch_id)["status"] == "SUCCEEDED"
    # Then billing.limit_reached was recorded once for the period, and the owner emailed once
    events = BillingEvents(get_settings().table_name("controls")).events(org.org_id)
    assert [e["type"] for e in events] == ["billing.limit_reached"]
    details = events[0]["details"]
    assert details["limit"] == "0.01" and details["period"] == "daily"
    assert Money.usd(details["spent"]) >= Money.usd("0.01")
    assert len(list((tmp_path / "outbox").glob("*.eml"))) == 1


# -- through the API --------------------------------------------------------------------
def _run_through_api(
    client: TestClient, org: TestOrg, stack: LocalStack, body: dict[str, Any], key: str
) -> dict[str, Any]:
    created = client.post("/v1/batches", json=body, headers={**org.key_headers(), "Idempotency-Key": key})
    assert created.status_code == 202, created.text
    batch_id = created.json()["batch"]["id"]
    arn = stack.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{batch_id}"
    run_until_done(stack, arn, budget_seconds=60)
    return dict(client.get(f"/v1/batches/{batch_id}", headers=org.key_headers()).json()["batch"])


def test_through_the_api_items_read_past_a_lane_that_failed_over_without_an_answer(
    stack: LocalStack, org: TestOrg
) -> None:
    # Given a batch whose one item takes its first lane down: that lane hands the item on
    # having answered nothing (its chunk is done, with no result file)
    client = TestClient(create_app(), raise_server_exceptions=False)
    items = [_item(0, text="[simulate:down:edge-eu] hi")]
    batch = _run_through_api(client, org, stack, {"items": items}, "e2e-key-0002")
    assert batch["state"] == "completed", batch
    # When its items are listed / Then the item shows as completed, by the lane that took it
    listed = client.get(f"/v1/batches/{batch['id']}/items", headers=org.key_headers())
    assert listed.status_code == 200, listed.text
    (row,) = listed.json()["data"]
    assert row["status"] == "completed" and row["provider"] != "edge-eu"


def test_through_the_api_a_batch_runs_settles_and_retries(stack: LocalStack, org: TestOrg) -> None:
    client = TestClient(create_app(), raise_server_exceptions=False)
    headers = org.key_headers()
    items = [_item(0), _item(1, text="[simulate:fail] please"), _item(2, model="gpt-4o-mini")]
    # Given a quoted batch with one item that always fails
    quote = client.post("/v1/quotes/model", json={"items": items}, headers=headers).json()
    # When it runs through the workflow
    batch = _run_through_api(
        client, org, stack, {"quote_id": quote["quote_id"], "items": items}, "e2e-key-0001"
    )
    # Then it completes with one failure, results in input order, and a settled receipt
    assert batch["state"] == "completed", batch
    assert (
        batch["counts"]["total"] == 3 and batch["counts"]["completed"] == 2 and batch["counts"]["failed"] == 1
    )
    assert batch["output_url"] and batch["settled_at"]
    results = client.get(f"/v1/batches/{batch['id']}/results", headers=headers).json()
    assert [r["customer_item_id"] for r in results["data"]] == ["item-0", "item-1", "item-2"]
    assert [r["status"] for r in results["data"]] == ["completed", "failed", "completed"]
    assert results["data"][1]["output"] is None and results["data"][1]["error"]
    raw = client.get(f"/v1/batches/{batch['id']}/results?body_format=raw&limit=1", headers=headers).json()
    assert raw["data"][0]["output"] != results["data"][0]["output"] and raw["next_cursor"] == "1"
    items_view = client.get(f"/v1/batches/{batch['id']}/items?status=failed", headers=headers).json()
    assert [i["customer_item_id"] for i in items_view["data"]] == ["item-1"]
    receipt = client.get(f"/v1/batches/{batch['id']}/billing-receipt", headers=headers).json()
    reserved, charged, released = (
        Money.usd(receipt[k]["amount"]) for k in ("credit_reserved", "credit_charged", "credit_released")
    )
    assert reserved == charged + released and charged.micros > 0
    assert receipt["provider_lanes"] and "rejected_lanes" in receipt
    # And the fee schedule line behind the service fee (docs/money.md)
    basis = receipt["service_fee_basis"]
    assert basis["fee"] == "standard_batch_fee" and basis["lane_count"] >= 1
    line = basis["schedule_line"]
    assert line.startswith("Service fee ") and "for each lane that delivered answers" in line
    state = LedgerStore(get_settings().table_name("ledger")).state(org.org_id)
    assert state.reserved == Money.zero() and state.balance == Money.usd("10") - charged
    detail = client.get(f"/v1/batches/{batch['id']}?include_billing_receipt=true", headers=headers).json()
    assert detail["billing_receipt"]["settled_at"] == receipt["settled_at"]
    assert {lane["status"] for lane in detail["batch"]["lane_statuses"]} == {"completed"}
    # The lanes view counts the chunks from the ranges and the watermark (public fields unchanged)
    assert all(lane["chunks_done"] == lane["chunk_count"] >= 1 for lane in detail["batch"]["lane_statuses"])
    assert (
        client.get(f"/v1/batches/{batch['id']}/artifact-url", headers=headers)
        .json()["url"]
        .startswith("http")
    )
    # And a retry creates a new batch from the failed item only
    retry = client.post(f"/v1/batches/{batch['id']}/retry", headers=headers)
    assert retry.status_code == 202, retry.text
    assert retry.json()["retry_item_count"] == 1 and retry.json()["source_batch_id"] == batch["id"]
    assert retry.json()["batch"]["id"] != batch["id"]


def test_the_plan_lives_apart_from_the_meta_item_that_progress_rewrites(
    stack: LocalStack, org: TestOrg
) -> None:
    # DynamoDB bills each update by the whole item's size and progress updates META twice per
    # chunk per lane, so the immutable plan and per-chunk model counts live in their own item.
    created = create_batch(org.org_id, [item(n, GPT if n % 3 else LLAMA) for n in range(60)], chunk_size=1)
    raw = boto3.client("dynamodb").query(
        TableName=get_settings().table_name("batches"),
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"BATCH#{created.batch_id}"}},
    )["Items"]
    by_sk = {row["sk"]["S"]: row for row in raw}
    assert set(by_sk) == {"META", "PLAN", "START"}  # START: until its workflow's start is recorded
    assert set(by_sk["START"]) == {"pk", "sk", "kind", "gsi2pk", "gsi2sk"}
    assert "plan" not in by_sk["META"] and "chunk_models" not in by_sk["META"]
    assert len(json.dumps(by_sk["META"])) < 2_500  # 60 chunks: the chunk map alone would be ~4 KB
    whole = _batch(created.batch_id)
    assert whole.plan == created.record.plan
    assert whole.chunk_models == created.record.chunk_models
    assert whole.counts["total"] == 60
    assert _records().state(created.batch_id) == "priced"
    assert _records().state("batch_missing") is None


def test_a_vendor_job_with_no_results_yet_writes_no_partial_file(
    stack: LocalStack, org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A partial file keeps results reported before a vendor job is recorded; with none there
    # is nothing to keep (it was a PUT and a DELETE per chunk for nothing). The one partial
    # file a chunk gets is its finished job's answers, kept as the job is let go (_keep_job).
    written = _calls(monkeypatch, "write_lines")
    created = create_batch(org.org_id, [item(n, GPT) for n in range(4)], chunk_size=2)
    assert run_workflow(stack, created.batch_id)["status"] == "SUCCEEDED"
    assert _counts(_batch(created.batch_id))["completed"] == 4
    partials = [(key, lines) for key, lines in written if "partial" in key]
    assert written and len(partials) == len({key for key, _ in partials}) == 2  # one per chunk
    assert all(len(list(lines)) == 2 for _, lines in partials)  # each with all its answers


# -- lane progress: watermarks, exactly once ---------------------------------------------------


def _progress() -> BatchProgress:
    return BatchProgress(get_settings().table_name("batches"))


def _finish(progress: BatchProgress, batch_id: str, lane_key: str, position: int, **moves: int) -> bool:
    return progress.finish_chunk(
        batch_id,
        lane_key,
        ChunkTally(
            position=position,
            items=moves.get("items", 10),
            completed=moves.get("completed", 10),
            failed=0,
            usage=TokenUsage(5, 7),
        ),
        at="2026-11-25T00:00:00.000Z",
    )


def _gpt_lane(lane_key: str, *, items: int, chunks: list[int]) -> LaneRecord:
    return new_lane_record(
        lane_key=lane_key,
        lane_id=f"openai/{GPT}",
        provider="openai",
        model=GPT,
        ordinal_start=0,
        ordinal_end=items,
        chunks=chunks,
        unit_prices={},
        at="t",
    )


def test_lane_chunks_start_and_finish_exactly_once_in_their_order(stack: LocalStack, org: TestOrg) -> None:
    # Given a batch of 30 items and a lane that owns its three chunks of 10 (chunks 4, 5, 6)
    created = create_batch(org.org_id, [item(n, GPT) for n in range(30)], chunk_size=10)
    batch_id = created.batch_id
    progress = _progress()
    record = _gpt_lane("09-openai-gpt", items=30, chunks=[4, 5, 6])
    assert progress.put_lane(batch_id, record)
    before = _counts(_batch(batch_id))

    def moved() -> dict[str, int]:
        now = _counts(_batch(batch_id))
        return {k: now.get(k, 0) - before.get(k, 0) for k in ("pending", "running", "completed")}

    # A repeated start moves the counts once
    assert progress.start_chunk(batch_id, "09-openai-gpt", 0, items=10)
    assert not progress.start_chunk(batch_id, "09-openai-gpt", 0, items=10)
    assert moved() == {"pending": -10, "running": 10, "completed": 0}
    # Out of order: the second chunk can be neither started nor finished before the first one ends
    assert not progress.start_chunk(batch_id, "09-openai-gpt", 1, items=10)
    assert not _finish(progress, batch_id, "09-openai-gpt", 1)
    # A repeated finish moves them once, and adds the lane's usage once
    assert _finish(progress, batch_id, "09-openai-gpt", 0)
    assert not _finish(progress, batch_id, "09-openai-gpt", 0)
    assert moved() == {"pending": -10, "running": 0, "completed": 10}
    lane = progress.get_lane(batch_id, "09-openai-gpt")
    assert lane is not None and lane.completed == 10 and lane.usage.prompt_tokens == 5
    assert lane_done_chunks(lane) == {4} and not lane_chunk_done(lane, 5)
    # The runner goes on with the second chunk; a duplicate runner that is behind (it still
    # sees the first chunk as its next one) gets False for every write and moves nothing
    assert progress.start_chunk(batch_id, "09-openai-gpt", 1, items=10)
    assert not progress.start_chunk(batch_id, "09-openai-gpt", 0, items=10)
    assert not _finish(progress, batch_id, "09-openai-gpt", 0)
    successor = replace(record, lane_key="09f1-other-gpt")
    assert not progress.hand_over(
        batch_id,
        HandOver(
            "09-openai-gpt", successor, ChunkTally(position=0, items=10, completed=0, failed=0), "down", "t"
        ),
    )
    assert progress.get_lane(batch_id, "09f1-other-gpt") is None
    assert moved() == {"pending": -20, "running": 10, "completed": 10}
    # A chunk with no item of the lane (all answered before a failover) finishes unstarted
    assert _finish(progress, batch_id, "09-openai-gpt", 1)
    assert _finish(progress, batch_id, "09-openai-gpt", 2, items=0, completed=0)
    assert not progress.start_chunk(batch_id, "09-openai-gpt", 2, items=0)
    lane = progress.get_lane(batch_id, "09-openai-gpt")
    assert lane is not None and lane_done_chunks(lane) == {4, 5, 6}
    assert (lane.chunks_started_n, lane.chunks_done_n, lane.completed) == (3, 3, 20)
    assert (lane_statuses([lane])[0]["chunks_done"], lane_statuses([lane])[0]["chunk_count"]) == (3, 3)
    assert moved() == {"pending": -20, "running": 0, "completed": 20}


def test_a_lane_adds_the_cache_split_of_each_chunk_it_ends_even_when_handing_over(
    stack: LocalStack, org: TestOrg
) -> None:
    # Given a lane of two chunks whose vendor reported cached and cache-write input
    created = create_batch(org.org_id, [item(n, GPT) for n in range(20)], chunk_size=10)
    batch_id, key = created.batch_id, "07-openai-gpt"
    progress = _progress()
    record = _gpt_lane(key, items=20, chunks=[0, 1])
    assert progress.put_lane(batch_id, record)
    split = CacheTokens(cached_input_tokens=3000, cache_write_input_tokens=400)
    # When its first chunk finishes (twice: a repeated message) with the split
    first = ChunkTally(position=0, items=10, completed=10, usage=TokenUsage(5000, 70, split))
    assert progress.start_chunk(batch_id, key, 0, items=10)
    assert progress.finish_chunk(batch_id, key, first, at="t")
    assert not progress.finish_chunk(batch_id, key, first, at="t")
    # Then its live usage carries the split, once
    lane = progress.get_lane(batch_id, key)
    assert lane is not None
    assert lane.usage.to_fields() == {
        "prompt_tokens": 5000,
        "completion_tokens": 70,
        "cached_input_tokens": 3000,
        "cache_write_input_tokens": 400,
    }
    # And when it hands its second chunk over after answering some of it, the split of those adds up
    assert progress.start_chunk(batch_id, key, 1, items=10)
    some = ChunkTally(position=1, items=10, completed=4, usage=TokenUsage(2000, cache=CacheTokens(1200)))
    assert progress.hand_over(
        batch_id, HandOver(key, replace(record, lane_key="07f1-other-gpt"), some, "down", "t")
    )
    lane = progress.get_lane(batch_id, key)
    assert lane is not None and lane.status == "failed"
    assert lane.usage.cache == CacheTokens(4200, 400) and lane.usage.prompt_tokens == 7000


def test_a_lane_record_written_with_chunk_lists_moves_on_by_the_same_watermarks(
    stack: LocalStack, org: TestOrg
) -> None:
    # Given a lane record as written before the watermarks (lists), its first chunk started
    created = create_batch(org.org_id, [item(n, GPT) for n in range(20)], chunk_size=10)
    batch_id = created.batch_id
    progress = _progress()
    record = lane_values(batch_id, _gpt_lane("01-openai-gpt", items=20, chunks=[0, 1]))
    for name in ("chunk_ranges", "chunks_started_n", "chunks_done_n"):
        del record[name]
    legacy = {**record, "chunks": [0, 1], "chunks_started": [0], "chunks_done": []}
    assert progress.insert_once(legacy)
    # Then the started chunk is not started again, it finishes once, and the next one runs
    assert not progress.start_chunk(batch_id, "01-openai-gpt", 0, items=10)
    assert _finish(progress, batch_id, "01-openai-gpt", 0)
    assert not _finish(progress, batch_id, "01-openai-gpt", 0)
    lane = progress.get_lane(batch_id, "01-openai-gpt")
    assert lane is not None and lane_done_chunks(lane) == {0} and lane_chunks(lane) == [0, 1]
    assert progress.start_chunk(batch_id, "01-openai-gpt", 1, items=10)
    assert _finish(progress, batch_id, "01-openai-gpt", 1)
    lane = progress.get_lane(batch_id, "01-openai-gpt")
    assert lane is not None and lane_done_chunks(lane) == {0, 1} and lane.completed == 20
