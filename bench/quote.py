"""Quote of a large uploaded file: preflight, routing, pricing and snapshot of N items, timed,
with the quote path's memory measured at two sizes to show it does not grow with the items.

Runs on moto in-process (`mock_aws`), provisioned as the integration tests do. The items
(~`--item-bytes` each, three models: an open-weight model served by six providers, two vendor
models, some items with `required_tools` or a structured-output schema) are generated to a
temporary file, then uploaded as a client would: `start_upload` (signed URL), the PUT of the
bytes to the staging key (with boto3: what the client's PUT does), `complete_upload` (timed:
it streams the file too). Then `QuoteService.quote_model(principal, {"input_file_id": ...})`,
wired as the API wires it, is timed end to end (streaming read from S3, preflight, routing,
pricing, snapshot): one warm-up quote of one inline item first, then `--runs` runs.

The quote streams the file: the file's item profile (docs/files.md, Item profile), which
would let the quote skip reading it, is removed from the record after the upload, as for a
file checked before profiles existed; `--profiled` keeps it (then the quote reads no item).

Memory: one more quote under tracemalloc. moto keeps the object in-process and answers
`get_object` with the whole object as one bytes value (the real S3 streams it over the
network), so the traced peak includes moto's copy. The quote path's own memory is sampled
instead: every N/25 items (and once at the end) a snapshot is taken and its blocks are summed,
leaving out those allocated in moto's code (`*/moto/*`). The set of customer_item_ids that
checks uniqueness is O(items) by design; its size is reported on its own.

Run from the repository root with
`.venv/bin/python -m bench.quote [--items 50000] [--item-bytes 2000] [--compare 10000]`.
Exits 1 when the quote of `--items` items (median of the runs) takes more than `--goal` seconds.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.inprocess import provision_in_process
from bench.items import quote_items, write_jsonl
from bench.machine import describe, load_average

# The local settings, as the tests set them, before any module reads its settings.
for _name, _value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "ENVIRONMENT": "local",
    "POWERTOOLS_METRICS_NAMESPACE": "BatchRoute",
    "POWERTOOLS_TRACE_DISABLED": "1",
    "POWERTOOLS_DEV": "0",
}.items():
    os.environ.setdefault(_name, _value)
os.environ.pop("AWS_ENDPOINT_URL", None)  # moto in-process, never a server

from moto import mock_aws  # noqa: E402

from batchroute.adapters.aws import client, reset_clients  # noqa: E402
from batchroute.adapters.dynamo.files import FileStore  # noqa: E402
from batchroute.adapters.dynamo.lanes import LaneStateStore  # noqa: E402
from batchroute.catalog import builtin_catalog  # noqa: E402
from batchroute.clock import SystemClock  # noqa: E402
from batchroute.config import get_settings  # noqa: E402
from batchroute.domain.accounts.access import Principal  # noqa: E402
from batchroute.domain.batches.files import staging_key  # noqa: E402
from batchroute.domain.batches.preflight import Preflight  # noqa: E402
from batchroute.services.batches import quotes as quotes_module  # noqa: E402
from batchroute.services.batches.files import FileService  # noqa: E402
from batchroute.services.batches.quotes import QuoteService  # noqa: E402
from batchroute.services.catalog.lane_health import SimulatedProviderHealth, refresh_lane_heartbeats  # noqa: E402
from batchroute.wiring import wiring_for  # noqa: E402
from tests.integration.principals import new_org  # noqa: E402

GOAL_SECONDS = 10.0
SAMPLES_PER_RUN = 25
MB = 1024 * 1024
_MOTO = f"{os.sep}moto{os.sep}"
_OWN = {__file__, tracemalloc.__file__}
FLAT_MARGIN_BYTES = 2 * 1024 * 1024  # sampling noise: a chunk and its parsed lines
TRACE_FRAMES = 4  # enough to see moto under its S3 read (tempfile <- moto)

# -- the stack -----------------------------------------------------------------------------------


@dataclass
class Stack:
    files: FileService
    quotes: QuoteService
    principal: Principal


def heartbeat_lanes() -> None:
    store = LaneStateStore(get_settings().table_name("controls"))
    refresh_lane_heartbeats(builtin_catalog(), store, SimulatedProviderHealth(), SystemClock())


def start_stack() -> Stack:
    """Provision (inside an active mock_aws), point the settings at it, make an org."""
    provision_in_process()
    heartbeat_lanes()
    org = new_org(credit_usd="1000")
    wiring = wiring_for(get_settings(), SystemClock())
    return Stack(
        wiring.files,
        wiring.quotes(),
        Principal(org_id=org.org_id, role="member", via="api_key", key_id="key_bench"),
    )


@dataclass
class Upload:
    file_id: str
    put_seconds: float
    confirm_seconds: float
    item_count: int


def upload(stack: Stack, path: Path, size: int) -> Upload:
    """The signed-URL path: start, PUT the bytes to the staging key, confirm."""
    org_id = stack.principal.org_id
    signed = stack.files.start_upload(org_id, filename=path.name, declared_bytes=size)
    file_id = signed.file.file_id
    started = time.perf_counter()
    with path.open("rb") as body:
        client("s3").put_object(
            Bucket=get_settings().buckets["uploads"],
            Key=staging_key(org_id, file_id),
            Body=body,
            ContentType=signed.headers["Content-Type"],
        )
    put_seconds = time.perf_counter() - started
    started = time.perf_counter()
    record = stack.files.complete_upload(org_id, file_id)
    if record.status == "uploaded":  # a large file's checks are queued: run them here, as the router does
        record = stack.files.check_upload(org_id, file_id)
    confirm_seconds = time.perf_counter() - started
    if record.status != "processed":
        raise SystemExit(f"upload not processed: {record.status} {record.error}")
    return Upload(file_id, put_seconds, confirm_seconds, record.item_count)


# -- measuring -----------------------------------------------------------------------------------


def quote_once(stack: Stack, file_id: str, count: int) -> float:
    heartbeat_lanes()  # every lane live, whatever the time since the last quote
    started = time.perf_counter()
    quote = stack.quotes.quote_model(stack.principal, {"input_file_id": file_id})
    seconds = time.perf_counter() - started
    if not quote["preflight"]["ok"] or quote["item_count"] != count:
        raise SystemExit(f"unexpected quote: {quote['item_count']} items, {quote['preflight']}")
    return seconds


@dataclass
class Memory:
    quote_path_peak: int  # largest sampled sum of non-moto blocks
    traced_peak: int  # tracemalloc's own peak: everything, moto's copy of the object included
    id_set: int  # the customer_item_id uniqueness map at the end of the items
    samples: int


class _Sampler:
    """The quote path's traced bytes, summed now and then while the items stream."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.peak = 0
        self.samples = 0
        self._excluded: dict[tracemalloc.Traceback, bool] = {}

    def sample(self) -> None:
        stats = tracemalloc.take_snapshot().statistics("traceback")
        self.peak = max(self.peak, sum(stat.size for stat in stats if not self._skip(stat.traceback)))
        self.samples += 1

    def _skip(self, traceback: tracemalloc.Traceback) -> bool:
        """moto's blocks (moto anywhere on the stack: its copy of the object is allocated in
        tempfile, called from moto) and the measuring's own."""
        skip = self._excluded.get(traceback)
        if skip is None:
            skip = any(_MOTO in frame.filename for frame in traceback) or traceback[-1].filename in _OWN
            self._excluded[traceback] = skip
        return skip

    def wrap(self, open_items: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
        def sampled(*args: Any, **kwargs: Any) -> Iterator[Any]:
            for count, parsed in enumerate(open_items(*args, **kwargs), start=1):
                yield parsed
                if count % self.every == 0:
                    self.sample()
            self.sample()

        return sampled


def measure_memory(stack: Stack, file_id: str, item_count: int) -> Memory:
    seen: list[Any] = []

    class RecordingPreflight(Preflight):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            seen.append(self)

    sampler = _Sampler(every=max(1, item_count // SAMPLES_PER_RUN))
    original_open = stack.files.open_items
    # Bench-only wrapping: the sampler sees every item as the quote reads it, and the
    # preflight the quote builds is kept to size its id set afterwards.
    setattr(stack.files, "open_items", sampler.wrap(original_open))  # noqa: B010
    setattr(quotes_module, "Preflight", RecordingPreflight)  # noqa: B010
    heartbeat_lanes()
    tracemalloc.start(TRACE_FRAMES)
    try:
        stack.quotes.quote_model(stack.principal, {"input_file_id": file_id})
        traced_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        setattr(stack.files, "open_items", original_open)  # noqa: B010
        setattr(quotes_module, "Preflight", Preflight)  # noqa: B010
    ids: dict[str, int] = seen[-1]._ids
    id_set = sys.getsizeof(ids) + sum(
        sys.getsizeof(k) + (sys.getsizeof(v) if v > 256 else 0) for k, v in ids.items()
    )
    return Memory(sampler.peak, traced_peak, id_set, sampler.samples)


@dataclass
class Result:
    items: int
    file_bytes: int
    upload: Upload
    seconds: list[float]
    memory: Memory | None

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def forget_profile(file_id: str) -> None:
    """The file as one checked before item profiles existed: its quotes stream it."""
    store = FileStore(get_settings().table_name("batches"))
    record = store.get(file_id)
    if record is not None and record.item_profile is not None:
        store.replace(replace(record, item_profile=None), expected_status=record.status)


def bench_size(
    stack: Stack,
    count: int,
    item_bytes: int,
    runs: int,
    *,
    memory: bool,
    folder: Path,
    profiled: bool = False,
) -> Result:
    path = folder / f"items-{count}.jsonl"
    size = write_jsonl(path, quote_items(count, item_bytes))
    try:
        uploaded = upload(stack, path, size)
    finally:
        path.unlink()
    if uploaded.item_count != count:
        raise SystemExit(f"the file holds {uploaded.item_count} items, not {count}")
    if not profiled:
        forget_profile(uploaded.file_id)
    seconds = [quote_once(stack, uploaded.file_id, count) for _ in range(runs)]
    measured = measure_memory(stack, uploaded.file_id, count) if memory else None
    return Result(count, size, uploaded, seconds, measured)


def profile(stack: Stack, file_id: str, top: int) -> None:
    heartbeat_lanes()
    profiler = cProfile.Profile()
    profiler.enable()
    stack.quotes.quote_model(stack.principal, {"input_file_id": file_id})
    profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(top)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=50_000, help="items of the goal size")
    parser.add_argument("--item-bytes", type=int, default=2_000, help="approximate bytes per JSONL line")
    parser.add_argument("--compare", type=int, default=10_000, help="a smaller size for memory (0: skip)")
    parser.add_argument("--runs", type=int, default=3, help="timed quotes per size (median reported)")
    parser.add_argument("--goal", type=float, default=GOAL_SECONDS, help="seconds for the --items quote")
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile one quote, top N")
    parser.add_argument("--profiled", action="store_true", help="keep the file's item profile (no item read)")
    args = parser.parse_args()

    print(f"machine: {describe()}")
    print(f"load average before: {load_average()}")
    sizes = sorted({n for n in (args.compare, args.items) if n > 0})
    results: list[Result] = []
    with mock_aws(), tempfile.TemporaryDirectory() as folder:
        stack = start_stack()
        # Warm-up: imports, the catalog and the clients, as a warm Lambda has them.
        warm = {"items": list(quote_items(1, args.item_bytes))}
        stack.quotes.quote_model(stack.principal, warm)
        for count in sizes:
            result = bench_size(
                stack,
                count,
                args.item_bytes,
                args.runs,
                memory=not args.no_memory,
                folder=Path(folder),
                profiled=args.profiled,
            )
            results.append(result)
            if args.profile and count == args.items:
                profile(stack, result.upload.file_id, args.profile)
        reset_clients()
    print(f"load average after:  {load_average()}")

    print()
    print(
        f"{'items':>7}{'file MB':>9}{'confirm s':>11}{'quote s':>9}{'min s':>7}{'items/s':>9}"
        f"{'path peak MiB':>15}{'id set MiB':>12}{'traced peak MiB':>17}"
    )
    for r in results:
        mem = r.memory
        path_peak = f"{mem.quote_path_peak / MB:>15.1f}" if mem else f"{'-':>15}"
        id_set = f"{mem.id_set / MB:>12.1f}" if mem else f"{'-':>12}"
        traced = f"{mem.traced_peak / MB:>17.1f}" if mem else f"{'-':>17}"
        print(
            f"{r.items:>7}{r.file_bytes / 1e6:>9.1f}{r.upload.confirm_seconds:>11.2f}{r.median:>9.2f}"
            f"{min(r.seconds):>7.2f}{r.items / r.median:>9.0f}{path_peak}{id_set}{traced}"
        )
    print(
        f"(quote s: median of {args.runs} runs; PUT to moto not counted: "
        + ", ".join(f"{r.items}: {r.upload.put_seconds:.2f} s" for r in results)
        + ")"
    )

    goal = next(r for r in results if r.items == args.items)
    failed = goal.median > args.goal
    verdict = "ok" if not failed else "MISSED"
    print(f"\n{args.items} items in {goal.median:.2f} s (median): <= {args.goal:g} s {verdict}")
    small = next((r for r in results if r.items != args.items), None)
    if small and small.memory and goal.memory:
        grown = goal.memory.quote_path_peak - small.memory.quote_path_peak
        ids_grown = goal.memory.id_set - small.memory.id_set
        print(
            f"quote path peak {small.memory.quote_path_peak / MB:.1f} MiB at {small.items} -> "
            f"{goal.memory.quote_path_peak / MB:.1f} MiB at {goal.items} items (+{grown / MB:.1f} MiB, "
            f"of which the id set +{ids_grown / MB:.1f} MiB); without the id set "
            f"{(small.memory.quote_path_peak - small.memory.id_set) / MB:.1f} -> "
            f"{(goal.memory.quote_path_peak - goal.memory.id_set) / MB:.1f} MiB"
        )
        rest = (goal.memory.quote_path_peak - goal.memory.id_set) - (
            small.memory.quote_path_peak - small.memory.id_set
        )
        flat = rest <= FLAT_MARGIN_BYTES
        shape = "flat" if flat else "GROWS"
        print(f"memory apart from the id set: {shape} ({rest / MB:+.1f} MiB, margin 2 MiB)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
