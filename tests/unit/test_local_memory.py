"""The local stack gives freed memory back (batchroute_tools/local/memory.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from batchroute_tools.local import memory

_PROBE = textwrap.dedent(
    """
    import json, os, sys
    from batchroute_tools.local import memory

    def rss_mib():
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    before = rss_mib()
    blocks = [bytes(4096) for _ in range(50_000)]  # ~200 MiB of malloc'd (not pymalloc) blocks
    pin = bytes(4096)  # allocated last: the heap's top stays in use, so free() alone cannot shrink it
    peak = rss_mib()
    del blocks
    freed = rss_mib()
    trimmed = memory.trim()
    after = rss_mib()
    print(json.dumps({"before": before, "peak": peak, "freed": freed, "after": after, "trimmed": trimmed}))
    """
)


def test_trim_gives_back_what_was_freed_under_a_pinned_heap_top() -> None:
    # (the stack runs on glibc: Debian, and Lambda's Amazon Linux)
    assert memory._libc() is not None
    # Given a process that allocated ~200 MiB, freed it, but keeps the heap's top block
    run = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True)
    seen = json.loads(run.stdout)
    # Then free() alone kept the pages, and trim() gave them back
    assert seen["peak"] - seen["before"] > 150
    assert seen["freed"] - seen["before"] > 150
    assert seen["trimmed"] is True
    assert seen["after"] - seen["before"] < 30


def test_the_arena_limit_is_set_on_glibc_and_a_no_op_elsewhere() -> None:
    # glibc's mallopt answers 1 when it took the setting; without glibc nothing is called
    assert memory.limit_arenas() is (memory._libc() is not None)
