"""A Lambda function's init: the handler module's imports, with the cyclic garbage collector
paused, then everything they built frozen (docs/cold-start.md, "What the init does not collect").

What an init builds (modules, classes, the app, its models) lives as long as the process, so
every collection during it walks objects only to find them alive: about 6 % of the API
function's import. After the imports, `gc.freeze()` moves those objects to the permanent
generation, so no later collection (on a request's time) walks them either; the collector then
runs as before for what requests allocate. The cost: a reference cycle that became garbage
during the init is never freed (the init makes almost none: a failed optional import's
traceback at most).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def function_init() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
