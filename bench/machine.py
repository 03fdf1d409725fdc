"""The machine and its processes as every bench reports them: the `machine:` line a report
opens with, the load average, and a process's memory and CPU read from /proc.

Figures from this machine are only comparable with the machine and its load beside them
(other sessions share its cores), so each bench prints both before and after its run.
"""

from __future__ import annotations

import contextlib
import os
import platform

MIB = 1024 * 1024


def describe() -> str:
    """`x86_64 2 cores, Python 3.11.7`: what follows `machine:` in every report."""
    return f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}"


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
