"""The local AWS: moto in server mode, in a process of its own, on a loopback port.

A child process (child.py), as DynamoDB, S3, SQS and Step Functions are outside a Lambda
function: moto's request parsing never holds the service's GIL. The runner binds the socket
first, so a taken port fails loudly here instead of hanging a server. DynamoDB transactions
roll back item by item instead of by copying whole tables, and each DynamoDB request is
isolated from the writes beside it (moto_transactions.py); DynamoDB answers are written from
their wire form (moto_answers.py); both are installed in the moto process (as is moto
listing its own modules once, not on every request).
`python -m batchroute_tools.local.moto_server --fd N` is the child.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import httpx

from batchroute_tools.local import memory
from batchroute_tools.local.child import ChildServer, inherited_socket, serve_until_parent_exits

if TYPE_CHECKING:
    from werkzeug.serving import BaseWSGIServer


class MotoServer(ChildServer):
    """The runner's side of the moto process. `module` is what the child runs: this module's
    `main`, or a bench's module that installs its counters in the moto process, then calls it."""

    def __init__(
        self, *, host: str = "127.0.0.1", port: int = 0, module: str = __name__, args: Sequence[str] = ()
    ) -> None:
        super().__init__("moto server", module, host=host, port=port, args=args)

    @property
    def endpoint_url(self) -> str:
        return self.url

    def enable_state_machine_execution(self) -> None:
        """Turn on moto's ASL interpreter: executions really run instead of returning at once."""
        response = httpx.post(
            f"{self.endpoint_url}/moto-api/config",
            json={"stepfunctions": {"execute_state_machine": True}},
            timeout=10,
            trust_env=False,  # loopback: never through a configured proxy
        )
        response.raise_for_status()


def make_moto_server(host: str, port: int, *, fd: int | None = None) -> BaseWSGIServer:
    """moto's server app with the local stack's transactions, on `fd` if given (not started)."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    from batchroute_tools.local import moto_answers, moto_transactions  # import moto: only where it runs

    moto_transactions.install()
    moto_answers.install()
    server = make_server(
        host,
        port,  # 0: the kernel picks a free port
        moto_transactions.isolated_requests(DomainDispatcherApplication(create_backend_app)),
        threaded=True,
        request_handler=MotoRequestHandler,
        fd=fd,
    )
    # moto's Step Functions interpreter calls back into "localhost:$MOTO_PORT" for the
    # workflow's SQS and DynamoDB tasks: point it here before any execution.
    os.environ["MOTO_PORT"] = str(server.server_address[1])
    return server


def main(argv: list[str] | None = None) -> None:
    """The moto process: serve on the inherited socket until the runner goes."""
    parser = argparse.ArgumentParser(prog="python -m batchroute_tools.local.moto_server")
    parser.add_argument("--fd", type=int, required=True, help="the listening socket the runner bound")
    args = parser.parse_args(argv)
    # Request lines from every poll would drown the service's own logs.
    for chatty in ("werkzeug", "botocore.credentials", "httpx"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    memory.limit_arenas()
    sock = inherited_socket(args.fd)
    host, port = sock.getsockname()[:2]
    sock.detach()  # werkzeug takes the descriptor itself
    server = make_moto_server(host, port, fd=args.fd)
    thread = threading.Thread(target=server.serve_forever, name="moto-server", daemon=True)
    thread.start()
    serve_until_parent_exits()
    server.shutdown()
    server.server_close()


if __name__ == "__main__":
    main()
