"""The work orders context (docs/work-orders.md).

One layer of the wiring (batchroute/wiring/__init__.py): it builds on the layers beneath
it (presets.py) and knows no layer above."""

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
