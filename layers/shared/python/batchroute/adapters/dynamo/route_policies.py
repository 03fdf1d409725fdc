"""The org's route policy and its history, in the `controls` table (docs/routing-policy.md).

Items: the policy `ORG#<org>`/`POLICY` (version-checked: a save is conditional on the
version it read); its history `ORG#<org>`/`POLICYLOG#<ulid>` (newest first with
ScanIndexForward=false; the prefix keeps them apart from the billing audit's `AUDIT#`).
A save and its history entry are one TransactWriteItems: no change without its entry.
Reading the policy is one GetItem. `unchanged_check` is the ConditionCheck a direct chat's
hold carries: "the policy is still the version this request was planned under".
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from batchroute.adapters.dynamo.codec import from_item, org_item, org_key, org_pk, to_value
from batchroute.adapters.dynamo.controls import ControlsStore
from batchroute.adapters.dynamo.reads import prefix_query
from batchroute.adapters.dynamo.writes import conditional_transaction, put_new, version_check
from batchroute.domain.routing.policy import PolicyChange, PolicyVersionMismatch, PriceCap, RoutePolicy
from batchroute.domain.stored import from_stored
from batchroute.ids import suffix_of

POLICY_SK = "POLICY"
HISTORY_PREFIX = "POLICYLOG#"


def unchanged_check(table_name: str, org_id: str, version: int) -> dict[str, Any]:
    """A TransactWriteItems ConditionCheck: the org's stored policy is still at `version`
    (0: none stored yet). Fails when the policy was saved since it was read."""
    return version_check(table_name, org_key(org_id, POLICY_SK), version)


class RoutePolicyStore(ControlsStore):
    """The policy's items; the versioned put is the controls table's own."""

    def policy(self, org_id: str, *, consistent: bool = True) -> RoutePolicy | None:
        response = self.dynamodb.get_item(
            TableName=self.table_name,
            Key={"pk": to_value(org_pk(org_id)), "sk": to_value(POLICY_SK)},
            ConsistentRead=consistent,
        )
        return policy_from_item(from_item(response["Item"])) if "Item" in response else None

    def save_policy(self, policy: RoutePolicy, *, expected_version: int, entry: PolicyChange) -> None:
        """Write the policy (its version is expected_version + 1) and its history entry, or neither."""
        put = self.versioned_put(_policy_item(policy), expected_version)
        if not conditional_transaction(
            self.dynamodb,
            TransactItems=[
                {"Put": put},
                put_new(self.table_name, _entry_item(entry)),
            ],
        ):
            raise PolicyVersionMismatch(
                "The route policy changed since the version this update is based on; "
                "read it again and retry.",
                details={"expected_version": expected_version},
            )

    def history(
        self, org_id: str, *, limit: int, starting_after: str | None = None
    ) -> tuple[list[PolicyChange], bool]:
        """Up to `limit` entries newest first, older than the entry `starting_after`; and
        whether older ones remain. One Query (limit + 1 items)."""
        request = prefix_query(
            self.table_name,
            org_pk(org_id),
            HISTORY_PREFIX,
            start_sk=HISTORY_PREFIX + suffix_of(starting_after) if starting_after else None,
            ScanIndexForward=False,
            Limit=limit + 1,
            ConsistentRead=True,
        )
        response = self.dynamodb.query(**request)
        items = [_entry_from_item(from_item(i)) for i in response.get("Items", [])]
        # A query cut at its 1 MB read (large entries) holds fewer items, with more to read.
        return items[:limit], len(items) > limit or "LastEvaluatedKey" in response


def _policy_item(policy: RoutePolicy) -> dict[str, Any]:
    return {
        **org_item(policy.org_id, POLICY_SK, "routing_policy"),
        "org_id": policy.org_id,
        "provider_allow": list(policy.provider_allow),
        "provider_deny": list(policy.provider_deny),
        "allowed_regions": list(policy.allowed_regions),
        "routing_mode": policy.routing_mode,
        "privacy_tier_floor": policy.privacy_tier_floor,
        # Decimal strings: exact, whatever the codec does with numbers.
        "max_price_json": json.dumps(
            {
                op: {"input": _text(cap.input), "output": _text(cap.output)}
                for op, cap in policy.max_price_per_million_tokens.items()
            },
            sort_keys=True,
        ),
        "chat_fallbacks_allowed": policy.chat_fallbacks_allowed,
        "created_at": policy.created_at,
        "updated_at": policy.updated_at,
        "updated_by": policy.updated_by,
        "version": policy.version,
    }


def policy_from_item(item: dict[str, Any]) -> RoutePolicy:
    caps = json.loads(item.get("max_price_json") or "{}")
    return RoutePolicy(
        org_id=item["org_id"],
        provider_allow=tuple(item.get("provider_allow") or ()),
        provider_deny=tuple(item.get("provider_deny") or ()),
        allowed_regions=tuple(item.get("allowed_regions") or ()),
        routing_mode=item.get("routing_mode"),
        privacy_tier_floor=item.get("privacy_tier_floor"),
        max_price_per_million_tokens={
            op: PriceCap(input=_decimal(cap.get("input")), output=_decimal(cap.get("output")))
            for op, cap in caps.items()
        },
        chat_fallbacks_allowed=bool(item.get("chat_fallbacks_allowed", True)),
        configured=True,
        version=int(item.get("version", 0)),
        created_at=item.get("created_at"),
        updated_at=item.get("updated_at"),
        updated_by=item.get("updated_by"),
    )


def _entry_item(entry: PolicyChange) -> dict[str, Any]:
    # One JSON text keeps the entry exactly as the API shows it (no Decimal round trip).
    return {
        **org_item(entry.org_id, HISTORY_PREFIX + suffix_of(entry.id), "routing_policy_change"),
        "created_at": entry.created_at,
        "entry_json": json.dumps(entry.to_api(), sort_keys=True),
    }


def _entry_from_item(item: dict[str, Any]) -> PolicyChange:
    return from_stored(PolicyChange, json.loads(item["entry_json"]))


def _text(value: Decimal | None) -> str | None:
    return format(value, "f") if value is not None else None


def _decimal(value: str | None) -> Decimal | None:
    return Decimal(value) if value is not None else None
