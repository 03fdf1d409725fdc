"""The API function's init (importing `functions.api.handler` in a fresh interpreter, with the
environment a Lambda function sees) leaves the heavy modules for the requests that need them
(docs/cold-start.md): the route modules and what they name, boto3/botocore's client, the
provider adapters, the payment and schedule libraries. Not a timing test: it names modules."""

from __future__ import annotations

import json

from tests.unit.fresh_interpreter import last_line

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
    "import json, sys; import functions.api.handler; {then}; "
    "print(json.dumps(sorted(m for m in sys.modules if m in set(json.loads(sys.argv[1])))))"
)
# The liveness check, a cold start's usual first call: its route module names no service.
_FIRST_LIVENESS_CALL = (
    "from starlette.testclient import TestClient; "
    "assert TestClient(functions.api.handler.app).get('/v1/health').status_code == 200"
)


def _imported_at_init(modules: tuple[str, ...], then: str = "pass", **env: str) -> list[str]:
    # A Lambda function's environment, not this test process's: whatever other tests set in it
    # (the integration suite's SIMULATED_PROVIDERS, moto's endpoints) would reach the settings
    # the first request reads, and production's refuse simulated providers.
    imported: list[str] = json.loads(last_line(_PROBE.format(then=then), json.dumps(modules), **env))
    return imported


LAMBDA_ENV = {
    "LAMBDA_TASK_ROOT": "/var/task",  # the X-Ray SDK takes its Lambda path: tracing on
    "AWS_LAMBDA_FUNCTION_NAME": "batchroute-production-api",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "ENVIRONMENT": "production",
    # what production's settings require, read by a request (never at init)
    "APP_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:test",
    "PUBLIC_BASE_URL": "https://api.example.com",
    "PAYMENTS_SECRET_NAME": "batchroute-production-payments-stripe",
}


def test_the_api_handler_imports_no_heavy_module_at_init() -> None:
    assert _imported_at_init(NOT_AT_INIT, **LAMBDA_ENV) == []


def test_the_first_liveness_call_imports_no_service() -> None:
    # httpx is the test client's own; the schemas package holds the liveness answer's model.
    heavy = tuple(m for m in NOT_AT_INIT if m not in ("httpx", "functions.api.schemas"))
    assert _imported_at_init(heavy, then=_FIRST_LIVENESS_CALL, **LAMBDA_ENV) == []
    # The same probe after a call that does need them (runtime metadata names the caller).
    runtime = _FIRST_LIVENESS_CALL.replace("/v1/health", "/v1/runtime")
    assert "functions.api.deps" in _imported_at_init(heavy, then=runtime, **LAMBDA_ENV)


def test_the_probe_sees_a_module_the_handler_does_import() -> None:
    # The same probe reports what is imported: the check above is not vacuous.
    assert _imported_at_init(("fastapi", "functions.api.app", "stripe")) == ["fastapi", "functions.api.app"]
