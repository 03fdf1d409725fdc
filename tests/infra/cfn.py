"""Reading a synthesized CloudFormation template in tests: resources by type, references,
and token-built strings (Fn::Join) rendered with <LogicalId> placeholders."""

from __future__ import annotations

import json
from typing import Any

Resource = dict[str, Any]


class Cfn:
    def __init__(self, template: dict[str, Any]) -> None:
        self.template = template
        self.resources: dict[str, Resource] = template["Resources"]

    def of_type(self, resource_type: str) -> dict[str, Resource]:
        """logical id -> the whole resource (Type, Properties, DeletionPolicy, ...)."""
        return {lid: res for lid, res in self.resources.items() if res["Type"] == resource_type}

    def properties(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {lid: res.get("Properties", {}) for lid, res in self.of_type(resource_type).items()}

    def named(self, resource_type: str, name_property: str, name: str) -> tuple[str, Resource]:
        """The one resource of a type whose name property (rendered) equals name."""
        found = [
            (lid, res)
            for lid, res in self.of_type(resource_type).items()
            if render(res.get("Properties", {}).get(name_property)) == name
        ]
        assert len(found) == 1, f"expected one {resource_type} named {name!r}, found {len(found)}"
        return found[0]

    def referenced(self, reference: Any) -> str:
        """The logical id a Ref / Fn::GetAtt points at."""
        if isinstance(reference, dict) and "Ref" in reference:
            return str(reference["Ref"])
        if isinstance(reference, dict) and "Fn::GetAtt" in reference:
            return str(reference["Fn::GetAtt"][0])
        raise AssertionError(f"not a reference: {reference!r}")

    def policy_statements(self, role_logical_id: str) -> list[dict[str, Any]]:
        """Every statement of the AWS::IAM::Policy resources attached to a role."""
        statements: list[dict[str, Any]] = []
        for props in self.properties("AWS::IAM::Policy").values():
            if any(self.referenced(role) == role_logical_id for role in props.get("Roles", [])):
                statements += props["PolicyDocument"]["Statement"]
        return statements


def render(value: Any) -> Any:
    """Literal strings stay; Fn::Join becomes a string with <Ref> / <LogicalId.Attr> tokens."""
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(str(render(part)) for part in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return "<{}.{}>".format(*value["Fn::GetAtt"])
    return value


def render_json(value: Any) -> Any:
    """A JSON document built with Fn::Join (Stack.to_json_string), parsed."""
    return json.loads(render(value))


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
