"""The schedules context: recurring schedules and their input files (docs/schedules.md)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from batchroute.wiring.compat import CompatWiring

if TYPE_CHECKING:
    from batchroute.services.schedules.schedules import Schedules


class SchedulesWiring(CompatWiring):
    @cached_property
    def schedules(self) -> Schedules:
        from batchroute.adapters.event_scheduler import scheduler_for
        from batchroute.services.schedules.schedules import Schedules

        return Schedules(
            store=self.schedule_store,
            batches=lambda: self.batches,  # built when a schedule first fires
            files=self.files,
            targets=self.delivery_targets,
            sealer=self.sealer,
            catalog=self.catalog,
            check_url=self.webhook_url_check(),
            clock=self.clock,
            triggers=scheduler_for(self.settings),
            regression=self.regression_runs,
        )
