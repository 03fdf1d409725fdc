"""Delivery target rules (domain/delivery/targets.py), the bucket delivery's states and
schedule (domain/delivery/buckets.py), how the bucket's refusals are named
(adapters/customer_buckets.py), and the Deliver step and the sweeper handing work to the
bucket delivery (services/workflow)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import boto3
import httpx
import pytest
from boto3.exceptions import S3UploadFailedError
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectTimeoutError, EndpointConnectionError
from pydantic import ValidationError

from batchroute.adapters.customer_buckets import CustomerBucket, CustomerBuckets, refusal
from batchroute.adapters.dynamo.bucket_deliveries import delivery_from_item
from batchroute.adapters.dynamo.codec import from_item, plain, to_item
from batchroute.adapters.pinned_s3 import MAX_ANSWER_BYTES, UPLOAD_PIECE_BYTES, PinnedSender
from batchroute.clock import FixedClock
from batchroute.domain.batches.record import BatchChanges, BatchRecord
from batchroute.domain.delivery.buckets import (
    MAX_ATTEMPTS,
    RETRY_DELAYS_SECONDS,
    DeliveryError,
    DeliveryRecord,
    TargetDelivery,
    new_round,
    outcome,
)
from batchroute.domain.delivery.network import UrlGuard, reaches
from batchroute.domain.delivery.targets import (
    BucketRefused,
    CreateTarget,
    DeliveryTarget,
    UpdateTarget,
    apply_update,
    batch_object_keys,
    check_new,
    check_update,
    probe_object_key,
)
from batchroute.errors import InvalidRequest
from batchroute.observability import metrics
from batchroute.services.batches.launch import LaunchReport
from batchroute.services.billing.auto_topup import TopupSweep
from batchroute.services.delivery.targets import DeliveryTargets
from batchroute.services.workflow.retention_gc import ReclaimReport
from batchroute.services.workflow.steps import BatchWorkflow
from batchroute.services.workflow.sweeper import Sweeper
from batchroute.workflow.tasks import WorkflowTask
from functions.api.schemas.common import ContractBody
from functions.api.schemas.delivery.targets import DeliveryTargetCreate, DeliveryTargetUpdate

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
_Body = TypeVar("_Body", bound=ContractBody)
BODY = {
    "bucket": "acme-results",
    "region": "us-east-2",
    "access_key_id": "AKIAEXAMPLEKEY01",
    "secret_access_key": "secret/key+value-0123456789",
}


def _as_the_client_sees_it(model: type[_Body], body: Any) -> _Body:
    """The validated body, or the refusal the API answers, as an InvalidRequest."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        [error] = exc.errors()
        details = (error.get("ctx") or {}).get("details")
        raise InvalidRequest(error["msg"], code=error["type"], details=details) from exc


def parse_create(body: Any) -> dict[str, Any]:
    """The new target's fields as the service takes them (the command, checked)."""
    command = _as_the_client_sees_it(DeliveryTargetCreate, body).command()
    check_new(command)
    return asdict(command)


def parse_update(body: Any) -> dict[str, Any]:
    """The given fields of an update as the service takes them (the command, checked)."""
    command = _as_the_client_sees_it(DeliveryTargetUpdate, body).command()
    check_update(command)
    return {name: getattr(command, name) for name in command.given}


def _changes(**given: Any) -> UpdateTarget:
    return UpdateTarget(given=frozenset(given), **given)


def _target(**changes: Any) -> DeliveryTarget:
    values: dict[str, Any] = {
        "target_id": "dt_1",
        "org_id": "org_1",
        "name": "acme-results",
        "bucket": "acme-results",
        "access_key_id": "AKIAEXAMPLEKEY01",
        "secret_sealed": "c2VhbGVk",
        "region": "us-east-2",
        "created_at": "2026-06-01T00:00:00.000Z",
        "updated_at": "2026-06-01T00:00:00.000Z",
    }
    values.update(changes)
    return DeliveryTarget(**values)


# -- registration rules -----------------------------------------------------------------------
def test_a_minimal_aws_target_gets_its_defaults() -> None:
    values = parse_create(BODY)
    assert values == {
        **BODY,
        "enabled": True,
        "prefix": "",
        "endpoint_url": None,
        "name": None,
    }


def test_an_endpoint_url_is_normalised_to_its_origin() -> None:
    values = parse_create({**BODY, "region": None, "endpoint_url": " https://s3.example.com/ "})
    assert values["endpoint_url"] == "https://s3.example.com" and values["region"] is None


def test_an_endpoint_may_name_a_signing_region_aws_would_not() -> None:
    assert (
        parse_create({**BODY, "endpoint_url": "https://r2.example.com", "region": "auto"})["region"] == "auto"
    )
    with pytest.raises(InvalidRequest) as refused:
        parse_create({**BODY, "region": "auto"})
    assert refused.value.details == {"field": "region"}


