"""Request and response models: billing controls, the org's spend limit and alerts, and the
audit trail of their changes (docs/billing-controls.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from batchroute.domain.billing_controls import MAX_THRESHOLDS, MAX_USD
from functions.api.schemas.common import MoneyOut


class ThresholdOut(BaseModel):
    type: Literal["balance_below", "spend_above", "pct_of_limit"]
    value: MoneyOut | int  # Money for the USD types, a whole percent for pct_of_limit


class ControlsOut(BaseModel):
    org_id: str
    configured: bool
    limit_enabled: bool
    limit_period: Literal["daily", "monthly"] | None
    limit_amount: MoneyOut | None
    limit_mode: Literal["soft", "hard"]
    limit_timezone: str
    low_balance_amount: MoneyOut | None
    alert_thresholds: list[ThresholdOut]
    alert_email_enabled: bool
    alert_webhook_enabled: bool
    created_at: str | None
    updated_at: str | None


class ControlsEnvelope(BaseModel):
    controls: ControlsOut


class AuditEntryOut(BaseModel):
    id: str
    org_id: str
    actor_user_id: str | None
    actor_role: str | None
    action: str
    before: dict[str, Any]
    after: dict[str, Any]
    ip_address: str | None
    created_at: str


class AuditList(BaseModel):
    data: list[AuditEntryOut]


# The body is parsed by the domain (partial update: absent, null and value all differ),
# so the schema is documented here rather than inferred from a model.
_USD = {
    "anyOf": [
        {"type": "number", "minimum": 0, "maximum": float(MAX_USD)},
        {"type": "string", "pattern": r"^\d+(\.\d{1,6})?$"},
        {
            "type": "object",
            "properties": {"currency": {"const": "usd"}, "amount": {"type": "string"}},
            "required": ["currency", "amount"],
        },
    ],
    "description": "USD dollars, at most 6 decimals (a Money object as returned by GET is accepted too)",
}
_NULLABLE_USD = {"anyOf": [*_USD["anyOf"], {"type": "null"}], "description": _USD["description"]}
CONTROLS_UPDATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "description": "Partial update: only given fields change; null clears a nullable field.",
    "properties": {
        "limit_enabled": {"type": "boolean"},
        "limit_period": {"enum": ["daily", "monthly", None]},
        "limit_amount": _NULLABLE_USD,
        "limit_mode": {"enum": ["soft", "hard"]},
        "limit_timezone": {"type": "string", "description": "IANA time zone, e.g. Europe/Berlin"},
        "low_balance_amount": _NULLABLE_USD,
        "alert_thresholds": {
            "type": ["array", "null"],
            "maxItems": MAX_THRESHOLDS,
            "items": {
                "type": "object",
                "required": ["type", "value"],
                "properties": {
                    "type": {"enum": ["balance_below", "spend_above", "pct_of_limit"]},
                    "value": {
                        "anyOf": [*_USD["anyOf"], {"type": "integer", "minimum": 0, "maximum": 100}],
                        "description": "USD for balance_below and spend_above; "
                        "whole percent 0-100 for pct_of_limit",
                    },
                },
            },
        },
        "alert_email_enabled": {"type": "boolean"},
        "alert_webhook_enabled": {"type": "boolean"},
        "org_id": {"type": "string", "readOnly": True},
        "configured": {"type": "boolean", "readOnly": True},
        "created_at": {"type": ["string", "null"], "readOnly": True},
        "updated_at": {"type": ["string", "null"], "readOnly": True},
    },
}
