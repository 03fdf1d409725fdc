"""Schedule expressions (cron, rate, minimum interval), fire times across DST changes, and
the golden-set scorers (docs/schedules.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from batchroute.domain.presets.golden_sets import (
    GoldenSetView,
    Scorer,
    ScorerView,
    golden_set_from_api,
    lane_score,
    parse_golden_set,
    score,
)
from batchroute.domain.schedules.schedules import (
    fire_key,
    fire_times,
    parse_batch_options,
    parse_expression,
    parse_input_source,
    parse_time_zone,
)
from batchroute.errors import InvalidRequest

NY = ZoneInfo("America/New_York")
ANCHOR = datetime(2026, 1, 1, tzinfo=UTC)


def _field(exc: pytest.ExceptionInfo[InvalidRequest]) -> str:
    return str((exc.value.details or {})["field"])


@pytest.mark.parametrize(
    "text",
    ["30 2 * * *", "*/5 * * * *", "0 9 * * mon-fri", "rate(5 minutes)", "rate(1 hour)", "rate(2 days)"],
)
def test_valid_expressions(text: str) -> None:
    assert parse_expression(text).text == text


@pytest.mark.parametrize(
    "text",
    [
        "* * * * *",
        "*/2 * * * *",
        "rate(1 minute)",
        "rate(4 minutes)",
        "rate(0 hours)",
        "rate(1 hours)",
        "61 * * * *",
        "0 0 * *",
        "every day",
        "",
        None,
        5,
        "rate(5 weeks)",
        "0 0 1 * mon",
    ],
)
def test_invalid_expressions_name_the_field(text: object) -> None:
    with pytest.raises(InvalidRequest) as exc:
        parse_expression(text)
    assert _field(exc) == "expression"
    assert exc.value.code == "invalid_schedule"


@pytest.mark.parametrize(("text", "says"), [("0 0 * * 5#2", "'5#2' is not supported"), ("0 0 *", "5 fields")])
def test_a_refused_cron_says_why(text: str, says: str) -> None:
    with pytest.raises(InvalidRequest) as exc:
        parse_expression(text)
    assert says in exc.value.message


def test_time_zones() -> None:
    assert parse_time_zone(None) == ZoneInfo("UTC")
    assert parse_time_zone("Europe/Paris") == ZoneInfo("Europe/Paris")
    for bad in ("Mars/Olympus", "../etc/passwd", 3, ""):
        with pytest.raises(InvalidRequest) as exc:
            parse_time_zone(bad)
        assert _field(exc) == "time_zone"


def test_daily_cron_on_the_spring_forward_day_fires_once_an_hour_later_on_the_wall() -> None:
    # Given a 02:30 daily cron in New York; 2026-03-08 skips 02:00-03:00
    expression = parse_expression("30 2 * * *")
    after = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)
    # When the next three fires are computed
    fires = fire_times(expression, NY, after=after, anchor=ANCHOR, count=3)
    # Then the 7th at 02:30 EST, the 8th once at 07:30 UTC (= 03:30 EDT), the 9th at 02:30 EDT
    assert fires == [
        datetime(2026, 3, 8, 7, 30, tzinfo=UTC),
        datetime(2026, 3, 9, 6, 30, tzinfo=UTC),
        datetime(2026, 3, 10, 6, 30, tzinfo=UTC),
    ]
    assert [f.astimezone(NY).strftime("%m-%d %H:%M %Z") for f in fires] == [
        "03-08 03:30 EDT",
        "03-09 02:30 EDT",
        "03-10 02:30 EDT",
    ]


def test_a_repeated_wall_time_fires_once_on_the_fall_back_day() -> None:
    # Given a 01:30 daily cron; on 2026-11-01 01:00-02:00 happens twice in New York
    expression = parse_expression("30 1 * * *")
    fires = fire_times(expression, NY, after=datetime(2026, 10, 31, 12, tzinfo=UTC), anchor=ANCHOR, count=3)
    # Then it fires at the first 01:30 (EDT) only, then the next days
    assert fires == [
        datetime(2026, 11, 1, 5, 30, tzinfo=UTC),
        datetime(2026, 11, 2, 6, 30, tzinfo=UTC),
        datetime(2026, 11, 3, 6, 30, tzinfo=UTC),
    ]
    # And asking again from inside the repeated hour does not fire 01:30 EST again
    again = expression.next_after(datetime(2026, 11, 1, 6, 0, tzinfo=UTC), NY, anchor=ANCHOR)
    assert again == datetime(2026, 11, 2, 6, 30, tzinfo=UTC)


def test_the_daily_0230_cron_fires_once_on_the_fall_back_day() -> None:
    fires = fire_times(
        parse_expression("30 2 * * *"),
        NY,
        after=datetime(2026, 10, 31, 12, tzinfo=UTC),
        anchor=ANCHOR,
        count=2,
    )
    assert fires == [datetime(2026, 11, 1, 7, 30, tzinfo=UTC), datetime(2026, 11, 2, 7, 30, tzinfo=UTC)]


def test_rate_is_elapsed_time_from_the_anchor_whatever_the_zone() -> None:
    expression = parse_expression("rate(6 hours)")
    anchor = datetime(2026, 3, 7, 0, 0, tzinfo=UTC)
    fires = fire_times(expression, NY, after=datetime(2026, 3, 8, 1, tzinfo=UTC), anchor=anchor, count=3)
    assert fires == [anchor + timedelta(hours=h) for h in (30, 36, 42)]
    assert expression.next_after(anchor - timedelta(hours=1), NY, anchor=anchor) == anchor


def test_input_sources() -> None:
    assert parse_input_source({"type": "file", "file_id": "file_1"}).to_api() == {
        "type": "file",
        "file_id": "file_1",
    }
    bucket = {"type": "bucket_prefix", "delivery_target_id": "dt_1", "prefix": "in/", "preset": "p@2"}
    assert parse_input_source(bucket).to_api() == bucket
    cases = [
        (None, "input_source"),
        ({"type": "ftp"}, "input_source.type"),
        ({"type": "file"}, "input_source.file_id"),
        ({"type": "file", "file_id": "file_1", "x": 1}, "input_source.x"),
        ({"type": "bucket_prefix", "prefix": "a"}, "input_source.delivery_target_id"),
        ({"type": "bucket_prefix", "delivery_target_id": "dt_1", "prefix": "../up"}, "input_source.prefix"),
        (
            {"type": "bucket_prefix", "delivery_target_id": "dt_1", "prefix": "a", "preset": 3},
            "input_source.preset",
        ),
    ]
    for raw, field in cases:
        with pytest.raises(InvalidRequest) as exc:
            parse_input_source(raw)
        assert _field(exc) == field, raw


def test_batch_options() -> None:
    assert parse_batch_options(None) == {}
    assert parse_batch_options({"routing_mode": "cheapest", "metadata": None}) == {"routing_mode": "cheapest"}
    for raw, field in (
        ({"items": []}, "batch_options.items"),
        ({"completion_window": "1h"}, "batch_options.completion_window"),
        ({"webhook": "https://x"}, "batch_options.webhook"),
        ({"webhook": {"url": "https://x", "secret_sealed": "AQID"}}, "batch_options.webhook.secret_sealed"),
        ([], "batch_options"),
    ):
        with pytest.raises(InvalidRequest) as exc:
            parse_batch_options(raw)
        assert _field(exc) == field


def test_fire_key_is_per_schedule_and_fire_time() -> None:
    assert fire_key("sched_a", "2026-01-01T00:00:00.000Z") == "sched-sched_a-2026-01-01T00:00:00.000Z"
    assert fire_key("sched_a", "t1") != fire_key("sched_a", "t2")


# -- golden sets -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("scorer", "answer", "expected", "passes"),
    [
        (Scorer("exact"), "  Paris \n", "Paris", True),
        (Scorer("exact"), "Paris, France", "Paris", False),
        (Scorer("contains"), "The capital is Paris.", "Paris", True),
        (Scorer("contains"), "The capital is Lyon.", "Paris", False),
        (Scorer("json_field", path="a.b.1"), '{"a": {"b": [0, 42]}}', 42, True),
        (Scorer("json_field", path="a.b.2"), '{"a": {"b": [0, 42]}}', 42, False),
        (Scorer("json_field", path="a"), "not json", 1, False),
        (Scorer("numeric", tolerance=0.5), "About 3.2 units", 3, True),
        (Scorer("numeric", tolerance=0.1), "About 3.2 units", 3, False),
        (Scorer("numeric"), "no number", 3, False),
        (Scorer("exact"), None, "x", False),
    ],
)
def test_scorers(scorer: Scorer, answer: str | None, expected: object, passes: bool) -> None:
    assert score(scorer, answer, expected) is passes


def test_lane_score() -> None:
    assert lane_score(2, 3) == 0.6667
    assert lane_score(0, 0) == 0.0


def test_a_stored_golden_set_loads_as_stored_even_where_todays_rules_would_refuse_it() -> None:
    # Given golden sets as stored: one valid today, one saved before an input rule (a seed)
    scorers: list[ScorerView] = [{"type": "numeric", "tolerance": 0.5}, {"type": "json_field", "path": "a.0"}]
    for scorer in scorers:
        fresh = parse_golden_set({"model": "m", "items": [{"input": "hi", "expected": 1}], "scorer": scorer})
        assert fresh is not None and golden_set_from_api(fresh.to_api()) == fresh
    older: GoldenSetView = {
        "model": "m",
        "items": [{"input": {"messages": [{"role": "user", "content": "a"}], "seed": 1}, "expected": "b"}],
        "scorer": {"type": "contains"},
        "threshold": 1.0,
    }
    # Then loading it (a schedule's PATCH, a regression run) reads it, it does not refuse it
    loaded = golden_set_from_api(older)
    assert loaded.items[0].input["seed"] == 1 and loaded.scorer == Scorer("contains")
    assert loaded.to_api() == older


def test_golden_set_parses_and_names_bad_fields() -> None:
    parsed = parse_golden_set(
        {"model": "m", "items": [{"input": "hi", "expected": "x"}], "scorer": "contains", "threshold": 0.5}
    )
    assert parsed is not None and parsed.items[0].input == {"messages": [{"role": "user", "content": "hi"}]}
    assert parse_golden_set(None) is None
    good = {"model": "m", "items": [{"input": "hi", "expected": "x"}], "scorer": {"type": "exact"}}
    cases = [
        ({**good, "model": 1}, "golden_set.model"),
        ({**good, "scorer": {"type": "fuzzy"}}, "golden_set.scorer.type"),
        ({**good, "scorer": {"type": "json_field"}}, "golden_set.scorer.path"),
        ({**good, "scorer": {"type": "numeric", "tolerance": -1}}, "golden_set.scorer.tolerance"),
        ({**good, "items": []}, "golden_set.items"),
        ({**good, "items": [{"input": "a", "expected": "b"}] * 51}, "golden_set.items"),
        ({**good, "items": [{"input": 5, "expected": "b"}]}, "golden_set.items[0].input"),
        ({**good, "items": [{"input": "a", "expected": 5}]}, "golden_set.items[0].expected"),
        # a golden item goes to the same lanes as a batch item: the same input rules (issue 26)
        (
            {
                **good,
                "items": [
                    {"input": {"messages": [{"role": "user", "content": "a"}], "seed": 1}, "expected": "b"}
                ],
            },
            "golden_set.items[0].input.seed",
        ),
        (  # nor a stop that only some lanes take (it runs on every lane of its model)
            {
                **good,
                "items": [
                    {"input": {"messages": [{"role": "user", "content": "a"}], "stop": "\n"}, "expected": "b"}
                ],
            },
            "golden_set.items[0].input.stop",
        ),
        (  # nor a penalty, which only OpenAI's and some hosts' lanes take
            {
                **good,
                "items": [
                    {
                        "input": {
                            "messages": [{"role": "user", "content": "a"}],
                            "frequency_penalty": 0,
                            "presence_penalty": 1,
                        },
                        "expected": "b",
                    }
                ],
            },
            "golden_set.items[0].input.presence_penalty",
        ),
        (  # nor parallel_tool_calls false beside tools (OpenAI's, Anthropic's and Groq's lanes)
            {
                **good,
                "items": [
                    {
                        "input": {
                            "messages": [{"role": "user", "content": "a"}],
                            "tools": [{"type": "function", "function": {"name": "f"}}],
                            "parallel_tool_calls": False,
                        },
                        "expected": "b",
                    }
                ],
            },
            "golden_set.items[0].input.parallel_tool_calls",
        ),
        (  # nor a message's name (OpenAI's and Groq's lanes)
            {
                **good,
                "items": [
                    {"input": {"messages": [{"role": "user", "content": "a", "name": "x"}]}, "expected": "b"}
                ],
            },
            "golden_set.items[0].input.messages",
        ),
        ({**good, "threshold": 2}, "golden_set.threshold"),
        ({**good, "extra": 1}, "golden_set.extra"),
    ]
    for raw, field in cases:
        with pytest.raises(InvalidRequest) as exc:
            parse_golden_set(raw)
        assert _field(exc) == field, raw