@pytest.mark.parametrize(
    "bucket",
    [
        "ab",
        "a" * 64,
        "Upper",
        "under_score",
        "-start",
        "end-",
        "a..b",
        "a.-b",
        "a-.b",
        "10.0.0.1",
        "xn--abc",
        "sthree-x",
        "name-s3alias",
        "name--ol-s3",
        "name.mrap",
    ],
)
def test_bucket_names_follow_the_s3_rules(bucket: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_create({**BODY, "bucket": bucket})
    assert refused.value.code == "invalid_delivery_target" and refused.value.details == {"field": "bucket"}


@pytest.mark.parametrize("bucket", ["abc", "my.bucket.name", "a1-b2", "x" * 63])
def test_valid_bucket_names_pass(bucket: str) -> None:
    assert parse_create({**BODY, "bucket": bucket})["bucket"] == bucket


@pytest.mark.parametrize(
    ("prefix", "kept"),
    [
        ("/exports/batch/", "exports/batch"),
        ("a", "a"),
        ("", ""),
        ("/", ""),
        (None, ""),
        ("x=1/y(2)", "x=1/y(2)"),
    ],
)
def test_prefixes_lose_their_outer_slashes(prefix: Any, kept: str) -> None:
    assert parse_create({**BODY, "prefix": prefix})["prefix"] == kept


@pytest.mark.parametrize("prefix", ["a//b", "a/./b", "../up", "with space", "tab\t", "é", "x" * 513, 7])
def test_unsafe_prefixes_are_refused(prefix: Any) -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_create({**BODY, "prefix": prefix})
    assert refused.value.details == {"field": "prefix"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"bucket": "acme-results", "region": "us-east-1", "secret_access_key": "s" * 40}, "access_key_id"),
        ({"bucket": "acme-results", "region": "us-east-1", "access_key_id": "AKIA1234"}, "secret_access_key"),
        ({"region": "us-east-1", "access_key_id": "AKIA1234", "secret_access_key": "s" * 40}, "bucket"),
        ({**BODY, "region": None}, "region"),
        ({**BODY, "secret_access_key": "s" * 257}, "secret_access_key"),
        ({**BODY, "secret_access_key": "has a space in it"}, "secret_access_key"),
        ({**BODY, "access_key_id": "ab"}, "access_key_id"),
        ({**BODY, "endpoint_url": "https://s3.example.com?x=1"}, "endpoint_url"),
        ({**BODY, "endpoint_url": "https://s3.example.com:99999"}, "endpoint_url"),
        ({**BODY, "endpoint_url": 42}, "endpoint_url"),
        ({**BODY, "name": "x" * 65}, "name"),
        ({**BODY, "enabled": 1}, "enabled"),
        ({**BODY, "id": "dt_1"}, "id"),  # read-only fields are for PATCH, not create
    ],
)
def test_every_refusal_names_its_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_create(body)
    assert (refused.value.details or {}).get("field") == field


def test_a_non_object_body_is_refused() -> None:
    with pytest.raises(InvalidRequest):
        parse_create(["bucket"])


# -- the public view and object keys --------------------------------------------------------
def test_the_view_never_holds_the_secret_or_the_whole_key_id() -> None:
    target = _target()
    view = target.to_api()
    assert "secret_sealed" not in view and "secret_access_key" not in view
    assert target.secret_sealed not in repr(target) and target.secret_sealed not in str(view)
    assert view["access_key_id_last4"] == "EY01" and "AKIAEXAMPLEKEY01" not in str(view)
    assert view["secret_access_key_set"] is True


def test_artifacts_land_under_prefix_and_batch() -> None:
    assert batch_object_keys(_target(prefix="out/x"), "batch_9") == {
        "results": "out/x/batch_9/results.jsonl",
        "errors": "out/x/batch_9/errors.jsonl",
        "receipt": "out/x/batch_9/receipt.json",
    }
    assert batch_object_keys(_target(), "batch_9")["results"] == "batch_9/results.jsonl"
    assert probe_object_key(_target(prefix="p"), NOW) == "p/batchroute-test-20260601T120000000000Z.json"


# -- updates ------------------------------------------------------------------------------------
def test_a_secret_is_replaced_only_with_its_key_id() -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_update({"secret_access_key": "s" * 40})
    assert refused.value.details == {"field": "secret_access_key"}
    assert (
        parse_update({"access_key_id": "AKIA5678", "secret_access_key": "s" * 40})["access_key_id"]
        == "AKIA5678"
    )


def test_read_only_fields_of_a_get_answer_are_ignored_on_update() -> None:
    view = _target().to_api()
    assert parse_update({**view, "enabled": False}) == {
        k: view[k] for k in ("name", "endpoint_url", "region", "bucket", "prefix")
    } | {"enabled": False}


