"""Our cron (croniter's) as EventBridge Scheduler's (domain/schedules/eventbridge.py): the AWS
trigger fires when our due index does. EventBridge numbers the days of the week 1-7 from
Sunday (AWS docs, "Cron-based schedules": `1-7 or SUN-SAT`), croniter 0-7 (1 = Monday).

The EventBridge side is read by `EventBridgeCron` below, written from AWS's documentation and
sharing nothing with the translation: a property draws croniter-valid expressions and checks
that the fire times ours gives are the times EventBridge's expression names."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from batchroute.domain.schedules.eventbridge import eventbridge_expression
from batchroute.domain.schedules.schedules import fire_times, parse_expression
from batchroute.errors import InvalidRequest

UTC_ZONE = ZoneInfo("UTC")
START = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)
EB_DAYS = {name: n for n, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"), start=1)}
EB_MONTHS = {
    name: n
    for n, name in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"), start=1
    )
}


# -- EventBridge's reading of a cron, from its documentation -------------------------------------
def _eb_set(field: str, low: int, high: int, names: dict[str, int] | None = None) -> set[int] | None:
    """The values a field names (None: any). Lists and ranges of numbers or names; the
    translation writes steps out, so a `/` here is a failure."""
    if field in ("*", "?"):
        return None
    found: set[int] = set()

    def value(text: str) -> int:
        number = names[text] if names is not None and text in names else int(text)
        assert low <= number <= high, (field, text)
        return number

    for item in field.split(","):
        assert "/" not in item, f"a step left in {field!r}"
        first, _, last = item.partition("-")
        start, end = value(first), value(last or first)
        assert start <= end, f"a wrapped range in {field!r}"
        found |= set(range(start, end + 1))
    return found


def _last_day(day: date) -> int:
    following = (day.replace(day=28) + timedelta(days=4)).replace(day=1)
    return (following - timedelta(days=1)).day


def _nearest_weekday(day: date, wanted: int) -> int:
    """Quartz's `nW`: the weekday nearest the n-th, never leaving the month."""
    last = _last_day(day)
    target = date(day.year, day.month, min(wanted, last))
    if target.weekday() == 5:  # Saturday: the Friday before, or the Monday after the 1st
        return target.day - 1 if target.day > 1 else target.day + 2
    if target.weekday() == 6:  # Sunday: the Monday after, or the Friday before the last day
        return target.day + 1 if target.day < last else target.day - 2
    return target.day


@dataclass(frozen=True)
class EventBridgeCron:
    minutes: set[int] | None
    hours: set[int] | None
    dom: str
    months: set[int] | None
    dow: str

    @classmethod
    def parse(cls, expression: str) -> EventBridgeCron:
        found = re.fullmatch(r"cron\((\S+) (\S+) (\S+) (\S+) (\S+) (\S+)\)", expression)
        assert found is not None, expression
        minute, hour, dom, month, dow, year = found.groups()
        assert year == "*"
        assert (dom == "?") != (dow == "?"), "exactly one of day-of-month and day-of-week is ?"
        assert dom != "*" or dow == "?"
        return cls(_eb_set(minute, 0, 59), _eb_set(hour, 0, 23), dom, _eb_set(month, 1, 12, EB_MONTHS), dow)

    def weekdays(self) -> set[int] | None:
        """The days of the week it names, as Python's weekday() numbers (Monday 0)."""
        days = _eb_set(self.dow, 1, 7, EB_DAYS)
        return None if days is None else {(day - 2) % 7 for day in days}

    def fires_on(self, day: date) -> bool:
        if self.months is not None and day.month not in self.months:
            return False
        if self.dom == "?":
            days = self.weekdays()
            return days is None or day.weekday() in days
        if self.dom == "L":
            return day.day == _last_day(day)
        if self.dom.endswith("W"):
            return day.day == _nearest_weekday(day, int(self.dom[:-1]))
        wanted = _eb_set(self.dom, 1, 31)
        return wanted is None or day.day in wanted

    def between(self, start: datetime, end: datetime) -> list[datetime]:
        """Its fire times in (start, end], UTC."""
        found: list[datetime] = []
        day = start.date()
        while day <= end.date():
            if self.fires_on(day):
                for hour in sorted(self.hours if self.hours is not None else range(24)):
                    for minute in sorted(self.minutes if self.minutes is not None else range(60)):
                        moment = datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)
                        if start < moment <= end:
                            found.append(moment)
            day += timedelta(days=1)
        return found


def _ours(text: str, count: int) -> list[datetime]:
    fires: list[datetime] = fire_times(
        parse_expression(text), UTC_ZONE, after=START, anchor=START, count=count
    )
    return fires


