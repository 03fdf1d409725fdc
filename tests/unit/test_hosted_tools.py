"""Hosted tools run where the catalog promises them: every lane's hosted tools, in every
environment, are tools its provider's adapter can run (catalog/data/hosted_tools.toml), and
a lane whose adapter cannot run a tool is not offered for it."""

from __future__ import annotations

from dataclasses import replace
from typing import get_args

import pytest

from batchroute.catalog import builtin_catalog
from batchroute.catalog.environments import ENVIRONMENTS, load_deployment
from batchroute.domain.catalog.catalog import HostedTool
from batchroute.providers.endpoints import AdapterKind
from batchroute.providers.hosted_tools import runnable, vendor_tool


def test_the_table_names_only_the_services_tools_and_every_adapter_kind() -> None:
    for adapter in get_args(AdapterKind):
        assert runnable(adapter) <= set(get_args(HostedTool)), adapter
        for tool in runnable(adapter):
            declaration = vendor_tool(adapter, tool)
            assert isinstance(declaration, dict) and declaration, (adapter, tool)
    assert vendor_tool("bedrock", "web_search") is None
    assert runnable("openai_compatible") == frozenset()


def test_a_declaration_is_a_fresh_copy() -> None:
    first = vendor_tool("openai", "python_execution")
    assert first is not None
    first["container"]["type"] = "changed"
    assert vendor_tool("openai", "python_execution") == {
        "type": "code_interpreter",
        "container": {"type": "auto"},
    }


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_the_catalogs_hosted_tools_are_what_each_lanes_adapter_runs(environment: str) -> None:
    # The data itself is consistent: nothing needs stripping in any built-in environment.
    catalog = builtin_catalog()
    deployment = load_deployment(catalog, environment)
    by_id = {lane.lane_id: lane for lane in catalog.lanes}
    offered = 0
    for lane in deployment.catalog.lanes:
        endpoint = deployment.endpoint(lane.provider)
        if endpoint is None:
            continue
        assert set(lane.hosted_tools) <= runnable(endpoint.adapter), (environment, lane.lane_id)
        assert lane.hosted_tools == by_id[lane.lane_id].hosted_tools, lane.lane_id
        offered += len(lane.hosted_tools)
    assert offered > 0


def test_a_lane_is_not_offered_a_tool_its_adapter_cannot_run() -> None:
    # Given a catalog that claims hosted tools for a host whose adapter runs none
    catalog = builtin_catalog()
    lanes = tuple(
        replace(lane, hosted_tools=("python_execution", "web_search")) if lane.provider == "groq" else lane
        for lane in catalog.lanes
    )
    deployment = load_deployment(replace(catalog, lanes=lanes, _by_model={}), "local")
    # Then the environment's catalog offers them no tool
    groq = [lane for lane in deployment.catalog.lanes if lane.provider == "groq"]
    assert groq and all(lane.hosted_tools == () for lane in groq)


@pytest.mark.parametrize(
    ("adapter", "build"), [("openai", "openai"), ("anthropic", "anthropic"), ("gemini", "gemini")]
)
def test_an_adapter_refuses_an_endpoint_pinned_to_another_api_version(adapter: str, build: str) -> None:
    import importlib

    from batchroute.providers.credentials import ProviderNotConfigured
    from batchroute.providers.endpoints import ProviderEndpoint

    package = importlib.import_module(f"batchroute.providers.{build}")
    pinned = ProviderEndpoint(
        slug="x", adapter=adapter, base_url="http://127.0.0.1:9", api_version="v0-other"
    )  # type: ignore[arg-type]
    with pytest.raises(ProviderNotConfigured, match="pinned to API version 'v0-other'"):
        package.make_sync(pinned, "key")
    deployment = load_deployment(builtin_catalog(), "local")
    for endpoint in deployment.endpoints.values():  # the data's pins are what the adapters speak
        if endpoint.adapter == adapter:
            package.make_sync(endpoint, "key")
