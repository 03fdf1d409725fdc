"""A spending limit's mode staged while the limit is off is kept when the limit is turned on;
removing a limit sets its mode back to soft, so a new limit still starts soft
(docs/billing-controls.md, "Updating")."""

from __future__ import annotations

from typing import Any

from batchroute.domain.billing.controls import BillingControls, UpdateControls, apply_update
from functions.api.schemas.billing.controls import ControlsUpdate

AT = "2026-01-01T00:00:00.000Z"
ORG = "org_a"
LIMIT = {"limit_period": "monthly", "limit_amount": 20}


def applied(current: BillingControls, body: dict[str, Any]) -> BillingControls:
    command: UpdateControls = ControlsUpdate.model_validate(body).command()
    return apply_update(current, command, at=AT).controls


def test_a_hard_mode_staged_while_the_limit_is_off_holds_when_it_is_turned_on() -> None:
    # Given a hard mode, period and amount saved while the limit is off
    staged = applied(BillingControls(org_id=ORG), {"limit_mode": "hard", **LIMIT})
    assert (staged.limit_enabled, staged.limit_mode) == (False, "hard")
    # When the limit is turned on without limit_mode
    enabled = applied(staged, {"limit_enabled": True})
    # Then it is the hard limit that was staged
    assert (enabled.limit_enabled, enabled.limit_mode) == (True, "hard")


def test_a_removed_hard_limit_leaves_a_soft_mode_so_the_next_limit_starts_soft() -> None:
    # Given a hard limit
    hard = applied(BillingControls(org_id=ORG), {"limit_enabled": True, "limit_mode": "hard", **LIMIT})
    # When it is removed
    removed = applied(hard, {"limit_enabled": False})
    # Then its mode is soft again, with its period and amount gone
    assert (removed.limit_mode, removed.limit_period, removed.limit_amount) == ("soft", None, None)
    # And a limit turned on later without limit_mode is soft, given all at once or staged first
    assert applied(removed, {"limit_enabled": True, **LIMIT}).limit_mode == "soft"
    assert applied(applied(removed, LIMIT), {"limit_enabled": True}).limit_mode == "soft"


def test_a_removal_that_names_a_mode_stages_it() -> None:
    hard = applied(BillingControls(org_id=ORG), {"limit_enabled": True, **LIMIT})
    # When the limit is removed in the same request that stages a hard mode
    removed = applied(hard, {"limit_enabled": False, "limit_mode": "hard"})
    # Then the hard mode is kept, and holds once the limit is turned on again
    assert (removed.limit_enabled, removed.limit_mode) == (False, "hard")
    assert applied(applied(removed, LIMIT), {"limit_enabled": True}).limit_mode == "hard"


def test_turning_on_a_limit_that_was_never_set_starts_soft() -> None:
    assert applied(BillingControls(org_id=ORG), {"limit_enabled": True, **LIMIT}).limit_mode == "soft"
