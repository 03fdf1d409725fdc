"""OpenAI refuses an embeddings request whose inputs add up to more than 300,000 tokens (its
OpenAPI document, CreateEmbeddingRequest.input: "all embedding models enforce a maximum of
300,000 tokens summed across all inputs in a single request"), with a 400 of its own type
`max_tokens_per_request`; the emulator does too, sync and per batch line, counting tokens as
its `usage` does (token ids one an id, as OpenAI counts them). The OpenAI-compatible hosts
document no such limit and keep none."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest
from openai.types import Batch, CreateEmbeddingResponse

from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.openai import OpenAIEmulator
from batchroute_tools.emulators.server import EmulatorServer

EMBEDDER = "text-embedding-3-small"
START = 1_700_000_000.0


class ManualClock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(scope="module")
def server(clock: ManualClock) -> Iterator[EmulatorServer]:
    behaviour = Behaviour(EmulatorConfig(batch_seconds=60.0, ttft_seconds=0.0))
    vendors = [
        OpenAIEmulator(
            behaviour, provider="openai", prefix="/openai", models=(EMBEDDER,), clock=clock
        ).vendor,
        OpenAIEmulator(
            behaviour,
            provider="together",
            prefix="/hosts/together",
            models=(EMBEDDER,),
            responses_api=False,
            prompt_cache=None,
            clock=clock,
        ).vendor,
    ]
    emulators = EmulatorServer(vendors).start()
    yield emulators
    emulators.stop()


def sdk(server: EmulatorServer, prefix: str = "/openai") -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-local", base_url=server.base_url + prefix + "/v1", max_retries=0)


def inputs(tokens: int) -> list[str]:
    """100 texts (each about 3,000 tokens, well under the 8,191 of one input) that the emulator
    counts as `tokens` in all: ceil(bytes / 3) + 3 for the request."""
    total = 3 * (tokens - 3)
    texts = ["word " * 1_800] * 99  # 9,000 bytes each
    return [*texts, "w" * (total - 99 * 9_000)]


def refused_body(tokens: int) -> dict[str, object]:
    message = f"Requested {tokens} tokens, max 300000 tokens per request"
    error = {
        "message": message,
        "type": "max_tokens_per_request",
        "param": None,
        "code": "max_tokens_per_request",
    }
    return {"error": error}


def test_an_embeddings_request_over_300000_tokens_is_refused_as_openai_refuses_it(
    server: EmulatorServer,
) -> None:
    # Given 300,001 tokens summed across 100 inputs
    with pytest.raises(openai.BadRequestError) as refused:
        sdk(server).embeddings.create(model=EMBEDDER, input=inputs(300_001), encoding_format="float")
    # Then OpenAI's 400, exactly
    assert refused.value.status_code == 400
    assert refused.value.response.json() == refused_body(300_001)
    assert refused.value.code == "max_tokens_per_request"
    # And 300,000 are embedded, every one counted
    embedded = sdk(server).embeddings.create(model=EMBEDDER, input=inputs(300_000), encoding_format="float")
    assert isinstance(embedded, CreateEmbeddingResponse) and len(embedded.data) == 100
    assert embedded.usage.prompt_tokens == 300_000


def test_token_ids_count_one_token_an_id_as_openai_counts_them(server: EmulatorServer) -> None:
    # Given inputs given as token ids: 100 arrays of 3,000 ids, then one more id
    arrays = [[7] * 3_000 for _ in range(100)]
    # Then 300,000 ids are embedded and counted one an id, as the usage and as the limit
    embedded = sdk(server).embeddings.create(model=EMBEDDER, input=arrays, encoding_format="float")
    assert len(embedded.data) == 100 and embedded.usage.prompt_tokens == 300_000
    with pytest.raises(openai.BadRequestError) as refused:
        sdk(server).embeddings.create(model=EMBEDDER, input=[*arrays, [7]], encoding_format="float")
    assert refused.value.response.json() == refused_body(300_001)
    # And one array of ids is one input of that many tokens
    single = sdk(server).embeddings.create(model=EMBEDDER, input=[7] * 2_000, encoding_format="float")
    assert len(single.data) == 1 and single.usage.prompt_tokens == 2_000


def test_a_compatible_host_has_no_such_limit(server: EmulatorServer) -> None:
    embedded = sdk(server, "/hosts/together").embeddings.create(
        model=EMBEDDER, input=inputs(300_001), encoding_format="float"
    )
    assert embedded.usage.prompt_tokens == 300_001


def test_a_batch_line_over_300000_tokens_gets_the_400_in_the_error_file(
    server: EmulatorServer, clock: ManualClock
) -> None:
    # Given a batch of two embeddings lines, one at the limit and one past it
    client = sdk(server)
    lines = [
        {"custom_id": custom_id, "method": "POST", "url": "/v1/embeddings", "body": body}
        for custom_id, body in (
            ("fits", {"model": EMBEDDER, "input": inputs(300_000)}),
            ("over", {"model": EMBEDDER, "input": inputs(300_001)}),
        )
    ]
    content = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    file = client.files.create(file=("in.jsonl", content), purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/embeddings", completion_window="24h")
    clock.now += 61
    # Then the line past it fails with OpenAI's answer, the other is embedded
    done = client.batches.retrieve(batch.id)
    assert isinstance(done, Batch) and done.status == "completed" and done.request_counts is not None
    assert (done.request_counts.completed, done.request_counts.failed) == (1, 1)
    assert done.error_file_id and done.output_file_id
    row = json.loads(client.files.content(done.error_file_id).text)
    assert row["custom_id"] == "over" and row["response"]["status_code"] == 400
    assert row["response"]["body"] == refused_body(300_001)
    output = json.loads(client.files.content(done.output_file_id).text)
    assert output["custom_id"] == "fits"
    assert output["response"]["body"]["usage"]["prompt_tokens"] == 300_000
