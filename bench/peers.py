"""This service beside LiteLLM's proxy, in front of the same local upstream (issue 30, point 1).

`make bench-peers` (= `.venv/bin/python -m bench.peers`). One run, four targets, every round
streaming the same chat request (32 completion tokens, `stream: true`) to each of them, in an
order that rotates round by round so no target always runs first or last:

- `upstream`: the local stack's OpenAI-compatible edge emulator called directly over HTTP
  (the baseline: what a client would see with no gateway at all);
- `service`: this service's `POST /v1/chat/completions` on the local stack started as
  `make run` starts it (a credit hold placed before any byte is forwarded, rate limits, the
  receipt), pinned to the same edge lane;
- `litellm`: LiteLLM's proxy with a master key only (no database);
- `litellm-budgets`: LiteLLM's proxy doing comparable work: a virtual key with a budget, and
  spend tracking on PostgreSQL (Debian's packages; a throwaway cluster the bench creates,
  starts and stops).

Each target's added time is its time minus the upstream's IN THE SAME ROUND (paired), to the
first content byte (TTFB) and to `[DONE]`; the report gives p50, p90 and p99 of each. The
upstream is the same emulator for all (`--ttft-ms`, `--inter-token-ms`).

LiteLLM lives in a bench-only virtualenv (`.bench-venvs/litellm`, made on first use from
PyPI at `LITELLM_VERSION`), never in the project's dependencies. Offline it must not fetch a
Hugging Face tokenizer (`disable_hf_tokenizer_download`). The PostgreSQL set-up needs
LiteLLM's Prisma toolchain (its `extra_proxy` requirement, `prisma`), whose engines Prisma downloads from
binaries.prisma.sh on first use (not a package registry); when that set-up cannot start, the
report says why under `not_run` and gives the other three targets.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.chat_overhead import MODEL, PROVIDER, PROVIDER_MODEL_ID, _body, _pct, _start
from bench.machine import describe
from tests.e2e.local_stack import REPO, free_port, stop_stack

LITELLM_VERSION = "1.108.7"
# LiteLLM's `extra_proxy` requirement, named: its metadata spells the extra two ways
# ('extra_proxy', 'extra-proxy'), and pip 23 installs the extra without it.
PRISMA = "prisma>=0.11.0,<1.0"
VENV = REPO / ".bench-venvs" / "litellm"
MASTER_KEY = "sk-bench-master-key"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
READY_SECONDS = 120.0


@dataclass
class Target:
    """One place a round sends the request: its URL, headers and body."""

    name: str
    url: str
    headers: dict[str, str]
    body: dict[str, Any]
    rows: list[tuple[float, float]] = field(default_factory=list)  # (ttfb, done) seconds


def stream_once(client: httpx.Client, target: Target) -> tuple[float, float]:
    """One streamed request: seconds to the first content delta and to `[DONE]`."""
    started = time.perf_counter()
    ttfb = done = 0.0
    with client.stream("POST", target.url, json=target.body, headers=target.headers) as response:
        if response.status_code != 200:
            raise SystemExit(f"{target.name} answered {response.status_code}: {response.read()!r}")
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[len("data:") :].strip()
            if data == "[DONE]":
                done = time.perf_counter()
                continue
            event = json.loads(data)
            choices = event.get("choices") or []
            if not ttfb and choices and (choices[0].get("delta") or {}).get("content"):
                ttfb = time.perf_counter()
    if not ttfb or not done:
        raise SystemExit(f"{target.name}: no content or no [DONE] in the stream")
    return ttfb - started, done - started


# -- LiteLLM, in its own virtualenv --------------------------------------------------------------
def litellm_venv() -> Path:
    """The bench-only virtualenv with LiteLLM's proxy, made on first use."""
    binary = VENV / "bin" / "litellm"
    if not binary.exists():
        print(f"making {VENV} with litellm[proxy]=={LITELLM_VERSION} (once)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(VENV / "bin" / "pip"), "install", "-q"]
        subprocess.run([*pip, f"litellm[proxy]=={LITELLM_VERSION}", PRISMA], check=True)
    return binary


def litellm_version() -> str:
    out = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def litellm_config(workdir: Path, upstream: str, database_url: str | None) -> Path:
    """LiteLLM's proxy config: the one model, in front of the same upstream."""
    lines = [
        "model_list:",
        f"  - model_name: {MODEL}",
        "    litellm_params:",
        f"      model: openai/{PROVIDER_MODEL_ID}",
        f"      api_base: {upstream}",
        "      api_key: none",
        "litellm_settings:",
        "  disable_hf_tokenizer_download: true",
        "  telemetry: false",
        "general_settings:",
        f"  master_key: {MASTER_KEY}",
    ]
    if database_url:
        lines.append(f"  database_url: {database_url}")
    path = workdir / ("config-db.yaml" if database_url else "config.yaml")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@contextlib.contextmanager
def litellm_proxy(workdir: Path, config: Path, log_name: str, env: dict[str, str]) -> Iterator[str]:
    """LiteLLM's proxy on a free port, one worker; yields its base URL, stops it after."""
    port = free_port()
    log = (workdir / log_name).open("wb")
    process = subprocess.Popen(
        [str(VENV / "bin" / "litellm"), "--config", str(config), "--port", str(port), "--num_workers", "1"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "LITELLM_LOG": "ERROR", "HF_HUB_OFFLINE": "1", **env},
        start_new_session=True,
        cwd=workdir,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(f"{base}/health/readiness", process, workdir / log_name)
        yield base
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=15)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url} exited: {log.read_text(errors='replace')[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1).status_code == 200:
                return
        time.sleep(0.5)
    raise RuntimeError(f"{url} not ready in {READY_SECONDS:.0f} s: {log.read_text(errors='replace')[-3000:]}")


# -- PostgreSQL, a throwaway cluster ---------------------------------------------------------------
@contextlib.contextmanager
def postgres(workdir: Path) -> Iterator[str]:
    """A new PostgreSQL cluster (Debian's binaries) on a free port; yields its URL."""
    if not (PG_BIN / "initdb").exists():
        raise RuntimeError(f"PostgreSQL is not installed ({PG_BIN}): apt-get install postgresql")
    data = workdir / "pgdata"
    port = free_port()
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_user:
        shutil.chown(workdir, "postgres")
    subprocess.run(
        [*as_user, str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "bench"],
        check=True,
        capture_output=True,
    )
    ctl = [*as_user, str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(workdir / "postgres.log")]
    options = f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run([*ctl, "-o", options, "-w", "start"], check=True, capture_output=True)
    try:
        subprocess.run(
            [
                *as_user,
                str(PG_BIN / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "bench",
                "litellm",
            ],
            check=True,
            capture_output=True,
        )
        yield f"postgresql://bench@127.0.0.1:{port}/litellm"
    finally:
        subprocess.run([*ctl, "-m", "fast", "stop"], capture_output=True)


def budget_key(base: str) -> str:
    """A virtual key with a budget (spend tracked per request on PostgreSQL)."""
    answer = httpx.post(
        f"{base}/key/generate",
        json={"models": [MODEL], "max_budget": 1000, "budget_duration": "30d"},
        headers={"Authorization": f"Bearer {MASTER_KEY}"},
        timeout=30,
    )
    answer.raise_for_status()
    return str(answer.json()["key"])


# -- the run ---------------------------------------------------------------------------------------
def run_rounds(targets: list[Target], rounds: int, warmup: int) -> None:
    with httpx.Client(timeout=60) as client:
        for n in range(warmup + rounds):
            shift = n % len(targets)
            for target in targets[shift:] + targets[:shift]:
                result = stream_once(client, target)
                if n >= warmup:
                    target.rows.append(result)


def added(target: Target, upstream: Target, which: int) -> dict[str, float]:
    values = [(row[which] - base[which]) * 1000 for row, base in zip(target.rows, upstream.rows, strict=True)]
    return {f"p{q}_ms": round(_pct(values, q / 100), 2) for q in (50, 90, 99)}


def report(targets: list[Target], args: argparse.Namespace, versions: dict[str, str]) -> dict[str, Any]:
    upstream = targets[0]
    return {
        "machine": describe(),
        "load": os.getloadavg(),
        "rounds": args.rounds,
        "upstream": {"ttft_ms": args.ttft_ms, "inter_token_ms": args.inter_token_ms, "tokens": 32},
        "versions": versions,
        "upstream_p50_ms": {
            "ttfb": round(_pct([r[0] * 1000 for r in upstream.rows], 0.5), 2),
            "done": round(_pct([r[1] * 1000 for r in upstream.rows], 0.5), 2),
        },
        "added": {
            t.name: {"ttfb": added(t, upstream, 0), "done": added(t, upstream, 1)} for t in targets[1:]
        },
    }


def _targets(stack_url: str, upstream: str, service_key: str) -> tuple[Target, Target]:
    plain = {k: v for k, v in _body().items() if k != "provider_preferences"}
    return (
        Target(
            "upstream",
            f"{upstream}/chat/completions",
            {"Authorization": "Bearer none"},
            {**plain, "model": PROVIDER_MODEL_ID},
        ),
        Target(
            "service", f"{stack_url}/v1/chat/completions", {"Authorization": f"Bearer {service_key}"}, _body()
        ),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument("--ttft-ms", type=int, default=150)
    parser.add_argument("--inter-token-ms", type=int, default=15)
    parser.add_argument("--no-budgets", action="store_true", help="leave out the PostgreSQL set-up")
    args = parser.parse_args(argv)
    litellm_venv()
    workdir = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    stack = _start(args, None)
    try:
        upstream = f"{stack.describe()['emulators_url']}/hosts/{PROVIDER}/v1"
        created = httpx.post(
            f"{stack.base_url}/v1/auth/agent-register",
            json={"email": f"peers-{uuid.uuid4().hex[:8]}@example.com", "password": "bench password 1"},
            timeout=30,
        )
        created.raise_for_status()
        targets = list(_targets(stack.base_url, upstream, created.json()["api_key"]))
        plain = {k: v for k, v in _body().items() if k != "provider_preferences"}
        with contextlib.ExitStack() as running:
            bare = running.enter_context(
                litellm_proxy(workdir, litellm_config(workdir, upstream, None), "litellm.log", {})
            )
            targets.append(
                Target(
                    "litellm", f"{bare}/v1/chat/completions", {"Authorization": f"Bearer {MASTER_KEY}"}, plain
                )
            )
            skipped = {}
            if not args.no_budgets:
                try:
                    targets.append(_budget_target(running, workdir, upstream, plain))
                except (RuntimeError, subprocess.CalledProcessError, httpx.HTTPError) as error:
                    skipped["litellm-budgets"] = _why(error)
            run_rounds(targets, args.rounds, args.warmup)
        versions = {"litellm": litellm_version(), "python": platform.python_version()}
        print(json.dumps({**report(targets, args, versions), "not_run": skipped}, indent=2))
    finally:
        stop_stack(stack)
    return 0


def _why(error: Exception) -> str:
    """Why a set-up could not start, in a line or two (the tail of its log)."""
    text = str(error)
    if isinstance(error, subprocess.CalledProcessError):
        text = f"{error.cmd[0]} exited {error.returncode}: {(error.stderr or b'').decode(errors='replace')}"
    lines = [line for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-3:])[-600:]


def _budget_target(
    running: contextlib.ExitStack, workdir: Path, upstream: str, plain: dict[str, Any]
) -> Target:
    database = running.enter_context(postgres(workdir))
    env = {"DATABASE_URL": database, "STORE_MODEL_IN_DB": "False"}
    base = running.enter_context(
        litellm_proxy(workdir, litellm_config(workdir, upstream, database), "litellm-db.log", env)
    )
    key = budget_key(base)
    return Target("litellm-budgets", f"{base}/v1/chat/completions", {"Authorization": f"Bearer {key}"}, plain)


if __name__ == "__main__":
    sys.exit(main())
