"""The whole AWS bill of a batch per 1M items (issue 30, point 4): one measured pipeline run
per size (`bench.pipeline.run_size`, the same stack and counters), priced line by line.

Lines, each in $ per 1M items:

- AWS requests, as `bench.aws_requests` counts them at the moto server: DynamoDB request
  units, S3 requests, SQS requests (64 KB chunks), Step Functions state transitions (Standard
  workflows), Lambda requests (the handlers' invocations and the API's requests) and API
  Gateway's requests (upload start, upload complete, quote, create);
- Lambda duration: each function's measured handler **wall** time (all its invocations) x its
  configured memory (`batchroute.resources.FUNCTIONS`, which the CDK app deploys: one source).
  Wall time because Lambda bills the handler's elapsed time (rounded up to 1 ms), CPU or not.
  Measured locally under the load noted with the run: two shared cores, moto and the vendor
  emulators on the same machine (each in a process of its own), so the figure depends on
  load; and the emulators answer at once, so the time a handler waits for a real vendor is
  not in it;
- S3 storage: the bytes a batch leaves in the buckets at the end of the run, by kind. All of
  `batches/<id>/` but the receipt (input chunks, lane results, partial results, the results
  and errors files and their index) is reclaimed after the retention window (the default
  `grace_only`: `retention_grace_hours`, 72 h, docs/retention.md); the uploaded input file
  (`files/`) and the receipt are kept until deleted and are priced for `KEPT_MONTHS` month(s);
- DynamoDB storage: the bytes the batch's records add to the tables (item size + 100 bytes
  each), kept for good (records, ledger): priced for `KEPT_MONTHS` month(s);
- data transfer to the vendors: the bytes the handlers send over HTTP (request line, headers,
  body as its Content-Length gives it: a streamed body without one is not counted), billed by
  AWS as data transfer out to the internet.

Not in the model (not measured here): CloudWatch Logs and X-Ray traces, S3 server access
logs, the API function's duration (four requests a batch), KMS (the tables and buckets use AWS
owned keys), the free tiers.

Run from the repository root: `.venv/bin/python -m bench.cost_model [--sizes 10000,100000,1000000]`
(`make bench-cost`). The arithmetic (`Usage` -> `lines`) is pure and unit tested.
"""

from __future__ import annotations

import json
import signal
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from batchroute import resources
from batchroute.config import Settings
from bench.aws_requests import (
    API_REQUESTS,
    FUNCTION_MEMORY_MB,
    PRICE,
    PRICES_AS_OF,
    UNCOUNTED_CALLERS,
    costs,
)
from bench.machine import MIB, describe, load_average
from bench.report import Run
from bench.tally import diff_rows

GOAL_USD_PER_M_ITEMS = 0.25
GIB = 2**30
HOURS_PER_MONTH = 730.0  # AWS prices storage per GB-month of 730 hours
KEPT_MONTHS = 1.0  # what is kept until deleted is priced for this long
DYNAMODB_ITEM_OVERHEAD = 100  # bytes DynamoDB adds to each item for storage
# S3 key kinds (bench.instrumented's `_key_class`): the retention GC reclaims every object
# under `batches/<id>/` but the receipt (docs/retention.md); the rest is kept until deleted.
RECEIPT = "batches/receipt.json"
# Bedrock batch jobs' input and output files (providers/bedrock, `batch_prefix`): the adapter
# does not delete them; the operator's lifecycle rule expires them "after a few days"
# (docs/providers.md, Bedrock set-up), priced here as the retention window.
BEDROCK_BATCH = "bedrock-batch"
GONE_BY_LIFECYCLE = {"tmp", "staging"}  # expire in 2 days (resources.BUCKETS); empty at the end


@dataclass(frozen=True)
class Prices:
    """A dated price table (USD, us-east-1, on demand)."""

    as_of: str
    lambda_request: float
    lambda_gb_second: float
    sfn_transition: float
    sqs_request: float
    s3_put: float
    s3_get: float
    s3_gb_month: float
    dynamodb_wru: float
    dynamodb_rru: float
    dynamodb_gb_month: float
    egress_gb: float
    api_request: float


LIST_PRICES = Prices(
    as_of=PRICES_AS_OF,
    lambda_request=PRICE["lambda_request"],
    lambda_gb_second=PRICE["lambda_gb_second"],
    sfn_transition=PRICE["sfn_transition"],
    sqs_request=PRICE["sqs"],
    s3_put=PRICE["s3_put"],
    s3_get=PRICE["s3_get"],
    s3_gb_month=PRICE["s3_gb_month"],
    dynamodb_wru=PRICE["dynamodb_wru"],
    dynamodb_rru=PRICE["dynamodb_rru"],
    dynamodb_gb_month=PRICE["dynamodb_gb_month"],
    egress_gb=PRICE["egress_gb"],
    api_request=PRICE["api_request"],
)


