"""Start and stop the local stack exactly as `make run` does: `.venv/bin/batchroute-local`,
in its own process group, on a free port."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from batchroute.config import Settings

REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / ".venv" / "bin" / "batchroute-local"
READY_TIMEOUT_SECONDS = 60.0
MULTIPART_BYTES = 5 * 1024 * 1024  # the suite stack's multipart threshold and part size
STOP_TIMEOUT_SECONDS = 15.0


@dataclass
class RunningStack:
    process: subprocess.Popen[bytes]
    base_url: str
    stack_file: Path
    log_file: Path
    ready_seconds: float

    def describe(self) -> dict[str, Any]:
        """The runner's stack file: moto endpoint, region and physical resource names."""
        document: dict[str, Any] = json.loads(self.stack_file.read_text(encoding="utf-8"))
        return document

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_stack(workdir: Path, settings: Mapping[str, str] | None = None) -> RunningStack:
    """Launch the runner and wait until GET /v1/health answers 200. `settings`: more of the
    service's settings as environment variables (documented knobs, e.g. the deadline rescue's
    RESCUE_MIN_OBSERVATION_SECONDS), on top of the suite's own."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    # A developer's shell: settings other tests may have left in os.environ do not leak in.
    inherited = {k: v for k, v in os.environ.items() if k.lower() not in Settings.model_fields}
    env = {
        **inherited,
        "PORT": str(port),
        # Keep this instance's files apart from a developer's own `make run`.
        "BATCHROUTE_LOCAL_STACK_FILE": str(workdir / "stack.json"),
        "LOCAL_OUTBOX_DIR": str(workdir / "outbox"),
        # The whole suite registers from 127.0.0.1: room for it under the per-IP limit.
        "RATE_LIMIT_REGISTER_PER_IP": "1000",
        "RATE_LIMIT_PASSWORD_PER_IP": "1000",
        # The batch tests' webhook receiver listens on 127.0.0.1.
        "ALLOW_LOOPBACK_WEBHOOKS": "1",
        # The sweeper every 10 s rather than the declared minute: a schedule the tests make
        # due fires within seconds (docs/local.md, --sweeper-interval).
        "SWEEPER_INTERVAL_SECONDS": "10",
        # Signed uploads go multipart from S3's smallest part (5 MiB) rather than 64 MiB: the
        # multipart path runs on a 6 MiB file (docs/files.md, Multipart; the setting's floor).
        "FILE_MULTIPART_THRESHOLD_BYTES": str(MULTIPART_BYTES),
        "FILE_PART_BYTES": str(MULTIPART_BYTES),
        **(settings or {}),
    }
    log_file = workdir / "stack.log"
    started = time.monotonic()
    with log_file.open("wb") as log:
        process = subprocess.Popen(
            [str(RUNNER)], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    stack = RunningStack(process, f"http://127.0.0.1:{port}", workdir / "stack.json", log_file, 0.0)
    try:
        _wait_for_health(stack, started)
    except BaseException:
        kill_group(process)
        raise
    stack.ready_seconds = time.monotonic() - started
    return stack


@contextlib.contextmanager
def running_stack(workdir: Path, settings: Mapping[str, str] | None = None) -> Iterator[RunningStack]:
    """A stack for the block; stopped by SIGTERM after it, which must exit cleanly (code 0)."""
    stack = start_stack(workdir, settings)
    try:
        yield stack
    finally:
        code, _ = stop_stack(stack)
        assert code == 0, stack.log_tail()


@contextlib.contextmanager
def api_client(stack: RunningStack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.base_url, timeout=10) as client:
        yield client


def _wait_for_health(stack: RunningStack, started: float) -> None:
    while time.monotonic() - started < READY_TIMEOUT_SECONDS:
        if stack.process.poll() is not None:
            pytest.fail(f"the local stack exited with {stack.process.returncode}:\n{stack.log_tail()}")
        try:
            if httpx.get(f"{stack.base_url}/v1/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(f"the local stack was not healthy within {READY_TIMEOUT_SECONDS}s:\n{stack.log_tail()}")


def stop_stack(stack: RunningStack, sig: signal.Signals = signal.SIGTERM) -> tuple[int, float]:
    """Signal the runner; return its exit code and how long it took to exit."""
    started = time.monotonic()
    try:
        stack.process.send_signal(sig)
        code = stack.process.wait(timeout=STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the local stack did not stop within {STOP_TIMEOUT_SECONDS}s:\n{stack.log_tail()}")
    finally:
        kill_group(stack.process)
    return code, time.monotonic() - started


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """Last resort: nothing the runner started may outlive the test session."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=STOP_TIMEOUT_SECONDS)
