"""batchroute-admin: the operator CLI (docs/operations.md).

    batchroute-admin credits grant --org ORG_ID --usd AMOUNT [--memo TEXT]
    batchroute-admin credits balance --org ORG_ID

Targets the running local stack by default (the runner's `.local/stack.json`: moto endpoint,
table names, fake credentials), or a deployed stack with `--table-prefix batchroute-production`
(or `--ledger-table NAME`) and `--region`, using the default AWS credential chain.

Exit codes: 0 done, 1 an AWS error, 2 a usage or validation error (bad amount, no such wallet,
no target).
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from batchroute.adapters.dynamo.codec import is_condition_failure
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.clock import SystemClock, isoformat
from batchroute.money import Money, format_amount

DEFAULT_STACK_FILE = Path(".local/stack.json")
# A typo guard: one grant above this is almost certainly a slip of the keyboard.
MAX_GRANT_USD = Decimal(1_000_000)
MAX_DECIMALS = 6
# The local stack (moto) takes any credentials; real ones are never needed or read for it.
_LOCAL_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


class UsageError(Exception):
    """Bad input or no target: exit 2 with the message."""


@dataclass(frozen=True)
class Target:
    ledger_table: str
    region: str | None
    endpoint_url: str | None
    local: bool

    def dynamodb(self) -> Any:
        make_client: Any = boto3.client
        extra = _LOCAL_CREDENTIALS if self.local else {}
        return make_client("dynamodb", region_name=self.region, endpoint_url=self.endpoint_url, **extra)

    def describe(self) -> str:
        where = self.endpoint_url or f"AWS {self.region or '(default region)'}"
        return f"{self.ledger_table} at {where}"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    target = argparse.ArgumentParser(add_help=False)
    group = target.add_argument_group("target (default: the running local stack)")
    group.add_argument(
        "--stack-file", type=Path, help=f"local stack description (default: {DEFAULT_STACK_FILE})"
    )
    group.add_argument("--table-prefix", help="deployed stack prefix, e.g. batchroute-production")
    group.add_argument("--ledger-table", help="ledger table name (overrides --table-prefix)")
    group.add_argument("--region", help="AWS region of a deployed stack (default: your AWS config)")
    group.add_argument("--endpoint-url", help="AWS endpoint override (tests, another local server)")
    target.add_argument("--json", action="store_true", help="print one JSON object instead of text")

    parser = argparse.ArgumentParser(prog="batchroute-admin", description="Operator tasks for batchroute.")
    areas = parser.add_subparsers(dest="area", required=True)
    credits = areas.add_parser("credits", help="prepaid wallet credits")
    actions = credits.add_subparsers(dest="action", required=True)

    grant = actions.add_parser("grant", parents=[target], help="add credits to an org's wallet")
    grant.add_argument("--org", required=True, help="org id, e.g. org_01h...")
    grant.add_argument("--usd", required=True, help="amount in USD dollars, > 0, at most 6 decimals")
    grant.add_argument("--memo", default="admin grant", help="why (kept on the ledger entry)")
    grant.add_argument("--actor", help="who (default: operator:<your login name>)")

    balance = actions.add_parser("balance", parents=[target], help="show an org's spendable balance")
    balance.add_argument("--org", required=True, help="org id")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        target = resolve_target(args)
        store = LedgerStore(target.ledger_table, dynamodb=target.dynamodb())
        if args.action == "grant":
            result = grant(store, org_id=args.org, usd=args.usd, memo=args.memo, actor=_actor(args.actor))
        else:
            result = balance(store, org_id=args.org)
    except UsageError as exc:
        print(f"batchroute-admin: {exc}", file=sys.stderr)
        return 2
    except (ClientError, BotoCoreError) as exc:
        print(f"batchroute-admin: AWS error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result) if args.json else _text(result))
    return 0


def resolve_target(args: argparse.Namespace) -> Target:
    if args.ledger_table or args.table_prefix:
        table = args.ledger_table or f"{args.table_prefix}-ledger"
        return Target(ledger_table=table, region=args.region, endpoint_url=args.endpoint_url, local=False)
    path = args.stack_file or DEFAULT_STACK_FILE
    try:
        stack = json.loads(path.read_text(encoding="utf-8"))
        table = stack["tables"]["ledger"]
    except FileNotFoundError as exc:
        raise UsageError(
            f"no target: {path} does not exist (start the local stack with `make run`, "
            "or pass --table-prefix/--ledger-table and --region for a deployed stack)"
        ) from exc
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path} is not a stack file written by the local runner") from exc
    return Target(
        ledger_table=table,
        region=args.region or stack.get("region"),
        endpoint_url=args.endpoint_url or stack.get("endpoint_url"),
        local=True,
    )


def parse_usd(text: str) -> Money:
    try:
        amount = Decimal(text.strip())
    except InvalidOperation as exc:
        raise UsageError(f"--usd {text!r} is not a number") from exc
    if not amount.is_finite() or amount <= 0:
        raise UsageError("--usd must be greater than 0")
    exponent = amount.normalize().as_tuple().exponent
    if isinstance(exponent, int) and -exponent > MAX_DECIMALS:
        raise UsageError(f"--usd may have at most {MAX_DECIMALS} decimal places")
    if amount > MAX_GRANT_USD:
        raise UsageError(f"--usd may be at most {format_amount(MAX_GRANT_USD)} in one grant")
    return Money.usd(amount)


def grant(store: LedgerStore, *, org_id: str, usd: str, memo: str, actor: str) -> dict[str, Any]:
    amount = parse_usd(usd)
    if not memo.strip() or len(memo) > 500:
        raise UsageError("--memo must be 1-500 characters")
    if store.wallet(org_id) is None:
        raise UsageError(f"org {org_id} has no wallet (is the org id right, and the target the right stack?)")
    try:
        new_balance = store.grant(
            org_id, amount, at=isoformat(SystemClock().now()), memo=memo.strip(), actor=actor
        )
    except ClientError as exc:
        if is_condition_failure(exc):  # the wallet vanished between the check and the grant
            raise UsageError(f"org {org_id} has no wallet") from exc
        raise
    return {
        "org_id": org_id,
        "granted": amount.to_api(),
        "balance": new_balance.to_api(),
        "memo": memo.strip(),
        "actor": actor,
    }


def balance(store: LedgerStore, *, org_id: str) -> dict[str, Any]:
    """The spendable balance (what is not reserved for running batches) and the reserved part."""
    wallet = store.wallet(org_id)
    if wallet is None:
        raise UsageError(f"org {org_id} has no wallet")
    reserved = Money(int(wallet.get("reserved_micros", 0)))
    return {"org_id": org_id, "balance": store.balance(org_id).to_api(), "reserved": reserved.to_api()}


def _actor(given: str | None) -> str:
    if given:
        return given
    try:
        return f"operator:{getpass.getuser()}"
    except (KeyError, OSError):
        return "operator"


def _text(result: dict[str, Any]) -> str:
    balance_text = f"{result['balance']['amount']} {result['balance']['currency']}"
    if "granted" in result:
        granted = f"{result['granted']['amount']} {result['granted']['currency']}"
        return f"granted {granted} to {result['org_id']}; balance now {balance_text}"
    reserved = result["reserved"]
    return (
        f"{result['org_id']}: balance {balance_text} (reserved {reserved['amount']} {reserved['currency']})"
    )


if __name__ == "__main__":
    sys.exit(main())
