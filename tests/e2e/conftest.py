"""One local stack for the e2e suite, started exactly as `make run` starts it.

The tests talk to it over loopback HTTP (and to its moto endpoint, named in the stack
file). It must stop cleanly on SIGTERM: the session fixture's teardown asserts it.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.local_stack import RunningStack, api_client, running_stack


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with running_stack(tmp_path_factory.mktemp("local-stack")) as stack:
        yield stack


@pytest.fixture
def api(local_stack: RunningStack) -> Iterator[httpx.Client]:
    with api_client(local_stack) as client:
        yield client
