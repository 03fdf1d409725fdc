"""The recurring schedules' triggers (infra/schedules.py, docs/schedules.md): the scheduler
group, the role EventBridge Scheduler assumes to invoke the sweeper (and nothing else), and
the API's permission to manage that group's schedules and pass that role to the scheduler,
and the sweeper's to delete them."""

from __future__ import annotations

from typing import Any

from tests.infra.cfn import Cfn, as_list, render


def _function(cfn: Cfn, prefix: str, key: str) -> tuple[str, dict[str, Any]]:
    logical_id, function = cfn.named("AWS::Lambda::Function", "FunctionName", f"{prefix}-{key}")
    return logical_id, function["Properties"]


def test_the_scheduler_group_and_its_invoke_role(cfn: Cfn, prefix: str) -> None:
    groups = cfn.properties("AWS::Scheduler::ScheduleGroup")
    assert [render(g["Name"]) for g in groups.values()] == [f"{prefix}-schedules"]
    roles = {
        lid: props
        for lid, props in cfn.properties("AWS::IAM::Role").items()
        if any(
            (s.get("Principal") or {}).get("Service") == "scheduler.amazonaws.com"
            for s in props["AssumeRolePolicyDocument"]["Statement"]
        )
    }
    assert len(roles) == 1
    ((role_id, role),) = roles.items()
    trust = role["AssumeRolePolicyDocument"]["Statement"][0]
    assert "aws:SourceAccount" in trust["Condition"]["StringEquals"]
    sweeper_id, _ = _function(cfn, prefix, "sweeper")
    statements = cfn.policy_statements(role_id)
    assert [as_list(s["Action"]) for s in statements] == [["lambda:InvokeFunction"]]
    assert cfn.referenced(statements[0]["Resource"]) == sweeper_id


def test_the_api_manages_only_its_groups_schedules(cfn: Cfn, prefix: str) -> None:
    _, api = _function(cfn, prefix, "api")
    api_role = cfn.referenced(api["Role"])
    statements = cfn.policy_statements(api_role)
    manage = [s for s in statements if any(a.startswith("scheduler:") for a in as_list(s["Action"]))]
    assert len(manage) == 1
    assert sorted(as_list(manage[0]["Action"])) == [
        "scheduler:CreateSchedule",
        "scheduler:DeleteSchedule",
        "scheduler:GetSchedule",
        "scheduler:UpdateSchedule",
    ]
    assert render(manage[0]["Resource"]).endswith(f":schedule/{prefix}-schedules/*")
    passes = [
        s
        for s in statements
        if "iam:PassRole" in as_list(s["Action"])
        and s["Condition"]["StringEquals"]["iam:PassedToService"] == "scheduler.amazonaws.com"
    ]
    assert len(passes) == 1
    role_id = next(
        lid
        for lid, props in cfn.properties("AWS::IAM::Role").items()
        if "scheduler" in str(props["AssumeRolePolicyDocument"])
    )
    assert cfn.referenced(passes[0]["Resource"]) == role_id


def test_the_sweeper_may_only_delete_the_groups_schedules(cfn: Cfn, prefix: str) -> None:
    # a trigger firing for a deleted schedule removes itself (docs/schedules.md, Triggers)
    _, sweeper = _function(cfn, prefix, "sweeper")
    statements = cfn.policy_statements(cfn.referenced(sweeper["Role"]))
    manage = [s for s in statements if any(a.startswith("scheduler:") for a in as_list(s["Action"]))]
    assert [as_list(s["Action"]) for s in manage] == [["scheduler:DeleteSchedule"]]
    assert render(manage[0]["Resource"]).endswith(f":schedule/{prefix}-schedules/*")
    # and passes no role to the scheduler: it makes no trigger
    assert not any(
        "iam:PassRole" in as_list(s["Action"]) and "scheduler.amazonaws.com" in str(s.get("Condition"))
        for s in statements
    )


def test_api_and_sweeper_know_the_group_role_and_target(cfn: Cfn, prefix: str) -> None:
    for key in ("api", "sweeper"):
        _, props = _function(cfn, prefix, key)
        variables = props["Environment"]["Variables"]
        assert variables["SCHEDULE_GROUP_NAME"] == f"{prefix}-schedules"
        assert render(variables["SCHEDULE_TARGET_ARN"]).endswith(f":function:{prefix}-sweeper")
    _, router = _function(cfn, prefix, "router")
    assert "SCHEDULE_GROUP_NAME" not in router["Environment"]["Variables"]
