"""The API function's init (importing `functions.api.handler` in a fresh interpreter, with the
environment a Lambda function sees) leaves the heavy modules for the requests that need them
(docs/cold-start.md): the route modules and what they name, boto3/botocore's client, the
provider adapters, the payment and schedule libraries. Not a timing test: it names modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Heavy modules, each imported on the first request (or AWS call) that uses it.
NOT_AT_INIT = (
    "stripe",
    "croniter",
    "httpx",
    "jsonschema",
    "email_validator",
    "boto3",
    "botocore.client",
    "aws_xray_sdk.ext.botocore.patch",
    "batchroute.providers.openai.client",
    "batchroute.providers",
    "batchroute.wiring",
    "batchroute.services",
    "batchroute.adapters",
    "functions.api.deps",
    "functions.api.routes.batches.batches",
    "functions.api.routes.chat.completions",
    "functions.api.schemas",
    "batchroute_tools",
    "moto",
)

_PROBE = (
    "import json, sys; import functions.api.handler; "
    "print(json.dumps(sorted(m for m in sys.modules if m in set(json.loads(sys.argv[1])))))"
)


def _imported_at_init(modules: tuple[str, ...], **env: str) -> list[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_ENDPOINT", "MOTO"))}
    environment.update(env)
    environment["PYTHONPATH"] = os.pathsep.join(
        str(ROOT / part) for part in ("layers/shared/python", ".", "clients/python/src")
    )
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(modules)],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
        cwd=ROOT,
    )
    imported: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return imported


def test_the_api_handler_imports_no_heavy_module_at_init() -> None:
    lambda_env = {
        "LAMBDA_TASK_ROOT": "/var/task",  # the X-Ray SDK takes its Lambda path: tracing on
        "AWS_LAMBDA_FUNCTION_NAME": "batchroute-production-api",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "ENVIRONMENT": "production",
    }
    assert _imported_at_init(NOT_AT_INIT, **lambda_env) == []


def test_the_probe_sees_a_module_the_handler_does_import() -> None:
    # The same probe reports what is imported: the check above is not vacuous.
    assert _imported_at_init(("fastapi", "functions.api.app", "stripe")) == ["fastapi", "functions.api.app"]
