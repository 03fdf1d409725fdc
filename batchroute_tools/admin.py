"""batchroute-admin: the operator CLI (docs/operations.md).

    batchroute-admin credits grant --org ORG_ID --usd AMOUNT [--memo TEXT]
    batchroute-admin credits balance --org ORG_ID
    batchroute-admin providers check [--provider SLUG ...] [--environment production|test]
    batchroute-admin payments reconcile [--since YYYY-MM-DD] [--json]
    batchroute-admin payments index-credits

Targets the running local stack by default (the runner's `.local/stack.json`: moto endpoint,
table names, fake credentials), or a deployed stack with `--table-prefix batchroute-production`
(or `--ledger-table NAME`) and `--region`, using the default AWS credential chain.

A grant is followed by the billing watch, as every money movement is (docs/billing-alerts.md).

`payments reconcile` compares the ledger's purchase and auto top-up credits with the payment
processor's successful payments (the local stack's payment emulator, or Stripe with the keys of
the deployed stack's payments secret) and prints every difference (docs/payments.md).

Exit codes: 0 done, 1 an AWS or payment processor error, 2 a usage or validation error (bad
amount, no such wallet, no target), 3 the reconciliation found differences.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Protocol

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from batchroute import resources
from batchroute.adapters.dynamo.billing_events import BillingEvents
from batchroute.adapters.dynamo.codec import is_condition_failure
from batchroute.adapters.dynamo.controls import ControlsStore
from batchroute.adapters.dynamo.identity import IdentityStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.dynamo.webhook_deliveries import ORG_OWNER, WebhookDeliveries
from batchroute.adapters.email import SesMailer
from batchroute.adapters.stripe_payments import SecretsManagerStripeKeys, StripeKeys, StripePayments
from batchroute.catalog import builtin_catalog
from batchroute.catalog.environments import Placeholders, load_deployment
from batchroute.clock import SystemClock, isoformat
from batchroute.config import Settings
from batchroute.domain.billing.reconciliation import ReconciliationReport
from batchroute.domain.catalog.catalog import Catalog
from batchroute.errors import ServiceError, TransientError
from batchroute.money import Money, format_amount
from batchroute.providers.credentials import ProviderKeys
from batchroute.providers.registry import ProviderRegistry
from batchroute.services.billing.alerts import EmailAlerts, WebhookAlerts, owner_emails
from batchroute.services.billing.reconciliation import SETTLING_TIME, PaymentsReconciliation
from batchroute.services.billing.watch import BillingWatch
from batchroute.services.delivery.webhooks import OrgEventWebhooks
from batchroute_tools.provider_check import ProviderChecker

DEFAULT_STACK_FILE = Path(".local/stack.json")
# A typo guard: one grant above this is almost certainly a slip of the keyboard.
MAX_GRANT_USD = Decimal(1_000_000)
MAX_DECIMALS = 6
RECONCILE_DEFAULT_DAYS = 30
DIFFERENCES_FOUND = 3  # the exit code of a reconciliation that found differences
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
    # Known with a table prefix or the local stack file (not with --ledger-table alone): then
    # a grant is followed by the billing watch (docs/billing-alerts.md).
    controls_table: str | None = None
    identity_table: str | None = None
    prefix: str | None = None  # a deployed stack's (names its payments secret)
    emulators_url: str | None = None  # the local stack's vendor emulators (its payment emulator)

    def dynamodb(self) -> Any:
        return self._client("dynamodb")

    def payment_processor(self, api_url: str | None) -> StripePayments:
        """The processor the target's service talks to: locally the stack's payment emulator
        with the local settings' key; deployed, Stripe (or `api_url`) with the keys of the
        stack's payments secret, read through the default AWS credential chain."""
        if self.local:
            settings = Settings.from_environ(os.environ)  # STRIPE_SECRET_KEY as the stack reads it
            keys = StripeKeys(
                secret_key=settings.stripe_secret_key.get_secret_value(),
                webhook_secret=settings.stripe_webhook_secret.get_secret_value(),
            )
            base = api_url or (self.emulators_url.rstrip("/") + "/stripe" if self.emulators_url else None)
            if base is None:
                raise UsageError("the stack file names no emulators_url: pass --payments-api-url")
            return StripePayments(lambda: keys, api_base=base)
        if self.prefix is None:
            raise UsageError("--table-prefix is needed to find the stack's payments secret")
        secret = SecretsManagerStripeKeys(
            resources.payment_secret_name(self.prefix),
            secretsmanager=self._client("secretsmanager"),
            max_age=0,
        )
        return StripePayments(secret, api_base=api_url)

    def _client(self, service: str) -> Any:
        make_client: Any = boto3.client
        extra = _LOCAL_CREDENTIALS if self.local else {}
        return make_client(service, region_name=self.region, endpoint_url=self.endpoint_url, **extra)

    def billing_watch(self, ledger: LedgerStore) -> BillingWatch | None:
        """The watch the service runs after every money movement, on this target's tables:
        alerts (email through SES, or the local outbox; the org's delivery webhook, attempted
        by the stack's sweeper) and their low-balance re-arm. None without the tables."""
        if self.controls_table is None or self.identity_table is None:
            return None
        dynamodb = self.dynamodb()
        identity = IdentityStore(self.identity_table, dynamodb=dynamodb)
        settings = Settings()  # EMAIL_SENDER / LOCAL_OUTBOX_DIR from the operator's environment
        mailer = SesMailer(
            sender=settings.email_sender,
            outbox_dir=Path(settings.local_outbox_dir) if self.local else None,
            ses=self._client("ses"),
        )
        deliveries = WebhookDeliveries(self.controls_table, dynamodb=dynamodb, owner=ORG_OWNER)
        return BillingWatch(
            controls=ControlsStore(self.controls_table, dynamodb=dynamodb),
            ledger=ledger,
            records=BillingEvents(self.controls_table, dynamodb=dynamodb),
            channels=(
                EmailAlerts(mailer, owner_emails(identity)),
                WebhookAlerts(OrgEventWebhooks(deliveries, identity)),
            ),
        )

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

    providers = areas.add_parser("providers", help="the AI providers this stack calls")
    provider_actions = providers.add_subparsers(dest="action", required=True)
    check = provider_actions.add_parser(
        "check", parents=[target], help="one tiny real call per enabled provider (lists its models)"
    )
    check.add_argument("--provider", action="append", help="check only this provider (repeatable)")
    check.add_argument(
        "--environment",
        choices=["production", "test"],
        help="a deployed environment (its data file, its secrets); default: the local stack",
    )

    payments = areas.add_parser("payments", help="money paid through the payment processor")
    payment_actions = payments.add_subparsers(dest="action", required=True)
    reconcile = payment_actions.add_parser(
        "reconcile",
        parents=[target],
        help="compare the ledger's purchase and top-up credits with the processor's successful payments",
    )
    reconcile.add_argument(
        "--since",
        help=f"first day (UTC) to reconcile, YYYY-MM-DD (default: {RECONCILE_DEFAULT_DAYS} days ago)",
    )
    reconcile.add_argument(
        "--settling-minutes",
        type=int,
        default=int(SETTLING_TIME.total_seconds() // 60),
        help="a payment younger than this is awaiting its credit, not a difference (default: %(default)s)",
    )
    reconcile.add_argument(
        "--payments-api-url",
        help="the processor's API (default: the local payment emulator; Stripe for a deployed stack)",
    )
    payment_actions.add_parser(
        "index-credits",
        parents=[target],
        help="once, after upgrading: index processor credits written before the reconciliation existed",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.area == "providers":
        return _providers_check(args)
    try:
        if args.area == "payments" and args.action == "index-credits":
            target = resolve_target(args)
            indexed = LedgerStore(target.ledger_table, dynamodb=target.dynamodb()).index_processor_credits()
            print(json.dumps({"indexed": indexed}) if args.json else f"indexed {indexed} processor credits")
            return 0
        if args.area == "payments":
            report = payments_reconcile(args)
            print(json.dumps(report.to_dict()) if args.json else reconciliation_text(report))
            return 0 if report.clean else DIFFERENCES_FOUND
        target = resolve_target(args)
        store = LedgerStore(target.ledger_table, dynamodb=target.dynamodb())
        if args.action == "grant":
            result = grant(
                store,
                org_id=args.org,
                usd=args.usd,
                memo=args.memo,
                actor=_actor(args.actor),
                watch=target.billing_watch(store),
            )
        else:
            result = balance(store, org_id=args.org)
    except UsageError as exc:
        print(f"batchroute-admin: {exc}", file=sys.stderr)
        return 2
    except (ClientError, BotoCoreError) as exc:
        print(f"batchroute-admin: AWS error: {exc}", file=sys.stderr)
        return 1
    except (ServiceError, TransientError) as exc:  # the processor unreachable, or its keys missing
        print(f"batchroute-admin: payment processor: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result) if args.json else _text(result))
    return 0


def _providers_check(args: argparse.Namespace) -> int:
    try:
        registry, catalog, enabled = provider_target(args)
    except UsageError as exc:
        print(f"batchroute-admin: {exc}", file=sys.stderr)
        return 2
    wanted = args.provider or enabled
    unknown = sorted(set(wanted) - set(enabled))
    if unknown:
        print(f"batchroute-admin: not enabled here: {', '.join(unknown)}", file=sys.stderr)
        return 2
    results = ProviderChecker(registry, catalog).run(wanted)
    if args.json:
        print(json.dumps({"providers": [r.to_dict() for r in results]}))
    else:
        print("\n".join(r.line() for r in results))
    return 0 if all(r.ok for r in results) else 1


def payments_reconcile(args: argparse.Namespace) -> ReconciliationReport:
    """The target's ledger credits since `--since` against its processor's payments."""
    clock = SystemClock()
    since = parse_since(args.since, now=clock.now())
    if args.settling_minutes < 0:
        raise UsageError("--settling-minutes must be 0 or more")
    target = resolve_target(args)
    reconciliation = PaymentsReconciliation(
        LedgerStore(target.ledger_table, dynamodb=target.dynamodb()),
        target.payment_processor(args.payments_api_url),
        clock,
        settling_time=timedelta(minutes=args.settling_minutes),
    )
    return reconciliation.run(since)


def parse_since(text: str | None, *, now: datetime) -> datetime:
    """Midnight UTC of `text` (YYYY-MM-DD), or of the day RECONCILE_DEFAULT_DAYS before `now`."""
    if text is None:
        day = (now - timedelta(days=RECONCILE_DEFAULT_DAYS)).date()
        return datetime(day.year, day.month, day.day, tzinfo=UTC)
    try:
        since = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError as exc:
        raise UsageError(f"--since {text!r} is not a date (YYYY-MM-DD)") from exc
    if since > now:
        raise UsageError("--since is in the future")
    return since


def reconciliation_text(report: ReconciliationReport) -> str:
    """A heading, one line per difference in columns, and the payments still settling."""
    lines = [
        f"payments since {report.since}: {report.credits} credits, {report.payments} payments, "
        f"{report.matched} matched, {len(report.differences)} differences"
    ]
    rows = [("KIND", "ORG", "PROCESSOR REF", "CREDITED", "PAID", "DETAIL")] + [
        (d.kind, d.org_id or "-", d.processor_ref, d.credited_amount or "-", d.paid or "-", d.detail)
        for d in report.differences
    ]
    if report.differences:
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        lines += [
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1]
            for row in rows
        ]
    else:
        lines.append("no differences")
    if report.awaiting_credit:
        lines.append(
            f"awaiting their credit (paid after {report.settled_before}): {', '.join(report.awaiting_credit)}"
        )
    return "\n".join(lines)


def provider_target(args: argparse.Namespace) -> tuple[ProviderRegistry, Catalog, list[str]]:
    """The registry of the local stack (its emulators and moto secrets) or of a deployed
    environment (the default AWS credential chain), and its enabled providers."""
    if args.environment:
        environment, prefix = (
            args.environment,
            args.table_prefix or resources.resource_prefix(args.environment),
        )
        region, endpoint_url, emulators, extra = args.region, args.endpoint_url, "", {}
    else:
        stack = _stack_file(args)
        environment, prefix = "local", str(stack["prefix"])
        region, endpoint_url = stack.get("region"), stack.get("endpoint_url")
        emulators, extra = str(stack.get("emulators_url") or ""), _LOCAL_CREDENTIALS
    make_client: Any = boto3.client
    secrets = make_client("secretsmanager", region_name=region, endpoint_url=endpoint_url, **extra)
    values = {"emulators": emulators} if emulators else {}
    if region:
        values["region"] = region
    deployment = load_deployment(builtin_catalog(), environment, Placeholders(values, strict=False))
    settings = Settings(environment=environment, resource_prefix=prefix)
    keys = ProviderKeys(prefix, secretsmanager=secrets, max_age=0)
    registry = ProviderRegistry(
        settings, deployment.catalog.providers, endpoints=deployment.endpoints, keys=keys
    )
    return registry, deployment.catalog, list(deployment.endpoints)


def _stack_file(args: argparse.Namespace) -> dict[str, Any]:
    path = args.stack_file or DEFAULT_STACK_FILE
    try:
        stack: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise UsageError(
            f"no target: {path} does not exist (start the local stack with `make run`, "
            "or pass --environment for a deployed stack)"
        ) from exc
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path} is not a stack file written by the local runner") from exc
    return stack


def resolve_target(args: argparse.Namespace) -> Target:
    if args.ledger_table or args.table_prefix:
        prefix = args.table_prefix
        table = args.ledger_table or resources.table("ledger").physical_name(prefix)
        return Target(
            ledger_table=table,
            region=args.region,
            endpoint_url=args.endpoint_url,
            local=False,
            controls_table=resources.table("controls").physical_name(prefix) if prefix else None,
            identity_table=resources.table("identity").physical_name(prefix) if prefix else None,
            prefix=prefix,
        )
    path = args.stack_file or DEFAULT_STACK_FILE
    try:
        stack = json.loads(path.read_text(encoding="utf-8"))
        table = stack["tables"]["ledger"]
        others = {key: stack["tables"].get(key) for key in ("controls", "identity")}
    except FileNotFoundError as exc:
        raise UsageError(
            f"no target: {path} does not exist (start the local stack with `make run`, "
            "or pass --table-prefix/--ledger-table and --region for a deployed stack)"
        ) from exc
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path} is not a stack file written by the local runner") from exc
    if isinstance(stack.get("pid"), int) and not _running(stack["pid"]):
        raise UsageError(
            f"no local stack is running: {path} names process {stack['pid']}, which has ended "
            "(start the local stack with `make run`)"
        )
    return Target(
        ledger_table=table,
        region=args.region or stack.get("region"),
        endpoint_url=args.endpoint_url or stack.get("endpoint_url"),
        local=True,
        controls_table=others["controls"],
        identity_table=others["identity"],
        emulators_url=stack.get("emulators_url") or None,
    )


def _running(pid: int) -> bool:
    """Whether process `pid` is alive (the runner that wrote the stack file; a runner killed
    outright leaves its file behind)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


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


class MoneyWatch(Protocol):
    def moved(self, org_id: str, *, at: datetime) -> None: ...


def grant(
    store: LedgerStore, *, org_id: str, usd: str, memo: str, actor: str, watch: MoneyWatch | None = None
) -> dict[str, Any]:
    """Credit the wallet; then, as after every money movement, the billing watch (re-arms a
    fired low-balance alert once the balance has recovered; never fails the grant)."""
    amount = parse_usd(usd)
    if not memo.strip() or len(memo) > 500:
        raise UsageError("--memo must be 1-500 characters")
    if store.wallet(org_id) is None:
        raise UsageError(f"org {org_id} has no wallet (is the org id right, and the target the right stack?)")
    now = SystemClock().now()
    try:
        new_balance = store.grant(org_id, amount, at=isoformat(now), memo=memo.strip(), actor=actor)
    except ClientError as exc:
        if is_condition_failure(exc):  # the wallet vanished between the check and the grant
            raise UsageError(f"org {org_id} has no wallet") from exc
        raise
    if watch is not None:
        watch.moved(org_id, at=now)
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
