"""Billing alert events in the `controls` table, each recorded at most once per debounce key.

Items (docs/billing-alerts.md):
- events `ORG#<org>`/`EVENT#<ulid>` `{event_id, org_id, type, created_at, details}`, listed
  newest first (`GET /v1/billing/events`);
- one marker per debounce key `ORG#<org>`/`ALERT#<once key>` (e.g.
  `ALERT#limit_reached#M#2026-11`, `ALERT#threshold#spend_above#100.00#D#2026-11-21`,
  `ALERT#low_balance#3`). The marker and its event are ONE transaction conditioned on the
  marker not existing, so an alert is recorded once whatever the number of concurrent movers;
- the low-balance alert's state `ORG#<org>`/`ALERT#low_balance#STATE` `{episode,
  fired_episode}`: the episode fires once (its key is `low_balance#<episode>`), and re-arming
  moves to the next episode, conditioned on the episode it saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from batchroute.adapters.dynamo.codec import decimals, from_item, org_key, plain
from batchroute.adapters.dynamo.reads import prefix_query
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.adapters.dynamo.writes import put_new, transact_unless_refused
from batchroute.clock import isoformat
from batchroute.domain.billing.alerts import Alert, AlertData, BillingEvent
from batchroute.ids import new_id

EVENT_PREFIX = "EVENT#"
ALERT_PREFIX = "ALERT#"
LOW_BALANCE_STATE_SK = "ALERT#low_balance#STATE"


@dataclass(frozen=True)
class LowBalanceState:
    episode: int = 0
    fired: bool = False  # this episode's alert went out


class BillingEvents(DynamoStore):
    def record_once(self, org_id: str, alert: Alert, *, at: datetime) -> BillingEvent | None:
        """Record the event unless one was recorded under its `once_key` already; returns the
        event, or None when it was debounced."""
        once_key = alert.once_key
        event_id = new_id("evt", at=at)
        event = BillingEvent(event_id, org_id, alert.event_type, isoformat(at), alert.details)
        stored_details = decimals(alert.details)
        marker = {
            "pk": f"ORG#{org_id}",
            "sk": f"{ALERT_PREFIX}{once_key}",
            "kind": "alert_marker",
            "org_id": org_id,
            "once_key": once_key,
            "event_id": event_id,
            "created_at": isoformat(at),
        }
        stored_event = {
            "pk": f"ORG#{org_id}",
            "sk": EVENT_PREFIX + event_id,
            "kind": "billing_event",
            "event_id": event_id,
            "org_id": org_id,
            "type": event.type,
            "created_at": event.created_at,
            "details": stored_details,
        }
        items = [put_new(self.table_name, marker), put_new(self.table_name, stored_event)]
        return event if transact_unless_refused(self.dynamodb, items, 0) else None

    def events(self, org_id: str, *, limit: int = 50) -> list[dict[str, Any]]:
        """The org's billing events as stored, newest first (operators and tests)."""
        return self._items(org_id, limit=limit)[:limit]

    def page(
        self, org_id: str, *, limit: int = 50, starting_after: str | None = None
    ) -> tuple[list[BillingEvent], bool]:
        """Up to `limit` events newest first, older than the event `starting_after` when
        given; and whether older ones remain. One Query (limit + 1 items)."""
        items = self._items(org_id, limit=limit, starting_after=starting_after)
        events = [
            BillingEvent(
                str(item["event_id"]),
                str(item["org_id"]),
                str(item["type"]),
                str(item["created_at"]),
                cast(AlertData, dict(item.get("details") or {})),
            )
            for item in items[:limit]
        ]
        return events, len(items) > limit

    def _items(self, org_id: str, *, limit: int, starting_after: str | None = None) -> list[dict[str, Any]]:
        """Up to `limit` + 1 stored events newest first, older than `starting_after` if given."""
        request = prefix_query(
            self.table_name,
            f"ORG#{org_id}",
            EVENT_PREFIX,
            start_sk=EVENT_PREFIX + starting_after if starting_after else None,
            ScanIndexForward=False,
            Limit=limit + 1,
            ConsistentRead=True,
        )
        return [_event(item) for item in self.dynamodb.query(**request).get("Items", [])]

    # -- the low-balance alert's episodes ------------------------------------------------
    def low_balance_state(self, org_id: str) -> LowBalanceState:
        item = self.item_at(org_key(org_id, LOW_BALANCE_STATE_SK))
        if item is None:
            return LowBalanceState()
        episode = int(item.get("episode", 0))
        fired = item.get("fired_episode") is not None and int(item["fired_episode"]) == episode
        return LowBalanceState(episode=episode, fired=fired)

    def mark_low_balance_fired(self, org_id: str, *, episode: int, at: datetime) -> bool:
        """Note that `episode` fired; False when the state moved on meanwhile."""
        return self._update_state(
            org_id,
            "SET episode = :e, fired_episode = :e, fired_at = :at",
            "attribute_not_exists(pk) OR episode = :e",
            {":e": episode, ":at": isoformat(at)},
        )

    def rearm_low_balance(self, org_id: str, *, episode: int, at: datetime) -> bool:
        """Move from fired `episode` to the next, armed one; False when someone else did."""
        return self._update_state(
            org_id,
            "SET episode = :next, rearmed_at = :at",
            "episode = :e AND fired_episode = :e",
            {":e": episode, ":next": episode + 1, ":at": isoformat(at)},
        )

    def _update_state(self, org_id: str, update: str, condition: str, values: dict[str, object]) -> bool:
        return self.update_where(
            org_key(org_id, LOW_BALANCE_STATE_SK),
            update + ", org_id = :org, #kind = :kind",
            condition=condition,
            names={"#kind": "kind"},
            values={**values, ":org": org_id, ":kind": "low_balance_state"},
        )


def _event(item: dict[str, Any]) -> dict[str, Any]:
    event = from_item(item)
    for name in ("pk", "sk", "kind"):
        event.pop(name, None)
    readable: dict[str, Any] = plain(event)
    return readable
