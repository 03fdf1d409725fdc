"""The local stack process of the pipeline bench: the runner's own entry point
(`batchroute_tools.local.__main__.main`, what `make run` runs) with the counters installed.
`bench.stack.Stack` starts it as `python -m bench.instrumented` from the repository root;
nothing else runs it.

moto runs in a process of its own, as under `make run` (batchroute_tools/local/child.py): the
runner's `MotoServer` is replaced by one whose child is `python -m bench.instrumented --fd N
--moto`, which wraps moto's WSGI app in the request counter (`bench.aws_requests`) and then
runs `batchroute_tools.local.moto_server.main`; the moto process's counters (requests, request
units, moto's CPU, what moto holds) are served as JSON on `STATS_PATH` at the moto endpoint.

In the service process (API, pollers, handlers), installed before the runner starts: every
AWS call tagged with its caller (the function whose handler runs on the thread, pool threads
inheriting it; the event source mappings' polling; the API), every handler invocation counted
and timed, the bytes sent to the vendors, and optionally cProfile on every thread and
tracemalloc. Its counters are served on a loopback port of their own
(`BENCH_SERVICE_STATS_PORT`); `Stack.stats` merges both. The vendor emulators' process is not
instrumented: the bench reads its memory and its spool directory from outside.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import threading
import time
import tracemalloc
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any
from urllib.parse import parse_qs

from bench.aws_requests import CountingMiddleware
from bench.capacity import moto_tables
from bench.machine import proc_status
from bench.profiling import ThreadProfiles, heap_top
from bench.stack import ACCOUNT, INSTRUMENTED
from bench.tally import TALLY

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


def _moto_storage() -> dict[str, Any]:
    """What moto holds: S3 bytes in memory and spilled to disk, DynamoDB items."""
    from moto.s3.models import s3_backends

    in_memory = on_disk = objects = 0
    s3_by_class: dict[str, int] = {}
    with contextlib.suppress(Exception):
        for bucket in list(s3_backends[ACCOUNT]["aws"].buckets.values()):
            keys = [k for versions in list(bucket.keys.lists()) for k in versions[1]]
            for upload in list(bucket.multiparts.values()):
                keys += list(upload.parts.values())
            for key in keys:
                buffer = getattr(key, "_value_buffer", None)
                size = int(getattr(key, "contentsize", 0) or 0)
                objects += 1
                klass = f"{bucket.name}:{_key_class(str(getattr(key, 'name', '')))}"
                s3_by_class[klass] = s3_by_class.get(klass, 0) + size
                if buffer is not None and getattr(buffer, "_rolled", False):
                    on_disk += size
                else:
                    in_memory += size
    items = item_bytes = 0
    dynamodb_by_table: dict[str, list[int]] = {}
    with contextlib.suppress(Exception):
        for name, table in list(moto_tables().tables.items()):
            row = dynamodb_by_table.setdefault(name, [0, 0])
            for found in list(table.all_items()):
                items += 1
                item_bytes += found.size()
                row[0] += 1
                row[1] += found.size()
    return {
        "s3_bytes_by_class": s3_by_class,
        "dynamodb_by_table": dynamodb_by_table,
        "s3_objects": objects,
        "s3_memory_bytes": in_memory,
        "s3_disk_bytes": on_disk,
        "dynamodb_items": items,
        "dynamodb_bytes": item_bytes,
    }


def _key_class(key: str) -> str:
    """An S3 key's kind: `batches/<id>/input/3.jsonl` -> `batches/input`, `files/<org>/<id>` -> `files`."""
    parts = key.split("/")
    if parts[0] == "batches" and len(parts) > 2:
        return f"batches/{parts[2]}"
    return parts[0]


def _count_moto_requests(stats: Callable[[dict[str, list[str]]], dict[str, Any]]) -> None:
    """In the moto process: wrap the app of the moto server made from now on in the request
    counter (`make_moto_server` takes moto's dispatcher from its module when it is called)."""
    from moto.moto_server import werkzeug_app

    dispatcher = werkzeug_app.DomainDispatcherApplication

    def counted_app(create_app: Any) -> Any:
        return CountingMiddleware(dispatcher(create_app), stats)

    setattr(werkzeug_app, "DomainDispatcherApplication", counted_app)  # noqa: B010


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
    _count_egress()

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


def _count_egress() -> None:
    """Count the bytes every httpx request sends (the vendors' calls: out to the internet on AWS)."""
    import httpx

    send = httpx.Client.send

    def counted_send(self: Any, request: Any, **kwargs: Any) -> Any:
        head = len(request.method) + len(str(request.url)) + 11  # request line
        head += sum(len(k) + len(v) + 4 for k, v in request.headers.raw)
        body = int(request.headers.get("content-length") or 0)
        TALLY.add("egress", (_caller(), request.url.netloc.decode()), 1, head + body)
        return send(self, request, **kwargs)

    setattr(httpx.Client, "send", counted_send)  # noqa: B010


def _service_stats(
    profiles: ThreadProfiles | None, frames: int, query: dict[str, list[str]]
) -> dict[str, Any]:
    document: dict[str, Any] = {"process": proc_status(), "pid": os.getpid()}
    if frames:
        current, peak = tracemalloc.get_traced_memory()
        document["traced"] = {"current": current, "peak": peak}
        if "top" in query:
            document["traced"]["top"] = heap_top(int(query["top"][0]))
    if "light" in query:
        return document
    tables = TALLY.snapshot()
    document["invocations"] = tables["invocations"]
    document["sdk"] = tables["sdk"]
    document["egress"] = tables["egress"]
    if profiles is not None and "profile_mark" in query:
        profiles.mark()
    if profiles is not None and "profile" in query:
        document["profile"] = profiles.report(int(query["profile"][0]))
    return document


def _serve_stats(port: int, stats: Callable[[dict[str, list[str]]], dict[str, Any]]) -> None:
    """The service process's own counters on a loopback port."""
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


def serve() -> None:
    """The local stack, started by the runner's own entry point, with the counters installed:
    the service's here, moto's in the moto process (`serve_moto`)."""
    from batchroute_tools.local import __main__ as local_main
    from batchroute_tools.local import runner
    from batchroute_tools.local.moto_server import MotoServer

    profiles = ThreadProfiles() if os.environ.get("BENCH_PROFILE") == "1" else None
    frames = int(os.environ.get("BENCH_TRACEMALLOC") or 0)
    if frames:
        tracemalloc.start(frames)

    def service_stats(query: dict[str, list[str]]) -> dict[str, Any]:
        return _service_stats(profiles, frames, query)

    _serve_stats(int(os.environ["BENCH_SERVICE_STATS_PORT"]), service_stats)
    # The runner's moto process, running this module's `serve_moto` instead of moto_server's main.
    setattr(runner, "MotoServer", partial(MotoServer, module=INSTRUMENTED, args=("--moto",)))  # noqa: B010
    _instrument_service()
    if profiles is not None:
        profiles.install()
    local_main.main([])


def serve_moto(fd: int) -> None:
    """The moto process: `moto_server.main` on the socket the runner bound, counted."""
    from batchroute_tools.local import moto_server

    _count_moto_requests(_moto_stats)
    moto_server.main(["--fd", str(fd)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moto", action="store_true", help="be the stack's moto process (needs --fd)")
    parser.add_argument("--fd", type=int, help="the moto process's listening socket, bound by the runner")
    args = parser.parse_args()
    if args.moto:
        if args.fd is None:
            parser.error("--moto needs --fd")
        serve_moto(args.fd)
    else:
        serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
