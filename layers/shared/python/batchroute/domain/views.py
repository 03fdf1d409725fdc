"""A public view read off a record: each key its `TypedDict` declares, from the record's
attribute of the same name; and a record made of another the same way (`made_from`).

The view's `TypedDict` is the one list of its keys: a record's `to_api` names only what it
does not copy as it stands (a key under another name, a nested view, a value computed), so
no second field list stands beside the declaration (issue 28, as `stored.py` does for the
stored forms).
"""

from __future__ import annotations

from dataclasses import fields
from functools import cache
from typing import TypeVar, cast

View = TypeVar("View")  # a TypedDict
Made = TypeVar("Made")  # a dataclass

# Every object the API answers leads with these, where it has them (a base view's keys come
# first otherwise).
_LEADING = {"id": 0, "object": 1}


def view_of(record: object, shape: type[View], /, **given: object) -> View:
    """The view `shape` declares of `record`: each key `given` a value takes it, every
    other key the record's attribute of that name (a key the record lacks is an
    AttributeError, never a silent gap). Keys come in their declared order, a base view's
    first, but for `id` and `object`, which lead; a key `given` that the view does not
    declare is refused. A generic view is named with its arguments
    (`AuditEntryView[Changes]`)."""
    declared: type = getattr(shape, "__origin__", shape)
    keys = _keys(declared)
    unknown = given.keys() - set(keys)
    if unknown:
        raise TypeError(f"{declared.__name__} declares no {', '.join(sorted(unknown))}")
    return cast(View, {key: given[key] if key in given else getattr(record, key) for key in keys})


@cache
def _keys(declared: type) -> tuple[str, ...]:
    """A view's keys in the order it shows them, read off its declaration once."""
    return tuple(sorted(declared.__annotations__, key=lambda key: _LEADING.get(key, len(_LEADING))))


def made_from(source: object, kind: type[Made], /, **given: object) -> Made:
    """The dataclass `kind` made of `source`: each field `given` a value takes it, every
    other field the source's attribute of that name (one the source lacks is an
    AttributeError, even where the field has a default: nothing is left out silently). A
    field `given` that `kind` does not declare is refused, as by its constructor."""
    names = _init_fields(kind)
    unknown = given.keys() - set(names)
    if unknown:
        raise TypeError(f"{kind.__name__} declares no {', '.join(sorted(unknown))}")
    return kind(**{name: given[name] if name in given else getattr(source, name) for name in names})


def _init_fields(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(kind) if f.init)
