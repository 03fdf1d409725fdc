"""The batch pipeline end to end on the local stack: N simulated zero-latency items from an
uploaded file to a completed batch, with throughput, peak memory and AWS requests per item.

For each size a fresh local stack is started as `make run` starts it: the runner's own entry
point (`batchroute_tools.local.__main__.main`), in its own process group, on a free port, with
its own stack file, and `SIMULATED_LATENCY_MS=0`, `SIMULATED_BATCH_POLL_SECONDS=0`,
`PROVIDER_RETRY_BASE_SECONDS=0` and the rate limits raised. Then, as a client would: an agent
registers (`POST /v1/auth/agent-register`), `batchroute-admin credits grant --stack-file ...`
funds its org, the items go up as a file through the signed-URL path (`POST /v1/files/uploads`,
PUT to the presigned URL, `POST /v1/files/{id}/complete`), and `POST /v1/batches` creates the
batch from `input_file_id` (with an Idempotency-Key). The batch record is polled until it is
terminal, then the workflow execution until it has ended.

The items (~`--item-bytes` a JSONL line): 60% an open-weight model served by sync hosts, 25%
gpt-4o-mini and 15% claude-3-5-haiku (vendor batch APIs), so every 1,000-item chunk is run by
three lanes.

Measured:

- wall time from the create request to the batch `completed` (and to the end of the
  execution), items/s, and when each batch state was first seen;
- peak memory: `VmHWM` of /proc/<pid>/status, and the RSS every 0.25 s tagged with the batch
  state, of the service process (API, pollers, handlers) and of moto apart: as under `make
  run`, moto and the vendor emulators each run in a child process of the runner
  (docs/local.md), so moto's copies of the items (the file, the input chunks, the lane
  results, the results artifact) are in the moto process's figure, and the stack also reports
  what moto holds. The vendor emulators' process is measured apart too (its VmHWM), and what
  it keeps on disk (their batch jobs' files) is reported apart from its memory;
- AWS requests, counted at the moto server: the stack wraps moto's WSGI app in a counter keyed
  by service (the SigV4 credential scope), operation (X-Amz-Target, or the S3 method and query)
  and caller (a header the stack's botocore adds from the calling thread: the function whose
  handler runs, the event source mapping's polling, the API; moto's own Step Functions
  integrations sign as `ak`; the bench's polling signs as `bench` and is not counted).
  DynamoDB requests become request units from the item sizes before and after each write, read
  from moto's tables in the moto process (transactions 2x, plus one write per `ALL`-projecting
  GSI the item is in; a `KEYS_ONLY` one only when the item enters, leaves or moves in it), and
  reads from the items returned. Step Functions state transitions are the
  `*StateEntered` events of the execution history; Lambda invocations are the handler calls of
  the local event source mappings plus the API requests. Requests not tied to the items (the
  sweeper's schedule, empty receives of the idle pollers) are shown but not priced per item;
- CPU: per handler step (its thread and the pool threads it submits work to), of AWS SDK calls
  by caller, and of moto per operation (`--breakdown`), with each process's CPU; `--profile`
  runs cProfile on every thread of the service process with a per-thread CPU clock (slow:
  several times the CPU).

`--plain` runs `.venv/bin/batchroute-local` itself, uninstrumented: time and memory only.

Run from the repository root with `.venv/bin/python -m bench.pipeline [--sizes 1000,10000,100000]
[--breakdown]`. Exits 1 when a size of 100,000 items or more takes longer than
`--goal` seconds (300) per 100,000 items.

This module runs the sizes and measures each; the parts are `bench.stack` (the stack and the
client's calls), `bench.instrumented` (the stack process under the counters), `bench.tally`,
`bench.aws_requests` and `bench.capacity` (requests, units, cost), `bench.profiling` and
`bench.report`.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.aws_requests import Costs
from bench.capacity import item_size
from bench.items import pipeline_items, write_jsonl
from bench.machine import describe, load_average, proc_status
from bench.profiling import RssWatch
from bench.report import (
    GOAL_SECONDS,
    Run,
    print_breakdown,
    print_heap,
    print_profile,
    print_run,
    print_summary,
)
from bench.stack import Stack, grant, register, transitions, upload


def run_size(count: int, args: argparse.Namespace, folder: Path) -> Run:
    path = folder / f"items-{count}.jsonl"
    file_bytes = write_jsonl(path, pipeline_items(count, args.item_bytes))
    workdir = folder / f"stack-{count}"
    workdir.mkdir()
    stack = Stack(
        workdir,
        plain=args.plain,
        profile=args.profile,
        storage=not args.no_storage,
        trace=args.tracemalloc,
    )
    heap_tops: dict[str, Any] = {}
    try:
        org_id, api_key = register(stack)
        grant(stack, org_id, args.credit_usd)
        headers = {"Authorization": f"Bearer {api_key}"}
        dynamodb = stack.client("dynamodb")
        table = stack.describe["tables"]["batches"]
        baseline = stack.stats()
        if args.profile:
            stack.stats(light=1, profile_mark=1)
        baseline_rss = int(proc_status(stack.process.pid).get("VmRSS", 0))
        moto_baseline_rss = int(proc_status(stack.moto_pid).get("VmRSS", 0))
        with RssWatch(stack, traced=bool(args.tracemalloc)) as watch:
            watch.phase = "upload"
            started = time.monotonic()
            file_id = upload(stack, headers, path, file_bytes)
            upload_seconds = time.monotonic() - started
            after_upload = stack.stats()
            quote_seconds = 0.0
            create_body: dict[str, Any] = {"input_file_id": file_id}
            if not args.no_quote:
                watch.phase = "quote"
                quoting = time.monotonic()
                quoted = stack.api.post("/v1/quotes/model", json={"input_file_id": file_id}, headers=headers)
                quote_seconds = time.monotonic() - quoting
                if quoted.status_code != 200:
                    raise SystemExit(f"quote: {quoted.status_code} {quoted.text[:2000]}")
                if not args.create_without_quote_id:
                    create_body["quote_id"] = quoted.json()["quote_id"]
            watch.phase = "create"
            sent = time.monotonic()
            created = stack.api.post(
                "/v1/batches",
                json=create_body,
                headers={**headers, "Idempotency-Key": f"bench-{uuid.uuid4().hex}"},
            )
            create_seconds = time.monotonic() - sent
            if created.status_code != 202:
                raise SystemExit(f"create: {created.status_code} {created.text[:2000]}")
            batch_id = created.json()["batch"]["id"]
            state_times: dict[str, float] = {}
            record: dict[str, Any] = {}
            deadline = sent + args.timeout
            while True:
                got = dynamodb.get_item(
                    TableName=table,
                    Key={"pk": {"S": f"BATCH#{batch_id}"}, "sk": {"S": "META"}},
                    ProjectionExpression="#s, created_at, completed_at, execution_arn",
                    ExpressionAttributeNames={"#s": "state"},
                )
                record = got.get("Item") or {}
                state = record.get("state", {}).get("S", "?")
                watch.phase = state
                state_times.setdefault(state, time.monotonic() - sent)
                in_state = time.monotonic() - sent - state_times[state]
                if (
                    args.tracemalloc
                    and state in ("running", "finalizing")
                    and state not in heap_tops
                    and (state == "finalizing" or in_state > args.heap_at)
                ):
                    heap_tops[state] = stack.stats(light=1, top=args.top)["traced"]
                if state in ("completed", "failed", "canceled", "expired"):
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"batch still {state} after {args.timeout:.0f} s:\n{stack.log_tail()}")
                time.sleep(0.2 if time.monotonic() - sent < 5 else args.poll)
            completed_seconds = time.monotonic() - sent
            watch.phase = "delivering"
            execution_arn = record["execution_arn"]["S"]
            sfn = stack.client("stepfunctions")
            while sfn.describe_execution(executionArn=execution_arn)["status"] == "RUNNING":
                if time.monotonic() > deadline:
                    raise SystemExit(f"execution still running after {args.timeout:.0f} s")
                time.sleep(0.2 if time.monotonic() - sent < 5 else args.poll)
            execution_seconds = time.monotonic() - sent
            watch.phase = "done"
            time.sleep(1.5)  # the poller deletes the last message after the handler returns
            final = stack.stats(**({"profile": args.top} if args.profile else {}))
            if args.tracemalloc:
                heap_tops["done"] = stack.stats(light=1, top=args.top)["traced"]
        hwm = int(proc_status(stack.process.pid).get("VmHWM", 0))
        moto_hwm = int(proc_status(stack.moto_pid).get("VmHWM", 0))
        cpu = {
            "stack": final["process"].get("cpu_seconds", 0) - baseline["process"].get("cpu_seconds", 0),
            "moto": final["moto_process"].get("cpu_seconds", 0)
            - baseline["moto_process"].get("cpu_seconds", 0),
            "emulators": final["emulators_process"].get("cpu_seconds", 0)
            - baseline["emulators_process"].get("cpu_seconds", 0),
        }
        steps = transitions(stack, execution_arn)
        money = money_check(stack, org_id, batch_id)
        step_seconds = step_durations(stack, execution_arn)
        invocations = final.get("invocations") or []
        batch = stack.api.get(f"/v1/batches/{batch_id}", headers=headers).json()["batch"]
        meta = dynamodb.get_item(
            TableName=table, Key={"pk": {"S": f"BATCH#{batch_id}"}, "sk": {"S": "META"}}
        )["Item"]
        lane_items = dynamodb.query(
            TableName=table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :lane)",
            ExpressionAttributeValues={":pk": {"S": f"BATCH#{batch_id}"}, ":lane": {"S": "LANE#"}},
        )["Items"]
        lanes = len(lane_items)
        sizes = {"batch": item_size(meta), "plan": item_size({"plan": meta["plan"]}) if "plan" in meta else 0}
        sizes["lane_max"] = max((item_size(lane) for lane in lane_items), default=0)
        created_at = datetime.fromisoformat(record["created_at"]["S"].replace("Z", "+00:00"))
        completed_at = datetime.fromisoformat(record["completed_at"]["S"].replace("Z", "+00:00"))
        run = Run(
            items=count,
            file_bytes=file_bytes,
            ready_seconds=stack.ready_seconds,
            upload_seconds=upload_seconds,
            create_seconds=create_seconds,
            completed_seconds=completed_seconds,
            record_seconds=(completed_at - created_at).total_seconds(),
            execution_seconds=execution_seconds,
            state_times=state_times,
            lanes=int(lanes),
            transitions=steps,
            baseline=baseline,
            after_upload=after_upload,
            final=final,
            rss_by_phase=dict(watch.peak),
            hwm=hwm,
            baseline_rss=baseline_rss,
            moto_hwm=moto_hwm,
            moto_baseline_rss=moto_baseline_rss,
            moto_rss_by_phase=dict(watch.moto_peak),
            cpu=cpu,
            counts={k: int(v) for k, v in (batch.get("counts") or {}).items()},
            heap_by_phase=dict(watch.heap_peak),
            record_sizes=sizes,
            heap_tops=heap_tops,
        )
        print(
            f"{count} items: quote {quote_seconds:.2f} s, create {create_seconds:.2f} s; "
            f"money: {json.dumps(money)}"
        )
        print("  step wall s (task scheduled -> answered, all invocations): " + json.dumps(step_seconds))
        print("  longest single invocation per (function, step), s: " + json.dumps(longest(invocations)))
        sys.stdout.flush()
        if not money["ok"]:
            raise SystemExit(f"money invariants broken: {money}")
        if state != "completed":
            raise SystemExit(f"batch ended {state}: {json.dumps(batch)[:2000]}\n{stack.log_tail()}")
        return run
    finally:
        path.unlink(missing_ok=True)
        code = stack.stop()
        if code not in (0, None):
            print(f"(the stack exited with {code})", file=sys.stderr)


def money_check(stack: Stack, org_id: str, batch_id: str) -> dict[str, Any]:
    """The batch's reservation read back from the ledger table: reserved = charged + released,
    settled, and exactly one charge and at most one release entry for it (settled once)."""
    dynamodb = stack.client("dynamodb")
    table = stack.describe["tables"]["ledger"]
    reservation_id = f"res_{batch_id}"
    res = dynamodb.get_item(
        TableName=table, Key={"pk": {"S": f"WALLET#{org_id}"}, "sk": {"S": f"RES#{reservation_id}"}}
    )["Item"]
    reserved = int(res["amount_micros"]["N"])
    charged = int(res.get("charged_micros", {"N": "0"})["N"])
    released = int(res.get("released_micros", {"N": "0"})["N"])
    kinds: dict[str, int] = {}
    sums: dict[str, int] = {}
    query: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :e)",
        "FilterExpression": "reservation_id = :r",
        "ExpressionAttributeValues": {
            ":pk": {"S": f"WALLET#{org_id}"},
            ":e": {"S": "ENTRY#"},
            ":r": {"S": reservation_id},
        },
    }
    while True:
        page = dynamodb.query(**query)
        for entry in page.get("Items", []):
            kind = entry["entry_type"]["S"]
            kinds[kind] = kinds.get(kind, 0) + 1
            sums[kind] = sums.get(kind, 0) + int(entry["amount_micros"]["N"])
        if "LastEvaluatedKey" not in page:
            break
        query["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    ok = (
        res["status"]["S"] == "settled"
        and reserved == charged + released
        and kinds.get("charge", 0) <= 1
        and kinds.get("release", 0) <= 1
        and sums.get("charge", 0) == charged
        and sums.get("release", 0) == released
    )
    return {
        "ok": ok,
        "status": res["status"]["S"],
        "reserved_micros": reserved,
        "charged_micros": charged,
        "released_micros": released,
        "entries": kinds,
    }


def step_durations(stack: Stack, execution_arn: str) -> dict[str, float]:
    """Per workflow state: seconds from its task being scheduled to its answer (a chunked
    step's figure spans all its invocations; RunLane: the longest lane)."""
    sfn = stack.client("stepfunctions")
    events: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = sfn.get_execution_history(
            executionArn=execution_arn, maxResults=1000, **({"nextToken": token} if token else {})
        )
        events.extend(page["events"])
        token = page.get("nextToken")
        if not token:
            break
    by_id = {e["id"]: e for e in events}
    entered: dict[int, str] = {}
    out: dict[str, float] = {}
    for event in events:
        if event["type"].endswith("StateEntered"):
            entered[event["id"]] = event["stateEnteredEventDetails"]["name"]
        if event["type"] in ("TaskSucceeded", "TaskFailed", "TaskTimedOut"):
            scheduled = by_id.get(event["previousEventId"])
            while scheduled is not None and scheduled["type"] != "TaskScheduled":
                scheduled = by_id.get(scheduled["previousEventId"])
            state = entered.get(max((i for i in entered if i < event["id"]), default=0), "?")
            if scheduled is not None:
                took = (event["timestamp"] - scheduled["timestamp"]).total_seconds()
                out[state] = round(max(out.get(state, 0.0), took), 2)
    return out


def longest(invocations: list[list[Any]]) -> dict[str, float]:
    """The stack's handler invocations ([function, step, calls, messages, wall, cpu, max wall])."""
    return {f"{row[0]}/{row[1]}": round(float(row[6]), 2) for row in invocations if len(row) >= 7}


def build_parser(
    description: str | None = __doc__, sizes: str = "1000,10000,100000"
) -> argparse.ArgumentParser:
    """The bench's options (bench.cost_model runs the same sizes with the same options)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=sizes, help="item counts, comma separated")
    parser.add_argument("--item-bytes", type=int, default=600, help="approximate bytes per JSONL line")
    parser.add_argument("--goal", type=float, default=GOAL_SECONDS, help="seconds allowed for 100,000 items")
    parser.add_argument("--timeout", type=float, default=3600.0, help="give up on one batch after this")
    parser.add_argument(
        "--poll", type=float, default=1.0, help="seconds between polls of the batch (0.2 s in the first 5 s)"
    )
    parser.add_argument("--credit-usd", default="100000", help="credits granted to the org")
    parser.add_argument(
        "--no-quote",
        action="store_true",
        help="create from input_file_id alone (an internal quote in create) instead of quote, then create",
    )
    parser.add_argument(
        "--create-without-quote-id",
        action="store_true",
        help="time the quote, but create from input_file_id alone (create prices the file itself)",
    )
    parser.add_argument("--plain", action="store_true", help="run .venv/bin/batchroute-local uninstrumented")
    parser.add_argument("--profile", action="store_true", help="sample the service process's threads")
    parser.add_argument("--top", type=int, default=25, help="profile lines")
    parser.add_argument("--no-storage", action="store_true", help="do not sum what moto holds")
    parser.add_argument("--breakdown", action="store_true", help="print every request type")
    parser.add_argument(
        "--tracemalloc", type=int, default=0, metavar="FRAMES", help="trace the service process's Python heap"
    )
    parser.add_argument(
        "--heap-at", type=float, default=20.0, help="seconds into `running` for the heap snapshot"
    )
    return parser


def main() -> int:
    args = build_parser().parse_args()
    # A SIGTERM (a `timeout`, say) unwinds like Ctrl-C, so the stack is stopped too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    mode = "plain batchroute-local" if args.plain else "instrumented runner"
    print(f"machine: {describe()}; {mode}")
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average before: {load_average()}")
    results: list[tuple[Run, Costs | None]] = []
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as folder:
        for count in sizes:
            run = run_size(count, args, Path(folder))
            cost = print_run(run, args.plain)
            if args.breakdown and not args.plain:
                print_breakdown(run)
            if args.profile:
                print_profile(run, args.top)
            if args.tracemalloc:
                print_heap(run)
            results.append((run, cost))
            sys.stdout.flush()
    print(f"\nload average after: {load_average()}")
    failed = print_summary(results, args.goal)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
