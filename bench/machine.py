"""The machine and its processes as every bench reports them: the `machine:` line a report
opens with, the load average, and a process's memory and CPU read from /proc.

Figures from this machine are only comparable with the machine and its load beside them
(other sessions share its cores), so each bench prints both before and after its run.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import time

MIB = 1024 * 1024


def describe() -> str:
    """`x86_64 2 cores, Python 3.11.7, CPU probe 61.3 ms`: what follows `machine:` in every
    report."""
    return (
        f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"CPU probe {cpu_probe_ms():.1f} ms"
    )


def cpu_probe_ms(rounds: int = 5) -> float:
    """CPU milliseconds of one fixed pure-Python workload (arithmetic, dicts, JSON), the median
    of `rounds`: how fast this machine's CPU is right now.

    The machine is a VM whose CPU speed varies with its host's load, which the load average
    does not show (bench/RESULTS.md, issue 30: the same code 2-3x slower on an idle machine).
    CPU time, not wall time, so other processes on the machine's own cores do not count;
    two runs' figures are comparable only when their probes are close."""
    document = {"items": [{"id": n, "name": f"item-{n}", "tokens": n * 7} for n in range(200)]}
    times = []
    for _ in range(rounds):
        started = time.process_time()
        total = 0
        for n in range(200_000):
            total += n * n % 7
        table = {f"k{n}": n for n in range(50_000)}
        total += sum(table[f"k{n}"] for n in range(0, 50_000, 3))
        for _ in range(50):
            total += len(json.loads(json.dumps(document)))
        times.append((time.process_time() - started) * 1000)
    return statistics.median(times)


def load_average() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "n/a"


def proc_status(pid: int | str = "self") -> dict[str, float]:
    """VmHWM and VmRSS (bytes) and CPU seconds (user + system) of a process."""
    found: dict[str, float] = {}
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmHWM", "VmRSS"):
                found[name] = int(value.split()[0]) * 1024
    with (
        contextlib.suppress(OSError, ValueError, IndexError),
        open(f"/proc/{pid}/stat", encoding="ascii") as stat,
    ):
        fields = stat.read().rsplit(")", 1)[1].split()
        found["cpu_seconds"] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


def children(pid: int) -> dict[int, str]:
    """The child processes of `pid` (of any of its threads), each with its command line."""
    found: dict[int, str] = {}
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with (
                contextlib.suppress(OSError),
                open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as listed,
            ):
                for child in listed.read().split():
                    with contextlib.suppress(OSError), open(f"/proc/{child}/cmdline", "rb") as command:
                        found[int(child)] = command.read().replace(b"\0", b" ").decode(errors="replace")
    return found
