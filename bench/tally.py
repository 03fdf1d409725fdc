"""The pipeline bench's counters: kept inside the stack's processes, where the work happens
(moto's requests, the handlers' invocations, the SDK's calls), served as JSON on the stats
path, and compared by the bench between two readings (`diff_rows`).

One `TALLY` a process: moto's (requests, capacity, moto's CPU) in the moto process, the
service's (invocations, SDK calls, egress) in the service process; `bench.stack.Stack.stats`
merges the two readings.
"""

from __future__ import annotations

import threading
from typing import Any


class Tally:
    """Counters kept where the work happens, read by the bench through STATS_PATH. Each table
    maps a key tuple to a row of sums:

    requests     (caller, service, operation) -> requests, billable units, bytes in, bytes out
    dynamodb     (caller, operation) -> write request units, read request units
    invocations  (function, step) -> invocations, messages, wall s, CPU s (pool threads too), longest s
    sdk          (caller, service) -> AWS SDK calls, CPU s in them (client side: serialize, HTTP, parse)
    moto_cpu     (service, operation) -> requests, CPU s moto spent answering them
    egress       (caller, host) -> HTTP requests, bytes sent (request line, headers, body): to the vendors
    """

    TABLES = ("requests", "dynamodb", "invocations", "sdk", "moto_cpu", "egress")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tables: dict[str, dict[tuple[str, ...], list[float]]] = {name: {} for name in self.TABLES}

    def add(self, table: str, key: tuple[str, ...], *values: float) -> None:
        with self.lock:
            row = self.tables[table].setdefault(key, [0.0] * len(values))
            for index, value in enumerate(values):
                row[index] += value

    def invoked(self, key: tuple[str, str], messages: int, wall: float, cpu: float) -> None:
        with self.lock:
            row = self.tables["invocations"].setdefault(key, [0.0] * 5)
            row[0] += 1
            row[1] += messages
            row[2] += wall
            row[3] += cpu
            row[4] = max(row[4], wall)

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {name: [[*k, *v] for k, v in table.items()] for name, table in self.tables.items()}


TALLY = Tally()


def diff_rows(
    after: list[list[Any]], before: list[list[Any]], width: int
) -> dict[tuple[str, ...], list[float]]:
    """One table of two snapshots (rows of `width` key columns, then sums): what was added
    between them, rows that did not change left out."""
    table: dict[tuple[str, ...], list[float]] = {}
    for row in after:
        table[tuple(row[:width])] = [float(v) for v in row[width:]]
    for row in before:
        key = tuple(row[:width])
        if key in table:
            table[key] = [a - float(b) for a, b in zip(table[key], row[width:], strict=True)]
    return {k: v for k, v in table.items() if any(v)}
