"""batchroute-admin payments reconcile on moto and the payment emulator (issue 27 point 2): the
ledger's purchase and top-up credits against the processor's successful payments, every
difference printed, exit 0 when there is none and 3 when there are."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from batchroute.clock import FixedClock, isoformat
from batchroute.domain.billing.reconciliation import LedgerCredit
from batchroute.money import Money
from batchroute_tools.admin import DIFFERENCES_FOUND, main
from batchroute_tools.local.provision import LocalStack
from tests.integration.payments_harness import (
    SECRET_KEY,
    WEBHOOK_SECRET,
    Bench,
    intent_of,
    paid_not_credited,
    payments_bench,
)


@pytest.fixture
def bench(local_aws: LocalStack) -> Iterator[Bench]:
    # The emulator stamps payments with the real time: the service's clock is now as well.
    with payments_bench(FixedClock(datetime.now(UTC))) as running:
        yield running


def yesterday() -> str:
    return (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%d")


@pytest.fixture
def target(bench: Bench, local_aws: LocalStack, tmp_path: Path) -> list[str]:
    """The runner's stack file: moto in-process, the emulator as the stack's emulators."""
    stack_file = tmp_path / "stack.json"
    stack_file.write_text(
        json.dumps(
            {
                "region": local_aws.region,
                "endpoint_url": None,
                "tables": local_aws.tables,
                "emulators_url": bench.server.base_url,
            }
        ),
        encoding="utf-8",
    )
    return ["--stack-file", str(stack_file)]


def reconcile(bench: Bench, target: list[str], *extra: str) -> int:
    return main(["payments", "reconcile", "--since", yesterday(), "--settling-minutes", "0", *target, *extra])


def test_a_purchase_credited_as_paid_is_no_difference(
    bench: Bench, target: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a purchase paid and credited through the processor's webhook
    bench.buy(25)
    assert bench.balance() == Money.usd("25")

    # When the operator reconciles the local stack / Then nothing differs: exit 0
    assert reconcile(bench, target) == 0
    out = capsys.readouterr().out
    assert "1 credits, 1 payments, 1 matched, 0 differences" in out
    assert "no differences" in out


def test_every_difference_is_printed_and_the_exit_code_says_so(
    bench: Bench, target: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given one purchase credited as paid (no difference) ...
    bench.buy(25)
    # ... a payment at the processor never credited ...
    uncredited = intent_of(bench, paid_not_credited(bench, 30))
    # ... a credit with no payment at the processor (a forged session) ...
    ledger, org, at = bench.wiring.ledger, bench.org.org_id, isoformat(datetime.now(UTC))
    ledger.credit(
        LedgerCredit(org_id=org, processor_ref="cs_forged", kind="purchase", amount=Money.usd("1000"), at=at),
        memo="x",
    )
    # ... and a paid session credited for more than was paid
    inflated = paid_not_credited(bench, 40)
    ledger.credit(
        LedgerCredit(org_id=org, processor_ref=inflated, kind="purchase", amount=Money.usd("4000"), at=at),
        memo="x",
    )

    # When the operator reconciles (the JSON form)
    assert reconcile(bench, target, "--json") == DIFFERENCES_FOUND

    # Then each difference is listed, and the matched purchase is not
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    found = {(d["kind"], d["processor_ref"]) for d in report["differences"]}
    assert found == {
        ("not_credited", uncredited),
        ("no_payment", "cs_forged"),
        ("amount_differs", intent_of(bench, inflated)),
    }
    assert (report["credits"], report["payments"], report["matched"]) == (3, 3, 1)
    amount = next(d for d in report["differences"] if d["kind"] == "amount_differs")
    assert (amount["credited"], amount["paid"], amount["org_id"]) == ("4000.00 usd", "40.00 usd", org)
    # And the human table prints one row each under a heading
    assert reconcile(bench, target) == DIFFERENCES_FOUND
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("3 credits, 3 payments, 1 matched, 3 differences")
    assert out[1].split()[:3] == ["KIND", "ORG", "PROCESSOR"]
    assert sorted(line.split()[0] for line in out[2:5]) == ["amount_differs", "no_payment", "not_credited"]
    assert any("cs_forged" in line and "1000.00 usd" in line for line in out)


def test_a_payment_still_settling_is_awaiting_not_a_difference(
    bench: Bench, target: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    intent = intent_of(bench, paid_not_credited(bench))

    code = main(["payments", "reconcile", "--since", yesterday(), "--json", *target])  # 30 minutes

    assert code == 0
    assert json.loads(capsys.readouterr().out)["awaiting_credit"] == [intent]


def test_a_deployed_stack_reads_the_keys_from_its_payments_secret(
    bench: Bench, local_aws: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the deployed stack's payments secret (moto) and a payment never credited
    secrets = boto3.client("secretsmanager", region_name=local_aws.region)
    secrets.create_secret(
        Name=f"{local_aws.prefix}-payments-stripe",
        SecretString=json.dumps({"secret_key": SECRET_KEY, "webhook_secret": WEBHOOK_SECRET}),
    )
    intent = intent_of(bench, paid_not_credited(bench))
    target = ["--table-prefix", local_aws.prefix, "--region", local_aws.region]

    # When reconciling it (the processor's API pointed at the emulator instead of Stripe)
    code = reconcile(bench, target, "--json", "--payments-api-url", bench.server.base_url + "/stripe")

    # Then
    assert code == DIFFERENCES_FOUND
    assert [d["processor_ref"] for d in json.loads(capsys.readouterr().out)["differences"]] == [intent]


def test_refusals_exit_2_and_a_processor_without_keys_exits_1(
    local_aws: LocalStack, target: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["payments", "reconcile", "--since", "29-11-2026", *target]) == 2
    assert "not a date" in capsys.readouterr().err
    assert main(["payments", "reconcile", "--since", "2999-01-01", *target]) == 2
    deployed = ["--ledger-table", local_aws.tables["ledger"], "--region", local_aws.region]
    assert main(["payments", "reconcile", *deployed]) == 2
    assert "--table-prefix" in capsys.readouterr().err
    # the deployed stack's secret does not exist (yet): the processor cannot be asked
    assert (
        main(["payments", "reconcile", "--table-prefix", local_aws.prefix, "--region", local_aws.region]) == 1
    )
    assert "payment processor" in capsys.readouterr().err


def test_without_since_it_reconciles_the_last_30_days_from_midnight_utc(
    bench: Bench, target: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    bench.buy(25)

    assert main(["payments", "reconcile", "--json", *target]) == 0

    report = json.loads(capsys.readouterr().out)
    day = (datetime.now(UTC) - timedelta(days=30)).strftime("%Y-%m-%d")
    assert report["since"] == f"{day}T00:00:00.000Z"
    assert (report["credits"], report["matched"]) == (1, 1)


def test_credits_from_before_the_index_are_indexed_once_and_then_reconciled(
    bench: Bench, target: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a purchase credited by a release before the index: its marker has no index keys
    session_id = bench.buy(25)
    ledger = bench.wiring.ledger
    key = {"pk": {"S": f"WALLET#{bench.org.org_id}"}, "sk": {"S": f"PAYMENT#{session_id}"}}
    ledger.dynamodb.update_item(
        TableName=ledger.table_name, Key=key, UpdateExpression="REMOVE gsi1pk, gsi1sk, currency"
    )
    assert reconcile(bench, target, "--json") == DIFFERENCES_FOUND  # paid, and the credit unseen
    capsys.readouterr()

    # When the operator indexes the old credits (twice: the second finds none)
    assert main(["payments", "index-credits", "--json", *target]) == 0
    assert json.loads(capsys.readouterr().out) == {"indexed": 1}
    assert main(["payments", "index-credits", *target]) == 0
    assert capsys.readouterr().out.strip() == "indexed 0 processor credits"

    # Then the reconciliation sees the credit again
    assert reconcile(bench, target) == 0
