"""Cold start before/after: the API handler's import in two checkouts, alternated run by run
so both see the same machine load (bench/RESULTS.md, issue 18).

    .venv/bin/python -m bench.coldstart_compare --before <checkout of main> [--after .] [--runs 9]

Each checkout is imported with its own code on PYTHONPATH and the Lambda environment of
bench/coldstart.py, in a fresh interpreter per run, after one warm-up run of each.
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from bench.coldstart import _PROBE, probe

MODULE = "functions.api.handler"


def import_ms(root: Path) -> float:
    return float(probe(_PROBE.format(module=MODULE), root))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, default=Path.cwd())
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    samples: dict[str, list[float]] = {name: [] for name in trees}
    for root in trees.values():
        import_ms(root)  # warm the file cache
    print("load before:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for _ in range(args.runs):
        for name, root in trees.items():
            samples[name].append(import_ms(root))
    for name, values in samples.items():
        print(
            f"{name:<7} {MODULE} median {statistics.median(values):7.1f} ms  min {min(values):7.1f}  "
            f"max {max(values):7.1f}  n={len(values)}"
        )
    print("load after:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
