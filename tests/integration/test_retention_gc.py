"""Retention GC on moto with an injected clock (docs/retention.md): each tier's window, a
change of settings after finalize, bounded pages, idempotent and concurrent sweeps, and what
the customer sees once the bytes are gone (410 on every content path; the batch record, the
receipt and the ledger intact)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from moto.dynamodb.models import DynamoDBBackend

from batchroute.adapters.aws import client as aws_client
from batchroute.adapters.batch_artifacts import batch_prefix, receipt_key, result_chunk_key
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.clock import FixedClock, isoformat
from batchroute.config import Settings, get_settings
from batchroute.domain.billing.retention import RetentionSettings
from batchroute.wiring import Wiring, wiring_for
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from functions.api.schemas.billing.retention import RetentionUpdate
from tests.integration.batch_pipeline_support import create_batch, heartbeat_all_lanes, item, run_until_done
from tests.integration.principals import TestOrg, new_org

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GRACE = timedelta(hours=72)
SECOND = timedelta(seconds=1)
COMPAT = "/v1/compat/v1"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture
def settings(local_aws: LocalStack) -> Settings:
    identity_store.cache_clear()
    heartbeat_all_lanes()  # batches are routed on live lanes
    return get_settings().model_copy(update={"retention_grace_hours": 72, "retention_sweep_batches": 50})


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(T0)


@pytest.fixture
def wiring(settings: Settings, clock: FixedClock) -> Wiring:
    return wiring_for(settings, clock)


@pytest.fixture
def org(local_aws: LocalStack) -> TestOrg:
    identity_store.cache_clear()
    return new_org(credit_usd="5")


def keys(stack: LocalStack, batch_id: str) -> list[str]:
    listed = aws_client("s3").list_objects_v2(
        Bucket=stack.buckets["artifacts"], Prefix=batch_prefix(batch_id)
    )
    return sorted(entry["Key"] for entry in listed.get("Contents", []))


def finished_batch(wiring: Wiring, stack: LocalStack, org_id: str) -> str:
    """A canceled batch finalized at the clock's now, with a lane's result chunk and a receipt,
    as the workflow leaves them."""
    created = create_batch(org_id, [item(n) for n in range(3)], state="canceled")
    s3 = aws_client("s3")
    bucket = stack.buckets["artifacts"]
    s3.put_object(Bucket=bucket, Key=result_chunk_key(created.batch_id, "01-lane", 0), Body=b'{"seq":0}\n')
    s3.put_object(Bucket=bucket, Key=receipt_key(created.batch_id), Body=b'{"object":"billing_receipt"}')
    wiring.pipeline.finalizer.finalize(created.record)
    return created.batch_id


def set_retention(wiring: Wiring, org_id: str, body: dict[str, Any]) -> None:
    wiring.retention.update(org_id, RetentionUpdate.model_validate(body).command())


def reclaimed_at(wiring: Wiring, batch_id: str) -> str | None:
    batch = wiring.batch_records.get(batch_id)
    assert batch is not None
    return batch.artifacts_reclaimed_at


def move(clock: FixedClock, moment: datetime) -> None:
    """The injected clock is moved, never slept on."""
    clock.advance(seconds=(moment - clock.now()).total_seconds())


def sweep_at(wiring: Wiring, clock: FixedClock, moment: datetime) -> list[str]:
    move(clock, moment)
    return wiring.retention_gc.collect().reclaimed


def test_grace_only_reclaims_after_the_grace_window_and_not_before(
    wiring: Wiring, clock: FixedClock, org: TestOrg, local_aws: LocalStack
) -> None:
    # Given a batch finalized at T0 under the default tier (grace_only)
    batch_id = finished_batch(wiring, local_aws, org.org_id)
    before = keys(local_aws, batch_id)
    assert {"results.jsonl", "errors.jsonl", "receipt.json"} <= {k.rsplit("/", 1)[-1] for k in before}
    assert any("/input/" in k for k in before) and any("/results/" in k for k in before)
    # When the sweeper runs a second before the window ends
    assert sweep_at(wiring, clock, T0 + GRACE - SECOND) == []
    # Then nothing is reclaimed
    assert keys(local_aws, batch_id) == before and reclaimed_at(wiring, batch_id) is None
    # When it runs just after the window
    assert sweep_at(wiring, clock, T0 + GRACE + SECOND) == [batch_id]
    # Then every object but the receipt is gone and the record says when
    assert keys(local_aws, batch_id) == [receipt_key(batch_id)]
    assert reclaimed_at(wiring, batch_id) == isoformat(T0 + GRACE + SECOND)
    # And sweeping again is harmless: nothing more to do, the first time stays recorded
    assert sweep_at(wiring, clock, T0 + GRACE + timedelta(minutes=1)) == []
    assert reclaimed_at(wiring, batch_id) == isoformat(T0 + GRACE + SECOND)
    assert keys(local_aws, batch_id) == [receipt_key(batch_id)]


def test_extended_fixed_keeps_extended_days_and_never_less_than_the_grace_window(
    wiring: Wiring, clock: FixedClock, org: TestOrg, local_aws: LocalStack
) -> None:
    # Given a 10-day org and a 1-day org (shorter than the grace window)
    other = new_org(credit_usd="5")
    set_retention(wiring, org.org_id, {"retention_tier": "extended_fixed", "extended_days": 10})
    set_retention(wiring, other.org_id, {"retention_tier": "extended_fixed", "extended_days": 1})
    ten = finished_batch(wiring, local_aws, org.org_id)
    one = finished_batch(wiring, local_aws, other.org_id)
    # When the sweeper runs after 1 day, then after the grace window
    assert sweep_at(wiring, clock, T0 + timedelta(days=1, seconds=1)) == []
    assert sweep_at(wiring, clock, T0 + GRACE + SECOND) == [one]
    # Then the 10-day batch is kept until its 10 days have passed, sweeping every minute-ish
    for moment in (T0 + timedelta(days=5), T0 + timedelta(days=9), T0 + timedelta(days=10) - SECOND):
        assert sweep_at(wiring, clock, moment) == []
    assert reclaimed_at(wiring, ten) is None and len(keys(local_aws, ten)) > 1
    assert sweep_at(wiring, clock, T0 + timedelta(days=10, seconds=1)) == [ten]
    assert keys(local_aws, ten) == [receipt_key(ten)]


def test_until_deleted_is_never_reclaimed(
    wiring: Wiring, clock: FixedClock, org: TestOrg, local_aws: LocalStack
) -> None:
    # Given an org that keeps results until deleted
    set_retention(wiring, org.org_id, {"retention_tier": "until_deleted"})
    batch_id = finished_batch(wiring, local_aws, org.org_id)
    before = keys(local_aws, batch_id)
    # When the sweeper runs daily for a long time
    for day in (3, 4, 5, 30, 365, 3650):
        assert sweep_at(wiring, clock, T0 + timedelta(days=day, seconds=1)) == []
    # Then the bytes are all there
    assert keys(local_aws, batch_id) == before and reclaimed_at(wiring, batch_id) is None


def test_never_charge_forces_grace_only(
    wiring: Wiring, clock: FixedClock, org: TestOrg, local_aws: LocalStack
) -> None:
    # Given an org that asked for a paid tier and then for zero storage spend
    set_retention(wiring, org.org_id, {"retention_tier": "until_deleted"})
    set_retention(wiring, org.org_id, {"never_charge": True, "retention_tier": "until_deleted"})
    batch_id = finished_batch(wiring, local_aws, org.org_id)
    # Then its batches go at the end of the grace window like grace_only ones
    assert sweep_at(wiring, clock, T0 + GRACE - SECOND) == []
    assert sweep_at(wiring, clock, T0 + GRACE + SECOND) == [batch_id]


def test_a_change_to_until_deleted_before_the_window_ends_cancels_the_reclaim(
    wiring: Wiring, clock: FixedClock, org: TestOrg, local_aws: LocalStack
) -> None:
    batch_id = finished_batch(wiring, local_aws, org.org_id)  # grace_only at finalize
    # When the org moves to until_deleted before the window ends
    move(clock, T0 + timedelta(hours=70))
    set_retention(wiring, org.org_id, {"retention_tier": "until_deleted"})
    # Then the due entry is looked at and kept, now and later
    assert sweep_at(wiring, clock, T0 + GRACE + SECOND) == []
    assert sweep_at(wiring, clock, T0 + timedelta(days=20)) == []
    assert reclaimed_at(wiring, batch_id) is None


def test_settings_saved_while_a_sweep_decides_keep_the_batch(
    wiring: Wiring, clock: FixedClock, org: TestOrg, local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a grace_only batch past its window, and a sweep that reads the org's settings just
    # before the org moves to until_deleted
    batch_id = finished_batch(wiring, local_aws, org.org_id)
    before = keys(local_aws, batch_id)
    store = wiring.retention_gc.settings
    read = store.retention

    def read_then_changed(org_id: str) -> RetentionSettings | None:
        monkeypatch.setattr(store, "retention", read)  # once
        settings = read(org_id)
        set_retention(wiring, org_id, {"retention_tier": "until_deleted"})
        return settings

    monkeypatch.setattr(store, "retention", read_then_changed)
    # When that sweep runs
    assert sweep_at(wiring, clock, T0 + GRACE + SECOND) == []
    # Then nothing is reclaimed: the batch is decided on the settings the org saved
    assert reclaimed_at(wiring, batch_id) is None and keys(local_aws, batch_id) == before
    assert sweep_at(wiring, clock, T0 + GRACE + timedelta(minutes=1)) == []
    assert sweep_at(wiring, clock, T0 + timedelta(days=30)) == []
    assert reclaimed_at(wiring, batch_id) is None and keys(local_aws, batch_id) == before


def test_a_shortened_window_applies_within_a_day_even_to_old_batches(
    wiring: Wiring, clock: FixedClock, org: TestOrg, local_aws: LocalStack
) -> None:
    # Given a 30-day org whose batch the sweeper already looked at (and kept) after the grace window
    set_retention(wiring, org.org_id, {"retention_tier": "extended_fixed", "extended_days": 30})
    batch_id = finished_batch(wiring, local_aws, org.org_id)
    assert sweep_at(wiring, clock, T0 + GRACE + SECOND) == []
    # When the org moves to grace_only at 95 h (its batch is already past 72 h)
    move(clock, T0 + timedelta(hours=95))
    set_retention(wiring, org.org_id, {"retention_tier": "grace_only"})
    # Then the batch goes at its next review, a day after the last one (not 30 days later)
    assert sweep_at(wiring, clock, T0 + timedelta(hours=95, minutes=30)) == []
    assert sweep_at(wiring, clock, T0 + GRACE + timedelta(days=1, seconds=2)) == [batch_id]


def test_a_longer_window_reschedules(
    wiring: Wiring, clock: FixedClock, org: TestOrg, local_aws: LocalStack
) -> None:
    # Given a grace_only batch, and the org moving to 7 days before the grace window ends
    batch_id = finished_batch(wiring, local_aws, org.org_id)
    set_retention(wiring, org.org_id, {"retention_tier": "extended_fixed", "extended_days": 7})
    # Then it is kept past 72 h and reclaimed after 7 days
    for day in (3.1, 4.2, 6.9):
        assert sweep_at(wiring, clock, T0 + timedelta(days=day)) == []
    assert sweep_at(wiring, clock, T0 + timedelta(days=7, seconds=1)) == [batch_id]


def test_each_sweep_takes_a_bounded_page(
    settings: Settings, clock: FixedClock, org: TestOrg, local_aws: LocalStack
) -> None:
    # Given a sweeper that takes 2 batches per run and 3 due batches
    wiring = wiring_for(settings.model_copy(update={"retention_sweep_batches": 2}), clock)
    batches = [finished_batch(wiring, local_aws, org.org_id) for _ in range(3)]
    # When it runs twice after the window
    first = sweep_at(wiring, clock, T0 + GRACE + SECOND)
    second = sweep_at(wiring, clock, T0 + GRACE + 2 * SECOND)
    # Then the first run reclaimed two, the second the last one, and a third finds nothing
    assert len(first) == 2 and len(second) == 1 and sorted(first + second) == sorted(batches)
    assert sweep_at(wiring, clock, T0 + GRACE + 3 * SECOND) == []


def test_kept_batches_rechecks_never_delay_another_batchs_reclaim(
    settings: Settings, clock: FixedClock, org: TestOrg, local_aws: LocalStack
) -> None:
    # Given a sweeper that takes 2 batches per run, an org keeping 3 batches until deleted
    # (looked at once after the grace window, so each is re-checked a day later) ...
    wiring = wiring_for(settings.model_copy(update={"retention_sweep_batches": 2}), clock)
    set_retention(wiring, org.org_id, {"retention_tier": "until_deleted"})
    kept = [finished_batch(wiring, local_aws, org.org_id) for _ in range(3)]
    sweep_at(wiring, clock, T0 + GRACE + SECOND)
    sweep_at(wiring, clock, T0 + GRACE + 2 * SECOND)
    # ... and another org's grace_only batch whose window ends after those re-checks are due
    move(clock, T0 + timedelta(hours=30))
    other = finished_batch(wiring, local_aws, new_org(credit_usd="5").org_id)
    # When the first sweep after its window runs (the 3 re-checks are older than it)
    reclaimed = sweep_at(wiring, clock, T0 + timedelta(hours=30) + GRACE + SECOND)
    # Then its bytes went in that sweep: re-checks take only the room reclaims leave
    assert reclaimed == [other]
    assert all(reclaimed_at(wiring, batch_id) is None for batch_id in kept)
    # And the kept batches are still re-checked (kept again), in the sweeps after
    for n in range(2, 4):
        assert sweep_at(wiring, clock, T0 + timedelta(hours=30) + GRACE + n * SECOND) == []
    assert all(reclaimed_at(wiring, batch_id) is None for batch_id in kept)


def test_a_sweep_that_died_half_way_is_finished_by_the_next(
    wiring: Wiring, clock: FixedClock, org: TestOrg, local_aws: LocalStack
) -> None:
    # Given a sweep that marked the batch reclaimed and died before deleting anything
    batch_id = finished_batch(wiring, local_aws, org.org_id)
    records = BatchRecords(get_settings().table_name("batches"))
    assert records.mark_reclaimed(batch_id, at=isoformat(T0 + GRACE))
    # When the next sweep runs, even if the org has meanwhile chosen until_deleted
    set_retention(wiring, org.org_id, {"retention_tier": "until_deleted"})
    sweep_at(wiring, clock, T0 + GRACE + SECOND)
    # Then the bytes of the batch already reported expired are gone, and it is off the index
    assert keys(local_aws, batch_id) == [receipt_key(batch_id)]
    assert reclaimed_at(wiring, batch_id) == isoformat(T0 + GRACE)
    assert records.reclaim_due(isoformat(T0 + timedelta(days=100)), 10) == []


@pytest.fixture
def atomic_item_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """DynamoDB applies each conditional single-item write atomically; moto's in-process
    backend checks and writes without a lock. Give it that atomicity, so the test probes our
    conditions, not moto's thread safety."""
    lock = threading.Lock()
    for name in ("update_item", "delete_item", "put_item"):
        original: Callable[..., Any] = getattr(DynamoDBBackend, name)

        def atomic(
            self: DynamoDBBackend, *args: Any, _original: Callable[..., Any] = original, **kwargs: Any
        ) -> Any:
            with lock:
                return _original(self, *args, **kwargs)

        monkeypatch.setattr(DynamoDBBackend, name, atomic)


