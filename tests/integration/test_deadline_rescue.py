"""Deadline rescue on moto (issue 31.1; docs/batches.md, "Deadline rescue"): a vendor batch job
that will miss the batch's deadline hands its unfinished items to a faster lane, exactly once,
paid from the reservation. The clock is a FixedClock moved by hand: no test sleeps."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import boto3
import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.batch_artifacts import BatchArtifacts, results_key
from batchroute.adapters.dynamo.batch_progress import BatchProgress
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.lanes import LaneStateStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.s3_objects import S3Objects
from batchroute.adapters.task_queue import TaskQueue
from batchroute.catalog import builtin_catalog
from batchroute.clock import FixedClock, SystemClock, isoformat
from batchroute.config import get_settings
from batchroute.domain.accounts.access import Principal
from batchroute.domain.batches.artifact_keys import lane_result_key
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.billing.ledger import Reservation, ReservationTerms
from batchroute.domain.delivery.webhooks import (
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    AttemptOutcome,
    verify,
)
from batchroute.domain.routing.lane_plan import LaneRecord, lane_chunks
from batchroute.domain.routing.rescue import DEADLINE_RESCUE, RESCUE_REST, RescueSetting
from batchroute.domain.workflow.results import ResultLine
from batchroute.money import Money
from batchroute.providers.base import ItemError
from batchroute.providers.registry import ProviderRegistry
from batchroute.providers.retry import RetryPolicy
from batchroute.providers.simulated import MARKER_STUCK_BATCH
from batchroute.services.billing.funding import Funds
from batchroute.services.delivery.webhooks import WebhookDelivery, seal_batch_webhook
from batchroute.services.work_orders.commands import AddMember, CreateWorkOrder
from batchroute.services.workflow import execution
from batchroute.services.workflow.execution import LaneExecutor
from batchroute.services.workflow.overage import RescueOverage
from batchroute.services.workflow.rescue import DeadlineRescue
from batchroute.services.workflow.steps import BatchWorkflow, Pipeline
from batchroute.services.workflow.submits import Note
from batchroute.services.workflow.time_budget import TimeBudget
from batchroute.wiring import Wiring
from batchroute.workflow.tasks import WorkflowTask
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from tests.integration.batch_pipeline_support import (
    LLAMA,
    CreatedBatch,
    create_batch,
    heartbeat_all_lanes,
)
from tests.integration.principals import TestOrg, new_org

BATCH_LANE = "together/meta-llama/Llama-3.1-8B-Instruct"  # a vendor batch-API lane of the model
SYNC_LANES = tuple(f"{slug}/{LLAMA}" for slug in ("edge-eu", "edge-us", "groq", "deepinfra", "fireworks"))


@pytest.fixture
def org(stack: LocalStack) -> TestOrg:
    return new_org(credit_usd="10")


def _item(n: int, *, stuck: bool = False, max_output_tokens: int = 64) -> dict[str, Any]:
    text = f"Question {n}." + (f" {MARKER_STUCK_BATCH}" if stuck else "")
    return {
        "customer_item_id": f"item-{n}",
        "operation": "responses",
        "model": LLAMA,
        "input": {"messages": [{"role": "user", "content": text}]},
        "max_output_tokens": max_output_tokens,
    }


def _batch_on_the_vendor_lane(
    org_id: str,
    items: list[dict[str, Any]],
    *,
    rescuers: tuple[str, ...],
    rescue: RescueSetting | None = None,
    webhook: bool = False,
    **kw: Any,
) -> CreatedBatch:
    """A batch the quote placed on the vendor batch lane (every sync lane was full), with
    `rescuers` the quote's eligible-but-outranked lanes (the others stay rejected) and its
    `rescue` setting as batch create stores it."""
    store = LaneStateStore(get_settings().table_name("controls"))
    now = isoformat(datetime.now().astimezone())
    for lane_id in SYNC_LANES:
        store.heartbeat(lane_id, 0, now)

    def outranked(record: dict[str, Any]) -> None:
        if rescue is not None:
            record["rescue"] = rescue.to_item()
        if webhook:
            delivery = Wiring(get_settings(), SystemClock()).webhook_delivery
            own = seal_batch_webhook(
                delivery.sealer,
                org_id=org_id,
                batch_id=record["batch_id"],
                url="https://hooks.example.com/rescue",
                secret="whsec_rescue",
            )
            record["webhook"] = own.to_mapping()
        for group in record["plan"]["groups"]:
            assert [lane["lane_id"] for lane in group["selected_lanes"]] == [BATCH_LANE]
            for lane in group["rejected_lanes"]:
                if lane["lane_id"] in {f"{slug}/{LLAMA}" for slug in rescuers}:
                    lane["rejection"] = {**lane["rejection"], "code": "outranked"}

    created = create_batch(org_id, items, mutate=outranked, **kw)
    heartbeat_all_lanes()
    return created


class Run:
    """The router and settle steps with a FixedClock and a hand-driven poll wait."""

    def __init__(
        self,
        stack: LocalStack,
        batch: CreatedBatch,
        *,
        time_left_ms: int = 900_000,
        inline: bool = False,
        overage: RescueOverage | None = None,
    ) -> None:
        settings = get_settings()
        self.stack = stack
        self.batch = batch
        self.clock = FixedClock(datetime.fromisoformat(str(batch.record.created_at).replace("Z", "+00:00")))
        self.records = BatchRecords(settings.table_name("batches"))
        self.artifacts = BatchArtifacts(S3Objects(settings.buckets["artifacts"]))
        registry = ProviderRegistry(settings, builtin_catalog().providers)
        ticks = iter(range(0, 10**9, 1000))  # each look at the time waited: 1000 s later
        waits = iter(range(30))

        def hour_later(_: float) -> None:  # `inline`: each poll wait of one invocation, 1 h on
            assert next(waits, None) is not None, "the lane was not rescued in this invocation"
            self.clock.advance(hours=1)

        self.rescue = DeadlineRescue(
            records=self.records,
            artifacts=self.artifacts,
            registry=registry,
            catalog=builtin_catalog(),
            clock=self.clock,
            policies=Wiring(settings, self.clock).route_policies,
            events=Wiring(settings, self.clock).webhook_delivery,
            overage=overage or Wiring(settings, self.clock).rescue_overage,
        )
        lanes = LaneExecutor(
            records=self.records,
            progress=BatchProgress(settings.table_name("batches")),
            artifacts=self.artifacts,
            registry=registry,
            retry=RetryPolicy.from_settings(settings),
            catalog=builtin_catalog(),
            clock=self.clock,
            continuations=TaskQueue(settings.queue_urls["lanes"]),
            policies=Wiring(settings, self.clock).route_policies,
            capacity=Wiring(settings, self.clock).lane_states,
            availability=Wiring(settings, self.clock).lane_states,
            sleeper=hour_later if inline else lambda _: None,
            monotonic=(lambda: 0.0) if inline else lambda: float(next(ticks)),
            budget=lambda: TimeBudget(900, remaining_millis=lambda: time_left_ms),
            rescue=self.rescue,
        )
        pipeline = Wiring(settings, self.clock).pipeline
        self.workflow = BatchWorkflow(
            self.records,
            self.clock,
            pipeline=Pipeline(
                pipeline.planner, lanes, pipeline.finalizer, pipeline.settlement, pipeline.intake
            ),
        )

    def task(self, step: str, **extra: Any) -> WorkflowTask:
        return WorkflowTask.model_validate(
            {"step": step, "batch_id": self.batch.batch_id, "task_token": f"tok-{step}", **extra}
        )

    def first_invocation(self) -> dict[str, Any]:
        """Route, then RunLane's first invocation (it carries on in a new message): the lane."""
        (lane,) = self.workflow.route(self.task("route"))["lanes"]
        assert self.workflow.run_lane(self.task("run_lane", lane=lane)) is None
        return dict(lane)

    def later(self, hours: float) -> Any:
        """RunLane's next invocation, `hours` on: its answer (None: it carries on)."""
        self.clock.advance(hours=hours)
        return self.workflow.run_lane(self.requeued())

    def handed(self, lane_key: str) -> tuple[LaneRecord, LaneRecord]:
        """The lane and the lane it handed its items to."""
        lanes = _lanes(self)
        old = lanes[lane_key]
        return old, lanes[str(old.failover_to)]

    def requeued(self) -> WorkflowTask:
        sqs = boto3.client("sqs", region_name=self.stack.region)
        url = self.stack.queue_urls["lanes"]
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        (message,) = got["Messages"]
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        return WorkflowTask.model_validate_json(message["Body"])

    def settle(self) -> BatchRecord:
        self.workflow.finalize(self.task("finalize"))
        self.workflow.settle(self.task("settle"))
        batch = self.records.get(self.batch.batch_id)
        assert batch is not None
        return batch


