"""Cold start: each handler module's import time, and each deployment asset's zipped size.

Imports run in fresh interpreters with the environment a Lambda function sees
(LAMBDA_TASK_ROOT set, production settings), so the X-Ray SDK takes its Lambda path.
Run with `make bench` or, from the repository root, `.venv/bin/python -m bench.coldstart [--runs N]`.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import zipfile
from pathlib import Path

from bench.machine import describe

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / ".build"
HANDLERS = ("api", "router", "settle", "webhook", "sweeper")
IMPORT_GOAL_MS = {"api": 250.0}  # issue 30, point 5 (without SnapStart)
# The provider adapters (imported by a lane on first use) beside the vendors' own SDKs, which
# the adapters do not use (docs/providers.md, Why httpx and not the vendors' SDKs).
PROVIDER_CLIENTS = (
    ("batchroute.providers.openai", "adapter: OpenAI and compatible hosts (httpx)"),
    ("batchroute.providers.anthropic", "adapter: Anthropic (httpx)"),
    ("batchroute.providers.gemini", "adapter: Gemini (httpx)"),
    ("batchroute.providers.bedrock", "adapter: Bedrock (boto3)"),
    ("openai", "SDK: openai"),
    ("anthropic", "SDK: anthropic"),
    ("google.genai", "SDK: google-genai"),
)
ASSET_GOAL_MB = 20.0

LAMBDA_ENV = {
    "LAMBDA_TASK_ROOT": "/var/task",
    "AWS_LAMBDA_FUNCTION_NAME": "batchroute-production-bench",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "ENVIRONMENT": "production",
    "APP_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:bench",
    "PUBLIC_BASE_URL": "https://api.example.com",
    "PAYMENTS_SECRET_NAME": "batchroute-production-payments-stripe",
    "POWERTOOLS_SERVICE_NAME": "batchroute",
    "POWERTOOLS_METRICS_NAMESPACE": "BatchRoute",
    "PYDANTIC_DISABLE_PLUGINS": "__all__",
}

# Wall time, then the interpreter's CPU time for the same import (less sensitive to other
# processes on a shared machine: bench/coldstart_compare.py prints both).
_PROBE = (
    "import time; t = time.perf_counter(); c = time.process_time(); import {module}; "
    "print((time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000)"
)
# SnapStart (docs/cold-start.md): after the import, what the before-snapshot hook adds to the
# snapshot's init, and what the after-restore hook costs each restored copy (the restore itself
# is Lambda's and is read on AWS only, in the REPORT line's Restore Duration).
_HOOKS_PROBE = (
    "import time; import functions.api.handler; from functions.api import snapstart; "
    "t = time.perf_counter(); snapstart.before_snapshot(); b = (time.perf_counter() - t) * 1000; "
    "t = time.perf_counter(); snapstart.after_restore(); a = (time.perf_counter() - t) * 1000; "
    "print(f'{b} {a}')"
)


def import_ms(module: str) -> float:
    return float(probe(_PROBE.format(module=module)).split()[0])


def hooks_ms() -> tuple[float, float]:
    before, after = probe(_HOOKS_PROBE).split()
    return float(before), float(after)


def probe(code: str, root: Path = ROOT) -> str:
    """The last line `code` prints in a fresh interpreter with a Lambda function's
    environment; with `root`, that checkout's code is imported (bench/coldstart_compare.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_ENDPOINT", "MOTO"))}
    env.update(LAMBDA_ENV)
    if root != ROOT:
        env["PYTHONPATH"] = os.pathsep.join(
            str(root / part) for part in ("layers/shared/python", ".", "clients/python/src")
        )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=root,
    )
    return str(out.stdout.strip().splitlines()[-1])


def zipped_mb(folder: Path) -> float:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder))
    return len(buffer.getvalue()) / 1_000_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    print(f"machine: {describe()}")
    print(f"{'handler':<10}{'median ms':>11}{'min ms':>9}{'max ms':>9}  goal")
    failed = False
    for key in HANDLERS:
        module = f"functions.{key}.handler"
        import_ms(module)  # warm the file cache, as a provisioned Lambda image would be
        samples = [import_ms(module) for _ in range(args.runs)]
        median = statistics.median(samples)
        goal = IMPORT_GOAL_MS.get(key)
        verdict = "" if goal is None else (f"<= {goal:.0f} ms " + ("ok" if median <= goal else "MISSED"))
        failed |= goal is not None and median > goal
        print(f"{key:<10}{median:>11.1f}{min(samples):>9.1f}{max(samples):>9.1f}  {verdict}")
    hooks = [hooks_ms() for _ in range(max(3, args.runs // 3))]
    print(
        f"\napi SnapStart hooks: before snapshot median {statistics.median(h[0] for h in hooks):.1f} ms "
        f"(in the snapshot's init, once per version), after restore median "
        f"{statistics.median(h[1] for h in hooks):.2f} ms (per restored copy)"
    )
    print(f"\n{'provider client':<32}{'median ms':>11}  what")
    for module, what in PROVIDER_CLIENTS:
        import_ms(module)
        samples = [import_ms(module) for _ in range(max(3, args.runs // 3))]
        print(f"{module:<32}{statistics.median(samples):>11.1f}  {what}")
    if not BUILD.exists():
        print("no .build/: run `make build` for asset sizes")
        return 1
    print(f"\n{'asset':<22}{'zipped MB':>10}  goal <= {ASSET_GOAL_MB:.0f} MB")
    assets = [BUILD / "layer"] + [BUILD / "functions" / key for key in HANDLERS]
    for asset in assets:
        size = zipped_mb(asset)
        failed |= size > ASSET_GOAL_MB
        print(f"{asset.relative_to(BUILD)!s:<22}{size:>10.2f}  {'ok' if size <= ASSET_GOAL_MB else 'MISSED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
