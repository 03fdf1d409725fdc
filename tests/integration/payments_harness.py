"""The payments test bench: the app on moto with its payment processor pointed at the payment
emulator on loopback, whose webhooks are posted to the app in-process, an org, and helpers
to buy credits through the hosted checkout page (docs/payments.md)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import stripe
from fastapi.testclient import TestClient

from batchroute.clock import FixedClock, isoformat
from batchroute.config import get_settings
from batchroute.domain.billing.ledger import ReservationTerms, period_keys
from batchroute.domain.billing.usage import ReservationCharge
from batchroute.ids import new_id
from batchroute.money import Money
from batchroute.observability import metrics
from batchroute.wiring import Wiring, wiring_for
from batchroute_tools.emulators.server import EmulatorServer
from batchroute_tools.emulators.stripe import StripeEmulator, sign
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from functions.api.deps import get_clock
from tests.integration.principals import TestOrg, new_org

SECRET_KEY = "sk_test_bench"
WEBHOOK_SECRET = "whsec_bench"
WEBHOOK_PATH = "/v1/billing/stripe/webhook"
GOOD_CARD = "4242424242424242"
DECLINES_LATER = "4000000000000341"


@dataclass
class Bench:
    client: TestClient
    emulator: StripeEmulator
    clock: FixedClock
    org: TestOrg
    server: EmulatorServer

    @property
    def wiring(self) -> Wiring:
        return wiring_for(get_settings(), self.clock)

    # -- money ---------------------------------------------------------------------------
    def balance(self) -> Money:
        return self.wiring.ledger.state(self.org.org_id).balance

    def spend(self, usd: str) -> None:
        """Charge `usd` of the balance (a reservation settled in full), as a batch would."""
        ledger, at = self.wiring.ledger, isoformat(self.clock.now())
        rid = new_id("evt")
        ledger.reserve(
            self.org.org_id,
            ReservationTerms(reservation_id=rid, amount=Money.usd(usd), purpose="batch", ref=rid),
            at=at,
        )
        ledger.settle(
            self.org.org_id,
            ReservationCharge(rid, Money.usd(usd), at, tuple(period_keys(self.clock.now(), "UTC").values())),
        )

    def moved(self) -> None:
        """What the billing watch does after a money movement: tell the auto top-up."""
        self.wiring.auto_topup.balance_moved(
            self.org.org_id, self.wiring.ledger.state(self.org.org_id), at=self.clock.now()
        )

    # -- purchase ------------------------------------------------------------------------
    def checkout(self, amount: Any = 25) -> dict[str, Any]:
        response = self.client.post(
            "/v1/billing/checkout", json={"amount": amount}, headers=self.org.session_headers("billing")
        )
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def pay(self, checkout: dict[str, Any], card: str = GOOD_CARD) -> httpx.Response:
        return httpx.post(checkout["checkout_url"] + "/pay", data={"card": card})

    def buy(self, amount: Any = 25, card: str = GOOD_CARD) -> str:
        """Buy credits through the hosted page and deliver the processor's webhooks."""
        checkout = self.checkout(amount)
        assert self.pay(checkout, card).status_code == 303
        self.emulator.deliver_pending()
        return str(checkout["session_id"])

    # -- auto top-up ---------------------------------------------------------------------
    def configure(self, **body: Any) -> dict[str, Any]:
        response = self.client.put(
            "/v1/billing/auto-topup", json=body, headers=self.org.key_headers("billing")
        )
        assert response.status_code == 200, response.text
        config: dict[str, Any] = response.json()["auto_topup"]
        return config

    def attempts(self, **query: Any) -> list[dict[str, Any]]:
        response = self.client.get(
            "/v1/billing/auto-topup/attempts", params=query, headers=self.org.key_headers("billing")
        )
        assert response.status_code == 200, response.text
        data: list[dict[str, Any]] = response.json()["data"]
        return data

    def events(self, event_type: str) -> list[dict[str, Any]]:
        return [e for e in self.wiring.billing_events.events(self.org.org_id) if e["type"] == event_type]

    # -- webhooks ------------------------------------------------------------------------
    def event_ids(self, event_type: str) -> list[str]:
        return [e.event["id"] for e in self.emulator.events if e.event["type"] == event_type]

    def post_event(
        self, event: dict[str, Any], *, secret: str = WEBHOOK_SECRET, at: datetime | None = None
    ) -> httpx.Response:
        """Post an event of our own making, signed (with `secret`) as the processor signs."""
        payload = httpx.Request("POST", "http://x", json=event).content
        stamp = int(at.timestamp()) if at is not None else int(time.time())
        headers = {"stripe-signature": sign(payload, secret, stamp), "content-type": "application/json"}
        return self.client.post(WEBHOOK_PATH, content=payload, headers=headers)  # type: ignore[return-value]


