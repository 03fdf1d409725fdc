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
  state. The runner holds moto in its own process, so moto's copies of the items (the file,
  the input chunks, the lane results, the results artifact) are in that figure; the stack also
  reports what moto holds. With `--split`, moto runs in a child process (the same MotoServer)
  and the service process (API, pollers, handlers) and moto are measured apart;
- AWS requests, counted at the moto server: the stack wraps moto's WSGI app in a counter keyed
  by service (the SigV4 credential scope), operation (X-Amz-Target, or the S3 method and query)
  and caller (a header the stack's botocore adds from the calling thread: the function whose
  handler runs, the event source mapping's polling, the API; moto's own Step Functions
  integrations sign as `ak`; the bench's polling signs as `bench` and is not counted).
  DynamoDB requests become request units from the item sizes before and after each write, read
  from moto's tables in-process (transactions 2x, plus one write per `ALL`-projecting GSI the
  item is in; a `KEYS_ONLY` one only when the item enters, leaves or moves in it), and reads
  from the items returned. Step Functions state transitions are the
  `*StateEntered` events of the execution history; Lambda invocations are the handler calls of
  the local event source mappings plus the API requests. Requests not tied to the items (the
  sweeper's schedule, empty receives of the idle pollers) are shown but not priced per item;
- CPU: per handler step (its thread and the pool threads it submits work to), of AWS SDK calls
  by caller, and of moto per operation (`--breakdown`); `--profile` runs cProfile on every
  thread with a per-thread CPU clock (slow: several times the CPU).

`--plain` runs `.venv/bin/batchroute-local` itself, uninstrumented: time and memory only.

Run with `.venv/bin/python bench/pipeline.py [--sizes 1000,10000,100000] [--split]
[--breakdown]`. Exits 1 when a size of 100,000 items or more takes longer than `--goal`
seconds (300) per 100,000 items.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import math
import os
import platform
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RUNNER = ROOT / ".venv" / "bin" / "batchroute-local"
ADMIN = ROOT / ".venv" / "bin" / "batchroute-admin"
GOAL_SECONDS = 300.0
GOAL_SIZE = 100_000
GOAL_USD_PER_M_ITEMS = 0.10
READY_TIMEOUT = 90.0
STATS_PATH = "/__bench__/stats"
BENCH_KEY = "bench"  # the bench's own AWS calls sign with this key; they are not counted
ACCOUNT = "123456789012"
REGION = "us-east-1"
MIB = 1024 * 1024

# AWS list prices, us-east-1, on demand (USD).
PRICE = {
    "dynamodb_wru": 0.625 / 1e6,  # per write request unit (1 KB; transactional 2x)
    "dynamodb_rru": 0.125 / 1e6,  # per read request unit (4 KB; eventually consistent 0.5)
    "s3_put": 0.005 / 1e3,  # PUT, COPY, POST, LIST
    "s3_get": 0.0004 / 1e3,  # GET, HEAD and the rest (DELETE is free)
    "sqs": 0.40 / 1e6,  # per request, each 64 KB chunk of payload a request
    "sfn_transition": 0.025 / 1e3,  # Standard workflows
    "lambda_request": 0.20 / 1e6,
    "lambda_gb_second": 0.0000166667,  # x86
    "kms": 0.03 / 1e4,
}

LLAMA = "meta-llama/Llama-3.3-70B-Instruct"  # sync hosts and edge nodes
GPT = "gpt-4o-mini"  # OpenAI Batch API
HAIKU = "claude-3-5-haiku"  # Anthropic Message Batches API
_WORDS = (
    "invoice",
    "order",
    "refund",
    "shipment",
    "delayed",
    "customer",
    "account",
    "password",
    "reset",
    "billing",
    "charge",
    "subscription",
    "renewal",
    "cancel",
    "upgrade",
    "plan",
    "printer",
    "laptop",
    "screen",
    "battery",
    "warranty",
    "return",
    "label",
    "carrier",
    "tracking",
    "number",
    "address",
    "payment",
    "card",
    "declined",
    "bank",
    "transfer",
    "receipt",
    "tax",
    "quarterly",
    "report",
    "revenue",
    "margin",
    "forecast",
    "churn",
    "retention",
    "onboarding",
    "ticket",
    "escalation",
    "priority",
    "urgent",
)


# -- the items -------------------------------------------------------------------------------------


def item(index: int, rng: random.Random, item_bytes: int) -> dict[str, Any]:
    """Item `index`: 60% an open-weight model (sync lanes), 25% gpt-4o-mini and 15%
    claude-3-5-haiku (vendor batch APIs); the user message fills the line to ~`item_bytes`."""
    slot = index % 20
    model = LLAMA if slot < 12 else GPT if slot < 17 else HAIKU
    body: dict[str, Any] = {
        "customer_item_id": f"ticket-{index:07d}",
        "operation": "responses",
        "model": model,
        "input": {
            "messages": [
                {"role": "system", "content": "Classify the ticket and propose the next action."},
                {"role": "user", "content": ""},
            ]
        },
        "max_output_tokens": 128,
    }
    room = max(16, item_bytes - len(json.dumps(body, separators=(",", ":"))) - 1)
    words: list[str] = []
    size = 0
    while size < room:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    body["input"]["messages"][1]["content"] = " ".join(words)[:room]
    return body


def write_items(path: Path, count: int, item_bytes: int) -> int:
    rng = random.Random(5)
    with path.open("wb") as out:
        for index in range(count):
            out.write(json.dumps(item(index, rng, item_bytes), separators=(",", ":")).encode() + b"\n")
    return path.stat().st_size


# == inside the stack process (--serve) ==============================================================

_CALLER = threading.local()


def _caller() -> str:
    """Who makes this AWS call: the function whose handler runs on this thread, else the thread."""
    role = getattr(_CALLER, "role", None)
    if role:
        return str(role)
    name = threading.current_thread().name
    if name.startswith("poller-"):
        return "esm-polling"
    if name == "api" or name.startswith("AnyIO"):
        return "api"
    return "other:" + re.sub(r"[-_ ]?\d+.*$", "", name)


def _av_size(value: dict[str, Any]) -> int:
    """Approximate DynamoDB size of one attribute value (DynamoDB JSON)."""
    kind, inner = next(iter(value.items()))
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        digits = len(inner.strip("-").replace(".", "").strip("0")) or 1
        return (digits + 1) // 2 + 1
    if kind == "B":
        return len(inner) * 3 // 4
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(_av_size({kind[0]: v}) for v in inner)
    if kind == "L":
        return 3 + sum(1 + _av_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _av_size(v) for k, v in inner.items())
    return 1


def item_size(attributes: dict[str, Any] | None) -> int:
    if not attributes:
        return 0
    return sum(len(name.encode()) + _av_size(value) for name, value in attributes.items())


class Tally:
    """Counters kept where the work happens, read by the bench through STATS_PATH. Each table
    maps a key tuple to a row of sums:

    requests     (caller, service, operation) -> requests, billable units, bytes in, bytes out
    dynamodb     (caller, operation) -> write request units, read request units
    invocations  (function, step) -> invocations, messages, wall s, CPU s (pool threads too), longest s
    sdk          (caller, service) -> AWS SDK calls, CPU s in them (client side: serialize, HTTP, parse)
    moto_cpu     (service, operation) -> requests, CPU s moto spent answering them
    """

    TABLES = ("requests", "dynamodb", "invocations", "sdk", "moto_cpu")

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


def _moto_tables() -> Any:
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends[ACCOUNT][REGION]


@dataclass
class _Write:
    table: str
    key: dict[str, Any]
    transactional: bool
    condition_only: bool = False
    before: tuple[int, dict[str, Any]] | None = None  # size, GSI key values


class DynamoSizer:
    """Write and read request units of one DynamoDB request, from moto's own tables."""

    def __init__(self) -> None:
        self._schemas: dict[str, tuple[list[str], list[list[str]]]] = {}

    def _schema(self, table_name: str) -> tuple[list[str], list[tuple[list[str], bool]]]:
        schema = self._schemas.get(table_name)
        if schema is None:
            table = _moto_tables().get_table(table_name)
            keys = [a for a in (table.hash_key_attr, table.range_key_attr) if a]
            indexes = [
                (
                    [k["AttributeName"] for k in index.schema],
                    (index.projection or {}).get("ProjectionType") == "KEYS_ONLY",
                )
                for index in table.global_indexes
            ]
            schema = self._schemas[table_name] = (keys, indexes)
        return schema

    def writes(self, op: str, body: dict[str, Any]) -> list[_Write]:
        found: list[_Write] = []

        def add(
            table: str, key_or_item: dict[str, Any], transactional: bool, condition: bool = False
        ) -> None:
            keys, _ = self._schema(table)
            found.append(
                _Write(table, {k: key_or_item[k] for k in keys if k in key_or_item}, transactional, condition)
            )

        if op == "PutItem":
            add(body["TableName"], body["Item"], False)
        elif op in ("UpdateItem", "DeleteItem"):
            add(body["TableName"], body["Key"], False)
        elif op == "BatchWriteItem":
            for table, requests in body.get("RequestItems", {}).items():
                for request in requests:
                    if "PutRequest" in request:
                        add(table, request["PutRequest"]["Item"], False)
                    elif "DeleteRequest" in request:
                        add(table, request["DeleteRequest"]["Key"], False)
        elif op == "TransactWriteItems":
            for entry in body.get("TransactItems", []):
                for kind, action in entry.items():
                    key = action.get("Item") if kind == "Put" else action.get("Key")
                    add(action["TableName"], key or {}, True, kind == "ConditionCheck")
        return found

    def _state(self, write: _Write) -> tuple[int, dict[str, Any]] | None:
        for _ in range(3):
            try:
                found = _moto_tables().get_item(write.table, write.key)
                if found is None:
                    return None
                attrs = found.to_json()["Attributes"]
                _, indexes = self._schema(write.table)
                gsi = {
                    "|".join(names): ([attrs.get(n) for n in names], keys_only)
                    for names, keys_only in indexes
                    if all(n in attrs for n in names)
                }
                return item_size(attrs), gsi
            except RuntimeError:  # changed under us by a concurrent request: read it again
                continue
        return None

    def before(self, writes: list[_Write]) -> None:
        for write in writes:
            write.before = self._state(write)

    def write_units(self, writes: list[_Write], succeeded: bool) -> float:
        total = 0.0
        for write in writes:
            before = write.before
            after = before if (write.condition_only or not succeeded) else self._state(write)
            size_before = before[0] if before else 0
            size_after = after[0] if after else 0
            units = max(1, math.ceil(max(size_before, size_after) / 1024))
            total += units * (2 if write.transactional else 1)
            if write.condition_only or not succeeded:
                continue
            gsi_before = before[1] if before else {}
            gsi_after = after[1] if after else {}
            for index in set(gsi_before) | set(gsi_after):
                keys_only = (gsi_after.get(index) or gsi_before[index])[1]
                if keys_only:
                    # a keys-only index is written only when the item enters, leaves or moves
                    # in it (its entry: the keys, under 1 KB)
                    if index in gsi_before and index in gsi_after:
                        total += 0 if gsi_before[index][0] == gsi_after[index][0] else 2
                    else:
                        total += 1
                    continue
                if index in gsi_before and index in gsi_after:
                    same = gsi_before[index] == gsi_after[index]
                    total += math.ceil(size_after / 1024) + (0 if same else math.ceil(size_before / 1024))
                elif index in gsi_after:
                    total += math.ceil(size_after / 1024)
                else:
                    total += math.ceil(size_before / 1024)
        return total

    @staticmethod
    def read_units(op: str, body: dict[str, Any], answer: dict[str, Any]) -> float:
        def units(items: Iterable[dict[str, Any]], consistent: bool, factor: float = 1.0) -> float:
            size = sum(item_size(i) for i in items)
            return max(1, math.ceil(size / 4096)) * (1.0 if consistent else 0.5) * factor

        if op == "GetItem":
            return units([answer.get("Item") or {}], bool(body.get("ConsistentRead")))
        if op in ("Query", "Scan"):
            return units(answer.get("Items") or [], bool(body.get("ConsistentRead")))
        if op == "BatchGetItem":
            total = 0.0
            for table, items in (answer.get("Responses") or {}).items():
                consistent = bool(body.get("RequestItems", {}).get(table, {}).get("ConsistentRead"))
                total += sum(units([i], consistent) for i in items)
            return total
        if op == "TransactGetItems":
            return sum(units([r.get("Item") or {}], True, 2.0) for r in answer.get("Responses") or [])
        return 0.0


_CREDENTIAL = re.compile(r"Credential=([^/]+)/\d+/[^/]+/([^/]+)/")
_DYNAMO_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
_DYNAMO_READS = {"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"}


def _s3_operation(method: str, query: dict[str, list[str]], path: str, copy: bool) -> str:
    parts = [p for p in path.split("/") if p]
    has_key = len(parts) >= 2
    if method == "GET":
        return "GetObject" if has_key else ("ListParts" if "uploadId" in query else "ListObjects")
    if method == "HEAD":
        return "HeadObject" if has_key else "HeadBucket"
    if method == "PUT":
        if "partNumber" in query:
            return "UploadPartCopy" if copy else "UploadPart"
        return "CopyObject" if copy else "PutObject"
    if method == "POST":
        if "uploads" in query:
            return "CreateMultipartUpload"
        if "uploadId" in query:
            return "CompleteMultipartUpload"
        return "DeleteObjects" if "delete" in query else "PostObject"
    if method == "DELETE":
        return "AbortMultipartUpload" if "uploadId" in query else "DeleteObject"
    return method


class CountingMiddleware:
    """Counts every AWS request moto serves, by caller, service and operation."""

    def __init__(self, app: Callable[..., Any], stats: Callable[..., dict[str, Any]]) -> None:
        self.app = app
        self.stats = stats
        self.sizer = DynamoSizer()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == STATS_PATH:
            payload = json.dumps(self.stats(parse_qs(environ.get("QUERY_STRING", "")))).encode()
            start_response(
                "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
            )
            return [payload]
        query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        match = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", "")) or _CREDENTIAL.search(
            "Credential=" + query.get("X-Amz-Credential", [""])[0]
        )
        if match is None:  # moto's own API (/moto-api/config), nothing billable
            return self.app(environ, start_response)  # type: ignore[no-any-return]
        started = time.thread_time()
        key, service = match.group(1), match.group(2)
        presigned = "HTTP_AUTHORIZATION" not in environ
        caller = environ.get("HTTP_X_BENCH_CALLER") or ("client" if presigned else "unknown")
        if key == "ak":
            caller = "stepfunctions"  # moto's interpreter, signing for the workflow's integrations
        elif key == BENCH_KEY:
            caller = "bench"
        if service == "s3":
            return self._s3(environ, start_response, caller, query)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(raw)
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        op = (
            target.rsplit(".", 1)[-1]
            if target
            else parse_qs(raw.decode(errors="replace")).get("Action", ["?"])[0]
        )
        body: dict[str, Any] = {}
        if target and raw:
            with contextlib.suppress(ValueError):
                body = json.loads(raw)
        writes: list[_Write] = []
        if service == "dynamodb" and op in _DYNAMO_WRITES and caller != "bench":
            with contextlib.suppress(Exception):
                writes = self.sizer.writes(op, body)
                self.sizer.before(writes)
        status: list[str] = []

        def capture(code: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            status.append(code)
            return start_response(code, headers, exc_info) if exc_info else start_response(code, headers)

        app_started = time.thread_time()
        result = self.app(environ, capture)
        try:
            answer_bytes = b"".join(result)
        finally:
            if hasattr(result, "close"):
                result.close()
        moto_cpu = time.thread_time() - app_started
        ok = bool(status) and status[0].startswith("2")
        units = 1.0
        if service == "sqs":
            units = max(1, math.ceil(max(len(raw), len(answer_bytes)) / 65536))
            if op == "ReceiveMessage":
                messages = 0
                with contextlib.suppress(ValueError):
                    messages = len(json.loads(answer_bytes or b"{}").get("Messages") or [])
                op = "ReceiveMessage" if messages else "ReceiveMessage(empty)"
        if service == "dynamodb" and caller != "bench":
            wru = rru = 0.0
            with contextlib.suppress(Exception):
                if writes:
                    wru = self.sizer.write_units(writes, ok)
                elif op in _DYNAMO_READS and ok:
                    rru = self.sizer.read_units(op, body, json.loads(answer_bytes))
            TALLY.add("dynamodb", (caller, op), wru, rru)
        TALLY.add("requests", (caller, service, op), 1, units, len(raw), len(answer_bytes))
        TALLY.add("moto_cpu", (service, op), 1, moto_cpu)
        TALLY.add("moto_cpu", ("(bench counters)", "all"), 1, time.thread_time() - started - moto_cpu)
        return [answer_bytes]

    def _s3(
        self,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
        caller: str,
        query: dict[str, list[str]],
    ) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        op = _s3_operation(method, query, environ.get("PATH_INFO", ""), "HTTP_X_AMZ_COPY_SOURCE" in environ)
        bytes_in = int(environ.get("CONTENT_LENGTH") or 0)
        counted = [0]

        def stream() -> Iterator[bytes]:
            started = time.thread_time()
            result = self.app(environ, start_response)
            try:
                for chunk in result:
                    counted[0] += len(chunk)
                    yield chunk
            finally:
                if hasattr(result, "close"):
                    result.close()
                TALLY.add("requests", (caller, "s3", op), 1, 1.0, bytes_in, counted[0])
                TALLY.add("moto_cpu", ("s3", op), 1, time.thread_time() - started)

        return stream()


class ThreadProfiles:
    """cProfile on every thread started from now on (and this one), timed with each thread's
    own CPU clock, so time spent blocked or waiting for the GIL is not counted."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.profiles: list[cProfile.Profile] = []
        self._mark: dict[tuple[str, int, str], list[float]] = {}

    def _start(self, frame: Any, event: str, arg: Any) -> None:
        profile = cProfile.Profile(time.thread_time)
        with self.lock:
            self.profiles.append(profile)
        profile.enable()  # replaces this hook on the thread

    def install(self) -> None:
        threading.setprofile(self._start)
        self._start(None, "call", None)

    def _totals(self) -> dict[tuple[str, int, str], list[float]]:
        """calls, own CPU and CPU with callees per function, summed over the threads."""
        with self.lock:
            profiles = list(self.profiles)
        stats: dict[tuple[str, int, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        for profile in profiles:
            # getstats() reads a profile without stopping it (pstats would disable it).
            for entry in profile.getstats():
                code = entry.code
                if isinstance(code, str):
                    func = ("~", 0, code)
                else:
                    func = (code.co_filename, code.co_firstlineno, code.co_name)
                row = stats[func]
                row[0] += entry.callcount
                row[1] += entry.inlinetime
                row[2] += entry.totaltime
        return stats

    def mark(self) -> None:
        """Report from now on only what happens after this call."""
        self._mark = self._totals()

    def report(self, top: int) -> dict[str, Any]:
        stats = self._totals()
        for func, before in self._mark.items():
            if func in stats:
                stats[func] = [now - then for now, then in zip(stats[func], before, strict=True)]
        with self.lock:
            threads = len(self.profiles)
        total = sum(row[1] for row in stats.values())

        def name(func: tuple[str, int, str]) -> str:
            filename, line, function = func
            for marker in ("site-packages/", str(ROOT) + "/", "/lib/python3.11/"):
                if marker in filename:
                    filename = filename.split(marker, 1)[1]
                    break
            return f"{filename}:{line}({function})"

        def best(rows: Iterable[tuple[tuple[str, int, str], list[float]]], column: int) -> list[Any]:
            ranked = sorted(rows, key=lambda kv: -kv[1][column])[:top]
            return [(name(func), int(row[0]), row[1], row[2]) for func, row in ranked]

        ours = [
            (f, r)
            for f, r in stats.items()
            if f[0].startswith(str(ROOT))
            and not any(p in f[0] for p in ("/bench/", "/.venv/", "site-packages"))
        ]
        packages: dict[str, float] = defaultdict(float)
        for (filename, _line, _function), row in stats.items():
            if "site-packages/" in filename:
                packages[filename.split("site-packages/", 1)[1].split("/", 1)[0]] += row[1]
            elif filename.startswith(str(ROOT)):
                packages["(this repo) " + filename[len(str(ROOT)) + 1 :].split("/", 1)[0]] += row[1]
            else:
                packages["(stdlib and builtins)"] += row[1]
        return {
            "cpu_seconds": total,
            "threads": threads,
            "packages": sorted(packages.items(), key=lambda kv: -kv[1])[:15],
            "self": best(stats.items(), 1),
            "inclusive": best(stats.items(), 2),
            "ours": best(ours, 2),
        }


def _moto_storage() -> dict[str, Any]:
    """What moto holds: S3 bytes in memory and spilled to disk, DynamoDB items."""
    from moto.s3.models import s3_backends

    in_memory = on_disk = objects = 0
    with contextlib.suppress(Exception):
        for bucket in list(s3_backends[ACCOUNT]["aws"].buckets.values()):
            keys = [k for versions in list(bucket.keys.lists()) for k in versions[1]]
            for upload in list(bucket.multiparts.values()):
                keys += list(upload.parts.values())
            for key in keys:
                buffer = getattr(key, "_value_buffer", None)
                size = int(getattr(key, "contentsize", 0) or 0)
                objects += 1
                if buffer is not None and getattr(buffer, "_rolled", False):
                    on_disk += size
                else:
                    in_memory += size
    items = item_bytes = 0
    with contextlib.suppress(Exception):
        for table in list(_moto_tables().tables.values()):
            for found in list(table.all_items()):
                items += 1
                item_bytes += found.size()
    return {
        "s3_objects": objects,
        "s3_memory_bytes": in_memory,
        "s3_disk_bytes": on_disk,
        "dynamodb_items": items,
        "dynamodb_bytes": item_bytes,
    }


def _heap_top(count: int) -> list[tuple[float, int, str]]:
    """The largest groups of live Python blocks by allocation traceback: MiB, blocks, where."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__)]
    )
    found = []
    for stat in snapshot.statistics("traceback")[:count]:
        where = " <- ".join(
            f"{Path(frame.filename).name}:{frame.lineno}" for frame in reversed(stat.traceback)
        )
        found.append((stat.size / MIB, stat.count, where))
    return found


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


