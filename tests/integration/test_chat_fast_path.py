"""The direct chat hot path in two AWS calls (issue 18, point 3): the caller's rate limit is
counted inside the hold's transaction, and the lanes' live state is re-read after an answer,
never before one. Proven on moto with botocore's event hooks (the call count) and with
concurrent requests (the limits are exact, each hold is written once)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.aws import client as aws_client
from batchroute.adapters.dynamo.chat_holds import ChatHoldStore
from batchroute.adapters.dynamo.controls import ControlsStore
from batchroute.adapters.dynamo.lanes import LaneStateStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.dynamo.rate_limits import RateCounterStore, attribute_name
from batchroute.adapters.dynamo.route_policies import RoutePolicyStore
from batchroute.catalog import builtin_catalog
from batchroute.clock import FixedClock
from batchroute.config import get_settings
from batchroute.domain.accounts.access import Principal
from batchroute.domain.accounts.audit import AuditEntry
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.chat.requests import parse_chat_request
from batchroute.domain.routing.policy import parse_update
from batchroute.errors import RateLimited, ServiceError
from batchroute.ids import new_id
from batchroute.money import Money
from batchroute.providers.base import ProviderRequest, StreamEvent, SyncProvider
from batchroute.providers.simulated import SimulatedSyncProvider
from batchroute.services.billing.rate_limiting import RateLimiter, RateLimitPolicy
from batchroute.services.catalog.catalog import guards_for
from batchroute.services.chat.direct import DirectCall, DirectChat, DirectOptions
from batchroute.services.chat.early_start import EarlyStarts
from batchroute.services.chat.state import HoldKeeper, LaneStateCache, LaneStats
from batchroute.services.routing.policy import CACHE_SECONDS, PolicyReader, RoutePolicyService
from batchroute.wiring import Wiring
from batchroute_tools.local import moto_transactions
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.batch_pipeline_support import heartbeat_all_lanes
from tests.integration.principals import TestOrg, new_org
from tests.integration.test_chat_holds import LLAMA, Providers, ScriptedProvider

WINDOW = 60
# Half-way through a window: the previous window's requests weigh one half.
HALF_WAY = datetime.fromtimestamp(29_000_000 * WINDOW + WINDOW / 2, tz=UTC)


@pytest.fixture
def stack(local_aws: LocalStack) -> Iterator[LocalStack]:
    identity_store.cache_clear()
    heartbeat_all_lanes()
    # DynamoDB isolates transactions; moto in-process does not (the local stack's patch does).
    moto_transactions.install()
    try:
        yield local_aws
    finally:
        moto_transactions.uninstall()


def _direct(
    clock: FixedClock,
    policy: RateLimitPolicy,
    *,
    policies: PolicyReader | None = None,
    providers: Providers | None = None,
    early: EarlyStarts | None = None,
) -> tuple[DirectChat, RateLimiter]:
    settings = get_settings()
    controls = settings.table_name("controls")
    store = ChatHoldStore(
        ledger=LedgerStore(settings.table_name("ledger")),
        batches_table=settings.table_name("batches"),
        controls_table=controls,
    )
    limiter = RateLimiter(RateCounterStore(controls), clock, policy)
    direct = DirectChat(
        catalog=builtin_catalog(),
        lanes=LaneStateCache(LaneStateStore(controls), 60),
        stats=LaneStats(),
        holds=HoldKeeper(store, clock, limiter=limiter),
        store=store,
        providers=providers or Providers(ScriptedProvider("edge-eu", tokens=3)),
        controls=ControlsStore(controls),
        guards=guards_for(settings),
        clock=clock,
        options=DirectOptions(checkpoint_seconds=2),
        limiter=limiter,
        policies=policies or PolicyReader(RoutePolicyStore(controls), clock),
        watch=Wiring(settings, clock).billing_watch,
        availability=LaneStateStore(controls),
        early=early,
    )
    return direct, limiter


def _request() -> Any:
    body = {
        "model": LLAMA,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 100,
        "stream": True,
    }
    return parse_chat_request(body, builtin_catalog())


def _principal(org: TestOrg) -> Principal:
    return Principal(org_id=org.org_id, role="owner", via="api_key", key_id="key_fast")


def _concurrently(
    direct: DirectChat, principal: Principal, n: int
) -> tuple[list[DirectCall], list[Exception]]:
    """`n` requests opened at once, each on its own thread."""
    barrier = threading.Barrier(n)
    calls: list[DirectCall] = []
    errors: list[Exception] = []
    lock = threading.Lock()

    def one() -> None:
        barrier.wait()
        try:
            call = direct.open(principal, _request())
        except Exception as exc:
            with lock:
                errors.append(exc)
        else:
            with lock:
                calls.append(call)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return calls, errors


def _counted(org: TestOrg, counter: str, index: int) -> int:
    item = aws_client("dynamodb").get_item(
        TableName=get_settings().table_name("controls"),
        Key={"pk": {"S": f"RATE#org#{org.org_id}#{WINDOW}s"}, "sk": {"S": "COUNTER"}},
        ConsistentRead=True,
    )["Item"]
    return int(item[attribute_name(counter, index)]["N"])


def test_warm_direct_chat_makes_one_aws_call_before_the_provider(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hold, with the rate limit and the key's confirmation in it (the key comes from the
    process's copy). The lane-state TTL is 0 here, so every request finds the view due: it is
    re-read after the answer, not before."""
    settings = get_settings().model_copy(
        update={"simulated_ttft_ms": 0, "simulated_inter_token_ms": 0, "chat_lane_state_ttl_seconds": 0}
    )
    org = new_org(credit_usd="1")
    headers = org.key_headers()
    calls: list[str] = []
    at_provider: list[int] = []
    original = SimulatedSyncProvider.stream

    def stream(self: SimulatedSyncProvider, request: ProviderRequest) -> Iterator[StreamEvent]:
        at_provider.append(len(calls))
        return original(self, request)

    def count(event_name: str, **_: Any) -> None:
        calls.append(event_name.split(".")[-1])

    monkeypatch.setattr(SimulatedSyncProvider, "stream", stream)
    body = {"model": LLAMA, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stream": True}
    ledger = LedgerStore(get_settings().table_name("ledger"))
    with TestClient(create_app(settings)) as test_client:
        assert test_client.post("/v1/chat/completions", json=body, headers=headers).status_code == 200
        events = aws_client("dynamodb").meta.events
        events.register("before-call.dynamodb", count)
        try:
            for _ in range(3):
                calls.clear()
                response = test_client.post("/v1/chat/completions", json=body, headers=headers)
                assert response.status_code == 200
                assert response.text.rstrip().endswith("data: [DONE]")
                # At most one call before the provider: the transaction (hold, rate limit, key
                # check), which the first lane's request now overlaps (services/chat/early_start.py)
                assert at_provider[-1] <= 1, calls
                assert calls[:1] == ["TransactWriteItems"]
                # and the lane view, due every time here, was read after the answer
                assert "Query" in calls[2:]
        finally:
            events.unregister("before-call.dynamodb", count)
    # Each request was held once and settled once: nothing is left reserved
    assert ledger.state(org.org_id).reserved == Money.zero()
    assert ledger.violations(org.org_id) == []


def test_concurrent_requests_never_beat_the_rate_limit(stack: LocalStack) -> None:
    # Given a key limited to 10 requests a minute, half-way through a window, after a
    # window in which it made 4 (they weigh 2 now: 8 more fit), in a process that has not
    # seen that window (the first holds assume the previous window was full)
    org = new_org(credit_usd="5")
    clock = FixedClock(HALF_WAY)
    direct, limiter = _direct(clock, RateLimitPolicy(window_seconds=WINDOW, per_key=10, per_account=100))
    principal = _principal(org)
    counters = RateCounterStore(get_settings().table_name("controls"))
    index = int(HALF_WAY.timestamp()) // WINDOW
    for _ in range(4):
        counters.hit(
            f"org#{org.org_id}", window_seconds=WINDOW, index=index - 1, counters=["key:key_fast", "org"]
        )
    assert limiter.caller_gate(principal) is not None
    assert not limiter.caller_gate(principal).exact  # type: ignore[union-attr]
    # When 16 requests arrive at once
    calls, errors = _concurrently(direct, principal, 16)
    # Then exactly 8 were let through and held, and 8 refused with 429 and a Retry-After
    assert len(calls) == 8, errors
    assert len(errors) == 8 and all(isinstance(e, RateLimited) for e in errors), errors
    assert all(isinstance(e, RateLimited) and (e.retry_after_seconds or 0) >= 1 for e in errors)
    # the counters hold the requests let through, no more (a refused one was never counted)
    assert _counted(org, "key:key_fast", index) == 8
    assert _counted(org, "org", index) == 8
    ledger = LedgerStore(get_settings().table_name("ledger"))
    hold = calls[0].hold
    assert ledger.state(org.org_id).reserved == Money(hold.micros * 8)
    # the limiter learned the previous window from a refusal: the next check is exact
    assert limiter.caller_gate(principal).exact  # type: ignore[union-attr]
    # And every hold settles exactly once
    for call in calls:
        while call.next_event() is not None:
            pass
        first = call.finish()
        assert call.finish() is first
    assert ledger.state(org.org_id).reserved == Money.zero()
    assert ledger.violations(org.org_id) == []


def test_the_account_limit_holds_across_keys(stack: LocalStack) -> None:
    # Given an account limited to 6 a minute (keys to 100), with nothing before
    org = new_org(credit_usd="5")
    clock = FixedClock(HALF_WAY)
    direct, _ = _direct(clock, RateLimitPolicy(window_seconds=WINDOW, per_key=100, per_account=6))
    barrier = threading.Barrier(12)
    outcomes: list[str] = []
    lock = threading.Lock()

    def one(n: int) -> None:
        principal = Principal(org_id=org.org_id, role="owner", via="api_key", key_id=f"key_{n % 3}")
        barrier.wait()
        try:
            call = direct.open(principal, _request())
        except RateLimited:
            outcome = "refused"
        else:
            call.finish()
            outcome = "served"
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then 6 were served whichever keys they came from
    assert sorted(outcomes) == ["refused"] * 6 + ["served"] * 6
    index = int(HALF_WAY.timestamp()) // WINDOW
    assert _counted(org, "org", index) == 6
    assert LedgerStore(get_settings().table_name("ledger")).violations(org.org_id) == []


def test_concurrent_requests_never_beat_a_hard_limit(stack: LocalStack) -> None:
    # Given a hard daily limit with room for 3 holds, and rate limits far away
    org = new_org(credit_usd="5")
    clock = FixedClock(HALF_WAY)
    direct, _ = _direct(clock, RateLimitPolicy(window_seconds=WINDOW, per_key=100, per_account=100))
    hold = direct.plan(_request()).hold
    controls = BillingControls(
        org_id=org.org_id,
        configured=True,
        limit_enabled=True,
        limit_period="daily",
        limit_amount=Money(hold.micros * 3 + hold.micros // 2),
        limit_mode="hard",
        version=1,
    )
    audit = AuditEntry(
        new_id("aud"), org.org_id, None, None, "test", {}, {}, None, "2026-11-21T00:00:00.000Z"
    )
    ControlsStore(get_settings().table_name("controls")).save_billing_controls(
        controls, expected_version=0, audit=audit
    )
    # When 8 requests arrive at once
    calls, errors = _concurrently(direct, _principal(org), 8)
    # Then 3 were held and 5 refused with 403 spending_limit_reached
    assert len(calls) == 3, errors
    assert all(isinstance(e, ServiceError) and e.code == "spending_limit_reached" for e in errors), errors
    ledger = LedgerStore(get_settings().table_name("ledger"))
    assert ledger.state(org.org_id).reserved == Money(hold.micros * 3)
    for call in calls:
        call.finish()
    assert ledger.state(org.org_id).reserved == Money.zero()
    assert ledger.violations(org.org_id) == []


# -- the route policy on the hot path ---------------------------------------------------------


class CountingProviders(Providers):
    """Notes how many AWS calls had been made when each provider call started."""

    def __init__(self, calls: list[str]) -> None:
        super().__init__(ScriptedProvider("any", tokens=3))
        self.calls = calls
        self.at_provider: list[int] = []

    def sync(self, slug: str) -> SyncProvider:
        self.at_provider.append(len(self.calls))
        return super().sync(slug)


def _policy_setup(
    org: TestOrg,
) -> tuple[FixedClock, DirectChat, CountingProviders, list[str], RoutePolicyService]:
    """A direct chat with its own policy reader (this process) and a policy service with
    another reader (another process, where the policy is saved)."""
    clock = FixedClock(HALF_WAY)
    store = RoutePolicyStore(get_settings().table_name("controls"))
    calls: list[str] = []
    providers = CountingProviders(calls)
    direct, _ = _direct(
        clock,
        RateLimitPolicy(window_seconds=WINDOW, per_key=1000, per_account=1000),
        policies=PolicyReader(store, clock),
        providers=providers,
    )
    elsewhere = RoutePolicyService(store, clock, PolicyReader(store, clock))
    return clock, direct, providers, calls, elsewhere


def _served(direct: DirectChat, org: TestOrg) -> DirectCall:
    call = direct.open(_principal(org), _request())
    while call.next_event() is not None:
        pass
    call.finish()
    return call


def _owner(org: TestOrg) -> Principal:
    return Principal(org_id=org.org_id, role="owner", via="session", user_id="user_owner")


def test_a_direct_chat_long_after_the_policy_was_read_makes_no_third_call(stack: LocalStack) -> None:
    # Given an org with a route policy, and a process that has served it once (warm)
    org = new_org(credit_usd="5")
    clock, direct, providers, calls, elsewhere = _policy_setup(org)
    elsewhere.update(_owner(org), parse_update({"provider_deny": ["edge-eu"]}, builtin_catalog()))
    _served(direct, org)
    events = aws_client("dynamodb").meta.events

    def count(event_name: str, **_: Any) -> None:
        calls.append(event_name.split(".")[-1])

    events.register("before-call.dynamodb", count)
    try:
        for _ in range(2):
            # When the next request comes well past the policy cache's age (injected clock)
            clock.advance(seconds=CACHE_SECONDS * 4)
            calls.clear()
            call = _served(direct, org)
            # Then the hold is the only AWS call before the provider (the key lookup, the
            # other one, happens in auth): no policy read before the first byte
            assert calls[: providers.at_provider[-1]] == ["TransactWriteItems"], calls
            # and the stale copy was re-read after the answer, not before it
            assert "GetItem" in calls[providers.at_provider[-1] :]
            # and the policy was obeyed
            assert call.lane.lane.provider != "edge-eu"
    finally:
        events.unregister("before-call.dynamodb", count)
    ledger = LedgerStore(get_settings().table_name("ledger"))
    assert ledger.state(org.org_id).reserved == Money.zero()
    assert ledger.violations(org.org_id) == []


def test_a_policy_changed_elsewhere_applies_to_the_next_request(stack: LocalStack) -> None:
    # Given a warm process whose copy of the policy (deny edge-eu) is fresh
    org = new_org(credit_usd="5")
    clock, direct, providers, calls, elsewhere = _policy_setup(org)
    elsewhere.update(_owner(org), parse_update({"provider_deny": ["edge-eu"]}, builtin_catalog()))
    first = _served(direct, org).lane.lane.provider
    assert first != "edge-eu"
    # When another process saves a policy that also denies the lane that served it, and the
    # next request comes at once (well within the copy's CACHE_SECONDS)
    elsewhere.update(_owner(org), parse_update({"provider_deny": ["edge-eu", first]}, builtin_catalog()))
    clock.advance(seconds=1)
    events = aws_client("dynamodb").meta.events

    def count(event_name: str, **_: Any) -> None:
        calls.append(event_name.split(".")[-1])

    events.register("before-call.dynamodb", count)
    try:
        calls.clear()
        call = _served(direct, org)
        before = calls[: providers.at_provider[-1]]
        calls.clear()
        # and once more, now that this process holds the new version
        again = _served(direct, org)
        warm = calls[: providers.at_provider[-1]]
    finally:
        events.unregister("before-call.dynamodb", count)
    # Then the new policy applied to that very request (bound: 0 seconds): the hold's
    # version check refused the stale copy, the policy was read and the request re-planned
    assert call.lane.lane.provider not in ("edge-eu", first)
    assert before == ["TransactWriteItems", "GetItem", "TransactWriteItems"], before
    assert call.rejected and {r["lane_id"].split("/")[0] for r in call.rejected} >= {first}
    # and the next request is back to the one call
    assert again.lane.lane.provider not in ("edge-eu", first)
    assert warm == ["TransactWriteItems"], warm
    # And the refused attempt left nothing behind: each request held and settled once
    ledger = LedgerStore(get_settings().table_name("ledger"))
    assert ledger.state(org.org_id).reserved == Money.zero()
    assert ledger.violations(org.org_id) == []
