"""Billing alerts on moto with an injected clock: every threshold type once per period and
again in the next (a daily period in a non-UTC zone), the low-balance alert's fire / stay
quiet / re-arm at 110%, concurrent movers firing once, the email and webhook channels, the
events endpoint, and a watch that fails without failing a settlement (docs/billing-alerts.md)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email import message_from_string
from email import policy as email_policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.billing_events import BillingEvents
from batchroute.adapters.dynamo.controls import ControlsStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.dynamo.webhook_deliveries import ORG_OWNER, WebhookDeliveries
from batchroute.clock import FixedClock, isoformat
from batchroute.config import get_settings
from batchroute.domain.accounts.audit import AuditEntry
from batchroute.domain.billing.alerts import Alert
from batchroute.domain.billing.controls import BillingControls, Threshold
from batchroute.domain.billing.ledger import ReservationTerms, period_keys
from batchroute.domain.billing.usage import ReservationCharge
from batchroute.domain.delivery.webhooks import MAX_ATTEMPTS, delivery_id_for, verify
from batchroute.ids import new_id
from batchroute.money import Money
from batchroute.services.billing.watch import BillingWatch
from batchroute.wiring import Wiring
from batchroute_tools.admin import main as admin_main
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from functions.api.deps import get_clock
from tests.integration.batch_pipeline_support import heartbeat_all_lanes
from tests.integration.principals import TestOrg, new_org
from tests.integration.test_chat_holds import ScriptedProvider
from tests.integration.test_chat_holds import _direct as direct_chat
from tests.integration.test_chat_holds import _principal as chat_principal
from tests.integration.test_chat_holds import _request as chat_request
from tests.integration.test_openapi_answers import Contract
from tests.integration.test_webhook_delivery import (
    ORG_SECRET,
    Receiver,
    set_org_webhook,
    stdlib_signature,
)
from tests.integration.test_webhook_delivery import receiver as batch_webhook_receiver

ZONE = "America/New_York"
# 22:00 on Nov 20 in New York, and 01:00 on Nov 21 there: the same UTC date (Nov 21).
LATE_EVENING = datetime(2026, 11, 21, 3, 0, tzinfo=UTC)
AFTER_MIDNIGHT = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(LATE_EVENING)


@pytest.fixture
def wiring(
    local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: FixedClock
) -> Iterator[Wiring]:
    monkeypatch.setenv("LOCAL_OUTBOX_DIR", str(tmp_path / "outbox"))
    monkeypatch.setenv("ALLOW_LOOPBACK_WEBHOOKS", "1")
    get_settings.cache_clear()
    identity_store.cache_clear()
    yield Wiring(get_settings(), clock)
    get_settings.cache_clear()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """The batch webhook suite's real HTTP receiver on 127.0.0.1."""
    yield from batch_webhook_receiver.__wrapped__()  # type: ignore[attr-defined]


@pytest.fixture
def watch(wiring: Wiring) -> BillingWatch:
    return wiring.billing_watch


@pytest.fixture
def org(wiring: Wiring) -> TestOrg:
    return new_org(credit_usd="100")


def ledger() -> LedgerStore:
    return LedgerStore(get_settings().table_name("ledger"))


def events(org_id: str) -> list[dict[str, Any]]:
    """Oldest first, for readable assertions."""
    return list(reversed(BillingEvents(get_settings().table_name("controls")).events(org_id, limit=200)))


def kinds(org_id: str) -> list[str]:
    return [e["type"] for e in events(org_id)]


def outbox(tmp_path: Path) -> list[str]:
    """Each email sent, as its headers and its decoded text (a long line goes quoted-printable)."""
    return sorted(_readable(p.read_text()) for p in (tmp_path / "outbox").glob("*.eml"))


def _readable(raw: str) -> str:
    message = message_from_string(raw, policy=email_policy.default)
    assert isinstance(message, EmailMessage)
    body = message.get_body(("plain",))
    assert body is not None
    headers = "".join(f"{name}: {value}\n" for name, value in message.items())
    return f"{headers}\n{body.get_content()}"


