"""Response models: the webhook deliveries of a batch and every attempt (docs/webhooks.md).
The secret never appears, not even sealed."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class WebhookDeliveryOut(BaseModel):
    id: str
    event_id: str | None
    event_type: str | None
    url: str | None
    status: Literal["pending", "delivering", "succeeded", "failed", "dead_lettered"]
    attempt_count: int
    last_attempt_at: str | None
    next_attempt_at: str | None
    last_response_status: int | None
    last_error: str | None
    created_at: str | None


class WebhookAttemptOut(BaseModel):
    delivery_id: str | None
    attempt: int
    at: str | None
    status_code: int | None
    error: str | None
    duration_ms: int


class BatchWebhooksOut(BaseModel):
    batch_id: str
    data: list[WebhookDeliveryOut]
    events: list[WebhookAttemptOut]
