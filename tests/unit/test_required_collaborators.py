"""A service's collaborator that guards the customer is required: no wiring can leave it out.

A collaborator with a `None` default is one a wiring may forget without a type error, and the
service then runs without it: a quote, a chat plan, a failover or a rescue routed around the
org's route policy; a work order's member created, held or settled without the work order
counting it; a workflow without its intake; a sweep that never deletes expired bytes or
sends a due alert. These fields must be declared without a default
and without `None`."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import batchroute.services

# The ports whose absence would break a promise to the customer (docs/routing-policy.md,
# docs/work-orders.md, docs/retention.md, docs/billing-alerts.md), each with why.
GUARDING: dict[str, str] = {
    "OrgPolicies": "the org's route policy: no lane it forbids",
    "WorkOrderJoins": "a batch joining a work order is counted by it",
    "OverageMembership": "a member's overage hold is counted by its work order",
    "WorkOrderMembers": "a member's settlement is counted by its work order",
    "InputIntake": "a batch from an input file is read and chunked",
    "Funds": "a hold checks the wallet and the spending limits",
    "Resolver": "a preset a request, an item or a golden set names is applied, never ignored",
    "PresetBenchmarks": "a preset's golden-set run records its benchmark",
    "LimitWarnings": "a quote that would pass a spending limit says so",
    "MoneyWatch": "billing alerts and auto top-up hear every money movement",
    "PendingTopups": "auto top-ups left pending are charged or recovered",
    "RetentionGC": "a customer's bytes go when their retention window passes",
    "DueBucketDeliveries": "results reach the customer's bucket",
    "DueWebhooks": "signed webhooks are retried until delivered or dead-lettered",
    "DueSchedules": "a recurring schedule fires when due",
    "DueHolds": "a golden-set run that died releases its hold",
    "RescueOverage": "a rescue the customer allowed overage for can hold it",
    "RescueEvents": "a rescue is told to the batch's webhook",
    "LoginLockout": "repeated failed sign-ins lock the address",
    "RegressionStarter": "a schedule's version with a golden set is benchmarked",
    "DeadlineRescue": "a lane that would miss the batch's deadline is rescued",
    "Capacity": "a lane's items come off its provider's capacity",
    "LaneAvailability": "a provider account that cannot serve is taken out of routing",
    "RetentionTerms": "a result file says when its bytes go",
    "FeedbackLookup": "an item row carries its feedback",
    "References": "usage and receipts show what routing saved",
}


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name) and target.id == "dataclass":
            return True
    return False


def _service_fields() -> Iterator[tuple[str, ast.AnnAssign]]:
    """Each field of each dataclass under services/, read from the source (nothing imported)."""
    root = Path(batchroute.services.__path__[0])
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and _is_dataclass(node):
                for statement in node.body:
                    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                        yield f"{path.relative_to(root)}:{node.name}.{statement.target.id}", statement


def test_every_collaborator_that_guards_the_customer_is_required() -> None:
    seen: set[str] = set()
    optional = []
    for where, field in _service_fields():
        names = set(re.findall(r"\w+", ast.unparse(field.annotation)))
        ports = names & set(GUARDING)
        if not ports:
            continue
        seen |= ports
        if field.value is not None or "None" in names:
            optional.append(f"{where}: {ast.unparse(field.annotation)} ({GUARDING[min(ports)]})")
    assert not optional, "optional collaborators a wiring could leave out:\n" + "\n".join(optional)
    # the check reads what it means to: each port is a collaborator somewhere
    assert seen == set(GUARDING)
