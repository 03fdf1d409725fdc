"""The local stack process of the pipeline bench: the runner's own entry point
(`batchroute_tools.local.__main__.main`, what `make run` runs) with the counters installed.
`bench.stack.Stack` starts it as `python -m bench.instrumented [--split]` from the repository
root; nothing else runs it.

Installed before the runner starts: moto's WSGI app wrapped in the request counter
(`bench.aws_requests`), every AWS call tagged with its caller (the function whose handler runs
on the thread, pool threads inheriting it; the event source mappings' polling; the API), every
handler invocation counted and timed, and optionally cProfile on every thread and tracemalloc.
The counters are served as JSON on `STATS_PATH` at the moto endpoint.

With `--split`, moto runs in a child process (`--moto PORT`: the same `MotoServer`, counted
there) and the service process serves its own counters on a loopback port, so the memory and
CPU of the service (API, pollers, handlers) and of moto are measured apart.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qs

from batchroute_tools.emulators.spool import Spool
from bench.aws_requests import CountingMiddleware
from bench.capacity import moto_tables
from bench.machine import proc_status
from bench.profiling import ThreadProfiles, heap_top
from bench.stack import ACCOUNT, INSTRUMENTED, REGION, ROOT, STATS_PATH, free_port
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
    files, size = Spool.held()
    document["emulator_spool"] = {"files": files, "bytes": size}
    document["sdk"] = tables["sdk"]
    document["egress"] = tables["egress"]
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
                command = [sys.executable, "-m", INSTRUMENTED, "--moto", str(self.port)]
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", action="store_true", help="moto in a child process (--moto)")
    parser.add_argument("--moto", type=int, default=0, metavar="PORT", help="be split mode's moto process")
    args = parser.parse_args()
    if args.moto:
        serve_moto(args.moto)
    else:
        serve(args.split)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
