"""Response models: the org's billing alert events (docs/billing-alerts.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from batchroute.domain.billing.alerts import EVENT_TYPES
from functions.api.schemas.delivery.webhooks import WebhookDeliveryOut


class BillingEventOut(BaseModel):
    id: str = Field(description="evt_ id; the same id a webhook delivery of this event carries")
    object: Literal["billing.event"]
    type: str = Field(
        description="A `billing.*` kind: " + ", ".join(f"`{t}`" for t in EVENT_TYPES),
        examples=list(EVENT_TYPES),
    )
    org_id: str
    created_at: str
    data: dict[str, Any] = Field(description="The event's figures; per type in docs/billing-alerts.md")
    webhook: WebhookDeliveryOut | None = Field(
        description="Its signed delivery to the org's delivery webhook (alert_webhook_enabled); "
        "null when none was made. Not part of the webhook body."
    )


class BillingEventList(BaseModel):
    data: list[BillingEventOut] = Field(description="Newest first")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null at the end")
