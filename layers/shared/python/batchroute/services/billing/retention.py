"""Retention settings use cases: read (grace_only until the first save) and update."""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.billing_controls import ConcurrentUpdate
from batchroute.domain.retention import RetentionSettings, UpdateRetention, apply_update

_SAVE_ATTEMPTS = 3


class RetentionRecords(Protocol):
    def retention(self, org_id: str) -> RetentionSettings | None: ...

    def save_retention(self, settings: RetentionSettings, *, expected_version: int) -> None: ...


class RetentionService:
    def __init__(self, records: RetentionRecords, clock: Clock) -> None:
        self.records = records
        self.clock = clock

    def get(self, org_id: str) -> RetentionSettings:
        return self.records.retention(org_id) or RetentionSettings(org_id=org_id)

    def update(self, org_id: str, command: UpdateRetention) -> RetentionSettings:
        """Apply the update (validated at the edge, functions/api/schemas/retention.py)."""
        for attempt in range(_SAVE_ATTEMPTS):
            current = self.get(org_id)
            updated = apply_update(current, command, at=isoformat(self.clock.now()))
            saved = replace(updated, version=current.version + 1)
            try:
                self.records.save_retention(saved, expected_version=current.version)
            except ConcurrentUpdate:
                if attempt == _SAVE_ATTEMPTS - 1:
                    raise
                continue
            return saved
        raise AssertionError("unreachable")  # pragma: no cover
