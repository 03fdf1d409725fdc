"""Ids: a product prefix plus a sortable random suffix (ULID, lowercase)."""

from __future__ import annotations

from datetime import datetime

from ulid import ULID

PREFIXES = (
    "batch",
    "qlock",
    "chatjob",
    "file",
    "org",
    "user",
    "key",
    "sess",
    "evt",
    "lane",
    "aud",
    "dt",
    "sched",  # recurring schedules (docs/schedules.md)
    "regr",  # golden-set regression runs
    "upload",
    "part",
    "topup",
    "wo",  # work orders (docs/work-orders.md)
    "fb",  # feedback (docs/feedback.md)
)


def new_id(prefix: str, at: datetime | None = None) -> str:
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    suffix = ULID.from_datetime(at) if at is not None else ULID()
    return f"{prefix}_{str(suffix).lower()}"


def suffix_of(identifier: str) -> str:
    return identifier.split("_", 1)[1]


def has_prefix(identifier: str, prefix: str) -> bool:
    head, sep, tail = identifier.partition("_")
    return bool(sep) and head == prefix and len(tail) == 26