def test_an_update_rechecks_the_location_as_a_whole() -> None:
    target = _target()
    with pytest.raises(InvalidRequest) as refused:
        apply_update(target, _changes(**parse_update({"region": None})), at="t")
    assert refused.value.details == {"field": "region"}
    moved = apply_update(
        target, _changes(**parse_update({"endpoint_url": "https://s3.example.com", "region": None})), at="t"
    )
    assert (moved.endpoint_url, moved.region, moved.updated_at) == ("https://s3.example.com", None, "t")


def test_the_default_name_follows_the_bucket_but_a_chosen_one_stays() -> None:
    assert apply_update(_target(), _changes(bucket="new-bucket"), at="t").name == "new-bucket"
    named = _target(name="Exports")
    assert apply_update(named, _changes(bucket="new-bucket"), at="t").name == "Exports"
    assert apply_update(named, _changes(name=None), at="t").name == "acme-results"


# -- the delivery's outcome and schedule ---------------------------------------------------
def _share(state: str, code: str | None = None) -> TargetDelivery:
    error = DeliveryError(code, "no", "dt_x") if code else None
    return TargetDelivery("dt_x", "x", "b", state=state, last_error=error)  # type: ignore[arg-type]


def test_every_target_delivered_is_delivered() -> None:
    assert outcome([_share("delivered")], attempts=1, round_start=0, now=NOW) == ("delivered", None, None)


def test_failed_attempts_follow_the_schedule_then_stop() -> None:
    waits = []
    for attempts in range(1, MAX_ATTEMPTS + 1):
        state, next_at, error = outcome(
            [_share("delivered"), _share("failed", "AccessDenied")], attempts=attempts, round_start=0, now=NOW
        )
        assert state == "failed" and error is not None and error.code == "AccessDenied"
        waits.append(None if next_at is None else int((next_at - NOW).total_seconds()))
    assert waits == [*RETRY_DELAYS_SECONDS, None]
    assert sum(RETRY_DELAYS_SECONDS) == 74_160  # about 20.6 hours from the first attempt to the last


def test_no_retry_is_scheduled_once_the_results_are_gone() -> None:
    # Given an attempt whose failed targets all met retention's reclaim (nothing can succeed)
    gone = [_share("delivered"), _share("failed", "results_expired")]
    assert outcome(gone, attempts=1, round_start=0, now=NOW)[1] is None
    # Then no retry; but one target that may still succeed keeps the schedule
    mixed = [*gone, _share("failed", "AccessDenied")]
    assert outcome(mixed, attempts=1, round_start=0, now=NOW)[1] == NOW + timedelta(
        seconds=RETRY_DELAYS_SECONDS[0]
    )


def test_a_new_round_has_its_own_schedule() -> None:
    _, next_at, _ = outcome(
        [_share("failed", "x")], attempts=MAX_ATTEMPTS + 1, round_start=MAX_ATTEMPTS, now=NOW
    )
    assert next_at == NOW + timedelta(seconds=RETRY_DELAYS_SECONDS[0])
    assert [t.state for t in new_round([_share("delivered"), _share("failed", "x")])] == [
        "pending",
        "pending",
    ]


def test_due_and_lease() -> None:
    record = DeliveryRecord(
        "batch_1", "org_1", "failed", (), "t0", "t0", next_attempt_at="2026-06-01T12:00:00.000Z"
    )
    assert record.due("2026-06-01T12:00:00.000Z") and not record.due("2026-06-01T11:59:59.999Z")
    spent = DeliveryRecord("batch_1", "org_1", "failed", (), "t0", "t0")
    assert not spent.due("2999-01-01T00:00:00.000Z")
    running = DeliveryRecord(
        "batch_1", "org_1", "delivering", (), "t0", "t0", lease_until="2026-06-01T12:05:00.000Z"
    )
    assert not running.lease_expired("2026-06-01T12:05:00.000Z") and running.lease_expired(
        "2026-06-01T12:05:00.001Z"
    )


def test_a_record_survives_its_item_form() -> None:
    record = DeliveryRecord(
        "batch_1",
        "org_1",
        "failed",
        (_share("failed", "NoSuchBucket"), _share("delivered")),
        "t0",
        "t1",
        attempts=3,
        round_start=1,
        redeliveries=1,
        next_attempt_at="t2",
        last_error=DeliveryError("NoSuchBucket", "no", "dt_x"),
    )
    stored = from_item(to_item(asdict(record)))  # as DynamoDB gives it back: numbers Decimal
    assert delivery_from_item(plain(stored)) == record


