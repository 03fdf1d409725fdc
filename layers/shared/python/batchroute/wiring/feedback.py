"""The feedback context (docs/feedback.md)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from batchroute.wiring.work_orders import WorkOrdersWiring

if TYPE_CHECKING:
    from batchroute.services.feedback.service import FeedbackService


class FeedbackWiring(WorkOrdersWiring):
    @cached_property
    def feedback(self) -> FeedbackService:
        from batchroute.adapters.dynamo.feedback import FeedbackStore
        from batchroute.services.feedback.service import FeedbackService

        store = FeedbackStore(self.settings.table_name("controls"))
        return FeedbackService(store, self.batch_records, self.artifacts, self.clock)
