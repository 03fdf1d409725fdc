"""The direct chat path tells the provider whether the model takes sampling parameters
(models.toml `sampling_parameters`, on each of its lanes): a transform leaves temperature and
top_p out for a model that refuses them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from batchroute.adapters.dynamo.chat_holds import ChatHoldStore
from batchroute.adapters.dynamo.controls import ControlsStore
from batchroute.adapters.dynamo.lanes import LaneStateStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.catalog import builtin_catalog
from batchroute.clock import SystemClock
from batchroute.config import get_settings
from batchroute.domain.catalog import Catalog
from batchroute.domain.chat_requests import parse_chat_request
from batchroute.providers.base import ProviderRequest, StreamEvent
from batchroute.services.catalog.catalog import guards_for
from batchroute.services.chat.direct import DirectChat, DirectOptions
from batchroute.services.chat.state import HoldKeeper, LaneStateCache, LaneStats
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
