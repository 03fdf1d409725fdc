"""GET /v1/usage on moto: the usage counters a settled batch, a queued and a direct chat
request write match the ledger's charges; a replayed settlement does not count twice; the
periods follow the billing controls' zone (injected clock); the answer matches the document."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.lanes import LaneStateStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.catalog import builtin_catalog
from batchroute.clock import FixedClock
from batchroute.config import get_settings
from batchroute.domain.billing.ledger import ReservationTerms, period_keys
from batchroute.domain.billing.usage import ReservationCharge, UsageCharge, UsageLine
from batchroute.money import Money
from batchroute.services.catalog.lane_health import SimulatedProviderHealth, refresh_lane_heartbeats
from batchroute.wiring import wiring_for
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.deps import get_clock
from tests.integration.batch_pipeline_support import (
    GPT,
    LLAMA,
    create_batch,
    heartbeat_all_lanes,
    item,
    quiet_simulation,
    run_until_done,
    run_workflow,
)
from tests.integration.principals import TestOrg, new_org
from tests.integration.test_openapi_answers import Contract

MINI = "gpt-4o-mini"
LA = "America/Los_Angeles"


def _ledger() -> LedgerStore:
    return LedgerStore(get_settings().table_name("ledger"))


@pytest.fixture
def stack(local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[LocalStack]:
    quiet_simulation(monkeypatch, tmp_path, heartbeats=False)
    yield local_aws
    get_settings.cache_clear()


def _app(clock: FixedClock | None = None) -> TestClient:
    settings = get_settings().model_copy(update={"simulated_ttft_ms": 0, "simulated_inter_token_ms": 0})
    app = create_app(settings)
    if clock is not None:
        app.dependency_overrides[get_clock] = lambda: clock
    return TestClient(app, raise_server_exceptions=False)


def _usage(client: TestClient, org: TestOrg, query: str = "") -> dict[str, Any]:
    response = client.get(f"/v1/usage{query}", headers=org.key_headers("billing"))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _micros(money: dict[str, str]) -> int:
    assert money["currency"] == "usd"
    return Money.usd(money["amount"]).micros


def _charged(org_id: str) -> int:
    """What the ledger's entries say was charged (reads the whole partition: the check)."""
    return sum(e.amount for e in _ledger().snapshot(org_id).entries if e.entry_type == "charge")