@pytest.mark.usefixtures("atomic_item_writes")
@pytest.mark.usefixtures("serializable_transactions")  # moto's own thread safety, not ours
def test_concurrent_sweeps_reclaim_each_batch_once(
    settings: Settings, org: TestOrg, local_aws: LocalStack
) -> None:
    # Given due batches and two sweepers (as when a slow run overlaps the next minute's)
    start = FixedClock(T0)
    batches = [finished_batch(wiring_for(settings, start), local_aws, org.org_id) for _ in range(4)]
    later = FixedClock(T0 + GRACE + SECOND)
    sweepers = [wiring_for(settings.model_copy(), later).retention_gc for _ in range(2)]
    found: list[list[str]] = [[], []]
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            found[index] = sweepers[index].collect().reclaimed
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    # When both run at once
    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then no error, each batch reported reclaimed exactly once, every byte but the receipts gone
    assert errors == []
    assert sorted(found[0] + found[1]) == sorted(batches)
    for batch_id in batches:
        assert keys(local_aws, batch_id) == [receipt_key(batch_id)]


# -- what the customer sees -------------------------------------------------------------------------
@pytest.fixture
def api(settings: Settings) -> TestClient:
    return TestClient(create_app(settings), raise_server_exceptions=False)


def _compat_batch(api: TestClient, org: TestOrg, stack: LocalStack) -> dict[str, Any]:
    auth = org.key_headers("member")
    rows = [
        {
            "custom_id": f"req-{n}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": LLAMA,
                "messages": [{"role": "user", "content": f"Q{n}" + (" [simulate:fail]" if n == 1 else "")}],
                "max_tokens": 16,
            },
        }
        for n in range(3)
    ]
    data = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    uploaded = api.post(
        f"{COMPAT}/files",
        files={"file": ("in.jsonl", data, "application/jsonl")},
        data={"purpose": "batch"},
        headers=auth,
    )
    assert uploaded.status_code == 200, uploaded.text
    body = {
        "input_file_id": uploaded.json()["id"],
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    }
    created = api.post(f"{COMPAT}/batches", json=body, headers=auth)
    assert created.status_code == 200, created.text
    record = BatchRecords(get_settings().table_name("batches")).get(created.json()["id"])
    assert record is not None and record.execution_arn
    assert run_until_done(stack, record.execution_arn)["status"] == "SUCCEEDED"
    done = api.get(f"{COMPAT}/batches/{record.batch_id}", headers=auth).json()
    assert done["status"] == "completed" and done["output_file_id"] and done["error_file_id"], done
    return dict(done)


