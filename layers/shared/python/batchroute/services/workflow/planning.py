"""The workflow's Route step: the quote's lanes become lane records.

The batch moves `priced -> queued -> dispatching` (conditional writes: states already
passed are skipped, a terminal batch is never moved). Each selected lane of every model
group gets its ordinal range (the group's items split among its selected lanes in order;
a split group's shared prompt prefixes each whole on one lane, its records owning streams
of the model's items) and the chunks holding them (`domain/routing/lane_plan.py`); lane
records are created once, so a repeated Route keeps the first ones. The Map state gets only
the lane keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from batchroute.clock import Clock, isoformat
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.batches.states import TERMINAL
from batchroute.domain.routing.lane_plan import PlanMismatch, plan_groups, plan_lanes
from batchroute.errors import PermanentError
from batchroute.services.batches.ports import BatchStore
from batchroute.services.workflow.ports import ProgressCounters
from batchroute.workflow.tasks import RouteOutput


class InvalidPlan(PermanentError):
    pass


@dataclass(eq=False, kw_only=True)
class LanePlanner:
    records: BatchStore
    progress: ProgressCounters
    clock: Clock

    def route(self, batch: BatchRecord) -> RouteOutput:
        batch_id = batch.batch_id
        if batch.state in TERMINAL:
            return {"lanes": []}
        now = isoformat(self.clock.now())
        try:
            lanes = plan_lanes(plan_groups(batch.plan), batch.chunk_models or [], at=now)
        except (PlanMismatch, KeyError, TypeError, ValueError) as exc:
            raise InvalidPlan(f"batch {batch_id} cannot be routed: {exc}") from exc
        self.records.transition(batch_id, "queued", at=now)
        self.records.transition(batch_id, "dispatching", at=now)
        for lane in lanes:
            self.progress.put_lane(batch_id, lane)
        return {"lanes": [{"lane_key": lane.lane_key} for lane in lanes]}
