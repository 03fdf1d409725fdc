"""A server of the local stack in a process of its own: moto, the vendor emulators.

On AWS, DynamoDB, S3 and the vendors are not in the Lambda function's interpreter; locally
they are not in the service's either, so a handler never waits for the GIL behind moto
parsing a transaction or an emulator streaming tokens, and the two cores are both used.

The parent binds the listening socket first (port 0: the kernel picks a free one, without
a race) and hands it to the child, so the address is known at once and several children
start side by side. The child cannot outlive the parent: it serves until its stdin reaches
end of file, which happens when the parent closes the pipe or dies, even by SIGKILL.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
from collections.abc import Sequence

READY = "ready"
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 5.0


def listening_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


class ChildServer:
    """`python -m <module> --fd N <args>` serving on a socket this process bound."""

    def __init__(self, name: str, module: str, *, host: str, port: int, args: Sequence[str] = ()) -> None:
        self.name = name
        self._module = module
        self._args = tuple(args)
        self._sock = listening_socket(host, port)
        self.host, self.port = self._sock.getsockname()[:2]
        self._process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def spawn(self) -> ChildServer:
        """Start the child, with this process's environment (not waiting for it: `wait_ready`)."""
        fd = self._sock.fileno()
        # This interpreter running one of this repository's modules: no outside input.
        self._process = subprocess.Popen(  # noqa: S603
            [sys.executable, "-m", self._module, "--fd", str(fd), *self._args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            pass_fds=(fd,),
        )
        self._sock.close()  # the child holds the socket now
        return self

    def start(self) -> None:
        self.spawn()
        self.wait_ready()

    def wait_ready(self, timeout: float = START_TIMEOUT_SECONDS) -> None:
        process = self._require_process()
        assert process.stdout is not None
        readable, _, _ = select.select([process.stdout], [], [], timeout)
        line = process.stdout.readline().strip() if readable else ""
        if line != READY:
            self.stop()
            raise RuntimeError(f"the local {self.name} did not start (exit code {process.returncode})")

    def stop(self) -> None:
        process = self._process
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()  # end of file: the child shuts down
        try:
            process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()

    def _require_process(self) -> subprocess.Popen[str]:
        if self._process is None:
            raise RuntimeError(f"the local {self.name} was not spawned")
        return self._process


def inherited_socket(fd: int) -> socket.socket:
    """In the child: the listening socket the parent bound."""
    return socket.socket(fileno=fd)


def serve_until_parent_exits() -> None:
    """In the child, once serving: say so on stdout, then block until stdin closes.

    stdout then points at stderr, so nothing the child prints can fill a pipe the parent
    no longer reads.
    """
    print(READY, flush=True)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    while sys.stdin.buffer.read(65536):
        pass
