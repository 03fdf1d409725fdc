"""The synchronous client of the native API, on httpx.

from batchroute_client import Client
client = Client(api_key="...", base_url="https://...")
quote = client.quotes.model(items=[...])
batch = client.batches.create(quote_id=quote.quote_id, items=[...])
batch = client.batches.wait(batch.id, on_progress=lambda b: print(b.counts))

The calls, retries, errors and uploads are the sans-IO core's (`_core`, `_surface`); this
module is the blocking loop that performs their effects on `httpx.Client`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any, TypeVar, cast

import httpx

from batchroute_client import _core, _surface
from batchroute_client._core import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, __version__

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "Batches",
    "Billing",
    "Catalog",
    "Chat",
    "Client",
    "DeliveryTargets",
    "FeedbackResource",
    "Files",
    "Presets",
    "Quotes",
    "Routing",
    "Schedules",
    "Settings",
    "WorkOrders",
    "__version__",
]

T = TypeVar("T")


class Quotes(_surface.Quotes[_surface.Blocking]):
    """Free, binding quotes (`model`, `workflow`)."""


class Batches(_surface.Batches[_surface.Blocking]):
    """Batches: create, read, list, wait for, cancel, retry; their items, results and receipt."""


class Chat(_surface.Chat[_surface.Blocking]):
    __doc__ = _surface.Chat.__doc__


class Files(_surface.Files[_surface.Blocking]):
    __doc__ = _surface.Files.__doc__


class Settings(_surface.Settings[_surface.Blocking]):
    __doc__ = _surface.Settings.__doc__


class DeliveryTargets(_surface.DeliveryTargets[_surface.Blocking]):
    __doc__ = _surface.DeliveryTargets.__doc__


class Schedules(_surface.Schedules[_surface.Blocking]):
    __doc__ = _surface.Schedules.__doc__


class Presets(_surface.Presets[_surface.Blocking]):
    __doc__ = _surface.Presets.__doc__


class WorkOrders(_surface.WorkOrders[_surface.Blocking]):
    __doc__ = _surface.WorkOrders.__doc__


class Routing(_surface.Routing[_surface.Blocking]):
    __doc__ = _surface.Routing.__doc__


class FeedbackResource(_surface.FeedbackResource[_surface.Blocking]):
    __doc__ = _surface.FeedbackResource.__doc__


class Billing(_surface.Billing[_surface.Blocking]):
    __doc__ = _surface.Billing.__doc__


class Catalog(_surface.Catalog[_surface.Blocking]):
    __doc__ = _surface.Catalog.__doc__


class Client(_surface.Surface[_surface.Blocking, httpx.Client, Callable[[float], None]]):
    __doc__ = _surface.Surface.__doc__
    _resources = _surface.Resources(
        Quotes,
        Batches,
        Chat,
        Files,
        Settings,
        DeliveryTargets,
        Schedules,
        Presets,
        WorkOrders,
        Routing,
        FeedbackResource,
        Billing,
        Catalog,
    )

    def _new_http(self, timeout: float) -> httpx.Client:
        return httpx.Client(timeout=timeout)

    def _default_sleep(self) -> Callable[[float], None]:
        return time.sleep

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sleep(self, seconds: float) -> None:
        self._sleep(seconds)

    def run(self, plan: _core.Plan[T]) -> T:
        """Run a plan of the core to its value."""
        with contextlib.closing(self.drive(_core.returning(plan))) as values:
            return cast(T, next(values))

    def drive(self, plan: _core.Plan[Any]) -> Generator[Any, None, None]:
        """Run a plan, yielding what it emits (lazily: the plan advances as it is consumed)."""
        runner = _core.Runner(plan)
        readers: dict[int, Iterator[Any]] = {}
        try:
            with contextlib.ExitStack() as opened:
                while (effect := runner.next()) is not None:
                    if isinstance(effect, _core.Emit):
                        yield effect.value
                    else:
                        with runner.answering():
                            runner.resolve(self._perform(effect, opened, readers))
        finally:
            runner.close()

    def _perform(self, effect: _core.Effect, opened: contextlib.ExitStack, readers: dict[int, Any]) -> Any:
        if isinstance(effect, _core.Sleep):
            return self._sleep(effect.seconds)
        if isinstance(effect, _core.Read):
            response = effect.response
            if effect.unit == "body":
                return response.read()
            lines = effect.unit == "line"
            reader = readers.setdefault(
                id(response), response.iter_lines() if lines else response.iter_bytes()
            )
            return next(reader, None)
        assert isinstance(effect, _core.Send | _core.Open)
        request = self._http.build_request(**_core.request_arguments(effect.call, lambda body: body))
        if isinstance(effect, _core.Send):
            return self._http.send(request)
        opened.callback((response := self._http.send(request, stream=True)).close)
        return response