def _chat(client: TestClient, org: TestOrg, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/chat/completions", json=body, headers=org.key_headers())
    assert response.status_code in (200, 202), response.text
    answer: dict[str, Any] = response.json()
    return answer


# -- counters match the ledger ---------------------------------------------------------------
def test_usage_after_a_batch_and_chat_matches_the_ledger_and_the_document(stack: LocalStack) -> None:
    heartbeat_all_lanes()
    client = _app()
    org = new_org(credit_usd="10")
    # Given a settled batch: two items completed (two models), one failed (not charged)
    batch = create_batch(org.org_id, [item(0), item(1, GPT), item(2, text="[simulate:fail]")])
    assert run_workflow(stack, batch.batch_id)["status"] == "SUCCEEDED"
    receipt = client.get(f"/v1/batches/{batch.batch_id}/billing-receipt", headers=org.key_headers()).json()
    # And a direct chat request and a queued one
    direct = _chat(
        client, org, {"model": MINI, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16}
    )
    job = _chat(client, org, {"model": LLAMA, "messages": [{"role": "user", "content": "Yo"}], "batch": True})
    queued = BatchRecords(get_settings().table_name("batches")).get(job["batch_id"])
    assert queued is not None
    run_until_done(stack, str(queued.execution_arn))
    queued_usage = client.get(f"/v1/chat/completions/{job['id']}", headers=org.key_headers()).json()
    queued_usage = queued_usage["result"]["usage"]

    # When the org reads its usage
    response = client.get("/v1/usage", headers=org.key_headers("billing"))
    assert response.status_code == 200, response.text
    usage = Contract(client.get("/openapi.json").json()).check(response, "get", "/v1/usage")

    # Then the wallet figures are the ledger's
    state = _ledger().state(org.org_id)
    assert _micros(usage["balance"]) == state.balance.micros
    assert _micros(usage["reserved"]) == 0 and _micros(usage["available"]) == state.available.micros
    assert usage["period"] == "monthly" and usage["timezone"] == "UTC"
    # And the period's spend is exactly what the ledger charged (and its spend counter holds)
    current = usage["current_period"]
    charged = _charged(org.org_id)
    assert charged > 0 and _micros(current["spend"]) == charged
    month = period_keys(datetime.now(UTC), "UTC")["monthly"]
    assert _ledger().period_spend(org.org_id, month).micros == charged
    assert _micros(current["spend"]) == 10_000_000 - state.balance.micros
    # And the breakdowns add up to it
    for breakdown in ("by_day", "by_model", "by_provider"):
        assert sum(_micros(row["spend"]) for row in current[breakdown]) == charged, breakdown
    # And the batch's models and providers are there, with the receipt's tokens
    lanes = receipt["provider_lanes"]
    completed = [lane for lane in lanes if lane["item_counts"]["completed"]]
    assert {row["provider"] for row in current["by_provider"]} >= {lane["provider"] for lane in completed}
    assert {row["model"] for row in current["by_model"]} == {LLAMA, GPT, MINI}
    batch_in = sum(lane["usage"]["prompt_tokens"] for lane in completed)
    batch_out = sum(lane["usage"]["completion_tokens"] for lane in completed)
    chat_in = direct["usage"]["prompt_tokens"] + queued_usage["prompt_tokens"]
    chat_out = direct["usage"]["completion_tokens"] + queued_usage["completion_tokens"]
    assert current["tokens"] == {
        "input": batch_in + chat_in,
        "output": batch_out + chat_out,
        "total": batch_in + chat_in + batch_out + chat_out,
    }
    # And the requests: two completed batch items, two chat requests (direct and queued)
    assert current["requests"] == {"batch_items": 2, "chat": 2, "total": 4}
    # And the previous period is empty
    assert _micros(usage["previous_period"]["spend"]) == 0
    assert usage["previous_period"]["by_model"] == []


def test_a_replayed_settlement_does_not_count_twice(stack: LocalStack) -> None:
    heartbeat_all_lanes()
    client = _app()
    org = new_org(credit_usd="10")
    # Given a settled batch
    batch = create_batch(org.org_id, [item(0), item(1, GPT)])
    assert run_workflow(stack, batch.batch_id)["status"] == "SUCCEEDED"
    before = _usage(client, org)
    # When its Settle step runs again (a repeated message)
    record = BatchRecords(get_settings().table_name("batches")).get(batch.batch_id)
    assert record is not None
    output = wiring_for().pipeline.settlement.settle(record)
    # Then it replays, and usage is unchanged
    assert output["replayed"] is True
    after = _usage(client, org)
    assert after["current_period"] == before["current_period"]
    assert _micros(after["current_period"]["spend"]) == _charged(org.org_id)


def test_the_ledger_moves_counters_with_the_charge_only_once(stack: LocalStack) -> None:
    ledger = _ledger()
    org = new_org(credit_usd="1")
    # Given a reservation of 0.5 USD and a charge whose cost exceeds it (the cap applies)
    ledger.reserve(
        org.org_id,
        ReservationTerms(reservation_id="res_1", amount=Money.usd("0.5"), purpose="batch", ref="batch_1"),
        at="2026-11-21T10:00:00.000Z",
    )
    lines = tuple(
        UsageLine(f"model-{i:03}", "prov", cost=Money.usd("0.01").amount, input_tokens=i, batch_items=1)
        for i in range(120)
    )
    charge = UsageCharge("2026-11-21", lines)
    keys = ("D#2026-11-21", "M#2026-11")
    first = ledger.settle(
        org.org_id,
        ReservationCharge("res_1", Money.usd("1.2"), "2026-11-21T10:05:00.000Z", keys, usage=charge),
    )
    again = ledger.settle(
        org.org_id,
        ReservationCharge("res_1", Money.usd("1.2"), "2026-11-21T10:06:00.000Z", keys, usage=charge),
    )
    assert not first.replayed and again.replayed
    # Then the counters hold the charged 0.5 (not the 1.2 cost), in at most 50 items, once
    counters = ledger.usage_between(org.org_id, "2026-11-21", "2026-11-21")
    assert len(counters) == 50
    assert sum(c.figures.cost_micros for c in counters) == first.charged.micros == 500_000
    assert sum(c.figures.batch_items for c in counters) == 120
    assert sum(c.figures.input_tokens for c in counters) == sum(range(120))
    assert ledger.violations(org.org_id) == []
    # And a day outside the range is not read
    assert ledger.usage_between(org.org_id, "2026-11-22", "2026-11-30") == []


# -- periods in the controls' zone -------------------------------------------------------------
def _heartbeat(clock: FixedClock) -> None:
    refresh_lane_heartbeats(
        builtin_catalog(),
        LaneStateStore(get_settings().table_name("controls")),
        SimulatedProviderHealth(),
        clock,
    )


def test_periods_follow_local_midnight_in_the_controls_zone(stack: LocalStack) -> None:
    # Given an org whose billing controls are in Los Angeles (no limit: monthly periods)
    clock = FixedClock(datetime(2026, 4, 1, 6, 58, tzinfo=UTC))  # 23:58 on March 31, PDT
    client = _app(clock)
    org = new_org(credit_usd="5")
    saved = client.put("/v1/billing/controls", json={"limit_timezone": LA}, headers=org.session_headers())
    assert saved.status_code == 200, saved.text
    _heartbeat(clock)
    body = {"model": MINI, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}
    # When one chat request is charged a minute before local midnight, one two minutes after
    clock.advance(minutes=1)  # 06:59Z = 23:59 March 31 local (already April 1 in UTC)
    march = _chat(client, org, body)["usage"]
    clock.advance(minutes=2)  # 07:01Z = 00:01 April 1 local
    april = _chat(client, org, body)["usage"]
    charges = sorted(
        (r.settled_at, r.charged.micros) for r in _ledger().reservations(org.org_id) if r.status == "settled"
    )
    assert len(charges) == 2
    march_cost, april_cost = charges[0][1], charges[1][1]

    # Then this month (April, local) holds the second, the previous one (March) the first
    usage = _usage(client, org)
    assert usage["timezone"] == LA and usage["period"] == "monthly"
    current, previous = usage["current_period"], usage["previous_period"]
    assert (current["start_date"], current["end_date"]) == ("2026-04-01", "2026-04-30")
    assert (current["starts_at"], current["ends_at"]) == (
        "2026-04-01T07:00:00.000Z",
        "2026-05-01T07:00:00.000Z",
    )
    assert _micros(current["spend"]) == april_cost
    assert current["tokens"]["input"] == april["prompt_tokens"]
    assert [row["date"] for row in current["by_day"]] == ["2026-04-01"]  # up to today
    assert (previous["start_date"], previous["end_date"]) == ("2026-03-01", "2026-03-31")
    assert _micros(previous["spend"]) == march_cost and previous["requests"]["chat"] == 1
    assert previous["tokens"]["output"] == march["completion_tokens"]
    assert len(previous["by_day"]) == 31 and _micros(previous["by_day"][-1]["spend"]) == march_cost
    assert all(_micros(day["spend"]) == 0 for day in previous["by_day"][:-1])

    # And daily periods split at the same local midnight
    daily = _usage(client, org, "?period=daily")
    assert daily["period"] == "daily"
    assert daily["current_period"]["start_date"] == "2026-04-01"
    assert _micros(daily["current_period"]["spend"]) == april_cost
    assert daily["previous_period"]["start_date"] == "2026-03-31"
    assert _micros(daily["previous_period"]["spend"]) == march_cost

    # And a month later, April is the previous period and May is empty so far
    clock.advance(days=30)  # 2026-05-01T07:01Z = 00:01 May 1 local
    later = _usage(client, org)
    assert later["current_period"]["start_date"] == "2026-05-01"
    assert _micros(later["current_period"]["spend"]) == 0
    assert [row["date"] for row in later["current_period"]["by_day"]] == ["2026-05-01"]
    assert _micros(later["previous_period"]["spend"]) == april_cost
    # And the wallet is the ledger's
    assert _micros(later["balance"]) == 5_000_000 - march_cost - april_cost


def test_the_default_period_is_the_limits_and_bad_periods_are_400(stack: LocalStack) -> None:
    clock = FixedClock(datetime(2026, 6, 15, 12, tzinfo=UTC))
    client = _app(clock)
    org = new_org(credit_usd="1")
    limit = {
        "limit_enabled": True,
        "limit_period": "daily",
        "limit_amount": 5,
        "limit_timezone": "Asia/Tokyo",
    }
    assert client.put("/v1/billing/controls", json=limit, headers=org.session_headers()).status_code == 200
    usage = _usage(client, org)
    # 12:00Z is 21:00 in Tokyo: still June 15 there
    assert usage["period"] == "daily" and usage["current_period"]["start_date"] == "2026-06-15"
    assert usage["current_period"]["starts_at"] == "2026-06-14T15:00:00.000Z"
    assert _usage(client, org, "?period=monthly")["current_period"]["end_date"] == "2026-06-30"
    bad = client.get("/v1/usage?period=weekly", headers=org.key_headers("billing"))
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"


def test_usage_needs_billing_read(stack: LocalStack) -> None:
    client = _app()
    org = new_org(credit_usd="1")
    assert client.get("/v1/usage").status_code == 401
    member = client.get("/v1/usage", headers=org.key_headers("member"))
    assert member.status_code == 403 and member.json()["error"]["code"] == "permission_denied"
    for role in ("owner", "admin", "billing"):
        assert client.get("/v1/usage", headers=org.key_headers(role)).status_code == 200


# -- property: counters always hold the ledger's charges ----------------------------------------
_STEP = st.tuples(
    st.integers(min_value=1, max_value=2_000_000),  # reserved micros
    st.one_of(st.none(), st.integers(min_value=0, max_value=3_000_000)),  # cost (None: release)
    st.lists(  # the charge's lines: (model, provider, cost micros, tokens)
        st.tuples(
            st.sampled_from(["m-a", "m-b", "m#c"]),
            st.sampled_from(["p-1", "p-2"]),
            st.integers(0, 1_000_000),
            st.integers(0, 5000),
        ),
        max_size=5,
    ),
    st.sampled_from(["2026-11-21", "2026-11-22"]),
    st.booleans(),  # delivered twice
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_STEP, min_size=1, max_size=6))
def test_counters_hold_exactly_the_charges_whatever_the_sequence(
    stack: LocalStack, steps: list[tuple[int, int | None, list[tuple[str, str, int, int]], str, bool]]
) -> None:
    ledger = _ledger()
    org = new_org(credit_usd="100")
    tokens = 0
    for n, (reserved, cost, lines, day, twice) in enumerate(steps):
        rid = f"res_{n}"
        ledger.reserve(
            org.org_id,
            ReservationTerms(reservation_id=rid, amount=Money(reserved), purpose="batch", ref=f"batch_{n}"),
            at=f"{day}T10:00:00.000Z",
        )
        charge = UsageCharge(
            day,
            tuple(UsageLine(m, p, Money(c).amount, input_tokens=t, batch_items=1) for m, p, c, t in lines),
        )
        for _ in range(2 if twice else 1):
            if cost is None:
                ledger.release(org.org_id, rid, at=f"{day}T10:01:00.000Z")
            else:
                ledger.settle(
                    org.org_id,
                    ReservationCharge(
                        rid,
                        Money(cost),
                        f"{day}T10:01:00.000Z",
                        (f"D#{day}", "M#2026-11"),
                        usage=charge,
                    ),
                )
        if cost is not None:
            tokens += sum(t for *_, t in lines)
    counters = ledger.usage_between(org.org_id, "2026-11-01", "2026-11-30")
    snapshot = ledger.snapshot(org.org_id)
    charged = sum(e.amount for e in snapshot.entries if e.entry_type == "charge")
    assert sum(c.figures.cost_micros for c in counters) == charged == snapshot.spend.get("M#2026-11", 0)
    for day in ("2026-11-21", "2026-11-22"):
        in_day = sum(c.figures.cost_micros for c in counters if c.day == day)
        assert in_day == snapshot.spend.get(f"D#{day}", 0)
    assert sum(c.figures.input_tokens for c in counters) == tokens
    assert snapshot.violations() == []


