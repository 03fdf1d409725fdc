"""The local stack's process gives freed memory back, as separate Lambda processes would.

On AWS each function is its own process, one invocation at a time: what Intake frees is
never counted against a lane running later. Locally every handler, the API and ~20 poller
threads share one process (moto and the vendor emulators have their own), and glibc keeps
what they free: one
malloc arena per thread (up to 8 per core), and freed pages inside each, so the process's
resident size ratchets up to the sum of every phase's peak. Two settings undo that:

- `limit_arenas()`: at most 2 malloc arenas (`mallopt(M_ARENA_MAX, 2)`, what
  `MALLOC_ARENA_MAX=2` does), set before the threads start;
- `trim()`: `malloc_trim(0)`, giving free pages of every arena back to the system; the
  runner calls it every couple of seconds.

Only glibc has them; elsewhere both do nothing. Figures: bench/RESULTS.md (issue #18).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache
from typing import Any, Final

M_ARENA_MAX: Final = -8  # glibc malloc.h
ARENAS: Final = 2
TRIM_EVERY_SECONDS: Final = 2.0


@cache
def _libc() -> Any | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not (hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim")):
        return None  # not glibc (musl, macOS)
    return libc


def limit_arenas(arenas: int = ARENAS) -> bool:
    """True when the limit was set."""
    libc = _libc()
    return libc is not None and libc.mallopt(M_ARENA_MAX, arenas) == 1


def trim() -> bool:
    """True when memory was given back to the system."""
    libc = _libc()
    return libc is not None and libc.malloc_trim(0) == 1
