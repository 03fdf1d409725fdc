"""The first lane's request goes out while the chat hold commits (issue 30, point 2;
services/chat/early_start.py), on moto: the provider is called before the hold's transaction
has committed, yet nothing is read from it (no byte can reach the client) until the hold has;
a refused hold closes the early request and charges nothing; and an org just refused holds
first on its next request, so refused callers do not keep opening provider requests.

Threads are ordered with events, never with sleeps: the hold waits (bounded) until the
provider has been called, which only an early start can satisfy."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from batchroute.clock import FixedClock
from batchroute.errors import ServiceError
from batchroute.money import Money
from batchroute.providers.base import ProviderRequest, StreamEvent
from batchroute.services.billing.rate_limiting import RateLimitPolicy
from batchroute.services.chat.direct import DirectChat
from batchroute.services.chat.early_start import EarlyStarts
from batchroute_tools.local.provision import LocalStack
from tests.integration.principals import new_org
from tests.integration.test_chat_fast_path import _direct, _principal, _request, stack
from tests.integration.test_chat_holds import Providers, ScriptedProvider

__all__ = ["stack"]  # the fixture of test_chat_fast_path.py

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
WAIT_SECONDS = 10.0
POLICY = RateLimitPolicy(per_key=1000, per_account=1000, window_seconds=60)


class WatchedProvider(ScriptedProvider):
    """Says when it is called and when its stream is closed."""

    def __init__(self) -> None:
        super().__init__("edge-eu", tokens=3)
        self.called = threading.Event()
        self.closed = threading.Event()
        self.calls = 0
        self.hold_committed = threading.Event()
        self.called_before_hold = False

    def stream(self, request: ProviderRequest) -> Iterator[StreamEvent]:
        self.calls += 1
        self.called.set()
        inner = super().stream(request)

        def watched() -> Iterator[StreamEvent]:
            try:
                yield from inner
            finally:
                self.closed.set()

        return watched()


def _watched_direct(provider: WatchedProvider, *, early: bool = True) -> DirectChat:
    direct, _ = _direct(
        FixedClock(NOW), POLICY, providers=Providers(provider), early=EarlyStarts() if early else None
    )
    store_open = direct.store.open

    def open_after_the_provider_was_called(*args: object, **kwargs: object) -> None:
        # The transaction goes out only once the provider has been called (bounded: a service
        # that calls it after the hold waits WAIT_SECONDS, then the assertion below fails)
        provider.called_before_hold = provider.called.wait(WAIT_SECONDS)
        store_open(*args, **kwargs)  # type: ignore[arg-type]
        provider.hold_committed.set()

    direct.store.open = open_after_the_provider_was_called  # type: ignore[method-assign]
    return direct


def test_the_provider_is_called_while_the_hold_commits_and_read_only_after_it(stack: LocalStack) -> None:
    org = new_org(credit_usd="5")
    provider = WatchedProvider()
    direct = _watched_direct(provider)
    # When a direct request opens
    call = direct.open(_principal(org), _request())
    # Then the provider was called before the hold committed (the hold waited for it)...
    assert provider.called_before_hold and provider.hold_committed.is_set()
    # ...and nothing was read from it before: the first delta is read only now, after `open`
    assert provider.sent == 0
    text = ""
    while (event := call.next_event()) is not None:
        text += getattr(event, "text", "")
    assert provider.sent == 3 and text == " word word word"
    call.finish()
    # And the money is exact: held once, settled once, nothing left reserved
    state = direct.store.wallet(org.org_id)
    assert state.reserved == Money.zero() and state.balance < Money.usd("5")


def test_a_refused_hold_closes_the_early_request_and_the_org_then_holds_first(stack: LocalStack) -> None:
    org = new_org(credit_usd="0")
    provider = WatchedProvider()
    direct = _watched_direct(provider)
    # When an org with no credit asks
    with pytest.raises(ServiceError) as refused:
        direct.open(_principal(org), _request())
    # Then it is refused for its credit, as before
    assert refused.value.code == "insufficient_funds"
    # And the request that went out early is closed, nothing of it read, nothing charged
    assert provider.closed.wait(WAIT_SECONDS)
    assert provider.calls == 1 and provider.sent == 0
    assert direct.store.wallet(org.org_id).reserved == Money.zero()
    # When it asks again at once (the hold need not wait for a call this time: `called` stays set)
    with pytest.raises(ServiceError) as again:
        direct.open(_principal(org), _request())
    # Then its hold went first and was refused: the provider was not called this time
    assert again.value.code == "insufficient_funds"
    assert provider.calls == 1


def test_without_early_starts_the_provider_is_called_only_after_the_hold(stack: LocalStack) -> None:
    org = new_org(credit_usd="5")
    provider = WatchedProvider()
    direct = _watched_direct(provider, early=False)
    provider.called.set()  # the hold may go at once: nothing calls the provider before it here
    call = direct.open(_principal(org), _request())
    assert provider.hold_committed.is_set() and provider.calls == 1
    while call.next_event() is not None:
        pass
    call.finish()
    assert direct.store.wallet(org.org_id).reserved == Money.zero()