# -- what routing saved ------------------------------------------------------------------------
def _at_reference(model: str, tokens: dict[str, int], *, batch: bool) -> int:
    """The tokens at the model's reference lane's list or batch price, worked out here from the
    catalog's rows (the check): each kind at its own price, micro-dollars half-even."""
    catalog = builtin_catalog()
    reference = next(m.reference_provider for m in catalog.models if m.id == model)
    lane = next(lane for lane in catalog.lanes_for(model) if lane.provider == reference)
    prices = lane.price.batch if batch else lane.price.direct
    cached, written = tokens.get("cached", 0), tokens.get("written", 0)
    fresh = tokens["input"] - cached - written
    usd = (
        fresh * prices.input_per_mtok
        + cached * prices.cached_input_per_mtok
        + written * prices.cache_write_input_per_mtok
        + tokens["output"] * prices.output_per_mtok
    ) / 1_000_000
    return Money.usd(usd).micros


def test_receipt_and_usage_show_what_routing_saved_against_the_reference_prices(stack: LocalStack) -> None:
    heartbeat_all_lanes()
    client = _app()
    org = new_org(credit_usd="10")
    # Given a settled batch on two models (Llama on the cheapest sync lane, GPT on OpenAI's
    # batch API) and a direct chat request
    batch = create_batch(org.org_id, [item(0), item(1), item(2, GPT)])
    assert run_workflow(stack, batch.batch_id)["status"] == "SUCCEEDED"
    _chat(client, org, {"model": MINI, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16})

    # When the receipt is read
    response = client.get(f"/v1/batches/{batch.batch_id}/billing-receipt", headers=org.key_headers())
    receipt = Contract(client.get("/openapi.json").json()).check(
        response, "get", "/v1/batches/{batch_id}/billing-receipt"
    )
    # Then its savings price the lanes' tokens, model by model, at the reference prices
    savings = receipt["savings"]
    assert savings["prices_as_of"] == builtin_catalog().pricing_updated_at
    per_model: dict[str, dict[str, int]] = {}
    for lane in receipt["provider_lanes"]:
        tokens = per_model.setdefault(lane["model"], {"input": 0, "output": 0})
        tokens["input"] += lane["usage"]["prompt_tokens"]
        tokens["output"] += lane["usage"]["completion_tokens"]
    shown = {row["model"]: row for row in savings["by_model"]}
    assert set(shown) == {LLAMA, GPT}
    assert shown[GPT]["reference_provider"] == "openai" and shown[LLAMA]["reference_provider"] == "together"
    for model, tokens in per_model.items():
        assert _micros(shown[model]["reference_list_price"]) == _at_reference(model, tokens, batch=False)
        assert _micros(shown[model]["reference_batch_price"]) == _at_reference(model, tokens, batch=True)
    # And what was charged is the wallet's charge; the difference is what routing saved
    charged = _micros(receipt["credit_charged"])
    assert _micros(savings["charged"]) == charged > 0
    list_total = sum(_micros(row["reference_list_price"]) for row in shown.values())
    batch_total = sum(_micros(row["reference_batch_price"]) for row in shown.values())
    assert abs(_micros(savings["reference_list_price"]) - list_total) <= len(shown)  # per-model rounding
    assert _micros(savings["saved_vs_list_price"]) == _micros(savings["reference_list_price"]) - charged
    assert _micros(savings["saved_vs_batch_price"]) == _micros(savings["reference_batch_price"]) - charged
    assert abs(_micros(savings["reference_batch_price"]) - batch_total) <= len(shown)

    # When the org reads its usage
    usage = _usage(client, org)
    assert usage["reference_prices_as_of"] == builtin_catalog().pricing_updated_at
    current = usage["current_period"]
    # Then each model's savings price that model's tokens beside its spend
    for row in current["by_model"]:
        tokens = {"input": row["tokens"]["input"], "output": row["tokens"]["output"]}
        assert _micros(row["savings"]["reference_list_price"]) == _at_reference(
            row["model"], tokens, batch=False
        )
        assert _micros(row["savings"]["reference_batch_price"]) == _at_reference(
            row["model"], tokens, batch=True
        )
        assert row["savings"]["charged"] == row["spend"]
    # And the day's and the period's savings are the sum of their models'
    for figures, parts in (
        (current, current["by_model"]),
        (current["by_day"][-1], current["by_day"][-1]["by_model"]),
    ):
        for field in ("reference_list_price", "reference_batch_price", "charged", "saved_vs_list_price"):
            assert _micros(figures["savings"][field]) == sum(_micros(p["savings"][field]) for p in parts), (
                field
            )
    assert _micros(current["savings"]["charged"]) == _charged(org.org_id)
