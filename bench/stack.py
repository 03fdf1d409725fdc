"""The local stack as the pipeline bench drives it, from the bench's side: start one in its
own process group (the runner's entry point under `bench.instrumented`'s counters, or
`.venv/bin/batchroute-local` itself with `--plain`), read its counters, stop it; and what a
client does with it: register an agent, fund its org with `batchroute-admin credits grant`,
upload a file through the signed URL.

The stack is three processes, as under `make run` (docs/local.md): the service (API,
pollers, handlers), moto and the vendor emulators, the last two children of the first. The
bench finds the children by their command lines, reads each one's memory and CPU from /proc,
and reads what the emulators keep on disk from their spool directories, under the stack's own
`TMPDIR` (`Spool.held`).

Also the names both sides of the stats path agree on (`STATS_PATH`, `BENCH_KEY`, moto's
account and region), so the stack process's modules import them from here.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from batchroute_tools.emulators.spool import Spool
from bench.machine import children, proc_status

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / ".venv" / "bin" / "batchroute-local"
ADMIN = ROOT / ".venv" / "bin" / "batchroute-admin"
READY_TIMEOUT = 90.0
STATS_PATH = "/__bench__/stats"
BENCH_KEY = "bench"  # the bench's own AWS calls sign with this key; they are not counted
ACCOUNT = "123456789012"
REGION = "us-east-1"
INSTRUMENTED = "bench.instrumented"  # the stack process's module, run with -m from ROOT


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Stack:
    """One local stack in its own process group."""

    def __init__(self, workdir: Path, *, plain: bool, profile: bool, storage: bool, trace: int = 0) -> None:
        import httpx

        self.workdir = workdir
        self.plain = plain
        # Every temporary file of the stack's processes here: the emulators' spools among them.
        self.tmpdir = workdir / "tmp"
        self.tmpdir.mkdir()
        self.port = free_port()
        self.stats_port = free_port()
        self.stack_file = workdir / "stack.json"
        self.log_file = workdir / "stack.log"
        inherited = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BATCHROUTE_"))}
        env = {
            **inherited,
            "PORT": str(self.port),
            "BATCHROUTE_LOCAL_STACK_FILE": str(self.stack_file),
            "LOCAL_OUTBOX_DIR": str(workdir / "outbox"),
            "TMPDIR": str(self.tmpdir),
            "SIMULATED_LATENCY_MS": "0",
            "SIMULATED_BATCH_POLL_SECONDS": "0",
            "PROVIDER_RETRY_BASE_SECONDS": "0",
            "RATE_LIMIT_REGISTER_PER_IP": "1000",
            "RATE_LIMIT_PASSWORD_PER_IP": "1000",
            "RATE_LIMIT_PER_KEY": "100000",
            "RATE_LIMIT_PER_ACCOUNT": "100000",
            "BENCH_PROFILE": "1" if profile else "0",
            "BENCH_STORAGE": "1" if storage else "0",
            "BENCH_TRACEMALLOC": str(trace),
            "BENCH_SERVICE_STATS_PORT": str(self.stats_port),
        }
        command = [str(RUNNER)]
        if not plain:
            command = [sys.executable, "-m", INSTRUMENTED]
        self.started = time.monotonic()
        with self.log_file.open("wb") as log:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.api = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=600, trust_env=False)
        self._wait_ready()
        self.ready_seconds = time.monotonic() - self.started
        self.describe: dict[str, Any] = json.loads(self.stack_file.read_text(encoding="utf-8"))
        self.endpoint = str(self.describe["endpoint_url"])
        self.moto_pid = self._child("moto", ("--moto", "batchroute_tools.local.moto_server"))
        self.emulators_pid = self._child("vendor emulators", ("batchroute_tools.emulators",))

    def _child(self, name: str, markers: tuple[str, ...]) -> int:
        """The pid of the runner's child whose command line names one of `markers`."""
        for pid, command in children(self.process.pid).items():
            if any(marker in command for marker in markers):
                return pid
        self.stop()
        raise SystemExit(f"no {name} process under the stack's runner:\n{self.log_tail()}")

    def _wait_ready(self) -> None:
        import httpx

        while time.monotonic() - self.started < READY_TIMEOUT:
            if self.process.poll() is not None:
                raise SystemExit(f"the stack exited with {self.process.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(httpx.TransportError):
                if self.api.get("/v1/health", timeout=1).status_code == 200:
                    return
            time.sleep(0.2)
        self.stop()
        raise SystemExit(f"the stack was not ready in {READY_TIMEOUT:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_file.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stats(self, **params: Any) -> dict[str, Any]:
        """The counters: the moto process's (requests, on STATS_PATH at the moto endpoint) and
        the service process's (invocations, SDK calls, on its stats port), merged; the vendor
        emulators' process and, unless `light`, the files its spools hold, read from here."""
        document: dict[str, Any] = {"emulators_process": proc_status(self.emulators_pid)}
        if "light" not in params:
            files, size = Spool.held(self.tmpdir)
            document["emulator_spool"] = {"files": files, "bytes": size}
        if self.plain:
            document["process"] = proc_status(self.process.pid)
            document["moto_process"] = proc_status(self.moto_pid)
            return document
        import httpx

        for url in (self.endpoint + STATS_PATH, f"http://127.0.0.1:{self.stats_port}/"):
            answer = httpx.get(url, params=params, timeout=600, trust_env=False)
            answer.raise_for_status()
            document.update(answer.json())  # the service's tables (invocations, sdk) over moto's empty ones
        return document

    def client(self, service: str) -> Any:
        import boto3

        make: Any = boto3.client
        return make(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=BENCH_KEY,
            aws_secret_access_key=BENCH_KEY,
        )

    def stop(self) -> int | None:
        self.api.close()
        code = None
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            code = self.process.wait(timeout=20)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        return code


def register(stack: Stack) -> tuple[str, str]:
    address = f"bench-{uuid.uuid4().hex[:10]}@example.com"
    answer = stack.api.post(
        "/v1/auth/agent-register", json={"email": address, "password": "correct horse battery"}
    )
    if answer.status_code != 200:
        raise SystemExit(f"agent-register: {answer.status_code} {answer.text}")
    body = answer.json()
    return str(body["org_id"]), str(body["api_key"])


def grant(stack: Stack, org_id: str, usd: str) -> None:
    done = subprocess.run(
        [
            str(ADMIN),
            "credits",
            "grant",
            "--org",
            org_id,
            "--usd",
            usd,
            "--stack-file",
            str(stack.stack_file),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
    )
    if done.returncode != 0:
        raise SystemExit(f"credits grant failed: {done.stdout}{done.stderr}")


def upload(stack: Stack, headers: dict[str, str], path: Path, size: int) -> str:
    import httpx

    started = stack.api.post(
        "/v1/files/uploads", json={"filename": path.name, "bytes": size}, headers=headers
    )
    if started.status_code != 201:
        raise SystemExit(f"uploads: {started.status_code} {started.text}")
    file_id, signed = started.json()["file"]["id"], started.json()["upload"]
    with path.open("rb") as body:
        put = httpx.put(
            signed["url"], content=body.read(), headers=signed["headers"], timeout=600, trust_env=False
        )
    if put.status_code != 200:
        raise SystemExit(f"PUT to the signed URL: {put.status_code} {put.text[:500]}")
    done = stack.api.post(f"/v1/files/{file_id}/complete", headers=headers)
    # a large file answers `uploaded` and is checked by the router (docs/files.md): poll
    while done.status_code == 200 and done.json()["file"]["status"] == "uploaded":
        time.sleep(0.5)
        done = stack.api.get(f"/v1/files/{file_id}", headers=headers)
    if done.status_code != 200 or done.json()["file"]["status"] != "processed":
        raise SystemExit(f"complete: {done.status_code} {done.text[:1000]}")
    return str(file_id)


def transitions(stack: Stack, execution_arn: str) -> int:
    """State transitions of the execution (its `*StateEntered` events): what Standard
    workflows bill."""
    sfn = stack.client("stepfunctions")
    entered = 0
    token: str | None = None
    while True:
        page = sfn.get_execution_history(
            executionArn=execution_arn, maxResults=1000, **({"nextToken": token} if token else {})
        )
        entered += sum(1 for e in page["events"] if e["type"].endswith("StateEntered"))
        token = page.get("nextToken")
        if not token:
            return entered
