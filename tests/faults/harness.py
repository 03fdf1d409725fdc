"""The fault suite's harness (issue 27 point 4, docs/reliability.md): one small batch through
the REAL pipeline (moto's Step Functions, SQS and DynamoDB; the real handlers; the vendor
emulators over HTTP), a fault injected in one real layer, then ONE checker of what must
hold whatever the fault: every item terminal exactly once, a result for every completed
item, money exact, every webhook event delivered at least once under one event id.

Injectors, each in the layer the fault lives in:
- vendor faults: the emulators' own controls (`Behaviour.inject`, the `[simulate:...]` markers);
- AWS faults: a botocore `before-call` hook on every client made while it is installed
  (throttling, transaction conflicts, S3 refusals answered as AWS answers them);
- SQS duplicates, a task that fails or times out: wrappers around the queue consumers, as the
  event source mapping would invoke them;
- the webhook receiver: a local HTTP server that is down until the injectable clock says.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import boto3
import botocore.session
from botocore.awsrequest import AWSResponse

from batchroute import wiring as wiring_module
from batchroute.adapters.aws import reset_clients
from batchroute.adapters.batch_artifacts import BatchArtifacts, results_key
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.dynamo.webhook_deliveries import WebhookDeliveries
from batchroute.adapters.s3_objects import S3Objects
from batchroute.clock import FixedClock
from batchroute.config import get_settings
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.batches.states import TERMINAL
from batchroute.domain.delivery.webhooks import delivery_id_for, event_type_for
from batchroute.domain.routing.lane_plan import lane_done_chunks
from batchroute.money import Money
from batchroute_tools.emulators.behaviour import Behaviour
from batchroute_tools.local.lambda_runtime import context_for, load_handler
from batchroute_tools.local.poller import QueuePoller
from batchroute_tools.local.provision import LocalStack
from tests.integration.batch_pipeline_support import (
    GPT,
    LLAMA,
    CreatedBatch,
    create_batch,
    item,
    pollers,
    start,
)
from tests.integration.test_batch_pipeline import _expected_charge
from tests.integration.test_webhook_delivery import Receiver

Handler = Callable[[dict[str, Any], Any], Any]
ITEMS_PER_BATCH = 16
CREDIT_USD = "10"


# -- the suite's tally: what the session-finish hook prints --------------------------------------
@dataclass
class SuiteTally:
    scenarios: int = 0
    items: int = 0
    faults: int = 0
    lost: int = 0
    double_charges: int = 0

    def line(self) -> str:
        return (
            f"fault suite: {self.scenarios} scenarios, {self.items} items, {self.faults} faults injected, "
            f"{self.lost} lost, {self.double_charges} double charges"
        )


TALLY = SuiteTally()


@dataclass
class Faults:
    """How many faults each injector injected in one scenario."""

    counts: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, n: int = 1) -> None:
        with self.lock:
            self.counts[kind] += n

    @property
    def total(self) -> int:
        return sum(self.counts.values())


# -- AWS faults at the botocore layer -----------------------------------------------------------
@dataclass
class AwsFault:
    """Answer `code` (HTTP `status`) instead of calling AWS, for calls of `service`.`operations`
    whose request `match`es: `times` times, on every `every`-th matching call after the first
    `after` (every=1: a burst of `times` calls in a row); with `window_seconds`, every such
    call from the first fault on, for that long (an outage in time, as throttling is), at
    most `times`."""

    service: str
    operations: frozenset[str]
    code: str
    status: int
    times: int
    every: int = 1
    after: int = 0
    window_seconds: float = 0.0
    started: float | None = None
    match: Callable[[dict[str, Any]], bool] = lambda request: True
    extra: Callable[[dict[str, Any]], dict[str, Any]] = lambda request: {}
    seen: int = 0
    left: int = -1

    def __post_init__(self) -> None:
        self.left = self.times

    def answer(self, service: str, operation: str, request: dict[str, Any]) -> Any:
        """`request` is the call as botocore serialized it (url_path, body, ...)."""
        if service != self.service or operation not in self.operations or self.left <= 0:
            return None
        if not self.match(request):
            return None
        self.seen += 1
        if self.seen <= self.after or (self.seen - self.after) % self.every:
            return None
        if self.window_seconds:
            self.started = self.started or time.monotonic()
            if time.monotonic() - self.started >= self.window_seconds:
                return None
        self.left -= 1
        http = AWSResponse("https://fault.invalid/", self.status, {}, None)
        body = {
            "Error": {"Code": self.code, "Message": f"injected {self.code}"},
            "ResponseMetadata": {"HTTPStatusCode": self.status, "RetryAttempts": 0},
            **self.extra(request),  # noqa: S610 (not Django)
        }
        return http, body


class BotocoreFaults:
    """A `before-call` hook on every botocore client made while installed: an armed fault
    short-circuits the call with AWS's error answer, as if the SDK's own retries had been
    spent (botocore raises the service's exception class from it)."""

    def __init__(self, tally: Faults) -> None:
        self.tally = tally
        self.faults: list[AwsFault] = []
        self.armed = False
        self.lock = threading.Lock()

    def install(self, monkeypatch: Any) -> None:
        original = botocore.session.Session.create_client

        def create_client(session: Any, service_name: str, *args: Any, **kwargs: Any) -> Any:
            made = original(session, service_name, *args, **kwargs)
            made.meta.events.register_first(
                f"before-call.{made.meta.service_model.service_id.hyphenize()}", self._hook
            )
            return made

        monkeypatch.setattr(botocore.session.Session, "create_client", create_client)
        reset_clients()  # the service's cached clients are made again, with the hook

    def add(self, fault: AwsFault) -> None:
        self.faults.append(fault)

    def _hook(self, model: Any, params: dict[str, Any], **_: Any) -> Any:
        if not self.armed:
            return None
        service = model.service_model.service_id.hyphenize()
        with self.lock:
            for fault in self.faults:
                answer = fault.answer(service, model.name, params)
                if answer is not None:
                    self.tally.add(f"{service}:{fault.code}")
                    return answer
        return None


def json_body(request: dict[str, Any]) -> dict[str, Any]:
    """The parameters of a JSON-protocol call (DynamoDB) as botocore serialized them."""
    body = request.get("body")
    if isinstance(body, bytes | str) and body:
        try:
            return dict(json.loads(body))
        except ValueError:
            return {}
    return {}


# -- the webhook receiver ----------------------------------------------------------------------
@dataclass
class WebhookOutage:
    """The test receiver (tests/integration/test_webhook_delivery.py) made to answer 503 while
    the injectable `clock` is before `down_until`; every event it was sent, by batch."""

    receiver: Receiver
    clock: FixedClock
    faults: Faults
    down_until: datetime | None = None

    def __post_init__(self) -> None:
        self.receiver.next_status = self.status_now  # type: ignore[method-assign]

    def status_now(self) -> int:
        if self.down_until is not None and self.clock.now() < self.down_until:
            self.faults.add("webhook:503")
            return 503
        return 200

    def events(self, batch_id: str) -> list[dict[str, Any]]:
        with self.receiver.lock:
            bodies = [json.loads(r.body) for r in self.receiver.received]
        return [b for b in bodies if b["batch"]["id"] == batch_id]


# -- the batch and the run ------------------------------------------------------------------------
def mixed_items(n: int = ITEMS_PER_BATCH, marker: str = "", every: int = 1) -> list[dict[str, Any]]:
    """`n` items over two lanes (Llama on a sync lane, GPT on OpenAI's batch API); `marker`
    in every `every`-th item's text."""
    return [
        item(k, GPT if k % 2 else LLAMA, text=marker if marker and k % every == 0 else "") for k in range(n)
    ]


@dataclass
class Pipeline:
    """The local stack with the emulators, and the consumers a scenario may wrap."""

    stack: LocalStack
    faults: Faults
    aws: BotocoreFaults
    webhooks: WebhookOutage
    clock: FixedClock
    org_id: str
    behaviour: Behaviour
    wrappers: dict[str, Callable[[Handler, QueuePoller], Handler]] = field(default_factory=dict)

    @property
    def faults_injected(self) -> int:
        return self.faults.total + sum(self.behaviour.answered.values())

    def consumers(self) -> list[QueuePoller]:
        made = pollers(self.stack)
        for poller in made:
            wrap = self.wrappers.get(poller.queue.key)
            if wrap is not None:
                poller.handler = wrap(poller.handler, poller)
        return made

    def run(self, created: CreatedBatch, *, budget_seconds: float = 60) -> dict[str, Any]:
        """Start the execution, poll every queue until it ends, then drain what is left
        (duplicates, continuations, deliveries), with the AWS faults armed throughout."""
        sfn = boto3.client("stepfunctions", region_name=self.stack.region)
        arn = start(self.stack, created.batch_id)
        consumers = self.consumers()
        deadline = time.monotonic() + budget_seconds
        self.aws.armed = True
        try:
            description = sfn.describe_execution(executionArn=arn)
            while description["status"] == "RUNNING":
                assert time.monotonic() < deadline, f"the workflow did not finish in time: {stuck(sfn, arn)}"
                if not any(p.poll_once().received for p in consumers):
                    time.sleep(0.02)
                description = sfn.describe_execution(executionArn=arn)
            drain(consumers, deadline)
        finally:
            self.aws.armed = False
        return dict(description)


def follow_schedule(
    pipeline: Pipeline, monkeypatch: Any, next_due: Callable[[], str | None], *, rounds: int = 10
) -> int:
    """After the run: the service's clock is the injectable one; jump it to each attempt
    `next_due` names (an ISO time, None when nothing is owed), run the real sweeper there and
    let the workers take what it queued. Returns the number of sweeps."""
    monkeypatch.setattr(wiring_module, "_system_clock", pipeline.clock)
    sweeper = load_handler("sweeper")
    stack = pipeline.stack
    context = context_for("sweeper", prefix=stack.prefix, region=stack.region, account=stack.account)
    pipeline.aws.armed = True
    try:
        for sweeps in range(rounds):
            due = next_due()
            if due is None:
                return sweeps
            pipeline.clock._now = max(pipeline.clock.now(), due_at(due))
            sweeper({}, context)
            drain(pipeline.consumers(), deadline=time.monotonic() + 30, quiet_seconds=0.3)
    finally:
        pipeline.aws.armed = False
    raise AssertionError(f"still owed after {rounds} sweeps")


def drain(consumers: list[QueuePoller], deadline: float, quiet_seconds: float = 1.3) -> None:
    """Poll until no queue has had a message for `quiet_seconds` (a message a consumer
    failed comes back after the poller's one-second redelivery delay)."""
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < quiet_seconds:
        assert time.monotonic() < deadline, "the queues did not drain in time"
        if any(p.poll_once().received for p in consumers):
            quiet_since = time.monotonic()
        else:
            time.sleep(0.05)


# -- the one checker ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    batch: BatchRecord
    items: int
    lost: int
    double_charges: int
    charged: Money
    rows: list[dict[str, Any]]


def check_end_conditions(
    pipeline: Pipeline, created: CreatedBatch, *, tally: SuiteTally | None = TALLY
) -> Outcome:
    """What must hold after any fault: asserts it, counts it into the suite's `tally`."""
    settings = get_settings()
    records = BatchRecords(settings.table_name("batches"))
    artifacts = BatchArtifacts(S3Objects(settings.buckets["artifacts"]))
    ledger = LedgerStore(settings.table_name("ledger"))
    batch = records.get(created.batch_id)
    assert batch is not None
    total = created.record.item_count
    problems: list[str] = []

    # Every item terminal exactly once: the batch is terminal, its counts add up, and
    # results.jsonl holds each item once, completed or failed.
    if batch.state not in TERMINAL:
        problems.append(f"batch is {batch.state}, not terminal")
    counts = {k: int(v) for k, v in (batch.counts or {}).items()}
    if counts["pending"] or counts["running"]:
        problems.append(f"items left pending/running: {counts}")
    if counts["completed"] + counts["failed"] + counts["canceled"] != total:
        problems.append(f"counts do not add up to {total}: {counts}")
    rows = list(artifacts.lines(results_key(created.batch_id), missing_ok=True))
    by_seq = Counter(int(r["sequence_number"]) for r in rows)
    missing = [seq for seq in range(total) if by_seq[seq] == 0]
    repeated = [seq for seq, n in by_seq.items() if n > 1]
    if missing:
        problems.append(f"items without a result row: {missing}")
    if repeated:
        problems.append(f"items with two result rows: {repeated}")
    if any(r["status"] not in ("completed", "failed") for r in rows):
        problems.append("a result row is not terminal")
    completed_rows = [r for r in rows if r["status"] == "completed"]
    if len(completed_rows) != counts["completed"]:
        problems.append(f"{len(completed_rows)} completed rows, counts say {counts['completed']}")
    if any(r["output"] is None for r in completed_rows):
        problems.append("a completed item has no output")

    # Each item's answer counted once: across every lane (failovers included), an item
    # completes in at most one lane result line, and each lane's usage is its lines' usage.
    completed_lines: Counter[int] = Counter()
    for lane in records.lanes(created.batch_id):
        prompt = completion = 0
        for chunk in lane_done_chunks(lane):
            for line in artifacts.result_lines(created.batch_id, lane, int(chunk)):
                if line["status"] == "completed":
                    completed_lines[int(line["seq"])] += 1
                    prompt += line["usage"]["prompt_tokens"]
                    completion += line["usage"]["completion_tokens"]
        usage = lane.usage
        if (usage.prompt_tokens, usage.completion_tokens) != (prompt, completion):
            problems.append(
                f"lane {lane.lane_key} counted usage {usage}, its lines hold {prompt}/{completion}"
            )
    answered_twice = [seq for seq, n in completed_lines.items() if n > 1]
    if answered_twice:
        problems.append(f"items completed twice: {answered_twice}")
    unanswered = [
        int(r["sequence_number"]) for r in completed_rows if not completed_lines[int(r["sequence_number"])]
    ]
    if unanswered:
        problems.append(f"completed rows without a lane answer: {unanswered}")

    # Money exact: the reservation resolved once (reserved = charged + released), one charge
    # entry at most, the charge what the completed items used, the wallet consistent.
    snapshot = ledger.snapshot(created.org_id)
    reservation_id = str(created.record.reservation_id)
    (reservation,) = [r for r in snapshot.reservations if r.reservation_id == reservation_id]
    entries = Counter(e.entry_type for e in snapshot.entries if e.reservation_id == reservation_id)
    if reservation.pending:
        problems.append("the reservation is still pending")
    if reservation.charged + reservation.released != reservation.amount:
        problems.append(
            f"charged {reservation.charged} + released {reservation.released} != {reservation.amount}"
        )
    if entries["charge"] > 1 or entries["release"] > 1:
        problems.append(f"the reservation was resolved more than once: {dict(entries)}")
    expected = min(_expected_charge(created.batch_id), created.reserved)
    if reservation.charged != expected:
        problems.append(f"charged {reservation.charged}, the completed items used {expected}")
    billing = batch.billing or {}
    if Money.usd((billing.get("credit_charged") or {}).get("amount", "-1")) != reservation.charged:
        problems.append(
            f"the batch's receipt says {billing.get('credit_charged')}, the ledger {reservation.charged}"
        )
    problems.extend(snapshot.violations())
    if snapshot.balance < 0:
        problems.append("the balance went negative")
    if Money(snapshot.balance, "usd") != Money.usd(CREDIT_USD) - reservation.charged:
        problems.append(f"balance {snapshot.balance} is not the credit less the one charge")

    # Each webhook event delivered (accepted) at least once, always under one event id.
    event_type = event_type_for(batch.state)
    deliveries = WebhookDeliveries(settings.table_name("batches"))
    delivery = deliveries.get(created.batch_id, delivery_id_for(created.batch_id, str(event_type)))
    if delivery is None:
        problems.append("no webhook delivery was made")
    else:
        ids = {event["id"] for event in pipeline.webhooks.events(created.batch_id)}
        if ids != {delivery.event_id}:
            problems.append(f"webhook event ids {ids}, the delivery's {delivery.event_id}")
        if delivery.status != "succeeded":  # the receiver accepted it
            problems.append(f"webhook delivery is {delivery.status}")

    lost = len(missing) + counts["pending"] + counts["running"]
    double_charges = len(answered_twice) + max(0, entries["charge"] - 1)
    if tally is not None:
        tally.scenarios += 1
        tally.items += total
        tally.faults += pipeline.faults_injected
        tally.lost += lost
        tally.double_charges += double_charges
    assert not problems, "\n".join(problems)
    return Outcome(batch, total, lost, double_charges, reservation.charged, rows)


def run_and_check(
    pipeline: Pipeline,
    items: list[dict[str, Any]],
    *,
    chunk_size: int = 4,
    then: Callable[[CreatedBatch], None] | None = None,
) -> Outcome:
    """One scenario's batch, made as batch create makes it, run to its end (and `then`, what
    the scenario does after the workflow: the retry schedule), and checked."""
    created = create_batch(pipeline.org_id, items, chunk_size=chunk_size)
    pipeline.run(created)
    if then is not None:
        then(created)
    return check_end_conditions(pipeline, created)


def delivered_twice(pipeline: Pipeline) -> Callable[[Handler, QueuePoller], Handler]:
    """A consumer wrapper: every message is sent to its queue again after the consumer took
    it, once (SQS's at-least-once delivery), so each arrives twice, the copy later."""
    sqs = boto3.client("sqs", region_name=pipeline.stack.region)

    def wrap(handler: Handler, poller: QueuePoller) -> Handler:
        def twice(event: dict[str, Any], context: Any) -> Any:
            answer = handler(event, context)
            for record in event["Records"]:
                if DUPLICATE not in record["messageAttributes"]:
                    sqs.send_message(
                        QueueUrl=poller.queue_url,
                        MessageBody=record["body"],
                        MessageAttributes={DUPLICATE: {"DataType": "String", "StringValue": "1"}},
                    )
                    pipeline.faults.add(f"sqs:duplicate:{poller.queue.key}")
            return answer

        return twice

    return wrap


DUPLICATE = "fault-duplicate"


def stuck(sfn: Any, arn: str) -> str:
    """Where a workflow that did not finish is: its last events and the batch's state."""
    events = sfn.get_execution_history(executionArn=arn, maxResults=1000, reverseOrder=True)["events"][:6]
    batch = BatchRecords(get_settings().table_name("batches")).get(arn.rsplit(":", 1)[-1])
    last = [(e["type"], e.get("stateEnteredEventDetails", {}).get("name")) for e in events]
    return f"batch {batch.state if batch else None} {batch.counts if batch else ''}, last events {last}"


def due_at(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def s3_path(request: dict[str, Any]) -> str:
    """The path of an S3 call's URL (the bucket in it for path-style endpoints)."""
    return urlsplit(str(request.get("url", ""))).path


def fail_task_once(
    pipeline: Pipeline, step: str, *, lane_prefix: str = ""
) -> Callable[[Handler, QueuePoller], Handler]:
    """A consumer wrapper: the first `step` message (of the lane whose key starts with
    `lane_prefix`) is not run; its workflow task is failed instead, as a worker that gives up
    fails it (`SendTaskFailure`)."""
    sfn = boto3.client("stepfunctions", region_name=pipeline.stack.region)
    failed: list[str] = []

    def chosen(task: dict[str, Any]) -> bool:
        lane = str((task.get("lane") or {}).get("lane_key", ""))
        return not failed and task["step"] == step and lane.startswith(lane_prefix)

    def wrap(handler: Handler, poller: QueuePoller) -> Handler:
        def failing(event: dict[str, Any], context: Any) -> Any:
            kept = []
            for record in event["Records"]:
                task = json.loads(record["body"])
                if not chosen(task):
                    kept.append(record)
                    continue
                failed.append(task["task_token"])
                sfn.send_task_failure(taskToken=task["task_token"], error="InjectedFailure", cause=step)
                pipeline.faults.add(f"sfn:task_failed:{step}")
            return handler({**event, "Records": kept}, context) if kept else None

        return failing

    return wrap


def hold_step(pipeline: Pipeline, step: str, seconds: float) -> Callable[[Handler, QueuePoller], Handler]:
    """A consumer wrapper: `step`'s messages are handed back to the queue (a worker that
    does not get to them) until `seconds` after the first was seen; then they run, late."""
    first_seen: list[float] = []

    def wrap(handler: Handler, poller: QueuePoller) -> Handler:
        def holding(event: dict[str, Any], context: Any) -> Any:
            held: list[dict[str, Any]] = []
            kept: list[dict[str, Any]] = []
            for record in event["Records"]:
                if json.loads(record["body"])["step"] != step:
                    kept.append(record)
                    continue
                if not first_seen:
                    first_seen.append(time.monotonic())
                    pipeline.faults.add(f"sfn:held:{step}")
                late = time.monotonic() - first_seen[0] >= seconds
                (kept if late else held).append(record)
            answer = handler({**event, "Records": kept}, context) if kept else None
            failures = list((answer or {}).get("batchItemFailures", []))
            return {"batchItemFailures": failures + [{"itemIdentifier": r["messageId"]} for r in held]}

        return holding

    return wrap


def shorten_task_timeout(pipeline: Pipeline, state: str, seconds: int) -> None:
    """The state machine as deployed, with `state`'s TimeoutSeconds cut to `seconds`."""
    sfn = boto3.client("stepfunctions", region_name=pipeline.stack.region)
    arn = pipeline.stack.state_machine_arn
    definition = json.loads(sfn.describe_state_machine(stateMachineArn=arn)["definition"])
    definition["States"][state]["TimeoutSeconds"] = seconds
    sfn.update_state_machine(stateMachineArn=arn, definition=json.dumps(definition))


def delivered_to_two_workers(pipeline: Pipeline) -> Callable[[Handler, QueuePoller], Handler]:
    """A consumer wrapper: each batch of messages is handed to two invocations at once (two
    threads), as SQS may when a message's visibility runs out while its first worker still
    runs. The first invocation's answer settles the messages."""

    def wrap(handler: Handler, poller: QueuePoller) -> Handler:
        def concurrently(event: dict[str, Any], context: Any) -> Any:
            answers: list[Any] = [None, None]

            def invoke(n: int) -> None:
                try:
                    answers[n] = handler(event, context)
                except Exception as exc:  # the poller's contract: a raise fails the batch
                    answers[n] = exc

            threads = [threading.Thread(target=invoke, args=(n,)) for n in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            pipeline.faults.add(f"sqs:concurrent:{poller.queue.key}", len(event["Records"]))
            if isinstance(answers[0], Exception):
                raise answers[0]
            return answers[0]

        return concurrently

    return wrap
