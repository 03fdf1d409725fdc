"""The local stack's moto server and vendor emulators, each in a process of its own
(batchroute_tools/local/child.py): they serve on the socket the runner bound, refuse a taken
port at once, and never outlive the runner."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import httpx
import pytest

from batchroute.catalog import builtin_catalog
from batchroute_tools.local.child import ChildServer
from batchroute_tools.local.moto_server import MotoServer

REGION = "us-east-1"


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def moto(credentials: None) -> Iterator[MotoServer]:
    server = MotoServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is not serving.
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().split(") ", 1)[1][0] != "Z"


def test_moto_runs_in_its_own_process_and_answers_aws_calls(moto: MotoServer) -> None:
    import boto3

    dynamodb = boto3.session.Session().client("dynamodb", region_name=REGION, endpoint_url=moto.endpoint_url)
    dynamodb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    assert dynamodb.list_tables()["TableNames"] == ["t"]
    # Nothing of it lives in this process: this process's moto has no such table.
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    assert "t" not in dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].tables


def test_stopping_moto_ends_its_process_and_frees_the_port(credentials: None) -> None:
    server = MotoServer()
    server.start()
    assert httpx.get(f"{server.endpoint_url}/moto-api/data.json", timeout=10).status_code == 200
    server.stop()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{server.endpoint_url}/moto-api/data.json", timeout=2)


def test_a_taken_port_is_refused_before_any_child_starts() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        with pytest.raises(OSError, match="in use"):
            MotoServer(port=taken.getsockname()[1])


def test_a_child_that_cannot_start_is_reported_not_waited_for_forever() -> None:
    child = ChildServer("nothing", "batchroute_tools.local.no_such_module", host="127.0.0.1", port=0)
    child.spawn()
    with pytest.raises(RuntimeError, match="did not start"):
        child.wait_ready(timeout=30)


_RUNNER_THAT_DIES = textwrap.dedent(
    """
    import os, sys
    from batchroute_tools.local.moto_server import MotoServer
    server = MotoServer()
    server.start()
    print(server._process.pid, flush=True)
    sys.stdin.read()
    """
)


def test_moto_does_not_outlive_a_runner_killed_outright(credentials: None) -> None:
    # Given a runner with its moto child
    runner = subprocess.Popen(
        [sys.executable, "-c", _RUNNER_THAT_DIES],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert runner.stdout is not None
    child_pid = int(runner.stdout.readline())
    assert _alive(child_pid)
    # When the runner is killed without a chance to stop it
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=10)
    # Then the child sees its stdin close and exits by itself
    deadline = time.monotonic() + 20
    while _alive(child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child_pid)


def test_the_vendor_emulators_serve_from_their_own_process(moto: MotoServer) -> None:
    emulators = ChildServer(
        "vendor emulators",
        "batchroute_tools.emulators",
        host="127.0.0.1",
        port=0,
        args=(
            "--s3-endpoint",
            moto.endpoint_url,
            "--payments-webhook-url",
            "http://127.0.0.1:9/v1/billing/stripe/webhook",
            "--region",
            REGION,
        ),
    ).spawn()
    try:
        emulators.wait_ready()
        # The catalog's OpenAI models, as OpenAI lists them.
        answer = httpx.get(f"{emulators.url}/openai/v1/models", timeout=10)
        assert answer.status_code == 200
        listed = {model["id"] for model in answer.json()["data"]}
        catalog = builtin_catalog()
        assert {lane.provider_model_id for lane in catalog.lanes if lane.provider == "openai"} == listed
    finally:
        emulators.stop()
