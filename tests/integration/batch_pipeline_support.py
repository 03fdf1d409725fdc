"""Batches made the way `POST /v1/batches` makes them, and the workflow run to its end on moto.

`create_batch` mirrors docs/batches.md exactly: the quote's routing plan (the real routing
engine over live lane heartbeats), the input chunks in S3, then ONE transaction with the
ledger reservation and the batch record (`priced`). `run_workflow` starts the execution and
polls every queue with the real handlers (as the local stack's event source mappings do)
until the execution ends.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from batchroute import resources
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.lanes import PARTITION, SK_PREFIX, LaneStateStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.dynamo.reads import prefix_query
from batchroute.adapters.s3_objects import S3Objects
from batchroute.catalog import builtin_catalog
from batchroute.clock import Clock, FixedClock, SystemClock, isoformat
from batchroute.config import get_settings
from batchroute.domain.batches.preflight import Preflight
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.billing.ledger import ReservationTerms
from batchroute.domain.catalog.pricing import estimate_price
from batchroute.domain.routing.engine import route
from batchroute.domain.routing.gates import RouteRequest
from batchroute.ids import new_id
from batchroute.money import Money
from batchroute.providers.base import ProviderRequest
from batchroute.providers.simulated import Simulator
from batchroute.services.batches.input_chunks import InputChunkWriter
from batchroute.services.catalog.catalog import guards_for
from batchroute.services.catalog.lane_health import SimulatedProviderHealth, refresh_lane_heartbeats
from batchroute_tools.local.lambda_runtime import context_for, load_handler
from batchroute_tools.local.poller import QueuePoller
from batchroute_tools.local.provision import LocalStack
from functions.api.auth import identity_store

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"  # sync lanes (edge-eu cheapest), several to fail over to
GPT = "gpt-4o-mini"  # one vendor batch-API lane (openai)


def item(n: int, model: str = LLAMA, text: str = "") -> dict[str, Any]:
    return {
        "customer_item_id": f"item-{n}",
        "operation": "responses",
        "model": model,
        "input": {"messages": [{"role": "user", "content": f"Question {n}. {text}".strip()}]},
        "max_output_tokens": 64,
    }


def quiet_simulation(monkeypatch: Any, tmp_path: Path, *, heartbeats: bool = True) -> None:
    """No simulated latency, vendor jobs done at once, retries without backoff, emails in
    tmp; fresh settings and (`heartbeats`) every lane's heartbeat (a pipeline test's stack)."""
    for name, value in {
        "SIMULATED_LATENCY_MS": "0",
        "SIMULATED_BATCH_POLL_SECONDS": "0",
        "PROVIDER_RETRY_BASE_SECONDS": "0",
        "LOCAL_OUTBOX_DIR": str(tmp_path / "outbox"),
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    identity_store.cache_clear()
    if heartbeats:
        heartbeat_all_lanes()


def heartbeat_all_lanes(clock: Clock | None = None, *, rewrite: bool = False) -> None:
    """Every lane's heartbeat, fresh at `clock`'s time (now by default): the service's lane
    health refresh, as the minute sweep runs it.

    Most tests take it on a fresh stack, where moto's conditional UpdateItem (~13 ms, one a
    lane) made it the largest part of their set-up. So the rows the refresh wrote on the first
    fresh stack of this process are kept, and on a later fresh stack written again in one
    BatchWriteItem, with that refresh's time and UTC day replaced by this one's. A stack that
    already has lane rows gets the refresh itself (it keeps consumed capacity and marks),
    unless `rewrite`: a test that only needs every lane fresh, time after time, has the kept
    rows written over what its stack holds (a full day's capacity, no marks)."""
    now = (clock or SystemClock()).now()
    at, day = isoformat(now), now.astimezone(UTC).date().isoformat()
    store = LaneStateStore(get_settings().table_name("controls"))
    catalog = builtin_catalog()
    enabled = {provider.slug for provider in catalog.providers if provider.enabled}
    lanes = tuple(
        (lane.lane_id, lane.daily_capacity_items) for lane in catalog.lanes if lane.provider in enabled
    )
    fresh = not _lane_rows(store)
    kept = _REFRESHED_ROWS.get(lanes) if fresh or rewrite else None
    if kept is None:
        refresh_lane_heartbeats(catalog, store, SimulatedProviderHealth(), FixedClock(now))
        if fresh:
            _REFRESHED_ROWS[lanes] = (at, day, _lane_rows(store))
        return
    swap = {kept[0]: at, kept[1]: day}
    rows = [
        {name: {"S": swap.get(v["S"], v["S"])} if "S" in v else v for name, v in row.items()}
        for row in kept[2]
    ]
    for start in range(0, len(rows), 25):
        puts = [{"PutRequest": {"Item": row}} for row in rows[start : start + 25]]
        store.dynamodb.batch_write_item(RequestItems={store.table_name: puts})


def _lane_rows(store: LaneStateStore) -> list[dict[str, Any]]:
    request = prefix_query(store.table_name, PARTITION, SK_PREFIX, ConsistentRead=True)
    return list(store.dynamodb.query(**request)["Items"])


# The lane rows of the first refresh on a fresh stack, by the lanes it heartbeats: (its time,
# its UTC day, the rows as DynamoDB holds them).
_REFRESHED_ROWS: dict[tuple[tuple[str, int], ...], tuple[str, str, list[dict[str, Any]]]] = {}


@dataclass(frozen=True)
class CreatedBatch:
    batch_id: str
    org_id: str
    reserved: Money
    record: BatchRecord


def create_batch(
    org_id: str,
    items: Sequence[Mapping[str, Any]],
    *,
    chunk_size: int = 1000,
    routing_mode: str = "cheapest",
    state: str = "priced",
    mutate: Callable[[dict[str, Any]], None] | None = None,
) -> CreatedBatch:
    """A batch as batch create writes it: chunks in S3, then the reservation and the batch
    record in one transaction. `mutate` may edit the record before it is written."""
    settings = get_settings()
    catalog = builtin_catalog()
    clock = SystemClock()
    now = clock.now()
    batch_id = new_id("batch", now)
    request = RouteRequest.from_api({"routing_mode": routing_mode})
    guards = guards_for(settings)
    preflight = Preflight(catalog, request=request, guards=guards)
    writer = InputChunkWriter(S3Objects(settings.buckets["artifacts"]), batch_id, chunk_size=chunk_size)
    for index, raw in enumerate(items):
        preflight.add_item(index, raw)
        writer.add(raw)
    writer.close()
    preflight.result().raise_if_failed()
    live = LaneStateStore(settings.table_name("controls")).live_states(consistent=True)
    plan = route(preflight.groups, catalog, live=live, request=request, now=now, guards=guards)
    assert plan.ok, plan.explanation()
    total = estimate_price(plan, catalog.fees).total
    record: dict[str, Any] = {
        "batch_id": batch_id,
        "org_id": org_id,
        "state": state,
        "source": "native",
        "created_at": isoformat(now),
        "deadline_at": isoformat(now + timedelta(hours=24)),
        "state_changed_at": isoformat(now),
        "routing_mode": routing_mode,
        "sla_tier": "standard",
        "privacy_tier": "standard",
        "quote_id": None,
        "item_count": writer.count,
        "chunk_count": writer.chunk_count,
        "chunk_models": writer.chunk_models_for(plan.to_api()),
        "counts": {
            "total": writer.count,
            "pending": writer.count,
            "running": 0,
            "completed": 0,
            "failed": 0,
            "canceled": 0,
        },
        "plan": plan.to_api(),
        "reservation_id": f"res_{batch_id}",
        "reserved_micros": total.micros,
        "fee_kind": "batch",
        "execution_summary": {"latest_error": None},
        "workflow_steps": {},
    }
    if mutate is not None:
        mutate(record)
    batch = BatchRecord.from_mapping(record)
    ledger = LedgerStore(settings.table_name("ledger"))
    reserve = ledger.reserve_items(
        org_id,
        ReservationTerms(
            reservation_id=str(batch.reservation_id), amount=total, purpose="batch", ref=batch_id
        ),
        at=isoformat(now),
    )
    BatchRecords(settings.table_name("batches")).create(batch, reservation=reserve)
    return CreatedBatch(batch_id=batch_id, org_id=org_id, reserved=total, record=batch)


def pollers(stack: LocalStack) -> list[QueuePoller]:
    sqs = boto3.client("sqs", region_name=stack.region)
    return [
        QueuePoller(
            queue=queue,
            queue_url=stack.queue_urls[queue.key],
            queue_arn=stack.queue_arns[queue.key],
            region=stack.region,
            handler=load_handler(queue.consumer),
            context_factory=lambda key=queue.consumer: context_for(  # type: ignore[misc]
                key, prefix=stack.prefix, region=stack.region, account=stack.account
            ),
            sqs=sqs,
            wait_seconds=0,
        )
        for queue in resources.QUEUES
    ]


def start(stack: LocalStack, batch_id: str) -> str:
    sfn = boto3.client("stepfunctions", region_name=stack.region)
    execution = sfn.start_execution(
        stateMachineArn=stack.state_machine_arn, name=batch_id, input=json.dumps({"batch_id": batch_id})
    )
    return str(execution["executionArn"])


def run_until_done(stack: LocalStack, execution_arn: str, budget_seconds: float = 30) -> dict[str, Any]:
    """Poll every queue with the real handlers until the execution ends."""
    sfn = boto3.client("stepfunctions", region_name=stack.region)
    polling = pollers(stack)
    deadline = time.monotonic() + budget_seconds
    while time.monotonic() < deadline:
        description = sfn.describe_execution(executionArn=execution_arn)
        if description["status"] != "RUNNING":
            return dict(description)
        if not any(p.poll_once().received for p in polling):
            time.sleep(0.02)  # the execution thread has not queued its next task yet
    raise AssertionError("workflow did not finish in time")


def run_workflow(stack: LocalStack, batch_id: str) -> dict[str, Any]:
    return run_until_done(stack, start(stack, batch_id))


def shorten(stack: LocalStack, state: str, seconds: int) -> None:
    """The deployed state machine with `state`'s TimeoutSeconds cut and its retries gone: a
    task whose worker never answers has spent all its time in seconds, not hours or days."""
    sfn = boto3.client("stepfunctions", region_name=stack.region)
    arn = stack.state_machine_arn
    definition = json.loads(sfn.describe_state_machine(stateMachineArn=arn)["definition"])
    definition["States"][state]["TimeoutSeconds"] = seconds
    definition["States"][state].pop("Retry", None)
    sfn.update_state_machine(stateMachineArn=arn, definition=json.dumps(definition))


def drive(stack: LocalStack, arn: str, *, unanswered: frozenset[str] = frozenset()) -> str:
    """Poll every queue with the real handlers until the execution ends; the messages of
    `unanswered` steps go back to their queue unprocessed (a settle worker that is down).
    The execution's end status."""
    sfn = boto3.client("stepfunctions", region_name=stack.region)
    consumers = pollers(stack)
    for poller in consumers:
        poller.handler = _holding(poller.handler, unanswered)
    deadline = time.monotonic() + 60
    while (status := sfn.describe_execution(executionArn=arn)["status"]) == "RUNNING":
        assert time.monotonic() < deadline, f"the execution did not end: {_last(sfn, arn)}"
        if not any(p.poll_once().received for p in consumers):
            time.sleep(0.05)
    return str(status)


def _last(sfn: Any, arn: str) -> list[tuple[str, str | None]]:
    events = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"][-8:]
    return [(e["type"], e.get("stateEnteredEventDetails", {}).get("name")) for e in events]


def _holding(handler: Any, unanswered: frozenset[str]) -> Any:
    def holding(event: dict[str, Any], context: Any) -> Any:
        kept, held = [], []
        for record in event["Records"]:
            (held if json.loads(record["body"]).get("step") in unanswered else kept).append(record)
        answer = handler({**event, "Records": kept}, context) if kept else None
        failures = list((answer or {}).get("batchItemFailures", []))
        return {"batchItemFailures": failures + [{"itemIdentifier": r["messageId"]} for r in held]}

    return holding


def states_entered(stack: LocalStack, execution_arn: str) -> list[str]:
    sfn = boto3.client("stepfunctions", region_name=stack.region)
    history = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    return [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e]


@contextmanager
def fast_pipeline(monkeypatch: Any, outbox: Path) -> Iterator[None]:
    """Settings for running batches to their end in tests: no simulated latency, vendor jobs
    done at once, retries without backoff, emails in `outbox`; every lane heartbeating."""
    for name, value in {
        "SIMULATED_LATENCY_MS": "0",
        "SIMULATED_BATCH_POLL_SECONDS": "0",
        "PROVIDER_RETRY_BASE_SECONDS": "0",
        "LOCAL_OUTBOX_DIR": str(outbox),
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    identity_store.cache_clear()
    heartbeat_all_lanes()
    yield
    get_settings.cache_clear()


def instant_chat_app() -> Any:
    """The app with the simulated providers answering chat at once."""
    from functions.api.app import create_app

    settings = get_settings().model_copy(update={"simulated_ttft_ms": 0, "simulated_inter_token_ms": 0})
    return create_app(settings)


def vendor_reports_tool_uses(monkeypatch: pytest.MonkeyPatch, tools: tuple[tuple[str, int], ...]) -> None:
    """The simulated vendors report `tools` (hosted tool calls by name) with every answer."""
    answer = Simulator.answer

    def answered_with_tools(self: Simulator, request: ProviderRequest, text: str | None = None) -> Any:
        given = answer(self, request, text)
        return replace(given, usage=replace(given.usage, tool_uses=tools))

    monkeypatch.setattr(Simulator, "answer", answered_with_tools)
