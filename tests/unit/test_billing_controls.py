"""Billing controls: parsing partial updates, the cross-field rules, the audit diff, and the
service's save-with-audit over in-memory records."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from batchroute.clock import FixedClock
from batchroute.domain.accounts.access import Principal
from batchroute.domain.accounts.audit import AuditEntry
from batchroute.domain.billing.controls import (
    ACTION_UPDATE,
    BillingControls,
    ConcurrentUpdate,
    Threshold,
    UpdateControls,
    apply_update,
    is_valid_timezone,
    parse_usd,
)
from batchroute.errors import InvalidRequest
from batchroute.money import Money
from batchroute.services.billing.controls import BillingControlsService
from functions.api.schemas.billing.controls import ControlsUpdate

AT = "2026-01-01T00:00:00.000Z"
LATER = "2026-01-02T00:00:00.000Z"
ORG = "org_a"


def parse_update(body: Any) -> dict[str, Any]:
    """The fields the request model validated: the given ones, in domain values."""
    return ControlsUpdate.model_validate(body).given()


def command(body: Any) -> UpdateControls:
    """What the request model hands the service."""
    return ControlsUpdate.model_validate(body).command()


def invalid(body: Any) -> dict[str, Any]:
    """The refusal's details, after checking its code is the spec's."""
    with pytest.raises(ValidationError) as caught:
        parse_update(body)
    [error] = caught.value.errors()
    assert error["type"] == "invalid_controls"
    details: dict[str, Any] = error["ctx"]["details"]
    return details


def applied(current: BillingControls, body: dict[str, Any], at: str = AT) -> BillingControls:
    return apply_update(current, command(body), at=at).controls


# -- defaults and shape ------------------------------------------------------------------
def test_defaults_until_the_first_save() -> None:
    assert BillingControls(org_id=ORG).to_api() == {
        "org_id": ORG,
        "configured": False,
        "limit_enabled": False,
        "limit_period": None,
        "limit_amount": None,
        "limit_mode": "soft",
        "limit_timezone": "UTC",
        "low_balance_amount": None,
        "alert_thresholds": [],
        "alert_email_enabled": True,
        "alert_webhook_enabled": False,
        "created_at": None,
        "updated_at": None,
    }


# -- money inputs ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "amount"),
    [
        (10, "10.00"),
        (12.5, "12.50"),
        (0.1, "0.10"),
        ("19.99", "19.99"),
        (" 7 ", "7.00"),
        ("0.000001", "0.000001"),
        ("1.500000000", "1.50"),  # trailing zeros are not decimals
        (0, "0.00"),
        (1_000_000_000, "1000000000.00"),
        ({"currency": "usd", "amount": "3.25"}, "3.25"),
        ({"currency": "USD", "amount": 4}, "4.00"),
    ],
)
def test_money_inputs_are_plain_usd_numbers(value: Any, amount: str) -> None:
    assert parse_usd(value, "limit_amount").to_api() == {"currency": "usd", "amount": amount}


@pytest.mark.parametrize(
    "value",
    [
        -1,
        "-0.01",
        "0.0000001",
        1e-7,
        1_000_000_000.01,
        "1e10",
        "abc",
        "",
        "NaN",
        "Infinity",
        float("inf"),
        float("nan"),
        True,
        [1],
        {"currency": "eur", "amount": "1"},
        {"amount": "1"},
        {"currency": "usd", "amount": {"x": 1}},
    ],
)
def test_bad_money_inputs_are_refused_naming_the_field(value: Any) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_usd(value, "limit_amount")
    assert caught.value.details == {"field": "limit_amount"}


@pytest.mark.parametrize(
    "value", ["1e3", "1E+3", "1,000", "$5", "5.", ".5", "0x10", "1_000", "-0", "+5", "-0.00"]
)
def test_amounts_typed_as_text_are_plain_decimals_only(value: str) -> None:
    # "1e3" was once saved as 1000.00 without a word (issue 29): text is digits and a point
    with pytest.raises(InvalidRequest) as caught:
        parse_usd(value, "limit_amount")
    assert caught.value.details == {"field": "limit_amount"}
    assert "plain decimal number of USD dollars, like 1000 or 12.50" in caught.value.message


@given(st.decimals(min_value=0, max_value=10**9, places=6, allow_nan=False, allow_infinity=False))
def test_any_amount_with_six_decimals_round_trips(value: Decimal) -> None:
    assert parse_usd(str(value), "x").amount == value.quantize(Decimal("0.000001"))


# -- parsing -----------------------------------------------------------------------------
def test_only_given_fields_are_parsed() -> None:
    assert parse_update({}) == {}
    assert parse_update({"limit_mode": "hard"}) == {"limit_mode": "hard"}
    assert parse_update({"limit_amount": None, "limit_period": None}) == {
        "limit_amount": None,
        "limit_period": None,
    }


def test_read_only_fields_sent_back_are_ignored() -> None:
    body = BillingControls(org_id=ORG).to_api()
    changes = parse_update(body)
    assert "org_id" not in changes and "configured" not in changes and "created_at" not in changes
    assert changes["alert_thresholds"] == ()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"limit_cap": 5}, "limit_cap"),
        ({"limit_enabled": "true"}, "limit_enabled"),
        ({"limit_enabled": 1}, "limit_enabled"),
        ({"limit_enabled": None}, "limit_enabled"),
        ({"alert_email_enabled": None}, "alert_email_enabled"),
        ({"alert_webhook_enabled": "yes"}, "alert_webhook_enabled"),
        ({"limit_period": "weekly"}, "limit_period"),
        ({"limit_mode": "strict"}, "limit_mode"),
        ({"limit_mode": None}, "limit_mode"),
        ({"limit_timezone": "Mars/Olympus"}, "limit_timezone"),
        ({"limit_timezone": "../../etc/passwd"}, "limit_timezone"),
        ({"limit_timezone": None}, "limit_timezone"),
        ({"limit_timezone": 5}, "limit_timezone"),
        ({"low_balance_amount": "-5"}, "low_balance_amount"),
        ({"alert_thresholds": "none"}, "alert_thresholds"),
    ],
)
def test_bad_fields_are_refused_naming_the_field(body: dict[str, Any], field: str) -> None:
    assert invalid(body)["field"] == field


def test_a_body_that_is_not_an_object_is_refused_as_any_body_is() -> None:
    # The API answers it `invalid_request` (functions/api/errors.py), as it always did.
    with pytest.raises(ValidationError) as caught:
        parse_update([1, 2])
    assert [error["type"] for error in caught.value.errors()] == ["dict_type"]


def test_unknown_fields_are_refused_first_naming_them_all() -> None:
    assert invalid({"limit_mode": "strict", "zeta": 1, "alpha": 2}) == {
        "field": "alpha",
        "unknown": ["alpha", "zeta"],
    }


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5"])
def test_iana_zones_are_accepted(zone: str) -> None:
    assert is_valid_timezone(zone)
    assert parse_update({"limit_timezone": zone}) == {"limit_timezone": zone}


@pytest.mark.parametrize("zone", ["", "localtime", "Europe/Nowhere", "/UTC", "UTC/", "a" * 65])
def test_non_zones_are_refused(zone: str) -> None:
    assert not is_valid_timezone(zone)


def test_thresholds_of_each_type() -> None:
    changes = parse_update(
        {
            "alert_thresholds": [
                {"type": "balance_below", "value": 5},
                {"type": "spend_above", "value": "100.5"},
                {"type": "pct_of_limit", "value": 80},
                {"type": "pct_of_limit", "value": 100.0},
            ]
        }
    )
    assert changes["alert_thresholds"] == (
        Threshold(type="balance_below", amount=Money.usd("5")),
        Threshold(type="spend_above", amount=Money.usd("100.5")),
        Threshold(type="pct_of_limit", percent=80),
        Threshold(type="pct_of_limit", percent=100),
    )
    assert [t.to_api() for t in changes["alert_thresholds"]][1:3] == [
        {"type": "spend_above", "value": {"currency": "usd", "amount": "100.50"}},
        {"type": "pct_of_limit", "value": 80},
    ]
    assert parse_update({"alert_thresholds": None}) == {"alert_thresholds": ()}


@pytest.mark.parametrize(
    ("thresholds", "field"),
    [
        ([{"type": "pct_of_limit", "value": 101}], "alert_thresholds[0].value"),
        ([{"type": "pct_of_limit", "value": -1}], "alert_thresholds[0].value"),
        ([{"type": "pct_of_limit", "value": 50.5}], "alert_thresholds[0].value"),
        ([{"type": "pct_of_limit", "value": True}], "alert_thresholds[0].value"),
        ([{"type": "pct_of_limit", "value": "80"}], "alert_thresholds[0].value"),
        ([{"type": "balance_below", "value": -1}], "alert_thresholds[0].value"),
        ([{"type": "balance_below", "value": "0.0000001"}], "alert_thresholds[0].value"),
        ([{"type": "weekly_spend", "value": 1}], "alert_thresholds[0].type"),
        ([{"type": "spend_above"}], "alert_thresholds[0]"),
        ([{"type": "spend_above", "value": 1, "extra": 1}], "alert_thresholds[0]"),
        (["spend_above"], "alert_thresholds[0]"),
        (
            [{"type": "spend_above", "value": 1}, {"type": "spend_above", "value": "1.0"}],
            "alert_thresholds[1]",
        ),
        ([{"type": "pct_of_limit", "value": i} for i in range(21)], "alert_thresholds"),
    ],
)
def test_bad_thresholds_are_refused_naming_the_entry(thresholds: list[Any], field: str) -> None:
    assert invalid({"alert_thresholds": thresholds})["field"] == field


def test_twenty_thresholds_are_allowed() -> None:
    body = {"alert_thresholds": [{"type": "pct_of_limit", "value": i} for i in range(20)]}
    assert len(parse_update(body)["alert_thresholds"]) == 20


# -- applying ----------------------------------------------------------------------------
def test_only_given_fields_change_and_null_clears() -> None:
    # Given saved controls with a low-balance level and a limit
    current = applied(
        BillingControls(org_id=ORG),
        {"limit_enabled": True, "limit_period": "monthly", "limit_amount": 100, "low_balance_amount": 5},
    )
    # When only the low-balance level is cleared
    updated = applied(current, {"low_balance_amount": None}, at=LATER)
    # Then it alone changed
    assert updated.low_balance_amount is None
    assert (updated.limit_enabled, updated.limit_period, updated.limit_amount) == (
        True,
        "monthly",
        Money.usd(100),
    )
    assert updated.created_at == AT and updated.updated_at == LATER


def test_an_enabled_limit_needs_period_and_amount_given_or_stored() -> None:
    # Given no limit / When enabled without an amount / Then 400 naming what is missing
    with pytest.raises(InvalidRequest) as caught:
        applied(BillingControls(org_id=ORG), {"limit_enabled": True, "limit_period": "daily"})
    assert caught.value.details == {"field": "limit_amount", "missing": ["limit_amount"]}
    with pytest.raises(InvalidRequest) as caught:
        applied(BillingControls(org_id=ORG), {"limit_enabled": True})
    assert caught.value.details is not None
    assert caught.value.details["missing"] == ["limit_period", "limit_amount"]
    # And values staged earlier count as stored
    staged = applied(BillingControls(org_id=ORG), {"limit_period": "daily", "limit_amount": "20"})
    assert applied(staged, {"limit_enabled": True}).limit_enabled
    # And an enabled limit cannot lose its amount
    enabled = applied(staged, {"limit_enabled": True})
    with pytest.raises(InvalidRequest):
        applied(enabled, {"limit_amount": None})


def test_disabling_removes_the_limit() -> None:
    enabled = applied(
        BillingControls(org_id=ORG),
        {"limit_enabled": True, "limit_period": "daily", "limit_amount": 20, "limit_mode": "hard"},
    )
    removed = applied(enabled, {"limit_enabled": False})
    assert (removed.limit_enabled, removed.limit_period, removed.limit_amount) == (False, None, None)


def test_a_new_limit_starts_soft_unless_told_otherwise() -> None:
    body = {"limit_enabled": True, "limit_period": "daily", "limit_amount": 20}
    hard = applied(BillingControls(org_id=ORG), {**body, "limit_mode": "hard"})
    assert hard.limit_mode == "hard"
    # Given a hard limit that was removed / When a new one is set / Then it is soft again
    removed = applied(hard, {"limit_enabled": False})
    assert applied(removed, body).limit_mode == "soft"
    # But changing an existing limit keeps its mode
    assert applied(hard, {"limit_amount": 30}).limit_mode == "hard"


def test_the_diff_holds_only_changed_fields_in_api_shape() -> None:
    current = applied(BillingControls(org_id=ORG), {"alert_email_enabled": True})
    change = apply_update(current, command({"limit_amount": "7.5", "limit_mode": "soft"}), at=LATER)
    assert change.needs_save
    assert change.before == {"limit_amount": None}
    assert change.after == {"limit_amount": {"currency": "usd", "amount": "7.50"}}


def test_a_change_to_nothing_is_not_saved_but_a_first_save_is() -> None:
    first = apply_update(BillingControls(org_id=ORG), command({}), at=AT)
    assert first.needs_save and first.controls.configured and (first.before, first.after) == ({}, {})
    again = apply_update(first.controls, command({"limit_mode": "soft"}), at=LATER)
    assert not again.needs_save and again.controls.updated_at == AT


# -- the service -------------------------------------------------------------------------
class MemoryRecords:
    def __init__(self) -> None:
        self.controls: dict[str, BillingControls] = {}
        self.audit: list[AuditEntry] = []
        self.conflicts_to_inject = 0

    def billing_controls(self, org_id: str) -> BillingControls | None:
        return self.controls.get(org_id)

    def save_billing_controls(
        self, controls: BillingControls, *, expected_version: int, audit: AuditEntry
    ) -> None:
        if self.conflicts_to_inject:
            self.conflicts_to_inject -= 1
            # Someone else saved in between: the stored version moves on.
            stored = self.controls.get(
                controls.org_id, BillingControls(org_id=controls.org_id, configured=True)
            )
            self.controls[controls.org_id] = replace(
                stored, version=stored.version + 1, alert_email_enabled=False
            )
            raise ConcurrentUpdate("changed")
        stored_version = self.controls[controls.org_id].version if controls.org_id in self.controls else 0
        if stored_version != expected_version:
            raise ConcurrentUpdate("changed")
        self.controls[controls.org_id] = controls
        self.audit.append(audit)

    def audit_entries(self, org_id: str, *, limit: int, after: str | None = None) -> list[AuditEntry]:
        mine = sorted((a for a in self.audit if a.org_id == org_id), key=lambda a: a.id, reverse=True)
        return [a for a in mine if after is None or a.id < after][:limit]


BILLING_USER = Principal(org_id=ORG, role="billing", via="session", user_id="user_b", session_id="sess_1")


def service() -> tuple[BillingControlsService, MemoryRecords, FixedClock]:
    records, clock = MemoryRecords(), FixedClock(datetime(2026, 1, 1, tzinfo=UTC))
    return BillingControlsService(records, clock), records, clock


def test_every_save_writes_one_audit_entry_naming_the_actor() -> None:
    svc, _, clock = service()
    # When a billing user sets a limit, then raises it
    svc.update(
        BILLING_USER,
        command({"limit_enabled": True, "limit_period": "daily", "limit_amount": 10}),
        ip_address="198.51.100.7",
    )
    clock.advance(minutes=5)
    saved = svc.update(BILLING_USER, command({"limit_amount": 25}), ip_address="198.51.100.7")
    # Then two entries, newest first, holding only what changed
    assert saved.limit_amount == Money.usd(25) and saved.version == 2
    newest, oldest = svc.audit(ORG).entries
    assert newest.action == ACTION_UPDATE
    assert (newest.actor_user_id, newest.actor_role, newest.ip_address) == (
        "user_b",
        "billing",
        "198.51.100.7",
    )
    assert newest.before == {"limit_amount": {"currency": "usd", "amount": "10.00"}}
    assert newest.after == {"limit_amount": {"currency": "usd", "amount": "25.00"}}
    assert newest.created_at == "2026-01-01T00:05:00.000Z"
    assert set(oldest.after) == {"limit_enabled", "limit_period", "limit_amount"}
    # And they are read a page at a time, older ones by the page's cursor
    first = svc.audit(ORG, limit=1)
    assert first.entries == [newest] and first.next_cursor == newest.id
    last = svc.audit(ORG, limit=1, cursor=first.next_cursor)
    assert last.entries == [oldest] and last.next_cursor is None
    with pytest.raises(InvalidRequest):
        svc.audit(ORG, cursor="batch_123")


def test_a_no_op_update_writes_nothing() -> None:
    svc, records, _ = service()
    svc.update(BILLING_USER, command({"limit_mode": "hard"}), ip_address=None)
    svc.update(BILLING_USER, command({"limit_mode": "hard"}), ip_address=None)
    assert len(records.audit) == 1


def test_get_gives_defaults_for_an_unconfigured_org() -> None:
    svc, _, _ = service()
    assert svc.get("org_new") == BillingControls(org_id="org_new")


def test_a_concurrent_save_is_retried_on_fresh_controls() -> None:
    # Given another save slips in once between read and write
    svc, records, _ = service()
    records.conflicts_to_inject = 1
    # When updated / Then the update lands on top of the other save (not over it)
    saved = svc.update(BILLING_USER, command({"limit_mode": "hard"}), ip_address=None)
    assert saved.limit_mode == "hard" and saved.alert_email_enabled is False
    assert len(records.audit) == 1


def test_persistent_conflicts_surface_as_409() -> None:
    svc, records, _ = service()
    records.conflicts_to_inject = 10
    with pytest.raises(ConcurrentUpdate) as caught:
        svc.update(BILLING_USER, command({"limit_mode": "hard"}), ip_address=None)
    assert caught.value.kind == "conflict" and caught.value.code == "concurrent_update"
