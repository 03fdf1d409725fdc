"""A function's init runs its imports with the cyclic garbage collector paused, then freezes
what they built (batchroute/function_init.py, docs/cold-start.md). Not a timing test: it reads
the collector's own counters."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator

import pytest

from batchroute.function_init import function_init
from tests.unit.fresh_interpreter import last_line

HANDLERS = ("api", "router", "settle", "webhook", "sweeper")


@pytest.fixture(autouse=True)
def _collector_as_found() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()


def test_the_collector_is_paused_inside_and_running_after() -> None:
    gc.enable()
    with function_init():
        inside = gc.isenabled()
    assert inside is False
    assert gc.isenabled() is True


def test_what_the_init_built_is_frozen() -> None:
    gc.unfreeze()
    with function_init():
        built: list[dict[str, object]] = [{"cycle": None} for _ in range(100)]
        for item in built:
            item["cycle"] = item
    assert gc.get_freeze_count() > len(built)
    collectable = {id(obj) for obj in gc.get_objects()}  # the permanent generation is not listed
    assert all(gc.is_tracked(item) and id(item) not in collectable for item in built)


def test_a_collector_paused_before_stays_paused() -> None:
    gc.disable()
    with function_init():
        pass
    assert gc.isenabled() is False


def test_the_collector_restarts_when_an_import_fails() -> None:
    gc.enable()
    with pytest.raises(ModuleNotFoundError), function_init():
        import batchroute.no_such_module  # noqa: F401
    assert gc.isenabled() is True


_PROBE = (
    "import gc, json; before = [g['collections'] for g in gc.get_stats()]; "
    "import functions.{key}.handler; "
    "print(json.dumps(dict(collections=[g['collections'] for g in gc.get_stats()], before=before, "
    "enabled=gc.isenabled(), frozen=gc.get_freeze_count())))"
)


@pytest.mark.parametrize("key", HANDLERS)
def test_each_handler_imports_without_collecting_and_freezes_what_it_built(key: str) -> None:
    line = last_line(
        _PROBE.format(key=key), AWS_REGION="us-east-1", AWS_DEFAULT_REGION="us-east-1", ENVIRONMENT="local"
    )
    seen = json.loads(line)
    # Without it, ~200 young and ~18 older collections, one of everything; with it, none of the
    # older generations and at most a young one or two after it (the API's handler decorators).
    counts = zip(seen["collections"], seen["before"], strict=True)
    young, *older = (after - before for after, before in counts)
    assert older == [0, 0]
    assert young <= 3
    assert seen["enabled"] is True
    assert seen["frozen"] > 10_000  # the modules, classes and functions the imports made
