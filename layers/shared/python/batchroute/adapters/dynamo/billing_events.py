"""Billing alert events in the `controls` table, debounced per period.

Items: events `ORG#<org>`/`EVENT#<ulid>` `{event_id, type, created_at, details}`; one
debounce marker per alert kind and spend period `ORG#<org>`/`ALERT#<kind>#<period key>`.
The marker and its event are ONE transaction conditioned on the marker not existing, so an
alert is recorded once per period whatever the number of settlements that reach it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from batchroute.adapters.dynamo.codec import from_item, is_condition_failure, to_item, to_value
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.clock import isoformat
from batchroute.ids import new_id

EVENT_PREFIX = "EVENT#"
ALERT_PREFIX = "ALERT#"


class BillingEvents(DynamoStore):
    def record_once(
        self,
        org_id: str,
        *,
        kind: str,
        period_key: str,
        event_type: str,
        details: dict[str, Any],
        at: datetime,
    ) -> dict[str, Any] | None:
        """Record the event unless this kind of alert was recorded in this period already;
        returns the event, or None when it was debounced."""
        event_id = new_id("evt", at=at)
        event = {
            "event_id": event_id,
            "org_id": org_id,
            "type": event_type,
            "created_at": isoformat(at),
            "details": details,
        }
        marker = {
            "pk": f"ORG#{org_id}",
            "sk": f"{ALERT_PREFIX}{kind}#{period_key}",
            "kind": "alert_marker",
            "org_id": org_id,
            "alert": kind,
            "period_key": period_key,
            "event_id": event_id,
            "created_at": isoformat(at),
        }
        try:
            self.dynamodb.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.table_name,
                            "Item": to_item(marker),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table_name,
                            "Item": to_item(
                                {
                                    "pk": f"ORG#{org_id}",
                                    "sk": EVENT_PREFIX + event_id,
                                    "kind": "billing_event",
                                    **event,
                                }
                            ),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                ]
            )
        except ClientError as exc:
            reasons = exc.response.get("CancellationReasons") or []
            if is_condition_failure(exc) and reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                return None
            raise
        return event

    def events(self, org_id: str, *, limit: int = 50) -> list[dict[str, Any]]:
        """The org's billing events, newest first."""
        response = self.dynamodb.query(
            TableName=self.table_name,
            KeyConditionExpression="pk = :p AND begins_with(sk, :e)",
            ExpressionAttributeValues={":p": to_value(f"ORG#{org_id}"), ":e": to_value(EVENT_PREFIX)},
            ScanIndexForward=False,
            Limit=limit,
            ConsistentRead=True,
        )
        return [from_item(item) for item in response.get("Items", [])]
