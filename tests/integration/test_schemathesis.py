"""Schemathesis over the in-process app on moto (issue 27 point 3): for every operation of the
OpenAPI document the app serves, bounded generated requests, authenticated with a real API key
of an org with credit, and its status-code conformance check: every status answered is one
the operation documents; and no generated request gets a 5xx. Derandomized (the same cases
each run) and bounded to stay well inside a minute; it runs with the integration suite, so in
CI. tests/unit/test_openapi_statuses.py checks the statuses the code can answer statically."""

from __future__ import annotations

from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import status_code_conformance

from batchroute.config import get_settings
from batchroute.domain.delivery.network import check_public_https_url
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from functions.api.deps import get_webhook_url_check
from tests.integration.principals import new_org

EXAMPLES_PER_OPERATION = 8  # ~900 requests, about 30 s


def _public(host: str, port: int) -> list[str]:
    return ["93.184.215.14"]


def test_every_answer_of_generated_requests_is_documented(local_aws: LocalStack, tmp_path: Path) -> None:
    identity_store.cache_clear()
    # Rate limits off: hundreds of requests from one key would be answered 429 (documented,
    # but then nothing behind the limit is exercised). Emails of generated sign-ups: tmp.
    overrides = {"rate_limits_enabled": False, "local_outbox_dir": str(tmp_path / "outbox")}
    app = create_app(get_settings().model_copy(update=overrides))
    # The real URL check, with every generated host resolving to one public address: no DNS
    app.dependency_overrides[get_webhook_url_check] = lambda: partial(check_public_https_url, resolve=_public)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    key = new_org(credit_usd="10").api_key("owner")
    headers = {"Authorization": f"Bearer {key}"}
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    operations = 0

    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def run(case: Any) -> None:
            response = case.call(headers=headers)
            statuses[response.status_code] += 1
            case.validate_response(response, checks=[status_code_conformance])

        try:
            run()
        except (Exception, FailureGroup) as exc:  # every operation's findings are collected
            failures.append(f"{operation.method.upper()} {operation.path}: {str(exc).splitlines()[0]}")

    assert operations > 90  # the whole document, not a slice of it
    assert sum(statuses.values()) >= operations  # each operation was called
    assert not failures, "\n".join(failures)
    assert not [status for status in statuses if status >= 500], statuses  # nothing generated crashes it
    # Not only refusals: the key reaches the routes behind authentication
    assert sum(n for status, n in statuses.items() if status < 300) > operations // 2, statuses
