"""The emulators' HTTP server answers as a vendor's front end does on the wire."""

from __future__ import annotations

import socket

from batchroute_tools.emulators.server import EmulatorServer, _handler_class


def test_answers_are_sent_without_nagle_delay() -> None:
    """TCP_NODELAY on every connection it answers: an answer is written as headers, then
    body, and with Nagle's algorithm the body would wait for the caller's delayed
    acknowledgement of the headers (up to 40 ms on Linux), on every call."""
    emulators = EmulatorServer([]).start()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        caller = socket.create_connection(listener.getsockname())
        accepted, address = listener.accept()
        with caller, accepted:
            caller.sendall(b"GET /nowhere HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            _handler_class(emulators)(accepted, address, emulators._server)
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            assert caller.recv(65536).startswith(b"HTTP/1.1 404")
    emulators.stop()
