"""Deadline rescue, the pure rules: the projection, when a lane is due, which lane takes how
many items under each `rescue` setting, and the records of the hand-over
(domain/routing/rescue.py; docs/batches.md, "Deadline rescue")."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from batchroute.config import get_settings
from batchroute.domain.routing.lane_plan import LaneRecord, PlanLane, lane_chunks, new_lane_record
from batchroute.domain.routing.rescue import (
    DEADLINE_RESCUE,
    RESCUE_REST,
    LaneProgress,
    RescueBudget,
    RescueOption,
    RescueSetting,
    decide_rescue,
    handed_over_rows,
    item_micros,
    model_ordinals,
    project,
    rescue_due,
    rescue_margin,
    rescue_records,
)
from batchroute.errors import InvalidRequest
from batchroute.money import Money

START = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)
DEADLINE = START + timedelta(hours=24)


def _option(provider: str, item_micros: int, *, concurrency: int = 32) -> RescueOption:
    lane = PlanLane(
        lane_id=f"{provider}/m",
        provider=provider,
        item_count=0,
        unit_prices={},
        rejection_code="outranked",
        estimated_cost=Decimal(1),
        proof=None,
    )
    return RescueOption(lane, concurrency, item_micros, {"input_per_mtok": "1", "output_per_mtok": "1"})


# -- the projection ------------------------------------------------------------------------------


def test_a_vendor_job_stuck_at_40_percent_with_2_hours_left_is_due() -> None:
    now = DEADLINE - timedelta(hours=2)
    projection = project(LaneProgress(START, items=100, done=40), now)
    assert projection is not None and projection.finish_at is not None
    # 40 items in 22 h: the 60 left take 33 h more
    assert projection.finish_at == now + timedelta(hours=33)
    assert rescue_due(projection, DEADLINE, rescue_margin("cheapest"), now)


def test_a_lane_on_pace_is_not_due_and_the_margin_is_per_routing_mode() -> None:
    now = START + timedelta(hours=10)
    projection = project(LaneProgress(START, items=100, done=50), now)  # finishes at 20 h
    assert projection is not None and projection.finish_at == START + timedelta(hours=20)
    assert not rescue_due(projection, DEADLINE, rescue_margin("cheapest"), now)  # 1 h margin
    assert rescue_margin("sla_aware") == timedelta(hours=2)
    assert rescue_margin("unknown-mode") == timedelta(hours=1)
    tight = project(LaneProgress(START, items=100, done=45), now)  # finishes at 22 h 13 min
    assert tight is not None
    assert not rescue_due(tight, DEADLINE, rescue_margin("cheapest"), now)
    assert rescue_due(tight, DEADLINE, rescue_margin("sla_aware"), now)


def test_each_chunk_still_to_submit_adds_a_job_turnaround() -> None:
    now = START + timedelta(hours=10)
    progress = LaneProgress(START, items=100, done=50, chunks_left=4, chunk_turnaround=timedelta(hours=1))
    projection = project(progress, now)
    assert projection is not None and projection.finish_at == START + timedelta(hours=24)
    assert rescue_due(projection, DEADLINE, rescue_margin("cheapest"), now)


def test_too_short_a_run_is_not_judged_and_nothing_answered_is_no_finish_in_sight() -> None:
    assert project(LaneProgress(START, items=10, done=0), START + timedelta(minutes=5)) is None
    assert not rescue_due(None, DEADLINE, rescue_margin("cheapest"), START)
    stalled = project(LaneProgress(START, items=10, done=0), START + timedelta(hours=1))
    assert stalled is not None and stalled.finish_at is None
    assert rescue_due(stalled, DEADLINE, rescue_margin("cheapest"), START + timedelta(hours=1))
    # a deadline already past is the sweeper's (expiry), not a rescue
    late = DEADLINE + timedelta(minutes=1)
    assert not rescue_due(project(LaneProgress(START, 10, 1), late), DEADLINE, timedelta(0), late)
    done = project(LaneProgress(START, items=10, done=10), START + timedelta(hours=23))
    assert done is not None and not rescue_due(done, DEADLINE, timedelta(0), START + timedelta(hours=23))


def test_the_minimum_observation_time_is_a_setting() -> None:
    # the default judges no lane before 10 minutes; rescue_min_observation_seconds lowers it
    # (the local e2e stack: a few seconds), and a lane is never judged at its very start
    progress = LaneProgress(START, items=10, done=0)
    assert project(progress, START + timedelta(seconds=5)) is None
    stalled = project(progress, START + timedelta(seconds=5), min_observation_seconds=3)
    assert stalled is not None and stalled.finish_at is None
    assert rescue_due(stalled, DEADLINE, rescue_margin("cheapest"), START + timedelta(seconds=5))
    assert project(progress, START + timedelta(seconds=2), min_observation_seconds=3) is None
    assert project(progress, START, min_observation_seconds=0) is None
    assert get_settings().rescue_min_observation_seconds == 600


# -- the decision --------------------------------------------------------------------------------


def _decide(setting: RescueSetting, budget: RescueBudget, *options: RescueOption, items: int = 100):  # type: ignore[no-untyped-def]
    now = DEADLINE - timedelta(hours=2)
    return decide_rescue(
        setting=setting,
        items_left=items,
        quoted_item_micros=100,
        options=options,
        budget=budget,
        now=now,
        deadline_at=DEADLINE,
        margin=timedelta(hours=1),
    )


def test_within_reservation_picks_the_cheapest_lane_that_finishes_in_time_and_takes_all_it_pays_for() -> None:
    cheap, dear = _option("cheap", 90), _option("dear", 300)
    decision = _decide(RescueSetting(), RescueBudget(Money(0)), dear, cheap)
    assert decision.rescues and decision.option is cheap and decision.items == 100
    assert decision.extra == Money(-1_000) and decision.overage == Money(0)  # 10 saved an item


def test_within_reservation_takes_only_what_the_headroom_covers_the_rest_stays() -> None:
    dear = _option("dear", 150)  # 50 micros an item over the quoted 100
    decision = _decide(RescueSetting(), RescueBudget(Money(1_010), lane_fee=Money(10)), dear)
    assert decision.items == 20  # (1010 - 10) // 50
    assert decision.extra == Money(20 * 50 + 10) and decision.overage == Money(0)
    assert decision.extra <= Money(1_010)
    nothing = _decide(RescueSetting(), RescueBudget(Money(40)), dear)
    assert not nothing.rescues and "budget" in nothing.reason


def test_the_lane_fee_counts_unless_the_old_lane_hands_over_everything_before_delivering() -> None:
    cheap = _option("cheap", 90)  # 10 micros an item under the quoted 100
    fee = Money(5_000)
    # the old lane delivered some items already: one more lane costs its fee
    added = _decide(RescueSetting(), RescueBudget(Money(3_000), lane_fee=fee), cheap)
    assert not added.rescues
    # it delivered none and hands over every item: the lane count stays, 1000 micros saved
    swapped = _decide(RescueSetting(), RescueBudget(Money(0), lane_fee=fee, freed_lane_fee=fee), cheap)
    assert swapped.items == 100 and swapped.extra == Money(-1_000) and swapped.overage == Money(0)


def test_a_lane_too_slow_for_the_deadline_is_not_chosen_even_when_cheaper() -> None:
    slow = _option("slow", 50, concurrency=1)  # 100 items x 10 s = 16.7 min: fine
    slower = _option("slower", 10, concurrency=1)
    decision = _decide(RescueSetting(), RescueBudget(Money(0)), slow, slower, items=1000)  # 2.8 h
    assert not decision.rescues and "before the deadline" in decision.reason
    fast = _option("fast", 60, concurrency=64)
    decision = _decide(RescueSetting(), RescueBudget(Money(0)), slower, fast, items=1000)
    assert decision.option is fast and decision.items == 1000


def test_allow_overage_adds_the_cap_bounded_by_what_the_wallet_and_limit_allow() -> None:
    dear = _option("dear", 150)
    capped = RescueSetting.from_api({"mode": "allow_overage", "max_overage_usd": "0.001"})  # 1000 micros
    decision = _decide(capped, RescueBudget(Money(500), overage=Money(1_000_000)), dear)
    assert decision.items == 30  # (500 + 1000) // 50
    assert decision.overage == Money(30 * 50 - 500)
    assert decision.overage <= capped.max_overage
    # the wallet (or the hard limit) leaves less than the cap: that bounds it
    poor = _decide(capped, RescueBudget(Money(500), overage=Money(250)), dear)
    assert poor.items == 15 and poor.overage == Money(250)


def test_off_rescues_nothing() -> None:
    decision = _decide(RescueSetting("off"), RescueBudget(Money(10**9)), _option("cheap", 1))
    assert not decision.rescues and decision.reason == "the batch's rescue setting is off"


def test_the_setting_is_read_at_the_edge_and_kept_on_the_record() -> None:
    assert RescueSetting.from_api(None) == RescueSetting()
    assert RescueSetting.from_api({"mode": "off"}).mode == "off"
    overage = RescueSetting.from_api({"mode": "allow_overage", "max_overage_usd": "2.50"})
    assert overage.max_overage == Money.usd("2.50")
    assert RescueSetting.from_item(overage.to_item()) == overage
    assert overage.to_api() == {"mode": "allow_overage", "max_overage_usd": "2.500000"}
    for bad in (
        "off",
        {"mode": "sometimes"},
        {"mode": "allow_overage"},
        {"mode": "allow_overage", "max_overage_usd": "0"},
        {"mode": "allow_overage", "max_overage_usd": 1.5},
        # not a plain decimal (docs/money.md, "Typed amounts"): refused, never guessed
        {"mode": "allow_overage", "max_overage_usd": "1e2"},
        {"mode": "allow_overage", "max_overage_usd": "+2"},
        {"mode": "allow_overage", "max_overage_usd": " 2"},
        {"mode": "allow_overage", "max_overage_usd": "\u0662"},  # Arabic-Indic 2
        {"mode": "allow_overage", "max_overage_usd": "2."},
        {"mode": "allow_overage", "max_overage_usd": "1,000"},
        {"mode": "allow_overage", "max_overage_usd": -3},
        {"mode": "within_reservation", "max_overage_usd": "1"},
        {"mode": "off", "extra": 1},
    ):
        with pytest.raises(InvalidRequest) as refused:
            RescueSetting.from_api(bad)
        assert refused.value.details.get("field") == "rescue"


def test_an_items_price_includes_the_fee_and_rounds_up() -> None:
    prices = {"input_per_mtok": "0.09", "output_per_mtok": "0.09"}
    # 100 + 64 tokens at 0.09/M = 14.76 micros; + 5.9 % = 15.63 -> 16
    assert item_micros(Decimal(100), Decimal(64), prices, Decimal("5.9")) == 16


# -- the hand-over records -----------------------------------------------------------------------


def _lines(models: list[str], first_seq: int = 0) -> list[dict[str, object]]:
    return [{"seq": first_seq + n, "item": {"model": m}} for n, m in enumerate(models)]


def _slow_lane(end: int, chunks: list[int]) -> LaneRecord:
    """Lane 01 of model m on the slow vendor lane, owning the ordinals [0, end)."""
    return new_lane_record(
        lane_key="01-slow-m",
        lane_id="slow/m",
        provider="slow",
        model="m",
        ordinal_start=0,
        ordinal_end=end,
        chunks=chunks,
        unit_prices={"input_per_mtok": "0.09", "output_per_mtok": "0.09"},
        at="t",
    )


def test_the_rescue_lane_takes_the_first_items_at_its_prices_and_the_old_lane_keeps_the_rest() -> None:
    # a lane of model m owning ordinals [0, 6) over chunks 0 (4 items of m) and 1 (2 of m)
    offsets = [0, 4, 6]
    source = _slow_lane(6, [0, 1])
    chunk0 = _lines(["m", "x", "m", "m", "m"])  # seqs 0, 2, 3, 4 are m (ordinals 0..3)
    ordinals = model_ordinals(chunk0, "m", 0)  # type: ignore[arg-type]
    assert ordinals == {0: 0, 2: 1, 3: 2, 4: 3}
    option = _option("fast", 150)
    # seq 2 (ordinal 1) was answered already; the rescue lane takes 2 unanswered items
    records = rescue_records(
        source, option, items=2, chunk=0, ordinals=ordinals, done=[2], offsets=offsets, root_number=1, at="t"
    )
    rescue, rest = records.rescue, records.rest
    assert rest is not None
    assert (rescue.ordinal_start, rescue.ordinal_end, rescue.exclude_seqs) == (0, 3, (2,))
    assert rescue.item_count == 2 and lane_chunks(rescue) == [0]
    assert rescue.unit_prices == option.unit_prices and rescue.handover_reason == DEADLINE_RESCUE
    assert rescue.lane_key == "01f1-fast-m" and rescue.then_lane == rest.lane_key
    assert (rest.ordinal_start, rest.ordinal_end, rest.exclude_seqs) == (3, 6, ())
    assert rest.item_count == 3 and lane_chunks(rest) == [0, 1]
    assert rest.lane_id == "slow/m" and rest.unit_prices == source.unit_prices
    assert rest.handover_reason == RESCUE_REST and rest.failover_from == source.lane_key
    # every unanswered item is in exactly one of them
    assert rescue.item_count + rest.item_count == source.item_count - 1
    whole = rescue_records(
        source, option, items=5, chunk=0, ordinals=ordinals, done=[2], offsets=offsets, root_number=1, at="t"
    )
    assert whole.rest is None and whole.rescue.item_count == 5 and whole.rescue.then_lane is None


def test_a_handed_over_lane_keeps_only_its_own_answers_of_its_hand_over_chunk() -> None:
    # a lane over chunks 0..2 that handed over in chunk 1 (two records took its items: a
    # rescue and the rest), having answered seqs 10 and 14 there itself
    old = replace(_slow_lane(30, [0, 1, 2]), chunks_done_n=2, failover_to="01f1-fast-m")
    common = {"provider": "x", "model": "m", "unit_prices": {}, "at": "t", "failover_from": old.lane_key}
    rescue = new_lane_record(
        lane_key="01f1-fast-m",
        lane_id="fast/m",
        ordinal_start=10,
        ordinal_end=12,
        chunks=[1],
        exclude_seqs=[10],
        **common,  # type: ignore[arg-type]
    )
    rest = new_lane_record(
        lane_key="01f1-slow-m",
        lane_id="slow/m",
        ordinal_start=12,
        ordinal_end=30,
        chunks=[1, 2],
        exclude_seqs=[14],
        **common,  # type: ignore[arg-type]
    )
    finished = replace(old, lane_key="02-other-m", failover_to=None)  # no hand-over: all its rows count
    assert handed_over_rows([old, rescue, rest, finished]) == {old.lane_key: (1, frozenset({10, 14}))}