def test_an_older_share_without_a_name_is_named_by_its_bucket() -> None:
    share = {"target_id": "dt_1", "bucket": "b", "state": "delivered", "objects": ["k"]}
    values = {"batch_id": "batch_1", "org_id": "org_1", "state": "delivered", "targets": [share]}
    record = delivery_from_item({**values, "created_at": "t0", "updated_at": "t1"})
    assert record.targets == (TargetDelivery("dt_1", "b", "b", state="delivered", objects=("k",)),)
    assert record.attempts == 0 and record.last_error is None


# -- the bucket's refusals, named ----------------------------------------------------------------
def _client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": f"{code} said no"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "PutObject",
    )


def test_the_buckets_own_codes_are_kept() -> None:
    refused = refusal(_client_error("AccessDenied", 403))
    assert (refused.code, refused.message) == ("AccessDenied", "AccessDenied said no")
    wrapped = S3UploadFailedError("Failed to upload: An error occurred (NoSuchBucket) when calling ...")
    assert refusal(wrapped).code == "NoSuchBucket"
    bare = ClientError({"Error": {}, "ResponseMetadata": {"HTTPStatusCode": 500}}, "PutObject")
    assert refusal(bare).code == "500"


def test_connection_failures_have_our_codes() -> None:
    assert refusal(EndpointConnectionError(endpoint_url="https://x")).code == "endpoint_unreachable"
    assert refusal(ConnectTimeoutError(endpoint_url="https://x")).code == "timeout"
    assert refusal(RuntimeError("???")).code == "bucket_error"


# -- the Deliver step and the sweeper --------------------------------------------------------------
@dataclass
class FakeRecord:
    state: str
    attempts: int


@dataclass
class FakeBuckets:
    delivered: list[str] = field(default_factory=list)
    due: list[str] = field(default_factory=list)

    def deliver_batch(self, batch: BatchRecord, *, now: datetime | None = None) -> FakeRecord | None:
        self.delivered.append(batch.batch_id)
        return FakeRecord("delivered", 1)

    def run_due(self, batch_id: str, *, now: datetime | None = None) -> FakeRecord | None:
        self.due.append(batch_id)
        return None


class Records:
    def __init__(self, batch: BatchRecord) -> None:
        self.batch = batch

    def record_step(self, batch_id: str, step: str, at: str) -> bool:
        return True

    def get(self, batch_id: str) -> BatchRecord | None:
        return self.batch

    def transition(self, batch_id: str, target: Any, *, at: str, extra: BatchChanges | None = None) -> bool:
        return False


def _batch(state: str) -> BatchRecord:
    return BatchRecord(batch_id="batch_1", org_id="org_1", state=state, created_at="t")  # type: ignore[arg-type]


def test_the_deliver_step_pushes_terminal_batches_only() -> None:
    buckets = FakeBuckets()
    task = WorkflowTask(step="deliver", batch_id="batch_1", task_token="tok")
    done = BatchWorkflow(Records(_batch("completed")), FixedClock(), buckets=buckets).deliver(task)
    assert done["bucket_delivery"] == {"state": "delivered", "attempts": 1}
    running = BatchWorkflow(Records(_batch("running")), FixedClock(), buckets=buckets).deliver(task)
    assert "bucket_delivery" not in running and buckets.delivered == ["batch_1"]


def test_the_deliver_bucket_message_runs_the_owed_attempt_and_answers_nothing() -> None:
    buckets = FakeBuckets()
    workflow = BatchWorkflow(Records(_batch("completed")), FixedClock(), buckets=buckets)
    step = workflow.deliver_bucket
    assert step(WorkflowTask(step="deliver_bucket", batch_id="batch_1", task_token="")) is None
    assert buckets.due == ["batch_1"]


@dataclass
class Report:
    queued: list[str] = field(default_factory=list)
    refreshed: list[str] = field(default_factory=list)
    attempted: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[str]]:
        return {"queued": self.queued}


class NoSweepWork:
    """Every duty of the sweeper with nothing due (for tests of the one under test): its
    batches, workflows and ledger, billing webhooks, bucket deliveries, retention, schedules
    (and deleted ones' histories), file checks, regression holds and auto top-ups; a balance
    watch that hears nothing."""

    def past_deadline(self, now_iso: str, limit: int = 100) -> list[str]:
        return []

    def retry_due(self) -> Report:
        return Report()

    def enqueue_due(self) -> Report:
        return Report()

    def collect(self) -> ReclaimReport:
        return ReclaimReport()

    def fire_due(self, *, limit: int = 100) -> dict[str, list[str]]:
        return {"created": []}

    def purge_deleted(self, *, limit: int = 100) -> list[str]:
        return []

    def resend_due(self, *, limit: int = 100) -> list[str]:
        return []

    def due_holds(self, now_iso: str, *, purpose: Any = None, limit: int = 100) -> list[Any]:
        return []

    def release(self, org_id: str, reservation_id: str, *, at: str, memo: str) -> Any:
        raise AssertionError("no hold is due")

    def sweep(self, *, limit: int = 50) -> TopupSweep:
        return TopupSweep()

    def moved(self, org_id: str, *, at: datetime, controls: Any = None) -> None:
        return None

    def open_holds(self, *args: Any, **kwargs: Any) -> list[Any]:
        return []

    def launch_unstarted(self, now: Any, *, limit: int = 100) -> LaunchReport:
        return LaunchReport()


