"""The asynchronous client: the same calls, retries, models and errors as `Client`, on
`httpx.AsyncClient`; listings are async iterators.

    async with AsyncClient(api_key="...", base_url="https://...") as client:
        batch = await client.batches.create(quote_id=..., items=[...])
        async for row in client.batches.results(batch.id): ...

The calls are the sans-IO core's (`_core`, `_surface`); this module is the awaiting loop that
performs their effects on `httpx.AsyncClient`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar, cast

import httpx

from batchroute_client import _core, _surface

T = TypeVar("T")
AsyncSleep = Callable[[float], Awaitable[None]]


class AsyncQuotes(_surface.Quotes[_surface.Awaiting]):
    """As `Quotes`, awaited."""


class AsyncBatches(_surface.Batches[_surface.Awaiting]):
    """As `Batches`, awaited; listings are async iterators."""


class AsyncChat(_surface.Chat[_surface.Awaiting]):
    """As `Chat`: direct requests are retried only on 429."""


class AsyncFiles(_surface.Files[_surface.Awaiting]):
    """As `Files`: direct up to 4 MiB, else the signed URL; `on_progress(sent, total)`."""


class AsyncSettings(_surface.Settings[_surface.Awaiting]):
    """As `Settings`, awaited."""


class AsyncDeliveryTargets(_surface.DeliveryTargets[_surface.Awaiting]):
    """As `DeliveryTargets`, awaited."""


class AsyncSchedules(_surface.Schedules[_surface.Awaiting]):
    """As `Schedules`, awaited; `list`, `runs` and `versions` are async iterators."""


class AsyncPresets(_surface.Presets[_surface.Awaiting]):
    """As `Presets`, awaited; `list` and `versions` are async iterators."""


class AsyncWorkOrders(_surface.WorkOrders[_surface.Awaiting]):
    """As `WorkOrders`, awaited; `list` and `members` are async iterators."""


class AsyncRouting(_surface.Routing[_surface.Awaiting]):
    """As `Routing`, awaited; `policy_history` is an async iterator."""


class AsyncFeedbackResource(_surface.FeedbackResource[_surface.Awaiting]):
    """As `FeedbackResource`, awaited; `list` is an async iterator."""


class AsyncBilling(_surface.Billing[_surface.Awaiting]):
    """As `Billing`, awaited; `audit` and `auto_topup_attempts` are async iterators."""


class AsyncCatalog(_surface.Catalog[_surface.Awaiting]):
    """As `Catalog`, awaited."""


async def _async_chunks(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


def _async_body(content: Any) -> Any:
    """A sync iterator of chunks as an async one (httpx.AsyncClient streams only those)."""
    chunks = _core.iterator_of(content)
    return _async_chunks(chunks) if chunks is not None else content


class AsyncClient(_surface.Surface[_surface.Awaiting, httpx.AsyncClient, AsyncSleep]):
    """As `Client`; `sleep` is an async callable (default `asyncio.sleep`)."""

    _resources = _surface.Resources(
        AsyncQuotes,
        AsyncBatches,
        AsyncChat,
        AsyncFiles,
        AsyncSettings,
        AsyncDeliveryTargets,
        AsyncSchedules,
        AsyncPresets,
        AsyncWorkOrders,
        AsyncRouting,
        AsyncFeedbackResource,
        AsyncBilling,
        AsyncCatalog,
    )

    def _new_http(self, timeout: float) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=timeout)

    def _default_sleep(self) -> AsyncSleep:
        return asyncio.sleep

    @property
    def sleep(self) -> AsyncSleep:
        return self._sleep

    @sleep.setter
    def sleep(self, sleep: AsyncSleep) -> None:
        self._sleep = sleep

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def run(self, plan: _core.Plan[T]) -> T:
        """Run a plan of the core to its value."""
        async with contextlib.aclosing(self.drive(_core.returning(plan))) as values:
            return cast(T, await anext(values))

    async def drive(self, plan: _core.Plan[Any]) -> AsyncGenerator[Any, None]:
        """Run a plan, yielding what it emits (lazily: the plan advances as it is consumed)."""
        runner = _core.Runner(plan)
        readers: dict[int, AsyncIterator[Any]] = {}
        try:
            async with contextlib.AsyncExitStack() as opened:
                while (effect := runner.next()) is not None:
                    if isinstance(effect, _core.Emit):
                        yield effect.value
                    else:
                        with runner.answering():
                            runner.resolve(await self._perform(effect, opened, readers))
        finally:
            runner.close()

    async def _perform(
        self, effect: _core.Effect, opened: contextlib.AsyncExitStack, readers: dict[int, Any]
    ) -> Any:
        if isinstance(effect, _core.Sleep):
            return await self._sleep(effect.seconds)
        if isinstance(effect, _core.Read):
            response = effect.response
            if effect.unit == "body":
                return await response.aread()
            lines = effect.unit == "line"
            reader = readers.setdefault(
                id(response), response.aiter_lines() if lines else response.aiter_bytes()
            )
            return await anext(reader, None)
        assert isinstance(effect, _core.Send | _core.Open)
        request = self._http.build_request(**_core.request_arguments(effect.call, _async_body))
        if isinstance(effect, _core.Send):
            return await self._http.send(request)
        opened.push_async_callback((response := await self._http.send(request, stream=True)).aclose)
        return response
