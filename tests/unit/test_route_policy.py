"""The org's route policy as pure rules: the update's validation (field paths), how a request
is combined with the policy (stricter wins, never wider), the `policy` gate with its rule,
and its effect on batch routing and on direct chat."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from batchroute.clock import FixedClock
from batchroute.domain.accounts.access import Principal
from batchroute.domain.chat.requests import ChatRequest, parse_chat_request
from batchroute.domain.chat.routing import DirectPlan, plan_direct
from batchroute.domain.routing.engine import route
from batchroute.domain.routing.gates import GATE_ORDER, MaxPrice, RouteRequest, RoutingGuards
from batchroute.domain.routing.policy import (
    PolicyConflict,
    PriceCap,
    RoutePolicy,
    apply_update,
    combine,
    diff,
    guarded,
    in_force,
    parse_update,
)
from batchroute.errors import InvalidRequest
from batchroute.services.routing.policy import CACHE_SECONDS, PolicyReader, RoutePolicyService, policy_version
from tests.unit.catalog_fixtures import NOW, catalog, chat_group, lane, live, provider

PROVIDERS = [
    provider("cheap", regions=("us",)),
    provider("euro", regions=("eu",), privacy=("standard", "confidential")),
    provider(
        "vault",
        kind="edge",
        regions=("us", "eu"),
        privacy=("standard", "confidential", "restricted"),
        retention_days=0,
    ),
]
LANES = [
    lane("cheap", batch_in="0.10", batch_out="0.40"),
    lane("euro", batch_in="0.50", batch_out="1.00"),
    lane("vault", batch_in="2.00", batch_out="4.00"),
]
CATALOG = catalog(PROVIDERS, LANES)


def policy(**fields: Any) -> RoutePolicy:
    return RoutePolicy(org_id="org_1", configured=True, version=1, **fields)


def errors_of(body: Any) -> list[dict[str, str]]:
    with pytest.raises(InvalidRequest) as caught:
        parse_update(body, CATALOG)
    details = caught.value.details or {}
    assert details["field"] == details["errors"][0]["field"]
    return list(details["errors"])


# -- parsing an update ---------------------------------------------------------------------------
def test_a_full_update_parses_into_domain_values() -> None:
    # Given every editable field, money both as a plain number and as a Money object
    body = {
        "provider_allow": ["cheap", "euro"],
        "provider_deny": ["vault"],
        "allowed_regions": ["eu"],
        "routing_mode": "sla_aware",
        "privacy_tier_floor": "confidential",
        "max_price_per_million_tokens": {
            "responses": {"input": 0.5, "output": {"currency": "usd", "amount": "1.25"}},
            "embeddings": None,
        },
        "chat_fallbacks_allowed": False,
        "version": 3,
        "object": "routing_policy",
    }
    # When it is parsed
    changes = parse_update(body, CATALOG)
    # Then each is a domain value; a null operation cap is simply absent
    assert changes.provider_allow == ("cheap", "euro")
    assert changes.allowed_regions == ("eu",)
    assert changes.max_price_per_million_tokens == {
        "responses": PriceCap(input=Decimal("0.5"), output=Decimal("1.25"))
    }
    assert changes.chat_fallbacks_allowed is False


def test_every_problem_is_reported_with_its_field_path_and_unknown_names_are_named() -> None:
    errors = errors_of(
        {
            "provider_allow": ["cheap", "nosuch"],
            "allowed_regions": ["mars"],
            "routing_mode": "fastest",
            "privacy_tier_floor": 3,
            "max_price_per_million_tokens": {
                "responses": {"input": -1},
                "telepathy": {"input": 1},
                "vision": {"output": {"currency": "eur", "amount": "1"}},
            },
            "chat_fallbacks_allowed": "no",
            "colour": "blue",
        }
    )
    fields = {e["field"] for e in errors}
    assert fields == {
        "colour",
        "provider_allow[1]",
        "allowed_regions[0]",
        "routing_mode",
        "privacy_tier_floor",
        "max_price_per_million_tokens.responses.input",
        "max_price_per_million_tokens.telepathy",
        "max_price_per_million_tokens.vision.output",
        "chat_fallbacks_allowed",
    }
    by_field = {e["field"]: e["message"] for e in errors}
    assert "'nosuch'" in by_field["provider_allow[1]"] and "cheap" in by_field["provider_allow[1]"]
    assert "'mars'" in by_field["allowed_regions[0]"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"provider_deny": "cheap"}, "provider_deny"),
        ({"provider_allow": ["cheap"], "provider_deny": ["cheap"]}, "provider_deny"),
        (
            {"max_price_per_million_tokens": {"responses": {"input": "1.0000001"}}},
            "max_price_per_million_tokens",
        ),
        ({"max_price_per_million_tokens": {"responses": {}}}, "max_price_per_million_tokens.responses"),
        # typed amounts are plain decimals (docs/money.md): "1e3" is not read as 1000
        ({"max_price_per_million_tokens": {"responses": {"input": "1e3"}}}, "max_price_per_million_tokens"),
        ({"max_price_per_million_tokens": {"responses": {"input": "5\n"}}}, "max_price_per_million_tokens"),
        (
            {"max_price_per_million_tokens": {"responses": {"input": "\u0665"}}},
            "max_price_per_million_tokens",
        ),
        (
            {"max_price_per_million_tokens": {"responses": {"input": {"currency": "usd", "amount": "1E+3"}}}},
            "max_price_per_million_tokens",
        ),
        ({"max_price_per_million_tokens": []}, "max_price_per_million_tokens"),
        ({"version": "3"}, "version"),
        ({"provider_allow": ["x"] * 51}, "provider_allow"),
    ],
)
def test_malformed_values_are_refused(body: dict[str, Any], field: str) -> None:
    assert errors_of(body)[0]["field"].startswith(field)


def test_a_body_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(InvalidRequest):
        parse_update(["provider_allow"], CATALOG)


def test_null_resets_a_field_and_the_diff_names_only_what_changed() -> None:
    current = policy(provider_deny=("vault",), routing_mode="hybrid")
    changes = parse_update({"provider_deny": None, "routing_mode": "hybrid"}, CATALOG)
    updated = apply_update(current, changes)
    before, after = diff(current, updated)
    assert before == {"provider_deny": ["vault"]}
    assert after == {"provider_deny": []}


def test_allow_and_deny_overlapping_is_reported_beside_the_other_problems() -> None:
    body = {"provider_allow": ["cheap"], "provider_deny": ["cheap"], "routing_mode": "fastest-ish"}
    assert {error["field"] for error in errors_of(body)} == {"routing_mode", "provider_deny"}


def test_an_update_that_makes_allow_and_deny_overlap_is_refused() -> None:
    current = policy(provider_allow=("cheap",))
    with pytest.raises(InvalidRequest) as caught:
        apply_update(current, parse_update({"provider_deny": ["cheap"]}, CATALOG))
    assert (caught.value.details or {})["field"] == "provider_deny"


def test_the_default_policy_restricts_nothing_and_is_not_in_force() -> None:
    assert in_force(RoutePolicy(org_id="org_1")) is None
    assert in_force(RoutePolicy(org_id="org_1", configured=True, version=4)) is None
    assert in_force(policy(routing_mode="hybrid")) is not None
    assert guarded(RoutingGuards(), None) == RoutingGuards()


# -- combining a request with the policy ---------------------------------------------------------
def test_the_stricter_privacy_tier_wins_and_is_reported_as_narrowed() -> None:
    combined = combine(policy(privacy_tier_floor="confidential"), RouteRequest(), mode_given=False)
    assert combined.request.privacy_tier == "confidential"
    assert [n.to_api() for n in combined.narrowed] == [
        {
            "field": "privacy_tier",
            "requested": "standard",
            "effective": "confidential",
            "rule": "privacy_tier_floor",
        }
    ]
    # A request already stricter than the floor keeps its own tier
    stricter = combine(
        policy(privacy_tier_floor="confidential"), RouteRequest(privacy_tier="restricted"), mode_given=False
    )
    assert stricter.request.privacy_tier == "restricted" and stricter.narrowed == ()


def test_requested_regions_are_cut_to_the_allowed_ones() -> None:
    combined = combine(policy(allowed_regions=("eu",)), RouteRequest(regions=("us", "eu")), mode_given=False)
    assert combined.request.regions == ("eu",)
    assert combined.narrowed[0].rule == "allowed_regions"


def test_regions_entirely_outside_the_policy_are_refused() -> None:
    with pytest.raises(PolicyConflict) as caught:
        combine(policy(allowed_regions=("eu",)), RouteRequest(regions=("us",)), mode_given=False)
    assert caught.value.code == "policy_conflict"
    assert caught.value.details == {
        "field": "region",
        "rule": "allowed_regions",
        "allowed_regions": ["eu"],
        "requested": ["us"],
    }


def test_the_policy_routing_mode_is_a_default_a_request_may_override() -> None:
    default = combine(policy(routing_mode="hybrid"), RouteRequest(), mode_given=False)
    assert default.request.routing_mode == "hybrid"
    chosen = combine(policy(routing_mode="hybrid"), RouteRequest(routing_mode="sla_aware"), mode_given=True)
    assert chosen.request.routing_mode == "sla_aware" and chosen.narrowed == ()


def test_no_policy_leaves_the_request_alone() -> None:
    request = RouteRequest(regions=("us",))
    assert combine(None, request, mode_given=False).request is request


# -- the gate -------------------------------------------------------------------------------------
def gate(rule_policy: RoutePolicy, slug: str, *, basis: str = "batch") -> list[dict[str, Any]]:
    prov = next(p for p in PROVIDERS if p.slug == slug)
    one = next(ln for ln in LANES if ln.provider == slug)
    return [
        {"code": f.code, **f.details}
        for f in rule_policy.lane_failures(one, prov, {"responses"}, basis)  # type: ignore[arg-type]
    ]


@pytest.mark.parametrize(
    ("rules", "slug", "rule"),
    [
        ({"provider_deny": ("cheap",)}, "cheap", "provider_deny"),
        ({"provider_allow": ("euro",)}, "cheap", "provider_allow"),
        ({"allowed_regions": ("eu",)}, "cheap", "allowed_regions"),
        ({"privacy_tier_floor": "confidential"}, "cheap", "privacy_tier_floor"),
        (
            {"max_price_per_million_tokens": {"responses": PriceCap(output=Decimal("0.39"))}},
            "cheap",
            "max_price_per_million_tokens",
        ),
    ],
)
def test_each_rule_rejects_a_lane_with_code_policy_and_the_rule(
    rules: dict[str, Any], slug: str, rule: str
) -> None:
    (failure,) = gate(policy(**rules), slug)
    assert failure["code"] == "policy"
    assert failure["rule"] == rule and failure["rules"] == [rule]


def test_a_stricter_tier_meets_the_floor_and_every_broken_rule_is_listed() -> None:
    assert gate(policy(privacy_tier_floor="confidential"), "vault") == []
    restricted_only = provider("strict", privacy=("restricted",))
    assert (
        policy(privacy_tier_floor="confidential").lane_failures(
            LANES[0], restricted_only, {"responses"}, "batch"
        )
        == []
    )
    assert policy(privacy_tier_floor="restricted").lane_failures(
        LANES[0], PROVIDERS[1], {"responses"}, "batch"
    )
    (failure,) = gate(policy(provider_deny=("cheap",), allowed_regions=("eu",)), "cheap")
    assert failure["rule"] == "provider_deny"
    assert failure["rules"] == ["provider_deny", "allowed_regions"]


def test_price_caps_use_batch_prices_on_batch_paths_and_direct_prices_on_direct_chat() -> None:
    # cheap: batch 0.10 in, direct 0.20 in (the fixtures' direct price is twice the batch price)
    capped = policy(max_price_per_million_tokens={"responses": PriceCap(input=Decimal("0.15"))})
    assert gate(capped, "cheap", basis="batch") == []
    (failure,) = gate(capped, "cheap", basis="direct")
    assert failure["exceeded"] == {"responses.input": {"lane": "0.20", "max": "0.15"}}
    assert failure["basis"] == "direct"


def test_the_policy_gate_comes_right_after_the_service_guards() -> None:
    assert GATE_ORDER.index("policy") == GATE_ORDER.index("not_in_allowlist") + 1


# -- routing under a policy -----------------------------------------------------------------------
def test_batch_routing_rejects_policy_lanes_with_the_rule_in_the_receipt() -> None:
    # Given a policy that denies the cheapest lane
    rules = policy(provider_deny=("cheap",))
    # When a group is routed
    plan = route(
        [chat_group(5)],
        CATALOG,
        live=live(LANES),
        request=RouteRequest(),
        now=NOW,
        guards=guarded(RoutingGuards(), rules),
    )
    # Then the next cheapest is selected and the denied lane's receipt names the rule
    (group,) = plan.to_api()["groups"]
    assert [lane["lane_id"] for lane in group["selected_lanes"]] == ["euro/m-chat"]
    rejected = {lane["lane_id"]: lane["rejection"] for lane in group["rejected_lanes"]}
    assert rejected["cheap/m-chat"]["code"] == "policy"
    assert rejected["cheap/m-chat"]["details"]["rule"] == "provider_deny"
    assert rejected["vault/m-chat"]["code"] == "outranked"


def test_request_and_policy_price_caps_both_apply() -> None:
    rules = policy(max_price_per_million_tokens={"responses": PriceCap(input=Decimal("1.00"))})
    plan = route(
        [chat_group(5)],
        CATALOG,
        live=live(LANES),
        request=RouteRequest(max_price=MaxPrice(input_per_mtok=Decimal("0.20"))),
        now=NOW,
        guards=guarded(RoutingGuards(), rules),
    )
    (group,) = plan.groups
    codes = {r.lane_id: r.code for r in group.rejected}
    assert [s.lane_id for s in group.selected] == ["cheap/m-chat"]
    assert codes == {"euro/m-chat": "price_cap_exceeded", "vault/m-chat": "policy"}


def chat(**extra: Any) -> ChatRequest:
    return parse_chat_request(
        {"model": "m-chat", "messages": [{"role": "user", "content": "hi"}], **extra}, CATALOG
    )


def direct(rules: RoutePolicy) -> DirectPlan:
    return plan_direct(chat(), CATALOG, live=live(LANES), now=NOW, guards=RoutingGuards(), policy=rules)


def test_direct_chat_rejects_policy_lanes_and_names_the_rule() -> None:
    plan = direct(policy(provider_deny=("cheap",)))
    assert [d.lane_id for d in plan.lanes] == ["euro/m-chat", "vault/m-chat"]
    named = [(r["lane_id"], r["code"], r.get("rule")) for r in plan.rejection_details()["rejected_lanes"]]
    assert ("cheap/m-chat", "policy", "provider_deny") in named


def test_direct_chat_without_fallbacks_keeps_only_its_first_lane() -> None:
    plan = direct(policy(chat_fallbacks_allowed=False))
    assert [d.lane_id for d in plan.lanes] == ["cheap/m-chat"]
    rejected = plan.rejection_details()["rejected_lanes"]
    assert [(r["lane_id"], r["code"], r.get("rule")) for r in rejected] == [
        ("euro/m-chat", "policy", "chat_fallbacks_allowed"),
        ("vault/m-chat", "policy", "chat_fallbacks_allowed"),
    ]
    assert all("chat_fallbacks_allowed: false" in r["message"] for r in rejected)


def test_direct_chat_with_every_lane_excluded_is_no_direct_lane_with_the_rules() -> None:
    with pytest.raises(InvalidRequest) as caught:
        direct(policy(allowed_regions=("asia",)))
    assert caught.value.code == "no_direct_lane"
    rejected = (caught.value.details or {})["rejected_lanes"]
    assert {entry["rule"] for entry in rejected} == {"allowed_regions"}


def test_direct_chat_takes_the_policy_routing_mode_and_privacy_floor() -> None:
    plan = direct(policy(routing_mode="edge_only"))
    assert [d.lane_id for d in plan.lanes] == ["vault/m-chat"]
    floor = direct(policy(privacy_tier_floor="restricted"))
    assert [d.lane_id for d in floor.lanes] == ["vault/m-chat"]


# -- the cached read of direct chat -----------------------------------------------------------------
class CountingRecords:
    """The store's read side in memory, counting GetItems."""

    def __init__(self) -> None:
        self.stored: dict[str, RoutePolicy] = {}
        self.reads = 0

    def policy(self, org_id: str, *, consistent: bool = True) -> RoutePolicy | None:
        self.reads += 1
        return self.stored.get(org_id)

    def save_policy(self, policy: RoutePolicy, *, expected_version: int, entry: Any) -> None:
        self.stored[policy.org_id] = policy

    def history(
        self, org_id: str, *, limit: int, starting_after: str | None = None
    ) -> tuple[list[Any], bool]:
        return [], False