@dataclass(frozen=True)
class Usage:
    """What one batch of `items` used, in billing units (totals for the batch)."""

    items: int
    lambda_seconds: dict[str, float] = field(default_factory=dict)  # function -> handler wall s
    memory_mb: dict[str, int] = field(default_factory=dict)  # function -> configured memory
    lambda_requests: float = 0.0
    api_requests: float = 0.0
    transitions: float = 0.0
    sqs_units: float = 0.0
    s3_put: float = 0.0
    s3_get: float = 0.0
    wru: float = 0.0
    rru: float = 0.0
    s3_reclaimed_bytes: float = 0.0  # kept for the retention window, then reclaimed
    s3_kept_bytes: float = 0.0  # kept until deleted
    dynamodb_bytes: float = 0.0  # kept for good
    egress_bytes: float = 0.0
    window_hours: float = 72.0
    kept_months: float = KEPT_MONTHS


@dataclass(frozen=True)
class Line:
    name: str
    per_item: float  # billing units per item
    unit: str
    usd_per_million: float


def lines(usage: Usage, prices: Prices) -> list[Line]:
    """The bill of `usage`, line by line, each in $ per 1M items."""
    n = usage.items

    def line(name: str, quantity: float, unit: str, price: float) -> Line:
        return Line(name, quantity / n, unit, quantity * price * 1e6 / n)

    window_months = usage.window_hours / HOURS_PER_MONTH
    out = [
        line("DynamoDB write units", usage.wru, "WRU", prices.dynamodb_wru),
        line("DynamoDB read units", usage.rru, "RRU", prices.dynamodb_rru),
        line("S3 PUT/COPY/POST/LIST", usage.s3_put, "req", prices.s3_put),
        line("S3 GET/HEAD", usage.s3_get, "req", prices.s3_get),
        line("SQS requests", usage.sqs_units, "64KB", prices.sqs_request),
        line("Step Functions transitions", usage.transitions, "trans", prices.sfn_transition),
        line("Lambda requests", usage.lambda_requests + usage.api_requests, "inv", prices.lambda_request),
        line("API Gateway requests", usage.api_requests, "req", prices.api_request),
    ]
    for function, seconds in sorted(usage.lambda_seconds.items()):
        memory = usage.memory_mb[function]
        out.append(
            line(
                f"Lambda duration: {function} ({memory} MB)",
                seconds * memory / 1024,
                "GB-s",
                prices.lambda_gb_second,
            )
        )
    hours = f"{usage.window_hours:g} h"
    months = f"{usage.kept_months:g} mo"
    out += [
        line(
            f"S3 storage, inputs+results ({hours})",
            usage.s3_reclaimed_bytes / GIB * window_months,
            "GiB-mo",
            prices.s3_gb_month,
        ),
        line(
            f"S3 storage, file+receipt ({months})",
            usage.s3_kept_bytes / GIB * usage.kept_months,
            "GiB-mo",
            prices.s3_gb_month,
        ),
        line(
            f"DynamoDB storage ({months})",
            usage.dynamodb_bytes / GIB * usage.kept_months,
            "GiB-mo",
            prices.dynamodb_gb_month,
        ),
        line("Data transfer out to the vendors", usage.egress_bytes / GIB, "GiB", prices.egress_gb),
    ]
    return out


def total(bill: Iterable[Line]) -> float:
    return sum(line.usd_per_million for line in bill)


def biggest(bill: Iterable[Line]) -> Line:
    return max(bill, key=lambda line: line.usd_per_million)


# -- from a measured run ----------------------------------------------------------------------


def storage_bytes(final: dict[str, Any], since: dict[str, Any]) -> tuple[float, float, float]:
    """What the batch left in S3 (reclaimed after the window, kept) and DynamoDB: the moto
    storage of `final` minus that of `since`."""
    after, before = final.get("moto") or {}, since.get("moto") or {}
    grown: dict[str, float] = dict(after.get("s3_bytes_by_class") or {})
    for klass, size in (before.get("s3_bytes_by_class") or {}).items():
        grown[klass] = grown.get(klass, 0) - size
    reclaimed = kept = 0.0
    for klass, size in grown.items():
        kind = klass.split(":", 1)[-1]
        if (kind.startswith("batches/") and kind != RECEIPT) or kind == BEDROCK_BATCH:
            reclaimed += size
        elif kind not in GONE_BY_LIFECYCLE:
            kept += size
    tables = diff_rows(
        [[name, *row] for name, row in (after.get("dynamodb_by_table") or {}).items()],
        [[name, *row] for name, row in (before.get("dynamodb_by_table") or {}).items()],
        1,
    )
    dynamodb = sum(size + count * DYNAMODB_ITEM_OVERHEAD for count, size in tables.values())
    return reclaimed, kept, dynamodb


