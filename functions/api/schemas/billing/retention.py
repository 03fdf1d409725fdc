"""Request and response models: the org's result retention settings, how long result files
are kept after a batch ends."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, Field, StrictBool, StrictInt

from batchroute.domain.billing.retention import (
    MAX_EXTENDED_DAYS,
    MIN_EXTENDED_DAYS,
    RetentionTier,
    UpdateRetention,
)
from functions.api.schemas.common import ContractUpdate, ignored, omittable, read_only


class RetentionSettingsOut(BaseModel):
    org_id: str
    retention_tier: RetentionTier
    extended_days: int | None
    never_charge: bool
    grace_hours: int
    updated_at: str | None


class RetentionUpdate(ContractUpdate):
    """Retention settings to change: only the fields given change. never_charge=true forces
    grace_only."""

    error_code: ClassVar[str] = "invalid_retention"

    retention_tier: RetentionTier = omittable(
        "grace_only (free: download within the grace window), extended_fixed (kept "
        "extended_days), until_deleted (kept until deleted)",
    )
    extended_days: Annotated[StrictInt, Field(ge=MIN_EXTENDED_DAYS, le=MAX_EXTENDED_DAYS)] | None = omittable(
        "Required for extended_fixed; null otherwise"
    )
    never_charge: StrictBool = omittable("true guarantees zero storage spend and forces grace_only")
    grace_hours: Annotated[Any, ignored(int)] = read_only()

    def command(self) -> UpdateRetention:
        given = self.given()
        return UpdateRetention(given=frozenset(given), **given)
