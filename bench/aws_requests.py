"""The pipeline bench's AWS requests: counted at the moto server, then priced per item at AWS
list prices (us-east-1, on demand). The figures of record for requests and cost in
bench/RESULTS.md come from here.

Counting (in moto's process): `CountingMiddleware` wraps moto's WSGI app and counts every
request by caller (a header the service's botocore adds, see `bench.instrumented`; moto's Step
Functions interpreter signs its integrations as `ak`, the bench as `bench`), service (the
SigV4 credential scope) and operation (X-Amz-Target, or the S3 method and query), with
DynamoDB's request units (`bench.capacity`), SQS's 64 KB chunks and moto's CPU per request.

Costing (in the bench's process): `costs` turns the counts between two readings into
requests, units and dollars per 1M items, leaving out what does not scale with the items: the
bench's own calls, the sweeper's schedule and the pollers' empty receives.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from batchroute import resources
from bench.capacity import DynamoSizer, Write
from bench.stack import BENCH_KEY, STATS_PATH
from bench.tally import TALLY, diff_rows

# AWS list prices, us-east-1, on demand (USD); sources: the AWS pricing pages (Lambda, Step
# Functions, SQS, S3, DynamoDB, API Gateway, EC2 data transfer), as of PRICES_AS_OF. Storage and
# transfer are per GiB (2^30 bytes), storage per GiB-month.
PRICES_AS_OF = "2026-11-29"
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
    "s3_gb_month": 0.023,  # S3 Standard, first 50 TB
    "dynamodb_gb_month": 0.25,  # Standard table class, past the first 25 GB
    "egress_gb": 0.09,  # data transfer out to the internet, first 10 TB a month
    "api_request": 1.00 / 1e6,  # API Gateway HTTP API, first 300M a month
}

_CREDENTIAL = re.compile(r"Credential=([^/]+)/\d+/[^/]+/([^/]+)/")
DYNAMO_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
DYNAMO_READS = {"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"}


# -- counting, in moto's process ---------------------------------------------------------------


def s3_operation(method: str, query: dict[str, list[str]], path: str, copy: bool) -> str:
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
        writes: list[Write] = []
        if service == "dynamodb" and op in DYNAMO_WRITES and caller != "bench":
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
                elif op in DYNAMO_READS and ok:
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
        op = s3_operation(method, query, environ.get("PATH_INFO", ""), "HTTP_X_AMZ_COPY_SOURCE" in environ)
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


# -- costing, in the bench's process -----------------------------------------------------------


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
# Each function's configured memory, as the CDK app deploys it (infra/compute.py reads the same).
FUNCTION_MEMORY_MB = {function.key: function.memory_mb for function in resources.FUNCTIONS}
API_REQUESTS = 3  # POST /v1/files/uploads, POST /v1/files/{id}/complete, POST /v1/batches


def costs(final: dict[str, Any], since: dict[str, Any], *, items: int, transitions: int) -> Costs:
    """What a batch of `items` cost in AWS requests: the counters of `final` minus those of
    `since`, plus the execution's `transitions` (Standard workflows bill state transitions)."""
    requests = diff_rows(final.get("requests", []), since.get("requests", []), 3)
    capacity = diff_rows(final.get("dynamodb", []), since.get("dynamodb", []), 2)
    invocations = diff_rows(final.get("invocations", []), since.get("invocations", []), 2)
    n = items
    counted = {
        k: v for k, v in requests.items() if k[0] not in UNCOUNTED_CALLERS and k[2] != "ReceiveMessage(empty)"
    }

    def count(service: str, ops: set[str] | None = None, column: int = 0) -> float:
        return sum(v[column] for k, v in counted.items() if k[1] == service and (ops is None or k[2] in ops))

    s3_put, s3_free = count("s3", S3_PUT_TIER), count("s3", S3_FREE)
    s3_get = count("s3") - s3_put - s3_free
    ddb_writes, ddb_reads = count("dynamodb", DYNAMO_WRITES), count("dynamodb", DYNAMO_READS)
    wru = sum(v[0] for k, v in capacity.items() if k[0] not in UNCOUNTED_CALLERS)
    rru = sum(v[1] for k, v in capacity.items() if k[0] not in UNCOUNTED_CALLERS)
    sqs, sqs_units = count("sqs"), count("sqs", column=1)
    kms = count("kms")
    handlers = {k: v for k, v in invocations.items() if k[0] not in UNCOUNTED_CALLERS}
    lambda_requests = sum(v[0] for v in handlers.values()) + API_REQUESTS
    gb_seconds = sum(v[2] * FUNCTION_MEMORY_MB.get(k[0], 1024) / 1024 for k, v in handlers.items())
    cpu_gb_seconds = sum(v[3] * FUNCTION_MEMORY_MB.get(k[0], 1024) / 1024 for k, v in handlers.items())
    per_m = 1e6 / n
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
