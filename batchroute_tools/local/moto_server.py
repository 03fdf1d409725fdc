"""The local AWS: moto in server mode, in this process, on a loopback port.

In-process (a thread, like moto's ThreadedMotoServer) rather than a child process, so
it cannot outlive the runner. The socket is bound before anything else happens, so a
taken port fails loudly here instead of hanging a server thread. DynamoDB transactions roll
back item by item instead of by copying whole tables (moto_transactions.py).
"""

from __future__ import annotations

import logging
import os
import threading

import httpx
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, make_server

from batchroute_tools.local import moto_transactions


class MotoServer:
    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        # Request lines from every poll would drown the service's own logs.
        for chatty in ("werkzeug", "botocore.credentials", "httpx"):
            logging.getLogger(chatty).setLevel(logging.WARNING)
        moto_transactions.install()
        self._server: BaseWSGIServer = make_server(
            host,
            port,  # 0: the kernel picks a free port, without a race
            DomainDispatcherApplication(create_backend_app),
            threaded=True,
            request_handler=MotoRequestHandler,
        )
        self.host, self.port = str(self._server.server_address[0]), int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto-server", daemon=True)

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        # moto's Step Functions interpreter calls back into "localhost:$MOTO_PORT" for
        # the workflow's SQS and DynamoDB tasks: point it here before any execution.
        os.environ["MOTO_PORT"] = str(self.port)
        self._thread.start()

    def enable_state_machine_execution(self) -> None:
        """Turn on moto's ASL interpreter: executions really run instead of returning at once."""
        response = httpx.post(
            f"{self.endpoint_url}/moto-api/config",
            json={"stepfunctions": {"execute_state_machine": True}},
            timeout=10,
            trust_env=False,  # loopback: never through a configured proxy
        )
        response.raise_for_status()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
