"""Auto top-up over HTTP on moto against the payment emulator, with an injected clock: settings
and their validation, exactly one attempt when the balance falls below the trigger (even with
concurrent movers), the monthly cap, the webhook's single credit, failures that back off
(1 h, 6 h, then off) and alert, a failure reported after a success changing nothing, the
sweeper's recovery of a lost webhook, the attempts listing, and a failed settings write or
settings stuck in flight (written before the fix) never stopping auto top-up for good."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.client import BaseClient
from botocore.exceptions import ClientError

from batchroute.clock import FixedClock, isoformat
from batchroute.domain.billing.payments import AutoTopup
from batchroute.domain.billing.reconciliation import LedgerCredit
from batchroute.money import Money
from batchroute_tools.local.provision import LocalStack
from tests.integration.payments_harness import DECLINES_LATER, Bench, payments_bench

START = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
ENABLED = {"enabled": True, "trigger_balance": 10, "amount": 20, "monthly_cap": 100}


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START)


@pytest.fixture
def bench(local_aws: LocalStack, clock: FixedClock) -> Iterator[Bench]:
    with payments_bench(clock) as running:
        yield running


def put(bench: Bench, body: Any, role: str = "billing") -> Any:
    return bench.client.put("/v1/billing/auto-topup", json=body, headers=bench.org.key_headers(role))  # type: ignore[arg-type]


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


def topups(bench: Bench) -> list[dict[str, Any]]:
    return [
        e for e in bench.wiring.ledger.entries(bench.org.org_id, limit=None) if e["entry_type"] == "topup"
    ]


def armed(bench: Bench, card: str = "4242424242424242") -> None:
    """A purchase of 20 USD saves `card`; then auto top-up is on; then 15 USD are spent (5 left)."""
    bench.buy(20, card=card)
    bench.configure(**ENABLED)
    bench.spend("15")


# -- settings ----------------------------------------------------------------------------------
def test_unconfigured_settings_read_as_defaults(bench: Bench) -> None:
    answer = bench.client.get("/v1/billing/auto-topup", headers=bench.org.key_headers("admin"))
    assert answer.status_code == 200
    config = answer.json()["auto_topup"]
    assert config["configured"] is False and config["enabled"] is False
    assert config["trigger_balance"] == {"currency": "usd", "amount": "10.00"}
    assert config["amount"] == {"currency": "usd", "amount": "50.00"}
    assert config["monthly_cap"] == {"currency": "usd", "amount": "500.00"}
    assert config["payment_method"] is None and config["status"]["in_flight_attempt_id"] is None


def test_enabling_needs_a_saved_card(bench: Bench) -> None:
    assert error_of(put(bench, ENABLED), 400)["code"] == "payment_method_required"
    bench.buy(10)
    config = bench.configure(**ENABLED)
    assert config["enabled"] is True and config["configured"] is True
    assert config["payment_method"] == {"brand": "visa", "last4": "4242"}
    assert config["created_at"] == config["updated_at"] == "2026-03-01T09:30:00.000Z"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"amount": 4}, "amount"),
        ({"amount": 10_001}, "amount"),
        ({"amount": "12.345"}, "amount"),
        ({"trigger_balance": -1}, "trigger_balance"),
        ({"trigger_balance": 10_001}, "trigger_balance"),
        ({"monthly_cap": 10, "amount": 20}, "monthly_cap"),
        ({"monthly_cap": 100_001}, "monthly_cap"),
        ({"enabled": "yes"}, "enabled"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_invalid_settings_answer_400_naming_the_field(bench: Bench, body: dict[str, Any], field: str) -> None:
    error = error_of(put(bench, body), 400)
    assert error["code"] == "invalid_auto_topup" and error["details"]["field"] == field


def test_only_billing_managers_change_settings_and_the_read_object_can_be_sent_back(bench: Bench) -> None:
    for role in ("member", "admin"):
        assert error_of(put(bench, {"amount": 30}, role), 403)["code"] == "permission_denied"
    assert error_of(bench.client.get("/v1/billing/auto-topup", headers=bench.org.key_headers("member")), 403)
    current = bench.client.get("/v1/billing/auto-topup", headers=bench.org.key_headers("billing")).json()
    saved = put(bench, {**current["auto_topup"], "amount": {"currency": "usd", "amount": "30"}})
    assert saved.status_code == 200 and saved.json()["auto_topup"]["amount"]["amount"] == "30.00"


# -- starting and crediting --------------------------------------------------------------------
def test_falling_below_the_trigger_makes_one_attempt_and_the_webhook_credits_it_once(bench: Bench) -> None:
    armed(bench)
    assert bench.balance() == Money.usd(5)
    # When the balance moves (several times) below the trigger
    bench.moved()
    bench.moved()
    # Then one pending attempt, charged by the sweeper
    (attempt,) = bench.attempts()
    assert (attempt["status"], attempt["amount"]["amount"], attempt["processor_reference"]) == (
        "pending",
        "20.00",
        None,
    )
    report = bench.wiring.sweeper.sweep()
    assert report["auto_topups"]["charged"] == [attempt["id"]]
    assert bench.balance() == Money.usd(5)  # credited by the webhook, not by the charge's answer
    # When the processor's webhook arrives (twice)
    bench.emulator.deliver_pending()
    (succeeded,) = bench.event_ids("payment_intent.succeeded")[-1:]
    assert bench.emulator.redeliver(succeeded) == 200
    # Then the wallet is credited once and the attempt succeeded
    assert bench.balance() == Money.usd(25)
    (entry,) = topups(bench)
    (attempt,) = bench.attempts()
    assert attempt["status"] == "succeeded" and attempt["processor_reference"] == entry["processor_ref"]
    assert attempt["processor_reference"].startswith("pi_")
    assert [e["details"]["attempt_id"] for e in bench.events("billing.auto_topup_succeeded")] == [
        attempt["id"]
    ]
    assert bench.wiring.ledger.violations(bench.org.org_id) == []
    # And the slot is free again: the next fall starts the next attempt
    config = bench.client.get("/v1/billing/auto-topup", headers=bench.org.key_headers("billing")).json()[
        "auto_topup"
    ]
    assert config["status"]["in_flight_attempt_id"] is None
    assert config["status"]["month_committed"]["amount"] == "20.00"


def test_concurrent_movers_start_exactly_one_attempt(bench: Bench, serializable_transactions: None) -> None:
    armed(bench)
    service, org, balance, at = bench.wiring.auto_topup, bench.org.org_id, bench.balance(), bench.clock.now()
    started: list[object] = []
    barrier = threading.Barrier(8)

    def mover() -> None:
        barrier.wait()
        started.append(service.maybe_start(org, balance, at=at))

    threads = [threading.Thread(target=mover) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len([s for s in started if s is not None]) == 1
    assert len(bench.attempts()) == 1


def test_the_monthly_cap_holds_pending_and_succeeded_top_ups(bench: Bench, clock: FixedClock) -> None:
    # Given a cap of two top-ups of 20
    bench.buy(20)
    bench.configure(enabled=True, trigger_balance=10, amount=20, monthly_cap=40)
    for _ in range(2):
        bench.spend(str(bench.balance().amount))  # down to zero
        bench.moved()
        bench.wiring.sweeper.sweep()
        bench.emulator.deliver_pending()
        clock.advance(minutes=1)
    assert bench.balance() == Money.usd(20) and len(topups(bench)) == 2
    # When the balance falls again this month: no third attempt
    bench.spend("20")
    bench.moved()
    assert len(bench.attempts()) == 2
    # When the month turns (UTC), top-ups start again
    clock.advance(days=31)
    bench.moved()
    assert len(bench.attempts()) == 3 and bench.attempts()[0]["status"] == "pending"


def test_disabled_or_above_the_trigger_starts_nothing(bench: Bench) -> None:
    bench.buy(20)
    bench.configure(**ENABLED)
    bench.moved()  # 20 >= 10
    bench.configure(enabled=False)
    bench.spend("15")
    bench.moved()
    assert bench.attempts() == []


# -- failures ----------------------------------------------------------------------------------
def test_failures_alert_and_back_off_then_switch_auto_top_up_off(bench: Bench, clock: FixedClock) -> None:
    armed(bench, card=DECLINES_LATER)
    # First failure: the decline is recorded with the processor's reason, alerted, 1 h back-off
    bench.moved()
    bench.wiring.sweeper.sweep()
    (attempt,) = bench.attempts()
    assert attempt["status"] == "failed" and attempt["failure_code"] == "card_declined"
    assert attempt["failure_reason"] == "Your card was declined." and attempt[
        "processor_reference"
    ].startswith("pi_")
    (alert,) = bench.events("billing.auto_topup_failed")
    assert (
        alert["details"]["attempt_id"] == attempt["id"]
        and alert["details"]["retry_after"] == "2026-03-01T10:30:00.000Z"
    )
    # The processor's own payment_failed webhook for it changes nothing more
    assert bench.emulator.deliver_pending()
    assert len(bench.events("billing.auto_topup_failed")) == 1
    # Within the back-off nothing starts; after it the next attempt does
    clock.advance(minutes=59)
    bench.moved()
    assert len(bench.attempts()) == 1
    clock.advance(minutes=2)
    bench.moved()
    bench.wiring.sweeper.sweep()
    assert [a["status"] for a in bench.attempts()] == ["failed", "failed"]
    config = bench.client.get("/v1/billing/auto-topup", headers=bench.org.key_headers("billing")).json()[
        "auto_topup"
    ]
    assert config["status"]["consecutive_failures"] == 2
    assert config["status"]["retry_after"] == "2026-03-01T16:31:00.000Z"  # 6 h
    # The third failure switches auto top-up off until the user saves again
    clock.advance(hours=6, minutes=1)
    bench.moved()
    bench.wiring.sweeper.sweep()
    config = bench.client.get("/v1/billing/auto-topup", headers=bench.org.key_headers("billing")).json()[
        "auto_topup"
    ]
    assert config["enabled"] is False and config["status"]["disabled_reason"] == "payment_failed"
    assert bench.events("billing.auto_topup_failed")[0]["details"]["auto_topup_disabled"] is True
    clock.advance(days=2)
    bench.moved()
    assert len(bench.attempts()) == 3
    # Saving again clears the switch-off and the back-off; failed attempts gave back the month's cap
    config = bench.configure(enabled=True)
    assert (
        config["status"]["consecutive_failures"] == 0
        and config["status"]["month_committed"]["amount"] == "0.00"
    )
    assert bench.balance() == Money.usd(5) and topups(bench) == []


def test_a_failure_reported_after_the_success_changes_nothing(bench: Bench) -> None:
    armed(bench)
    bench.moved()
    bench.wiring.sweeper.sweep()
    bench.emulator.deliver_pending()
    (attempt,) = bench.attempts()
    intent = dict(bench.emulator.intents[attempt["processor_reference"]])
    intent.update(
        status="requires_payment_method", last_payment_error={"code": "card_declined", "message": "late"}
    )
    event = {
        "id": "evt_late",
        "object": "event",
        "livemode": False,
        "created": 1,
        "type": "payment_intent.payment_failed",
        "data": {"object": intent},
    }
    assert bench.post_event(event).json()["applied"] is False
    (attempt,) = bench.attempts()
    assert attempt["status"] == "succeeded" and bench.balance() == Money.usd(25)
    assert bench.events("billing.auto_topup_failed") == []


def test_a_success_reported_after_a_failure_still_credits_once(bench: Bench) -> None:
    # The processor took the money after all (its success comes after a failure was recorded)
    armed(bench)
    bench.moved()
    bench.wiring.sweeper.sweep()
    (attempt,) = bench.attempts()
    intent = dict(bench.emulator.intents[attempt["processor_reference"]])
    failed = dict(
        intent, status="requires_payment_method", last_payment_error={"code": "card_declined", "message": "x"}
    )
    event = {
        "id": "evt_f",
        "object": "event",
        "livemode": False,
        "created": 1,
        "type": "payment_intent.payment_failed",
        "data": {"object": failed},
    }
    assert bench.post_event(event).json()["applied"] is True
    bench.emulator.deliver_pending()  # the real payment_intent.succeeded
    bench.emulator.deliver_pending()
    assert bench.balance() == Money.usd(25) and len(topups(bench)) == 1
    assert bench.attempts()[0]["status"] == "succeeded"
    status = bench.client.get("/v1/billing/auto-topup", headers=bench.org.key_headers("billing")).json()
    assert status["auto_topup"]["status"]["consecutive_failures"] == 0
    assert status["auto_topup"]["status"]["month_committed"]["amount"] == "20.00"  # the money was taken


# -- recovery and listing ----------------------------------------------------------------------
def test_the_sweeper_recovers_an_attempt_whose_webhook_never_came(bench: Bench, clock: FixedClock) -> None:
    armed(bench)
    bench.moved()
    bench.wiring.sweeper.sweep()  # charged; the webhook is lost
    clock.advance(minutes=5)
    assert bench.wiring.sweeper.sweep()["auto_topups"]["recovered"] == []  # not yet stuck
    clock.advance(minutes=6)
    recovered = bench.wiring.sweeper.sweep()["auto_topups"]["recovered"]
    assert recovered == [bench.attempts()[0]["id"]]
    assert bench.balance() == Money.usd(25) and bench.attempts()[0]["status"] == "succeeded"
    # The webhook arriving late credits nothing more
    bench.emulator.deliver_pending()
    assert bench.balance() == Money.usd(25) and len(topups(bench)) == 1


def test_a_recovery_the_attempt_does_not_match_is_left_pending_and_credits_nothing(
    bench: Bench, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    armed(bench)
    bench.moved()
    bench.wiring.sweeper.sweep()  # charged; the webhook is lost
    processor = bench.wiring.auto_topup.processor
    real = processor.payment_intent
    monkeypatch.setattr(
        processor, "payment_intent", lambda ref: dataclasses.replace(real(ref), amount=Money.usd(2_000))
    )
    before = bench.balance()
    clock.advance(minutes=11)
    report = bench.wiring.sweeper.sweep()["auto_topups"]
    assert report["recovered"] == [] and report["left_pending"] == [bench.attempts()[0]["id"]]
    assert bench.balance() == before and bench.attempts()[0]["status"] == "pending"


def test_an_attempt_the_processor_never_took_expires_instead_of_being_charged_late(
    bench: Bench, clock: FixedClock
) -> None:
    armed(bench)
    bench.moved()
    bench.server.stop()  # the processor is unreachable
    report = bench.wiring.sweeper.sweep()["auto_topups"]
    assert report["charged"] == [bench.attempts()[0]["id"]] and bench.attempts()[0]["status"] == "pending"
    clock.advance(hours=23)
    bench.wiring.sweeper.sweep()
    (attempt,) = bench.attempts()
    assert (attempt["status"], attempt["failure_code"]) == ("failed", "attempt_expired")
    assert bench.balance() == Money.usd(5) and topups(bench) == []


def test_attempts_list_newest_first_with_a_cursor(bench: Bench, clock: FixedClock) -> None:
    armed(bench, card=DECLINES_LATER)
    for _ in range(3):
        bench.configure(enabled=True)  # clears the back-off
        bench.moved()
        bench.wiring.sweeper.sweep()
        clock.advance(minutes=1)
    everything = bench.attempts()
    assert [a["created_at"] for a in everything] == sorted(
        (a["created_at"] for a in everything), reverse=True
    )
    first = bench.client.get(
        "/v1/billing/auto-topup/attempts?limit=2", headers=bench.org.key_headers("billing")
    ).json()
    assert [a["id"] for a in first["data"]] == [a["id"] for a in everything[:2]]
    rest = bench.client.get(
        f"/v1/billing/auto-topup/attempts?limit=2&cursor={first['next_cursor']}",
        headers=bench.org.key_headers("billing"),
    ).json()
    assert [a["id"] for a in rest["data"]] == [everything[2]["id"]] and rest["next_cursor"] is None
    bad = bench.client.get(
        "/v1/billing/auto-topup/attempts?cursor=nope", headers=bench.org.key_headers("billing")
    )
    assert error_of(bad, 400)["code"] == "invalid_cursor"


# -- the billing watch (services/billing/watch.py) is what calls the auto top-up -------------------
def test_the_billing_watch_starts_the_top_up_and_sends_its_notices(bench: Bench) -> None:
    # Given auto top-up armed and the balance at 5 (trigger 10)
    armed(bench, card=DECLINES_LATER)
    # When any money movement reaches the billing watch
    bench.wiring.billing_watch.moved(bench.org.org_id, at=bench.clock.now())
    # Then the auto top-up listened: one pending attempt
    (attempt,) = bench.attempts()
    assert attempt["status"] == "pending"
    # And its failure notice goes through the watch: a billing event the customer can list
    bench.wiring.sweeper.sweep()
    listed = bench.client.get("/v1/billing/events", headers=bench.org.key_headers("billing"))
    assert listed.status_code == 200, listed.text
    failed = [e for e in listed.json()["data"] if e["type"] == "billing.auto_topup_failed"]
    assert [e["data"]["attempt_id"] for e in failed] == [attempt["id"]]


# -- a crash between the credit and the settings (in_flight never stuck) ------------------------
def writes_settings(operation: str, params: dict[str, Any]) -> bool:
    """A DynamoDB call that writes an org's `AUTOTOPUP` settings item."""
    if operation == "TransactWriteItems":
        items = [next(iter(item.values())) for item in params["TransactItems"]]
    elif operation in ("PutItem", "UpdateItem"):
        items = [params]
    else:
        return False
    return any((item.get("Item") or item.get("Key") or {}).get("sk") == {"S": "AUTOTOPUP"} for item in items)


