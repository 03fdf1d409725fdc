"""The `controls` table: billing controls and their audit trail, retention settings.

Items: billing controls `ORG#<org>`/`CONTROLS`; audit entries `ORG#<org>`/`AUDIT#<ulid>`
(newest first with ScanIndexForward=false); retention `ORG#<org>`/`RETENTION`. Settings
carry a `version`: a save is conditional on the version it read, so two concurrent saves
cannot silently overwrite each other. A controls save and its audit entry are one
TransactWriteItems: no change without its audit entry, no entry without its change.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from batchroute.adapters.dynamo.codec import from_item, org_item, org_key, org_pk, plain
from batchroute.adapters.dynamo.reads import pages, prefix_query
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.adapters.dynamo.writes import conditional_put, conditional_transaction, put_new, version_check
from batchroute.domain.accounts.audit import AuditEntry
from batchroute.domain.billing.controls import (
    BillingControls,
    ConcurrentUpdate,
    ControlsSettingsView,
    Threshold,
)
from batchroute.domain.billing.retention import RetentionSettings
from batchroute.domain.stored import from_stored
from batchroute.ids import suffix_of
from batchroute.money import Money
from batchroute.transactions import TransactItem

CONTROLS_SK = "CONTROLS"
RETENTION_SK = "RETENTION"
AUDIT_PREFIX = "AUDIT#"


class ControlsStore(DynamoStore):
    # -- billing controls ----------------------------------------------------------------
    def billing_controls(self, org_id: str) -> BillingControls | None:
        item = self._get(org_id, CONTROLS_SK)
        return controls_from_item(item) if item else None

    def save_billing_controls(
        self, controls: BillingControls, *, expected_version: int, audit: AuditEntry[ControlsSettingsView]
    ) -> None:
        """Write the controls (at expected_version + 1) and the audit entry, or neither."""
        if not conditional_transaction(
            self.dynamodb,
            TransactItems=[
                {"Put": self.versioned_put(_controls_item(controls), expected_version)},
                put_new(self.table_name, _audit_item(audit)),
            ],
        ):
            raise ConcurrentUpdate("The billing controls changed while this update was applied; retry.")

    def audit_entries(
        self, org_id: str, *, limit: int, after: str | None = None
    ) -> list[AuditEntry[ControlsSettingsView]]:
        """Up to `limit` entries newest first (their ids sort by time), older than the entry id
        `after`: read on past a query DynamoDB cut at its 1 MB read."""
        start = None if after is None else AUDIT_PREFIX + suffix_of(after)
        request = prefix_query(
            self.table_name, org_pk(org_id), AUDIT_PREFIX, start_sk=start, ScanIndexForward=False, Limit=limit
        )
        found: list[AuditEntry[ControlsSettingsView]] = []
        for response in pages(self.dynamodb.query, request):
            found.extend(_audit_from_item(from_item(i)) for i in response.get("Items", []))
            if len(found) >= limit:
                break
        return found[:limit]

    # -- retention -----------------------------------------------------------------------
    def retention(self, org_id: str) -> RetentionSettings | None:
        item = self._get(org_id, RETENTION_SK)
        return None if item is None else from_stored(RetentionSettings, plain(item))

    def retention_unchanged(self, settings: RetentionSettings) -> TransactItem:
        """A TransactWriteItems ConditionCheck: the org's retention settings are still as read
        (`settings.version`; 0: none saved yet). Fails when they were saved since."""
        return version_check(self.table_name, org_key(settings.org_id, RETENTION_SK), settings.version)

    def save_retention(self, settings: RetentionSettings, *, expected_version: int) -> None:
        values = {
            **org_item(settings.org_id, RETENTION_SK, "retention_settings"),
            **asdict(settings),
        }
        if not conditional_put(self.dynamodb, **self.versioned_put(values, expected_version)):
            raise ConcurrentUpdate("The retention settings changed while this update was applied; retry.")

    # -- helpers -------------------------------------------------------------------------
    def _get(self, org_id: str, sk: str) -> dict[str, Any] | None:
        return self.item_at(org_key(org_id, sk))


def _controls_item(controls: BillingControls) -> dict[str, Any]:
    return {
        **org_item(controls.org_id, CONTROLS_SK, "billing_controls"),
        "org_id": controls.org_id,
        "limit_enabled": controls.limit_enabled,
        "limit_period": controls.limit_period,
        "limit_amount_micros": controls.limit_amount.micros if controls.limit_amount else None,
        "limit_mode": controls.limit_mode,
        "limit_timezone": controls.limit_timezone,
        "low_balance_micros": controls.low_balance_amount.micros if controls.low_balance_amount else None,
        "alert_thresholds": [_threshold_item(t) for t in controls.alert_thresholds],
        "alert_email_enabled": controls.alert_email_enabled,
        "alert_webhook_enabled": controls.alert_webhook_enabled,
        "created_at": controls.created_at,
        "updated_at": controls.updated_at,
        "version": controls.version,
    }


def _threshold_item(threshold: Threshold) -> dict[str, Any]:
    if threshold.type == "pct_of_limit":
        return {"type": threshold.type, "percent": threshold.percent}
    assert threshold.amount is not None
    return {"type": threshold.type, "micros": threshold.amount.micros}


def controls_from_item(item: dict[str, Any]) -> BillingControls:
    def money(name: str) -> Money | None:
        return Money(int(item[name])) if item.get(name) is not None else None

    thresholds = tuple(
        Threshold(type=t["type"], percent=int(t["percent"]))
        if t["type"] == "pct_of_limit"
        else Threshold(type=t["type"], amount=Money(int(t["micros"])))
        for t in item.get("alert_thresholds", [])
    )
    return BillingControls(
        org_id=item["org_id"],
        configured=True,
        limit_enabled=bool(item["limit_enabled"]),
        limit_period=item.get("limit_period"),
        limit_amount=money("limit_amount_micros"),
        limit_mode=item["limit_mode"],
        limit_timezone=item["limit_timezone"],
        low_balance_amount=money("low_balance_micros"),
        alert_thresholds=thresholds,
        alert_email_enabled=bool(item["alert_email_enabled"]),
        alert_webhook_enabled=bool(item["alert_webhook_enabled"]),
        created_at=item.get("created_at"),
        updated_at=item.get("updated_at"),
        version=int(item.get("version", 0)),
    )


def _audit_item(entry: AuditEntry[ControlsSettingsView]) -> dict[str, Any]:
    values = asdict(entry)
    del values["before"], values["after"]
    return {
        **org_item(entry.org_id, AUDIT_PREFIX + suffix_of(entry.id), "audit"),
        **values,
        # JSON text keeps the diff exactly as the API showed it (no Decimal round trip).
        "before_json": json.dumps(entry.before, sort_keys=True),
        "after_json": json.dumps(entry.after, sort_keys=True),
    }


def _audit_from_item(item: dict[str, Any]) -> AuditEntry[ControlsSettingsView]:
    return from_stored(
        AuditEntry,
        item,
        before=json.loads(item.get("before_json", "{}")),
        after=json.loads(item.get("after_json", "{}")),
    )
