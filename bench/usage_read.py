"""`GET /v1/usage` for an org with many ledger entries: the read's DynamoDB requests, items,
read units and time, at several entry counts, against reading the entries themselves.

Runs on moto in-process (`mock_aws`), provisioned as the integration tests do. One org's
wallet partition gets `--counters-days` days x `--combos` (model, provider) usage counters
(a busy org: every combination used every day of the current and previous month, written
through `LedgerStore`'s own counter item), then, step by step, ledger entries (the shape
`LedgerStore` writes: charges, releases, reservations) up to each of `--entries`. At each
step `UsageService.report` (wired as the API wires it) runs `--runs` times; a botocore hook on
the shared DynamoDB client counts its requests and the items and bytes they return, and read
units are sized from those items as AWS bills them (4 KB units, strongly consistent; bench/
capacity.py). The naive read (every `ENTRY#` item of the partition, 1 MB pages) is measured
at the same steps for contrast.

Seeding 1,000,000 entries into moto in one process is not practical on the development
machine (memory and minutes), and not needed: the read is a key-range Query
(`sk BETWEEN USAGE#D#<first day> AND USAGE#D#<last day>$`) that DynamoDB answers from the
sort-key index, reading and billing only the items in the range. The figures of record are
therefore the requests, items and read units per read, which this bench shows do not move
with the number of entries. moto's own Query walks the whole partition in Python, so the
time on moto does grow with the entries (reported, with that caveat).

Run from the repository root with
`.venv/bin/python -m bench.usage_read [--entries 0,10000,100000] [--runs 9]`.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from bench.inprocess import provision_in_process
from bench.machine import describe, load_average

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

from batchroute.adapters.aws import client  # noqa: E402
from batchroute.adapters.dynamo.codec import to_item  # noqa: E402
from batchroute.adapters.dynamo.ledger import LedgerStore  # noqa: E402
from batchroute.clock import FixedClock  # noqa: E402
from batchroute.config import get_settings  # noqa: E402
from batchroute.domain.accounts.access import Principal  # noqa: E402
from batchroute.domain.billing.usage import summarize, usage_sort_key  # noqa: E402
from batchroute.ids import new_id  # noqa: E402
from batchroute.wiring import wiring_for  # noqa: E402
from bench.capacity import item_size  # noqa: E402
from tests.integration.principals import new_org  # noqa: E402

NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)
_RRU_BYTES = 4096


@dataclass
class Tally:
    requests: dict[str, int] = field(default_factory=dict)
    items: int = 0
    bytes: int = 0
    rru: float = 0.0

    def count(self, operation: str, items: list[dict[str, Any]]) -> None:
        self.requests[operation] = self.requests.get(operation, 0) + 1
        size = sum(item_size(i) for i in items)
        self.items += len(items)
        self.bytes += size
        # Strongly consistent reads: 1 unit per 4 KB read (at least 1) per request.
        self.rru += max(1, math.ceil(size / _RRU_BYTES))


@contextmanager
def counting() -> Iterator[Tally]:
    """Counts the shared DynamoDB client's requests (and what they return) while active."""
    tally = Tally()
    events = client("dynamodb").meta.events

    def after(http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        items = parsed.get("Items")
        if items is None:
            items = [parsed["Item"]] if "Item" in parsed else []
        tally.count(model.name, items)

    events.register("after-call.dynamodb", after, unique_id="bench-usage")
    try:
        yield tally
    finally:
        events.unregister("after-call.dynamodb", unique_id="bench-usage")


# -- seeding -----------------------------------------------------------------------------------
def seed_counters(ledger: LedgerStore, org_id: str, *, days: int, combos: int) -> int:
    """`days` x `combos` counters ending today, with the attributes the ledger's counter
    update leaves (written as puts: moto's transactions copy the whole table, too slow here)."""
    first = NOW.date() - timedelta(days=days - 1)
    puts = []
    for d in range(days):
        for c in range(combos):
            day, model, provider = (
                (first + timedelta(days=d)).isoformat(),
                f"vendor/model-{c % 10:02}",
                f"p-{c // 10}",
            )
            values = {
                "pk": f"WALLET#{org_id}",
                "sk": usage_sort_key(day, model, provider),
                "kind": "usage_counter",
                "org_id": org_id,
                "day": day,
                "model": model,
                "provider": provider,
                "cost_micros": 1234,
                "input_tokens": 5000,
                "output_tokens": 700,
                "batch_items": 9,
                "chat_requests": 1,
                "updated_at": NOW.isoformat(),
            }
            puts.append({"PutRequest": {"Item": to_item(values)}})
    for start in range(0, len(puts), 25):
        client("dynamodb").batch_write_item(RequestItems={ledger.table_name: puts[start : start + 25]})
    return len(puts)


def seed_entries(ledger: LedgerStore, org_id: str, count: int) -> None:
    """`count` ledger entries shaped as LedgerStore writes them (25 per BatchWriteItem)."""
    kinds = ("reservation", "charge", "release")
    batch: list[dict[str, Any]] = []

    def flush() -> None:
        if batch:
            client("dynamodb").batch_write_item(RequestItems={ledger.table_name: list(batch)})
            batch.clear()

    for n in range(count):
        entry_id = new_id("evt")
        values = {
            "pk": f"WALLET#{org_id}",
            "sk": f"ENTRY#{entry_id}",
            "kind": "ledger_entry",
            "entry_id": entry_id,
            "entry_type": kinds[n % 3],
            "amount_micros": 1000 + n % 997,
            "currency": "usd",
            "memo": f"batch batch_{n:012}",
            "actor": "system",
            "created_at": NOW.isoformat(),
            "reservation_id": f"res_batch_{n // 3:012}",
            "ref": f"batch_{n // 3:012}",
        }
        batch.append({"PutRequest": {"Item": to_item(values)}})
        if len(batch) == 25:
            flush()
    flush()


# -- measuring ---------------------------------------------------------------------------------
@dataclass
class Reading:
    entries: int
    read_ms: float
    sum_ms: float
    requests: dict[str, int]
    items: int
    kib: float
    rru: float
    naive_ms: float
    naive_requests: int
    naive_rru: float


def measure(ledger: LedgerStore, principal: Principal, entries: int, runs: int) -> Reading:
    service = wiring_for(get_settings(), FixedClock(NOW)).usage
    service.report(principal)  # warm-up
    times = []
    tally = Tally()
    for _ in range(runs):
        with counting() as one:
            started = time.perf_counter()
            report = service.report(principal)
            times.append((time.perf_counter() - started) * 1000)
        tally = one
    assert report.current.total.cost_micros > 0
    # Our own share of the read: adding the counters up (the Query's items are parsed already).
    counters = ledger.usage_between(
        principal.org_id, report.previous.window.start.isoformat(), report.current.window.end.isoformat()
    )
    today = NOW.date()
    started = time.perf_counter()
    for _ in range(runs):
        summarize(counters, report.current.window, today=today)
        summarize(counters, report.previous.window, today=today)
    sum_ms = (time.perf_counter() - started) * 1000 / runs
    with counting() as naive:
        started = time.perf_counter()
        read = ledger.entries(principal.org_id, limit=None)
        naive_ms = (time.perf_counter() - started) * 1000
    assert len(read) >= entries  # and the signup credit
    return Reading(
        entries=entries,
        read_ms=statistics.median(times),
        sum_ms=sum_ms,
        requests=tally.requests,
        items=tally.items,
        kib=tally.bytes / 1024,
        rru=tally.rru,
        naive_ms=naive_ms,
        naive_requests=sum(naive.requests.values()),
        naive_rru=naive.rru,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", default="0,10000,100000", help="entry counts to measure at, ascending")
    parser.add_argument("--counters-days", type=int, default=62, help="days of counters (2 months)")
    parser.add_argument("--combos", type=int, default=20, help="(model, provider) pairs used each day")
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    steps = sorted(int(x) for x in args.entries.split(","))
    print(f"machine: {describe()}; load {load_average()}; {date.today().isoformat()}")
    with mock_aws():
        provision_in_process()
        org = new_org(credit_usd="1000")
        ledger = LedgerStore(get_settings().table_name("ledger"))
        principal = Principal(org_id=org.org_id, role="billing", via="api_key", key_id="key_bench")
        counters = seed_counters(ledger, org.org_id, days=args.counters_days, combos=args.combos)
        print(f"counters: {counters} ({args.counters_days} days x {args.combos} model/provider pairs)")
        print(
            f"{'entries':>9} {'read ms':>8} {'sum ms':>6} {'requests':>20} {'items':>6} {'KiB':>7} {'RRU':>5}"
            f" | {'naive ms':>9} {'requests':>8} {'RRU':>7}"
        )
        seeded = 0
        for target in steps:
            started = time.perf_counter()
            seed_entries(ledger, org.org_id, target - seeded)
            seeded = target
            seed_seconds = time.perf_counter() - started
            r = measure(ledger, principal, target, args.runs)
            requests = ", ".join(f"{k} {v}" for k, v in sorted(r.requests.items()))
            print(
                f"{r.entries:>9} {r.read_ms:>8.1f} {r.sum_ms:>6.1f} {requests:>20}"
                f" {r.items:>6} {r.kib:>7.1f} {r.rru:>5.0f}"
                f" | {r.naive_ms:>9.0f} {r.naive_requests:>8} {r.naive_rru:>7.0f}"
                f"   (seeded in {seed_seconds:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