def test_direct_chat_reads_the_policy_once_and_refreshes_it_after_answers_once_stale() -> None:
    # Given a reader with the injected clock and an org with a saved policy
    clock = FixedClock(NOW)
    records = CountingRecords()
    records.stored["org_1"] = policy(provider_deny=("cheap",))
    reader = PolicyReader(records, clock)
    # When warm direct requests ask for it, however long after the copy was read
    first = reader.cached("org_1")
    clock.advance(seconds=CACHE_SECONDS * 10)
    again = reader.cached("org_1")
    # Then only the first cost a read (the hold's version check guards the copy)
    assert first == again and records.reads == 1
    # And a change saved by another process is picked up by the refresh after an answer
    # once the copy is CACHE_SECONDS old, not before
    records.stored["org_1"] = policy(provider_deny=("euro",))
    reader.refresh_if_stale("org_1")
    assert reader.cached("org_1") == records.stored["org_1"] and records.reads == 2
    records.stored["org_1"] = policy(provider_deny=("cheap", "euro"))
    clock.advance(seconds=CACHE_SECONDS - 1)
    reader.refresh_if_stale("org_1")
    assert reader.cached("org_1") == policy(provider_deny=("euro",)) and records.reads == 2
    clock.advance(seconds=1)
    reader.refresh_if_stale("org_1")
    assert reader.cached("org_1") == records.stored["org_1"] and records.reads == 3
    # And batch paths always read afresh
    assert reader.current("org_1") == records.stored["org_1"] and records.reads == 4
    assert policy_version(None) == 0 and policy_version(records.stored["org_1"]) == 1


def test_a_save_in_this_process_refreshes_its_cached_copy_at_once() -> None:
    clock = FixedClock(NOW)
    records = CountingRecords()
    reader = PolicyReader(records, clock)
    service = RoutePolicyService(records, clock, reader)
    owner = Principal(org_id="org_1", role="owner", via="session", user_id="user_1")
    assert reader.cached("org_1") is None
    saved = service.update(owner, parse_update({"provider_deny": ["cheap"]}, CATALOG))
    reads = records.reads
    assert reader.cached("org_1") == saved and records.reads == reads
