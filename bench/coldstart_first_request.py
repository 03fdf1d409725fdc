"""Without SnapStart, what the first request of an area adds to the API's init: the import of
the route modules its path reaches (functions/api/lazy_routes.py), and of every module.

    .venv/bin/python -m bench.coldstart_first_request [--runs 5] [PATH ...]

Each run is a fresh interpreter with the Lambda environment of bench/coldstart.py; the
figures are the median of the runs, in ms.
"""

from __future__ import annotations

import argparse
import os
import statistics

from bench.coldstart import probe

_PROBE = (
    "import importlib, time; t = time.perf_counter(); import functions.api.handler; "
    "from functions.api.lazy_routes import PACKAGE, modules_for, route_modules; "
    "a = time.perf_counter(); "
    "[importlib.import_module(f'{{PACKAGE}}.{{m}}') for m in modules_for({path!r})]; "
    "b = time.perf_counter(); "
    "[importlib.import_module(f'{{PACKAGE}}.{{m}}') for m, _ in route_modules()]; "
    "c = time.perf_counter(); "
    "print((a - t) * 1000, (b - a) * 1000, (c - t) * 1000)"
)
PATHS = ("/v1/chat/completions", "/v1/batches", "/v1/health")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("paths", nargs="*", default=list(PATHS))
    args = parser.parse_args()
    print("load before:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"{'first request of':<24}{'init':>8}{'+ area':>9}{'init + all':>12}")
    for path in args.paths:
        probe(_PROBE.format(path=path))  # warm the file cache
        runs = [[float(x) for x in probe(_PROBE.format(path=path)).split()] for _ in range(args.runs)]
        init, area, every = (statistics.median(run[i] for run in runs) for i in range(3))
        print(f"{path:<24}{init:>8.0f}{area:>9.0f}{every:>12.0f}")
    print("load after:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