def _count_moto_requests(stats: Callable[[dict[str, list[str]]], dict[str, Any]]) -> None:
    """Wrap the app of every MotoServer made from now on in the request counter."""
    from batchroute_tools.local import moto_server

    dispatcher = getattr(moto_server, "DomainDispatcherApplication")  # noqa: B009

    def counted_app(create_app: Any) -> Any:
        return CountingMiddleware(dispatcher(create_app), stats)

    setattr(moto_server, "DomainDispatcherApplication", counted_app)  # noqa: B010


def _moto_stats(query: dict[str, list[str]]) -> dict[str, Any]:
    document: dict[str, Any] = {"moto_process": {**proc_status(), "pid": os.getpid()}}
    if "light" in query:
        return document
    document.update(TALLY.snapshot())
    if os.environ.get("BENCH_STORAGE") != "0":
        document["moto"] = _moto_storage()
    return document


def _instrument_service() -> None:
    """Tag every AWS call with its caller; count and time every handler invocation."""
    import botocore.client
    import botocore.endpoint

    from batchroute_tools.local import runner

    send = botocore.endpoint.Endpoint._send

    def tagged_send(self: Any, request: Any) -> Any:
        request.headers["X-Bench-Caller"] = _caller()
        return send(self, request)

    setattr(botocore.endpoint.Endpoint, "_send", tagged_send)  # noqa: B010

    make_api_call = botocore.client.BaseClient._make_api_call

    def timed_api_call(self: Any, operation_name: str, api_params: Any) -> Any:
        cpu = time.thread_time()
        try:
            return make_api_call(self, operation_name, api_params)
        finally:
            service = self.meta.service_model.service_name
            TALLY.add("sdk", (_caller(), service), 1, time.thread_time() - cpu)

    setattr(botocore.client.BaseClient, "_make_api_call", timed_api_call)  # noqa: B010

    load_handler = getattr(runner, "load_handler")  # noqa: B009

    def counted_handler(function_key: str) -> Any:
        handler = load_handler(function_key)

        def invoke(event: dict[str, Any], context: Any) -> Any:
            records = event.get("Records") or []
            step = "scheduled"
            if records:
                with contextlib.suppress(ValueError, AttributeError):
                    step = str(json.loads(records[0].get("body") or "{}").get("step") or "?")
            _CALLER.role, _CALLER.step = function_key, step
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return handler(event, context)
            finally:
                _CALLER.role = _CALLER.step = None
                wall, cpu = time.perf_counter() - started, time.thread_time() - cpu
                TALLY.invoked((function_key, step), len(records), wall, cpu)

        return invoke

    setattr(runner, "load_handler", counted_handler)  # noqa: B010

    submit = ThreadPoolExecutor.submit

    def tagged_submit(self: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        # A pool's worker works for whoever submitted the work: its AWS calls and CPU count there.
        caller, step = _caller(), getattr(_CALLER, "step", None)

        def run(*inner: Any, **named: Any) -> Any:
            _CALLER.role, _CALLER.step = caller, step
            cpu = time.thread_time()
            try:
                return fn(*inner, **named)
            finally:
                _CALLER.role = _CALLER.step = None
                if step is not None:
                    TALLY.add("invocations", (caller, step), 0, 0, 0, time.thread_time() - cpu, 0)

        return submit(self, run, *args, **kwargs)

    ThreadPoolExecutor.submit = tagged_submit  # type: ignore[method-assign]


def _service_stats(
    profiles: ThreadProfiles | None, frames: int, query: dict[str, list[str]]
) -> dict[str, Any]:
    document: dict[str, Any] = {"process": proc_status(), "pid": os.getpid()}
    if frames:
        current, peak = tracemalloc.get_traced_memory()
        document["traced"] = {"current": current, "peak": peak}
        if "top" in query:
            document["traced"]["top"] = _heap_top(int(query["top"][0]))
    if "light" in query:
        return document
    tables = TALLY.snapshot()
    document["invocations"] = tables["invocations"]
    document["sdk"] = tables["sdk"]
    if profiles is not None and "profile_mark" in query:
        profiles.mark()
    if profiles is not None and "profile" in query:
        document["profile"] = profiles.report(int(query["profile"][0]))
    return document


def _serve_stats(port: int, stats: Callable[[dict[str, list[str]]], dict[str, Any]]) -> None:
    """The service process's own counters on a loopback port (split mode)."""
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        payload = json.dumps(stats(parse_qs(environ.get("QUERY_STRING", "")))).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [payload]

    server = make_server("127.0.0.1", port, app, handler_class=Quiet)
    threading.Thread(target=server.serve_forever, name="bench-stats", daemon=True).start()


def serve(split: bool) -> None:
    """The local stack, started by the runner's own entry point, with the counters installed.

    `split`: moto runs in a child process (`--moto`) instead of a thread of this one, so the
    memory and CPU of the service (API, pollers, handlers) and of moto are measured apart."""
    from batchroute_tools.local import __main__ as local_main
    from batchroute_tools.local import moto_server, runner

    profiles = ThreadProfiles() if os.environ.get("BENCH_PROFILE") == "1" else None
    frames = int(os.environ.get("BENCH_TRACEMALLOC") or 0)
    if frames:
        tracemalloc.start(frames)

    def service_stats(query: dict[str, list[str]]) -> dict[str, Any]:
        return _service_stats(profiles, frames, query)

    if split:
        _serve_stats(int(os.environ["BENCH_SERVICE_STATS_PORT"]), service_stats)

        class ChildMoto(moto_server.MotoServer):
            """moto in its own process, counted there; same endpoint and lifecycle."""

            def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
                self.host, self.port = host, port or free_port()
                self._child: subprocess.Popen[bytes] | None = None

            def start(self) -> None:
                import httpx

                os.environ["MOTO_PORT"] = str(self.port)
                command = [sys.executable, str(Path(__file__).resolve()), "--moto", str(self.port)]
                self._child = subprocess.Popen(command, cwd=ROOT)
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    with contextlib.suppress(httpx.TransportError):
                        httpx.get(self.endpoint_url + STATS_PATH + "?light=1", timeout=1, trust_env=False)
                        return
                    time.sleep(0.1)
                raise RuntimeError("the moto process did not start")

            def stop(self) -> None:
                if self._child is not None:
                    self._child.terminate()
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self._child.wait(timeout=10)

        setattr(runner, "MotoServer", ChildMoto)  # noqa: B010
    else:

        def stats(query: dict[str, list[str]]) -> dict[str, Any]:
            document = _moto_stats(query)
            document.update(service_stats(query))
            return document

        _count_moto_requests(stats)
    _instrument_service()
    if profiles is not None:
        profiles.install()
    local_main.main([])


def serve_moto(port: int) -> None:
    """Split mode's moto process: the runner's MotoServer, counted, until SIGTERM."""
    from batchroute_tools.local.environment import use_fake_credentials
    from batchroute_tools.local.moto_server import MotoServer

    use_fake_credentials(REGION)
    _count_moto_requests(_moto_stats)
    server = MotoServer(host="127.0.0.1", port=port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    server.start()
    stop.wait()
    server.stop()


# == the bench ========================================================================================


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Stack:
    """One local stack in its own process group."""

    def __init__(
        self, workdir: Path, *, plain: bool, split: bool, profile: bool, storage: bool, trace: int = 0
    ) -> None:
        import httpx

        self.workdir = workdir
        self.plain = plain
        self.split = split
        self.port = free_port()
        self.stats_port = free_port()
        self.stack_file = workdir / "stack.json"
        self.log_file = workdir / "stack.log"
        inherited = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BATCHROUTE_"))}
        env = {
            **inherited,
            "PORT": str(self.port),
            "BATCHROUTE_LOCAL_STACK_FILE": str(self.stack_file),
            "LOCAL_OUTBOX_DIR": str(workdir / "outbox"),
            "SIMULATED_LATENCY_MS": "0",
            "SIMULATED_BATCH_POLL_SECONDS": "0",
            "PROVIDER_RETRY_BASE_SECONDS": "0",
            "RATE_LIMIT_REGISTER_PER_IP": "1000",
            "RATE_LIMIT_PASSWORD_PER_IP": "1000",
            "RATE_LIMIT_PER_KEY": "100000",
            "RATE_LIMIT_PER_ACCOUNT": "100000",
            "BENCH_PROFILE": "1" if profile else "0",
            "BENCH_STORAGE": "1" if storage else "0",
            "BENCH_TRACEMALLOC": str(trace),
            "BENCH_SERVICE_STATS_PORT": str(self.stats_port),
        }
        command = [str(RUNNER)]
        if not plain:
            command = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--serve",
                *(["--split"] if split else []),
            ]
        self.started = time.monotonic()
        with self.log_file.open("wb") as log:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.api = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=600, trust_env=False)
        self._wait_ready()
        self.ready_seconds = time.monotonic() - self.started
        self.describe: dict[str, Any] = json.loads(self.stack_file.read_text(encoding="utf-8"))
        self.endpoint = str(self.describe["endpoint_url"])
        self.moto_pid = int(self.stats(light=1).get("moto_process", {}).get("pid") or self.process.pid)

    def _wait_ready(self) -> None:
        import httpx

        while time.monotonic() - self.started < READY_TIMEOUT:
            if self.process.poll() is not None:
                raise SystemExit(f"the stack exited with {self.process.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(httpx.TransportError):
                if self.api.get("/v1/health", timeout=1).status_code == 200:
                    return
            time.sleep(0.2)
        self.stop()
        raise SystemExit(f"the stack was not ready in {READY_TIMEOUT:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_file.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stats(self, **params: Any) -> dict[str, Any]:
        """The counters: moto's (requests) and the service's (invocations), merged."""
        if self.plain:
            return {"process": proc_status(self.process.pid), "moto_process": proc_status(self.process.pid)}
        import httpx

        answer = httpx.get(self.endpoint + STATS_PATH, params=params, timeout=600, trust_env=False)
        answer.raise_for_status()
        document: dict[str, Any] = answer.json()
        if self.split:
            service = httpx.get(
                f"http://127.0.0.1:{self.stats_port}/", params=params, timeout=600, trust_env=False
            )
            service.raise_for_status()
            document.update(service.json())
        return document

    def client(self, service: str) -> Any:
        import boto3

        make: Any = boto3.client
        return make(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=BENCH_KEY,
            aws_secret_access_key=BENCH_KEY,
        )

    def stop(self) -> int | None:
        self.api.close()
        code = None
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            code = self.process.wait(timeout=20)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        return code


class RssWatch:
    """The stack process's RSS every `interval` seconds, tagged with the batch's state (and,
    under --tracemalloc, the Python heap the stack process traces)."""

    def __init__(self, stack: Stack, interval: float = 0.25, *, traced: bool = False) -> None:
        self.stack = stack
        self.pid = stack.process.pid
        self.moto_pid = stack.moto_pid if stack.moto_pid != self.pid else None
        self.interval = interval
        self.traced = traced
        self.phase = "idle"
        self.peak: dict[str, int] = defaultdict(int)
        self.moto_peak: dict[str, int] = defaultdict(int)
        self.heap_peak: dict[str, int] = defaultdict(int)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            rss = int(proc_status(self.pid).get("VmRSS", 0))
            self.peak[self.phase] = max(self.peak[self.phase], rss)
            if self.moto_pid is not None:
                rss = int(proc_status(self.moto_pid).get("VmRSS", 0))
                self.moto_peak[self.phase] = max(self.moto_peak[self.phase], rss)
            if self.traced:
                with contextlib.suppress(Exception):
                    current = self.stack.stats(light=1)["traced"]["current"]
                    self.heap_peak[self.phase] = max(self.heap_peak[self.phase], current)

    def __enter__(self) -> RssWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


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
    split: bool = False
    moto_hwm: int = 0
    moto_baseline_rss: int = 0
    moto_rss_by_phase: dict[str, int] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    heap_by_phase: dict[str, int] = field(default_factory=dict)
    record_sizes: dict[str, int] = field(default_factory=dict)
    heap_tops: dict[str, Any] = field(default_factory=dict)


def _diff_rows(
    after: list[list[Any]], before: list[list[Any]], width: int
) -> dict[tuple[str, ...], list[float]]:
    table: dict[tuple[str, ...], list[float]] = {}
    for row in after:
        table[tuple(row[:width])] = [float(v) for v in row[width:]]
    for row in before:
        key = tuple(row[:width])
        if key in table:
            table[key] = [a - float(b) for a, b in zip(table[key], row[width:], strict=True)]
    return {k: v for k, v in table.items() if any(v)}


def register(stack: Stack) -> tuple[str, str]:
    address = f"bench-{uuid.uuid4().hex[:10]}@example.com"
    answer = stack.api.post(
        "/v1/auth/agent-register", json={"email": address, "password": "correct horse battery"}
    )
    if answer.status_code != 200:
        raise SystemExit(f"agent-register: {answer.status_code} {answer.text}")
    body = answer.json()
    return str(body["org_id"]), str(body["api_key"])


def grant(stack: Stack, org_id: str, usd: str) -> None:
    done = subprocess.run(
        [
            str(ADMIN),
            "credits",
            "grant",
            "--org",
            org_id,
            "--usd",
            usd,
            "--stack-file",
            str(stack.stack_file),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
    )
    if done.returncode != 0:
        raise SystemExit(f"credits grant failed: {done.stdout}{done.stderr}")


def upload(stack: Stack, headers: dict[str, str], path: Path, size: int) -> str:
    import httpx

    started = stack.api.post(
        "/v1/files/uploads", json={"filename": path.name, "bytes": size}, headers=headers
    )
    if started.status_code != 201:
        raise SystemExit(f"uploads: {started.status_code} {started.text}")
    file_id, signed = started.json()["file"]["id"], started.json()["upload"]
    with path.open("rb") as body:
        put = httpx.put(
            signed["url"], content=body.read(), headers=signed["headers"], timeout=600, trust_env=False
        )
    if put.status_code != 200:
        raise SystemExit(f"PUT to the signed URL: {put.status_code} {put.text[:500]}")
    done = stack.api.post(f"/v1/files/{file_id}/complete", headers=headers)
    if done.status_code != 200 or done.json()["file"]["status"] != "processed":
        raise SystemExit(f"complete: {done.status_code} {done.text[:1000]}")
    return str(file_id)


def transitions(stack: Stack, execution_arn: str) -> int:
    sfn = stack.client("stepfunctions")
    entered = 0
    token: str | None = None
    while True:
        page = sfn.get_execution_history(
            executionArn=execution_arn, maxResults=1000, **({"nextToken": token} if token else {})
        )
        entered += sum(1 for e in page["events"] if e["type"].endswith("StateEntered"))
        token = page.get("nextToken")
        if not token:
            return entered


def run_size(count: int, args: argparse.Namespace, folder: Path) -> Run:
    path = folder / f"items-{count}.jsonl"
    file_bytes = write_items(path, count, args.item_bytes)
    workdir = folder / f"stack-{count}"
    workdir.mkdir()
    stack = Stack(
        workdir,
        plain=args.plain,
        split=args.split,
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
            watch.phase = "create"
            sent = time.monotonic()
            created = stack.api.post(
                "/v1/batches",
                json={"input_file_id": file_id},
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
            "moto": final.get("moto_process", {}).get("cpu_seconds", 0)
            - baseline.get("moto_process", {}).get("cpu_seconds", 0),
        }
        steps = transitions(stack, execution_arn)
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
            split=stack.split and not stack.plain,
            moto_hwm=moto_hwm,
            moto_baseline_rss=moto_baseline_rss,
            moto_rss_by_phase=dict(watch.moto_peak),
            cpu=cpu,
            counts={k: int(v) for k, v in (batch.get("counts") or {}).items()},
            heap_by_phase=dict(watch.heap_peak),
            record_sizes=sizes,
            heap_tops=heap_tops,
        )
        if state != "completed":
            raise SystemExit(f"batch ended {state}: {json.dumps(batch)[:2000]}\n{stack.log_tail()}")
        return run
    finally:
        path.unlink(missing_ok=True)
        code = stack.stop()
        if code not in (0, None):
            print(f"(the stack exited with {code})", file=sys.stderr)


# -- the report ------------------------------------------------------------------------------------


@dataclass
class Costs:
    """Requests (and units) per item by service, and their list-price cost per 1M items."""

    rows: list[tuple[str, float, float, float, str]]  # service, requests/item, units/item, $/1M items, unit
    total: float
    gb_seconds: float  # handler wall time x memory
    gb_second_cost: float
    cpu_gb_seconds: float  # handler CPU time x memory: the floor on a dedicated core


S3_PUT_TIER = {
    "PutObject",
    "CopyObject",
    "UploadPart",
    "UploadPartCopy",
    "CreateMultipartUpload",
    "CompleteMultipartUpload",
    "ListObjects",
    "ListParts",
    "PostObject",
}
S3_FREE = {"DeleteObject", "DeleteObjects", "AbortMultipartUpload"}
# Not per item: the bench's own polling, the sweeper's schedule (one run a minute whatever the
# load) and the event source mappings' empty receives (idle polling; locally 1 s long polls).
UNCOUNTED_CALLERS = {"bench", "sweeper"}
FUNCTION_MEMORY_MB = {"api": 1024, "router": 1024, "settle": 1024, "webhook": 512, "sweeper": 512}
API_REQUESTS = 3  # POST /v1/files/uploads, POST /v1/files/{id}/complete, POST /v1/batches


def costs(run: Run, *, since: dict[str, Any]) -> Costs:
    requests = _diff_rows(run.final.get("requests", []), since.get("requests", []), 3)
    capacity = _diff_rows(run.final.get("dynamodb", []), since.get("dynamodb", []), 2)
    invocations = _diff_rows(run.final.get("invocations", []), since.get("invocations", []), 2)
    n = run.items
    counted = {
        k: v for k, v in requests.items() if k[0] not in UNCOUNTED_CALLERS and k[2] != "ReceiveMessage(empty)"
    }

    def count(service: str, ops: set[str] | None = None, column: int = 0) -> float:
        return sum(v[column] for k, v in counted.items() if k[1] == service and (ops is None or k[2] in ops))

    s3_put, s3_free = count("s3", S3_PUT_TIER), count("s3", S3_FREE)
    s3_get = count("s3") - s3_put - s3_free
    ddb_writes, ddb_reads = count("dynamodb", _DYNAMO_WRITES), count("dynamodb", _DYNAMO_READS)
    wru = sum(v[0] for k, v in capacity.items() if k[0] not in UNCOUNTED_CALLERS)
    rru = sum(v[1] for k, v in capacity.items() if k[0] not in UNCOUNTED_CALLERS)
    sqs, sqs_units = count("sqs"), count("sqs", column=1)
    kms = count("kms")
    handlers = {k: v for k, v in invocations.items() if k[0] not in UNCOUNTED_CALLERS}
    lambda_requests = sum(v[0] for v in handlers.values()) + API_REQUESTS
    gb_seconds = sum(v[2] * FUNCTION_MEMORY_MB.get(k[0], 1024) / 1024 for k, v in handlers.items())
    cpu_gb_seconds = sum(v[3] * FUNCTION_MEMORY_MB.get(k[0], 1024) / 1024 for k, v in handlers.items())
    per_m = 1e6 / n
    transitions = run.transitions
    rows = [
        ("DynamoDB writes", ddb_writes / n, wru / n, wru * PRICE["dynamodb_wru"] * per_m, "WRU"),
        ("DynamoDB reads", ddb_reads / n, rru / n, rru * PRICE["dynamodb_rru"] * per_m, "RRU"),
        ("S3 PUT/COPY/POST/LIST", s3_put / n, s3_put / n, s3_put * PRICE["s3_put"] * per_m, "req"),
        ("S3 GET/HEAD", s3_get / n, s3_get / n, s3_get * PRICE["s3_get"] * per_m, "req"),
        ("S3 DELETE (free)", s3_free / n, 0.0, 0.0, "req"),
        ("SQS", sqs / n, sqs_units / n, sqs_units * PRICE["sqs"] * per_m, "64KB"),
        (
            "Step Functions",
            count("states") / n,
            transitions / n,
            transitions * PRICE["sfn_transition"] * per_m,
            "trans",
        ),
        (
            "Lambda",
            lambda_requests / n,
            lambda_requests / n,
            lambda_requests * PRICE["lambda_request"] * per_m,
            "inv",
        ),
    ]
    if kms:
        rows.append(("KMS", kms / n, kms / n, kms * PRICE["kms"] * per_m, "req"))
    total = sum(r[3] for r in rows)
    return Costs(
        rows,
        total,
        gb_seconds,
        gb_seconds * PRICE["lambda_gb_second"] * per_m,
        cpu_gb_seconds,
    )


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
    moto_mem = (moto.get("s3_memory_bytes", 0) + moto.get("dynamodb_bytes", 0)) / MIB

    def phases(peaks: dict[str, int]) -> str:
        return ", ".join(f"{k} {v / MIB:.0f}" for k, v in peaks.items())

    who = "service process (API, pollers, handlers)" if run.split else "stack process (moto included)"
    print(
        f"memory, {who}: VmHWM {run.hwm / MIB:.0f} MiB; RSS before the upload "
        f"{run.baseline_rss / MIB:.0f} MiB; peak RSS (MiB) by batch state: {phases(run.rss_by_phase)}"
    )
    if run.split:
        print(
            f"memory, moto process: VmHWM {run.moto_hwm / MIB:.0f} MiB; RSS before the upload "
            f"{run.moto_baseline_rss / MIB:.0f} MiB; peak RSS (MiB) by batch state: "
            f"{phases(run.moto_rss_by_phase)}"
        )
        print(
            f"CPU from the upload to the end: service process {run.cpu['stack']:.1f} s, "
            f"moto process {run.cpu['moto']:.1f} s"
        )
    elif run.cpu:
        print(f"CPU of the stack process from the upload to the end: {run.cpu['stack']:.1f} s")
    if moto:
        print(
            f"moto holds at the end: S3 {moto['s3_objects']} objects, "
            f"{moto['s3_memory_bytes'] / MIB:.1f} MiB in memory + {moto['s3_disk_bytes'] / MIB:.1f} MiB "
            f"spilled to disk; DynamoDB {moto['dynamodb_items']} items, "
            f"{moto['dynamodb_bytes'] / MIB:.1f} MiB  (in memory: {moto_mem:.1f} MiB)"
        )
    if plain:
        return None
    cost = costs(run, since=run.baseline)
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
        return _diff_rows(run.final.get(name, []), run.baseline.get(name, []), width)

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
    service_cpu = run.cpu.get("stack", 0.0) if run.split else 0.0
    if run.split:
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
    where = "service process" if run.split else "stack process (moto included)"
    print(
        f"\nprofile of the {where} from the upload to the end: cProfile on every thread "
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


def _load() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "n/a"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000,100000", help="item counts, comma separated")
    parser.add_argument("--item-bytes", type=int, default=600, help="approximate bytes per JSONL line")
    parser.add_argument("--goal", type=float, default=GOAL_SECONDS, help="seconds allowed for 100,000 items")
    parser.add_argument("--timeout", type=float, default=3600.0, help="give up on one batch after this")
    parser.add_argument(
        "--poll", type=float, default=1.0, help="seconds between polls of the batch (0.2 s in the first 5 s)"
    )
    parser.add_argument("--credit-usd", default="100000", help="credits granted to the org")
    parser.add_argument("--plain", action="store_true", help="run .venv/bin/batchroute-local uninstrumented")
    parser.add_argument("--profile", action="store_true", help="sample the stack process's threads")
    parser.add_argument("--top", type=int, default=25, help="profile lines")
    parser.add_argument("--no-storage", action="store_true", help="do not sum what moto holds")
    parser.add_argument("--breakdown", action="store_true", help="print every request type")
    parser.add_argument(
        "--tracemalloc", type=int, default=0, metavar="FRAMES", help="trace the stack's Python heap"
    )
    parser.add_argument(
        "--heap-at", type=float, default=20.0, help="seconds into `running` for the heap snapshot"
    )
    parser.add_argument(
        "--split", action="store_true", help="moto in its own process: service and moto measured apart"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--moto", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.split)
        return 0
    if args.moto:
        serve_moto(args.moto)
        return 0
    # A SIGTERM (a `timeout`, say) unwinds like Ctrl-C, so the stack is stopped too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    mode = "plain batchroute-local" if args.plain else "instrumented runner"
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}; {mode}")
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average before: {_load()}")
    runs: list[Run] = []
    results: list[tuple[Run, Costs | None]] = []
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as folder:
        for count in sizes:
            run = run_size(count, args, Path(folder))
            runs.append(run)
            cost = print_run(run, args.plain)
            if args.breakdown and not args.plain:
                print_breakdown(run)
            if args.profile:
                print_profile(run, args.top)
            if args.tracemalloc:
                print_heap(run)
            results.append((run, cost))
            sys.stdout.flush()
    print(f"\nload average after: {_load()}")
    print(
        f"\n{'items':>8}{'create->done s':>16}{'items/s':>9}{'VmHWM MiB':>11}{'+MiB':>7}"
        f"{'moto MiB':>10}{'$/1M items':>12}"
    )
    for run, cost in results:
        moto = run.final.get("moto") or {}
        moto_mem = (moto.get("s3_memory_bytes", 0) + moto.get("dynamodb_bytes", 0)) / MIB
        dollars = f"{cost.total:>12.4f}" if cost else f"{'-':>12}"
        held = f"{moto_mem:>10.1f}" if moto else f"{'-':>10}"
        print(
            f"{run.items:>8}{run.completed_seconds:>16.1f}{run.items / run.completed_seconds:>9,.0f}"
            f"{run.hwm / MIB:>11.0f}{(run.hwm - run.baseline_rss) / MIB:>7.0f}{held}{dollars}"
        )
    failed = False
    big = [r for r in runs if r.items >= GOAL_SIZE]
    if big:
        worst = max(r.completed_seconds * GOAL_SIZE / r.items for r in big)
        ok = worst <= args.goal
        failed |= not ok
        print(f"\n100,000 items in {worst:.1f} s: <= {args.goal:.0f} s {'ok' if ok else 'MISSED'}")
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
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
