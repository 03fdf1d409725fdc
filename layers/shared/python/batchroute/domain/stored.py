"""A record stored field for field, read back: each field of its dataclass under its own name.

The dataclass is the one list of a record's fields: a store writes `dataclasses.asdict`
of it and reads it back here, with no second field list declared beside it (issue 28).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, asdict, fields
from typing import Any, SupportsInt, TypeVar, cast, get_args

Record = TypeVar("Record")


def from_stored(kind: type[Record], item: Mapping[str, object], /, **converted: object) -> Record:
    """The record a stored item holds: keys that are not fields (the store's own) are left
    out, an absent field takes its default, or None when it may be None (a store writes no
    null); `converted` overrides values the store reads back in another type (a whole
    number comes back from DynamoDB as Decimal)."""
    every = fields(cast(Any, kind))
    kept = {f.name: item[f.name] for f in every if f.name in item}
    unwritten = {f.name: None for f in every if f.name not in item and _none_unless_given(f)}
    return cast(Callable[..., Record], kind)(**{**unwritten, **kept, **converted})


def sparse(record: object) -> dict[str, Any]:
    """`dataclasses.asdict` of a record (a dataclass) less its fields that hold their declared
    default: what a store writes where an unset field stays absent (`from_stored` reads it
    back)."""
    values = asdict(cast(Any, record))
    return {
        f.name: values[f.name]
        for f in fields(cast(Any, record))
        if f.default is MISSING or getattr(record, f.name) != f.default
    }


def _none_unless_given(f: Field[Any]) -> bool:
    return _nullable(f) and f.default is MISSING and f.default_factory is MISSING


def _nullable(f: Field[Any]) -> bool:
    """The field is annotated `... | None` (as text where its module postpones annotations)."""
    if isinstance(f.type, str):
        return f.type.replace(" ", "").endswith("|None")
    return type(None) in get_args(f.type)


def from_counters(kind: type[Record], item: Mapping[str, object], /, **converted: object) -> Record:
    """A record of counters read back: each whole-number field an int (DynamoDB gives them
    back as Decimal), absent or null 0; its other fields from `converted`, else their
    defaults."""
    counts = {
        f.name: int(cast(SupportsInt, item.get(f.name) or 0))
        for f in fields(cast(Any, kind))
        if f.type in ("int", int) and f.name not in converted
    }
    return cast(Callable[..., Record], kind)(**counts, **converted)
