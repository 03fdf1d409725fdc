"""Golden-set regression runs under the org's route policy (docs/routing-policy.md, Where it
applies; docs/schedules.md and docs/presets.md, Golden sets): a run sends the customer's
golden prompts to providers, so it is held to the policy as quotes, batches and direct chat
are, whatever triggers it (a preset's or a schedule's run on demand, a schedule version).

Only the lanes the policy admits are run, benchmarked, charged and counted: provider allow
and deny, allowed regions, the privacy tier floor and the price caps, judged on the direct
prices a run pays. A policy that leaves no lane refuses the run, 409 `no_candidate_lanes`
naming the lanes and rules, nothing held or charged; a schedule version is saved and its run
skipped. Without a policy, or with one that only sets defaults, runs are as before."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.integration.batch_pipeline_support import LLAMA
from tests.integration.principals import TestOrg
from tests.integration.principals import clocked_client as clocked_client  # the fixtures
from tests.integration.principals import fixed_clock as fixed_clock
from tests.integration.principals import org as org
from tests.integration.test_preset_golden_sets import _golden as _preset_golden
from tests.integration.test_preset_golden_sets import _preset
from tests.integration.test_regression_spending_limit import _assert_untouched
from tests.integration.test_schedules_api import _golden as _schedule_golden
from tests.integration.test_schedules_api import _schedule

# The model's lanes in the catalog, all on providers the service may use.
EVERY_PROVIDER = {"deepinfra", "edge-eu", "edge-us", "fireworks", "groq", "together"}
RUN = "/v1/presets/triage/regression-runs"


def _policy(client: TestClient, org: TestOrg, **fields: Any) -> None:
    saved = client.put("/v1/routing/policy", json=fields, headers=org.key_headers("admin"))
    assert saved.status_code == 200, saved.text


def _providers(run: dict[str, Any]) -> set[str]:
    return {lane["provider"] for lane in run["lanes"]}


def _counted_providers(client: TestClient, org: TestOrg) -> set[str]:
    usage = client.get("/v1/usage", headers=org.key_headers("billing"))
    assert usage.status_code == 200, usage.text
    return {row["provider"] for row in usage.json()["current_period"]["by_provider"]}


@pytest.mark.parametrize(
    ("policy", "admitted"),
    [
        ({"provider_deny": ["edge-eu", "groq"]}, {"deepinfra", "edge-us", "fireworks", "together"}),
        ({"provider_allow": ["groq", "deepinfra"]}, {"groq", "deepinfra"}),
        ({"allowed_regions": ["eu"]}, {"edge-eu", "fireworks"}),
        ({"privacy_tier_floor": "confidential"}, {"edge-eu", "edge-us", "fireworks", "groq"}),
        # together's batch input price (0.09) fits the cap, its direct one (0.18), what a run
        # pays, does not
        (
            {"max_price_per_million_tokens": {"responses": {"input": "0.10"}}},
            {"deepinfra", "edge-eu", "edge-us", "groq"},
        ),
    ],
)
def test_a_preset_run_uses_only_the_lanes_the_policy_admits(
    client: TestClient, org: TestOrg, policy: dict[str, Any], admitted: set[str]
) -> None:
    # Given a route policy saved by an admin, and a member's preset with a golden set
    _policy(client, org, **policy)
    assert _preset(client, org, golden_set=_preset_golden()).status_code == 201
    # When a member runs its golden set
    run = client.post(RUN, headers=org.key_headers("member"))
    # Then only the lanes the policy admits are run, benchmarked and charged
    assert run.status_code == 201, run.text
    assert _providers(run.json()) == admitted
    listed = client.get("/v1/presets/triage/versions/1/benchmarks", headers=org.key_headers())
    assert [_providers(b) for b in listed.json()["data"]] == [admitted]
    assert _counted_providers(client, org) == admitted


def test_a_schedule_run_leaves_out_and_excludes_no_denied_lane(client: TestClient, org: TestOrg) -> None:
    # Given a policy denying edge-eu (the lane the golden set's items make answer wrongly)
    _policy(client, org, provider_deny=["edge-eu"])
    # When a schedule with a golden set is created (a version change runs it)
    created = _schedule(client, org, golden_set=_schedule_golden())
    assert created.status_code == 201, created.text
    schedule = created.json()
    # Then the run never reached edge-eu: not benchmarked, hence not excluded either
    benchmarks = f"/v1/schedules/{schedule['id']}/versions/1/benchmarks"
    [benchmark] = client.get(benchmarks, headers=org.key_headers()).json()["data"]
    assert benchmark["trigger"] == "version_change"
    assert _providers(benchmark) == EVERY_PROVIDER - {"edge-eu"}
    assert all(lane["passed"] for lane in benchmark["lanes"])
    assert schedule["excluded_lanes"] == []
    # And a run asked for now by a member is held to it too
    run = client.post(f"/v1/schedules/{schedule['id']}/regression-runs", headers=org.key_headers("member"))
    assert run.status_code == 201, run.text
    assert _providers(run.json()) == EVERY_PROVIDER - {"edge-eu"}
    assert _counted_providers(client, org) == EVERY_PROVIDER - {"edge-eu"}


def test_a_policy_leaving_no_lane_refuses_every_run_and_charges_nothing(
    client: TestClient, org: TestOrg, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a policy denying every provider of the golden set's model
    _policy(client, org, provider_deny=sorted(EVERY_PROVIDER))
    assert _preset(client, org, golden_set=_preset_golden()).status_code == 201
    # When a member runs the preset's golden set
    run = client.post(RUN, headers=org.key_headers("member"))
    # Then it is refused, naming the lanes the policy excluded and the rule
    assert run.status_code == 409, run.text
    error = run.json()["error"]
    assert error["code"] == "no_candidate_lanes"
    assert error["details"]["model"] == LLAMA and error["details"]["policy_version"] == 1
    assert error["details"]["rejected_lanes"] == [
        {"lane_id": f"{provider}/{LLAMA}", "code": "policy", "rule": "provider_deny"}
        for provider in sorted(EVERY_PROVIDER)
    ]
    assert (
        client.get("/v1/presets/triage/versions/1/benchmarks", headers=org.key_headers()).json()["data"] == []
    )
    # And a schedule version is saved, its run skipped with the reason logged
    with caplog.at_level("INFO", logger="batchroute"):
        created = _schedule(client, org, golden_set=_schedule_golden())
    assert created.status_code == 201, created.text
    schedule = created.json()
    skipped = [r for r in caplog.records if r.getMessage() == "regression run not made"]
    assert [(r.__dict__["code"], r.__dict__["trigger"]) for r in skipped] == [
        ("no_candidate_lanes", "version_change")
    ]
    assert schedule["excluded_lanes"] == []
    benchmarks = f"/v1/schedules/{schedule['id']}/versions/1/benchmarks"
    assert client.get(benchmarks, headers=org.key_headers()).json()["data"] == []
    # And a schedule run asked for now is refused the same way
    again = client.post(f"/v1/schedules/{schedule['id']}/regression-runs", headers=org.key_headers("member"))
    assert again.status_code == 409 and again.json()["error"]["code"] == "no_candidate_lanes"
    # And nothing was held, charged or counted
    _assert_untouched(org)


def test_without_a_policy_runs_are_unchanged_and_each_run_reads_the_policy_afresh(
    client: TestClient, org: TestOrg
) -> None:
    assert _preset(client, org, golden_set=_preset_golden()).status_code == 201
    # Without a policy, every lane of the model runs
    first = client.post(RUN, headers=org.key_headers("member"))
    assert first.status_code == 201, first.text
    assert _providers(first.json()) == EVERY_PROVIDER
    # A policy that only sets defaults (a routing mode, direct chat's fallbacks) narrows nothing
    _policy(client, org, routing_mode="edge_only", chat_fallbacks_allowed=False)
    defaults = client.post(RUN, headers=org.key_headers("member"))
    assert defaults.status_code == 201, defaults.text
    assert _providers(defaults.json()) == EVERY_PROVIDER
    # A limit saved since applies to the very next run
    _policy(client, org, provider_allow=["groq"])
    limited = client.post(RUN, headers=org.key_headers("member"))
    assert limited.status_code == 201, limited.text
    assert _providers(limited.json()) == {"groq"}