def set_controls(org_id: str, **fields: Any) -> BillingControls:
    store = ControlsStore(get_settings().table_name("controls"))
    current = store.billing_controls(org_id) or BillingControls(org_id=org_id)
    saved = replace(current, configured=True, version=current.version + 1, **fields)
    audit = AuditEntry(new_id("aud"), org_id, None, None, "test", {}, {}, None, "2026-01-01T00:00:00.000Z")
    store.save_billing_controls(saved, expected_version=current.version, audit=audit)
    return saved


def spend(org_id: str, usd: str, at: datetime, zone: str = "UTC") -> None:
    """Reserve and settle `usd` at `at`: the balance falls and the period spend rises."""
    reservation_id = new_id("batch", at).replace("batch_", "res_")
    ledger().reserve(
        org_id,
        ReservationTerms(reservation_id=reservation_id, amount=Money.usd(usd), purpose="batch", ref="b"),
        at=isoformat(at),
    )
    ledger().settle(
        org_id,
        ReservationCharge(
            reservation_id, Money.usd(usd), isoformat(at), tuple(period_keys(at, zone).values())
        ),
    )


def grant(org_id: str, usd: str, at: datetime) -> None:
    ledger().grant(org_id, Money.usd(usd), at=isoformat(at), memo="test", actor="test")


def usd(amount: str) -> Money:
    return Money.usd(amount)


# -- thresholds ------------------------------------------------------------------------------
def test_spend_above_fires_once_per_local_day_and_again_the_next_day(
    watch: BillingWatch, org: TestOrg
) -> None:
    # Given a daily period in New York and a spend_above threshold of $1
    set_controls(
        org.org_id,
        limit_period="daily",
        limit_timezone=ZONE,
        alert_thresholds=(Threshold("spend_above", amount=usd("1")),),
    )
    # When $0.60 is spent late on Nov 20 (local), nothing crosses
    spend(org.org_id, "0.60", LATE_EVENING, ZONE)
    watch.moved(org.org_id, at=LATE_EVENING)
    assert kinds(org.org_id) == []
    # When another $0.60 is spent that evening, the threshold fires once
    spend(org.org_id, "0.60", LATE_EVENING + timedelta(minutes=5), ZONE)
    watch.moved(org.org_id, at=LATE_EVENING + timedelta(minutes=5))
    spend(org.org_id, "0.60", LATE_EVENING + timedelta(minutes=10), ZONE)
    watch.moved(org.org_id, at=LATE_EVENING + timedelta(minutes=10))
    (first,) = events(org.org_id)
    assert first["type"] == "billing.threshold_crossed"
    assert first["details"]["threshold"] == {"type": "spend_above", "value": "1.00"}
    assert first["details"]["observed"] == "1.20"
    assert first["details"]["period"] == "daily" and first["details"]["period_start"] == "2026-11-20"
    assert first["details"]["timezone"] == ZONE
    # When the local day turns (the UTC date does not), a movement with no new spend is quiet
    watch.moved(org.org_id, at=AFTER_MIDNIGHT)
    assert len(events(org.org_id)) == 1
    # And spending past $1 on the new local day fires again, for that day
    spend(org.org_id, "1.50", AFTER_MIDNIGHT, ZONE)
    watch.moved(org.org_id, at=AFTER_MIDNIGHT)
    second = events(org.org_id)[1]
    assert second["details"]["period_start"] == "2026-11-21" and second["details"]["observed"] == "1.50"
    assert len(events(org.org_id)) == 2


def test_balance_below_fires_once_per_month_by_default(watch: BillingWatch, org: TestOrg) -> None:
    # Given no limit period (thresholds then run monthly) and balance_below $50
    set_controls(org.org_id, alert_thresholds=(Threshold("balance_below", amount=usd("50")),))
    # When the balance drops to $40 and then $30 in November
    november = datetime(2026, 11, 10, tzinfo=UTC)
    spend(org.org_id, "60", november)
    watch.moved(org.org_id, at=november)
    spend(org.org_id, "10", november + timedelta(days=5))
    watch.moved(org.org_id, at=november + timedelta(days=5))
    # Then it fired once
    (event,) = events(org.org_id)
    assert event["details"]["threshold"] == {"type": "balance_below", "value": "50.00"}
    assert event["details"]["observed"] == "40.00" and event["details"]["period"] == "monthly"
    assert event["details"]["period_key"] == "M#2026-11"
    # And it says the period's spend (no rule reads it: it was "0.00")
    assert event["details"]["spent"] == "60.00"
    # And in December, still below, the next movement fires it again
    december = datetime(2026, 12, 1, 0, 1, tzinfo=UTC)
    spend(org.org_id, "1", december)
    watch.moved(org.org_id, at=december)
    assert [e["details"]["period_key"] for e in events(org.org_id)] == ["M#2026-11", "M#2026-12"]
    assert events(org.org_id)[1]["details"]["observed"] == "29.00"
    assert events(org.org_id)[1]["details"]["spent"] == "1.00"


