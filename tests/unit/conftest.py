"""Unit tests are pure logic: sockets are off."""

from __future__ import annotations

import pytest
from pytest_socket import disable_socket, enable_socket


@pytest.fixture(autouse=True)
def _no_sockets() -> object:
    disable_socket(allow_unix_socket=True)
    yield
    enable_socket()
