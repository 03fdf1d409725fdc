"""Webhooks (docs/webhooks.md): the target a batch, a queued chat job or the org's default
delivery is sent to, and the deliveries of a batch with every attempt. The secret is
write-only: it never appears again, not even sealed."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from batchroute.domain.delivery.webhook_targets import WEBHOOK_SECRET_MAX, WEBHOOK_SECRET_MIN, WEBHOOK_URL_MAX


class WebhookTarget(BaseModel):
    """Where terminal-state events are POSTed, signed with the secret."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        min_length=1,
        max_length=WEBHOOK_URL_MAX,
        description="A public https URL: private, loopback, link-local and metadata hosts are refused",
        json_schema_extra={"format": "uri"},
    )
    secret: str = Field(
        min_length=WEBHOOK_SECRET_MIN,
        max_length=WEBHOOK_SECRET_MAX,
        description="Keys the HMAC-SHA256 signature (X-Service-Signature); stored sealed, never returned",
    )


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