@dataclass
class DueBuckets:
    """Bucket deliveries with batch_1 due: each run of them is noted in `calls`."""

    calls: list[str]

    def enqueue_due(self) -> Report:
        self.calls.append("buckets")
        return Report(queued=["batch_1"])


def _sweeper(webhooks: Any, bucket_deliveries: Any, *, billing_webhooks: Any = None) -> Sweeper:
    """A sweeper with nothing due but its `webhooks`, `bucket_deliveries` and `billing_webhooks`."""
    given = {"webhooks": webhooks, "bucket_deliveries": bucket_deliveries}
    return idle_sweeper(**given, **({"billing_webhooks": billing_webhooks} if billing_webhooks else {}))


def idle_sweeper(**duties: Any) -> Sweeper:
    """A sweeper with nothing due but the `duties` given (its fields by name)."""
    idle: Any = NoSweepWork()
    each = ("batches", "workflows", "ledger", "webhooks", "topups", "retention", "bucket_deliveries")
    more = ("billing_webhooks", "watch", "schedules", "file_checks", "regression_holds")
    unused: Any = None  # never reached: the ledger has no open hold
    fields = {
        **dict.fromkeys((*each, *more), idle),
        "chat_holds": unused,
        "catalog": unused,
        "controls": unused,
        "clock": FixedClock(),
        **duties,
    }
    return Sweeper(refresh_heartbeats=lambda: Report(), stale_hold_seconds=300, **fields)


def test_the_sweep_queues_due_bucket_deliveries() -> None:
    calls: list[str] = []

    class Webhooks:
        def retry_due(self) -> Report:
            return Report()

    sweeper = _sweeper(Webhooks(), DueBuckets(calls))
    assert sweeper.sweep()["bucket_deliveries"] == {"queued": ["batch_1"]} and calls == ["buckets"]


def test_a_sweep_step_that_raises_does_not_stop_the_later_steps() -> None:
    # Given webhook retries that raise (a record they cannot handle) and bucket deliveries due
    calls: list[str] = []

    class Broken:
        def retry_due(self) -> Report:
            calls.append("webhooks")
            raise KeyError("attempts")

    sweeper = _sweeper(Broken(), DueBuckets(calls), billing_webhooks=Broken())
    # When the sweep runs
    outcome = sweeper.sweep()
    # Then every step ran, the failed ones are named, and the others answered
    assert calls == ["webhooks", "webhooks", "buckets"]
    assert outcome["failed_steps"] == ["webhooks", "billing_webhooks"]
    assert outcome["bucket_deliveries"] == {"queued": ["batch_1"]} and "webhooks" not in outcome


def test_every_sweep_step_counts_what_it_did_in_its_metric_and_a_failed_one_in_the_alarms() -> None:
    # Given a sweep with bucket deliveries due and billing webhook retries that raise
    class Broken:
        def retry_due(self) -> Report:
            raise KeyError("attempts")

    sweeper = _sweeper(NoSweepWork(), DueBuckets([]), billing_webhooks=Broken())
    metrics.clear_metrics()
    try:
        # When the sweep runs
        sweeper.sweep()
        counted = {name: entry["Value"] for name, entry in metrics.metric_set.items()}
    finally:
        metrics.clear_metrics()
    # Then each step that ran recorded its count, nothing for the one that raised but the alarm
    assert counted["BucketDeliveryRetries"] == [1.0] and counted["WebhookRetries"] == [0.0]
    assert counted["SweepStepFailed"] == [1.0] and "BillingWebhookRetries" not in counted
    every = {"LaneHeartbeats", "WorkflowsStartedLate", "BatchesExpired", "StaleChatHoldsSettled"}
    every |= {"AbandonedRegressionHoldsReleased", "BatchesReclaimed", "SchedulesFired"}
    every |= {"ScheduleHistoriesPurged", "FileChecksResent", "AutoTopupsCharged"}
    assert every <= set(counted)


# -- the pinned transport of customer endpoints --------------------------------------------------
def _pinned_client(sender: Any, *, attempts: int = 1) -> Any:
    """An S3 client that sends through `sender`, retrying (standard mode) up to `attempts`."""
    s3 = boto3.session.Session().client(
        "s3",
        region_name="us-east-1",
        endpoint_url="https://s3.customer.example",
        aws_access_key_id="AKIAEXAMPLEKEY01",
        aws_secret_access_key="secret-value-0123456789",
        config=Config(
            s3={"addressing_style": "path"},
            retries={"mode": "standard", "total_max_attempts": attempts},
            request_checksum_calculation="when_required",
        ),
    )
    s3.meta.events.register_first("before-send.s3", sender)
    return s3


