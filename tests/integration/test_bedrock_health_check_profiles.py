"""The Bedrock health check lists inference profiles: the catalog's Bedrock lanes name US
cross-region inference profile ids (`us.anthropic....`), which ListFoundationModels never
lists (it lists foundation models by their bare id), so the adapter's check() also lists the
region's system-defined profiles (ListInferenceProfiles, every page) and the provider health
check finds every lane's model listed.

The adapter's real boto3 clients talk to the Bedrock emulator over loopback, the emulator
built from the catalog as local mode builds it, in the production region (us-east-1)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from batchroute.catalog import builtin_catalog
from batchroute.providers.bedrock import BedrockClients, BedrockConverse
from batchroute.services.catalog.lane_health import AdapterProviderHealth
from batchroute_tools.emulators.bedrock import US_PROFILE_REGIONS
from tests.integration.test_bedrock_inference_profiles import REGION, catalog_bedrock_models, emulated

ACCOUNT = "123456789012"
LLAMA_31 = "meta.llama3-1-8b-instruct-v1:0"  # served in-Region: no profile of its own here
# botocore's InferenceProfileSummary (bedrock 2023-04-20): its required members
REQUIRED = {"inferenceProfileName", "inferenceProfileArn", "models", "inferenceProfileId", "status", "type"}
PROFILE_NAME = re.compile(r"([0-9a-zA-Z][ _-]?)+")


@pytest.fixture(scope="module")
def clients() -> Iterator[BedrockClients]:
    # Given the emulator serving the catalog's Bedrock models (as local mode) and one more
    with emulated([*catalog_bedrock_models(), LLAMA_31], account=ACCOUNT) as made:
        yield made


def profiles(clients: BedrockClients, **kwargs: Any) -> list[dict[str, Any]]:
    pages = clients.control().get_paginator("list_inference_profiles").paginate(**kwargs)
    return [p for page in pages for p in page["inferenceProfileSummaries"]]


def test_foundation_models_are_listed_by_their_bare_id(clients: BedrockClients) -> None:
    # When boto3 lists the region's foundation models
    listed = [m["modelId"] for m in clients.control().list_foundation_models()["modelSummaries"]]
    # Then each is a foundation model id: a profile's model once, by its own id, no profile id
    assert sorted(listed) == sorted([m.removeprefix("us.") for m in catalog_bedrock_models()] + [LLAMA_31])
    assert not [m for m in listed if m.startswith("us.")]


def test_emulator_lists_the_inference_profiles_in_botocore_shape(clients: BedrockClients) -> None:
    # When boto3 pages through the system-defined profiles one at a time
    listed = profiles(clients, typeEquals="SYSTEM_DEFINED", PaginationConfig={"PageSize": 1})
    # Then the catalog's profile ids are listed, each once, sorted, and nothing else
    assert [p["inferenceProfileId"] for p in listed] == sorted(catalog_bedrock_models())
    for profile in listed:
        # And each summary has botocore's required members, as AWS fills them
        assert set(profile) >= REQUIRED, profile
        assert profile["status"] == "ACTIVE" and profile["type"] == "SYSTEM_DEFINED"
        model = profile["inferenceProfileId"].removeprefix("us.")
        assert profile["inferenceProfileArn"] == (
            f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{profile['inferenceProfileId']}"
        )
        assert profile["models"] == [
            {"modelArn": f"arn:aws:bedrock:{region}::foundation-model/{model}"}
            for region in US_PROFILE_REGIONS
        ]
        name = profile["inferenceProfileName"]
        assert name.startswith("US ") and len(name) <= 64 and PROFILE_NAME.fullmatch(name), name
    # And the list is the same every time (deterministic), in one page as in many
    assert profiles(clients) == listed
    # And no application profile is listed
    assert profiles(clients, typeEquals="APPLICATION") == []


def test_adapter_check_lists_the_inference_profile_ids(clients: BedrockClients) -> None:
    # When the adapter answers the health check
    listed = BedrockConverse("bedrock", clients).check()
    # Then the foundation models and the profiles are listed: every Bedrock lane's id among them
    assert set(catalog_bedrock_models()) <= set(listed)
    assert LLAMA_31 in listed and f"us.{LLAMA_31}" not in listed


def test_provider_health_finds_every_bedrock_lane_listed(clients: BedrockClients) -> None:
    # Given the deployed stacks' health check over the Bedrock adapter
    class Adapters:
        def sync(self, slug: str) -> BedrockConverse:
            return BedrockConverse(slug, clients)

    catalog = builtin_catalog()
    provider = catalog.provider("bedrock")
    assert provider is not None
    lanes = [lane for lane in catalog.lanes if lane.provider == "bedrock"]
    assert lanes and all(lane.provider_model_id.startswith("us.") for lane in lanes)
    # When it checks Bedrock
    check = AdapterProviderHealth(Adapters()).check(provider, lanes, datetime(2026, 1, 1, tzinfo=UTC))
    # Then Bedrock is up and no lane's model is reported missing
    assert check is not None and check.healthy, check
    assert "not listed" not in check.detail, check.detail