def test_pct_of_limit_fires_at_the_percent_once_per_period(watch: BillingWatch, org: TestOrg) -> None:
    # Given a soft daily limit of $10 in New York and an alert at 50%
    set_controls(
        org.org_id,
        limit_enabled=True,
        limit_period="daily",
        limit_amount=usd("10"),
        limit_timezone=ZONE,
        alert_thresholds=(Threshold("pct_of_limit", percent=50),),
    )
    # When $4 is spent: 40%, quiet; then $1 more: 50% reached, fires; $1 more: quiet
    spend(org.org_id, "4", LATE_EVENING, ZONE)
    watch.moved(org.org_id, at=LATE_EVENING)
    assert kinds(org.org_id) == []
    for minutes in (1, 2):
        spend(org.org_id, "1", LATE_EVENING + timedelta(minutes=minutes), ZONE)
        watch.moved(org.org_id, at=LATE_EVENING + timedelta(minutes=minutes))
    (event,) = events(org.org_id)
    assert event["details"]["threshold"] == {"type": "pct_of_limit", "value": 50}
    assert event["details"]["observed"] == "50.00" and event["details"]["limit"] == "10.00"
    # And the next local day starts over: fires again once past 50% of that day
    spend(org.org_id, "5", AFTER_MIDNIGHT, ZONE)
    watch.moved(org.org_id, at=AFTER_MIDNIGHT)
    assert [e["details"]["period_start"] for e in events(org.org_id)] == ["2026-11-20", "2026-11-21"]


def test_pct_of_limit_without_a_limit_never_fires(watch: BillingWatch, org: TestOrg) -> None:
    set_controls(org.org_id, alert_thresholds=(Threshold("pct_of_limit", percent=1),))
    spend(org.org_id, "50", LATE_EVENING)
    watch.moved(org.org_id, at=LATE_EVENING)
    assert kinds(org.org_id) == []


def test_limit_reached_waits_for_charged_spend_and_reports_in_flight(
    watch: BillingWatch, org: TestOrg
) -> None:
    # Given a soft monthly limit of $5
    set_controls(org.org_id, limit_enabled=True, limit_period="monthly", limit_amount=usd("5"))
    # When $3 is charged and $2 is reserved for a running batch
    spend(org.org_id, "3", LATE_EVENING)
    ledger().reserve(
        org.org_id,
        ReservationTerms(reservation_id="res_running", amount=usd("2"), purpose="batch", ref="b"),
        at=isoformat(LATE_EVENING),
    )
    watch.moved(org.org_id, at=LATE_EVENING)
    # Then spend plus in-flight at the limit is not the limit reached
    assert kinds(org.org_id) == []
    # When $2 more is charged (and $2 is still in flight)
    spend(org.org_id, "2", LATE_EVENING)
    watch.moved(org.org_id, at=LATE_EVENING)
    watch.moved(org.org_id, at=LATE_EVENING)
    # Then billing.limit_reached was recorded once, with the figures it was judged on
    (event,) = events(org.org_id)
    assert event["type"] == "billing.limit_reached"
    assert {k: event["details"][k] for k in ("limit", "spent", "in_flight", "projected", "mode")} == {
        "limit": "5.00",
        "spent": "5.00",
        "in_flight": "2.00",
        "projected": "7.00",
        "mode": "soft",
    }


