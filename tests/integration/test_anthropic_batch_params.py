"""Anthropic checks a Message Batch's envelope when it is created, but each request's params
as the batch runs: "Validation of the `params` object for each message request is performed
asynchronously, and validation errors are returned when processing of the entire batch has
ended" (Anthropic's batch-processing guide, "Test your batch requests with the Messages
API"). So the emulator creates a batch holding an invalid request, and that request alone
comes back `errored` (invalid_request_error): through the adapter, a permanent failure of
that item, while the lane runs on (it is not failed over). Answers are parsed with the SDK's
types. The batches end at the first look (batch_seconds 0): nothing waits."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator
from typing import Any

import anthropic
import httpx
import pytest
from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse

import batchroute_tools.emulators.anthropic as emulated
from batchroute.catalog import builtin_catalog
from batchroute.providers import base
from batchroute.providers.anthropic import make_batch
from batchroute.providers.anthropic.client import AnthropicBatches
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute.providers.retry import RetryPolicy
from batchroute.services.workflow.runner import run_lane_batch_job
from batchroute_tools.emulators.anthropic import AnthropicEmulator
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.server import EmulatorServer
from tests.integration.test_emulator_anthropic import strict
from tests.integration.test_emulator_anthropic import wire as wire  # the fixture, over this module's base_url

MODEL = "claude-sonnet-4-20250514"
GOOD: dict[str, Any] = {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    server = EmulatorServer([AnthropicEmulator(Behaviour(EmulatorConfig(batch_seconds=0.0))).vendor]).start()
    try:
        yield server.base_url + "/anthropic"
    finally:
        server.stop()


def test_a_batch_with_invalid_params_is_created_and_only_those_requests_error(wire: httpx.Client) -> None:
    code_execution = [{"type": "code_execution_20250522", "name": "code_execution"}]
    requests = [
        {"custom_id": "good-0", "params": GOOD},
        {"custom_id": "hot", "params": {**GOOD, "temperature": 1.5}},
        {"custom_id": "seeded", "params": {**GOOD, "seed": 1}},
        {"custom_id": "streamed", "params": {**GOOD, "stream": True}},
        {"custom_id": "no-beta", "params": {**GOOD, "tools": code_execution}},
        {"custom_id": "good-1", "params": GOOD},
    ]
    answer = wire.post("/v1/messages/batches", json={"requests": requests})
    assert answer.status_code == 200, answer.text
    created = strict(MessageBatch, answer.json())
    assert created.request_counts.processing == 6
    ended = strict(MessageBatch, wire.get(f"/v1/messages/batches/{created.id}").json())
    assert ended.processing_status == "ended" and ended.results_url is not None
    counts = ended.request_counts
    assert (counts.succeeded, counts.errored) == (2, 4)
    results = {
        line.custom_id: line.result
        for line in (strict(MessageBatchIndividualResponse, json.loads(text)) for text in _lines(wire, ended))
    }
    assert {key: result.type for key, result in results.items()} == {
        "good-0": "succeeded",
        "hot": "errored",
        "seeded": "errored",
        "streamed": "errored",
        "no-beta": "errored",
        "good-1": "succeeded",
    }
    errors = {key: result.error.error for key, result in results.items() if result.type == "errored"}
    assert {error.type for error in errors.values()} == {"invalid_request_error"}
    assert "params.temperature: should be" in errors["hot"].message
    assert "params.seed: unknown field" in errors["seeded"].message
    assert "params.stream" in errors["streamed"].message
    assert "anthropic-beta" in errors["no-beta"].message


def _lines(wire: httpx.Client, batch: MessageBatch) -> list[str]:
    assert batch.results_url is not None
    return wire.get(batch.results_url).text.splitlines()


def test_a_batch_over_256_mb_is_413_request_too_large(
    wire: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anthropic's errors page: 413 `request_too_large` (the SDK raises ContentTooLargeError;
    its ErrorResponse type lists no such error type, so the body is read as JSON)."""
    monkeypatch.setattr(emulated, "MAX_BATCH_BYTES", 200)  # (256 MB would be a slow test)
    requests: Any = [{"custom_id": f"r{n}", "params": GOOD} for n in range(3)]
    answer = wire.post("/v1/messages/batches", json={"requests": requests})
    assert answer.status_code == 413
    assert answer.json()["error"]["type"] == "request_too_large"
    sdk = anthropic.Anthropic(api_key="sk-ant-test", base_url=str(wire.base_url), max_retries=0)
    with sdk, pytest.raises(anthropic.ContentTooLargeError):
        sdk.messages.batches.create(requests=requests)


class OneBadRequest(AnthropicBatches):
    """An adapter whose `seq-1` goes out with params the API refuses (temperature over 1):
    what an unforeseen refusal of one request looks like."""

    def batch_body(self, requests: Iterable[base.ProviderRequest]) -> dict[str, Any]:
        body = super().batch_body(requests)
        for entry in body["requests"]:
            if entry["custom_id"] == "seq-1":
                entry["params"]["temperature"] = 1.5
        return body


def test_through_the_adapter_the_item_fails_for_good_and_the_lane_runs_on(base_url: str) -> None:
    [lane] = [x for x in builtin_catalog().lanes_for("claude-sonnet-4") if x.provider == "anthropic"]
    adapter = make_batch(ProviderEndpoint("anthropic", "anthropic", base_url=base_url), "sk-ant-test")
    batches = OneBadRequest(adapter.slug, adapter.http, output_limits=adapter.output_limits)
    items = {
        seq: {
            "operation": "responses",
            "model": lane.model,
            "input": {"messages": [{"role": "user", "content": f"q{seq}"}]},
        }
        for seq in range(3)
    }
    reported: dict[int, tuple[base.ProviderResult, int]] = {}

    def load(seqs: Collection[int] | None) -> list[tuple[int, dict[str, Any]]]:
        return [(seq, items[seq]) for seq in sorted(items if seqs is None else seqs)]

    outcome = run_lane_batch_job(
        load,
        lane=lane,
        provider=batches,
        retry=RetryPolicy(max_attempts=3, sleeper=lambda _s: None),
        on_result=lambda seq, result, attempts: reported.__setitem__(seq, (result, attempts)),
        poll_interval_seconds=0,
        sleeper=lambda _s: None,
    )
    assert outcome.finished and not outcome.unavailable
    assert (outcome.completed, outcome.failed) == (2, 1)
    failed, attempts = reported[1]
    assert failed.error is not None and attempts == 1
    assert (failed.error.code, failed.error.transient) == ("provider_rejected", False)
    assert "temperature" in failed.error.message
    assert reported[0][0].status == reported[2][0].status == "completed"
