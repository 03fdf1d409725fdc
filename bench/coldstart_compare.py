"""Cold start before/after: the API handler's import in two checkouts, alternated run by run
so both see the same machine load (bench/RESULTS.md, issue 18).

    .venv/bin/python -m bench.coldstart_compare --before <checkout of main> [--after .] [--runs 9]

Each checkout is imported with its own code on PYTHONPATH and the Lambda environment of
bench/coldstart.py, in a fresh interpreter per run, after one warm-up run of each. Besides the
wall time it prints the median CPU time of the same import (`time.process_time()`), which
other processes on a shared machine inflate less. Run it with bytecode caching on
(`env -u PYTHONDONTWRITEBYTECODE`), as Lambda reads the `.pyc` files of its runtime.
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from bench.coldstart import _PROBE, probe

MODULE = "functions.api.handler"


def import_ms(root: Path) -> tuple[float, float]:
    """The handler's import in `root`: wall and CPU milliseconds."""
    wall, cpu = probe(_PROBE.format(module=MODULE), root).split()
    return float(wall), float(cpu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, default=Path.cwd())
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for root in trees.values():
        import_ms(root)  # warm the file cache
    print("load before:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for _ in range(args.runs):
        for name, root in trees.items():
            samples[name].append(import_ms(root))
    for name, runs in samples.items():
        values = [wall for wall, _ in runs]
        cpu = statistics.median(c for _, c in runs)
        print(
            f"{name:<7} {MODULE} median {statistics.median(values):7.1f} ms  min {min(values):7.1f}  "
            f"max {max(values):7.1f}  n={len(values)}  CPU median {cpu:7.1f} ms"
        )
    print("load after:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
