"""Models AWS serves on demand in a region only through a cross-region inference profile: the
Bedrock emulator refuses Converse and ConverseStream on their bare id with AWS's
ValidationException ("Invocation of model ID ... with on-demand throughput isn't supported.
Retry your request with the ID or ARN of an inference profile that contains this model.") and
answers the profile id (`us.` + the model id); the adapter turns that refusal into the lane's
unavailability (`inference_profile_required`, its items fail over); and the catalog's Bedrock
lanes name the profile ids the production region (us-east-1) wants, which the emulator, built
from the catalog as local mode builds it, answers.

The adapter's real boto3 clients talk to the emulator over loopback (no S3 needed)."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from batchroute.catalog import builtin_catalog
from batchroute.providers.base import ProviderRequest, ProviderUnavailable, StreamEnd, StreamStart
from batchroute.providers.bedrock import BedrockClients, BedrockConverse
from batchroute.providers.http import Timeouts
from batchroute_tools.emulators.bedrock import PROFILE_ONLY, BedrockEmulator
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.server import EmulatorServer

HAIKU_35 = "anthropic.claude-3-5-haiku-20241022-v1:0"
LLAMA_33 = "meta.llama3-3-70b-instruct-v1:0"
CLAUDE_3 = "anthropic.claude-3-haiku-20240307-v1:0"  # served in-Region in us-east-1
REGION = "us-east-1"
PRODUCTION = Path(__file__).resolve().parents[2] / (
    "layers/shared/python/batchroute/catalog/data/environments/production.toml"
)
MESSAGE = (
    "Invocation of model ID {model} with on-demand throughput isn\u2019t supported. Retry your "
    "request with the ID or ARN of an inference profile that contains this model."
)


def catalog_bedrock_models() -> list[str]:
    return [lane.provider_model_id for lane in builtin_catalog().lanes if lane.provider == "bedrock"]


@contextmanager
def emulated(models: list[str], **options: Any) -> Iterator[BedrockClients]:
    """The adapter's clients over a Bedrock emulator in REGION serving `models`."""
    emulator = BedrockEmulator(Behaviour(EmulatorConfig()), s3=None, models=models, region=REGION, **options)
    server = EmulatorServer([emulator.vendor]).start()
    try:
        yield BedrockClients(
            region=REGION,
            runtime_url=emulator.runtime_url(server.base_url),
            control_url=emulator.control_url(server.base_url),
            timeouts=Timeouts(connect=2.0, read=10.0),
        )
    finally:
        server.stop()


@pytest.fixture(scope="module")
def clients() -> Iterator[BedrockClients]:
    # Given the emulator serving the catalog's Bedrock models and the others these tests name
    with emulated([*catalog_bedrock_models(), HAIKU_35, LLAMA_33, CLAUDE_3]) as made:
        yield made


def converse_body(model: str) -> dict[str, Any]:
    return {
        "modelId": model,
        "messages": [{"role": "user", "content": [{"text": "Hi"}]}],
        "inferenceConfig": {"maxTokens": 512},
    }


def request(model: str) -> ProviderRequest:
    return ProviderRequest(
        custom_id="seq-0",
        customer_item_id="item-0",
        operation="responses",
        model="catalog-model",
        provider_model_id=model,
        input={"messages": [{"role": "user", "content": "Hi"}]},
        max_output_tokens=32,
    )


@pytest.mark.parametrize("model", [HAIKU_35, LLAMA_33])
@pytest.mark.parametrize("operation", ["converse", "converse_stream"])
def test_emulator_refuses_a_bare_id_aws_serves_only_through_a_profile(
    clients: BedrockClients, model: str, operation: str
) -> None:
    # When boto3 calls Converse / ConverseStream on the bare id in us-east-1
    with pytest.raises(ClientError) as raised:
        getattr(clients.runtime(), operation)(**converse_body(model))
    # Then the emulator answers as AWS does: 400 ValidationException, AWS's message
    error = raised.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert error["Error"]["Code"] == "ValidationException"
    assert error["Error"]["Message"] == MESSAGE.format(model=model)


@pytest.mark.parametrize("model", [HAIKU_35, LLAMA_33])
def test_emulator_answers_the_inference_profile_id(clients: BedrockClients, model: str) -> None:
    # When the same call names the US cross-region inference profile
    answer = clients.runtime().converse(**converse_body(f"us.{model}"))
    # Then it is answered
    assert answer["stopReason"] in ("end_turn", "max_tokens")
    assert answer["output"]["message"]["content"][0]["text"]


def test_emulator_still_answers_a_bare_id_served_in_region(clients: BedrockClients) -> None:
    # Given a model us-east-1 serves in-Region: its bare id is answered
    answer = clients.runtime().converse(**converse_body(CLAUDE_3))
    assert answer["stopReason"] in ("end_turn", "max_tokens")


def test_adapter_fails_the_lane_over_on_the_refusal(clients: BedrockClients) -> None:
    sync = BedrockConverse("bedrock", clients)
    # When the adapter calls a bare id the region serves only through a profile
    with pytest.raises(ProviderUnavailable) as raised:
        sync.complete(request(HAIKU_35))
    # Then the lane is unavailable (misconfigured), not the item failed for good
    assert raised.value.code == "inference_profile_required"
    # And a stream is refused the same way before its first byte (direct chat's failover)
    with pytest.raises(ProviderUnavailable) as streamed:
        next(sync.stream(request(LLAMA_33)))
    assert streamed.value.code == "inference_profile_required"


def test_catalog_bedrock_lanes_use_the_ids_the_production_region_serves() -> None:
    # Given the production region of the Bedrock endpoint
    region = tomllib.loads(PRODUCTION.read_text())["providers"]["bedrock"]["region"]
    assert region == REGION
    # Then no Bedrock lane names a model by a bare id that region refuses on demand
    models = catalog_bedrock_models()
    assert models and not set(models) & PROFILE_ONLY[region]
    assert set(models) == {f"us.{HAIKU_35}", f"us.{LLAMA_33}"}


def test_emulator_built_from_the_catalog_answers_every_bedrock_lane(clients: BedrockClients) -> None:
    # Given the adapter over the emulator serving the catalog's models (as in local mode)
    sync = BedrockConverse("bedrock", clients)
    for model in catalog_bedrock_models():
        # Then each lane's model id is answered, whole and streamed
        assert sync.complete(request(model)).status == "completed"
        events = list(sync.stream(request(model)))
        assert isinstance(events[0], StreamStart) and isinstance(events[-1], StreamEnd)
