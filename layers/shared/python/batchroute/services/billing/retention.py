"""Retention settings use cases: read (grace_only until the first save) and update."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.billing.retention import RetentionSettings, UpdateRetention, apply_update
from batchroute.services.billing.controls import saved_with_retries
from batchroute.services.billing.ports import RetentionLookup


class RetentionRecords(RetentionLookup, Protocol):
    def save_retention(self, settings: RetentionSettings, *, expected_version: int) -> None: ...


@dataclass(eq=False)
class RetentionService:
    records: RetentionRecords
    clock: Clock

    def get(self, org_id: str) -> RetentionSettings:
        return self.records.retention(org_id) or RetentionSettings(org_id=org_id)

    def update(self, org_id: str, command: UpdateRetention) -> RetentionSettings:
        """Apply the update (validated at the edge, functions/api/schemas/billing/retention.py)."""
        return saved_with_retries(lambda: self._save_once(org_id, command))

    def _save_once(self, org_id: str, command: UpdateRetention) -> RetentionSettings:
        current = self.get(org_id)
        updated = apply_update(current, command, at=isoformat(self.clock.now()))
        saved = replace(updated, version=current.version + 1)
        self.records.save_retention(saved, expected_version=current.version)
        return saved
