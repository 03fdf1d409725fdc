"""The schedules context: recurring schedules and their input files (docs/schedules.md).

One layer of the wiring (batchroute/wiring/__init__.py): it builds on the layers beneath
it (compat.py) and knows no layer above."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from typing import TYPE_CHECKING

from batchroute.wiring.compat import CompatWiring

if TYPE_CHECKING:
    from batchroute.services.schedules.schedules import Schedules


class SchedulesWiring(CompatWiring):
    @cached_property
    def schedules(self) -> Schedules:
        from batchroute.services.schedules.schedules import Schedules

        settings = self.settings
        triggers = None
        if settings.schedule_group_name and settings.schedule_target_arn:
            from batchroute.adapters.event_scheduler import EventScheduler

            triggers = EventScheduler(
                group_name=settings.schedule_group_name,
                role_arn=settings.schedule_role_arn,
                target_arn=settings.schedule_target_arn,
            )
        return Schedules(
            store=self.schedule_store,
            batches=lambda: self.batches,  # built when a schedule first fires
            files=self.files,
            targets=self.delivery_targets,
            read_prefix=self._read_prefix,
            sealer=self.sealer,
            catalog=self.catalog,
            check_url=self.webhook_url_check(),
            clock=self.clock,
            triggers=triggers,
            regression=self.regression_runs,
        )

    def _read_prefix(self, org_id: str, target_id: str, prefix: str) -> Iterator[tuple[str, bytes]]:
        """A schedule's input files: every object under `prefix` in the org's delivery target,
        read with the target's own credentials (BucketRefused becomes the run's error)."""
        from batchroute.adapters.customer_buckets import CustomerBucket
        from batchroute.domain.delivery_targets import BucketRefused
        from batchroute.errors import InvalidRequest
        from batchroute.services.schedules.schedules import MAX_SOURCE_BYTES, MAX_SOURCE_FILES

        targets = self.delivery_targets
        target = targets.get(org_id, target_id)
        try:
            bucket = targets.open(target)
            assert isinstance(bucket, CustomerBucket)
            for key in bucket.keys(prefix, limit=MAX_SOURCE_FILES):
                yield key, bucket.read(key, max_bytes=MAX_SOURCE_BYTES)
        except BucketRefused as refused:
            raise InvalidRequest(
                f"The input bucket refused: {refused.message}", code=f"bucket_{refused.code}".lower()[:64]
            ) from None