class _Clock:
    """Monotonic seconds that move only when the fake endpoint says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Wire(httpx.SyncByteStream):
    """An answer body as an endpoint sends it: `count` chunks, each `gap` seconds after the
    last on the fake clock; counts what was taken off the wire."""

    def __init__(self, chunk: bytes, count: int, *, clock: _Clock | None = None, gap: float = 0) -> None:
        self.chunk, self.count, self.clock, self.gap = chunk, count, clock, gap
        self.sent = 0
        self.closed = False

    def __iter__(self) -> Any:
        for _ in range(self.count):
            if self.clock is not None:
                self.clock.now += self.gap
            self.sent += len(self.chunk)
            yield self.chunk

    def close(self) -> None:
        self.closed = True


CHUNK = 64 * 1024
HUGE = 1600  # chunks of 64 KiB: 100 MiB, never produced whole


def _bucket(answer: Any, *, clock: _Clock | None = None, deadline: float = 10) -> CustomerBucket:
    sender = PinnedSender(
        UrlGuard(resolve=lambda host, port: ["93.184.215.14"]),
        connect_timeout=1,
        read_timeout=1,
        deadline_seconds=deadline,
        transport=answer if isinstance(answer, httpx.BaseTransport) else httpx.MockTransport(answer),
        clock=clock or _Clock(),
    )
    return CustomerBucket(_target(endpoint_url="https://s3.customer.example"), _pinned_client(sender))


def test_requests_go_to_the_checked_address_with_the_name_as_host_and_sni() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers={"ETag": '"abc"'})

    sender = PinnedSender(
        UrlGuard(resolve=lambda host, port: ["93.184.215.14"]),
        connect_timeout=1,
        read_timeout=1,
        deadline_seconds=10,
        transport=httpx.MockTransport(answer),
    )
    _pinned_client(sender).put_object(Bucket="acme-results", Key="a/b.json", Body=b"{}")
    (request,) = seen
    assert request.url.host == "93.184.215.14" and request.url.path == "/acme-results/a/b.json"
    assert request.headers["host"] == "s3.customer.example"
    assert request.extensions["sni_hostname"] == "s3.customer.example"
    assert request.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIAEXAMPLEKEY01/")
    assert request.content == b"{}" and "expect" not in request.headers


def test_a_name_that_now_resolves_inward_is_refused_before_any_connection() -> None:
    # Public when registered; the name now answers with the metadata address (rebinding)
    buckets = CustomerBuckets(UrlGuard(resolve=lambda host, port: ["169.254.169.254"]))
    target = _target(endpoint_url="https://s3.customer.example", region=None)
    with pytest.raises(BucketRefused) as refused:  # sockets are off: no connection was tried
        buckets.open(target, "secret-value-0123456789").put("k", b"{}", content_type="application/json")
    assert refused.value.code == "unsafe_url" and "169.254.169.254" in refused.value.message


@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"])
def test_an_aws_target_goes_to_aws_whatever_endpoint_the_service_itself_is_configured_with(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    # Given a service whose own AWS clients are pointed elsewhere (local mode: its moto)
    monkeypatch.setenv(variable, "http://127.0.0.1:5000")
    buckets = CustomerBuckets(UrlGuard(resolve=lambda host, port: ["93.184.215.14"]))
    # Then a target with no endpoint_url still goes to S3 in its region: never the service's
    # own store, where no customer key is checked
    bucket = buckets.open(_target(region="eu-west-1"), "secret-value-0123456789")
    assert bucket.s3.meta.endpoint_url == "https://s3.eu-west-1.amazonaws.com"
    # And a custom endpoint stays the one the customer named
    endpoint = _target(endpoint_url="https://s3.customer.example", region=None)
    custom = buckets.open(endpoint, "secret-0123456789")
    assert custom.s3.meta.endpoint_url == "https://s3.customer.example"


# -- small reads and a deadline: the customer's endpoint is not trusted to be small or quick ------
@pytest.mark.parametrize("status", [200, 403])
def test_an_oversize_answer_is_refused_after_the_cap_and_one_chunk(status: int) -> None:
    wire = _Wire(b"A" * CHUNK, HUGE)  # no Content-Length: only reading tells the size
    bucket = _bucket(lambda request: httpx.Response(status, stream=wire))
    with pytest.raises(BucketRefused) as refused:
        bucket.put("k", b"{}", content_type="application/json")
    assert refused.value.code == "response_too_large"
    assert MAX_ANSWER_BYTES < wire.sent <= MAX_ANSWER_BYTES + CHUNK and wire.closed


def test_an_answer_announced_too_large_is_refused_unread() -> None:
    wire = _Wire(b"A" * CHUNK, HUGE)
    length = {"Content-Length": str(HUGE * CHUNK)}
    bucket = _bucket(lambda request: httpx.Response(200, headers=length, stream=wire))
    with pytest.raises(BucketRefused) as refused:
        bucket.keys("in/", limit=10)
    assert refused.value.code == "response_too_large" and wire.sent == 0 and wire.closed


def test_an_object_is_read_only_up_to_the_callers_limit() -> None:
    wire = _Wire(b"A" * CHUNK, HUGE)
    bucket = _bucket(lambda request: httpx.Response(200, stream=wire))
    with pytest.raises(BucketRefused) as refused:
        bucket.read("in/a.jsonl", max_bytes=100_000)
    assert refused.value.code == "object_too_large"
    assert 100_001 <= wire.sent <= 100_001 + CHUNK and wire.closed


def test_an_object_announced_larger_than_the_limit_is_refused_unread() -> None:
    wire = _Wire(b"A" * CHUNK, HUGE)
    length = {"Content-Length": str(HUGE * CHUNK)}
    bucket = _bucket(lambda request: httpx.Response(200, headers=length, stream=wire))
    with pytest.raises(BucketRefused) as refused:
        bucket.read("in/a.jsonl", max_bytes=100_000)
    assert refused.value.code == "object_too_large" and wire.sent == 0 and wire.closed


@pytest.mark.parametrize("operation", ["put", "read"])
def test_a_slow_drip_answer_is_cut_at_the_deadline(operation: str) -> None:
    clock = _Clock()
    wire = _Wire(b" ", 10_000, clock=clock, gap=1)  # one byte a second, each inside the read time-out
    bucket = _bucket(lambda request: httpx.Response(200, stream=wire), clock=clock, deadline=10)

    def call() -> None:
        if operation == "put":
            bucket.put("k", b"{}", content_type="application/json")
        else:
            bucket.read("in/a.jsonl", max_bytes=1_000_000)

    with pytest.raises(BucketRefused) as refused:
        call()
    assert refused.value.code == "timeout"
    assert clock.now == 10 and wire.sent == 10 and wire.closed


def test_a_deadline_passed_is_not_tried_again_by_botocores_retry() -> None:
    # Given the deliveries' retry config (two tries) and an endpoint that drips a byte a second
    clock = _Clock()
    wire = _Wire(b" ", 10_000, clock=clock, gap=1)
    sender = PinnedSender(
        UrlGuard(resolve=lambda host, port: ["93.184.215.14"]),
        connect_timeout=1,
        read_timeout=1,
        deadline_seconds=10,
        transport=httpx.MockTransport(lambda request: httpx.Response(200, stream=wire)),
        clock=clock,
    )
    bucket = CustomerBucket(
        _target(endpoint_url="https://s3.customer.example"), _pinned_client(sender, attempts=2)
    )
    # When a put meets the deadline, then it is refused once, at the deadline, not 2 x 10 s
    with pytest.raises(BucketRefused) as refused:
        bucket.put("k", b"{}", content_type="application/json")
    assert refused.value.code == "timeout"
    assert clock.now == 10 and wire.sent == 10


def test_a_slow_reading_endpoint_cannot_hold_an_upload_past_the_deadline() -> None:
    clock = _Clock()
    taken: list[int] = []

    class SlowReader(httpx.BaseTransport):  # MockTransport would read the whole body at once
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            for piece in request.stream:  # type: ignore[union-attr]  # one piece a second
                clock.now += 1
                taken.append(len(piece))
            return httpx.Response(200)

    with pytest.raises(BucketRefused) as refused:
        _bucket(SlowReader(), clock=clock, deadline=10).put(
            "k", b"x" * (4 * 1024 * 1024), content_type="text/plain"
        )
    assert refused.value.code == "timeout"
    assert len(taken) == 10 and set(taken) == {UPLOAD_PIECE_BYTES}


def test_normal_answers_still_parse_through_the_bounded_reads() -> None:
    listing = (
        b'<?xml version="1.0" encoding="UTF-8"?>'
        b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>acme-results</Name>'
        b"<Prefix>in/</Prefix><KeyCount>2</KeyCount><MaxKeys>10</MaxKeys><IsTruncated>false</IsTruncated>"
        b"<Contents><Key>in/a.jsonl</Key><Size>12</Size></Contents>"
        b"<Contents><Key>in/b.jsonl</Key><Size>12</Size></Contents></ListBucketResult>"
    )
    uploaded: list[tuple[str, bytes, str]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "PUT":
            uploaded.append((request.url.path, request.read(), request.headers["content-length"]))
            return httpx.Response(200, headers={"ETag": '"abc"'})
        if "list-type" in request.url.params:
            return httpx.Response(200, content=listing)
        if request.url.path.endswith("/in/a.jsonl"):
            return httpx.Response(200, content=b'{"n": 1}\n' * 2)
        return httpx.Response(200, stream=_Wire(b'{"n": 2}\n', 2))  # no Content-Length

    bucket = _bucket(answer)
    bucket.put("out/r.jsonl", b"x" * 200_000, content_type="application/jsonl")
    assert uploaded == [("/acme-results/out/r.jsonl", b"x" * 200_000, "200000")]
    assert bucket.keys("in/", limit=10) == ["in/a.jsonl", "in/b.jsonl"]
    assert bucket.read("in/a.jsonl", max_bytes=18) == b'{"n": 1}\n' * 2
    assert bucket.read("in/b.jsonl", max_bytes=18) == b'{"n": 2}\n' * 2


def test_a_bucket_error_body_is_still_the_buckets_own_code() -> None:
    denied = (
        b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
        b"<Message>Access Denied</Message></Error>"
    )
    bucket = _bucket(lambda request: httpx.Response(403, content=denied))
    with pytest.raises(BucketRefused) as refused:
        bucket.read("in/a.jsonl", max_bytes=10)
    assert (refused.value.code, refused.value.message) == ("AccessDenied", "Access Denied")


def test_a_target_test_makes_one_try_and_a_delivery_two() -> None:
    target = _target(endpoint_url="https://s3.customer.example", region=None)
    buckets = CustomerBuckets(UrlGuard(resolve=lambda host, port: ["93.184.215.14"]))
    probe = buckets.for_probes()
    # The test answers inside API Gateway's 29 s: its deadline plus one read already waiting
    assert probe.deadline_seconds + probe.read_timeout < 29 - 5 and probe.connect_timeout < 5
    # A delivery: a try that timed out reading, then one cut at its deadline (not retried),
    # ends inside the deliver worker's 120 s
    assert buckets.read_timeout + buckets.deadline_seconds + buckets.read_timeout < 120
    tries = [b.open(target, "secret-value-0123456789").s3.meta.config.retries for b in (probe, buckets)]
    assert [t["total_max_attempts"] for t in tries] == [1, 2]


@pytest.mark.parametrize(
    ("endpoint", "own", "same"),
    [
        ("http://127.0.0.1:5000", "http://127.0.0.1:5000", True),
        ("http://127.0.0.1:5000", "http://localhost:5000", True),  # another name of this machine
        ("http://127.0.0.1:5001", "http://127.0.0.1:5000", False),  # another port: another server
        ("https://s3.customer.example", "http://127.0.0.1:5000", False),
    ],
)
def test_the_services_own_storage_is_never_a_target(endpoint: str, own: str, same: bool) -> None:
    # Local mode points the service's own clients at its moto, where no key is checked: an org
    # registering it as its target (loopback endpoints are allowed locally) would read and write
    # every org's objects
    guard = UrlGuard(allow_loopback=True, environment="local", resolve=lambda host, port: ["93.184.215.14"])
    targets = DeliveryTargets(
        store=None,  # type: ignore[arg-type]  (refused before any store call)
        sealer=None,  # type: ignore[arg-type]
        buckets=None,  # type: ignore[arg-type]
        check_url=guard.check,
        clock=FixedClock(),
        own_endpoint=own,
    )
    assert reaches(guard.check(endpoint), own) is same
    if not same:
        return
    command = CreateTarget(
        bucket="acme-results", access_key_id="AKIAEXAMPLEKEY01", secret_access_key="s" * 20
    )
    with pytest.raises(InvalidRequest) as refused:
        targets.create("org_1", replace(command, endpoint_url=endpoint))
    assert refused.value.code == "unsafe_url" and (refused.value.details or {})["field"] == "endpoint_url"
    # And a target saved before is refused at each delivery too
    with pytest.raises(BucketRefused) as at_delivery:
        targets.open(_target(endpoint_url=endpoint, region=None))
    assert at_delivery.value.code == "unsafe_url"


@pytest.mark.parametrize("status", [301, 302, 307])
def test_a_redirect_from_the_endpoint_is_refused_at_once_not_followed(status: int) -> None:
    # Given an endpoint that answers every request with a redirect (S3's own region redirect,
    # or any other): botocore's region redirector would try again, and again
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = b"<Error><Code>PermanentRedirect</Code><Message>Use the other endpoint.</Message></Error>"
        headers = {"Location": "https://elsewhere.example/", "x-amz-bucket-region": "eu-west-1"}
        return httpx.Response(status, headers=headers, content=body)

    bucket = _bucket(answer)
    # Then the first answer ends it: one request, refused with the documented code
    with pytest.raises(BucketRefused) as refused:
        bucket.put("k", b"{}", content_type="application/json")
    assert len(seen) == 1
    assert refused.value.code == "PermanentRedirect"
    assert f"HTTP {status}" in refused.value.message
