"""The benches' moto processes: the local stack's MotoServer running a bench's module as its
child (`python -m bench.instrumented --fd N --moto`, `python -m bench.chat_probe --fd N
--moto`), so what the benches measure of moto is measured in the moto process, as moto runs
under `make run` (batchroute_tools/local/child.py)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from batchroute_tools.local.moto_server import MotoServer
from bench.chat_probe import CALL_HEADER, SERVER_HEADER
from bench.stack import STATS_PATH

REGION = "us-east-1"


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)


def _moto(module: str) -> Iterator[MotoServer]:
    server = MotoServer(module=module, args=("--moto",))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def counted_moto(credentials: None) -> Iterator[MotoServer]:
    yield from _moto("bench.instrumented")


@pytest.fixture
def probed_moto(credentials: None) -> Iterator[MotoServer]:
    yield from _moto("bench.chat_probe")


def _dynamodb(server: MotoServer) -> Any:
    import boto3

    return boto3.session.Session().client("dynamodb", region_name=REGION, endpoint_url=server.endpoint_url)


def test_the_pipeline_bench_counts_requests_in_the_moto_process(counted_moto: MotoServer) -> None:
    dynamodb = _dynamodb(counted_moto)
    dynamodb.list_tables()
    dynamodb.list_tables()

    stats = httpx.get(counted_moto.endpoint_url + STATS_PATH, timeout=30, trust_env=False).json()

    assert stats["moto_process"]["pid"] != os.getpid()
    counted = {tuple(row[:3]): row[3] for row in stats["requests"]}
    assert counted == {("unknown", "dynamodb", "ListTables"): 2}
    assert ["dynamodb", "ListTables", 2] in [row[:3] for row in stats["moto_cpu"]]


def test_the_chat_probe_times_a_probed_call_in_the_moto_process(probed_moto: MotoServer) -> None:
    probed, plain = _dynamodb(probed_moto), _dynamodb(probed_moto)

    def mark(request: Any, **_: Any) -> None:
        request.headers[CALL_HEADER] = "1"

    probed.meta.events.register("before-sign.dynamodb.ListTables", mark)
    before = time.perf_counter()
    answered = probed.list_tables()["ResponseMetadata"]["HTTPHeaders"]
    after = time.perf_counter()

    timing = json.loads(answered[SERVER_HEADER])
    # CLOCK_MONOTONIC is the machine's: moto's start lies within this process's call.
    assert before < timing["start"] < timing["start"] + timing["wall"] < after
    assert timing["cpu"] >= 0 and timing["deepcopy"] == 0 and timing["items"] == {}
    assert SERVER_HEADER not in plain.list_tables()["ResponseMetadata"]["HTTPHeaders"]
