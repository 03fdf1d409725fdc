"""Where the pipeline bench's CPU and memory go, beyond the totals: cProfile on every thread of
the service process (`--profile`), the largest live groups of its traced Python heap
(`--tracemalloc`), and, from the bench's side, the service's and moto's RSS sampled and tagged
with the batch's state.

cProfile runs on each thread's own CPU clock, so time blocked or waiting for the GIL is not
counted; it multiplies the CPU several times, so only the ranking means anything.
"""

from __future__ import annotations

import contextlib
import cProfile
import threading
import time
import tracemalloc
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.machine import MIB, proc_status

if TYPE_CHECKING:
    from bench.stack import Stack

ROOT = Path(__file__).resolve().parent.parent
_BENCH_FILES = str(Path(__file__).resolve().parent / "*")


class ThreadProfiles:
    """cProfile on every thread started from now on (and this one), timed with each thread's
    own CPU clock, so time spent blocked or waiting for the GIL is not counted."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.profiles: list[cProfile.Profile] = []
        self._mark: dict[tuple[str, int, str], list[float]] = {}

    def _start(self, frame: Any, event: str, arg: Any) -> None:
        profile = cProfile.Profile(time.thread_time)
        with self.lock:
            self.profiles.append(profile)
        profile.enable()  # replaces this hook on the thread

    def install(self) -> None:
        threading.setprofile(self._start)
        self._start(None, "call", None)

    def _totals(self) -> dict[tuple[str, int, str], list[float]]:
        """calls, own CPU and CPU with callees per function, summed over the threads."""
        with self.lock:
            profiles = list(self.profiles)
        stats: dict[tuple[str, int, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        for profile in profiles:
            # getstats() reads a profile without stopping it (pstats would disable it).
            for entry in profile.getstats():
                code = entry.code
                if isinstance(code, str):
                    func = ("~", 0, code)
                else:
                    func = (code.co_filename, code.co_firstlineno, code.co_name)
                row = stats[func]
                row[0] += entry.callcount
                row[1] += entry.inlinetime
                row[2] += entry.totaltime
        return stats

    def mark(self) -> None:
        """Report from now on only what happens after this call."""
        self._mark = self._totals()

    def report(self, top: int) -> dict[str, Any]:
        stats = self._totals()
        for func, before in self._mark.items():
            if func in stats:
                stats[func] = [now - then for now, then in zip(stats[func], before, strict=True)]
        with self.lock:
            threads = len(self.profiles)
        total = sum(row[1] for row in stats.values())

        def name(func: tuple[str, int, str]) -> str:
            filename, line, function = func
            for marker in ("site-packages/", str(ROOT) + "/", "/lib/python3.11/"):
                if marker in filename:
                    filename = filename.split(marker, 1)[1]
                    break
            return f"{filename}:{line}({function})"

        def best(rows: Iterable[tuple[tuple[str, int, str], list[float]]], column: int) -> list[Any]:
            ranked = sorted(rows, key=lambda kv: -kv[1][column])[:top]
            return [(name(func), int(row[0]), row[1], row[2]) for func, row in ranked]

        ours = [
            (f, r)
            for f, r in stats.items()
            if f[0].startswith(str(ROOT))
            and not any(p in f[0] for p in ("/bench/", "/.venv/", "site-packages"))
        ]
        packages: dict[str, float] = defaultdict(float)
        for (filename, _line, _function), row in stats.items():
            if "site-packages/" in filename:
                packages[filename.split("site-packages/", 1)[1].split("/", 1)[0]] += row[1]
            elif filename.startswith(str(ROOT)):
                packages["(this repo) " + filename[len(str(ROOT)) + 1 :].split("/", 1)[0]] += row[1]
            else:
                packages["(stdlib and builtins)"] += row[1]
        return {
            "cpu_seconds": total,
            "threads": threads,
            "packages": sorted(packages.items(), key=lambda kv: -kv[1])[:15],
            "self": best(stats.items(), 1),
            "inclusive": best(stats.items(), 2),
            "ours": best(ours, 2),
        }


def heap_top(count: int) -> list[tuple[float, int, str]]:
    """The largest groups of live Python blocks by allocation traceback: MiB, blocks, where
    (the bench's own blocks and tracemalloc's left out)."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, _BENCH_FILES)]
    )
    found = []
    for stat in snapshot.statistics("traceback")[:count]:
        where = " <- ".join(
            f"{Path(frame.filename).name}:{frame.lineno}" for frame in reversed(stat.traceback)
        )
        found.append((stat.size / MIB, stat.count, where))
    return found


class RssWatch:
    """The service and moto processes' RSS every `interval` seconds, tagged with the batch's
    state (and, under --tracemalloc, the Python heap the service process traces)."""

    def __init__(self, stack: Stack, interval: float = 0.25, *, traced: bool = False) -> None:
        self.stack = stack
        self.pid = stack.process.pid
        self.moto_pid = stack.moto_pid
        self.interval = interval
        self.traced = traced
        self.phase = "idle"
        self.peak: dict[str, int] = defaultdict(int)
        self.moto_peak: dict[str, int] = defaultdict(int)
        self.heap_peak: dict[str, int] = defaultdict(int)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            rss = int(proc_status(self.pid).get("VmRSS", 0))
            self.peak[self.phase] = max(self.peak[self.phase], rss)
            rss = int(proc_status(self.moto_pid).get("VmRSS", 0))
            self.moto_peak[self.phase] = max(self.moto_peak[self.phase], rss)
            if self.traced:
                with contextlib.suppress(Exception):
                    current = self.stack.stats(light=1)["traced"]["current"]
                    self.heap_peak[self.phase] = max(self.heap_peak[self.phase], current)

    def __enter__(self) -> RssWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
