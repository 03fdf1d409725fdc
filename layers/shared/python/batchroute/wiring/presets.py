"""The presets context: the org's request templates and their golden-set runs
(services/schedules/regression.py runs both presets' and schedules')."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from batchroute.wiring.billing import BillingWiring

if TYPE_CHECKING:
    from batchroute.services.presets.service import Presets
    from batchroute.services.schedules.regression import RegressionRuns


class PresetsWiring(BillingWiring):
    @cached_property
    def regression_runs(self) -> RegressionRuns:
        """Golden-set runs of schedules and presets (one implementation, two subjects)."""
        from batchroute.services.presets.service import Presets
        from batchroute.services.schedules.regression import RegressionRuns

        return RegressionRuns(
            store=self.schedule_store,
            catalog=self.catalog,
            providers=self.providers,
            guards=self.guards,
            funds=self.funds,
            clock=self.clock,
            policies=self.route_policies,  # the org's route policy narrows the lanes
            # its own resolver over the same store: `presets` holds this runner, no cycle
            presets=Presets(self.preset_store, catalog=self.catalog, clock=self.clock),
            preset_benchmarks=self.preset_store,
        )

    @cached_property
    def presets(self) -> Presets:
        """The org's request templates (docs/presets.md); also what quotes, batches, compat
        rows and chat bodies resolve `preset` through."""
        from batchroute.services.presets.service import Presets

        return Presets(
            self.preset_store,
            catalog=self.catalog,
            clock=self.clock,
            regression=lambda: self.regression_runs,  # golden-set runs, built when first asked
        )
