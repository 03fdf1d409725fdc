"""Request and response models: the org's result retention settings, how long result files
are kept after a batch ends."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from batchroute.domain.retention import MAX_EXTENDED_DAYS, MIN_EXTENDED_DAYS


class RetentionSettingsOut(BaseModel):
    org_id: str
    retention_tier: Literal["grace_only", "extended_fixed", "until_deleted"]
    extended_days: int | None
    never_charge: bool
    grace_hours: int
    updated_at: str | None


RETENTION_UPDATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "description": "Partial update: only given fields change. never_charge=true forces grace_only.",
    "properties": {
        "retention_tier": {"enum": ["grace_only", "extended_fixed", "until_deleted"]},
        "extended_days": {
            "type": ["integer", "null"],
            "minimum": MIN_EXTENDED_DAYS,
            "maximum": MAX_EXTENDED_DAYS,
            "description": "required for extended_fixed; null otherwise",
        },
        "never_charge": {"type": "boolean"},
        "org_id": {"type": "string", "readOnly": True},
        "grace_hours": {"type": "integer", "readOnly": True},
        "updated_at": {"type": ["string", "null"], "readOnly": True},
    },
}