def _gone(response: Any, code: str) -> None:
    assert response.status_code == 410, response.text
    assert response.json()["error"]["code"] == code


def test_after_reclaim_content_is_410_and_metadata_receipt_and_ledger_remain(
    api: TestClient, settings: Settings, org: TestOrg, local_aws: LocalStack
) -> None:
    # Given a compat batch the workflow ran to the end (one item failed)
    auth = org.key_headers("member")
    done = _compat_batch(api, org, local_aws)
    batch_id = done["id"]
    path = f"/v1/batches/{batch_id}"
    view = api.get(f"{path}?include_details=true", headers=auth).json()["batch"]
    artifacts = view["details"]["artifacts"]
    # Then before GC each artifact is available, and the view says when the bytes go
    assert artifacts["results"] == {"status": "available", "rows": 3}
    assert artifacts["errors"] == {"status": "available", "rows": 1}
    assert artifacts["receipt"] == {"status": "available"} and artifacts["reclaimed_at"] is None
    finalized = datetime.fromisoformat(artifacts["available_since"])
    assert artifacts["expires_at"] == isoformat(finalized + GRACE)
    assert view["output_url"] and view["error_url"] and view["receipt_url"]
    receipt = api.get(f"{path}/billing-receipt", headers=auth).json()
    ledger = LedgerStore(get_settings().table_name("ledger"))
    wallet = ledger.state(org.org_id)

    # When the sweeper (the whole scheduled sweep) runs after the grace window
    clock = FixedClock(finalized + GRACE + SECOND)
    answer = wiring_for(settings, clock).sweeper.sweep()
    assert answer["retention"]["reclaimed"] == [batch_id]

    # Then every content path answers 410
    _gone(api.get(f"{path}/results", headers=auth), "results_expired")
    _gone(api.get(f"{path}/items", headers=auth), "results_expired")
    _gone(api.get(f"{path}/artifact-url", headers=auth), "results_expired")
    _gone(api.post(f"{path}/retry", headers=org.key_headers("admin")), "results_expired")
    for file_id in (done["output_file_id"], done["error_file_id"]):
        assert api.get(f"{COMPAT}/files/{file_id}", headers=auth).json()["status"] == "expired"
        content = api.get(f"{COMPAT}/files/{file_id}/content", headers=auth)
        assert content.status_code == 410 and content.json()["error"]["code"] == "file_expired"
        assert content.json()["error"]["type"] == "invalid_request_error"
    # And the batch, its detailed view and its receipt are still there
    after = api.get(f"{path}?include_details=true", headers=auth)
    assert after.status_code == 200
    kept = after.json()["batch"]
    assert (kept["state"], kept["counts"]) == (view["state"], view["counts"])
    assert kept["output_url"] is None and kept["error_url"] is None and kept["receipt_url"]
    assert kept["details"]["artifacts"]["results"] == {"status": "expired", "rows": 3}
    assert kept["details"]["artifacts"]["errors"]["status"] == "expired"
    assert kept["details"]["artifacts"]["receipt"] == {"status": "available"}
    assert kept["details"]["artifacts"]["reclaimed_at"] == isoformat(clock.now())
    assert kept["details"]["artifacts"]["expires_at"] is None
    assert api.get(f"{path}/billing-receipt", headers=auth).json() == receipt
    assert keys(local_aws, batch_id) == [receipt_key(batch_id)]
    # And the ledger is untouched
    assert ledger.state(org.org_id) == wallet and ledger.violations(org.org_id) == []
    assert api.get(f"{COMPAT}/batches/{batch_id}", headers=auth).json()["status"] == "completed"


def test_a_reclaimed_chat_job_answers_410(
    api: TestClient, settings: Settings, org: TestOrg, local_aws: LocalStack
) -> None:
    # Given a queued chat request the workflow answered
    body = {"model": LLAMA, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "batch": True}
    job = api.post("/v1/chat/completions", json=body, headers=org.key_headers()).json()
    record = BatchRecords(get_settings().table_name("batches")).get(job["batch_id"])
    assert record is not None and record.execution_arn
    run_until_done(local_aws, record.execution_arn)
    path = f"/v1/chat/completions/{job['id']}"
    assert api.get(path, headers=org.key_headers()).json()["status"] == "completed"
    # When retention reclaims it
    finished = BatchRecords(get_settings().table_name("batches")).get(job["batch_id"])
    assert finished is not None and finished.finalized_at
    moment = datetime.fromisoformat(finished.finalized_at) + GRACE + SECOND
    assert wiring_for(settings, FixedClock(moment)).retention_gc.collect().reclaimed == [job["batch_id"]]
    # Then its result is gone, its batch record is not
    _gone(api.get(path, headers=org.key_headers()), "results_expired")
    assert api.get(f"/v1/batches/{job['batch_id']}", headers=org.key_headers()).status_code == 200
