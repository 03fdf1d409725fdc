"""cdk-nag AwsSolutions: no unacknowledged finding (error or warning), each acknowledgment
reasoned, and the checks really run when the app synthesizes.

cdk-nag 3 reports through CDK's policy validation (Validations), not through annotations:
the pack's own validate_scope() and the synth validation report are what to inspect.
"""

from __future__ import annotations

import json

import pytest
from aws_cdk import Validations
from aws_cdk import aws_sqs as sqs
from cdk_nag import AwsSolutionsChecks

from infra.stack import BatchRouteStack
from infra.synth import build_app
from tests.infra.conftest import Synthesized

ACKNOWLEDGED = Validations.ACKNOWLEDGED_RULES_METADATA_KEY


def test_no_unacknowledged_finding_errors_or_warnings(stack: BatchRouteStack) -> None:
    # Given: the AwsSolutions pack, verbose
    checks = AwsSolutionsChecks(verbose=True)

    # When
    report = checks.validate_scope(stack)

    # Then: nothing left, whatever the severity
    findings = [
        f"{v.severity} {v.rule_name} at {[r.construct_path for r in v.violating_resources]}"
        for v in report.violations
    ]
    assert findings == []
    assert report.success


def test_the_synth_validation_report_and_annotations_are_clean(synthesized: Synthesized) -> None:
    # Given / When: the session synth's validation report and stack messages
    report = json.loads((synthesized.outdir / "validation-report.json").read_text())
    messages = [
        (stack.stack_name, m.level.value, m.entry.data)
        for stack in synthesized.stacks.values()
        for m in synthesized.assembly.get_stack_by_name(stack.stack_name).messages
    ]

    # Then
    assert [v for plugin in report["pluginReports"] for v in plugin.get("violations", [])] == []
    assert [m for m in messages if m[1] in {"warning", "error"}] == []


SNAPSTART_WARNING = "Annotation::@aws-cdk/aws-lambda:snapStartRequirePublish"


def test_every_acknowledgment_names_an_awssolutions_finding_and_says_why(stack: BatchRouteStack) -> None:
    # Given / When: every acknowledgment recorded in the stack
    acknowledgments = {
        (construct.node.path, rule): reason
        for construct in stack.node.find_all()
        for entry in construct.node.metadata
        if entry.type == ACKNOWLEDGED
        for rule, reason in entry.data.items()
    }

    # Then
    assert acknowledgments
    for (path, rule), reason in acknowledgments.items():
        # cdk-nag's findings, and the one CDK warning SnapStart raises (the stack does
        # publish the version it applies to: infra/compute.py)
        assert rule.removeprefix("Annotation::").startswith("AwsSolutions-") or rule == SNAPSTART_WARNING, (
            path,
            rule,
        )
        assert len(reason) > 40, (path, rule, reason)


def test_the_checks_run_when_the_app_synthesizes(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Given: the app as app.py builds it, plus a queue with neither DLQ nor TLS enforcement
    app, stacks = build_app(
        outdir=str(tmp_path_factory.mktemp("nag-probe")), environments=("test",), stage_assets=False
    )
    sqs.Queue(stacks["test"], "ProbeQueue")

    # When / Then: synthesis fails and names the findings
    with pytest.raises(RuntimeError, match=r"AwsSolutions-SQS3(.|\n)*AwsSolutions-SQS4"):
        app.synth()
