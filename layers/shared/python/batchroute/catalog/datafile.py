"""Reading the data files shipped in the package: TOML or JSON rows, checked as they become
domain objects.

A bad value fails loudly with a DataError naming the file, the row and the key, e.g.
`lanes.toml, lanes[3] (openai/gpt-4o-mini): price.input: expected a decimal string such as
"0.15", got float 0.15`. Money and other exact figures are decimal strings, never floats. A
key no reader asked for is an error too, so a misspelt optional key cannot silently fall back
to its default. Only `comment` keys are skipped: notes for readers in JSON, which has no
comments.

Only the loaders import this module, on the first use of the data (lazy.py), so a cold start
that never reads the catalog pays nothing for it.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from batchroute.money import is_amount_text

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

S = TypeVar("S", bound=str)
T = TypeVar("T")

COMMENT = "comment"
_MISSING: Any = object()


class DataError(ValueError):
    """A data file is malformed; the message names the file, the row and the key."""


def read_toml(folder: Traversable, name: str) -> Row:
    try:
        data = tomllib.loads((folder / name).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise DataError(f"{name}: {error}") from error
    return Row(data, name)


def read_json(folder: Traversable, name: str) -> Row:
    try:
        data = json.loads((folder / name).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DataError(f"{name}: {error}") from error
    return Row(data, name)


def _kind(value: object) -> str:
    return f"{type(value).__name__} {value!r}"


class Row:
    """One table (TOML) or object (JSON) of a data file, read through typed getters.

    `where` names it in errors (`lanes.toml, lanes[3]`); `close()` checks that every key was read.
    """

    def __init__(self, data: object, where: str, *, prefix: str = "") -> None:
        if not isinstance(data, Mapping):
            raise DataError(f"{where}: {prefix.rstrip('.') or 'row'}: expected a table, got {_kind(data)}")
        self._data: Mapping[str, object] = data
        self._read: set[str] = {COMMENT}
        self._prefix = prefix
        self.where = where

    def fail(self, key: str, message: str) -> NoReturn:
        raise DataError(f"{self.where}: {self._prefix}{key}: {message}")

    def name(self, label: str) -> None:
        """Add what the row describes to `where`, once it is known: `lanes[3] (openai/gpt-4o-mini)`."""
        self.where = f"{self.where} ({label})"

    def extend(self, base: Row, *, link: str) -> Row:
        """This row laid over `base` (minus the `link` key naming it): keys here win, and a
        nested table merges key by key, so a variant lists only what differs."""
        data = dict(base._data)
        for key, value in self._data.items():
            if key == link:
                continue
            base_value = data.get(key)
            if isinstance(value, Mapping) and isinstance(base_value, Mapping):
                value = {**base_value, **value}
            data[key] = value
        return Row(data, self.where, prefix=self._prefix)

    def has(self, key: str) -> bool:
        return key in self._data

    def close(self) -> None:
        unknown = [key for key in self._data if key not in self._read]
        if unknown:
            self.fail(unknown[0], "unknown key (misspelt? see the header of the file for the keys)")

    def _get(self, key: str, default: Any, expected: str, valid: Callable[[Any], bool]) -> Any:
        """The value at `key` (or `default`, returned as it is), failing unless `valid` accepts it."""
        self._read.add(key)
        if key not in self._data:
            if default is _MISSING:
                self.fail(key, f"missing; expected {expected}")
            return default
        value = self._data[key]
        if not valid(value):
            self.fail(key, f"expected {expected}, got {_kind(value)}")
        return value

    def text(self, key: str, default: str = _MISSING) -> str:
        value: str = self._get(
            key, default, "a non-blank string", lambda v: isinstance(v, str) and bool(v.strip())
        )
        return value

    def unique(self, key: str, seen: set[str]) -> str:
        """An id (`slug`) no earlier row of the file has; the row is named after it in errors."""
        value = self.text(key)
        if value in seen:
            self.fail(key, f"{value!r} is listed twice")
        seen.add(value)
        self.name(value)
        return value

    def integer(self, key: str, *, minimum: int = 0, default: int = _MISSING) -> int:
        expected = f"an integer >= {minimum}"
        value: int = self._get(key, default, expected, lambda v: type(v) is int and v >= minimum)
        return value

    def flag(self, key: str, default: bool = _MISSING) -> bool:
        value: bool = self._get(key, default, "true or false", lambda v: isinstance(v, bool))
        return value

    def decimal(self, key: str, default: Decimal = _MISSING) -> Decimal:
        """A non-negative decimal written as a string ("0.15"): exact, never a float."""
        expected = 'a decimal string such as "0.15"'
        value = self._get(key, default, expected, lambda v: isinstance(v, str) and is_amount_text(v))
        return Decimal(value)

    def utc_datetime(self, key: str) -> datetime:
        expected = "a date-time in UTC such as 2026-11-21T10:37:00Z"
        value: datetime = self._get(
            key, _MISSING, expected, lambda v: isinstance(v, datetime) and v.utcoffset() == timedelta(0)
        )
        return value.replace(tzinfo=UTC)

    def day(self, key: str) -> date:
        """A calendar date written as a TOML date (`released = 2024-07-18`), no time of day."""
        expected = "a date such as 2024-07-18"
        value: date = self._get(
            key, _MISSING, expected, lambda v: isinstance(v, date) and not isinstance(v, datetime)
        )
        return value

    def texts(
        self, key: str, default: tuple[str, ...] = _MISSING, *, non_empty: bool = False
    ) -> tuple[str, ...]:
        expected = "a list of non-blank strings, each once" + (", at least one" if non_empty else "")
        value = self._get(key, default, expected, lambda v: _strings(v) and (bool(v) or not non_empty))
        return tuple(value)

    def one_or_more(self, key: str) -> tuple[str, ...]:
        """A string, or a non-empty list of them: `provider = ["edge-eu", "edge-us"]`."""
        if isinstance(self._data.get(key), str):
            return (self.text(key),)
        return self.texts(key, non_empty=True)

    def choice(self, key: str, allowed: tuple[S, ...], default: S = _MISSING) -> S:
        value = self.text(key, default)
        if value not in allowed:
            self.fail(key, f"{value!r} is not one of {', '.join(allowed)}")
        return allowed[allowed.index(value)]  # the same string, typed as one of `allowed`

    def choices(
        self, key: str, allowed: tuple[S, ...], default: tuple[S, ...] = _MISSING, *, non_empty: bool = False
    ) -> tuple[S, ...]:
        values = self.texts(key, default, non_empty=non_empty)
        wrong = [v for v in values if v not in allowed]
        if wrong:
            self.fail(key, f"{wrong[0]!r} is not one of {', '.join(allowed)}")
        return tuple(allowed[allowed.index(v)] for v in values)

    def table(self, key: str) -> Row:
        """A nested table, read with its own getters; errors name it as `key.inner`."""
        value = self._get(key, _MISSING, "a table", lambda v: isinstance(v, Mapping))
        return Row(value, self.where, prefix=f"{self._prefix}{key}.")

    def rows(self, key: str) -> list[Row]:
        """An array of tables (`[[key]]` in TOML), each named `key[index]` in errors."""
        value = self._get(key, _MISSING, "a list of tables", lambda v: isinstance(v, list))
        return [Row(item, f"{self.where}, {key}[{index}]") for index, item in enumerate(value)]

    def each(self, key: str, build: Callable[[Row], T]) -> tuple[T, ...]:
        """`build` applied to each row of the array of tables at `key`; each row is then closed."""
        built: list[T] = []
        for row in self.rows(key):
            built.append(build(row))
            row.close()
        return tuple(built)

    def tables(self, key: str) -> dict[str, Row]:
        """A table of tables keyed by id (`[key."<id>"]` in TOML), each named `key.<id>` in errors."""
        value = self._get(key, _MISSING, "a table of tables", lambda v: isinstance(v, Mapping))
        return {name: Row(item, f"{self.where}, {key}.{name}") for name, item in value.items()}

    def raw(self, key: str) -> dict[str, Any]:
        """A JSON object passed on as it is (a JSON Schema), after checking it is an object."""
        value: dict[str, Any] = self._get(key, _MISSING, "an object", lambda v: isinstance(v, dict))
        return value


def _strings(value: object) -> bool:
    """A list of distinct non-blank strings."""
    return (
        isinstance(value, list)
        and all(isinstance(v, str) and v.strip() for v in value)
        and len(set(value)) == len(value)
    )
