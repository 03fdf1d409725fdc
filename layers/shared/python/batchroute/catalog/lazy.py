"""Load-once for the built-in data (catalog and content): kept apart from the loaders so that
importing the packages imports nothing heavier than this."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import wraps
from typing import TypeVar

T = TypeVar("T")


def once(load: Callable[[], T]) -> Callable[[], T]:
    """`load` run on the first call only; every caller, on any thread, gets that one result."""
    lock = threading.Lock()
    result: list[T] = []

    @wraps(load)
    def loaded() -> T:
        if not result:
            with lock:
                if not result:
                    result.append(load())
        return result[0]

    return loaded
