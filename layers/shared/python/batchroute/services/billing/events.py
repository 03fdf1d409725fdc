"""The org's billing alert events, newest first, a page at a time (`GET /v1/billing/events`;
docs/billing-alerts.md), each with the state of its delivery to the org's webhook (null when
none was made). A page's `next_cursor` is the id of its oldest event."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypedDict

from batchroute.domain.billing.alerts import BillingEvent, BillingEventView
from batchroute.domain.delivery.webhooks import WebhookDeliveryRecord, WebhookDeliveryView, delivery_id_for
from batchroute.errors import InvalidRequest
from batchroute.ids import has_prefix

MAX_PAGE = 200


class ListedEvent(BillingEventView):
    webhook: WebhookDeliveryView | None  # its delivery's public view


class EventPage(TypedDict):
    data: list[ListedEvent]
    next_cursor: str | None


class EventPages(Protocol):
    def page(
        self, org_id: str, *, limit: int = 50, starting_after: str | None = None
    ) -> tuple[list[BillingEvent], bool]: ...


class DeliveryLookup(Protocol):
    """adapters/dynamo/webhook_deliveries.py over the org-keyed store."""

    def get_many(self, owner_id: str, delivery_ids: list[str]) -> dict[str, WebhookDeliveryRecord]: ...


@dataclass(eq=False)
class BillingEventLog:
    records: EventPages
    deliveries: DeliveryLookup

    def list(self, org_id: str, *, limit: int = 50, cursor: str | None = None) -> EventPage:
        if cursor is not None and not has_prefix(cursor, "evt"):
            raise InvalidRequest(
                "cursor must be the next_cursor of a previous page.",
                code="invalid_request",
                details={"field": "cursor"},
            )
        limit = max(1, min(MAX_PAGE, limit))
        events, more = self.records.page(org_id, limit=limit, starting_after=cursor)
        ids = {e.event_id: delivery_id_for(org_id, e.event_id) for e in events}
        found = self.deliveries.get_many(org_id, list(ids.values())) if events else {}
        data: list[ListedEvent] = []
        for event in events:
            delivery = found.get(ids[event.event_id])
            data.append({**event.to_api(), "webhook": delivery.to_api() if delivery else None})
        return {"data": data, "next_cursor": events[-1].event_id if more and events else None}
