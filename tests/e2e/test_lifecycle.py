"""`make run` is ready quickly and stops cleanly: on Ctrl-C (SIGINT) and on SIGTERM it exits
with 0 within seconds and leaves nothing behind."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest

from tests.e2e.local_stack import READY_TIMEOUT_SECONDS, STOP_TIMEOUT_SECONDS, start_stack, stop_stack

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_stack_starts_fast_and_stops_cleanly(sig: signal.Signals, tmp_path: Path) -> None:
    # Given a freshly launched stack
    stack = start_stack(tmp_path)
    assert stack.ready_seconds < READY_TIMEOUT_SECONDS
    assert stack.stack_file.exists()
    # When it is signalled
    code, seconds = stop_stack(stack, sig)
    # Then it exits with 0 promptly, removes its stack file and frees its port
    assert code == 0, stack.log_tail()
    assert seconds < STOP_TIMEOUT_SECONDS
    assert not stack.stack_file.exists()
    port = int(stack.base_url.rsplit(":", 1)[1])
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # only a listener would block it
        probe.bind(("127.0.0.1", port))
    print(f"{sig.name}: ready in {stack.ready_seconds:.1f}s, stopped in {seconds:.1f}s")
