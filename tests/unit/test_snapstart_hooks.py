"""SnapStart's runtime hooks for the API function (functions/api/snapstart.py): registered
only where the Lambda runtime ships `snapshot_restore_py`; before the snapshot the first
request's one-off work is done; after a restore each copy gets its own random sequence and
no AWS client survives from the snapshot."""

from __future__ import annotations

import random
import sys
import types
from collections.abc import Callable

import pytest

from batchroute.adapters import aws
from batchroute.adapters.s3_objects import presigning_client
from functions.api import snapstart


class _Hooks(types.ModuleType):
    def __init__(self) -> None:
        super().__init__("snapshot_restore_py")
        self.before: list[Callable[[], None]] = []
        self.after: list[Callable[[], None]] = []

    def register_before_snapshot(self, hook: Callable[[], None]) -> None:
        self.before.append(hook)

    def register_after_restore(self, hook: Callable[[], None]) -> None:
        self.after.append(hook)


def test_without_the_runtime_library_nothing_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # import fails, as off Lambda
    assert snapstart.install() is False


def test_hooks_are_registered_with_the_runtime_library(monkeypatch: pytest.MonkeyPatch) -> None:
    hooks = _Hooks()
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", hooks)
    assert snapstart.install() is True
    assert hooks.before == [snapstart.before_snapshot]
    assert hooks.after == [snapstart.after_restore]


def test_before_the_snapshot_the_document_is_built_and_first_request_modules_loaded() -> None:
    from functions.api.app import app

    app.openapi_schema = None
    snapstart.before_snapshot()
    assert app.openapi_schema is not None and "/v1/chat/completions" in app.openapi_schema["paths"]
    for module in snapstart.FIRST_REQUEST_MODULES:
        assert module in sys.modules, module


def test_after_a_restore_randomness_is_reseeded_and_clients_are_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    # Given two copies restored from the same memory: the same random state, a cached client
    random.seed(1234)
    snapshot_state = random.getstate()
    aws.client("s3")
    presigning_client()
    assert aws.client.cache_info().currsize > 0 and presigning_client.cache_info().currsize == 1
    # When each is restored
    draws = []
    for _ in range(2):
        random.setstate(snapshot_state)
        snapstart.after_restore()
        draws.append([random.random() for _ in range(4)])  # noqa: S311 (the state is the point)
    # Then they draw different numbers, and hold no client from the snapshot
    assert draws[0] != draws[1]
    assert aws.client.cache_info().currsize == 0 and presigning_client.cache_info().currsize == 0