def _lanes(run: Run) -> dict[str, Any]:
    return {lane.lane_key: lane for lane in run.records.lanes(run.batch.batch_id)}


def _sweep_webhooks(now: datetime) -> list[tuple[bytes, Mapping[str, str]]]:
    """The sweeper's webhook run at `now`, with a receiver that takes every POST (204)."""
    sent: list[tuple[bytes, Mapping[str, str]]] = []

    class Receiver:
        def send(self, url: str, raw_body: bytes, headers: Mapping[str, str]) -> AttemptOutcome:
            sent.append((raw_body, headers))
            return AttemptOutcome(204, None, 1)

    wiring = Wiring(get_settings(), SystemClock())
    hooks = WebhookDelivery(
        wiring.webhook_deliveries, wiring.identity, wiring.sealer, Receiver(), SystemClock()
    )
    hooks.retry_due(now)
    return sent


def _settled_exactly(org_id: str, batch: BatchRecord, reserved: Money, held: Money = Money.zero()) -> Money:
    """The money of a settled batch: what it held (its reservation and the overage hold of a
    rescue, `held`) = charged + released, the actual cost charged, nothing absorbed, the
    wallet exact."""
    billing = batch.billing or {}
    charged = Money.usd(billing["credit_charged"]["amount"])
    released = Money.usd(billing["credit_released"]["amount"])
    assert Money.usd(billing["credit_reserved"]["amount"]) == reserved + held
    assert charged + released == reserved + held
    assert Money.usd(billing["absorbed"]["amount"]) == Money.zero()  # the holds paid it all
    assert charged == Money.usd(billing["settled_total"]["amount"])  # the actual cost, exactly
    ledger = LedgerStore(get_settings().table_name("ledger"))
    state = ledger.state(org_id)
    assert state.balance == Money.usd("10") - charged and state.reserved == Money.zero()
    assert ledger.violations(org_id) == []
    return charged


