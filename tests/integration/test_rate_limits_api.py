"""Rate limits on moto: the DynamoDB counter store, and 429s with Retry-After through the API
for keys, accounts, sessions and the anonymous auth endpoints (time moved by a FixedClock)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi import Depends, FastAPI, Request
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.rate_limits import RateCounterStore
from batchroute.clock import FixedClock
from batchroute.config import Settings, get_settings
from batchroute.domain.billing.rate_limits import WindowCounts
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from functions.api.deps import get_clock
from functions.api.limits import limit_anonymous
from tests.integration.principals import TestOrg, new_org

START = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)  # a window boundary
CONTROLS = "/v1/billing/controls"


@pytest.fixture
def store(local_aws: LocalStack) -> RateCounterStore:
    return RateCounterStore(get_settings().table_name("controls"))


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START)


def app_with(clock: FixedClock, **limits: Any) -> FastAPI:
    """The real app with small limits, a fixed clock, and probe routes behind the anonymous limits."""
    identity_store.cache_clear()
    app = create_app(Settings(**limits))
    app.dependency_overrides[get_clock] = lambda: clock

    @app.post("/v1/_probe/login", dependencies=[Depends(limit_anonymous("login"))])
    async def login(request: Request) -> dict[str, Any]:
        return {"email": (await request.json()).get("email")}  # the body is still readable

    @app.post("/v1/_probe/register", dependencies=[Depends(limit_anonymous("register"))])
    def register() -> dict[str, bool]:
        return {"ok": True}

    @app.post("/v1/_probe/forgot", dependencies=[Depends(limit_anonymous("password"))])
    def forgot() -> dict[str, bool]:
        return {"ok": True}

    return app


# -- the store ---------------------------------------------------------------------------
def test_the_store_counts_each_counter_of_a_scope_in_one_item(
    store: RateCounterStore, local_aws: LocalStack
) -> None:
    # Given two hits in window 10 and one in window 11
    store.hit("org#a", window_seconds=60, index=10, counters=["org", "key:1"])
    store.hit("org#a", window_seconds=60, index=10, counters=["org", "key:2"])
    counts = store.hit("org#a", window_seconds=60, index=11, counters=["org", "key:1"])
    # Then the answer carries the current and previous window of each counter
    assert counts == {
        "org": WindowCounts(current=1, previous=2),
        "key:1": WindowCounts(current=1, previous=1),
    }
    # And other scopes and window lengths are separate
    assert store.hit("org#b", window_seconds=60, index=11, counters=["org"]) == {"org": WindowCounts(1, 0)}
    assert store.hit("org#a", window_seconds=30, index=11, counters=["org"]) == {"org": WindowCounts(1, 0)}


def test_the_store_gives_back_and_cleans_up_old_windows(
    store: RateCounterStore, local_aws: LocalStack
) -> None:
    import boto3

    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    store.hit("org#a", window_seconds=60, index=10, counters=["org"])
    store.hit("org#a", window_seconds=60, index=10, counters=["org"])
    store.give_back("org#a", window_seconds=60, index=10, counters=["org"])
    assert store.hit("org#a", window_seconds=60, index=11, counters=["org"])["org"] == WindowCounts(1, 1)
    # When two windows later the scope is hit again, window 10 is seen as stale...
    store.hit("org#a", window_seconds=60, index=13, counters=["org"])
    # ...and removed by the next write
    store.hit("org#a", window_seconds=60, index=13, counters=["org"])
    item = dynamodb.get_item(
        TableName=store.table_name, Key={"pk": {"S": "RATE#org#a#60s"}, "sk": {"S": "COUNTER"}}
    )["Item"]
    assert {k for k in item if "@" in k} == {"org@13"}
    assert int(item["ttl"]["N"]) == 15 * 60 + 60


def test_giving_back_to_a_vanished_item_is_harmless(store: RateCounterStore) -> None:
    store.give_back("org#gone", window_seconds=60, index=1, counters=["org"])
    assert store.hit("org#gone", window_seconds=60, index=1, counters=["org"]) == {"org": WindowCounts(1, 0)}


# -- authenticated callers ---------------------------------------------------------------
def test_a_key_over_its_limit_gets_429_with_retry_after(local_aws: LocalStack, clock: FixedClock) -> None:
    client = TestClient(
        app_with(clock, rate_limit_per_key=3, rate_limit_per_account=5), raise_server_exceptions=False
    )
    org = new_org()
    key = org.key_headers("billing")
    # Given 3 requests within the minute
    for _ in range(3):
        assert client.get(CONTROLS, headers=key).status_code == 200
    # When a 4th comes 30 s in
    clock.advance(seconds=30)
    response = client.get(CONTROLS, headers=key)
    # Then 429 in the envelope, with Retry-After in seconds
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "rate_limited"
    assert response.json()["error"]["details"] == {
        "limit": "api_key",
        "max_requests": 3,
        "window_seconds": 60,
    }
    assert response.headers["Retry-After"] == "50"  # 30 s to the boundary, then 20 s of decay
    # And another key of the org still has the account's room (the refusal was given back)
    other = org.key_headers("owner")
    assert client.get(CONTROLS, headers=other).status_code == 200
    assert client.get(CONTROLS, headers=other).status_code == 200
    # Until the account limit (5) holds for every key
    refused = client.get(CONTROLS, headers=other)
    assert refused.status_code == 429 and refused.json()["error"]["details"]["limit"] == "account"
    # And after Retry-After the first key is served again
    clock.advance(seconds=int(response.headers["Retry-After"]))
    assert client.get(CONTROLS, headers=key).status_code == 200


def test_accounts_are_independent(local_aws: LocalStack, clock: FixedClock) -> None:
    client = TestClient(
        app_with(clock, rate_limit_per_key=2, rate_limit_per_account=2), raise_server_exceptions=False
    )
    first, second = new_org(), new_org()
    first_key, second_key = first.key_headers(), second.key_headers()
    for _ in range(2):
        assert client.get(CONTROLS, headers=first_key).status_code == 200
    assert client.get(CONTROLS, headers=first_key).status_code == 429
    assert client.get(CONTROLS, headers=second_key).status_code == 200


def test_sessions_are_limited_too(local_aws: LocalStack, clock: FixedClock) -> None:
    client = TestClient(app_with(clock, rate_limit_per_key=1), raise_server_exceptions=False)
    org: TestOrg = new_org()
    session = org.session_headers("billing")
    assert client.put(CONTROLS, json={"limit_mode": "hard"}, headers=session).status_code == 200
    response = client.get(CONTROLS, headers=session)
    assert response.status_code == 429 and response.json()["error"]["details"]["limit"] == "user"


def test_unauthenticated_requests_are_not_counted_against_anyone(
    local_aws: LocalStack, clock: FixedClock
) -> None:
    client = TestClient(app_with(clock, rate_limit_per_key=1), raise_server_exceptions=False)
    for _ in range(3):
        assert client.get(CONTROLS, headers={"Authorization": "Bearer brk_local_nope"}).status_code == 401
    assert client.get("/v1/health").status_code == 200


def test_disabled_limits_let_everything_through(local_aws: LocalStack, clock: FixedClock) -> None:
    client = TestClient(
        app_with(clock, rate_limits_enabled=False, rate_limit_per_key=1), raise_server_exceptions=False
    )
    key = new_org().key_headers()
    assert all(client.get(CONTROLS, headers=key).status_code == 200 for _ in range(3))


# -- anonymous endpoints -----------------------------------------------------------------
def test_registration_is_limited_per_client_ip(local_aws: LocalStack, clock: FixedClock) -> None:
    client = TestClient(app_with(clock, rate_limit_register_per_ip=2), raise_server_exceptions=False)
    assert client.post("/v1/_probe/register").status_code == 200
    assert client.post("/v1/_probe/register").status_code == 200
    response = client.post("/v1/_probe/register")
    assert response.status_code == 429
    assert response.json()["error"]["details"]["limit"] == "register"
    assert int(response.headers["Retry-After"]) > 3600  # the refused attempt stays counted
    # And the next hour-and-a-half later it is open again
    clock.advance(seconds=int(response.headers["Retry-After"]))
    assert client.post("/v1/_probe/register").status_code == 200


def test_login_is_limited_per_ip_and_email_and_the_route_still_reads_the_body(
    local_aws: LocalStack, clock: FixedClock
) -> None:
    client = TestClient(
        app_with(clock, rate_limit_login_per_ip_email=2, rate_limit_login_per_ip=3),
        raise_server_exceptions=False,
    )
    # Given two attempts at one address
    for spelling in ("alice@example.com", "Alice@Example.com"):
        response = client.post("/v1/_probe/login", json={"email": spelling, "password": "x"})
        assert response.status_code == 200 and response.json() == {"email": spelling}
    # Then the third at that address is refused, another address is not, until the IP's cap
    assert client.post("/v1/_probe/login", json={"email": "ALICE@example.com"}).status_code == 429
    assert client.post("/v1/_probe/login", json={"email": "bob@example.com"}).status_code == 429  # 4 > 3
    # And a malformed body is left for the route to refuse (counted per IP only)
    clock.advance(hours=1)
    assert (
        client.post(
            "/v1/_probe/login", content=b"{bad", headers={"content-type": "application/json"}
        ).status_code
        != 429
    )


def test_password_requests_are_limited_per_email_across_ips(local_aws: LocalStack, clock: FixedClock) -> None:
    client = TestClient(
        app_with(clock, rate_limit_password_per_email=1, rate_limit_password_per_ip=10),
        raise_server_exceptions=False,
    )
    assert client.post("/v1/_probe/forgot", json={"email": "victim@example.com"}).status_code == 200
    response = client.post("/v1/_probe/forgot", json={"email": "victim@example.com"})
    assert response.status_code == 429 and response.json()["error"]["details"]["limit"] == "password_email"
    assert client.post("/v1/_probe/forgot", json={"email": "someone@example.com"}).status_code == 200
