"""`batchroute-local` (`make run`): the whole service on embedded AWS, in the foreground.

This module only reads the command line and takes over SIGINT and SIGTERM, before
the heavy imports, so even a Ctrl-C during startup stops cleanly; runner.py does
the rest.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from batchroute_tools.local.scheduler import DEFAULT_INTERVAL_SECONDS

DEFAULT_STACK_FILE = Path(".local/stack.json")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="batchroute-local", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("PORT", "8000")),
        help="API port on 127.0.0.1 (default: $PORT or 8000)",
    )
    parser.add_argument(
        "--moto-port",
        type=int,
        default=int(os.environ.get("MOTO_SERVER_PORT", "0")),
        help="moto server port (default: $MOTO_SERVER_PORT or any free port)",
    )
    parser.add_argument(
        "--sweeper-interval",
        type=float,
        default=float(os.environ.get("SWEEPER_INTERVAL_SECONDS", DEFAULT_INTERVAL_SECONDS)),
        help="seconds between sweeper runs (default: $SWEEPER_INTERVAL_SECONDS or the declared rate)",
    )
    parser.add_argument(
        "--stack-file",
        type=Path,
        default=Path(os.environ.get("BATCHROUTE_LOCAL_STACK_FILE", DEFAULT_STACK_FILE)),
        help="where to describe the running stack (default: .local/stack.json)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    started = time.monotonic()
    args = parse_args(argv)
    stop = threading.Event()
    _stop_on_signals(stop)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from batchroute_tools.local import runner  # heavy: moto, boto3, uvicorn

    code = runner.run(
        port=args.port,
        moto_port=args.moto_port,
        sweeper_interval=args.sweeper_interval,
        stack_file=args.stack_file,
        stop=stop,
        started=started,
    )
    sys.stdout.flush()
    sys.stderr.flush()
    # A consumer may still be mid-invocation in a daemon thread; like Lambda freezing
    # it, do not wait for it. Everything it could have written lived in moto anyway.
    os._exit(code)


def _stop_on_signals(stop: threading.Event) -> None:
    def handle(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            os._exit(128 + signum)  # asked twice: stop waiting for a graceful shutdown
        stop.set()

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)


if __name__ == "__main__":
    main()
