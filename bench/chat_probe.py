"""The local stack exactly as `make run` runs it, with timing probes: the breakdown half of
bench/chat_overhead.py. Not product code; nothing imports it but the bench.

`python -m bench.chat_probe` (from the repository root) installs the probes, then runs
`batchroute_tools.local`'s `main()` (moto server, vendor emulators, provisioning, pollers,
uvicorn: the same code as `make run`). moto runs in a process of its own, as under `make run`:
the runner's `MotoServer` starts `python -m bench.chat_probe --fd N --moto`, which installs
the moto-side probe and then runs moto_server's `main`. Every HTTP request the API serves
appends one JSON line to `$CHAT_PROBE_OUT` once its answer has ended. All times are
`time.perf_counter()` values, which on Linux is CLOCK_MONOTONIC, shared by every process on
the machine: the bench compares them with its own client-side times, and the service's with
moto's.

A line holds:
- `asgi_start`, `response_start`, `sends` (`[time, kind]` per body message: `role`,
  `content`, `finish`, `usage`, `done`, `end`, `other`), `asgi_end`;
- `spans`: named intervals measured in the service (`authenticate`, `rate_limit`, `parse`,
  `plan`, `hold`, `provider_open`, `provider_first_byte`, `settle`, `next_event`), each `[name, start, end]`;
- `hops`: every `anyio.to_thread.run_sync` (which FastAPI and Starlette use for sync
  dependencies, `run_in_threadpool` and the stream's `next_event`) as
  `[submitted, started, finished, resumed]`: the waits on both sides are the hop's cost;
- `aws`: every botocore call `{op, start, end, http: [{start, end, server}]}` where
  `server` is what moto's WSGI app measured for that very call, in the moto process, and sent
  back in the `x-probe-server` response header (`start`, `wall`, `cpu` = the server thread's
  CPU time, `deepcopy` = time in moto's TransactWriteItems table copies, `items` = item counts
  of the tables it copied).

`CHAT_PROBE_STOCK_MOTO=1`: the moto process keeps moto's own transaction rollback (whole-table
copies) instead of the local stack's (batchroute_tools/local/moto_transactions.py).
"""

from __future__ import annotations

import argparse
import contextvars
import cProfile
import itertools
import json
import os
import threading
import time
from collections.abc import Callable
from functools import partial, wraps
from pathlib import Path
from typing import Any

MODULE = "bench.chat_probe"  # run with -m from the repository root: the service and moto processes
CALL_HEADER = "x-probe-call"
SERVER_HEADER = "x-probe-server"  # moto's timing of the call, as JSON, on its answer

_request: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "probe_request", default=None
)
_call_ids = itertools.count(1)
_local = threading.local()
_out_lock = threading.Lock()


def _now() -> float:
    return time.perf_counter()


