"""The OpenAI emulator's handlers, in process (docs/emulators.md): embeddings read `input` as
OpenAI does (an array of token ids is one input) and honour `dimensions` where OpenAI does,
and the emulator refuses a model it does not serve, as OpenAI answers it, alone and in a
batch line; `build_vendors` gives every OpenAI-format emulator the models the catalog routes
to it, so nothing local is refused."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest
from openai.types import CreateEmbeddingResponse

from batchroute.catalog import builtin_catalog
from batchroute.providers.base import ProviderRequest
from batchroute.providers.openai import transform
from batchroute_tools.emulators import HOSTS, build_vendors
from batchroute_tools.emulators.behaviour import EMBEDDING_DIMENSIONS, Behaviour, EmulatorConfig
from batchroute_tools.emulators.openai import OpenAIEmulator, takes_dimensions
from batchroute_tools.emulators.server import Reply, Request, Vendor

CHAT = "gpt-4o-mini-2024-07-18"
EMBEDDER = "text-embedding-3-small"
OLD_EMBEDDER = "text-embedding-ada-002"


class Clock:
    now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def emulator(
    models: tuple[str, ...] = (CHAT, EMBEDDER, OLD_EMBEDDER), clock: Clock | None = None
) -> OpenAIEmulator:
    return OpenAIEmulator(
        Behaviour(EmulatorConfig(batch_seconds=60.0)),
        provider="openai",
        prefix="/openai",
        models=models,
        clock=clock or Clock(),
    )


def post(vendor: Vendor, path: str, body: Any) -> Reply:
    return vendor.dispatch(Request("POST", path, {}, {}, json.dumps(body).encode()))


def answer(reply: Reply) -> Any:
    return json.loads(reply.body)


def embed(body: dict[str, Any], *, models: tuple[str, ...] = (CHAT, EMBEDDER, OLD_EMBEDDER)) -> Reply:
    return post(emulator(models).vendor, "/v1/embeddings", body)


# -- embeddings: inputs and dimensions -----------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "count"),
    [
        ("one text", 1),
        ([1212, 318, 257], 1),  # token ids: "the array of integers that will be turned into an embedding"
        (["a", "b", "c"], 3),
        ([[1212, 318], [257]], 2),  # an array of token arrays: one input each
    ],
)
def test_embedding_inputs_are_counted_as_openai_reads_them(value: object, count: int) -> None:
    reply = embed({"model": EMBEDDER, "input": value})
    assert reply.status == 200, reply.body
    listed = CreateEmbeddingResponse.model_validate(answer(reply))
    assert [d.index for d in listed.data] == list(range(count))
    assert all(len(d.embedding) == EMBEDDING_DIMENSIONS for d in listed.data)


def test_dimensions_shorten_the_vector_where_openai_takes_them() -> None:
    whole = answer(embed({"model": EMBEDDER, "input": "hello"}))["data"][0]["embedding"]
    for size in (1, 8, 256, 1536):
        reply = embed({"model": EMBEDDER, "input": ["hello", "world"], "dimensions": size})
        assert reply.status == 200, reply.body
        vectors = [d.embedding for d in CreateEmbeddingResponse.model_validate(answer(reply)).data]
        assert [len(v) for v in vectors] == [size, size]
        assert all(math.isclose(math.fsum(x * x for x in v), 1.0, abs_tol=1e-4) for v in vectors)
    # deterministic, and a shorter vector starts as the longer one does (renormalized)
    again = answer(embed({"model": EMBEDDER, "input": "hello", "dimensions": 8}))["data"][0]["embedding"]
    assert (
        again == answer(embed({"model": EMBEDDER, "input": "hello", "dimensions": 8}))["data"][0]["embedding"]
    )
    assert [x > 0 for x in again] == [x > 0 for x in whole[:8]]


@pytest.mark.parametrize(
    ("prefix", "model"),
    [("/openai", OLD_EMBEDDER), ("/hosts/together", "BAAI/bge-large-en-v1.5")],
)
def test_dimensions_for_a_model_without_them_is_openais_400(prefix: str, model: str) -> None:
    host = OpenAIEmulator(
        Behaviour(EmulatorConfig()), provider=prefix.rsplit("/", 1)[-1], prefix=prefix, models=(model,)
    )
    reply = post(host.vendor, "/v1/embeddings", {"model": model, "input": "x", "dimensions": 8})
    assert reply.status == 400
    assert answer(reply) == {
        "error": {
            "message": "This model does not support specifying dimensions.",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }
    assert post(host.vendor, "/v1/embeddings", {"model": model, "input": "x"}).status == 200


@pytest.mark.parametrize(
    ("model", "size"), [("text-embedding-3-small", 1536), ("text-embedding-3-large", 3072)]
)
def test_more_dimensions_than_the_models_vectors_have_is_a_400_naming_dimensions(
    model: str, size: int
) -> None:
    host = OpenAIEmulator(Behaviour(EmulatorConfig()), provider="openai", prefix="/openai", models=(model,))
    reply = post(host.vendor, "/v1/embeddings", {"model": model, "input": "x", "dimensions": size + 1})
    assert reply.status == 400
    error = answer(reply)["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error",
        "invalid_value",
        "dimensions",
    )
    full = post(host.vendor, "/v1/embeddings", {"model": model, "input": "x", "dimensions": size})
    assert full.status == 200
    assert len(answer(full)["data"][0]["embedding"]) == size


def test_which_models_take_dimensions() -> None:
    assert takes_dimensions("text-embedding-3-small") and takes_dimensions("text-embedding-3-large")
    assert takes_dimensions("text-embedding-4")
    assert not takes_dimensions("text-embedding-ada-002")
    assert not takes_dimensions("BAAI/bge-large-en-v1.5") and not takes_dimensions("gpt-4o-mini")


# -- models it does not serve --------------------------------------------------------------------
CHAT_BODY = {"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}


def test_an_unknown_model_is_openais_model_not_found() -> None:
    vendor = emulator().vendor
    chat = post(vendor, "/v1/chat/completions", CHAT_BODY)
    assert chat.status == 404
    assert answer(chat) == {
        "error": {
            "message": "The model `gpt-9` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }
    assert post(vendor, "/v1/chat/completions", {**CHAT_BODY, "stream": True}).status == 404
    embeddings = post(vendor, "/v1/embeddings", {"model": "text-embedding-9", "input": "x"})
    assert embeddings.status == 404 and answer(embeddings)["error"]["code"] == "model_not_found"
    # the Responses API answers it as a 400 naming the param
    responses = post(vendor, "/v1/responses", {"model": "gpt-9", "input": "hi"})
    assert responses.status == 400
    assert answer(responses) == {
        "error": {
            "message": "The requested model 'gpt-9' does not exist.",
            "type": "invalid_request_error",
            "param": "model",
            "code": "model_not_found",
        }
    }
    # the models it serves are answered
    assert post(vendor, "/v1/chat/completions", {**CHAT_BODY, "model": CHAT}).status == 200
    assert post(vendor, "/v1/responses", {"model": CHAT, "input": "hi"}).status == 200


def test_a_chat_model_asked_for_embeddings_is_refused_as_openai_refuses_it() -> None:
    reply = embed({"model": CHAT, "input": "x"})
    assert reply.status == 403
    assert answer(reply) == {
        "error": {
            "message": "You are not allowed to generate embeddings from this model",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


def test_without_a_model_list_any_name_is_served() -> None:
    vendor = emulator(models=()).vendor
    assert post(vendor, "/v1/chat/completions", CHAT_BODY).status == 200
    assert post(vendor, "/v1/embeddings", {"model": "anything", "input": "x"}).status == 200


def test_a_batch_line_of_an_unknown_model_gets_its_error_row() -> None:
    clock = Clock()
    vendor = emulator(clock=clock).vendor
    lines = [
        {
            "custom_id": "good",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {**CHAT_BODY, "model": CHAT},
        },
        {"custom_id": "unknown", "method": "POST", "url": "/v1/chat/completions", "body": CHAT_BODY},
    ]
    content = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    upload = httpx.Request(
        "POST", "http://x/", files={"file": ("in.jsonl", content)}, data={"purpose": "batch"}
    )
    headers = {"content-type": upload.headers["content-type"]}
    file = answer(vendor.dispatch(Request("POST", "/v1/files", {}, headers, upload.read())))
    job = {"input_file_id": file["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    created = answer(post(vendor, "/v1/batches", job))
    clock.now += 61
    done = answer(vendor.dispatch(Request("GET", f"/v1/batches/{created['id']}", {}, {}, b"")))
    assert done["status"] == "completed" and done["request_counts"] == {
        "total": 2,
        "completed": 1,
        "failed": 1,
    }
    errors = vendor.dispatch(Request("GET", f"/v1/files/{done['error_file_id']}/content", {}, {}, b""))
    row = json.loads(errors.body)
    assert row["custom_id"] == "unknown" and row["response"]["status_code"] == 404
    assert row["response"]["body"]["error"]["code"] == "model_not_found"
    # the adapter reads it as that item's permanent failure
    result = transform.batch_line_result(row)
    assert result is not None and result.error is not None and not result.error.transient
    assert "model_not_found" in result.error.message


# -- the adapter reads the answers ---------------------------------------------------------------
def _item(value: object, **extra: object) -> ProviderRequest:
    return ProviderRequest(
        "seq-0", "i", "embeddings", "text-embedding-3-small", EMBEDDER, {"input": value, **extra}, 0
    )


@pytest.mark.parametrize(
    ("value", "key", "count"),
    [
        ("text", "embedding", 1),
        ([1212, 318, 257], "embedding", 1),
        (["a", "b"], "embeddings", 2),
        ([[1], [2]], "embeddings", 2),
    ],
)
def test_the_adapter_reads_one_input_as_one_embedding(value: object, key: str, count: int) -> None:
    item = _item(value, dimensions=8)
    reply = embed(transform.embeddings_body(item))
    result = transform.embeddings_result("seq-0", answer(reply), single=transform.is_single_embedding(item))
    assert result.output is not None and result.output["dimensions"] == 8
    vectors = result.output[key] if key == "embeddings" else [result.output[key]]
    assert len(vectors) == count and all(len(v) == 8 for v in vectors)
    assert (transform.OPENAI_ROUTE.batch_line(item)["custom_id"] == "seq-0~single") == (key == "embedding")


# -- every model the catalog routes to an OpenAI-format emulator is served ------------------------
def test_every_catalog_model_is_served_by_its_emulator() -> None:
    catalog = builtin_catalog()
    vendors = {
        vendor.prefix: vendor for vendor in build_vendors(Behaviour(EmulatorConfig()), catalog=catalog)
    }
    prefixes = {"openai": "/openai", **{slug: f"/hosts/{slug}" for slug in HOSTS}}
    for lane in catalog.lanes:
        if lane.provider not in prefixes:
            continue
        vendor = vendors[prefixes[lane.provider]]
        model = lane.provider_model_id or lane.model
        if "embeddings" in lane.operations:
            reply = post(vendor, "/v1/embeddings", {"model": model, "input": "x"})
        else:
            reply = post(
                vendor,
                "/v1/chat/completions",
                {"model": model, "messages": [{"role": "user", "content": "x"}]},
            )
        assert reply.status == 200, (lane.lane_id, reply.body)
        listed = answer(vendor.dispatch(Request("GET", "/v1/models", {}, {}, b"")))
        assert model in [m["id"] for m in listed["data"]], lane.lane_id