def test_a_vendor_batch_stuck_at_40_percent_with_2_hours_left_is_rescued_before_the_deadline(
    stack: LocalStack, org: TestOrg
) -> None:
    # Given a batch on the vendor batch lane whose job gets stuck at 40 %
    items = [_item(0, stuck=True), *(_item(n) for n in range(1, 10))]
    created = _batch_on_the_vendor_lane(org.org_id, items, rescuers=("deepinfra", "groq"), webhook=True)
    run = Run(stack, created)
    # When RunLane submits the job and polls it: too early to judge, it waits in a new message
    lane = run.first_invocation()
    (old,) = _lanes(run).values()
    assert old.job is not None and old.status == "running"
    # And 22 h later (2 h before the deadline) the job still reports 40 %
    answer = run.later(hours=22)
    # Then the items were handed to the cheapest sync lane that finishes in time, and ran there
    assert answer == {"lane_key": lane["lane_key"], "completed": 10, "failed": 0, "canceled": 0}
    old, rescue = run.handed(lane["lane_key"])
    assert rescue.lane_id == f"deepinfra/{LLAMA}" and rescue.handover_reason == DEADLINE_RESCUE
    assert rescue.status == "completed" and rescue.completed == 10 and rescue.then_lane is None
    assert old.status == "failed" and old.handed_over == 10 and old.completed == 0
    assert old.latest_error is not None and old.latest_error.startswith("deadline rescue:")
    assert old.job is None  # the vendor job was cancelled
    # at the rescue lane's own prices (cheaper here than the quoted vendor batch price)
    deepinfra = next(c for c in builtin_catalog().lanes_for(LLAMA) if c.provider == "deepinfra")
    assert rescue.unit_prices["input_per_mtok"] == format(deepinfra.price.batch_input_per_mtok, "f")
    # And the batch completes before its deadline, every item once, from the rescue lane
    batch = run.settle()
    assert batch.state == "completed" and batch.deadline_at is not None
    assert batch.completed_at is not None and batch.completed_at < batch.deadline_at
    rows = list(run.artifacts.lines(results_key(created.batch_id)))
    assert [r["customer_item_id"] for r in rows] == [f"item-{n}" for n in range(10)]
    assert {r["status"] for r in rows} == {"completed"}
    # And the money is exact: charged + released = reserved, nothing absorbed
    charged = _settled_exactly(org.org_id, batch, created.reserved)
    assert Money.zero() < charged < created.reserved
    # And the receipt lists the rescued items by lane, with the reason and the cost difference
    (rescued,) = (batch.billing or {})["rescues"]
    assert rescued["lane_key"] == rescue.lane_key and rescued["from_lane_key"] == old.lane_key
    assert rescued["reason"] == "deadline_rescue" and rescued["item_counts"]["completed"] == 10
    cost, quoted = (Money.usd(rescued[k]["amount"]) for k in ("cost", "cost_at_quoted_prices"))
    assert cost < quoted and Money.usd(rescued["cost_difference"]["amount"]) == cost - quoted
    # And the customer was told: a signed batch.rescue_started event is queued for its webhook
    deliveries, _ = Wiring(get_settings(), SystemClock()).webhook_deliveries.list_for_batch(created.batch_id)
    (started,) = [d for d in deliveries if d.event_type == "batch.rescue_started"]
    event = json.loads(started.payload)
    assert event["type"] == "batch.rescue_started" and event["batch"]["id"] == created.batch_id
    assert event["rescue"]["lane_key"] == rescue.lane_key and event["rescue"]["items"] == 10
    assert event["rescue"]["from_lane_key"] == old.lane_key and started.status == "pending"
    assert Money.usd(event["rescue"]["overage_held"]["amount"]) == Money.zero()  # within_reservation
    # and the sweeper's run sends it, signed with the batch's webhook secret
    sent = _sweep_webhooks(run.clock.now())
    ((raw, headers),) = [(body, h) for body, h in sent if json.loads(body)["type"] == "batch.rescue_started"]
    assert headers[EVENT_HEADER] == "batch.rescue_started"
    timestamp = int(headers[TIMESTAMP_HEADER])
    assert verify(b"whsec_rescue", timestamp, raw, headers[SIGNATURE_HEADER], now=timestamp)


def test_a_lane_is_judged_in_the_invocation_that_started_it(stack: LocalStack, org: TestOrg) -> None:
    # Given a batch on the vendor batch lane whose job gets stuck at 40 %
    items = [_item(0, stuck=True), *(_item(n) for n in range(1, 10))]
    created = _batch_on_the_vendor_lane(org.org_id, items, rescuers=("deepinfra",))
    run = Run(stack, created, inline=True)
    # When the RunLane invocation that starts the lane polls its job inline, an hour per wait
    (lane,) = run.workflow.route(run.task("route"))["lanes"]
    answer = run.workflow.run_lane(run.task("run_lane", lane=lane))
    # Then that invocation judges the lane by the start it just recorded and rescues it
    assert answer == {"lane_key": lane["lane_key"], "completed": 10, "failed": 0, "canceled": 0}
    old, rescue = run.handed(lane["lane_key"])
    assert rescue.handover_reason == DEADLINE_RESCUE and rescue.status == "completed"
    assert old.status == "failed" and old.latest_error is not None


def test_a_rescue_the_reservation_cannot_cover_takes_only_what_it_covers(
    stack: LocalStack, org: TestOrg
) -> None:
    # Given a two-chunk batch on the vendor lane whose only eligible sync lane costs more,
    # and whose second chunk's job gets stuck (its first item carries the marker)
    items = [_item(n, max_output_tokens=2000, stuck=n == 100) for n in range(200)]
    created = _batch_on_the_vendor_lane(org.org_id, items, rescuers=("fireworks",), chunk_size=100)
    run = Run(stack, created)
    # When the first chunk completes and the second's job is stuck at 40 % 22 h on
    lane = run.first_invocation()
    answer = run.later(hours=22)
    assert answer == {"lane_key": lane["lane_key"], "completed": 200, "failed": 0, "canceled": 0}
    # Then the rescue lane took only some items (what the headroom pays for: the first
    # chunk's actual usage came in under its estimate), the old lane kept the rest
    old, rescue = run.handed(lane["lane_key"])
    rest = _lanes(run)[str(rescue.then_lane)]
    assert rescue.lane_id == f"fireworks/{LLAMA}" and rest.lane_id == BATCH_LANE
    assert rest.handover_reason == RESCUE_REST and rest.unit_prices == old.unit_prices
    assert 0 < rescue.completed < 100 and rescue.completed + rest.completed == 100
    assert old.completed == 100 and lane_chunks(rescue) == [1] and lane_chunks(rest) == [1]
    # And the whole batch settles within the reservation: nothing absorbed, money exact
    batch = run.settle()
    assert batch.state == "completed"
    rows = list(run.artifacts.lines(results_key(created.batch_id)))
    assert len(rows) == 200 and {r["status"] for r in rows} == {"completed"}
    _settled_exactly(org.org_id, batch, created.reserved)
    shown = {entry["lane_key"]: entry for entry in (batch.billing or {})["rescues"]}
    assert shown[rescue.lane_key]["reason"] == "deadline_rescue"
    assert Money.usd(shown[rescue.lane_key]["cost_difference"]["amount"]) > Money.zero()
    assert shown[rest.lane_key]["reason"] == "deadline_rescue_rest"
    assert Money.usd(shown[rest.lane_key]["cost_difference"]["amount"]) == Money.zero()


