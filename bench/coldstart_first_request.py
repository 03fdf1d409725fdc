"""Without SnapStart, what the first request of an area adds to the API's init: the import of
the route modules its path reaches (functions/api/lazy_routes.py), and of every module.

    .venv/bin/python -m bench.coldstart_first_request [--runs 5] [--before <checkout>] [PATH ...]

Each run is a fresh interpreter with the Lambda environment of bench/coldstart.py; the
figures are the median of the runs, in ms.

Then the first invocation of the handler itself (`GET /v1/health`, an API Gateway REST event):
what a cold start without SnapStart costs before the first answer, init and the first call
together, with everything the call does on top of the route modules (Mangum's event loop,
the settings read, the log keys, the metrics flush, the tracer), wall and CPU time. Anything
moved off the init onto the first call shows here (docs/cold-start.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from bench.coldstart import ROOT, probe

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
# An unauthenticated GET that makes no AWS call; its log lines go to stdout before the figures.
_INVOKE_PROBE = (
    "import time; t = time.perf_counter(); c = time.process_time(); import functions.api.handler as h; "
    "a = time.perf_counter(); "
    "ctx = type('Context', (), dict(function_name='bench', memory_limit_in_mb=1024, "
    "invoked_function_arn='arn:aws:lambda:us-east-1:123456789012:function:bench', aws_request_id='r-1'))(); "
    "event = dict(resource='/{{proxy+}}', path={path!r}, httpMethod='GET', "
    "headers={{'Host': 'api.example.com'}}, multiValueHeaders={{'Host': ['api.example.com']}}, "
    "queryStringParameters=None, "
    "multiValueQueryStringParameters=None, pathParameters=None, stageVariables=None, body=None, "
    "isBase64Encoded=False, requestContext=dict(requestId='r-1', stage='live', httpMethod='GET', "
    "path={path!r}, identity=dict(sourceIp='192.0.2.1'))); "
    "status = h.handler(event, ctx)['statusCode']; b = time.perf_counter(); "
    "print((a - t) * 1000, (b - a) * 1000, (time.process_time() - c) * 1000, status)"
)
INVOKE_PATH = "/v1/health"


def first_invocation(runs: int, roots: dict[str, Path]) -> list[str]:
    """Init, the first call, and the CPU time of both, per checkout (alternated run by run):
    medians, one line each."""
    code = _INVOKE_PROBE.format(path=INVOKE_PATH)
    samples: dict[str, list[list[str]]] = {name: [] for name in roots}
    for root in roots.values():
        probe(code, root)  # warm the file cache
    for _ in range(runs):
        for name, root in roots.items():
            samples[name].append(probe(code, root).split())
    lines = []
    for name, runs_of in samples.items():
        if any(sample[3] != "200" for sample in runs_of):
            raise SystemExit(f"GET {INVOKE_PATH} did not answer 200 in {name}: {runs_of}")
        init, call, cpu = (statistics.median(float(sample[i]) for sample in runs_of) for i in range(3))
        lines.append(
            f"{name}: first invocation, GET {INVOKE_PATH} through the handler: init {init:.0f} + call "
            f"{call:.0f} = {init + call:.0f} ms (CPU {cpu:.0f} ms)"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--before", type=Path, help="also this checkout's first invocation, alternated")
    parser.add_argument("paths", nargs="*", default=list(PATHS))
    args = parser.parse_args()
    print("load before:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"{'first request of':<24}{'init':>8}{'+ area':>9}{'init + all':>12}")
    for path in args.paths:
        probe(_PROBE.format(path=path))  # warm the file cache
        runs = [[float(x) for x in probe(_PROBE.format(path=path)).split()] for _ in range(args.runs)]
        init, area, every = (statistics.median(run[i] for run in runs) for i in range(3))
        print(f"{path:<24}{init:>8.0f}{area:>9.0f}{every:>12.0f}")
    roots = {"before": args.before.resolve()} if args.before else {}
    roots["after" if args.before else "this checkout"] = ROOT
    print("\n".join(first_invocation(args.runs, roots)))
    print("load after:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