# -- low balance -------------------------------------------------------------------------------
def test_low_balance_fires_once_and_rearms_only_after_ten_percent_recovery(
    watch: BillingWatch, org: TestOrg, clock: FixedClock
) -> None:
    set_controls(org.org_id, low_balance_amount=usd("50"))

    def move(kind: str, amount: str) -> None:
        at = clock.advance(minutes=1)
        (spend if kind == "spend" else grant)(org.org_id, amount, at)
        watch.moved(org.org_id, at=at)

    # When the balance falls from $100 to $45: fires
    move("spend", "55")
    assert kinds(org.org_id) == ["billing.low_balance"]
    first = events(org.org_id)[0]["details"]
    assert (first["level"], first["balance"], first["rearm_at"]) == ("50.00", "45.00", "55.00")
    # And falling further, or recovering above the level but under 110% of it, stays quiet
    move("spend", "5")  # 40
    move("grant", "14.99")  # 54.99: above the level, not re-armed
    move("spend", "10")  # 44.99: low again, but the alert is not armed
    assert kinds(org.org_id) == ["billing.low_balance"]
    # When the balance is back at 110% of the level ($55), the alert re-arms (no event)
    move("grant", "10.01")  # 55.00
    assert kinds(org.org_id) == ["billing.low_balance"]
    # And the next drop under the level fires again
    move("spend", "5.01")  # 49.99
    assert kinds(org.org_id) == ["billing.low_balance", "billing.low_balance"]
    assert events(org.org_id)[1]["details"]["balance"] == "49.99"
    move("spend", "1")
    assert len(events(org.org_id)) == 2


def test_concurrent_movers_record_each_alert_once(
    wiring: Wiring, org: TestOrg, serializable_transactions: None
) -> None:
    # Given a low balance with a low-balance level and a balance_below threshold
    set_controls(
        org.org_id,
        low_balance_amount=usd("50"),
        alert_thresholds=(Threshold("balance_below", amount=usd("60")),),
    )
    spend(org.org_id, "70", LATE_EVENING)
    # When eight movers look at once
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def mover() -> None:
        try:
            barrier.wait()
            wiring.billing_watch.moved(org.org_id, at=LATE_EVENING)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=mover) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then each alert was recorded once
    assert errors == []
    assert sorted(kinds(org.org_id)) == ["billing.low_balance", "billing.threshold_crossed"]


# -- channels ----------------------------------------------------------------------------------
def test_alert_email_goes_to_the_owner_only_when_enabled(
    watch: BillingWatch, org: TestOrg, tmp_path: Path
) -> None:
    # Given email alerts on (the default)
    set_controls(org.org_id, low_balance_amount=usd("50"))
    spend(org.org_id, "60", LATE_EVENING)
    watch.moved(org.org_id, at=LATE_EVENING)
    (mail,) = outbox(tmp_path)
    assert f"To: {org.owner_user_id}@example.com" in mail
    assert "Subject: Low credit balance" in mail and "40.00 USD" in mail
    # When email alerts are turned off, a new alert is recorded but not mailed
    set_controls(
        org.org_id, alert_email_enabled=False, alert_thresholds=(Threshold("spend_above", amount=usd("1")),)
    )
    watch.moved(org.org_id, at=LATE_EVENING + timedelta(minutes=1))
    assert kinds(org.org_id) == ["billing.low_balance", "billing.threshold_crossed"]
    assert len(outbox(tmp_path)) == 1


def billing_deliveries() -> WebhookDeliveries:
    return WebhookDeliveries(get_settings().table_name("controls"), owner=ORG_OWNER)