def test_with_rescue_off_the_lane_is_left_alone(stack: LocalStack, org: TestOrg) -> None:
    items = [_item(0, stuck=True), _item(1)]
    created = _batch_on_the_vendor_lane(
        org.org_id, items, rescuers=("deepinfra",), rescue=RescueSetting.from_api({"mode": "off"})
    )
    run = Run(stack, created)
    run.first_invocation()
    assert run.later(hours=22) is None  # still waiting on its job
    (old,) = _lanes(run).values()
    assert old.failover_to is None and old.job is not None


def _canceled_while_stuck(
    stack: LocalStack, org: TestOrg, count: int, *, waited_hours: float = 0
) -> tuple[Run, dict[str, Any], CreatedBatch]:
    """A batch of `count` items on the vendor batch lane, rescue off, whose job is stuck at
    40 %: run once (and `waited_hours` on), then canceled through the API."""
    items = [_item(0, stuck=True), *(_item(n) for n in range(1, count))]
    created = _batch_on_the_vendor_lane(
        org.org_id, items, rescuers=("deepinfra",), rescue=RescueSetting.from_api({"mode": "off"})
    )
    run = Run(stack, created)
    lane = run.first_invocation()
    if waited_hours:
        assert run.later(hours=waited_hours) is None  # still waiting on its job
    app = TestClient(create_app(), raise_server_exceptions=False)
    canceled = app.post(f"/v1/batches/{created.batch_id}/cancel", json={}, headers=org.key_headers())
    assert canceled.status_code == 200, canceled.text
    return run, lane, created


def test_a_batch_canceled_while_its_vendor_job_runs_keeps_and_pays_for_what_the_job_finished(
    stack: LocalStack, org: TestOrg
) -> None:
    # Given a batch whose vendor job is stuck with 40 % of its 10 items done, when it is canceled
    run, lane, created = _canceled_while_stuck(stack, org, 10, waited_hours=1)
    # Then the lane asks the vendor to stop the job, and once it stopped keeps what it finished
    answer = run.later(hours=1)
    if answer is None:  # the vendor was still stopping it: the next poll finds it cancelled
        answer = run.later(hours=1)
    assert answer == {"lane_key": lane["lane_key"], "completed": 4, "failed": 0, "canceled": 6}
    (old,) = _lanes(run).values()
    assert old.job is None and (old.completed, old.canceled) == (4, 6)
    # And the answers are delivered and charged (work in flight at the cancel), the rest canceled
    batch = run.settle()
    assert batch.state == "canceled"
    rows = list(run.artifacts.lines(results_key(created.batch_id)))
    outcomes = [(r["customer_item_id"], r["status"], (r.get("error") or {}).get("code")) for r in rows]
    assert outcomes == [(f"item-{n}", "completed", None) for n in range(4)] + [
        (f"item-{n}", "failed", "canceled") for n in range(4, 10)
    ]
    charged = _settled_exactly(org.org_id, batch, created.reserved)
    assert Money.zero() < charged < created.reserved


def test_a_canceled_batch_stops_and_keeps_a_vendor_job_only_a_submit_note_names(
    stack: LocalStack, org: TestOrg
) -> None:
    # Given a batch whose vendor job is stuck with 40 % of its 10 items done, made by an
    # invocation that died before storing it: only the lane's submit note names it
    items = [_item(0, stuck=True), *(_item(n) for n in range(1, 10))]
    created = _batch_on_the_vendor_lane(
        org.org_id, items, rescuers=("deepinfra",), rescue=RescueSetting.from_api({"mode": "off"})
    )
    run = Run(stack, created)
    lane = run.first_invocation()
    (stored,) = _lanes(run).values()
    progress = BatchProgress(get_settings().table_name("batches"))
    progress.set_job(created.batch_id, stored.lane_key, None, chunk=0)
    key = stored.job.job_id.removeprefix("simbatch_")
    noted = Note(0, "digest", int(run.clock.now().timestamp()), key).mark()
    assert progress.note_submitting(created.batch_id, stored.lane_key, noted)
    # When the batch is canceled
    app = TestClient(create_app(), raise_server_exceptions=False)
    canceled = app.post(f"/v1/batches/{created.batch_id}/cancel", json={}, headers=org.key_headers())
    assert canceled.status_code == 200, canceled.text
    # Then the lane finds the job by the note's key and stores it, the note cleared, while the
    # vendor takes a turn to stop it (a cancelling job no look-up finds again) ...
    real, turns = execution.collect_cancelled_job, [False]

    def still_stopping_once(*args: Any, **kwargs: Any) -> bool:
        return turns.pop() if turns else real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(execution, "collect_cancelled_job", still_stopping_once)
        assert run.later(hours=1) is None
        (stopping,) = _lanes(run).values()
        assert stopping.job is not None and stopping.job.job_id == stored.job.job_id
        assert stopping.submitting is None
        # ... and keeps what it finished once it stopped
        answer = run.later(hours=1) or run.later(hours=1)
    assert answer == {"lane_key": lane["lane_key"], "completed": 4, "failed": 0, "canceled": 6}
    (old,) = _lanes(run).values()
    assert old.job is None and old.submitting is None
    # And the answers are delivered and charged, the rest canceled
    batch = run.settle()
    rows = list(run.artifacts.lines(results_key(created.batch_id)))
    assert [r["status"] for r in rows] == ["completed"] * 4 + ["failed"] * 6
    assert Money.zero() < _settled_exactly(org.org_id, batch, created.reserved) < created.reserved


