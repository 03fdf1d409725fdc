"""Our cron expression as EventBridge Scheduler's, the AWS trigger's (adapters/event_scheduler.py;
docs/schedules.md, Triggers).

Ours is croniter's 5-field cron (`minute hour day-of-month month day-of-week`); EventBridge
Scheduler's has six fields (the year last) and differs from it in ways that change when it fires:

- The day of the week: croniter numbers it 0-7 from Sunday (0 and 7 Sunday, 1 Monday),
  EventBridge 1-7 from Sunday (1 Sunday, 2 Monday). So a day-of-week field is translated by
  what it fires on: the weekdays croniter fires (`weekdays`), written as SUN-SAT names, the
  one spelling both read alike: runs of three days or more as a range (`MON-FRI`), the rest
  in a list (`SUN,SAT`). Values, names, lists, ranges (a wrapped one such as `fri-mon` too)
  and steps (`*/2`, `1-5/2`) all come out as names.
- Steps: EventBridge documents them only as `start/step` (`0/5`); croniter also takes `*/5`
  and `1-30/5`. So the minute, hour, day-of-month and month fields are written as the values
  croniter expands them to, runs of three or more as ranges (`*/15` -> `0,15,30,45`, `9-17`
  -> `9-17`, `jan-mar` -> `1-3`): only values, lists and ranges, which both read alike.
- `?`: EventBridge requires exactly one of day-of-month and day-of-week to be `?`. Ours never
  restricts both (parse_expression); `?` goes in the day of the week when it is unrestricted
  (`*` or `?`), else in the day of the month.

What has no translation here is refused when a schedule is saved (400 `invalid_schedule`,
field `expression`; `Schedules._checked`), so a stored schedule always has a trigger on AWS:
`L` and `#` in the day of the week (croniter's `L5`, the last Friday), a day of the month
other than values, ranges, lists, steps, `L` (the last day) and `nW` (the weekday nearest the
n-th), croniter's random and hashed values (`R`, `H`), and a translation longer than
EventBridge's 256 characters.

Pure: croniter's arithmetic only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

from croniter import CroniterBadCronError, CroniterBadDateError, CroniterNotAlphaError, croniter

from batchroute.errors import InvalidRequest

DAY_NAMES: Final = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")  # croniter's 0-6
MAX_SCHEDULE_EXPRESSION: Final = 256  # EventBridge Scheduler's ScheduleExpression
_MONTHS: Final = "JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC"
_NUMERIC: Final = re.compile(r"^[0-9*,/\-]+$")
_MONTH_FIELD: Final = re.compile(rf"^(?:[0-9*,/\-]|{_MONTHS})+$", re.IGNORECASE)
_DAY_FIELD: Final = re.compile(rf"^(?:[0-9*,/\-]|{'|'.join(DAY_NAMES)})+$", re.IGNORECASE)
_NEAREST_WEEKDAY: Final = re.compile(r"^([1-9]|[12][0-9]|3[01])W$", re.IGNORECASE)
_A_SUNDAY: Final = datetime(2026, 1, 4)  # where the weekday walk starts
_CRON_ERRORS: Final = (
    ValueError,
    KeyError,
    CroniterBadCronError,
    CroniterBadDateError,
    CroniterNotAlphaError,
)


def eventbridge_expression(expression: str) -> str:
    """Ours (`30 2 * * *`, `0 9 * * 1-5`, `rate(5 minutes)`) as EventBridge Scheduler's
    (`cron(30 2 * * ? *)`, `cron(0 9 ? * MON-FRI *)`, the rate unchanged). InvalidRequest
    (`invalid_schedule`, field `expression`) when it has no translation."""
    if expression.startswith("rate("):
        return expression
    fields = expression.split(" ")
    if len(fields) != 5:
        raise _untranslatable("a cron has 5 fields: minute hour day-of-month month day-of-week.")
    minute, hour, dom, month, dow = fields
    if not (_NUMERIC.match(minute) and _NUMERIC.match(hour)):
        raise _untranslatable("the minute and hour take numbers, `*`, lists, ranges and steps.")
    if not _MONTH_FIELD.match(month):
        raise _untranslatable("the month takes 1-12 or JAN-DEC, `*`, lists, ranges and steps.")
    expanded = _expanded(expression)
    translated = [_values(expanded[0]), _values(expanded[1])]
    if dow in ("*", "?"):
        translated += [_day_of_month(dom, expanded[2]), _values(expanded[3]), "?"]
    else:
        translated += ["?", _values(expanded[3]), _day_names(dow)]
    text = f"cron({' '.join(translated)} *)"
    if len(text) > MAX_SCHEDULE_EXPRESSION:
        raise _untranslatable(f"the expression takes more than {MAX_SCHEDULE_EXPRESSION} characters on AWS.")
    return text


def _expanded(expression: str) -> list[list[int | str]]:
    try:
        return [list(values) for values in croniter(expression, _A_SUNDAY).expanded]
    except _CRON_ERRORS:
        raise _untranslatable(f"not a valid cron: {expression}.") from None


def _values(values: list[int | str]) -> str:
    """A field croniter expanded (`*`, or its values) in EventBridge's spelling."""
    if any(not isinstance(value, int) for value in values):
        if values == ["*"]:
            return "*"
        raise _untranslatable("the expression uses a value EventBridge Scheduler cannot take.")
    return ",".join(_runs(sorted({int(value) for value in values}), str))


def _day_of_month(dom: str, values: list[int | str]) -> str:
    if dom in ("*", "?"):
        return "*"
    if dom.upper() == "L" or _NEAREST_WEEKDAY.match(dom):
        return dom.upper()
    if not _NUMERIC.match(dom):
        raise _untranslatable(
            "the day of the month takes 1-31, `*`, lists, ranges, steps, L (the last day) or nW."
        )
    return _values(values)


def _day_names(dow: str) -> str:
    """The weekdays a day-of-week field fires on, as SUN-SAT names."""
    if not _DAY_FIELD.match(dow):
        raise _untranslatable(
            "the day of the week takes 0-7 or SUN-SAT, `*`, lists, ranges and steps (not L or #)."
        )
    return ",".join(_runs(sorted(weekdays(dow)), DAY_NAMES.__getitem__))


def weekdays(dow: str) -> set[int]:
    """The weekdays (croniter's numbers: 0 Sunday .. 6 Saturday) a day-of-week field fires on:
    croniter's own walk of one week at midnight, every day of the month admitted."""
    try:
        walk = croniter(f"0 0 * * {dow}", _A_SUNDAY - timedelta(minutes=1))
        days: set[int] = set()
        for _ in range(7):
            fired: datetime = walk.get_next(datetime)
            if fired >= _A_SUNDAY + timedelta(days=7):
                break
            days.add((fired.weekday() + 1) % 7)
    except _CRON_ERRORS:
        raise _untranslatable(f"not a valid day of the week: {dow}.") from None
    return days


def _runs(values: list[int], spell: Callable[[int], str]) -> list[str]:
    """Sorted distinct values as EventBridge list items: three or more consecutive as `a-b`."""
    items: list[str] = []
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and values[end + 1] == values[end] + 1:
            end += 1
        if end - start >= 2:
            items.append(f"{spell(values[start])}-{spell(values[end])}")
        else:
            items.extend(spell(value) for value in values[start : end + 1])
        start = end + 1
    return items


def _untranslatable(reason: str) -> InvalidRequest:
    return InvalidRequest(
        f"The expression cannot run on AWS EventBridge Scheduler: {reason}",
        code="invalid_schedule",
        details={"field": "expression"},
    )
