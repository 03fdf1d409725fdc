"""Chat completions as `make run` serves them, driven by the official `openai` SDK over HTTP:
a direct answer, a real stream (first chunk long before the last) with usage, failover,
typed errors, and a queued job that the workflow completes."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import openai
import pytest

pytestmark = pytest.mark.e2e

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
JOB_TIMEOUT_SECONDS = 60.0


def _sdk(api: httpx.Client) -> tuple[openai.OpenAI, dict[str, str]]:
    address = f"chat-{uuid.uuid4().hex[:10]}@example.com"
    created = api.post(
        "/v1/auth/agent-register", json={"email": address, "password": "correct horse battery"}
    )
    assert created.status_code == 200, created.text
    key = created.json()["api_key"]
    sdk = openai.OpenAI(
        base_url=f"{str(api.base_url).rstrip('/')}/v1", api_key=key, max_retries=0, timeout=30
    )
    return sdk, {"Authorization": f"Bearer {key}"}


def _messages(text: str = "Tell me about batches.") -> list[Any]:
    return [{"role": "user", "content": text}]


def test_sdk_direct_and_streamed_completions(api: httpx.Client) -> None:
    sdk, _ = _sdk(api)
    # Given a direct request
    raw = sdk.chat.completions.with_raw_response.create(model=LLAMA, messages=_messages(), max_tokens=40)
    completion = raw.parse()
    # Then a chat.completion with usage and the serving provider
    assert completion.choices[0].message.content and completion.usage is not None
    assert raw.headers["x-service-provider"] == (completion.model_extra or {})["provider"]
    # When the same is streamed with usage
    started = time.monotonic()
    arrivals: list[float] = []
    chunks = []
    for part in sdk.chat.completions.create(
        model=LLAMA, messages=_messages(), max_tokens=40, stream=True, stream_options={"include_usage": True}
    ):
        arrivals.append(time.monotonic() - started)
        chunks.append(part)
    # Then deltas arrive as they are generated (not buffered) and the last chunk has usage:
    # spread over the generation (15 ms a token locally), not in one burst at the end,
    # whatever the time to the first byte (long on a loaded machine)
    assert len(chunks) > 10
    assert arrivals[-1] - arrivals[1] > (len(chunks) - 2) * 0.005, arrivals
    assert (
        chunks[-1].usage is not None
        and chunks[-1].usage.completion_tokens == completion.usage.completion_tokens
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == completion.choices[0].message.content


def test_sdk_lists_the_chat_models_and_one_of_them_answers(api: httpx.Client) -> None:
    sdk, _ = _sdk(api)
    # When the SDK lists the models, as a tool built on it does first
    listed = {model.id: model for model in sdk.models.list()}
    # Then each is a model a chat completion may name, with its maker and release date
    assert LLAMA in listed and "text-embedding-3-small" not in listed
    assert listed[LLAMA].owned_by == "meta-llama" and listed[LLAMA].created > 0
    assert sdk.models.retrieve(LLAMA).id == LLAMA
    # And a listed model answers
    answer = sdk.chat.completions.create(model=LLAMA, messages=_messages(), max_tokens=8)
    assert answer.choices[0].message.content


def test_sdk_failover_and_typed_errors(api: httpx.Client) -> None:
    sdk, _ = _sdk(api)
    # Failover: the cheapest lane answers 503 before its first byte
    raw = sdk.chat.completions.with_raw_response.create(
        model=LLAMA, messages=_messages("[simulate:5xx:edge-eu] hi"), max_tokens=8
    )
    assert raw.headers["x-service-provider"] != "edge-eu"
    # Errors surface as the SDK's typed exceptions
    with pytest.raises(openai.BadRequestError) as unknown:
        sdk.chat.completions.create(model="gpt-4o-MINI", messages=_messages())
    assert unknown.value.body["code"] == "model_not_found"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as streamed_batch:
        sdk.chat.completions.create(
            model=LLAMA, messages=_messages(), stream=True, extra_body={"batch": True}
        )
    assert streamed_batch.value.body["code"] == "stream_not_supported_for_batch"  # type: ignore[index]
    wrong = openai.OpenAI(base_url=str(sdk.base_url), api_key="brk_local_wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.chat.completions.create(model=LLAMA, messages=_messages())


def test_queued_chat_job_completes_through_the_workflow(api: httpx.Client) -> None:
    sdk, key = _sdk(api)
    # Given a queued request (the SDK sends the extra field as is)
    response = sdk.chat.completions.with_raw_response.create(
        model=LLAMA, messages=_messages(), max_tokens=16, extra_body={"batch": {"metadata": {"ticket": "42"}}}
    )
    assert response.status_code == 202
    job = response.http_response.json()
    assert job["object"] == "chat.completion.job" and job["batch_id"].split("_")[1] == job["id"].split("_")[1]
    # When the workflow runs it, the job completes with a chat.completion
    deadline = time.monotonic() + JOB_TIMEOUT_SECONDS
    while True:
        view = api.get(f"/v1/chat/completions/{job['id']}", headers=key).json()
        if view["status"] in ("completed", "failed", "cancelled"):
            break
        assert time.monotonic() < deadline, view
        time.sleep(0.25)
    assert view["status"] == "completed", view
    assert view["result"]["choices"][0]["message"]["content"]
    # And the batch API shows it as an ordinary batch
    batch = api.get(f"/v1/batches/{job['batch_id']}", headers=key).json()["batch"]
    assert batch["source"] == "chat" and batch["state"] == "completed"
