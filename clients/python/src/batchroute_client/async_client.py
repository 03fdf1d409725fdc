"""The asynchronous client: the same calls, retries, models and errors as `Client`, on
`httpx.AsyncClient`; listings are async iterators.

    async with AsyncClient(api_key="...", base_url="https://...") as client:
        batch = await client.batches.create(quote_id=..., items=[...])
        async for row in client.batches.results(batch.id): ...

Every call is a plan of the sans-IO core (`_core.Operations`); this module is its awaiting loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any, BinaryIO, TypeVar, cast

import httpx

from batchroute_client._core import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    Call,
    ClientBase,
    Emit,
    Open,
    Plan,
    Read,
    Runner,
    Send,
    Sleep,
    iterator_of,
    returning,
)
from batchroute_client._retry import Backoff
from batchroute_client._upload import Progress, Source, UploadMethod, UploadSource
from batchroute_client.models import (
    Batch,
    BillingControls,
    BillingReceipt,
    ChatCompletion,
    ChatCompletionChunk,
    ChatJob,
    File,
    Item,
    MultipartPlan,
    Quote,
    ResultRow,
    RetriedBatch,
    SignedUpload,
    UploadTarget,
    Usage,
)

T = TypeVar("T")


async def _chunks(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


class AsyncClient(ClientBase):
    """As `Client`; `sleep` is an async callable (default `asyncio.sleep`)."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http_client: httpx.AsyncClient | None = None,
        backoff: Backoff | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        http_url = str(http_client.base_url) if http_client is not None else None
        super().__init__(
            api_key,
            base_url,
            http_url,
            max_retries=max_retries,
            backoff=backoff,
            clock=clock,
            monotonic=monotonic,
        )
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self.sleep = sleep
        self.quotes = AsyncQuotes(self)
        self.batches = AsyncBatches(self)
        self.chat = AsyncChat(self)
        self.files = AsyncFiles(self)

    @property
    def http(self) -> httpx.AsyncClient:
        return self._http

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the loop: runs a plan, awaiting its effects on httpx.AsyncClient ---------------------

    async def run(self, plan: Plan[T]) -> T:
        """Run a plan of the core to its value."""
        async with contextlib.aclosing(self.drive(returning(plan))) as values:
            return cast(T, await anext(values))

    async def drive(self, plan: Plan[Any]) -> AsyncGenerator[Any, None]:
        """Run a plan, yielding what it emits (lazily: the plan advances as it is consumed)."""
        runner = Runner(plan)
        readers: dict[int, AsyncIterator[Any]] = {}
        try:
            async with contextlib.AsyncExitStack() as opened:
                while (effect := runner.next()) is not None:
                    if isinstance(effect, Emit):
                        yield effect.value
                        runner.resolve(None)
                        continue
                    try:
                        runner.resolve(await self._perform(effect, opened, readers))
                    except BaseException as exc:  # thrown into the plan, which decides
                        runner.fail(exc)
        finally:
            runner.close()

    async def _perform(
        self, effect: Send | Open | Read | Sleep, opened: contextlib.AsyncExitStack, readers: dict[int, Any]
    ) -> Any:
        if isinstance(effect, Sleep):
            return await self.sleep(effect.seconds)
        response: httpx.Response
        if isinstance(effect, Read):
            response = effect.response
            if effect.unit == "body":
                return await response.aread()
            reader = readers.setdefault(
                id(response), response.aiter_lines() if effect.unit == "line" else response.aiter_bytes()
            )
            return await anext(reader, None)
        content = effect.call.content() if effect.call.content is not None else None
        sync_chunks = iterator_of(content)
        request = self._http.build_request(
            effect.call.method,
            effect.call.url,
            params=effect.call.params,
            json=effect.call.json,
            content=_chunks(sync_chunks) if sync_chunks is not None else content,
            headers=effect.call.headers,
        )
        if isinstance(effect, Send):
            return await self._http.send(request)
        response = await self._http.send(request, stream=True)
        opened.push_async_callback(response.aclose)
        return response

    # -- the API (documented on `Client`) ---------------------------------------------------

    async def usage(self) -> Usage:
        return await self.run(self.ops.usage())

    async def billing_controls(self) -> BillingControls:
        return await self.run(self.ops.billing_controls())

    async def chat_job(self, job_id: str) -> ChatJob:
        return await self.run(self.ops.chat_job(job_id))

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        retry_on_network_error: bool = True,
    ) -> Any:
        """As `Client.request`: the spec's retries, the same headers and body on every attempt."""
        plan = self.ops.request(
            method, path, params=params, json=json, headers=headers, repeatable=retry_on_network_error
        )
        return await self.run(plan)

    async def send(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        content: Callable[[], Any] | None = None,
        headers: Mapping[str, str] | None = None,
        repeatable: bool = True,
    ) -> httpx.Response:
        """As `Client.send`: `content` is a factory of the body (bytes or an iterator)."""
        call = Call(method, url, params=params, json=json, content=content, headers=headers)
        return await self.run(self.ops.send(call, repeatable=repeatable))

    def stream_events(self, path: str, json: Any) -> AsyncIterator[dict[str, Any]]:
        """As `Client.stream_events`: only a 429 is retried; a lost stream is not replayed."""
        return self.drive(self.ops.events(path, json))

    def paginate(self, path: str, params: Mapping[str, Any]) -> AsyncIterator[dict[str, Any]]:
        return self.drive(self.ops.pages(path, params))


