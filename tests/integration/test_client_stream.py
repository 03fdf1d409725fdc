"""The client's and the CLI's chat stream against the real app in-process (moto), when the
provider fails midway: the service ends the stream with its error event
(`data: {"error": {code, message, details}}`, no `[DONE]`), which the client raises as an
`APIError` with that code, after what was generated so far (the fixtures of
`test_chat_sdk_loop`, where the official `openai` SDK reads the same stream)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from batchroute_client import APIError, AsyncClient, Client
from batchroute_client.cli import main
from batchroute_client.cli.runtime import Runtime
from fastapi.testclient import TestClient

from tests.integration.principals import TestOrg, new_org
from tests.integration.test_chat_sdk_loop import LLAMA, MIDWAY, calls, client  # noqa: F401

PROMPT = [{"role": "user", "content": f"Hi {MIDWAY}"}]
FAILED = {"provider": "edge-eu", "provider_code": "stream_interrupted"}


@pytest.fixture
def org(client: TestClient) -> TestOrg:  # noqa: F811
    return new_org(credit_usd="5")


def test_the_client_raises_the_error_event_of_a_stream_failed_midway(
    client: TestClient,  # noqa: F811
    org: TestOrg,
) -> None:
    sdk = Client(api_key=org.api_key(), http_client=client, sleep=lambda _: None)
    texts: list[str] = []
    stream = sdk.chat.stream(LLAMA, PROMPT, max_tokens=16)
    with pytest.raises(APIError) as raised:
        texts.extend(chunk.text for chunk in stream)
    assert "".join(texts) == "Hello world"
    assert raised.value.code == "provider_failed" and raised.value.details == FAILED
    assert "what was generated so far is charged" in raised.value.message
    assert raised.value.request_id


def test_the_async_client_raises_it_too(client: TestClient, org: TestOrg) -> None:  # noqa: F811
    async def read() -> list[str]:
        texts: list[str] = []
        transport = httpx.ASGITransport(app=client.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            sdk = AsyncClient(api_key=org.api_key(), http_client=http)
            try:
                async for chunk in sdk.chat.stream(LLAMA, PROMPT, max_tokens=16):
                    texts.append(chunk.text)
            except APIError as exc:
                texts.append(f"<{exc.code} {exc.details}>")
        return texts

    assert "".join(asyncio.run(read())) == f"Hello world<provider_failed {FAILED}>"


def test_the_cli_prints_what_streamed_then_the_error_line_and_exits_1(
    client: TestClient,  # noqa: F811
    org: TestOrg,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = {
        "BATCHROUTE_API_KEY": org.api_key(),
        "BATCHROUTE_BASE_URL": "http://testserver",
        "BATCHROUTE_CONFIG": str(tmp_path / "config.toml"),
    }
    runtime = Runtime(env=env, http_client=lambda: client, sleep=lambda _: None, bars=False)
    assert main(["chat", LLAMA, f"Hi {MIDWAY}", "--max-tokens", "16"], runtime) == 1
    captured = capsys.readouterr()
    assert captured.out == "Hello world\n"
    assert captured.err.startswith("error: provider_failed: The provider edge-eu failed while answering")