def _span(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(func)
    def timed(*args: Any, **kwargs: Any) -> Any:
        record = _request.get()
        start = _now()
        try:
            return func(*args, **kwargs)
        finally:
            if record is not None:
                record["spans"].append([name, start, _now()])

    return timed


# -- client side: botocore ---------------------------------------------------------------------
def _install_botocore() -> None:
    from botocore.client import BaseClient
    from botocore.httpsession import URLLib3Session

    make_api_call = BaseClient._make_api_call
    send = URLLib3Session.send

    def timed_call(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        record = _request.get()
        if record is None:
            return make_api_call(self, operation_name, api_params)
        call = {"op": f"{self.meta.service_model.service_name}:{operation_name}", "start": _now(), "http": []}
        _local.call = call
        try:
            return make_api_call(self, operation_name, api_params)
        finally:
            call["end"] = _now()
            _local.call = None
            record["aws"].append(call)

    def timed_send(self: Any, request: Any) -> Any:
        call = getattr(_local, "call", None)
        if call is None:
            return send(self, request)
        request.headers[CALL_HEADER] = str(next(_call_ids))
        start = _now()
        response = None
        try:
            response = send(self, request)
            return response
        finally:
            end = _now()
            timing = response.headers.get(SERVER_HEADER) if response is not None else None
            call["http"].append(
                {"start": start, "end": end, "server": json.loads(timing) if timing else None}
            )

    BaseClient._make_api_call = timed_call  # type: ignore[method-assign]
    URLLib3Session.send = timed_send  # type: ignore[method-assign]


# -- server side: moto, in the moto process ------------------------------------------------------
def _install_moto(stock: bool) -> None:
    """Before the moto server is made: the local stack's transactions (unless `stock`), then the
    probe over them (it wraps the `copy` moto's DynamoDB then uses)."""
    from batchroute_tools.local import moto_transactions

    install = moto_transactions.install

    def install_then_probe() -> None:
        if not stock:
            install()
        _install_dispatch_probe()

    setattr(moto_transactions, "install", install_then_probe)  # noqa: B010 (make_moto_server calls it)


def _install_dispatch_probe() -> None:
    import moto.dynamodb.models as dynamodb_models
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    dispatch = DomainDispatcherApplication.__call__
    profile_out = os.environ.get("CHAT_PROBE_MOTO_CPROFILE")
    profiler = cProfile.Profile() if profile_out else None
    profiled = itertools.count(1)
    profile_lock = threading.Lock()

    def timed_dispatch(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        call_id = environ.get("HTTP_X_PROBE_CALL")
        if call_id is None:
            return dispatch(self, environ, start_response)
        entry: dict[str, Any] = {"deepcopy": 0.0, "items": {}}
        _local.server = entry
        answer: list[Any] = []

        def held(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            answer[:] = [status, headers, exc_info]  # started below, once the timing is known
            return _no_write

        profiling = profiler is not None and profile_lock.acquire(blocking=False)
        start, cpu = _now(), time.thread_time()
        try:
            if profiling:
                assert profiler is not None
                body = profiler.runcall(dispatch, self, environ, held)
            else:
                body = dispatch(self, environ, held)
        finally:
            entry.update(start=start, wall=_now() - start, cpu=time.thread_time() - cpu)
            if profiling:
                assert profiler is not None
                if next(profiled) % 50 == 0:
                    profiler.dump_stats(str(profile_out))
                profile_lock.release()
            _local.server = None
        status, headers, exc_info = answer
        start_response(status, [*headers, (SERVER_HEADER, json.dumps(entry))], exc_info)
        return body

    inner = dynamodb_models.copy  # the module, or the local stack's moto_transactions proxy

    class _TimedCopy:
        """moto.dynamodb.models' `copy`, with the deep copies of whole tables timed (moto's
        transactions copy every table they name, to roll back)."""

        def __getattr__(self, name: str) -> Any:
            return getattr(inner, name)

        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            entry = getattr(_local, "server", None)
            start = _now()
            try:
                return inner.deepcopy(value, memo)
            finally:
                if entry is not None and hasattr(value, "hash_key_attr"):
                    entry["deepcopy"] += _now() - start
                    entry["items"][str(value.name).rsplit("-", 1)[-1]] = _item_count(value)

    DomainDispatcherApplication.__call__ = timed_dispatch  # type: ignore[method-assign]
    dynamodb_models.copy = _TimedCopy()  # type: ignore[assignment]


def _no_write(data: bytes) -> None:
    raise RuntimeError("moto answered through WSGI's write(): the probe cannot time it")


def _item_count(table: Any) -> int:
    items = getattr(table, "items", {})
    if getattr(table, "range_key_attr", None):
        return sum(len(v) for v in items.values())
    return len(items)


# -- the service --------------------------------------------------------------------------------
def _install_service() -> None:
    import anyio.to_thread

    from batchroute.domain.chat import requests as chat_requests
    from batchroute.services.accounts import authentication
    from batchroute.services.chat import direct as chat_direct
    from batchroute.services.chat import early_start as chat_early
    from batchroute.services.chat import state as chat_state
    from functions.api import auth, limits
    from functions.api.routes.chat import completions as chat

    run_sync = anyio.to_thread.run_sync

    async def timed_run_sync(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        record = _request.get()
        if record is None:
            return await run_sync(func, *args, **kwargs)
        hop = [_now(), 0.0, 0.0, 0.0, time.thread_time()]

        def run(*inner: Any) -> Any:
            hop[1] = _now()
            try:
                return func(*inner)
            finally:
                hop[2] = _now()

        try:
            return await run_sync(run, *args, **kwargs)
        finally:
            hop[3] = _now()
            record["hops"].append(hop)

    anyio.to_thread.run_sync = timed_run_sync

    authentication.Authenticator.authenticate = _span(  # type: ignore[method-assign]
        "authenticate", authentication.Authenticator.authenticate
    )
    auth.enforce_caller_limits = _span("rate_limit", limits.enforce_caller_limits)
    chat.parse_chat_request = _span("parse", chat_requests.parse_chat_request)
    chat_direct.DirectChat.plan = _span("plan", chat_direct.DirectChat.plan)  # type: ignore[method-assign]
    chat_state.HoldKeeper.open = _span("hold", chat_state.HoldKeeper.open)  # type: ignore[method-assign]
    chat_direct.DirectCall.finish = _span("settle", chat_direct.DirectCall.finish)  # type: ignore[method-assign]
    chat_direct.DirectCall.next_event = _span(  # type: ignore[method-assign]
        "next_event", chat_direct.DirectCall.next_event
    )
    first_byte = chat_direct.DirectChat._first_byte
    chat_direct.DirectChat._first_byte = _span("provider_first_byte", first_byte)  # type: ignore[method-assign]
    # The provider's request: sent on an early-start thread while the hold commits
    # (services/chat/early_start.py), or on the request's own thread after it. The pool's
    # threads do not inherit the request's context: the probe hands it over.
    chat_direct.DirectChat._open_lane = _span(  # type: ignore[method-assign]
        "provider_open", chat_direct.DirectChat._open_lane
    )
    start_early = chat_early.EarlyStarts.start

    def start_in_context(self: Any, org_id: str, lane: Any, begin: Callable[[], Any]) -> Any:
        return start_early(self, org_id, lane, partial(contextvars.copy_context().run, begin))

    chat_early.EarlyStarts.start = start_in_context  # type: ignore[method-assign]


def _kind(body: bytes, more: bool) -> str:
    if not body:
        return "end" if not more else "other"
    if body.startswith(b"data: [DONE]"):
        return "done"
    if b'"role"' in body:
        return "role"
    if b'"finish_reason":"' in body or b'"finish_reason": "' in body:
        return "finish"
    if b'"usage":{' in body or b'"usage": {' in body:
        return "usage"
    if b'"content"' in body:
        return "content"
    return "other"


def wrap_app(app: Any, out: Path) -> Any:
    profile_out = os.environ.get("CHAT_PROBE_CPROFILE")
    profiler = cProfile.Profile() if profile_out else None
    served = itertools.count(1)

    async def probed(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if profiler is not None and scope["path"] == "/v1/chat/completions":
            n = next(served)
            if n == 10:  # after a warm-up: the event loop thread's own Python, from here on
                profiler.enable()
            elif n > 10 and n % 20 == 0:
                profiler.dump_stats(str(profile_out))
        headers = dict(scope.get("headers", []))
        record: dict[str, Any] = {
            "request_id": headers.get(b"x-request-id", b"").decode("latin-1"),
            "path": scope["path"],
            "asgi_start": _now(),
            "asgi_start_cpu": time.thread_time(),
            "spans": [],
            "hops": [],
            "aws": [],
            "sends": [],
        }
        token = _request.set(record)

        async def timed_send(message: dict[str, Any]) -> None:
            await send(message)
            if message["type"] == "http.response.start":
                record["response_start"] = _now()
                record["status"] = message["status"]
            elif message["type"] == "http.response.body":
                more = bool(message.get("more_body", False))
                record["sends"].append([_now(), _kind(message.get("body", b""), more)])

        try:
            await app(scope, receive, timed_send)
        finally:
            record["asgi_end"] = _now()
            _request.reset(token)
            if record["path"] == "/v1/chat/completions":
                line = json.dumps(record)
                with _out_lock, out.open("a", encoding="utf-8") as handle:
                    handle.write(line + "\n")

    return probed


def install(out: Path) -> None:
    _install_botocore()
    from batchroute_tools.local import runner
    from batchroute_tools.local.moto_server import MotoServer

    # The runner's moto process runs this module (`--moto`), which probes moto there.
    setattr(runner, "MotoServer", partial(MotoServer, module=MODULE, args=("--moto",)))  # noqa: B010
    make_server = runner._api_server

    def api_server(port: int) -> Any:
        _install_service()  # now: the service's modules read their settings on import
        server = make_server(port)
        server.config.app = wrap_app(server.config.app, out)
        return server

    runner._api_server = api_server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    parser.add_argument("--moto", action="store_true", help="be the stack's moto process (needs --fd)")
    parser.add_argument("--fd", type=int, help="the moto process's listening socket, bound by the runner")
    args = parser.parse_args(argv)
    if args.moto:
        if args.fd is None:
            parser.error("--moto needs --fd")
        from batchroute_tools.local import moto_server

        _install_moto(stock=os.environ.get("CHAT_PROBE_STOCK_MOTO") == "1")
        moto_server.main(["--fd", str(args.fd)])
        return
    install(Path(os.environ["CHAT_PROBE_OUT"]))
    from batchroute_tools.local.__main__ import main as run

    run([])


if __name__ == "__main__":
    main()
