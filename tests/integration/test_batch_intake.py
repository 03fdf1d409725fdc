"""Issue 18: a batch over an input file is read, checked and chunked by the workflow's Intake
step, so create does no work that grows with the file; a file that fails intake ends the
batch `failed` with the preflight's answer and releases the whole reservation; Finalize runs
in committed slices, exact however often a slice's message is delivered."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.aws import client as aws_client
from batchroute.adapters.batch_artifacts import errors_key, results_index_key, results_key
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.s3_objects import S3Objects
from batchroute.clock import SystemClock
from batchroute.config import get_settings
from batchroute.domain.batches.record import BatchRecord
from batchroute.money import Money
from batchroute.services.batches.create import BatchService
from batchroute.services.batches.files import FileService
from batchroute.services.workflow.finalize import CURSOR, Finalizer
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
)
from tests.integration.principals import TestOrg, new_org
from tests.integration.test_batch_pipeline import _artifacts, _batch, _ledger, _records
from tests.integration.test_quotes import _item


@pytest.fixture
def client(stack: LocalStack) -> TestClient:
    return TestClient(create_app(), raise_server_exceptions=False)


@pytest.fixture
def org(stack: LocalStack) -> TestOrg:
    return new_org(credit_usd="10")


def _upload(client: TestClient, org: TestOrg, items: list[dict[str, Any]]) -> str:
    body = b"".join(json.dumps(i).encode() + b"\n" for i in items)
    answer = client.post(
        "/v1/files", content=body, headers={**org.key_headers(), "Content-Type": "application/jsonl"}
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["file"]["id"])


def _quote(client: TestClient, org: TestOrg, file_id: str) -> dict[str, Any]:
    answer = client.post("/v1/quotes/model", json={"input_file_id": file_id}, headers=org.key_headers())
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _create(client: TestClient, org: TestOrg, body: dict[str, Any], key: str) -> dict[str, Any]:
    answer = client.post("/v1/batches", json=body, headers={**org.key_headers(), "Idempotency-Key": key})
    assert answer.status_code == 202, answer.text
    return dict(answer.json()["batch"])


def _run(stack: LocalStack, batch_id: str) -> dict[str, Any]:
    arn = _batch(batch_id).execution_arn
    assert arn is not None
    return run_until_done(stack, arn, budget_seconds=60)


def _assert_reservation_resolved_once(org_id: str, batch: BatchRecord) -> tuple[Money, Money]:
    reservation = _ledger().reservation(org_id, str(batch.reservation_id))
    assert reservation is not None and reservation.status == "settled"
    assert reservation.charged + reservation.released == reservation.amount
    assert _ledger().state(org_id).reserved == Money.zero()
    assert _ledger().violations(org_id) == []
    return reservation.charged, reservation.released


# -- create does not read the file -----------------------------------------------------------------


def test_create_over_a_quoted_file_reads_no_item_and_intake_chunks_it(
    client: TestClient, org: TestOrg, stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a quoted input file of 5 items
    items = [_item(n) for n in range(4)] + [_item(4, GPT)]
    file_id = _upload(client, org, items)
    quote = _quote(client, org, file_id)
    # When the batch is created from the quote, counting what create reads and writes
    opened: list[str] = []
    written: list[str] = []
    real_open, real_writer = FileService.open_items, S3Objects.writer

    def counting_open(self: FileService, org_id: str, file: str) -> Any:
        opened.append(file)
        return real_open(self, org_id, file)

    def counting_writer(self: S3Objects, key: str, **kwargs: Any) -> Any:
        written.append(key)
        return real_writer(self, key, **kwargs)

    monkeypatch.setattr(FileService, "open_items", counting_open)
    monkeypatch.setattr(S3Objects, "writer", counting_writer)
    batch = _create(client, org, {"quote_id": quote["quote_id"], "input_file_id": file_id}, "intake-create-1")
    monkeypatch.setattr(FileService, "open_items", real_open)
    monkeypatch.setattr(S3Objects, "writer", real_writer)
    # Then create opened no item stream and wrote no object, yet reserved the quoted total
    assert opened == [] and written == []
    assert batch["state"] == "priced" and batch["counts"]["total"] == 5
    record = _batch(batch["id"])
    assert record.intake is not None and not record.intake.done
    assert Money(record.reserved_micros) == Money.usd(quote["pricing_estimate"]["total"]["amount"])
    assert _ledger().state(org.org_id).reserved == Money(record.reserved_micros)
    # And the workflow's Intake step writes the chunks, and the batch completes and settles once
    result = _run(stack, batch["id"])
    assert result["status"] == "SUCCEEDED"
    done = _batch(batch["id"])
    assert done.state == "completed" and done.intake is not None and done.intake.done is True
    assert done.chunk_count == 1 and done.chunk_models == [{_item(0)["model"]: 4, GPT: 1}]
    assert {k: int(v) for k, v in (done.counts or {}).items()}["total"] == 5
    assert [r["sequence_number"] for r in _artifacts().lines(results_key(done.batch_id))] == [0, 1, 2, 3, 4]
    _assert_reservation_resolved_once(org.org_id, done)


def _count_get_items(marker: str) -> tuple[list[str], Callable[..., None]]:
    """GetItem calls on DynamoDB whose key names `marker` (botocore's event hook)."""
    seen: list[str] = []

    def count(params: Mapping[str, Any], **_: Any) -> None:
        key = json.dumps(params.get("Key", {}), sort_keys=True)
        if marker in key:
            seen.append(key)

    return seen, count


def test_create_from_a_quote_alone_over_a_file_reads_the_quote_once_and_checks_its_policy_once(
    client: TestClient, org: TestOrg
) -> None:
    # Given a quoted input file, and a batch created naming only the quote (no input_file_id)
    file_id = _upload(client, org, [_item(n) for n in range(3)])
    quote = _quote(client, org, file_id)
    quotes, count_quotes = _count_get_items(f"QUOTE#{quote['quote_id']}")
    policies, count_policies = _count_get_items('"POLICY"')
    events = aws_client("dynamodb").meta.events
    events.register("before-parameter-build.dynamodb.GetItem", count_quotes)
    events.register("before-parameter-build.dynamodb.GetItem", count_policies)
    try:
        batch = _create(client, org, {"quote_id": quote["quote_id"]}, "intake-quote-only-1")
    finally:
        events.unregister("before-parameter-build.dynamodb.GetItem", count_quotes)
        events.unregister("before-parameter-build.dynamodb.GetItem", count_policies)
    # Then the quote's snapshot was read exactly once, and the route policy checked once
    assert len(quotes) == 1, quotes
    assert len(policies) == 1, policies
    # And the batch is over the quoted file, at the quoted price
    record = _batch(batch["id"])
    assert record.intake is not None and record.intake.file_id == file_id
    assert record.quote_id == quote["quote_id"] and batch["counts"]["total"] == 3
    assert Money(record.reserved_micros) == Money.usd(quote["pricing_estimate"]["total"]["amount"])


# -- intake failure --------------------------------------------------------------------------------


def test_a_file_that_fails_intake_ends_the_batch_failed_with_the_preflight_and_releases_all(
    client: TestClient, org: TestOrg, stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a quote over a good file, and a second file with an unknown model in it, which
    # create takes for the quoted one (as a profile that did not match its file would make it:
    # create refuses another file by its profile, and Intake is the check behind that)
    good = _upload(client, org, [_item(0), _item(1)])
    bad = _upload(client, org, [_item(0), {**_item(1), "model": "no-such-model"}])
    quote = _quote(client, org, good)
    monkeypatch.setattr(BatchService, "_check_quoted_file", lambda *_: None)
    # When a batch is created from the quote but over the bad file (create does not read it)
    batch = _create(client, org, {"quote_id": quote["quote_id"], "input_file_id": bad}, "intake-fail-1")
    reserved = Money(_batch(batch["id"]).reserved_micros)
    assert reserved > Money.zero()
    result = _run(stack, batch["id"])
    # Then the workflow ends failed, the batch is failed with the preflight's answer
    assert result["status"] == "FAILED"
    failed = _batch(batch["id"])
    assert failed.state == "failed"
    assert failed.latest_error is not None and failed.latest_error.startswith(
        "intake: batch_preflight_failed"
    )
    assert failed.intake is not None
    preflight = failed.intake.error.details["preflight"]
    assert preflight["ok"] is False
    assert [e["code"] for e in preflight["errors"]] == ["unknown_model"]
    assert failed.chunk_count == 0
    shown = client.get(f"/v1/batches/{batch['id']}", headers=org.key_headers()).json()["batch"]
    assert shown["state"] == "failed" and shown["execution_summary"]["preflight"] == preflight
    # And nothing is charged: the whole reservation is released, exactly once
    charged, released = _assert_reservation_resolved_once(org.org_id, failed)
    assert charged == Money.zero() and released == reserved
    assert _ledger().state(org.org_id).balance == Money.usd("10")


def test_a_file_whose_items_differ_from_the_quoted_ones_is_refused_before_any_reservation(
    client: TestClient, org: TestOrg, stack: LocalStack
) -> None:
    # Given a quote over one file, another valid file with different items, and a file that
    # failed its check (a malformed line: it has no item profile)
    quoted = _upload(client, org, [_item(0), _item(1)])
    other = _upload(client, org, [_item(0), _item(1), _item(2)])
    malformed = client.post(
        "/v1/files",
        content=json.dumps(_item(0)).encode() + b"\n{not json\n",
        headers={**org.key_headers(), "Content-Type": "application/jsonl"},
    ).json()["file"]
    assert malformed["status"] == "error", malformed
    quote = _quote(client, org, quoted)
    inline = client.post("/v1/quotes/model", json={"items": [_item(0)]}, headers=org.key_headers()).json()
    # When a batch is created from either quote over another file (was 202 and a reservation,
    # then a batch failed at intake)
    cases = [(quote["quote_id"], other), (inline["quote_id"], other), (quote["quote_id"], malformed["id"])]
    for key, (quote_id, file_id) in enumerate(cases):
        answer = client.post(
            "/v1/batches",
            json={"quote_id": quote_id, "input_file_id": file_id},
            headers={**org.key_headers(), "Idempotency-Key": f"intake-diff-{key}"},
        )
        # Then it is refused with quote_mismatch, naming both files, and nothing is reserved
        assert answer.status_code == 409, answer.text
        assert answer.json()["error"]["code"] == "quote_mismatch"
        assert answer.json()["error"]["details"]["input_file_id"] == file_id
    assert _ledger().state(org.org_id).reserved == Money.zero()
    assert client.get("/v1/batches", headers=org.key_headers()).json()["data"] == []


def test_another_file_holding_the_quoted_items_runs_on_the_quote(
    client: TestClient, org: TestOrg, stack: LocalStack
) -> None:
    # Given a quote over inline items, and a file holding the same items
    items = [_item(0), _item(1)]
    inline = client.post("/v1/quotes/model", json={"items": items}, headers=org.key_headers()).json()
    same = _upload(client, org, items)
    # When a batch is created from the quote over the file, Then it runs at the quoted price
    batch = _create(client, org, {"quote_id": inline["quote_id"], "input_file_id": same}, "intake-same-1")
    assert _run(stack, batch["id"])["status"] == "SUCCEEDED"
    assert _batch(batch["id"]).state == "completed"


@pytest.mark.parametrize("batch_wide", [False, True])
def test_items_naming_presets_in_another_file_run_on_the_quote(
    client: TestClient, org: TestOrg, stack: LocalStack, batch_wide: bool
) -> None:
    # Given a preset, a quote over inline items using it (per item, or batch-wide), and a file
    # holding the same items (the quote's digest is over the expanded items, the file's profile
    # over its lines or none: the profile cannot tell, so create must not refuse)
    made = client.post(
        "/v1/presets",
        json={
            "name": "house-style",
            "model": _item(0)["model"],
            "operation": "responses",
            "system_prompt": "Be brief.",
        },
        headers=org.key_headers(),
    )
    assert made.status_code == 201, made.text
    items = [_item(0), _item(1)] if batch_wide else [{**_item(n), "preset": "house-style"} for n in (0, 1)]
    extra = {"preset": "house-style"} if batch_wide else {}
    inline = client.post("/v1/quotes/model", json={"items": items, **extra}, headers=org.key_headers())
    assert inline.status_code == 200, inline.text
    same = _upload(client, org, items)
    # When a batch is created from the quote over the file, Then it runs
    body = {"quote_id": inline.json()["quote_id"], "input_file_id": same, **extra}
    batch = _create(client, org, body, f"intake-preset-{batch_wide}")
    assert _run(stack, batch["id"])["status"] == "SUCCEEDED"


# -- chunked Finalize ------------------------------------------------------------------------------


def _task(step: str, batch_id: str) -> WorkflowTask:
    return WorkflowTask.model_validate({"step": step, "batch_id": batch_id, "task_token": f"tok-{step}"})


class _Budget:
    """A scripted time budget: `slices` slices per invocation, then out of time."""

    def __init__(self, slices: int) -> None:
        self.slices = slices
        self.calls = 0

    def __call__(self) -> TimeBudget:
        self.calls = 0

        def remaining() -> int:
            self.calls += 1
            return 60_000 if self.calls <= self.slices else 0

        return TimeBudget(60, remaining_millis=remaining)


def _sliced_workflow(monkeypatch: pytest.MonkeyPatch, *, slices_per_invocation: int) -> BatchWorkflow:
    # Parts of ~1 KB so a 12-item batch is several slices (moto then must allow small parts).
    monkeypatch.setattr("moto.s3.models.S3_UPLOAD_PART_MIN_SIZE", 1)
    settings = get_settings()
    base = Wiring(settings, SystemClock()).pipeline
    finalizer = Finalizer(
        records=_records(),
        artifacts=_artifacts(),
        clock=SystemClock(),
        slice_bytes=1000,
        min_part_bytes=1500,
        budget=_Budget(slices_per_invocation),
        margin_seconds=1.0,
    )
    pipeline = Pipeline(
        base.planner, base.lanes, finalizer, base.settlement, intake=base.intake, continuations=_Queue()
    )
    return BatchWorkflow(_records(), SystemClock(), pipeline=pipeline)


class _Queue:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, body: str, *, delay_seconds: int = 0) -> None:
        self.sent.append(body)


def _run_lanes(stack: LocalStack, batch_id: str) -> None:
    """Route and every lane, as the workflow would, leaving Finalize to the test."""
    workflow = BatchWorkflow(
        _records(), SystemClock(), pipeline=Wiring(get_settings(), SystemClock()).pipeline
    )
    route = workflow.route(_task("route", batch_id))
    for lane in route["lanes"]:
        task = WorkflowTask.model_validate(
            {"step": "run_lane", "batch_id": batch_id, "task_token": "tok-lane", "lane": lane}
        )
        assert workflow.run_lane(task) is not None


def _lanes_run(stack: LocalStack, org: TestOrg) -> str:
    """A 12-item batch over 4 chunks whose lanes have run; its id."""
    batch_id = create_batch(org.org_id, _items(), chunk_size=3).batch_id
    _run_lanes(stack, batch_id)
    return batch_id


def _reference(stack: LocalStack) -> tuple[bytes, bytes]:
    """The artifacts of the same items finalized in one slice (another org's batch)."""
    created = create_batch(new_org(credit_usd="10").org_id, _items(), chunk_size=3)
    _run_lanes(stack, created.batch_id)
    BatchWorkflow(
        _records(), SystemClock(), pipeline=Wiring(get_settings(), SystemClock()).pipeline
    ).finalize(_task("finalize", created.batch_id))
    objects = S3Objects(get_settings().buckets["artifacts"])
    return (
        b"".join(objects.chunks(results_key(created.batch_id))),
        b"".join(objects.chunks(errors_key(created.batch_id))),
    )


def _items() -> list[dict[str, Any]]:
    return [item(n, GPT if n % 3 == 0 else LLAMA, "[simulate:fail]" if n % 4 == 1 else "") for n in range(12)]


def _without_ids(data: bytes, batch_id: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in data.splitlines()]
    for row in rows:
        row.pop("raw", None)
    return rows


def test_finalize_in_slices_is_exact_when_a_slice_message_is_delivered_twice(
    stack: LocalStack, org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a 12-item batch over 4 chunks whose lanes have run
    batch_id = _lanes_run(stack, org)
    workflow = _sliced_workflow(monkeypatch, slices_per_invocation=1)
    records = _records()
    real_advance = records.advance_cursor
    # When the first invocation merges one slice and re-enqueues itself
    assert workflow.finalize(_task("finalize", batch_id)) is None
    queue = workflow.pipeline.continuations if workflow.pipeline else None
    assert isinstance(queue, _Queue) and len(queue.sent) == 1
    first = records.cursor(batch_id, CURSOR)
    assert first is not None and 0 < first.position < 4
    # And a delivery crashes after sending its parts but before committing its slice
    crashed = {"done": False}

    def crash_once(batch: str, step: str, *, position: int, changes: dict[str, Any]) -> bool:
        if not crashed["done"]:
            crashed["done"] = True
            raise RuntimeError("the invocation died before committing")
        return real_advance(batch, step, position=position, changes=changes)

    monkeypatch.setattr(BatchRecords, "advance_cursor", lambda self, *a, **k: crash_once(*a, **k))
    with pytest.raises(RuntimeError):
        workflow.finalize(_task("finalize", batch_id))
    after_crash = records.cursor(batch_id, CURSOR)
    assert after_crash is not None and after_crash.position == first.position
    # And the redelivered message loses a race: another delivery commits the same slice first
    raced = {"done": False}

    def lose_race(batch: str, step: str, *, position: int, changes: dict[str, Any]) -> bool:
        if not raced["done"]:
            raced["done"] = True
            assert real_advance(batch, step, position=position, changes=changes)  # the other delivery
            return False
        return real_advance(batch, step, position=position, changes=changes)

    monkeypatch.setattr(BatchRecords, "advance_cursor", lambda self, *a, **k: lose_race(*a, **k))
    outputs = []
    for _ in range(10):  # re-enqueued until done
        output = workflow.finalize(_task("finalize", batch_id))
        if output is not None:
            outputs.append(output)
            break
    monkeypatch.setattr(BatchRecords, "advance_cursor", lambda self, *a, **k: real_advance(*a, **k))
    # Then the artifacts are complete: one row per item in input order, as a one-slice
    # Finalize of the same items writes them
    assert outputs and outputs[0]["result_count"] == 12
    objects = S3Objects(get_settings().buckets["artifacts"])
    results = b"".join(objects.chunks(results_key(batch_id)))
    errors = b"".join(objects.chunks(errors_key(batch_id)))
    reference_results, reference_errors = _reference(stack)
    assert _without_ids(results, batch_id) == _without_ids(reference_results, "")
    assert _without_ids(errors, batch_id) == _without_ids(reference_errors, "")
    assert [r["sequence_number"] for r in _artifacts().lines(results_key(batch_id))] == list(range(12))
    # And the results index carried across the invocations points at each chunk's first row
    index = _artifacts().read_json(results_index_key(batch_id))
    offsets = [0, *(len(line) + 1 for line in results.split(b"\n")[:-1])]
    assert index is not None and index["offsets"] == [sum(offsets[: 3 * n + 1]) for n in range(4)]
    batch = _batch(batch_id)
    assert {k: int(v) for k, v in (batch.counts or {}).items()}["total"] == 12
    assert batch.artifacts is not None and batch.artifacts.result_count == 12
    # And a repeated Finalize and two Settles charge once: reserved = charged + released
    again = workflow.finalize(_task("finalize", batch_id))
    assert again == outputs[0]
    first_settle = workflow.settle(_task("settle", batch_id))
    second_settle = workflow.settle(_task("settle", batch_id))
    assert first_settle is not None and second_settle is not None
    assert second_settle["replayed"] is True and second_settle["charged"] == first_settle["charged"]
    _assert_reservation_resolved_once(org.org_id, _batch(batch_id))


def test_a_results_page_deep_in_the_file_starts_at_its_chunk(
    stack: LocalStack, org: TestOrg, monkeypatch: pytest.MonkeyPatch, client: TestClient
) -> None:
    # Given a finalized 12-item batch of 4 chunks (results.index.json written by Finalize)
    batch_id = _lanes_run(stack, org)
    workflow = _sliced_workflow(monkeypatch, slices_per_invocation=10)
    assert workflow.finalize(_task("finalize", batch_id)) is not None
    index = json.loads(
        b"".join(
            S3Objects(get_settings().buckets["artifacts"]).chunks(f"batches/{batch_id}/results.index.json")
        )
    )
    assert len(index["offsets"]) == 4 and index["offsets"][0] == 0
    # When pages are read from the top and from deep cursors (the index's chunk size is 1,000
    # rows in production; here the batch's chunks are 3 rows)
    index["rows_per_chunk"] = 3
    S3Objects(get_settings().buckets["artifacts"]).put(
        f"batches/{batch_id}/results.index.json", json.dumps(index).encode(), content_type="application/json"
    )
    url = f"/v1/batches/{batch_id}/results"
    whole = client.get(url, params={"limit": 100}, headers=org.key_headers()).json()
    deep = client.get(url, params={"limit": 3, "cursor": "7"}, headers=org.key_headers()).json()
    # Then a deep page is the same rows as the same slice of the whole, with a cursor after it
    assert [r["sequence_number"] for r in deep["data"]] == [7, 8, 9]
    assert deep["data"] == whole["data"][7:10]
    assert deep["next_cursor"] == "10"


def test_finalize_reads_each_chunks_files_once_ahead_of_its_merge_and_never_asks_for_their_size(
    stack: LocalStack, org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a 12-item batch over 4 chunks whose lanes have run (every item answered)
    batch_id = _lanes_run(stack, org)
    calls: list[tuple[str, str, str]] = []

    def seen(model: Any, params: Mapping[str, Any], **_: Any) -> None:
        if str(params.get("Key", "")).startswith(f"batches/{batch_id}/"):
            calls.append((model.name, str(params["Key"]), threading.current_thread().name))

    s3 = aws_client("s3")
    s3.meta.events.register("before-parameter-build.s3", seen)
    try:
        # When Finalize runs in slices of ~one chunk
        workflow = _sliced_workflow(monkeypatch, slices_per_invocation=10)
        assert workflow.finalize(_task("finalize", batch_id)) is not None
    finally:
        s3.meta.events.unregister("before-parameter-build.s3", seen)
    # Then no object's size was asked for, and each input chunk and lane result file was read
    # once, by the read-ahead thread
    reads = [(key, thread) for operation, key, thread in calls if operation == "GetObject"]
    assert [operation for operation, _, _ in calls if operation == "HeadObject"] == []
    keys = [key for key, _ in reads]
    assert len(keys) == len(set(keys))
    inputs = {f"batches/{batch_id}/input/{n:05d}.jsonl" for n in range(4)}
    assert {key for key in keys if "/input/" in key} == inputs
    assert any("/results/" in key for key in keys)
    assert {thread.split("_")[0] for _, thread in reads} == {"read-ahead"}