class AsyncQuotes:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def model(self, items: list[dict[str, Any]] | None = None, **options: Any) -> Quote:
        body = {"items": items, **options} if items is not None else options
        return await self._client.run(self._client.ops.quote("model", body))

    async def workflow(self, **body: Any) -> Quote:
        return await self._client.run(self._client.ops.quote("workflow", body))


class AsyncBatches:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self._ops = client.ops

    async def create(self, *, idempotency_key: str | None = None, **body: Any) -> Batch:
        return await self._client.run(self._ops.create_batch(idempotency_key, body))

    async def get(self, batch_id: str) -> Batch:
        return await self._client.run(self._ops.get_batch(batch_id))

    def list(self, *, state: str | None = None, page_size: int | None = None) -> AsyncIterator[Batch]:
        return self._client.drive(self._ops.list_batches(state, page_size))

    def items(
        self, batch_id: str, *, status: str | None = None, page_size: int | None = None
    ) -> AsyncIterator[Item]:
        return self._client.drive(self._ops.items(batch_id, status, page_size))

    def results(
        self, batch_id: str, *, body_format: str | None = None, page_size: int | None = None
    ) -> AsyncIterator[ResultRow]:
        return self._client.drive(self._ops.results(batch_id, body_format, page_size))

    async def cancel(self, batch_id: str, *, reason: str | None = None) -> Batch:
        return await self._client.run(self._ops.cancel_batch(batch_id, reason))

    async def retry(self, batch_id: str) -> RetriedBatch:
        return await self._client.run(self._ops.retry_batch(batch_id))

    async def artifact_url(self, batch_id: str) -> str:
        return await self._client.run(self._ops.artifact_url(batch_id))

    async def receipt(self, batch_id: str) -> BillingReceipt:
        return await self._client.run(self._ops.receipt(batch_id))

    async def download_artifact(self, batch_id: str, out: BinaryIO) -> int:
        """As `Batches.download_artifact`: stream the results artifact into `out`."""
        return await self._client.run(self._ops.download_artifact(batch_id, out))

    async def wait(
        self,
        batch_id: str,
        *,
        poll_interval: float = 5.0,
        timeout: float | None = None,
        on_progress: Callable[[Batch], None] | None = None,
    ) -> Batch:
        return await self._client.run(self._ops.wait_batch(batch_id, poll_interval, timeout, on_progress))


class AsyncChat:
    """As `Chat`: direct requests are retried only on 429."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(self, model: str, messages: list[dict[str, Any]], **options: Any) -> ChatCompletion:
        return await self._client.run(self._client.ops.chat_completion(model, messages, options))

    def stream(
        self, model: str, messages: list[dict[str, Any]], **options: Any
    ) -> AsyncIterator[ChatCompletionChunk]:
        return self._client.drive(self._client.ops.chat_stream(model, messages, options))

    async def queue(self, model: str, messages: list[dict[str, Any]], **options: Any) -> ChatJob:
        return await self._client.run(self._client.ops.chat_queue(model, messages, options))


class AsyncFiles:
    """As `Files`: direct up to 4 MiB, else the signed URL; `on_progress(sent, total)`."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self._ops = client.ops

    async def upload(
        self,
        source: Source,
        *,
        filename: str | None = None,
        purpose: str | None = None,
        method: UploadMethod = "auto",
        on_progress: Progress | None = None,
        wait: bool = True,
        poll_interval: float = 2.0,
        timeout: float | None = None,
    ) -> File:
        plan = self._ops.upload(source, filename, purpose, method, on_progress, wait, poll_interval, timeout)
        return await self._client.run(plan)

    async def put_parts(
        self,
        file_id: str,
        plan: MultipartPlan,
        source: Source | UploadSource,
        *,
        on_progress: Progress | None = None,
    ) -> dict[int, str]:
        return await self._client.run(self._ops.put_parts(file_id, plan, source, on_progress))

    async def part_urls(self, file_id: str, part_numbers: list[int] | None = None) -> MultipartPlan:
        return await self._client.run(self._ops.part_urls(file_id, part_numbers))

    async def cancel(self, file_id: str) -> File:
        return await self._client.run(self._ops.cancel_file(file_id))

    async def wait(self, file_id: str, *, poll_interval: float = 2.0, timeout: float | None = None) -> File:
        return await self._client.run(self._ops.wait_file(file_id, poll_interval, timeout))

    async def create(
        self,
        source: Source | UploadSource,
        *,
        purpose: str | None = None,
        on_progress: Progress | None = None,
    ) -> File:
        return await self._client.run(self._ops.create_file(source, purpose, on_progress))

    async def start_upload(
        self, *, filename: str, size: int, content_type: str | None = None, purpose: str | None = None
    ) -> SignedUpload:
        return await self._client.run(self._ops.start_upload(filename, size, content_type, purpose))

    async def put(
        self, upload: UploadTarget, source: Source | UploadSource, *, on_progress: Progress | None = None
    ) -> None:
        await self._client.run(self._ops.put(upload, source, on_progress))

    async def complete(self, file_id: str, etags: dict[int, str] | None = None) -> File:
        return await self._client.run(self._ops.complete(file_id, etags))

    async def get(self, file_id: str) -> File:
        return await self._client.run(self._ops.get_file(file_id))
