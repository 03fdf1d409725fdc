"""`billing.limit_reached` is raised when settled spend reaches the limit, not by an in-flight
estimate that touches it: an estimate that settles lower gives the room back and must not use
up the period's one event (docs/billing-alerts.md; spec, "Billing alert events")."""

from __future__ import annotations

from pathlib import Path

from batchroute.clock import isoformat
from batchroute.domain.billing.ledger import ReservationTerms, period_keys
from batchroute.domain.billing.usage import ReservationCharge
from batchroute.money import Money
from batchroute.services.billing.watch import BillingWatch
from tests.integration.billing_alerts_support import set_monthly_limit
from tests.integration.principals import TestOrg
from tests.integration.test_billing_alerts import (  # noqa: F401 (fixtures)
    LATE_EVENING,
    clock,
    events,
    ledger,
    org,
    outbox,
    watch,
    wiring,
)


def _hold_and_settle(
    watcher: BillingWatch, org_id: str, reservation_id: str, held: str, charged: str
) -> None:
    """Reserve `held`, look, settle `charged` of it, look: as batch create and settlement do."""
    at = LATE_EVENING
    terms = ReservationTerms(reservation_id=reservation_id, amount=Money.usd(held), purpose="batch", ref="b")
    ledger().reserve(org_id, terms, at=isoformat(at))
    watcher.moved(org_id, at=at)
    keys = tuple(period_keys(at, "UTC").values())
    ledger().settle(org_id, ReservationCharge(reservation_id, Money.usd(charged), isoformat(at), keys))
    watcher.moved(org_id, at=at)


def test_limit_reached_fires_when_settled_spend_reaches_a_hard_limit(
    watch: BillingWatch,  # noqa: F811
    org: TestOrg,  # noqa: F811
    tmp_path: Path,
) -> None:
    # Given a hard monthly limit of $10
    set_monthly_limit(org.org_id, "10", "hard")
    # When a $10 estimate is held (spend + in flight = the limit) and settles at $1
    _hold_and_settle(watch, org.org_id, "res_a", "10", "1")
    # Then nothing was raised: the room came back
    assert events(org.org_id) == []
    # When a $9 estimate is held and settles at $9, taking settled spend to the limit
    _hold_and_settle(watch, org.org_id, "res_b", "9", "9")
    watch.moved(org.org_id, at=LATE_EVENING)
    # Then billing.limit_reached was raised once, on the settled spend
    (event,) = events(org.org_id)
    assert event["type"] == "billing.limit_reached"
    assert {k: event["details"][k] for k in ("limit", "spent", "in_flight", "mode")} == {
        "limit": "10.00",
        "spent": "10.00",
        "in_flight": "0.00",
        "mode": "hard",
    }
    # And the owner's email says new batches are refused until the period ends
    (mail,) = outbox(tmp_path)
    assert "New batches are refused until the period ends" in mail
