"""A lane whose capacity ran out between the quote and its run: it still runs (routing saw
room when the batch was quoted), takes what was left, and is then full for later quotes."""

from __future__ import annotations

import json
from typing import Any

from batchroute.adapters.dynamo.lanes import LaneStateStore
from batchroute.config import get_settings
from batchroute_tools.local.provision import LocalStack
from tests.integration.batch_pipeline_support import LLAMA, create_batch, item, run_workflow
from tests.integration.principals import new_org

EDGE_EU = f"edge-eu/{LLAMA}"


def test_a_lane_short_of_capacity_since_its_quote_runs_and_is_then_full(stack: LocalStack) -> None:
    # Given a batch of 4 items quoted onto the edge-eu lane, which had room then
    created = create_batch(new_org(credit_usd="10").org_id, [item(n) for n in range(4)])
    assert _selected(created.record.plan) == {EDGE_EU}
    # And other work took all but 1 item of the lane's capacity before the batch ran
    store = LaneStateStore(get_settings().table_name("controls"))
    left = store.live_states(consistent=True)[EDGE_EU].remaining_capacity_items
    assert store.consume_capacity(EDGE_EU, left - 1)
    # When the workflow runs
    result = run_workflow(stack, created.batch_id)
    # Then every item is still served on the lane quoted
    assert result["status"] == "SUCCEEDED"
    assert [lane["completed"] for lane in json.loads(result["output"])["lanes"]] == [4]
    # And the lane has nothing left today: the next quote finds it full
    assert store.live_states(consistent=True)[EDGE_EU].remaining_capacity_items == 0
    again = create_batch(new_org(credit_usd="10").org_id, [item(9)])
    assert EDGE_EU not in _selected(again.record.plan)


def _selected(plan: dict[str, Any]) -> set[str]:
    return {lane["lane_id"] for group in plan["groups"] for lane in group["selected_lanes"]}