@dataclasses.dataclass
class SettingsWrites:
    """Around the next write of the settings: fail it (a throttle, a timeout) or run `before`
    first (another writer getting in between the read and the write)."""

    fail_next: bool = False
    before: Any = None
    failed: int = 0


@pytest.fixture
def settings_writes(monkeypatch: pytest.MonkeyPatch) -> SettingsWrites:
    hooks = SettingsWrites()
    real = BaseClient._make_api_call

    def call(client: Any, operation: str, params: dict[str, Any]) -> Any:
        if writes_settings(operation, params):
            before, hooks.before = hooks.before, None
            if before is not None:
                before()
            if hooks.fail_next:
                hooks.fail_next = False
                hooks.failed += 1
                error = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "injected"}}
                raise ClientError(error, operation)
        return real(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", call)
    return hooks


def settings(bench: Bench) -> dict[str, Any]:
    answer = bench.client.get("/v1/billing/auto-topup", headers=bench.org.key_headers("billing"))
    assert answer.status_code == 200, answer.text
    config: dict[str, Any] = answer.json()["auto_topup"]
    return config


def credited_once(bench: Bench, attempt_id: str, *, balance: str) -> None:
    """The money invariants: the top-up credited exactly once, the wallet's entries add up and
    nothing is left reserved (each spend's reservation charged in full)."""
    wallet = bench.wiring.ledger.state(bench.org.org_id)
    assert (wallet.balance, wallet.reserved) == (Money.usd(balance), Money.zero())
    (entry,) = [e for e in topups(bench) if e["processor_ref"] == attempt_ref(bench, attempt_id)]
    assert entry["amount_micros"] == Money.usd(20).micros
    assert len({e["processor_ref"] for e in topups(bench)}) == len(topups(bench))
    assert bench.wiring.ledger.violations(bench.org.org_id) == []


def attempt_ref(bench: Bench, attempt_id: str) -> str:
    (attempt,) = [a for a in bench.attempts() if a["id"] == attempt_id]
    return str(attempt["processor_reference"])


def the_next_fall_starts_a_new_attempt(bench: Bench, before: str) -> dict[str, Any]:
    """Spend below the trigger again: a new attempt starts and holds the slot."""
    bench.spend("20")
    bench.moved()
    (newest,) = [a for a in bench.attempts() if a["id"] != before]
    assert newest["status"] == "pending"
    assert settings(bench)["status"]["in_flight_attempt_id"] == newest["id"]
    return newest


def credit_without_the_settings(bench: Bench, attempt_id: str) -> None:
    """What a first delivery left before the settings rode in the credit's transaction, when
    its separate settings write then failed: the credit and the attempt's success committed,
    the settings still holding the attempt in flight."""
    org_id, store = bench.org.org_id, bench.wiring.payments_store
    attempt = store.attempt(org_id, attempt_id)
    assert attempt is not None and attempt.processor_ref is not None
    at = isoformat(bench.clock.now())
    assert bench.wiring.ledger.credit(
        LedgerCredit(
            org_id=org_id, processor_ref=attempt.processor_ref, kind="topup", amount=attempt.amount, at=at
        ),
        memo=f"auto top-up {attempt_id}",
        extra_items=(store.succeeded_item(org_id, attempt_id, processor_ref=attempt.processor_ref, at=at),),
    )
    assert settings(bench)["status"]["in_flight_attempt_id"] == attempt_id


def charged(bench: Bench) -> str:
    """Armed, fallen below the trigger, and charged: the webhook waits at the processor."""
    armed(bench)
    bench.moved()
    (attempt,) = bench.attempts()
    bench.wiring.sweeper.sweep()
    return str(attempt["id"])


def test_a_failed_settings_write_of_the_success_leaves_nothing_half_done(
    bench: Bench, settings_writes: SettingsWrites
) -> None:
    attempt_id = charged(bench)
    # When the settings write of the success fails (throttled, or the function timed out)
    settings_writes.fail_next = True
    assert [s for s in bench.emulator.deliver_pending() if s >= 500]
    assert settings_writes.failed == 1
    # Then nothing was credited with it: the credit and the settings are one write
    assert bench.balance() == Money.usd(5) and topups(bench) == []
    assert bench.attempts()[0]["status"] == "pending"
    # When the processor delivers the event again (twice)
    (succeeded,) = bench.event_ids("payment_intent.succeeded")[-1:]
    assert bench.emulator.redeliver(succeeded) == 200
    assert bench.emulator.redeliver(succeeded) == 200
    # Then it is credited once, the attempt succeeded and the slot is free
    credited_once(bench, attempt_id, balance="25")
    assert bench.attempts()[0]["status"] == "succeeded"
    status = settings(bench)["status"]
    assert (status["in_flight_attempt_id"], status["month_committed"]["amount"]) == (None, "20.00")
    assert [e["details"]["attempt_id"] for e in bench.events("billing.auto_topup_succeeded")] == [attempt_id]
    # And auto top-up goes on
    the_next_fall_starts_a_new_attempt(bench, attempt_id)
    credited_once(bench, attempt_id, balance="5")


def test_settings_changed_between_the_read_and_the_credit_are_read_again_and_kept(
    bench: Bench, settings_writes: SettingsWrites
) -> None:
    attempt_id = charged(bench)
    store, org_id = bench.wiring.payments_store, bench.org.org_id

    def another_writer() -> None:  # the user saves a new trigger meanwhile
        current = store.auto_topup(org_id)
        changed = dataclasses.replace(current, trigger_balance=Money.usd(12))
        assert store.save(changed, expected_version=current.version)

    settings_writes.before = another_writer
    assert set(bench.emulator.deliver_pending()) == {200}
    credited_once(bench, attempt_id, balance="25")
    config = settings(bench)
    assert config["trigger_balance"]["amount"] == "12.00"  # kept: the credit's step ran again
    assert config["status"]["in_flight_attempt_id"] is None
    the_next_fall_starts_a_new_attempt(bench, attempt_id)


def test_a_repeated_success_frees_a_slot_the_first_delivery_left_held(bench: Bench) -> None:
    # Given a credit whose settings write failed before the fix: credited, still in flight
    attempt_id = charged(bench)
    credit_without_the_settings(bench, attempt_id)
    # When the processor delivers the success (again, as far as the ledger knows)
    assert set(bench.emulator.deliver_pending()) == {200}
    # Then nothing more is credited, but the slot is free and the success announced once
    credited_once(bench, attempt_id, balance="25")
    status = settings(bench)["status"]
    assert (status["in_flight_attempt_id"], status["consecutive_failures"]) == (None, 0)
    assert status["month_committed"]["amount"] == "20.00"
    assert [e["details"]["attempt_id"] for e in bench.events("billing.auto_topup_succeeded")] == [attempt_id]
    (succeeded,) = bench.event_ids("payment_intent.succeeded")[-1:]
    assert bench.emulator.redeliver(succeeded) == 200
    assert len(bench.events("billing.auto_topup_succeeded")) == 1
    # And the next fall below the trigger starts a new attempt
    the_next_fall_starts_a_new_attempt(bench, attempt_id)
    credited_once(bench, attempt_id, balance="5")


def test_a_slot_held_by_a_settled_attempt_is_free_for_the_next_fall(bench: Bench, clock: FixedClock) -> None:
    # Given settings left in flight by a credited attempt (before the fix), whose success the
    # processor will not send again, after an earlier failure's back-off
    attempt_id = charged(bench)
    credit_without_the_settings(bench, attempt_id)
    bench.emulator.events.clear()
    store, org_id = bench.wiring.payments_store, bench.org.org_id
    current = store.auto_topup(org_id)
    held: AutoTopup = dataclasses.replace(current, failures=1, retry_after=isoformat(clock.now()))
    assert store.save(held, expected_version=current.version)
    clock.advance(hours=1)
    # When the balance falls below the trigger again
    newest = the_next_fall_starts_a_new_attempt(bench, attempt_id)
    # Then the settled attempt's success counted (the failures reset, its 20 in the month) and
    # the new attempt holds the slot
    status = settings(bench)["status"]
    assert (status["consecutive_failures"], status["month_committed"]["amount"]) == (0, "40.00")
    credited_once(bench, attempt_id, balance="5")
    # And the new attempt goes through as any other
    bench.wiring.sweeper.sweep()
    bench.emulator.deliver_pending()
    credited_once(bench, newest["id"], balance="25")
    assert settings(bench)["status"]["in_flight_attempt_id"] is None