@contextmanager
def payments_bench(
    clock: FixedClock, *, secret_name: str | None = None, confirm_with_processor: bool | None = None
) -> Iterator[Bench]:
    """Inside a `local_aws` stack: the emulator running, the settings pointed at it (with the
    keys in the Secrets Manager secret `secret_name` if given, as in AWS; with
    `confirm_with_processor`, a paid session is confirmed with the emulator as it is with
    Stripe outside local mode)."""
    holder: dict[str, TestClient] = {}

    def deliver(url: str, payload: bytes, headers: dict[str, str]) -> int:
        return holder["client"].post(WEBHOOK_PATH, content=payload, headers=headers).status_code

    emulator = StripeEmulator(
        secret_key=SECRET_KEY,
        webhook_secret=WEBHOOK_SECRET,
        webhook_url="http://testserver" + WEBHOOK_PATH,
        deliver=deliver,
    )
    server = EmulatorServer([emulator.vendor]).start()
    names = {"PAYMENTS_API_URL": server.base_url + "/stripe"}
    if secret_name is None:
        names.update(STRIPE_SECRET_KEY=SECRET_KEY, STRIPE_WEBHOOK_SECRET=WEBHOOK_SECRET)
    else:
        names.update(PAYMENTS_SECRET_NAME=secret_name)
    if confirm_with_processor is not None:
        names["PAYMENTS_CONFIRM_WITH_PROCESSOR"] = str(confirm_with_processor).lower()
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(names)
    get_settings.cache_clear()
    try:
        identity_store.cache_clear()
        app = create_app()
        app.dependency_overrides[get_clock] = lambda: clock
        holder["client"] = TestClient(app, raise_server_exceptions=False)
        yield Bench(client=holder["client"], emulator=emulator, clock=clock, org=new_org(), server=server)
    finally:
        if not stopped(server):
            server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        get_settings.cache_clear()


# -- fixtures shared by payment test modules (import them by name: `running_bench as running_bench`) --
@pytest.fixture(name="clock")
def real_time_clock() -> FixedClock:
    # The emulator stamps payments with the real time: the service's clock is now as well.
    return FixedClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture(name="bench")
def running_bench(local_aws: LocalStack, clock: FixedClock) -> Iterator[Bench]:
    """The payments bench on the module's `clock` (`real_time_clock` unless the module has its own)."""
    with payments_bench(clock) as running:
        yield running


def stopped(server: EmulatorServer) -> bool:
    return server._server.socket.fileno() == -1  # closed: the processor is "down"


def paid_not_credited(bench: Bench, amount: int = 25) -> str:
    """A purchase paid on the hosted page whose webhooks never reach the service: its session id."""
    checkout = bench.checkout(amount)
    assert bench.pay(checkout).status_code == 303
    bench.emulator.events.clear()
    return str(checkout["session_id"])


def intent_of(bench: Bench, session_id: str) -> str:
    """The PaymentIntent that paid a Checkout Session at the emulator."""
    return str(bench.emulator.sessions[session_id]["payment_intent"])


def stripe_client(bench: Bench) -> stripe.StripeClient:
    """The official SDK against the bench's payment emulator, with the service's secret key."""
    return stripe.StripeClient(SECRET_KEY, base_addresses={"api": bench.server.base_url + "/stripe"})


def entries(bench: Bench, kind: str) -> list[dict[str, Any]]:
    """The org's ledger entries of type `kind`."""
    return [e for e in bench.wiring.ledger.entries(bench.org.org_id, limit=None) if e["entry_type"] == kind]


def counted(name: str) -> int:
    """The sum of the metric `name` emitted so far in this process."""
    return sum(metrics.metric_set.get(name, {}).get("Value", []))
