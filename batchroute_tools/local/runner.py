"""The local stack's lifecycle: moto, resources, the service's environment, pollers, timer, API.

Order matters: moto first, then every resource, then the service's environment, and
only then the handler modules, because they read their settings on import exactly as
a Lambda cold start does. State lives in moto's memory and is gone when it stops.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import boto3
import uvicorn

from batchroute import resources
from batchroute.config import Settings
from batchroute_tools.local import environment, memory
from batchroute_tools.local.child import ChildServer
from batchroute_tools.local.console import mount_console
from batchroute_tools.local.lambda_runtime import context_for, load_handler
from batchroute_tools.local.moto_server import MotoServer
from batchroute_tools.local.poller import QueuePoller
from batchroute_tools.local.provision import LOCAL_ACCOUNT, LOCAL_REGION, LocalStack, provision
from batchroute_tools.local.scheduler import SweeperSchedule

# Not under "batchroute": Powertools' Logger(service="batchroute") filters every record whose
# logger name contains its service name out of the root handlers.
log = logging.getLogger("local.runner")

HOST = "127.0.0.1"
# A queue fed one message per batch (a lane) carries long work; several pollers let
# lanes run side by side, as Lambda runs concurrent invocations.
SINGLE_MESSAGE_QUEUE_WORKERS = 4
# How long to wait for threads to finish their current poll or request on shutdown.
SHUTDOWN_GRACE_SECONDS = 4.0


def run(
    *,
    port: int,
    moto_port: int,
    sweeper_interval: float,
    stack_file: Path,
    stop: threading.Event,
    started: float | None = None,
) -> int:
    """Run until `stop` is set (the caller's signal handlers set it); return the exit code.

    `started` is the launch's time.monotonic(), for the ready line's startup time.
    """
    started = time.monotonic() if started is None else started
    if stop.is_set():
        return 0
    environment.use_fake_credentials(LOCAL_REGION)
    memory.limit_arenas()  # before any thread starts (batchroute_tools/local/memory.py)

    api_url = f"http://{HOST}:{port}"
    moto = MotoServer(host=HOST, port=moto_port)
    emulators = _emulators(moto, api_url=api_url)
    threads: list[threading.Thread] = []
    api: uvicorn.Server | None = None
    try:
        # Side by side: each child imports what it serves while the other does.
        moto.spawn()
        emulators.spawn()
        moto.wait_ready()
        emulators.wait_ready()
        moto.enable_state_machine_execution()
        stack = _provision_service(moto, api_url=api_url, emulators_url=emulators.url)
        threads += _start_consumers(stack, stop)
        threads.append(_sweeper_schedule(stack, sweeper_interval).start(stop))
        threads.append(reconciliation_schedule(stack).start(stop))
        # Written before the API answers: whoever sees /v1/health up can read the stack file.
        environment.write_stack_file(stack_file, stack, api_url=api_url, emulators_url=emulators.url)
        api = _api_server(port, uploads_origin=moto.endpoint_url)
        api_thread = threading.Thread(target=api.run, name="api", daemon=True)
        api_thread.start()
        threads.append(api_thread)
        if not _wait_until_serving(api, api_thread, stop):
            if stop.is_set():
                return 0
            log.error("the API did not start on %s (is the port taken?)", api_url)
            return 1

        print(
            f"batchroute local stack ready at {api_url} (moto at {moto.endpoint_url}) "
            f"in {time.monotonic() - started:.1f}s; Ctrl-C stops it",
            flush=True,
        )
        while not stop.wait(memory.TRIM_EVERY_SECONDS):
            memory.trim()  # what one phase freed is not kept for the next (memory.py)
        log.info("stopping the local stack")
        return 0
    finally:
        if api is not None:
            api.should_exit = True
        stop.set()
        deadline = time.monotonic() + SHUTDOWN_GRACE_SECONDS
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        environment.remove_stack_file(stack_file)
        emulators.stop()
        moto.stop()


def _emulators(moto: MotoServer, *, api_url: str) -> ChildServer:
    """The vendor emulators every provider's adapter talks to (docs/emulators.md), in a process
    of their own; Bedrock's batch jobs read and write S3 on the moto server; the payment
    emulator sends its webhooks to the API (docs/payments.md)."""
    return ChildServer(
        "vendor emulators",
        "batchroute_tools.emulators",
        host=HOST,
        port=0,
        args=(
            "--s3-endpoint",
            moto.endpoint_url,
            "--payments-webhook-url",
            f"{api_url}/v1/billing/stripe/webhook",
            "--region",
            LOCAL_REGION,
        ),
    )


def _provision_service(moto: MotoServer, *, api_url: str, emulators_url: str) -> LocalStack:
    """Create every resource, then give this process the environment CDK gives the functions."""
    stack = provision(
        prefix=resources.resource_prefix("local"),
        account=LOCAL_ACCOUNT,
        region=LOCAL_REGION,
        endpoint_url=moto.endpoint_url,
        email_sender=Settings.from_environ({**os.environ, "ENVIRONMENT": "local"}).email_sender,
    )
    os.environ.update(environment.service_environment(stack, api_url=api_url))
    os.environ["VENDOR_EMULATOR_URL"] = emulators_url
    # Refuse a bad configuration now, with a clear message, rather than in the first handler.
    Settings.from_environ(os.environ)
    return stack


def _start_consumers(stack: LocalStack, stop: threading.Event) -> list[threading.Thread]:
    """One event source mapping per queue: poll it and invoke its consumer function."""
    sqs = boto3.session.Session().client("sqs", region_name=stack.region, endpoint_url=stack.endpoint_url)
    threads = []
    for queue in resources.QUEUES:
        poller = QueuePoller(
            queue=queue,
            queue_url=stack.queue_urls[queue.key],
            queue_arn=stack.queue_arns[queue.key],
            region=stack.region,
            handler=load_handler(queue.consumer),
            context_factory=_context_factory(queue.consumer, stack),
            sqs=sqs,
        )
        workers = SINGLE_MESSAGE_QUEUE_WORKERS if queue.batch_size == 1 else 1
        threads += poller.start(stop, workers=workers)
    return threads


def _sweeper_schedule(
    stack: LocalStack,
    interval_seconds: float,
    *,
    rule: str = "sweeper",
    rule_input: dict[str, Any] | None = None,
) -> SweeperSchedule:
    return SweeperSchedule(
        handler=load_handler("sweeper"),
        context_factory=_context_factory("sweeper", stack),
        interval_seconds=interval_seconds,
        rule_arn=f"arn:aws:events:{stack.region}:{stack.account}:rule/{stack.prefix}-{rule}",
        account=stack.account,
        region=stack.region,
        rule_input=rule_input,
    )


def reconciliation_schedule(stack: LocalStack) -> SweeperSchedule:
    """The daily payments reconciliation rule (infra/compute.py): the sweeper with its input."""
    return _sweeper_schedule(
        stack,
        resources.RECONCILIATION_RATE_HOURS * 3600,
        rule=resources.RECONCILIATION_RULE,
        rule_input=resources.RECONCILIATION_EVENT,
    )


def _context_factory(function_key: str, stack: LocalStack) -> Callable[[], Any]:
    return partial(context_for, function_key, prefix=stack.prefix, region=stack.region, account=stack.account)


def _api_server(port: int, *, uploads_origin: str) -> uvicorn.Server:
    app = importlib.import_module("functions.api.app").app
    mount_console(app, upload_origins=(uploads_origin,))
    return uvicorn.Server(api_config(app, port=port, settings=Settings.from_environ(os.environ)))


def api_config(app: Any, *, port: int, settings: Settings) -> uvicorn.Config:
    """How the local server runs the app. The client IP the rate limits see is the socket
    peer: uvicorn's default would replace it with X-Forwarded-For from 127.0.0.1 (anyone on
    the machine could then claim any address), so forwarded headers are honoured only from
    the proxies TRUSTED_PROXIES names (docs/rate-limits.md, "The client IP")."""
    trusted = settings.trusted_proxies
    # No uvicorn access log: the app's own middleware logs each request, with its correlation id.
    return uvicorn.Config(
        app,
        host=HOST,
        port=port,
        log_level="info",
        access_log=False,
        timeout_graceful_shutdown=2,
        proxy_headers=bool(trusted),
        forwarded_allow_ips=list(trusted) if trusted else "",
    )


def _wait_until_serving(api: uvicorn.Server, thread: threading.Thread, stop: threading.Event) -> bool:
    while not api.started:
        if stop.is_set() or not thread.is_alive():
            return False
        time.sleep(0.05)
    return True