def test_alert_webhook_is_signed_retried_and_dead_lettered_like_batch_webhooks(
    wiring: Wiring, org: TestOrg, receiver: Receiver, clock: FixedClock
) -> None:
    # Given webhook alerts on, the org's delivery webhook at a receiver that fails at first
    set_org_webhook(org.org_id, receiver.url("/hooks/billing"))
    set_controls(
        org.org_id, alert_email_enabled=False, alert_webhook_enabled=True, low_balance_amount=usd("50")
    )
    receiver.answer(500, 503, 200)
    # When the balance falls under the level
    spend(org.org_id, "60", LATE_EVENING)
    wiring.billing_watch.moved(org.org_id, at=LATE_EVENING)
    (event,) = events(org.org_id)
    delivery_id = delivery_id_for(org.org_id, event["event_id"])
    pending = billing_deliveries().get(org.org_id, delivery_id)
    assert pending is not None and pending.status == "pending" and receiver.received == []
    # Then the sweeper's run makes the first attempt (failed: retried 5 s later), then the next
    assert wiring.sweeper.sweep()["billing_webhooks"]["attempted"] == [delivery_id]
    assert billing_deliveries().get(org.org_id, delivery_id).status == "failed"  # type: ignore[union-attr]
    clock.advance(seconds=4)
    assert wiring.billing_webhooks.retry_due().attempted == []
    clock.advance(seconds=1)
    assert wiring.billing_webhooks.retry_due().attempted == [delivery_id]
    clock.advance(minutes=5)
    assert wiring.billing_webhooks.retry_due().succeeded == [delivery_id]
    # And each attempt carried the same body, signed with the org's secret over the raw bytes
    assert len(receiver.received) == 3
    assert len({hit.body for hit in receiver.received}) == 1
    hit = receiver.received[-1]
    timestamp, signature = hit.headers["x-service-timestamp"], hit.headers["x-service-signature"]
    assert signature == stdlib_signature(ORG_SECRET, timestamp, hit.body)
    assert verify(ORG_SECRET.encode(), timestamp, hit.body, signature, now=clock.now())
    assert hit.headers["x-service-event"] == "billing.low_balance"
    body = json.loads(hit.body)
    assert body == {
        "id": event["event_id"],
        "object": "billing.event",
        "type": "billing.low_balance",
        "org_id": org.org_id,
        "created_at": isoformat(LATE_EVENING),
        "data": event["details"],
    }
    assert ORG_SECRET not in hit.body.decode()
    # And a receiver that never answers 2xx gets the event dead-lettered after the 8th attempt
    receiver.answer(500)
    set_controls(org.org_id, alert_thresholds=(Threshold("balance_below", amount=usd("45")),))
    wiring.billing_watch.moved(org.org_id, at=clock.now())
    failing = delivery_id_for(org.org_id, events(org.org_id)[-1]["event_id"])
    statuses = []
    for _ in range(MAX_ATTEMPTS):
        due = billing_deliveries().get(org.org_id, failing)
        assert due is not None
        clock._now = datetime.fromisoformat(str(due.next_attempt_at).replace("Z", "+00:00"))
        wiring.billing_webhooks.retry_due()
        statuses.append(billing_deliveries().get(org.org_id, failing).status)  # type: ignore[union-attr]
    assert statuses == ["failed"] * (MAX_ATTEMPTS - 1) + ["dead_lettered"]
    # And the event list shows each event's delivery, the dead letter included
    listed = wiring.billing_event_log.list(org.org_id)["data"]
    assert [(e["type"], e["webhook"]["status"]) for e in listed] == [
        ("billing.threshold_crossed", "dead_lettered"),
        ("billing.low_balance", "succeeded"),
    ]
    assert listed[0]["webhook"]["attempt_count"] == MAX_ATTEMPTS
    assert listed[0]["webhook"]["last_error"] == "receiver answered 500"
    assert ORG_SECRET not in json.dumps(listed)


def test_no_webhook_without_alert_webhook_enabled_or_without_an_org_webhook(
    wiring: Wiring, org: TestOrg, receiver: Receiver
) -> None:
    # Given an org webhook but webhook alerts off (the default)
    set_org_webhook(org.org_id, receiver.url())
    set_controls(org.org_id, low_balance_amount=usd("50"))
    spend(org.org_id, "60", LATE_EVENING)
    wiring.billing_watch.moved(org.org_id, at=LATE_EVENING)
    # And another org with webhook alerts on but no delivery webhook
    other = new_org(credit_usd="1")
    set_controls(other.org_id, alert_webhook_enabled=True, low_balance_amount=usd("50"))
    wiring.billing_watch.moved(other.org_id, at=LATE_EVENING)
    # Then both alerts are recorded, and nothing is owed or sent
    assert kinds(org.org_id) == kinds(other.org_id) == ["billing.low_balance"]
    assert billing_deliveries().due(isoformat(LATE_EVENING + timedelta(days=3))) == []
    wiring.billing_webhooks.retry_due()
    assert receiver.received == []


