"""An expression the AWS trigger cannot run is refused when the schedule is saved, with a 400
naming the field, before anything is stored (docs/schedules.md, Triggers); one it can run is
saved as it was given (its EventBridge form: tests/unit/test_eventbridge_cron.py)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.integration.principals import TestOrg
from tests.integration.principals import clocked_client as clocked_client  # the fixtures
from tests.integration.principals import fixed_clock as fixed_clock
from tests.integration.principals import org as org
from tests.integration.test_schedules_api import _schedule

UNTRANSLATABLE = ("0 9 * * L5", "0 R * * *", "0 9 1,L * *")


def _refused(response: Any) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_schedule" and error["details"]["field"] == "expression"
    assert "EventBridge" in error["message"]


@pytest.mark.parametrize("expression", UNTRANSLATABLE)
def test_create_refuses_what_eventbridge_cannot_run(
    client: TestClient, org: TestOrg, expression: str
) -> None:
    _refused(_schedule(client, org, expression=expression, time_zone="UTC"))
    assert client.get("/v1/schedules", headers=org.key_headers()).json()["data"] == []


def test_a_change_to_what_eventbridge_cannot_run_is_refused(client: TestClient, org: TestOrg) -> None:
    created = _schedule(client, org, expression="0 9 * * 1", time_zone="UTC")
    assert created.status_code == 201, created.text
    assert created.json()["next_fire_at"] == "2026-03-09T09:00:00.000Z"  # a Monday
    sid = created.json()["id"]
    for expression in UNTRANSLATABLE:
        _refused(
            client.patch(f"/v1/schedules/{sid}", json={"expression": expression}, headers=org.key_headers())
        )
    shown = client.get(f"/v1/schedules/{sid}", headers=org.key_headers()).json()
    assert (shown["version"], shown["expression"]) == (1, "0 9 * * 1")
