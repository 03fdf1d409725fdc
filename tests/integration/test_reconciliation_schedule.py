"""The deployed daily payments reconciliation (issue 27 point 2): the sweeper function, invoked
with the reconciliation rule's input, reconciles the last two days, logs every difference and
counts them in `PaymentReconciliationDifferences` (the metric infra/monitoring.py alarms on);
a run the processor cannot answer counts `PaymentReconciliationFailed`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from batchroute import resources
from batchroute.clock import FixedClock, isoformat
from batchroute.domain.billing.reconciliation import LedgerCredit
from batchroute.money import Money
from batchroute_tools.local.lambda_runtime import context_for, load_handler
from batchroute_tools.local.provision import LocalStack
from tests.integration.payments_harness import Bench, intent_of, paid_not_credited, payments_bench


@pytest.fixture
def bench(local_aws: LocalStack) -> Iterator[Bench]:
    with payments_bench(FixedClock(datetime.now(UTC))) as running:
        yield running


def run_scheduled(local_aws: LocalStack, event: dict[str, Any]) -> Any:
    handler = load_handler("sweeper")
    context = context_for(
        "sweeper", prefix=local_aws.prefix, region=local_aws.region, account=local_aws.account
    )
    return handler(event, context)


def printed(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def metric(records: list[dict[str, Any]], name: str) -> list[Any]:
    """The values of `name` in the embedded-metric records the handler flushed."""
    return [r[name] for r in records if "_aws" in r and name in r]


def test_the_scheduled_run_logs_each_difference_and_counts_them_in_the_alarmed_metric(
    bench: Bench, local_aws: LocalStack, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # Given a purchase credited as paid, a payment an hour old never credited, and a credit
    # no payment stands on
    bench.buy(25)
    bench.emulator.clock = lambda: time.time() - 3600
    uncredited = intent_of(bench, paid_not_credited(bench, 30))
    at = isoformat(datetime.now(UTC))
    bench.wiring.ledger.credit(
        LedgerCredit(
            org_id=bench.org.org_id,
            processor_ref="cs_forged",
            kind="purchase",
            amount=Money.usd("1000"),
            at=at,
        ),
        memo="x",
    )
    capsys.readouterr()

    # When the daily rule invokes the sweeper function with its input
    outcome = run_scheduled(local_aws, dict(resources.RECONCILIATION_EVENT))

    # Then both differences are reported, logged as errors, and counted in the metric
    assert outcome["reconciled"] is True
    assert {(d["kind"], d["processor_ref"]) for d in outcome["differences"]} == {
        ("not_credited", uncredited),
        ("no_payment", "cs_forged"),
    }
    logged = [r for r in caplog.records if r.getMessage() == "payment reconciliation difference"]
    assert sorted(str(getattr(r, "processor_ref", "")) for r in logged) == sorted(["cs_forged", uncredited])
    assert all(r.levelname == "ERROR" for r in logged)
    assert metric(printed(capsys.readouterr().out), "PaymentReconciliationDifferences") == [[2.0]]


def test_a_clean_run_counts_zero_and_the_minute_sweep_does_not_reconcile(
    bench: Bench, local_aws: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    bench.buy(25)
    capsys.readouterr()

    outcome = run_scheduled(local_aws, dict(resources.RECONCILIATION_EVENT))

    assert outcome["reconciled"] is True and outcome["differences"] == []
    assert metric(printed(capsys.readouterr().out), "PaymentReconciliationDifferences") == [[0.0]]
    # the sweeper's own schedule (no input) sweeps, and reconciles nothing
    swept = run_scheduled(local_aws, {"detail-type": "Scheduled Event", "detail": {}})
    assert "reconciled" not in swept
    assert metric(printed(capsys.readouterr().out), "PaymentReconciliationDifferences") == []


def test_a_run_the_processor_cannot_answer_counts_as_failed(
    bench: Bench, local_aws: LocalStack, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # Given the processor down
    bench.server.stop()
    capsys.readouterr()

    # When the daily run comes
    outcome = run_scheduled(local_aws, dict(resources.RECONCILIATION_EVENT))

    # Then it is logged and counted as failed, never as "no differences"
    assert outcome["reconciled"] is False
    records = printed(capsys.readouterr().out)
    assert metric(records, "PaymentReconciliationFailed") == [[1.0]]
    assert metric(records, "PaymentReconciliationDifferences") == []
    assert any(r.getMessage() == "payment reconciliation failed" for r in caplog.records)
