"""What the pipeline bench prints: one `Run` (what one size measured) per size, as a block of
time, memory and requests per item with their list-price cost (`print_run`), optionally every
request type, handler step, SDK call and moto operation (`print_breakdown`, `--breakdown`),
the CPU profile (`--profile`) and the traced heap (`--tracemalloc`); then a table of all sizes
and the verdicts against the goals (`print_summary`).

The goals (issue 5): 100,000 items end to end within `GOAL_SECONDS`, and AWS requests within
`GOAL_USD_PER_M_ITEMS` per 1M items.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.aws_requests import PRICE, Costs, costs
from bench.machine import MIB
from bench.tally import diff_rows

GOAL_SECONDS = 300.0
GOAL_SIZE = 100_000
GOAL_USD_PER_M_ITEMS = 0.10


@dataclass
class Run:
    items: int
    file_bytes: int
    ready_seconds: float
    upload_seconds: float
    create_seconds: float  # the POST /v1/batches request
    completed_seconds: float  # create request sent -> batch state completed (seen by polling)
    record_seconds: float  # created_at -> completed_at on the batch record
    execution_seconds: float  # create request sent -> execution ended
    state_times: dict[str, float]
    lanes: int
    transitions: int
    baseline: dict[str, Any]
    after_upload: dict[str, Any]
    final: dict[str, Any]
    rss_by_phase: dict[str, int]
    hwm: int
    baseline_rss: int
    moto_hwm: int = 0
    moto_baseline_rss: int = 0
    moto_rss_by_phase: dict[str, int] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    heap_by_phase: dict[str, int] = field(default_factory=dict)
    record_sizes: dict[str, int] = field(default_factory=dict)
    heap_tops: dict[str, Any] = field(default_factory=dict)


def _moto_mib(run: Run) -> float:
    """What moto holds in memory at the end: S3 objects not spilled to disk, DynamoDB items."""
    moto = run.final.get("moto") or {}
    return float(moto.get("s3_memory_bytes", 0) + moto.get("dynamodb_bytes", 0)) / MIB


def print_run(run: Run, plain: bool) -> Costs | None:
    print(f"\n== {run.items:,} items ({run.file_bytes / 1e6:.1f} MB file, {run.lanes} lanes) ==")
    rate = run.items / run.completed_seconds
    print(
        f"stack ready {run.ready_seconds:.1f} s; upload {run.upload_seconds:.1f} s; create request "
        f"{run.create_seconds:.1f} s; create -> completed {run.completed_seconds:.1f} s "
        f"({rate:,.0f} items/s; record created_at -> completed_at {run.record_seconds:.1f} s); "
        f"execution ended at {run.execution_seconds:.1f} s"
    )
    print("state first seen at: " + ", ".join(f"{k} {v:.1f} s" for k, v in run.state_times.items()))
    sizes = run.record_sizes
    print(
        f"DynamoDB records at the end: batch META {sizes['batch'] / 1024:.1f} KB (its `plan` "
        f"{sizes['plan'] / 1024:.1f} KB), largest lane record {sizes['lane_max'] / 1024:.1f} KB"
    )
    moto = run.final.get("moto") or {}

    def phases(peaks: dict[str, int]) -> str:
        return ", ".join(f"{k} {v / MIB:.0f}" for k, v in peaks.items())

    print(
        f"memory, service process (API, pollers, handlers): VmHWM {run.hwm / MIB:.0f} MiB; RSS "
        f"before the upload {run.baseline_rss / MIB:.0f} MiB; peak RSS (MiB) by batch state: "
        f"{phases(run.rss_by_phase)}"
    )
    print(
        f"memory, moto process: VmHWM {run.moto_hwm / MIB:.0f} MiB; RSS before the upload "
        f"{run.moto_baseline_rss / MIB:.0f} MiB; peak RSS (MiB) by batch state: "
        f"{phases(run.moto_rss_by_phase)}"
    )
    emulators = run.final.get("emulators_process") or {}
    spool = run.final.get("emulator_spool")
    on_disk = (
        f"; their batch files on disk at the end: {spool['files']} files, {spool['bytes'] / MIB:.1f} MiB"
    )
    print(
        f"memory, vendor emulators' process: VmHWM {emulators.get('VmHWM', 0) / MIB:.0f} MiB"
        + (on_disk if spool is not None else "")
    )
    if run.cpu:
        print(
            f"CPU from the upload to the end: service process {run.cpu['stack']:.1f} s, "
            f"moto process {run.cpu['moto']:.1f} s, vendor emulators' process {run.cpu['emulators']:.1f} s"
        )
    if moto:
        print(
            f"moto holds at the end: S3 {moto['s3_objects']} objects, "
            f"{moto['s3_memory_bytes'] / MIB:.1f} MiB in memory + {moto['s3_disk_bytes'] / MIB:.1f} MiB "
            f"spilled to disk; DynamoDB {moto['dynamodb_items']} items, "
            f"{moto['dynamodb_bytes'] / MIB:.1f} MiB  (in memory: {_moto_mib(run):.1f} MiB)"
        )
    if plain:
        return None
    cost = costs(run.final, run.baseline, items=run.items, transitions=run.transitions)
    print(f"{'service':<24}{'req/item':>10}{'units/item':>12}{'unit':>6}{'$ per 1M items':>16}")
    for name, req, units, dollars, unit in cost.rows:
        print(f"{name:<24}{req:>10.4f}{units:>12.4f}{unit:>6}{dollars:>16.4f}")
    print(f"{'total (requests)':<52}{cost.total:>16.4f}")
    print(
        f"Lambda duration, not in the total: handler wall time x memory {cost.gb_seconds:.1f} GB-s = "
        f"${cost.gb_second_cost:.4f} per 1M items (2 shared cores: an upper bound); handler CPU x memory "
        f"{cost.cpu_gb_seconds:.1f} GB-s = "
        f"${cost.cpu_gb_seconds * PRICE['lambda_gb_second'] * 1e6 / run.items:.4f} (a floor)"
    )
    return cost


def print_breakdown(run: Run) -> None:
    def diff(name: str, width: int) -> dict[tuple[str, ...], list[float]]:
        return diff_rows(run.final.get(name, []), run.baseline.get(name, []), width)

    requests, capacity = diff("requests", 3), diff("dynamodb", 2)
    print(f"requests by caller, service, operation ({run.items:,} items; WRU/RRU for DynamoDB):")
    for (caller, service, op), (n, units, _bytes_in, _bytes_out) in sorted(
        requests.items(), key=lambda kv: (kv[0][1], -kv[1][0])
    ):
        extra = ""
        if service == "dynamodb":
            wru, rru = capacity.get((caller, op), [0.0, 0.0])
            extra = f"  WRU {wru:,.0f}  RRU {rru:,.1f}"
        elif service == "sqs":
            extra = f"  units {units:,.0f}"
        print(f"  {caller:<16}{service:<14}{op:<28}{n:>9,.0f}{extra}")
    longest = {tuple(row[:2]): row[-1] for row in run.final.get("invocations", [])}
    print(
        "handler invocations (function, step: invocations, messages, wall s, CPU s with its pool "
        "threads, longest):"
    )
    for (function, step), (n, messages, wall, cpu, _) in sorted(diff("invocations", 2).items()):
        print(
            f"  {function:<10}{step:<12}{n:>6,.0f}{messages:>8,.0f}{wall:>10.1f} s{cpu:>10.1f} s"
            f"{longest.get((function, step), 0):>9.1f} s"
        )
    handlers = sum(v[3] for v in diff("invocations", 2).values())
    service_cpu = run.cpu.get("stack", 0.0)
    print(
        f"  (service process CPU {service_cpu:.1f} s: handlers {handlers:.1f} s, the rest "
        f"{service_cpu - handlers:.1f} s: API, pollers, sweeper)"
    )
    print("AWS SDK calls, client side (caller, service: calls, CPU s):")
    for (caller, service), (n, cpu) in sorted(diff("sdk", 2).items(), key=lambda kv: -kv[1][1])[:12]:
        print(f"  {caller:<16}{service:<14}{n:>9,.0f}{cpu:>9.1f} s")
    print("moto's CPU per request (service, operation: requests, CPU s, ms each):")
    for (service, op), (n, cpu) in sorted(diff("moto_cpu", 2).items(), key=lambda kv: -kv[1][1])[:14]:
        print(f"  {service:<18}{op:<28}{n:>9,.0f}{cpu:>9.1f} s{1000 * cpu / max(n, 1):>9.2f}")


def print_profile(run: Run, top: int) -> None:
    profile = run.final.get("profile")
    if not profile:
        return
    total = max(profile["cpu_seconds"], 1e-9)
    print(
        "\nprofile of the service process from the upload to the end: cProfile on every thread "
        f"({profile['threads']} threads) with a per-thread CPU clock; {total:.1f} CPU s in Python functions"
    )
    print("  own CPU by package:")
    for package, seconds in profile["packages"]:
        print(f"    {seconds:>8.1f} s {100 * seconds / total:>5.1f}%  {package}")
    for title, key in (
        ("own CPU (tottime)", "self"),
        ("CPU with callees (cumtime)", "inclusive"),
        ("this repository's functions, CPU with callees", "ours"),
    ):
        print(f"  {title}:")
        for name, calls, own, cumulative in profile[key][:top]:
            print(f"    {own:>8.1f} s own {cumulative:>8.1f} s cum {calls:>10,} calls  {name}")


def print_heap(run: Run) -> None:
    print(
        "traced Python heap, peak by phase (MiB): "
        + ", ".join(f"{k} {v / MIB:.0f}" for k, v in run.heap_by_phase.items())
    )
    for phase, traced in run.heap_tops.items():
        print(
            f"  live blocks at {phase} ({traced['current'] / MIB:.0f} MiB traced; "
            f"peak {traced['peak'] / MIB:.0f}):"
        )
        for mib, blocks, where in traced.get("top", []):
            print(f"    {mib:>8.1f} MiB {blocks:>9,} blocks  {where}")


def print_summary(results: list[tuple[Run, Costs | None]], goal: float) -> bool:
    """The table of all sizes and the verdicts; True when a size of `GOAL_SIZE` items or more
    took longer than `goal` seconds per `GOAL_SIZE` items."""
    print(
        f"\n{'items':>8}{'create->done s':>16}{'items/s':>9}{'VmHWM MiB':>11}{'+MiB':>7}"
        f"{'moto MiB':>10}{'$/1M items':>12}"
    )
    for run, cost in results:
        dollars = f"{cost.total:>12.4f}" if cost else f"{'-':>12}"
        held = f"{_moto_mib(run):>10.1f}" if run.final.get("moto") else f"{'-':>10}"
        print(
            f"{run.items:>8}{run.completed_seconds:>16.1f}{run.items / run.completed_seconds:>9,.0f}"
            f"{run.hwm / MIB:>11.0f}{(run.hwm - run.baseline_rss) / MIB:>7.0f}{held}{dollars}"
        )
    failed = False
    runs = [run for run, _ in results]
    big = [r for r in runs if r.items >= GOAL_SIZE]
    if big:
        worst = max(r.completed_seconds * GOAL_SIZE / r.items for r in big)
        ok = worst <= goal
        failed |= not ok
        print(f"\n100,000 items in {worst:.1f} s: <= {goal:.0f} s {'ok' if ok else 'MISSED'}")
    else:
        rate = min(r.items / r.completed_seconds for r in runs)
        print(
            f"\n100,000 items not run; at the slowest rate measured ({rate:,.0f} items/s): "
            f"~{GOAL_SIZE / rate:.0f} s"
        )
    for run, cost in results:
        if cost is not None:
            verdict = "ok" if cost.total <= GOAL_USD_PER_M_ITEMS else "MISSED"
            print(
                f"AWS requests of {run.items:,}-item batches: ${cost.total:.4f} per 1M items: "
                f"<= ${GOAL_USD_PER_M_ITEMS:.2f} {verdict}"
            )
    return failed
