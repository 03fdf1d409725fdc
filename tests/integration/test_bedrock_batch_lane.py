"""A Bedrock batch lane through the lane runner, the real adapters (BedrockBatch at the
production minimum of 100 records per job, BedrockConverse), the Bedrock emulator and moto
S3: items too few for a batch inference job (a retry of one transient record, a 50-item
lane) are answered through Converse on the same lane, never failing the lane over; without
a sync adapter only those items fail over. And a CreateModelInvocationJob whose answer is
lost (a read time-out after Bedrock made the job) is tried again with the same
clientRequestToken: one job, not two billed ones."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError
from moto import mock_aws

from batchroute.clock import SystemClock
from batchroute.domain.catalog.catalog import Lane, LanePrice
from batchroute.providers.base import ProviderResult
from batchroute.providers.bedrock import BatchSettings, BedrockBatch, BedrockClients, BedrockConverse
from batchroute.providers.http import Timeouts
from batchroute.providers.retry import RetryPolicy
from batchroute.services.workflow.runner import LaneOutcome, SyncRemainder, build_request, run_lane_batch_job
from batchroute.services.workflow.submits import RememberedSubmits
from batchroute_tools.emulators.bedrock import BedrockEmulator
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.server import EmulatorServer
from tests.unit.test_remembered_submits import LaneNote

# The catalog's id: us-east-1 serves Claude 3.5 Haiku on demand only through its US profile.
CLAUDE = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
BUCKET = "batchroute-bedrock-batch"
ROLE = "arn:aws:iam::123456789012:role/batchroute-bedrock-batch"
REGION = "us-east-1"
LANE = Lane(
    provider="bedrock",
    model="claude-3-5-haiku",
    price=LanePrice(Decimal("1"), Decimal("2"), Decimal("0.5"), Decimal("1")),
    context_window=200_000,
    max_output_tokens=4096,
    operations=("responses",),
    provider_model_id=CLAUDE,
)


class Clock:
    """The emulator's clock; the lane runner's sleeps move it on (no test sleeps)."""

    def __init__(self) -> None:
        self.now = 1_750_000_000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, _seconds: float) -> None:
        self.now += 20


@dataclass
class Stack:
    emulator: BedrockEmulator
    clients: BedrockClients
    clock: Clock


@pytest.fixture
def stack() -> Iterator[Stack]:
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        clock = Clock()
        emulator = BedrockEmulator(Behaviour(EmulatorConfig(batch_seconds=10.0)), s3=s3, clock=clock)
        server = EmulatorServer([emulator.vendor]).start()
        try:
            clients = BedrockClients(
                region=REGION,
                runtime_url=emulator.runtime_url(server.base_url),
                control_url=emulator.control_url(server.base_url),
                timeouts=Timeouts(connect=2.0, read=10.0),
            )
            yield Stack(emulator, clients, clock)
        finally:
            server.stop()


@dataclass
class Items:
    count: int
    flaky: Collection[int] = ()
    results: dict[int, tuple[ProviderResult, int]] = field(default_factory=dict)

    def load(self, seqs: Collection[int] | None) -> list[tuple[int, dict[str, Any]]]:
        wanted = range(self.count) if seqs is None else sorted(seqs)
        return [(seq, self.item(seq)) for seq in wanted]

    def item(self, seq: int) -> dict[str, Any]:
        marker = " [simulate:transient]" if seq in self.flaky else ""
        return {
            "operation": "responses",
            "input": {"messages": [{"role": "user", "content": f"q{seq}{marker}"}]},
        }

    def on_result(self, seq: int, result: ProviderResult, attempts: int) -> None:
        self.results[seq] = (result, attempts)


def run(
    stack: Stack, items: Items, batch: BedrockBatch | RememberedSubmits, *, converse: bool = True
) -> LaneOutcome:
    sync = SyncRemainder(BedrockConverse("bedrock", stack.clients), concurrency=4) if converse else None
    return run_lane_batch_job(
        items.load,
        lane=LANE,
        provider=batch,
        retry=RetryPolicy(max_attempts=3, base_seconds=0, cap_seconds=0, sleeper=lambda _s: None),
        on_result=items.on_result,
        poll_interval_seconds=1,
        sleeper=stack.clock.sleep,
        sync=sync,
    )


def production_batch(stack: Stack) -> BedrockBatch:
    batch = BedrockBatch("bedrock", stack.clients, BatchSettings(bucket=BUCKET, role_arn=ROLE))
    assert batch.min_requests == batch.settings.min_records == 100  # the production default
    return batch


def test_one_transient_record_of_150_is_answered_on_attempt_2_and_the_lane_is_not_failed_over(
    stack: Stack,
) -> None:
    items = Items(150, flaky={7})
    outcome = run(stack, items, production_batch(stack))
    assert not outcome.unavailable and outcome.finished, outcome.latest_error
    assert sorted(items.results) == list(range(150))
    result, attempts = items.results[7]
    assert result.status == "completed" and attempts == 2
    assert len(stack.emulator._jobs) == 1  # the retry made no job: it went through Converse
    assert (outcome.completed, outcome.failed) == (150, 0)


def test_a_50_item_lane_is_answered_with_nothing_failed(stack: Stack) -> None:
    items = Items(50)
    outcome = run(stack, items, production_batch(stack))
    assert outcome.finished and not outcome.unavailable
    assert sorted(items.results) == list(range(50)) and (outcome.completed, outcome.failed) == (50, 0)
    assert stack.emulator._jobs == {}


def test_without_a_sync_adapter_only_the_retried_record_fails_over(stack: Stack) -> None:
    items = Items(150, flaky={7})
    outcome = run(stack, items, production_batch(stack), converse=False)
    assert sorted(items.results) == [seq for seq in range(150) if seq != 7]
    assert outcome.unavailable and outcome.latest_error is not None
    assert outcome.latest_error.code == "batch_too_small"


def test_a_lost_create_answer_is_retried_with_the_same_token_and_makes_one_job(stack: Stack) -> None:
    control = stack.clients.control()
    real_create: Callable[..., Any] = control.create_model_invocation_job
    calls: list[dict[str, Any]] = []

    def create_then_lose_answer(**kwargs: Any) -> Any:
        calls.append(kwargs)
        answer = real_create(**kwargs)  # Bedrock makes the job ...
        if len(calls) == 1:  # ... but its first answer never arrives
            raise ReadTimeoutError(endpoint_url=f"https://bedrock.{REGION}.amazonaws.com")
        return answer

    control.create_model_invocation_job = create_then_lose_answer
    try:
        batch = BedrockBatch(
            "bedrock", stack.clients, BatchSettings(bucket=BUCKET, role_arn=ROLE, min_records=1)
        )
        items = Items(5)
        outcome = run(stack, items, batch)
    finally:
        del control.create_model_invocation_job  # the client's own method again
    tokens = {c["clientRequestToken"] for c in calls}
    names = {c["jobName"] for c in calls}
    inputs = {c["inputDataConfig"]["s3InputDataConfig"]["s3Uri"] for c in calls}
    assert len(calls) == 2 and len(tokens) == len(names) == len(inputs) == 1
    assert tokens == names and len(next(iter(names))) <= 63
    assert len(stack.emulator._jobs) == 1
    assert outcome.finished and sorted(items.results) == list(range(5))


class FunctionDied(BaseException):
    """The Lambda ended (its time out, an out-of-memory kill) with the job made but not stored."""


def test_an_invocation_that_died_after_bedrock_made_the_job_is_followed_by_no_second_job(
    stack: Stack,
) -> None:
    control = stack.clients.control()
    real_create: Callable[..., Any] = control.create_model_invocation_job
    tokens: list[str] = []

    def create_then_die(**kwargs: Any) -> Any:
        tokens.append(kwargs["clientRequestToken"])
        answer = real_create(**kwargs)  # Bedrock makes the job ...
        if len(tokens) == 1:  # ... and the function dies before the lane record stores it
            raise FunctionDied
        return answer

    control.create_model_invocation_job = create_then_die
    batch = BedrockBatch("bedrock", stack.clients, BatchSettings(bucket=BUCKET, role_arn=ROLE, min_records=1))
    note = LaneNote()  # the lane record's `submitting`
    items = Items(5)
    try:
        with pytest.raises(FunctionDied):
            run(stack, items, RememberedSubmits(batch, chunk=0, note=note.write, clock=SystemClock()))
        # When the step runs again: no job stored, the dead invocation's note left
        again = RememberedSubmits(batch, chunk=0, note=note.write, clock=SystemClock(), left=note.value)
        outcome = run(stack, items, again)
    finally:
        del control.create_model_invocation_job
    # Then it submits under the noted key, and Bedrock answers the job it already made
    assert len(tokens) == 2 and len(set(tokens)) == 1
    assert len(stack.emulator._jobs) == 1
    assert outcome.finished and sorted(items.results) == list(range(5))


def test_a_canceled_batch_finds_the_job_a_dead_invocation_made_without_making_one(stack: Stack) -> None:
    # Given: an invocation noted its submit, Bedrock made the job, and the invocation died
    batch = BedrockBatch("bedrock", stack.clients, BatchSettings(bucket=BUCKET, role_arn=ROLE, min_records=1))
    noted = int(stack.clock.now)
    items = Items(3)
    made = batch.submit(
        [build_request(seq, item, LANE, attempt=1) for seq, item in items.load(None)], key="k1"
    )
    stack.clock.now += 2400
    batch.submit([build_request(9, items.item(9), LANE, attempt=1)], key="other")
    # When the batch is canceled and the lane looks the noted key up (FindsKeyedJobs)
    # Then ListModelInvocationJobs names that job's ARN, and no job is made
    assert batch.job_made("k1", since=noted) == made
    assert batch.job_made("never", since=noted) is None
    assert len(stack.emulator._jobs) == 2
    # And one stopped while it ran (Stopping, then Stopped) is still named: it keeps what it
    # finished
    since = int(stack.clock.now)
    running = batch.submit(
        [build_request(seq, item, LANE, attempt=1) for seq, item in items.load(None)], key="k2"
    )
    batch.cancel(running)
    assert batch.job_made("k2", since=since) == running
    stack.clock.now += 60
    assert batch.poll(running).state == "cancelled" and batch.job_made("k2", since=since) == running
