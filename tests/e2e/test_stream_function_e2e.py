"""The streaming function's start script (`functions/api/stream.sh`), run as the Lambda Web
Adapter runs it on AWS (infra/compute.py, API_STREAM; docs/chat.md "On AWS"): it starts the
same ASGI app in uvicorn on `AWS_LWA_PORT`, the adapter checks `/v1/health`, then forwards each
request there and copies each body chunk to Lambda's response stream as uvicorn writes it.
Here the script runs against the local stack's moto and vendor emulators, and a streamed chat
completion through it must arrive chunk by chunk, not whole at the end. (The adapter's own
forwarding is AWS's code; a real deployment is not exercised here: no AWS account.)"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import fields
from typing import Any

import httpx
import openai
import pytest

from batchroute.config import Settings
from batchroute_tools.local.environment import FAKE_CREDENTIALS, service_environment
from batchroute_tools.local.provision import LocalStack
from tests.e2e.local_stack import REPO, RunningStack, free_port, kill_group

pytestmark = pytest.mark.e2e

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
READY_TIMEOUT_SECONDS = 60.0


@pytest.fixture
def stream_function(local_stack: RunningStack) -> Iterator[str]:
    """`sh functions/api/stream.sh` with the environment the function gets, on a free port."""
    document = local_stack.describe()
    stack = LocalStack(**{f.name: document[f.name] for f in fields(LocalStack)})
    port = free_port()
    inherited = {k: v for k, v in os.environ.items() if k.lower() not in Settings.model_fields}
    env = {
        **inherited,
        **FAKE_CREDENTIALS,
        **service_environment(stack, api_url=local_stack.base_url),
        "VENDOR_EMULATOR_URL": document["emulators_url"],
        "AWS_LWA_PORT": str(port),
        "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join([str(REPO / "layers" / "shared" / "python"), str(REPO)]),
    }
    process = subprocess.Popen(
        ["sh", str(REPO / "functions" / "api" / "stream.sh")],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        started = time.monotonic()
        while True:  # the adapter's readiness check
            if process.poll() is not None:
                pytest.fail(f"stream.sh exited with {process.returncode}: {process.stderr.read()!r}")  # type: ignore[union-attr]
            try:
                if httpx.get(f"{base_url}/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() - started > READY_TIMEOUT_SECONDS:
                pytest.fail("stream.sh's uvicorn did not answer /v1/health")
            time.sleep(0.2)
        yield base_url
    finally:
        kill_group(process)


def test_the_stream_script_serves_the_app_and_streams_a_chat_chunk_by_chunk(
    local_stack: RunningStack, stream_function: str
) -> None:
    # Given a key (registered through the stack's API; both processes share moto)
    address = f"stream-{uuid.uuid4().hex[:10]}@example.com"
    created = httpx.post(
        f"{local_stack.base_url}/v1/auth/agent-register",
        json={"email": address, "password": "correct horse battery"},
        timeout=30,
    )
    assert created.status_code == 200, created.text
    sdk = openai.OpenAI(
        base_url=f"{stream_function}/v1", api_key=created.json()["api_key"], max_retries=0, timeout=30
    )
    messages: list[Any] = [{"role": "user", "content": "Tell me about batches."}]
    # (the process's first request reads what it caches: lanes, policy, key)
    assert sdk.chat.completions.create(model=LLAMA, messages=messages, max_tokens=4).choices
    # When a completion is streamed through the script's uvicorn
    started = time.monotonic()
    arrivals: list[float] = []
    chunks = []
    for part in sdk.chat.completions.create(
        model=LLAMA,
        messages=messages,
        max_tokens=40,
        stream=True,
        stream_options={"include_usage": True},
    ):
        arrivals.append(time.monotonic() - started)
        chunks.append(part)
    # Then the deltas arrive as they are generated (a buffered body would arrive at once), the
    # usage last
    assert len(chunks) > 10
    assert arrivals[1] < arrivals[-1] / 2, arrivals
    assert arrivals[-1] - arrivals[1] > 0.2, arrivals
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