def test_a_vendor_job_that_never_finishes_its_cancel_is_let_go_after_a_while(
    stack: LocalStack, org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a canceled batch whose vendor job never says it stopped
    run, lane, _ = _canceled_while_stuck(stack, org, 4)
    monkeypatch.setattr(execution, "collect_cancelled_job", lambda *_a, **_k: False)
    # Then the lane keeps polling it for a while ...
    assert run.later(hours=1) is None
    # ... and once the wait is over lets it go: its items canceled, the batch free to settle
    answer = run.later(hours=2)
    assert answer == {"lane_key": lane["lane_key"], "completed": 0, "failed": 0, "canceled": 4}
    assert run.settle().settled_at is not None


def test_a_lane_whose_batch_ended_does_not_fail_over(stack: LocalStack, org: TestOrg) -> None:
    # Given a canceled batch whose lane (a poll of its job seeing the job the cancel stopped)
    # is about to fail over
    run, _, created = _canceled_while_stuck(stack, org, 2)
    (stuck,) = _lanes(run).values()
    batch = run.records.get(created.batch_id)
    assert batch is not None and run.workflow.pipeline is not None
    stopped = ItemError("provider_unavailable", "the openai batch job cancelled", True)
    # When it would fail over
    run.workflow.pipeline.lanes._fail_over(batch, stuck, execution._Chunk(0, 0, 0, []), stopped)
    # Then nothing is handed over: the lane's next turn collects what the job finished
    assert list(_lanes(run)) == [stuck.lane_key] and _lanes(run)[stuck.lane_key].failover_to is None


def test_a_late_vendor_result_after_the_rescue_is_not_delivered_or_charged(
    stack: LocalStack, org: TestOrg
) -> None:
    # Given a rescued lane (as in the first test)
    items = [_item(0, stuck=True), *(_item(n) for n in range(1, 4))]
    created = _batch_on_the_vendor_lane(org.org_id, items, rescuers=("deepinfra",))
    run = Run(stack, created)
    lane = run.first_invocation()
    assert run.later(hours=22) is not None
    old, rescue = run.handed(lane["lane_key"])
    # When the old vendor job's results arrive late anyway (an invocation that polled it
    # before the hand-over writes them to the old lane's result file of the chunk)
    late: list[ResultLine] = [
        {**line, "lane_id": old.lane_id, "provider": old.provider, "output": {"text": "late"}}  # type: ignore[typeddict-item]
        for line in run.artifacts.result_lines(created.batch_id, rescue, 0)
    ]
    run.artifacts.write_lines(lane_result_key(created.batch_id, old, 0), late)
    # Then Finalize keeps the rescue lane's answers only, and Settle charges them once
    batch = run.settle()
    rows = list(run.artifacts.lines(results_key(created.batch_id)))
    assert len(rows) == 4 and all(r["output"] != {"text": "late"} for r in rows)
    tallies = batch.lane_tallies or {}
    assert int(tallies[rescue.lane_key]["completed"]) == 4
    assert int((tallies.get(old.lane_key) or {}).get("completed", 0)) == 0
    assert int(tallies[old.lane_key]["late"]) == 4  # recorded on the old lane's tally
    receipt_lanes = {entry["lane_key"]: entry for entry in (batch.billing or {})["provider_lanes"]}
    assert receipt_lanes[old.lane_key]["item_counts"]["completed"] == 0
    _settled_exactly(org.org_id, batch, created.reserved)
    assert json.dumps(rows)  # the artifacts are plain JSON


def test_the_rescue_setting_is_read_at_the_edge_and_kept_on_the_batch(
    stack: LocalStack, org: TestOrg
) -> None:
    client = TestClient(create_app(), raise_server_exceptions=False)
    headers = org.key_headers()
    items = [_item(0), _item(1)]
    # A body with a bad setting is refused, naming the field
    bad_settings = (
        {"mode": "sometimes"},
        {"mode": "allow_overage"},  # without its cap
        {"mode": "within_reservation", "max_overage_usd": "1"},  # a cap without allow_overage
        {"mode": "allow_overage", "max_overage_usd": "0"},
        {"mode": "allow_overage", "max_overage_usd": "10000.01"},
        {"mode": "allow_overage", "max_overage_usd": "0.0000001"},
        "off",
    )
    for n, bad in enumerate(bad_settings):
        refused = client.post(
            "/v1/batches",
            json={"items": items, "rescue": bad},
            headers={**headers, "Idempotency-Key": f"rescue-bad-{n:04d}"},
        )
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "invalid_request"
        assert refused.json()["error"]["details"].get("field") == "rescue", refused.text
    # A good one is stored on the batch as given; without one the record has none (the default)
    for n, setting in enumerate(({"mode": "off"}, {"mode": "allow_overage", "max_overage_usd": "2.50"})):
        body = {"items": items, "rescue": setting}
        created = client.post(
            "/v1/batches", json=body, headers={**headers, "Idempotency-Key": f"rescue-ok-{n:04d}"}
        )
        assert created.status_code == 202, created.text
        batch = BatchRecords(get_settings().table_name("batches")).get(created.json()["batch"]["id"])
        assert batch is not None and RescueSetting.from_item(batch.rescue) == RescueSetting.from_api(setting)
    # allow_overage is kept with its cap, in micro-dollars
    assert batch.rescue == {"mode": "allow_overage", "max_overage_micros": "2500000"}
    plain = client.post(
        "/v1/batches", json={"items": items}, headers={**headers, "Idempotency-Key": "rescue-ok-0009"}
    )
    assert plain.status_code == 202, plain.text
    record = BatchRecords(get_settings().table_name("batches")).get(plain.json()["batch"]["id"])
    assert record is not None and record.rescue is None


def test_a_slow_sync_lane_is_rescued_between_its_chunks(stack: LocalStack, org: TestOrg) -> None:
    # Given a batch on a sync lane (the cheapest, edge-eu) over two chunks, run one chunk per
    # invocation (60 s left each time)
    items = [_item(n, max_output_tokens=2000) for n in range(400)]
    created = create_batch(org.org_id, items, chunk_size=200)
    run = Run(stack, created, time_left_ms=60_000)
    lane = run.first_invocation()
    (old,) = _lanes(run).values()
    assert old.lane_id == f"edge-eu/{LLAMA}" and old.completed == 200
    # When the next invocation comes 22 h on (200 items in 22 h: the other 200 take 22 h more)
    answer = run.later(hours=22)
    # Then before starting its second chunk the lane handed it over, moving no count twice
    assert answer == {"lane_key": lane["lane_key"], "completed": 400, "failed": 0, "canceled": 0}
    old, rescue = run.handed(lane["lane_key"])
    assert rescue.handover_reason == DEADLINE_RESCUE and rescue.lane_id != old.lane_id
    assert rescue.completed == 200 and lane_chunks(rescue) == [1] and old.handed_over == 0
    running = run.records.get(created.batch_id)
    assert running is not None and {k: int(v) for k, v in (running.counts or {}).items()} == {
        "total": 400,
        "pending": 0,
        "running": 0,
        "completed": 400,
        "failed": 0,
        "canceled": 0,
    }
    batch = run.settle()
    assert batch.state == "completed"
    _settled_exactly(org.org_id, batch, created.reserved)


# -- allow_overage: a second hold on the wallet (docs/batches.md, docs/ledger.md) -------------

ALLOW_OVERAGE = RescueSetting.from_api({"mode": "allow_overage", "max_overage_usd": "5"})


def _dear_rescue(
    org_id: str, rescue: RescueSetting, *, max_output_tokens: int = 2000, webhook: bool = False
) -> CreatedBatch:
    """Two chunks on the vendor lane whose only eligible sync lane (fireworks) costs more than
    the quoted price, the second chunk's job stuck: its rescue needs more than the headroom."""
    items = [_item(n, max_output_tokens=max_output_tokens, stuck=n == 100) for n in range(200)]
    return _batch_on_the_vendor_lane(
        org_id, items, rescuers=("fireworks",), chunk_size=100, rescue=rescue, webhook=webhook
    )


def _ledger() -> LedgerStore:
    return LedgerStore(get_settings().table_name("ledger"))


def _overage_holds(run: Run) -> list[Reservation]:
    batch = run.records.get(run.batch.batch_id)
    assert batch is not None
    return [r for r in _ledger().reservations(batch.org_id) if r.purpose == "rescue_overage"]


def test_allow_overage_holds_what_the_rescue_needs_beyond_the_reservation_and_settle_resolves_it(
    stack: LocalStack, org: TestOrg
) -> None:
    # Given the rescue the reservation cannot cover (above), with allow_overage up to $5
    created = _dear_rescue(org.org_id, ALLOW_OVERAGE, webhook=True)
    run = Run(stack, created)
    lane = run.first_invocation()
    # When the second chunk's job is stuck at 40 % 22 h on
    answer = run.later(hours=22)
    assert answer == {"lane_key": lane["lane_key"], "completed": 200, "failed": 0, "canceled": 0}
    # Then the rescue lane took every unanswered item: no rest is left on the old lane
    old, rescue = run.handed(lane["lane_key"])
    assert rescue.lane_id == f"fireworks/{LLAMA}" and rescue.then_lane is None
    assert rescue.completed == 100 and old.completed == 100
    # paid by a second hold on the wallet, taken before the items moved, recorded on the batch
    (hold,) = _overage_holds(run)
    assert hold.status == "pending" and hold.ref == created.batch_id
    assert Money.zero() < hold.amount <= Money.usd("5")
    running = run.records.get(created.batch_id)
    assert running is not None and running.overage_hold_ids == [hold.reservation_id]
    assert running.overage_held_micros == hold.amount.micros
    in_flight = _ledger().state(org.org_id)
    assert in_flight.reserved == created.reserved + hold.amount
    assert in_flight.balance == Money.usd("10")  # held, nothing charged yet
    # and the customer is told what was held (batch.rescue_started)
    deliveries, _ = Wiring(get_settings(), SystemClock()).webhook_deliveries.list_for_batch(created.batch_id)
    (started,) = [json.loads(d.payload) for d in deliveries if d.event_type == "batch.rescue_started"]
    assert Money.usd(started["rescue"]["overage_held"]["amount"]) == hold.amount
    # And Settle charges the actual cost across both holds and releases the rest, exactly
    batch = run.settle()
    assert batch.state == "completed"
    rows = list(run.artifacts.lines(results_key(created.batch_id)))
    assert len(rows) == 200 and {r["status"] for r in rows} == {"completed"}
    charged = _settled_exactly(org.org_id, batch, created.reserved, hold.amount)
    (settled,) = _overage_holds(run)
    assert settled.status == "settled" and settled.charged + settled.released == hold.amount
    # the batch's reservation is charged first, the overage hold only beyond it
    main = _ledger().reservation(org.org_id, str(created.record.reservation_id))
    assert main is not None and main.charged == min(charged, created.reserved)
    assert settled.charged == charged - main.charged
    # And the receipt shows the hold on the rescue's row
    (shown,) = (batch.billing or {})["rescues"]
    assert shown["reason"] == "deadline_rescue" and shown["from_lane_key"] == old.lane_key
    assert Money.usd(shown["overage_held"]["amount"]) == hold.amount
    assert Money.usd(shown["overage_charged"]["amount"]) == settled.charged
    # And the charge reached the spend counters whole (the spending controls see it)
    assert sum(_ledger().spend_counters(org.org_id).values(), Money.zero()) == charged + charged


def test_a_batch_that_costs_more_than_its_reservation_is_charged_from_the_overage_hold(
    stack: LocalStack, org: TestOrg
) -> None:
    # Given the dear rescue with allow_overage, its items asking as many output tokens as the
    # simulator answers (16): the estimate is tight, the reservation leaves almost no headroom
    created = _dear_rescue(org.org_id, ALLOW_OVERAGE, max_output_tokens=16)
    run = Run(stack, created)
    lane = run.first_invocation()
    run.later(hours=22)
    # When the rescue took every item on an overage hold and the batch settles
    _old, rescue = run.handed(lane["lane_key"])
    assert rescue.then_lane is None and rescue.completed == 100
    (hold,) = _overage_holds(run)
    batch = run.settle()
    # Then the reservation is charged in full and the rest of the cost from the hold
    billing = batch.billing or {}
    charged = Money.usd(billing["credit_charged"]["amount"])
    released = Money.usd(billing["credit_released"]["amount"])
    total = Money.usd(billing["settled_total"]["amount"])
    main = _ledger().reservation(org.org_id, str(created.record.reservation_id))
    (settled,) = _overage_holds(run)
    assert main is not None and main.charged == created.reserved and main.released == Money.zero()
    assert Money.zero() < settled.charged and main.charged + settled.charged == charged
    assert charged == min(total, created.reserved + hold.amount)
    assert charged + released == created.reserved + hold.amount
    # (what the actual usage cost beyond both holds, if anything, is absorbed, never charged)
    assert Money.usd(billing["absorbed"]["amount"]) == total - charged
    (shown,) = billing["rescues"]
    assert Money.usd(shown["overage_charged"]["amount"]) == settled.charged
    # And the wallet paid exactly that: the balance never below zero, the ledger consistent
    state = _ledger().state(org.org_id)
    assert state.balance == Money.usd("10") - charged and state.reserved == Money.zero()
    assert _ledger().violations(org.org_id) == []
    assert sum(_ledger().spend_counters(org.org_id).values(), Money.zero()) == charged + charged


def _drain(org_id: str, hold_id: str) -> Money:
    """Another hold (a chat request's, say) takes every available micro-dollar of the wallet."""
    available = _ledger().balance(org_id)
    terms = ReservationTerms(reservation_id=hold_id, amount=available, purpose="chat_hold", ref=hold_id)
    _ledger().reserve(org_id, terms, at=isoformat(datetime.now().astimezone()))
    return available


def _kept_within_the_reservation(run: Run, lane_key: str) -> None:
    """The rescue took only what the reservation covers (the old lane kept the rest) and no
    overage hold is there."""
    _old, rescue = run.handed(lane_key)
    rest = _lanes(run)[str(rescue.then_lane)]
    assert rest.handover_reason == RESCUE_REST and 0 < rescue.completed < 100
    assert rescue.completed + rest.completed == 100
    assert _overage_holds(run) == []
    batch = run.records.get(run.batch.batch_id)
    assert batch is not None and not batch.overage_hold_ids and not batch.overage_held_micros


def test_allow_overage_with_a_wallet_that_cannot_cover_it_stays_within_the_reservation(
    stack: LocalStack, org: TestOrg
) -> None:
    # Given the dear rescue with allow_overage, and a wallet another hold emptied
    created = _dear_rescue(org.org_id, ALLOW_OVERAGE)
    run = Run(stack, created)
    lane = run.first_invocation()
    _drain(org.org_id, "chat_drain_1")
    # When the stuck job is judged 22 h on
    answer = run.later(hours=22)
    assert answer == {"lane_key": lane["lane_key"], "completed": 200, "failed": 0, "canceled": 0}
    # Then the rescue kept to the reservation: no overage hold, nothing overdrawn
    _kept_within_the_reservation(run, lane["lane_key"])
    assert _ledger().balance(org.org_id) == Money.zero()
    _ledger().release(org.org_id, "chat_drain_1", at=isoformat(run.clock.now()))
    batch = run.settle()
    _settled_exactly(org.org_id, batch, created.reserved)
    assert "overage_held" not in (batch.billing or {})["rescues"][0]


class _DrainedMeanwhile(RescueOverage):
    """The wallet is emptied by another submit between the hold's reads and its write."""

    def _hold_once(self, batch: BatchRecord, hold_id: str, amount: Money, cap: Money) -> None:
        original = self.funds.ledger.reserve_items

        def reserve_items(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
            items = original(*args, **kwargs)
            if _ledger().balance(batch.org_id) > Money.zero():
                _drain(batch.org_id, "chat_race_1")
            return items

        self.funds.ledger.reserve_items = reserve_items  # type: ignore[method-assign]
        try:
            super()._hold_once(batch, hold_id, amount, cap)
        finally:
            self.funds.ledger.reserve_items = original  # type: ignore[method-assign]


def test_an_overage_hold_refused_by_its_own_write_leaves_the_rescue_within_the_reservation(
    stack: LocalStack, org: TestOrg
) -> None:
    # Given the dear rescue with allow_overage, and a wallet emptied after the hold's checks
    # read it but before its transaction (a race)
    created = _dear_rescue(org.org_id, ALLOW_OVERAGE)
    wiring = Wiring(get_settings(), SystemClock())
    racing = _DrainedMeanwhile(
        records=wiring.batch_records,
        funds=Funds(
            LedgerStore(get_settings().table_name("ledger")),
            wiring.controls,
            wiring.limit_checks,
            wiring.billing_watch,
        ),
        clock=SystemClock(),
        work_orders=wiring.work_orders,
    )
    run = Run(stack, created, overage=racing)
    lane = run.first_invocation()
    # When the stuck job is judged 22 h on
    run.later(hours=22)
    # Then the hold's conditional write refused it and the rescue kept to the reservation
    _kept_within_the_reservation(run, lane["lane_key"])
    assert _ledger().balance(org.org_id) == Money.zero()
    assert _ledger().violations(org.org_id) == []
    _ledger().release(org.org_id, "chat_race_1", at=isoformat(run.clock.now()))
    _settled_exactly(org.org_id, run.settle(), created.reserved)


def test_allow_overage_never_takes_spend_past_a_hard_spending_limit(stack: LocalStack, org: TestOrg) -> None:
    # Given the dear rescue with allow_overage, and a hard daily limit that leaves the batch
    # half a cent of room beyond its reservation (its rescue would need about 1.5 cents)
    created = _dear_rescue(org.org_id, ALLOW_OVERAGE)
    limit = created.reserved + Money.usd("0.005")
    client = TestClient(create_app(), raise_server_exceptions=False)
    saved = client.put(
        "/v1/billing/controls",
        json={
            "limit_enabled": True,
            "limit_period": "daily",
            "limit_amount": format(limit.amount, "f"),
            "limit_mode": "hard",
        },
        headers=org.session_headers(),
    )
    assert saved.status_code == 200, saved.text
    run = Run(stack, created)
    lane = run.first_invocation()
    # When the stuck job is judged 22 h on
    run.later(hours=22)
    # Then the overage hold is capped at the limit's room: spend + in-flight stays within it
    (hold,) = _overage_holds(run)
    assert Money.zero() < hold.amount <= Money.usd("0.005")
    assert _ledger().state(org.org_id).reserved <= limit
    # and the rescue took only what the reservation and that hold pay for
    _old, rescue = run.handed(lane["lane_key"])
    rest = _lanes(run)[str(rescue.then_lane)]
    assert 0 < rescue.completed < 100 and rescue.completed + rest.completed == 100
    batch = run.settle()
    charged = _settled_exactly(org.org_id, batch, created.reserved, hold.amount)
    assert charged <= limit


def test_a_repeated_settle_resolves_the_overage_hold_once(stack: LocalStack, org: TestOrg) -> None:
    # Given a batch whose rescue took an overage hold, settled
    created = _dear_rescue(org.org_id, ALLOW_OVERAGE)
    run = Run(stack, created)
    run.first_invocation()
    run.later(hours=22)
    (hold,) = _overage_holds(run)
    first = run.settle()
    entries = _ledger().entries(org.org_id, limit=None)
    state = _ledger().state(org.org_id)
    # When Settle runs again (a repeated message)
    again = run.workflow.settle(run.task("settle"))
    # Then it replays: nothing is charged or released twice, the receipt is the same
    assert again["replayed"] is True
    assert _ledger().entries(org.org_id, limit=None) == entries and _ledger().state(org.org_id) == state
    releases = [
        e for e in entries if e["entry_type"] == "release" and e["reservation_id"] == hold.reservation_id
    ]
    assert len(releases) == 1 and int(releases[0]["amount_micros"]) == hold.amount.micros - int(
        (_overage_holds(run)[0]).charged.micros
    )
    second = run.records.get(created.batch_id)
    assert second is not None and second.billing == first.billing
    _settled_exactly(org.org_id, second, created.reserved, hold.amount)


def test_a_work_order_counts_its_members_overage_hold_as_reserved_until_settle(
    stack: LocalStack, org: TestOrg
) -> None:
    # Given the dear rescue with allow_overage, a member of a work order
    created = _dear_rescue(org.org_id, ALLOW_OVERAGE, max_output_tokens=16)
    orders = Wiring(get_settings(), SystemClock()).work_orders
    owner = Principal(org_id=org.org_id, role="owner", via="api_key", key_id="key_rescue")
    order_id = json.loads(orders.create(owner, CreateWorkOrder(request_hash="h"), None).body)["id"]
    orders.attach(owner, order_id, AddMember(kind="batch", member_id=created.batch_id))
    assert orders.get(owner, order_id).tallies.reserved_micros == created.reserved.micros
    # When its stuck lane is rescued on an overage hold
    run = Run(stack, created)
    run.first_invocation()
    run.later(hours=22)
    (hold,) = _overage_holds(run)
    # Then the work order counts the hold as reserved too, as its member does
    held = created.reserved.micros + hold.amount.micros
    assert orders.get(owner, order_id).tallies.reserved_micros == held
    (member,) = orders.members(owner, order_id, cursor=None, limit=10)["data"]
    assert Money.usd(member["reserved"]["amount"]).micros == held
    # And once settled nothing is left reserved and it charged what the batch charged
    batch = run.settle()
    tallies = orders.get(owner, order_id).tallies
    charged = Money.usd((batch.billing or {})["credit_charged"]["amount"])
    assert tallies.reserved_micros == 0 and tallies.charged_micros == charged.micros
    assert charged > created.reserved  # the hold paid part of it


def test_a_batch_holding_an_overage_joins_a_work_order_with_all_it_holds(
    stack: LocalStack, org: TestOrg
) -> None:
    # Given a batch whose rescue took an overage hold, still running
    created = _dear_rescue(org.org_id, ALLOW_OVERAGE, max_output_tokens=16)
    run = Run(stack, created)
    run.first_invocation()
    run.later(hours=22)
    (hold,) = _overage_holds(run)
    # When it is attached to a work order, then settles
    orders = Wiring(get_settings(), SystemClock()).work_orders
    owner = Principal(org_id=org.org_id, role="owner", via="api_key", key_id="key_rescue")
    order_id = json.loads(orders.create(owner, CreateWorkOrder(request_hash="h"), None).body)["id"]
    orders.attach(owner, order_id, AddMember(kind="batch", member_id=created.batch_id))
    # Then the work order counted the reservation and the hold, and nothing is left after Settle
    assert orders.get(owner, order_id).tallies.reserved_micros == created.reserved.micros + hold.amount.micros
    run.settle()
    assert orders.get(owner, order_id).tallies.reserved_micros == 0
