"""The direct chat path and vendor facts: it tells the provider whether the model takes
sampling parameters (models.toml `sampling_parameters`, on each of its lanes: a transform
leaves temperature and top_p out for a model that refuses them), and a lane whose account is
out of credit marks its provider's lanes unavailable while the next lane answers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from batchroute.adapters.dynamo.chat_holds import ChatHoldStore
from batchroute.adapters.dynamo.controls import ControlsStore
from batchroute.adapters.dynamo.lanes import LaneStateStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.dynamo.route_policies import RoutePolicyStore
from batchroute.catalog import builtin_catalog
from batchroute.clock import SystemClock
from batchroute.config import get_settings
from batchroute.domain.catalog.catalog import Catalog
from batchroute.domain.chat.requests import parse_chat_request
from batchroute.providers.base import ProviderRequest, ProviderUnavailable, StreamEvent
from batchroute.services.catalog.catalog import guards_for
from batchroute.services.chat.direct import DirectChat, DirectOptions
from batchroute.services.chat.state import HoldKeeper, LaneStateCache, LaneStats
from batchroute.services.routing.policy import PolicyReader
from batchroute.wiring import Wiring
from batchroute_tools.local.provision import LocalStack
from functions.api.auth import identity_store
from tests.integration.batch_pipeline_support import heartbeat_all_lanes
from tests.integration.principals import new_org
from tests.integration.test_chat_holds import LLAMA, Providers, ScriptedProvider, _principal


@pytest.fixture
def stack(local_aws: LocalStack) -> LocalStack:
    identity_store.cache_clear()
    heartbeat_all_lanes()
    return local_aws


class Recording(ScriptedProvider):
    def __init__(self) -> None:
        super().__init__("edge-eu", tokens=2)
        self.requests: list[ProviderRequest] = []

    def stream(self, request: ProviderRequest) -> Iterator[StreamEvent]:
        self.requests.append(request)
        return super().stream(request)


def _catalog(sampling: bool) -> Catalog:
    catalog = builtin_catalog()
    lanes = tuple(
        replace(lane, sampling_parameters=sampling) if lane.model == LLAMA else lane for lane in catalog.lanes
    )
    return replace(catalog, lanes=lanes, _by_model={})


def _direct(catalog: Catalog, provider: Recording) -> DirectChat:
    settings = get_settings()
    store = ChatHoldStore(
        ledger=LedgerStore(settings.table_name("ledger")),
        batches_table=settings.table_name("batches"),
        controls_table=settings.table_name("controls"),
    )
    clock = SystemClock()
    return DirectChat(
        catalog=catalog,
        lanes=LaneStateCache(LaneStateStore(settings.table_name("controls")), 60),
        stats=LaneStats(),
        holds=HoldKeeper(store, clock),
        store=store,
        providers=Providers(provider),
        controls=ControlsStore(settings.table_name("controls")),
        guards=guards_for(settings),
        clock=clock,
        policies=PolicyReader(RoutePolicyStore(settings.table_name("controls")), clock),
        watch=Wiring(settings, clock).billing_watch,
        availability=LaneStateStore(settings.table_name("controls")),
        options=DirectOptions(checkpoint_seconds=2),
    )


@pytest.mark.parametrize("sampling", [True, False])
def test_the_direct_path_says_whether_the_model_takes_sampling_parameters(
    stack: LocalStack,
    sampling: bool,
) -> None:
    # Given a model whose data says it does (or does not) take sampling parameters
    org = new_org(credit_usd="1")
    provider = Recording()
    catalog = _catalog(sampling)
    direct = _direct(catalog, provider)
    body = {
        "model": LLAMA,
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.2,
        "stream": True,
    }
    # When a chat request is answered
    call = direct.open(_principal(org), parse_chat_request(body, catalog))
    call.finish()
    # Then the provider request says so
    assert [request.sampling for request in provider.requests] == [sampling]


class OutOfQuotaFirst(Recording):
    """The first lane tried answers OpenAI's 429 insufficient_quota; the next one streams."""

    def stream(self, request: ProviderRequest) -> Iterator[StreamEvent]:
        self.requests.append(request)
        if len(self.requests) == 1:
            raise ProviderUnavailable(
                "openai answered 429: You exceeded your quota", code="insufficient_quota"
            )
        return ScriptedProvider.stream(self, request)


def test_a_direct_lane_out_of_quota_marks_its_provider_s_lanes_and_the_next_lane_answers(
    stack: LocalStack,
) -> None:
    # Given a first lane whose account is out of credit
    org = new_org(credit_usd="1")
    provider = OutOfQuotaFirst()
    catalog = builtin_catalog()
    direct = _direct(catalog, provider)
    store = LaneStateStore(get_settings().table_name("controls"))
    direct.availability = store
    request = parse_chat_request(
        {"model": LLAMA, "messages": [{"role": "user", "content": "hi"}], "stream": True}, catalog
    )
    # When a chat request is answered
    call = direct.open(_principal(org), request)
    call.finish()
    # Then the next lane answered, and every lane of the first lane's provider is marked
    first, answered = call.attempts[0], call.attempts[1]
    assert first.error == "insufficient_quota" and answered.error is None
    down = first.provider
    states = store.live_states(consistent=True)
    marked = {lane_id for lane_id, live in states.items() if live.unavailable_reason}
    assert marked == {lane.lane_id for lane in catalog.lanes if lane.provider == down}
    assert all(states[lane_id].last_heartbeat_at == "" for lane_id in marked)
