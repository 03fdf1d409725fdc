"""batchroute-admin on moto: granting credits (ledger entry, new balance), balances, refusals."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from batchroute.money import Money
from batchroute_tools.admin import main
from batchroute_tools.local.provision import LocalStack
from functions.api.auth import identity_store
from tests.integration.principals import ledger_store, new_org


@pytest.fixture
def org_id(local_aws: LocalStack) -> str:
    identity_store.cache_clear()
    return new_org(credit_usd="25").org_id


def deployed(local_aws: LocalStack) -> list[str]:
    """Target options as for a deployed stack (moto intercepts the default endpoint)."""
    return ["--table-prefix", local_aws.prefix, "--region", local_aws.region]


def test_grant_adds_credits_with_a_ledger_entry(
    local_aws: LocalStack, org_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an org with 25 USD / When an operator grants 10.5 USD
    code = main(
        ["credits", "grant", "--org", org_id, "--usd", "10.5", "--memo", "support #42", *deployed(local_aws)]
    )
    # Then the new balance is printed and the ledger explains it
    assert code == 0
    assert capsys.readouterr().out.strip() == f"granted 10.50 usd to {org_id}; balance now 35.50 usd"
    ledger = ledger_store()
    assert ledger.balance(org_id) == Money.usd("35.5")
    grant = ledger.entries(org_id)[0]
    assert (grant["entry_type"], grant["amount_micros"], grant["memo"]) == (
        "grant",
        10_500_000,
        "support #42",
    )
    assert str(grant["actor"]).startswith("operator")


def test_balance_and_json_output(
    local_aws: LocalStack, org_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["credits", "balance", "--org", org_id, "--json", *deployed(local_aws)]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "org_id": org_id,
        "balance": {"currency": "usd", "amount": "25.00"},
        "reserved": {"currency": "usd", "amount": "0.00"},
    }
    assert main(["credits", "balance", "--org", org_id, *deployed(local_aws)]) == 0
    assert capsys.readouterr().out.strip() == f"{org_id}: balance 25.00 usd (reserved 0.00 usd)"


def test_the_local_stack_file_is_the_default_target(
    local_aws: LocalStack, org_id: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the runner's stack file (endpoint null: moto in-process stands in for the server)
    stack_file = tmp_path / "stack.json"
    stack_file.write_text(
        json.dumps({"region": local_aws.region, "endpoint_url": None, "tables": local_aws.tables}),
        encoding="utf-8",
    )
    # When granting with no target options / Then the local ledger is credited
    code = main(
        ["credits", "grant", "--org", org_id, "--usd", "1", "--stack-file", str(stack_file), "--json"]
    )
    assert code == 0
    assert json.loads(capsys.readouterr().out)["balance"] == {"currency": "usd", "amount": "26.00"}


@pytest.mark.parametrize(
    ("usd", "message"),
    [
        ("0", "greater than 0"),
        ("-5", "greater than 0"),
        ("1.0000001", "6 decimal places"),
        ("abc", "not a number"),
        ("NaN", "greater than 0"),
        ("1000001", "at most"),
    ],
)
def test_bad_amounts_exit_2_and_change_nothing(
    local_aws: LocalStack, org_id: str, usd: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["credits", "grant", "--org", org_id, "--usd", usd, *deployed(local_aws)]) == 2
    assert message in capsys.readouterr().err
    assert ledger_store().balance(org_id) == Money.usd("25")


def test_an_unknown_org_exits_2(local_aws: LocalStack, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["credits", "grant", "--org", "org_missing", "--usd", "5", *deployed(local_aws)]) == 2
    assert "org_missing has no wallet" in capsys.readouterr().err
    assert main(["credits", "balance", "--org", "org_missing", *deployed(local_aws)]) == 2


def test_no_target_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["credits", "balance", "--org", "org_x", "--stack-file", str(tmp_path / "none.json")]) == 2
    assert "no target" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{}", encoding="utf-8")
    assert main(["credits", "balance", "--org", "org_x", "--stack-file", str(broken)]) == 2
    # A stack file left by a runner that has ended (killed outright) says so, not "AWS error"
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps({"pid": gone.pid, "tables": {"ledger": "t"}}), encoding="utf-8")
    assert main(["credits", "balance", "--org", "org_x", "--stack-file", str(stale)]) == 2
    assert f"no local stack is running: {stale} names process {gone.pid}" in capsys.readouterr().err


def test_a_missing_table_is_an_aws_error_exit_1(
    local_aws: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["credits", "balance", "--org", "org_x", "--ledger-table", "nope", "--region", local_aws.region]
    )
    assert code == 1
    assert "AWS error" in capsys.readouterr().err


def test_usage_errors_exit_2() -> None:
    with pytest.raises(SystemExit) as caught:
        main(["credits", "grant", "--org", "org_x"])
    assert caught.value.code == 2
