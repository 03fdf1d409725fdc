"""The fault suite's fixtures: moto in-process (as the integration suites), the vendor
emulators over HTTP (the real adapters, not the in-process simulator), a webhook receiver on
loopback, an org whose webhook points at it; and the suite's closing tally."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest

from batchroute.clock import FixedClock
from batchroute.config import get_settings
from batchroute_tools.emulators import build_vendors
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.server import EmulatorServer
from batchroute_tools.local.provision import LocalStack
from functions.api.auth import identity_store
from tests.faults.harness import TALLY, BotocoreFaults, Faults, Pipeline, WebhookOutage
from tests.integration.batch_pipeline_support import heartbeat_all_lanes
from tests.integration.conftest import local_aws  # noqa: F401  (the fixture)
from tests.integration.conftest import serializable_transactions as serializable_transactions
from tests.integration.principals import new_org
from tests.integration.test_webhook_delivery import Receiver, set_org_webhook
from tests.integration.test_webhook_delivery import receiver as receiver


@pytest.fixture
def behaviour() -> Behaviour:
    return Behaviour(EmulatorConfig())


@pytest.fixture
def pipeline(
    local_aws: LocalStack,  # noqa: F811
    behaviour: Behaviour,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[Pipeline]:
    emulators = EmulatorServer(build_vendors(behaviour, s3=boto3.client("s3", region_name=local_aws.region)))
    emulators.start()
    for name, value in {
        "SIMULATED_PROVIDERS": "0",  # every provider through its adapter, over HTTP
        "VENDOR_EMULATOR_URL": emulators.base_url,
        "SIMULATED_LATENCY_MS": "0",
        "SIMULATED_BATCH_POLL_SECONDS": "0",
        "PROVIDER_RETRY_BASE_SECONDS": "0",
        # More attempts than any scenario injects faults into one provider: with no backoff,
        # an item's retries can meet every injected fault in a row (a fast emulator makes that
        # a race the scenarios would lose now and then), and "nothing lost" must not hang on it.
        "PROVIDER_RETRY_MAX_ATTEMPTS": "7",
        "ALLOW_LOOPBACK_WEBHOOKS": "1",
        "LOCAL_OUTBOX_DIR": str(tmp_path / "outbox"),
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    identity_store.cache_clear()
    faults = Faults()
    aws = BotocoreFaults(faults)
    aws.install(monkeypatch)
    clock = FixedClock(datetime.now(UTC))
    try:
        heartbeat_all_lanes()
        org = new_org(credit_usd="10")
        set_org_webhook(org.org_id, receiver.url())
        yield Pipeline(
            stack=local_aws,
            faults=faults,
            aws=aws,
            webhooks=WebhookOutage(receiver, clock, faults),
            clock=clock,
            org_id=org.org_id,
            behaviour=behaviour,
        )
    finally:
        emulators.stop()
        get_settings.cache_clear()


# -- the closing tally: each worker's, summed on the controller under xdist ---------------------
def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["fault_tally"] = vars(TALLY).copy()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    for name, value in getattr(node, "workeroutput", {}).get("fault_tally", {}).items():
        setattr(TALLY, name, getattr(TALLY, name) + value)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if TALLY.scenarios:
        terminalreporter.write_line(TALLY.line())