# -- examples ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ("0 9 * * 1", "cron(0 9 ? * MON *)"),  # croniter's 1 is Monday, EventBridge's Sunday
        ("0 9 * * 0", "cron(0 9 ? * SUN *)"),
        ("0 9 * * 7", "cron(0 9 ? * SUN *)"),  # 7 is Sunday too; EventBridge has no 0
        ("0 9 * * 1-5", "cron(0 9 ? * MON-FRI *)"),
        ("0 9 * * mon-fri", "cron(0 9 ? * MON-FRI *)"),
        ("0 9 * * 6,0", "cron(0 9 ? * SUN,SAT *)"),
        ("0 9 * * fri-mon", "cron(0 9 ? * SUN,MON,FRI,SAT *)"),  # a wrapped range
        ("0 9 * * */2", "cron(0 9 ? * SUN,TUE,THU,SAT *)"),  # a step
        ("0 9 * * 1-5/2", "cron(0 9 ? * MON,WED,FRI *)"),
        ("0 9 ? * 3", "cron(0 9 ? * WED *)"),
        ("30 2 * * *", "cron(30 2 * * ? *)"),
        ("30 2 * * ?", "cron(30 2 * * ? *)"),
        ("30 2 ? * ?", "cron(30 2 * * ? *)"),  # never both ?
        ("0 0 1 * *", "cron(0 0 1 * ? *)"),
        ("0 0 L * *", "cron(0 0 L * ? *)"),
        ("0 0 15W * *", "cron(0 0 15W * ? *)"),
        ("*/15 9-17 * jan-mar *", "cron(0,15,30,45 9-17 * 1-3 ? *)"),  # steps written out
        ("0 0 */10 * *", "cron(0 0 1,11,21,31 * ? *)"),
        ("rate(5 minutes)", "rate(5 minutes)"),
    ],
)
def test_translations(ours: str, theirs: str) -> None:
    assert eventbridge_expression(ours) == theirs
    parse_expression(ours)  # each is one of ours


@pytest.mark.parametrize(
    "text",
    [
        "0 9 * * L5",  # croniter's last Friday of the month
        "0 9 * * 5L",
        "0 R * * *",  # croniter's random hour
        "0 9 15-L * *",
        "0 9 1,L * *",
        "0 9 * * 5#2",
    ],
)
def test_what_has_no_translation_is_refused(text: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        eventbridge_expression(text)
    assert refused.value.code == "invalid_schedule"
    assert refused.value.details == {"field": "expression"}


# -- the properties ----------------------------------------------------------------------------
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def _field(low: int, high: int, names: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    """A croniter field: values (names too), ranges, steps and lists of them."""
    value = st.integers(low, high).map(str)
    if names:
        value = value | st.sampled_from(names) | st.sampled_from(names).map(str.upper)
    span = st.tuples(value, value).map("-".join)
    step = st.integers(1, high - low + 1).map(str)
    stepped = st.tuples(st.sampled_from(["*"]) | span | value, step).map("/".join)
    item = value | span | stepped
    return st.just("*") | st.lists(item, min_size=1, max_size=3).map(",".join)


_DOW = _field(0, 7, _DAY_NAMES)


@settings(max_examples=200)
@given(minute=st.integers(0, 59), hour=st.integers(0, 23), dow=_DOW)
def test_a_weekly_expression_fires_on_the_weekdays_eventbridge_names(
    minute: int, hour: int, dow: str
) -> None:
    text = f"{minute} {hour} * * {dow}"
    try:
        parse_expression(text)
    except InvalidRequest:
        assume(False)
    ours = {moment.weekday() for moment in _ours(text, 14)}  # two weeks of at most daily fires
    theirs = EventBridgeCron.parse(eventbridge_expression(text)).weekdays()
    assert ours == (set(range(7)) if theirs is None else theirs), (text, eventbridge_expression(text))


_DOM = _field(1, 31) | st.just("L") | st.integers(1, 31).map(lambda day: f"{day}W")


@settings(max_examples=200)
@given(
    minute=st.integers(0, 59).map(str) | _field(0, 59),  # most lists fire too often (5 minutes)
    hour=_field(0, 23),
    days=st.one_of(
        st.tuples(_DOM, st.sampled_from(["*", "?"])),
        st.tuples(st.sampled_from(["*", "?"]), _DOW),
    ),
    month=_field(1, 12, _MONTH_NAMES),
)
def test_every_expression_fires_when_eventbridge_fires_it(
    minute: str, hour: str, days: tuple[str, str], month: str
) -> None:
    """Whatever the fields: ours fires at exactly the times EventBridge's expression names."""
    text = f"{minute} {hour} {days[0]} {month} {days[1]}"
    try:
        parse_expression(text)
    except InvalidRequest:
        assume(False)
    ours = _ours(text, 12)
    theirs = EventBridgeCron.parse(eventbridge_expression(text)).between(START, ours[-1])
    assert ours == theirs, (text, eventbridge_expression(text))
