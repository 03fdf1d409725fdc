"""A deleted schedule's history (versions, runs, regression runs) is purged whole, however long
it is and however the delete ends (docs/schedules.md, "Deleting a schedule"): the delete
marks the purge in the transaction that removes the schedule, deletes a first page itself,
and the sweeper purges the rest, and anything a firing under way wrote after, once
`PURGE_AFTER` has passed."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.aws import client as aws_client
from batchroute.clock import FixedClock, isoformat
from batchroute.config import get_settings
from batchroute.domain.schedules.schedules import ScheduleRun
from batchroute.services.schedules import schedules as schedules_module
from batchroute.wiring import Wiring, wiring_for
from tests.integration.principals import TestOrg
from tests.integration.principals import clocked_client as clocked_client  # the fixtures
from tests.integration.principals import fixed_clock as fixed_clock
from tests.integration.principals import org as org
from tests.integration.test_schedules_api import _schedule


def _wiring(clock: FixedClock) -> Wiring:
    return wiring_for(get_settings(), clock)


def _history(schedule_id: str) -> list[str]:
    """The sort keys left in the schedule's history partition (its purge marker included)."""
    response = aws_client("dynamodb").query(
        TableName=get_settings().table_name("controls"),
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"SCHEDULE#{schedule_id}"}},
        ConsistentRead=True,
    )
    return [item["sk"]["S"] for item in response["Items"]]


def _scheduled(client: TestClient, org: TestOrg, clock: FixedClock, *, runs: int) -> tuple[str, Wiring]:
    """A schedule with its first version and `runs` runs: its id, and the wiring at `clock`."""
    schedule_id = _schedule(client, org).json()["id"]
    wiring = _wiring(clock)
    _add_runs(wiring, schedule_id, runs, clock)
    return schedule_id, wiring


def _add_runs(wiring: Wiring, schedule_id: str, count: int, clock: FixedClock) -> None:
    for n in range(count):
        run = ScheduleRun(
            schedule_id=schedule_id,
            fire_at=f"2026-03-{n + 1:02d}T07:30:00.000Z",
            version=1,
            state="created",
            created_at=isoformat(clock.now()),
        )
        assert wiring.schedules.store.create_run(run)


def _purge_due(clock: FixedClock) -> None:
    clock.advance(seconds=schedules_module.PURGE_AFTER.total_seconds())


def test_a_long_history_goes_a_page_with_the_delete_and_the_rest_by_sweeps(
    client: TestClient, org: TestOrg, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a schedule with its first version and 12 runs, a delete that deletes 5 history
    # items itself and a sweep that purges at most 4
    monkeypatch.setattr(schedules_module, "PURGE_INLINE", 5)
    sid, wiring = _scheduled(client, org, clock, runs=12)
    purge = wiring.schedules.purge_deleted
    monkeypatch.setattr(wiring.schedules, "purge_deleted", lambda: purge(at_most=4))
    # When it is deleted
    assert client.delete(f"/v1/schedules/{sid}", headers=org.key_headers()).status_code == 200
    # Then it is gone at once, a first page of its history with it, the rest marked to purge
    assert client.get(f"/v1/schedules/{sid}", headers=org.key_headers()).status_code == 404
    assert client.get(f"/v1/schedules/{sid}/runs", headers=org.key_headers()).status_code == 404
    left = _history(sid)
    assert "PURGE" in left and len(left) == 13 - 5 + 1
    # And the sweeper leaves it until every firing under way at the delete has ended
    clock.advance(seconds=schedules_module.PURGE_AFTER.total_seconds() - 1)
    assert wiring.sweeper.sweep()["schedule_histories_purged"] == []
    assert len(_history(sid)) == 9
    # When the sweeps come after that
    clock.advance(seconds=1)
    first, second, third = (wiring.sweeper.sweep()["schedule_histories_purged"] for _ in range(3))
    # Then 4 items go a sweep, and the sweep that finds none left ends the purge, once
    assert (first, second, third) == ([], [sid], [])
    assert _history(sid) == []


def test_a_delete_that_dies_after_the_schedule_went_leaves_its_history_to_the_sweeper(
    client: TestClient, org: TestOrg, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a schedule with 3 runs, whose delete dies once the schedule is gone (a Lambda
    # time-out, a crash) before any of its history is deleted
    sid, wiring = _scheduled(client, org, clock, runs=3)

    def died(schedule_id: str, *, at_most: int) -> tuple[int, bool]:
        raise RuntimeError("the function died")

    with monkeypatch.context() as patch:
        patch.setattr(wiring.schedules.store, "purge_history", died)
        assert client.delete(f"/v1/schedules/{sid}", headers=org.key_headers()).status_code == 500
    assert client.get(f"/v1/schedules/{sid}", headers=org.key_headers()).status_code == 404
    assert len(_history(sid)) == 1 + 3 + 1  # its version, its runs, the purge marker
    # When the sweeper runs once the purge is due
    _purge_due(clock)
    # Then nothing of its history is left
    assert wiring.sweeper.sweep()["schedule_histories_purged"] == [sid]
    assert _history(sid) == []


def test_a_run_a_firing_under_way_writes_after_the_delete_is_purged(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    # Given a schedule deleted (its history with it) while a firing that read it before was
    # under way, which then records its run
    sid, wiring = _scheduled(client, org, clock, runs=0)
    assert client.delete(f"/v1/schedules/{sid}", headers=org.key_headers()).status_code == 200
    assert _history(sid) == ["PURGE"]
    _add_runs(wiring, sid, 1, clock)
    # When the sweeper runs once the purge is due
    _purge_due(clock)
    # Then the late run is gone too, and so is the mark
    assert wiring.sweeper.sweep()["schedule_histories_purged"] == [sid]
    assert _history(sid) == []


def test_a_purge_throttled_by_dynamodb_ends_only_once_nothing_is_left(
    client: TestClient, org: TestOrg, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a deleted schedule whose purge is due, and DynamoDB throttling every delete of the
    # next sweep (BatchWriteItem answers them all as UnprocessedItems)
    sid, wiring = _scheduled(client, org, clock, runs=2)
    monkeypatch.setattr(schedules_module, "PURGE_INLINE", 0)
    assert client.delete(f"/v1/schedules/{sid}", headers=org.key_headers()).status_code == 200
    _purge_due(clock)
    store = wiring.schedules.store

    def throttled(RequestItems: dict[str, list[object]]) -> dict[str, object]:
        return {"UnprocessedItems": RequestItems}

    with monkeypatch.context() as patch:
        patch.setattr(store, "dynamodb", _Throttled(store.dynamodb, throttled))
        # When it sweeps / Then the purge is not ended: its mark stays with what is left
        assert wiring.sweeper.sweep()["schedule_histories_purged"] == []
    assert len(_history(sid)) == 1 + 2 + 1
    # And the next sweep, not throttled, ends it with nothing left
    assert wiring.sweeper.sweep()["schedule_histories_purged"] == [sid]
    assert _history(sid) == []


class _Throttled:
    """A DynamoDB client whose BatchWriteItem is `batch_write_item`, the rest the real one's."""

    def __init__(self, real: object, batch_write_item: object) -> None:
        self._real = real
        self.batch_write_item = batch_write_item

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)