# -- notify, listeners, failures -----------------------------------------------------------------
def test_notify_records_once_per_key_and_tells_listeners(
    wiring: Wiring, org: TestOrg, tmp_path: Path
) -> None:
    heard: list[tuple[str, Money, Money]] = []

    class Listener:
        def balance_moved(self, org_id: str, wallet: Any, *, at: datetime) -> None:
            heard.append((org_id, wallet.balance, wallet.available))

    class Broken:
        def balance_moved(self, org_id: str, wallet: Any, *, at: datetime) -> None:
            raise RuntimeError("listener down")

    watch = BillingWatch(
        controls=wiring.controls,
        ledger=wiring.ledger,
        records=wiring.billing_events,
        channels=wiring.billing_watch.channels,
        listeners=(Broken(), Listener()),
    )
    # When an auto top-up event is notified twice under one key
    details = {"amount": "25.00", "attempt_id": "att_1"}
    first = watch.notify(
        org.org_id, Alert("billing.auto_topup_succeeded", "topup#att_1", details), at=LATE_EVENING
    )
    again = watch.notify(
        org.org_id, Alert("billing.auto_topup_succeeded", "topup#att_1", details), at=LATE_EVENING
    )
    # Then one event, one email (controls never saved: email on by default)
    assert first is not None and again is None
    assert kinds(org.org_id) == ["billing.auto_topup_succeeded"]
    assert "Subject: Auto top-up succeeded" in outbox(tmp_path)[0]
    # And a movement reaches every listener even when one of them fails
    spend(org.org_id, "1", LATE_EVENING)
    watch.moved(org.org_id, at=LATE_EVENING)
    assert heard == [(org.org_id, usd("99"), usd("99"))]


def test_a_failing_watch_never_fails_the_movement(wiring: Wiring, org: TestOrg) -> None:
    class Down:
        def billing_controls(self, org_id: str) -> BillingControls | None:
            raise RuntimeError("controls table unavailable")

        def state(self, org_id: str) -> Any:
            raise RuntimeError("ledger unavailable")

    # A watch whose stores fail returns quietly, from every entry point
    broken = BillingWatch(controls=Down(), ledger=Down(), records=wiring.billing_events)  # type: ignore[arg-type]
    broken.moved(org.org_id, at=LATE_EVENING)
    half = BillingWatch(controls=Down(), ledger=wiring.ledger, records=wiring.billing_events)
    half.moved(org.org_id, at=LATE_EVENING)
    assert half.notify(org.org_id, Alert("billing.low_balance", "x", {}), at=LATE_EVENING) is not None


# -- the events endpoint -------------------------------------------------------------------------
def test_events_endpoint_lists_newest_first_with_a_cursor(
    wiring: Wiring, org: TestOrg, clock: FixedClock
) -> None:
    app = create_app()
    app.dependency_overrides[get_clock] = lambda: clock
    client = TestClient(app, raise_server_exceptions=False)
    for n in range(3):
        wiring.billing_watch.notify(
            org.org_id, Alert("billing.auto_topup_failed", f"k{n}", {"n": n}), at=clock.advance(minutes=1)
        )
    headers = org.key_headers("billing")
    # When the first page of two is read
    page = client.get("/v1/billing/events?limit=2", headers=headers)
    assert page.status_code == 200, page.text
    body = Contract(client.get("/openapi.json").json()).check(page, "get", "/v1/billing/events")
    assert [e["data"]["n"] for e in body["data"]] == [2, 1]
    assert (
        body["data"][0]["object"] == "billing.event"
        and body["data"][0]["type"] == "billing.auto_topup_failed"
    )
    assert body["data"][0]["org_id"] == org.org_id and body["data"][0]["id"].startswith("evt_")
    assert body["data"][0]["webhook"] is None  # webhook alerts are off
    # Then the cursor reads the rest, and the last page has no cursor
    rest = client.get(f"/v1/billing/events?limit=2&cursor={body['next_cursor']}", headers=headers).json()
    assert [e["data"]["n"] for e in rest["data"]] == [0] and rest["next_cursor"] is None
    # And the org's events only, to billing readers only
    other = new_org()
    assert client.get("/v1/billing/events", headers=other.key_headers("owner")).json()["data"] == []
    assert client.get("/v1/billing/events", headers=org.key_headers("member")).status_code == 403
    assert client.get("/v1/billing/events").status_code == 401
    bad = client.get("/v1/billing/events?cursor=nope", headers=headers)
    assert bad.status_code == 400 and bad.json()["error"]["details"] == {"field": "cursor"}
    assert client.get("/v1/billing/events?limit=201", headers=headers).status_code == 400


