"""The work orders context (docs/work-orders.md)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from batchroute.wiring.presets import PresetsWiring

if TYPE_CHECKING:
    from batchroute.services.work_orders.service import WorkOrders


class WorkOrdersWiring(PresetsWiring):
    @cached_property
    def work_orders(self) -> WorkOrders:
        from batchroute.adapters.dynamo.work_orders import WorkOrderStore
        from batchroute.services.work_orders.service import WorkOrders

        store = WorkOrderStore(self.settings.table_name("controls"), self.settings.table_name("batches"))
        return WorkOrders(store, self.batch_records, self.clock)
