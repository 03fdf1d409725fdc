"""Retention settings: tiers, extended days, never_charge forcing grace_only, the service."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from batchroute.clock import FixedClock
from batchroute.domain.billing.controls import ConcurrentUpdate
from batchroute.domain.billing.retention import RetentionSettings, UpdateRetention, apply_update
from batchroute.errors import InvalidRequest
from batchroute.services.billing.retention import RetentionService
from functions.api.schemas.billing.retention import RetentionUpdate

AT = "2026-01-01T00:00:00.000Z"
ORG = "org_a"


def parse_update(body: Any) -> dict[str, Any]:
    """The fields the request model validated: the given ones."""
    return RetentionUpdate.model_validate(body).given()


def command(body: Any) -> UpdateRetention:
    """What the request model hands the service."""
    return RetentionUpdate.model_validate(body).command()


def applied(current: RetentionSettings, body: dict[str, Any]) -> RetentionSettings:
    return apply_update(current, command(body), at=AT)


def refused(current: RetentionSettings, body: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        apply_update(current, command(body), at=AT)
    assert caught.value.code == "invalid_retention"
    return caught.value


DEFAULT = RetentionSettings(org_id=ORG)


def test_the_default_is_grace_only() -> None:
    assert DEFAULT.to_api(grace_hours=72) == {
        "org_id": ORG,
        "retention_tier": "grace_only",
        "extended_days": None,
        "never_charge": False,
        "grace_hours": 72,
        "updated_at": None,
    }


def test_extended_fixed_keeps_its_days() -> None:
    settings = applied(DEFAULT, {"retention_tier": "extended_fixed", "extended_days": 30})
    assert (settings.retention_tier, settings.extended_days, settings.updated_at) == (
        "extended_fixed",
        30,
        AT,
    )
    # Only the days change later
    assert applied(settings, {"extended_days": 90}).extended_days == 90


def test_extended_fixed_needs_days() -> None:
    assert refused(DEFAULT, {"retention_tier": "extended_fixed"}).details == {"field": "extended_days"}
    extended = applied(DEFAULT, {"retention_tier": "extended_fixed", "extended_days": 30})
    refused(extended, {"extended_days": None})


def test_leaving_extended_fixed_forgets_the_days() -> None:
    extended = applied(DEFAULT, {"retention_tier": "extended_fixed", "extended_days": 30})
    until_deleted = applied(extended, {"retention_tier": "until_deleted"})
    assert (until_deleted.retention_tier, until_deleted.extended_days) == ("until_deleted", None)


def test_days_apply_only_to_extended_fixed() -> None:
    refused(DEFAULT, {"extended_days": 30})
    refused(DEFAULT, {"retention_tier": "until_deleted", "extended_days": 30})
    assert applied(DEFAULT, {"retention_tier": "until_deleted", "extended_days": None}).extended_days is None


def test_never_charge_forces_grace_only() -> None:
    # Given extended retention / When never_charge is set / Then grace_only, days dropped
    extended = applied(DEFAULT, {"retention_tier": "extended_fixed", "extended_days": 30})
    free = applied(extended, {"never_charge": True})
    assert (free.retention_tier, free.extended_days, free.never_charge) == ("grace_only", None, True)
    # And asking for a paid tier while never_charge holds is coerced, not refused
    assert applied(free, {"retention_tier": "until_deleted"}).retention_tier == "grace_only"
    coerced = applied(DEFAULT, {"never_charge": True, "retention_tier": "extended_fixed", "extended_days": 9})
    assert (coerced.retention_tier, coerced.extended_days) == ("grace_only", None)
    # And lifting never_charge lets a tier be chosen again
    paid = applied(free, {"never_charge": False, "retention_tier": "until_deleted"})
    assert paid.retention_tier == "until_deleted"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"retention_tier": "forever"}, "retention_tier"),
        ({"retention_tier": None}, "retention_tier"),
        ({"retention_tier": "extended_fixed", "extended_days": 0}, "extended_days"),
        ({"retention_tier": "extended_fixed", "extended_days": 3651}, "extended_days"),
        ({"retention_tier": "extended_fixed", "extended_days": 30.5}, "extended_days"),
        ({"retention_tier": "extended_fixed", "extended_days": "30"}, "extended_days"),
        ({"retention_tier": "extended_fixed", "extended_days": True}, "extended_days"),
        ({"never_charge": "yes"}, "never_charge"),
        ({"never_charge": None}, "never_charge"),
        ({"keep_forever": True}, "keep_forever"),
    ],
)
def test_bad_fields_are_refused_naming_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_update(body)
    [error] = caught.value.errors()
    assert error["type"] == "invalid_retention" and error["ctx"]["details"]["field"] == field


def test_read_only_fields_sent_back_are_ignored() -> None:
    assert parse_update(DEFAULT.to_api(grace_hours=72)) == {
        "retention_tier": "grace_only",
        "extended_days": None,
        "never_charge": False,
    }
    with pytest.raises(ValidationError):
        parse_update("grace_only")


class MemoryRecords:
    def __init__(self) -> None:
        self.stored: dict[str, RetentionSettings] = {}
        self.conflicts = 0

    def retention(self, org_id: str) -> RetentionSettings | None:
        return self.stored.get(org_id)

    def save_retention(self, settings: RetentionSettings, *, expected_version: int) -> None:
        if self.conflicts:
            self.conflicts -= 1
            current = self.stored.get(settings.org_id, RetentionSettings(org_id=settings.org_id))
            self.stored[settings.org_id] = replace(current, version=current.version + 1)
            raise ConcurrentUpdate("changed")
        self.stored[settings.org_id] = settings


def test_the_service_saves_with_a_version_and_retries_a_conflict() -> None:
    records = MemoryRecords()
    svc = RetentionService(records, FixedClock(datetime(2026, 1, 1, tzinfo=UTC)))
    assert svc.get(ORG) == DEFAULT
    saved = svc.update(ORG, command({"retention_tier": "until_deleted"}))
    assert saved.version == 1 and svc.get(ORG).retention_tier == "until_deleted"
    records.conflicts = 1
    assert svc.update(ORG, command({"never_charge": True})).version == 3
    records.conflicts = 5
    with pytest.raises(ConcurrentUpdate):
        svc.update(ORG, command({"never_charge": False}))