def usage_of(run: Run, api_requests: int) -> Usage:
    """The measured usage of one pipeline run (its counters between the baseline and the end)."""
    final, since = run.final, run.baseline
    requests = {
        row[0]: row[2] * run.items for row in costs(final, since, items=run.items, transitions=0).rows
    }
    invocations = diff_rows(final.get("invocations", []), since.get("invocations", []), 2)
    seconds: dict[str, float] = {}
    calls = 0.0
    for (function, _step), row in invocations.items():
        if function not in UNCOUNTED_CALLERS:
            seconds[function] = seconds.get(function, 0.0) + row[2]
            calls += row[0]
    egress = diff_rows(final.get("egress", []), since.get("egress", []), 2)
    reclaimed, kept, dynamodb = storage_bytes(final, since)
    return Usage(
        items=run.items,
        lambda_seconds=seconds,
        memory_mb={f: FUNCTION_MEMORY_MB[f] for f in seconds},
        lambda_requests=calls,
        api_requests=api_requests,
        transitions=run.transitions,
        sqs_units=requests["SQS"],
        s3_put=requests["S3 PUT/COPY/POST/LIST"],
        s3_get=requests["S3 GET/HEAD"],
        wru=requests["DynamoDB writes"],
        rru=requests["DynamoDB reads"],
        s3_reclaimed_bytes=reclaimed,
        s3_kept_bytes=kept,
        dynamodb_bytes=dynamodb,
        egress_bytes=sum(
            row[1] for (caller, _host), row in egress.items() if caller not in UNCOUNTED_CALLERS
        ),
        window_hours=float(Settings.model_fields["retention_grace_hours"].default),
    )


def print_bill(run: Run, usage: Usage, bill: list[Line]) -> None:
    print(
        f"\n== the AWS bill of a {run.items:,}-item batch, $ per 1M items "
        f"(prices as of {LIST_PRICES.as_of}) =="
    )
    print(f"{'line':<46}{'units/item':>14}{'unit':>8}{'$ per 1M items':>16}")
    for line in bill:
        print(f"{line.name:<46}{line.per_item:>14.6g}{line.unit:>8}{line.usd_per_million:>16.4f}")
    top = biggest(bill)
    dollars = total(bill)
    verdict = "met" if dollars <= GOAL_USD_PER_M_ITEMS else "MISSED"
    print(f"{'all-in total':<68}{dollars:>16.4f}")
    print(
        f"biggest line: {top.name} (${top.usd_per_million:.4f}, {100 * top.usd_per_million / dollars:.0f}%)"
    )
    print(f"goal <= ${GOAL_USD_PER_M_ITEMS:.2f} per 1M items all-in: {verdict}")
    print(
        f"the run: upload {run.upload_seconds:.1f} s; create -> completed {run.completed_seconds:.1f} s "
        f"({run.items / run.completed_seconds:,.0f} items/s); service VmHWM {run.hwm / MIB:,.0f} MiB"
    )
    grown = diff_rows(
        [[k, v] for k, v in ((run.final.get("moto") or {}).get("s3_bytes_by_class") or {}).items()],
        [[k, v] for k, v in ((run.baseline.get("moto") or {}).get("s3_bytes_by_class") or {}).items()],
        1,
    )
    print(
        "S3 bytes per item left by kind: "
        + ", ".join(f"{k[0]} {v[0] / run.items:,.0f}" for k, v in grown.items())
    )
    egress = diff_rows(run.final.get("egress", []), run.baseline.get("egress", []), 2)
    print(
        "HTTP requests out (caller, host: requests, bytes sent): "
        + ", ".join(f"{c} {h}: {n:,.0f}, {b:,.0f}" for (c, h), (n, b) in egress.items())
    )
    print(
        "handler wall s by function (all invocations): "
        + ", ".join(f"{k} {v:.1f}" for k, v in sorted(usage.lambda_seconds.items()))
        + f"; storage left: S3 {usage.s3_reclaimed_bytes / usage.items:,.0f} B/item reclaimed after "
        f"{usage.window_hours:g} h, {usage.s3_kept_bytes / usage.items:,.0f} B/item kept; DynamoDB "
        f"{usage.dynamodb_bytes / usage.items:,.1f} B/item; vendors "
        f"{usage.egress_bytes / usage.items:,.0f} B/item sent"
    )


def main() -> int:
    from bench.pipeline import build_parser, run_size

    args = build_parser(__doc__, sizes="10000,100000,1000000").parse_args()
    if args.plain:
        raise SystemExit("the cost model needs the counters: not with --plain")
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    print(f"machine: {describe()}; functions: {[(f.key, f.memory_mb) for f in resources.FUNCTIONS]}")
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average before: {load_average()}")
    api_requests = API_REQUESTS + (0 if args.no_quote else 1)
    totals: list[tuple[int, float, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-cost-") as folder:
        for index, count in enumerate(int(s) for s in args.sizes.split(",") if s.strip()):
            (Path(folder) / str(index)).mkdir()
            run = run_size(count, args, Path(folder) / str(index))
            usage = usage_of(run, api_requests)
            bill = lines(usage, LIST_PRICES)
            print_bill(run, usage, bill)
            print("usage, batch totals (to price again): " + json.dumps(asdict(usage)))
            totals.append((count, total(bill), biggest(bill).name, load_average()))
            sys.stdout.flush()
    print(f"\nload average after: {load_average()}")
    print(f"{'items':>10}{'$ per 1M items':>16}  biggest line; load after the size")
    for count, dollars, top, load in totals:
        print(f"{count:>10,}{dollars:>16.4f}  {top}; {load}")
    return 0 if all(t[1] <= GOAL_USD_PER_M_ITEMS for t in totals) else 1


if __name__ == "__main__":
    raise SystemExit(main())
