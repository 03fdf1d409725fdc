"""The vendor emulators keep their batch files on disk, not in memory (issue 18: the local
service process, which runs the emulators, must stay flat in the batch's size).

Each test drives batch jobs through the real adapter over HTTP, as a lane does (submit, poll,
read the results), and measures the Python heap the process retains after 10 and after 60
jobs: before the fix every job's input lines and results stayed in the emulator's memory
(~ the job's bytes per job); now a job leaves only its small record. The jobs' files are on
disk in the emulator's spool directory. Jobs end on the first poll (`batch_seconds=0`): no
waiting on time."""

from __future__ import annotations

import gc
import threading
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from batchroute.providers import anthropic as anthropic_provider
from batchroute.providers import openai as openai_provider
from batchroute.providers.base import BatchApiProvider, ProviderRequest
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute_tools.emulators.anthropic import DEFAULT_MODELS, AnthropicEmulator
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.openai import OpenAIEmulator
from batchroute_tools.emulators.server import EmulatorServer
from batchroute_tools.emulators.spool import Spool

ITEMS_PER_JOB = 20
PROMPT = "x" * 2_000  # ~2 KB a request, as the bench's items
OPENAI_MODEL = "gpt-4o-mini-2024-07-18"


@pytest.fixture(scope="module")
def emulators() -> Iterator[tuple[EmulatorServer, OpenAIEmulator, AnthropicEmulator]]:
    behaviour = Behaviour(EmulatorConfig(batch_seconds=0.0))
    openai_emulator = OpenAIEmulator(behaviour, provider="openai", prefix="/openai", models=(OPENAI_MODEL,))
    anthropic_emulator = AnthropicEmulator(behaviour)
    _contracts_warmed()
    server = EmulatorServer([openai_emulator.vendor, anthropic_emulator.vendor]).start()
    try:
        yield server, openai_emulator, anthropic_emulator
    finally:
        server.stop()


def _contracts_warmed() -> None:
    """Wait for the emulators' contract warm-up threads (they import a vendor SDK, ~2 s): an
    import still running on a loaded machine would be counted as heap the jobs retained."""
    for thread in threading.enumerate():
        if thread.name.endswith("-contract-warm"):
            thread.join()


def _requests(model: str, provider_model_id: str) -> list[ProviderRequest]:
    return [
        ProviderRequest(
            f"seq-{n}",
            f"item-{n}",
            "responses",
            model,
            provider_model_id,
            {"messages": [{"role": "user", "content": f"{PROMPT} #{uuid.uuid4().hex}"}]},
            32,
        )
        for n in range(ITEMS_PER_JOB)
    ]


def _run_jobs(batch: BatchApiProvider, make: Callable[[], list[ProviderRequest]], jobs: int) -> None:
    for _ in range(jobs):
        job = batch.submit(make())
        assert batch.poll(job).terminal
        assert len(list(batch.results(job))) == ITEMS_PER_JOB


def _retained_per_job(batch: BatchApiProvider, make: Callable[[], list[ProviderRequest]]) -> float:
    """Bytes of Python heap left behind per job, between 10 jobs and 60 jobs."""
    _run_jobs(batch, make, 3)  # connections, caches and lazy imports first
    tracemalloc.start()
    try:
        _run_jobs(batch, make, 10)
        gc.collect()
        after_10 = tracemalloc.get_traced_memory()[0]
        _run_jobs(batch, make, 50)
        gc.collect()
        after_60 = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return (after_60 - after_10) / 50


def _job_bytes(make: Callable[[], list[ProviderRequest]]) -> int:
    return sum(len(str(r.input)) for r in make())


def _check(retained: float, job_bytes: int) -> None:
    # Before the fix, a job retained more than its own bytes (its parsed lines, its results);
    # now its record and its dictionary entries, a few KB.
    assert retained < job_bytes / 8, f"{retained:.0f} bytes retained per job of {job_bytes} bytes"


def _files(spool: Spool | None) -> list[Any]:
    return spool.files() if isinstance(spool, Spool) else []


def test_the_openai_emulator_keeps_no_job_in_memory(
    emulators: tuple[EmulatorServer, OpenAIEmulator, AnthropicEmulator],
) -> None:
    server, emulator, _ = emulators
    batch = openai_provider.make_batch(
        ProviderEndpoint("openai", "openai", server.base_url + "/openai/v1", batch_api=True), "sk-local"
    )

    def make() -> list[ProviderRequest]:
        return _requests("gpt-4o-mini", OPENAI_MODEL)

    _check(_retained_per_job(batch, make), _job_bytes(make))
    # The adapter deleted every file it read, and each job's own copy of its input is gone.
    assert emulator.spool is not None and emulator.spool.files() == []
    assert emulator.spool.root.is_dir()


def test_the_anthropic_emulator_keeps_message_batches_on_disk(
    emulators: tuple[EmulatorServer, OpenAIEmulator, AnthropicEmulator],
) -> None:
    server, _, emulator = emulators
    endpoint = ProviderEndpoint("anthropic", "anthropic", base_url=server.base_url + "/anthropic")
    batch = anthropic_provider.make_batch(endpoint, "sk-ant-test")

    def make() -> list[ProviderRequest]:
        return _requests("claude", DEFAULT_MODELS[0])

    before = len(_files(getattr(emulator, "spool", None)))
    _check(_retained_per_job(batch, make), _job_bytes(make))
    # Anthropic keeps an ended batch's results (29 days): one results file per batch, no
    # requests file once it has ended.
    results = emulator.spool.files()
    assert len(results) - before == 63
    assert all(path.name.endswith("-results") for path in results)


def test_stopping_the_emulators_removes_their_files() -> None:
    emulator = AnthropicEmulator(Behaviour(EmulatorConfig(batch_seconds=0.0)))
    server = EmulatorServer([emulator.vendor]).start()
    endpoint = ProviderEndpoint("anthropic", "anthropic", base_url=server.base_url + "/anthropic")
    batch = anthropic_provider.make_batch(endpoint, "sk-ant-test")
    _run_jobs(batch, lambda: _requests("claude", DEFAULT_MODELS[0]), 1)
    assert len(emulator.spool.files()) == 1
    server.stop()
    assert not emulator.spool.root.exists()
