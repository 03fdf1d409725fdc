"""A batch whose workflow start was lost (StartExecution throttled, the API function died after
the create transaction) is started by the sweeper, and runs to its end with its money settled:
completed, canceled or expired before it ran (docs/batches.md, "Starting the workflow")."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from fastapi.testclient import TestClient

import batchroute.adapters.stepfunctions as stepfunctions
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.clock import FixedClock, SystemClock
from batchroute.config import get_settings
from batchroute.domain.batches.record import BatchRecord
from batchroute.money import Money
from batchroute.services.workflow.sweeper import SweepOutcome
from batchroute.wiring import wiring_for
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from tests.integration.batch_pipeline_support import item, run_until_done
from tests.integration.principals import TestOrg, ledger_store, new_org

FAR_FUTURE = "9999-12-31T00:00:00.000Z"


class Starts:
    """StartExecution as the wiring calls it, refused (throttled) while `failing`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.failing = True
        self.calls: list[str] = []
        self._real = stepfunctions.start_execution
        monkeypatch.setattr(stepfunctions, "start_execution", self)

    def __call__(self, *, state_machine_arn: str, name: str, payload: dict[str, Any]) -> str:
        self.calls.append(name)
        if self.failing:
            error = {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}
            raise ClientError(error, "StartExecution")  # type: ignore[arg-type]
        return self._real(state_machine_arn=state_machine_arn, name=name, payload=payload)


@pytest.fixture
def starts(monkeypatch: pytest.MonkeyPatch) -> Starts:
    return Starts(monkeypatch)


@pytest.fixture
def client(stack: LocalStack, starts: Starts) -> TestClient:
    return TestClient(create_app(), raise_server_exceptions=False)


@pytest.fixture
def org(stack: LocalStack) -> TestOrg:
    return new_org(credit_usd="10")


def _records() -> BatchRecords:
    return BatchRecords(get_settings().table_name("batches"))


def _batch(batch_id: str) -> BatchRecord:
    batch = _records().get(batch_id)
    assert batch is not None
    return batch


def _create(client: TestClient, org: TestOrg, key: str = "launch-key-0001") -> Any:
    body = {"items": [item(0), item(1)], "routing_mode": "cheapest"}
    return client.post("/v1/batches", json=body, headers={**org.key_headers(), "Idempotency-Key": key})


def _sweep(after: timedelta) -> SweepOutcome:
    return wiring_for(get_settings(), FixedClock(SystemClock().now() + after)).sweeper.sweep()


def _lost_start(client: TestClient, org: TestOrg, starts: Starts) -> str:
    """A batch created while StartExecution is refused: priced, funded, on the start index."""
    response = _create(client, org)
    assert response.status_code == 202, response.text
    batch_id = str(response.json()["batch"]["id"])
    assert starts.calls == [batch_id]
    batch = _batch(batch_id)
    assert batch.state == "priced" and batch.execution_arn is None
    assert _records().unstarted(FAR_FUTURE) == [batch_id]
    starts.failing = False
    return batch_id


def _run_late_start(stack: LocalStack, batch_id: str, outcome: SweepOutcome) -> BatchRecord:
    assert outcome["workflows_started"] == [batch_id]
    batch = _batch(batch_id)
    assert batch.execution_arn is not None
    assert _records().unstarted(FAR_FUTURE) == []
    assert run_until_done(stack, batch.execution_arn)["status"] == "SUCCEEDED"
    return _batch(batch_id)


def _money_settled(org: TestOrg, batch: BatchRecord) -> Money:
    """Nothing left reserved, the reservation resolved once; what the batch was charged."""
    ledger = ledger_store()
    reservation = ledger.reservation(org.org_id, str(batch.reservation_id))
    assert reservation is not None and reservation.status != "pending"
    state = ledger.state(org.org_id)
    assert state.reserved == Money.zero()
    assert batch.settled_at is not None
    return Money.usd("10") - state.balance


def test_a_batch_whose_start_was_lost_is_started_by_the_sweeper_and_completes(
    stack: LocalStack, client: TestClient, org: TestOrg, starts: Starts
) -> None:
    # Given a batch whose workflow start was refused after its create committed
    batch_id = _lost_start(client, org, starts)
    # And a client retry with the same key, answered from the first answer (no start)
    retried = _create(client, org)
    assert retried.status_code == 202 and retried.json()["batch"]["id"] == batch_id
    assert starts.calls == [batch_id]
    # When the sweeper runs within the grace the creating request has: nothing is started
    assert _sweep(timedelta(seconds=30))["workflows_started"] == []
    # Then after it, the sweeper starts the workflow, which completes and charges the batch once
    batch = _run_late_start(stack, batch_id, _sweep(timedelta(minutes=2)))
    assert batch.state == "completed"
    assert _money_settled(org, batch) > Money.zero()
    # And a later sweep finds nothing left to start
    assert _sweep(timedelta(minutes=3))["workflows_started"] == []


def test_a_batch_canceled_before_its_late_start_releases_everything(
    stack: LocalStack, client: TestClient, org: TestOrg, starts: Starts
) -> None:
    batch_id = _lost_start(client, org, starts)
    canceled = client.post(f"/v1/batches/{batch_id}/cancel", json={}, headers=org.key_headers())
    assert canceled.status_code == 200, canceled.text
    batch = _run_late_start(stack, batch_id, _sweep(timedelta(minutes=2)))
    assert batch.state == "canceled"
    assert _money_settled(org, batch) == Money.zero()


def test_a_batch_past_its_deadline_before_it_ever_started_releases_everything(
    stack: LocalStack, client: TestClient, org: TestOrg, starts: Starts
) -> None:
    batch_id = _lost_start(client, org, starts)
    outcome = _sweep(timedelta(hours=25))
    assert outcome["expired"] == [batch_id]
    batch = _run_late_start(stack, batch_id, outcome)
    assert batch.state == "expired"
    assert _money_settled(org, batch) == Money.zero()


def test_a_batch_started_by_its_create_request_leaves_the_start_index(
    stack: LocalStack, client: TestClient, org: TestOrg, starts: Starts
) -> None:
    starts.failing = False
    response = _create(client, org)
    assert response.status_code == 202, response.text
    batch = _batch(response.json()["batch"]["id"])
    assert batch.execution_arn is not None
    assert _records().unstarted(FAR_FUTURE) == []
    assert _sweep(timedelta(minutes=2))["workflows_started"] == []
