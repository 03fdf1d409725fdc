"""The org's billing alert events, newest first, a page at a time (`GET /v1/billing/events`;
docs/billing-alerts.md). A page's `next_cursor` is the id of its oldest event."""

from __future__ import annotations

from typing import Any, Protocol

from batchroute.domain.billing_alerts import event_view
from batchroute.errors import InvalidRequest
from batchroute.ids import has_prefix

MAX_PAGE = 200


class EventPages(Protocol):
    def page(
        self, org_id: str, *, limit: int = 50, starting_after: str | None = None
    ) -> tuple[list[dict[str, Any]], bool]: ...


class BillingEventLog:
    def __init__(self, records: EventPages) -> None:
        self.records = records

    def list(self, org_id: str, *, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
        if cursor is not None and not has_prefix(cursor, "evt"):
            raise InvalidRequest(
                "cursor must be the next_cursor of a previous page.",
                code="invalid_request",
                details={"field": "cursor"},
            )
        limit = max(1, min(MAX_PAGE, limit))
        events, more = self.records.page(org_id, limit=limit, starting_after=cursor)
        return {
            "data": [event_view(e) for e in events],
            "next_cursor": events[-1]["event_id"] if more and events else None,
        }