def test_an_operator_grant_runs_the_watch_and_rearms_the_low_balance_alert(
    watch: BillingWatch, org: TestOrg, local_aws: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a low-balance alert that fired at $40 (level $50)
    set_controls(org.org_id, low_balance_amount=usd("50"))
    spend(org.org_id, "60", LATE_EVENING)
    watch.moved(org.org_id, at=LATE_EVENING)
    assert kinds(org.org_id) == ["billing.low_balance"]
    # When an operator grants $20 with batchroute-admin (balance $60: at least 110% of $50)
    target = ["--table-prefix", local_aws.prefix, "--region", local_aws.region]
    assert admin_main(["credits", "grant", "--org", org.org_id, "--usd", "20", *target]) == 0
    assert "balance now 60.00 usd" in capsys.readouterr().out
    # Then the alert re-armed, so the next fall under $50 fires it again
    spend(org.org_id, "15", LATE_EVENING + timedelta(hours=1))
    watch.moved(org.org_id, at=LATE_EVENING + timedelta(hours=1))
    assert kinds(org.org_id) == ["billing.low_balance", "billing.low_balance"]


def test_a_low_balance_alert_that_could_not_be_recorded_fires_at_the_next_movement(
    watch: BillingWatch, org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a balance under the level, and an events store that is down for one movement
    set_controls(org.org_id, low_balance_amount=usd("50"))
    spend(org.org_id, "60", LATE_EVENING)
    working = BillingEvents.record_once

    def down(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("controls table unavailable")

    monkeypatch.setattr(BillingEvents, "record_once", down)
    watch.moved(org.org_id, at=LATE_EVENING)
    monkeypatch.setattr(BillingEvents, "record_once", working)
    assert kinds(org.org_id) == []
    # When the next movement looks, the episode was not marked fired: it fires now
    watch.moved(org.org_id, at=LATE_EVENING + timedelta(minutes=1))
    assert kinds(org.org_id) == ["billing.low_balance"]


def test_notified_details_keep_their_numbers(watch: BillingWatch, org: TestOrg) -> None:
    details = {"amount": "25.00", "attempt": 2, "next_retry_hours": 1.5, "codes": ["card_declined"]}
    sent = watch.notify(org.org_id, Alert("billing.auto_topup_failed", "att_2", details), at=LATE_EVENING)
    assert sent is not None and sent.details == details
    assert events(org.org_id)[0]["details"] == details


def test_a_stale_chat_hold_charged_by_the_sweeper_runs_the_watch(wiring: Wiring, clock: FixedClock) -> None:
    # Given a $1 org with a low-balance level of $1, and a direct chat stream that
    # checkpointed 5 tokens before its function died
    heartbeat_all_lanes()
    org = new_org(credit_usd="1")
    set_controls(org.org_id, low_balance_amount=usd("1"))
    direct, _ = direct_chat(ScriptedProvider("edge-eu", tokens=10), clock)
    call = direct.open(chat_principal(org), chat_request(stream=True))
    call.next_event()
    for _ in range(4):
        clock.advance(seconds=1)
        call.next_event()
    assert kinds(org.org_id) == []  # a hold moves neither the balance nor the spend
    # When the sweeper settles the stale hold
    clock.advance(seconds=wiring.settings.chat_hold_stale_seconds + 1)
    report = wiring.sweeper.sweep()
    # Then the charge took the balance under $1 and the watch raised the alert
    assert report["chat_holds_settled"] == [call.hold_id]
    assert kinds(org.org_id) == ["billing.low_balance"]
