"""A preset's golden-set regression run is held on what it sends (docs/schedules.md, "It is
paid work"): each golden input with the preset applied (its system prompt prepended), so a
long system prompt is in the hold, the run is charged the tokens it used at direct prices,
nothing is absorbed, and /v1/usage shows the ledger's charge."""

from __future__ import annotations

from decimal import Decimal

from fastapi.testclient import TestClient

from batchroute.clock import FixedClock
from batchroute.config import get_settings
from batchroute.money import Money
from batchroute.wiring import wiring_for
from tests.integration.batch_pipeline_support import LLAMA
from tests.integration.principals import TestOrg
from tests.integration.principals import clocked_client as clocked_client  # the fixtures
from tests.integration.principals import fixed_clock as fixed_clock
from tests.integration.principals import org as org

LONG_SYSTEM_PROMPT = "Follow these instructions carefully. " * 850  # about 31,000 characters


def test_a_preset_run_holds_its_system_prompt_and_is_charged_what_it_used(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    # Given a preset with a long system prompt and three short golden items
    golden = {
        "items": [{"input": f"Say hi #{n}", "expected": "Simulated answer"} for n in range(3)],
        "scorer": {"type": "contains"},
        "threshold": 1.0,
    }
    body = {"name": "long", "model": LLAMA, "system_prompt": LONG_SYSTEM_PROMPT, "golden_set": golden}
    assert client.post("/v1/presets", json=body, headers=org.key_headers()).status_code == 201
    # When its golden set runs
    run = client.post("/v1/presets/long/regression-runs", headers=org.key_headers())
    assert run.status_code == 201, run.text
    regression = run.json()
    lanes = regression["lanes"]
    # Then every lane was sent the system prompt (about 10,000 tokens per item)
    assert len(lanes) > 1 and all(lane["usage"]["prompt_tokens"] > 3 * 10_000 for lane in lanes)
    # And the hold covered the run: charged what the lanes cost (each lane's cost is rounded up
    # to the micro-dollar on its own), nothing absorbed, the rest released
    lane_costs = sum((Decimal(lane["cost"]["amount"]) for lane in lanes), Decimal(0))
    charged = Money.usd(regression["charged"]["amount"])
    assert lane_costs - Decimal("0.000001") * len(lanes) <= charged.amount <= lane_costs
    ledger = wiring_for(get_settings(), clock).ledger
    hold = ledger.reservation(org.org_id, f"res_{regression['regression_id']}")
    assert hold is not None and hold.status == "settled"
    assert hold.amount.micros >= charged.micros and hold.charged == charged
    assert hold.absorbed == Money.zero()
    # And /v1/usage counts the tokens and the ledger's charge
    usage = client.get("/v1/usage", headers=org.key_headers()).json()["current_period"]
    assert Money.usd(usage["spend"]["amount"]) == charged
    assert usage["tokens"]["input"] == sum(lane["usage"]["prompt_tokens"] for lane in lanes)
