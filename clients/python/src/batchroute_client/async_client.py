"""The asynchronous client: the same calls, retries, models and errors as `Client`, on
`httpx.AsyncClient`; listings are async iterators.

    async with AsyncClient(api_key="...", base_url="https://...") as client:
        batch = await client.batches.create(quote_id=..., items=[...])
        async for row in client.batches.results(batch.id): ...
"""

from __future__ import annotations

import asyncio
import contextlib
import json as _json
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, BinaryIO

import httpx

from batchroute_client._retry import Backoff, wait_before_retry
from batchroute_client._upload import (
    PENDING_STATUSES,
    Progress,
    Source,
    UploadMethod,
    UploadSource,
    complete_body,
    direct_headers,
    part_headers,
    start_body,
    upload_source,
    use_direct,
)
from batchroute_client.client import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, __version__
from batchroute_client.errors import (
    APIConnectionError,
    PermissionDeniedError,
    WaitTimeoutError,
    error_from_response,
)
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
    PartTarget,
    Quote,
    ResultRow,
    RetriedBatch,
    SignedUpload,
    UploadTarget,
    Usage,
)


class AsyncClient:
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
        key = api_key or os.environ.get("BATCHROUTE_API_KEY")
        if not key:
            raise ValueError("no API key: pass api_key= or set BATCHROUTE_API_KEY")
        url = base_url or os.environ.get("BATCHROUTE_BASE_URL")
        if not url and http_client is not None:
            url = str(http_client.base_url)
        if not url:
            raise ValueError("no base URL: pass base_url= or set BATCHROUTE_BASE_URL")
        self.base_url = url.rstrip("/")
        self.max_retries = max(0, max_retries)
        self._api_key = key
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._backoff = backoff or Backoff()
        self.sleep = sleep
        self._clock = clock
        self.monotonic = monotonic
        self.quotes = AsyncQuotes(self)
        self.batches = AsyncBatches(self)
        self.chat = AsyncChat(self)
        self.files = AsyncFiles(self)

    def __repr__(self) -> str:  # never shows the key
        return f"AsyncClient(base_url={self.base_url!r})"

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

    async def usage(self) -> Usage:
        return Usage.from_dict(await self.request("GET", "/v1/usage"))

    async def billing_controls(self) -> BillingControls:
        """`GET /v1/billing/controls` (changing them needs a user session: the console)."""
        return BillingControls.from_dict((await self.request("GET", "/v1/billing/controls"))["controls"])

    async def chat_job(self, job_id: str) -> ChatJob:
        """`GET /v1/chat/completions/{job_id}`: a queued chat job; `result` once completed."""
        return ChatJob.from_dict(await self.request("GET", f"/v1/chat/completions/{job_id}"))

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self._api_key}",
            "Accept": "application/json",
            "User-Agent": f"batchroute-python/{__version__}",
            **(extra or {}),
        }

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
        response = await self.send(
            method,
            self.base_url + path,
            params={k: v for k, v in (params or {}).items() if v is not None},
            json=json,
            headers=self.headers(headers),
            repeatable=retry_on_network_error,
        )
        return response.json() if response.content else None

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
        """As `Client.send`: `content` is a factory of the body (bytes or an async iterator)."""
        label = f"{method} {httpx.URL(url).path}"
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(
                    method,
                    url,
                    params=params,
                    json=json,
                    content=content() if content is not None else None,
                    headers=headers,
                )
            except httpx.TransportError as exc:
                wait = wait_before_retry(
                    self._backoff, attempt, self.max_retries, status=None, repeatable=repeatable
                )
                if wait is None:
                    raise APIConnectionError(f"{label}: {type(exc).__name__}: {exc}") from exc
                await self.sleep(wait)
                continue
            if response.status_code < 400:
                return response
            wait = wait_before_retry(
                self._backoff,
                attempt,
                self.max_retries,
                status=response.status_code,
                retry_after=response.headers.get("retry-after"),
                now=self._clock(),
                repeatable=repeatable,
            )
            if wait is None:
                raise error_from_response(response)
            await self.sleep(wait)

    async def stream_events(self, path: str, json: Any) -> AsyncIterator[dict[str, Any]]:
        """As `Client.stream_events`: only a 429 is retried; a lost stream is not replayed."""
        attempt = 0
        while True:
            attempt += 1
            url, headers = self.base_url + path, self.headers()
            try:
                async with self._http.stream("POST", url, json=json, headers=headers) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        wait = wait_before_retry(
                            self._backoff,
                            attempt,
                            self.max_retries,
                            status=response.status_code,
                            retry_after=response.headers.get("retry-after"),
                            now=self._clock(),
                            repeatable=False,
                        )
                        if wait is None:
                            raise error_from_response(response)
                    else:
                        async for line in response.aiter_lines():
                            if not line.startswith("data:"):
                                continue
                            data = line[5:].strip()
                            if data == "[DONE]":
                                return
                            yield _json.loads(data)
                        return
            except httpx.TransportError as exc:
                raise APIConnectionError(f"POST {path}: {type(exc).__name__}: {exc}") from exc
            await self.sleep(wait)

    async def paginate(self, path: str, params: Mapping[str, Any]) -> AsyncIterator[dict[str, Any]]:
        cursor: str | None = None
        while True:
            page = await self.request("GET", path, params={**params, "cursor": cursor})
            for row in page.get("data") or []:
                yield row
            cursor = page.get("next_cursor")
            if not cursor:
                return


class AsyncQuotes:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def model(self, items: list[dict[str, Any]] | None = None, **options: Any) -> Quote:
        body = {"items": items, **options} if items is not None else options
        return Quote.from_dict(await self._client.request("POST", "/v1/quotes/model", json=body))

    async def workflow(self, **body: Any) -> Quote:
        return Quote.from_dict(await self._client.request("POST", "/v1/quotes/workflow", json=body))


class AsyncBatches:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(self, *, idempotency_key: str | None = None, **body: Any) -> Batch:
        key = idempotency_key or f"br-{uuid.uuid4().hex}"
        answer = await self._client.request(
            "POST", "/v1/batches", json=body, headers={"Idempotency-Key": key}
        )
        return Batch.from_dict(answer["batch"])

    async def get(self, batch_id: str) -> Batch:
        return Batch.from_dict((await self._client.request("GET", f"/v1/batches/{batch_id}"))["batch"])

    async def list(self, *, state: str | None = None, page_size: int | None = None) -> AsyncIterator[Batch]:
        async for row in self._client.paginate("/v1/batches", {"state": state, "limit": page_size}):
            yield Batch.from_dict(row)

    async def items(
        self, batch_id: str, *, status: str | None = None, page_size: int | None = None
    ) -> AsyncIterator[Item]:
        params = {"status": status, "limit": page_size}
        async for row in self._client.paginate(f"/v1/batches/{batch_id}/items", params):
            yield Item.from_dict(row)

    async def results(
        self, batch_id: str, *, body_format: str | None = None, page_size: int | None = None
    ) -> AsyncIterator[ResultRow]:
        params = {"body_format": body_format, "limit": page_size}
        async for row in self._client.paginate(f"/v1/batches/{batch_id}/results", params):
            yield ResultRow.from_dict(row)

    async def cancel(self, batch_id: str, *, reason: str | None = None) -> Batch:
        body = {"reason": reason} if reason else None
        answer = await self._client.request("POST", f"/v1/batches/{batch_id}/cancel", json=body)
        return Batch.from_dict(answer["batch"])

    async def retry(self, batch_id: str) -> RetriedBatch:
        path = f"/v1/batches/{batch_id}/retry"
        return RetriedBatch.from_dict(await self._client.request("POST", path, retry_on_network_error=False))

    async def artifact_url(self, batch_id: str) -> str:
        answer = await self._client.request("GET", f"/v1/batches/{batch_id}/artifact-url")
        return str(answer["url"])

    async def receipt(self, batch_id: str) -> BillingReceipt:
        answer = await self._client.request("GET", f"/v1/batches/{batch_id}/billing-receipt")
        return BillingReceipt.from_dict(answer)

    async def download_artifact(self, batch_id: str, out: BinaryIO) -> int:
        """As `Batches.download_artifact`: stream the results artifact into `out`."""
        url = await self.artifact_url(batch_id)
        written = 0
        try:
            async with self._client.http.stream("GET", url) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise error_from_response(response)
                async for chunk in response.aiter_bytes():
                    out.write(chunk)
                    written += len(chunk)
        except httpx.TransportError as exc:
            raise APIConnectionError(f"GET artifact of {batch_id}: {type(exc).__name__}: {exc}") from exc
        return written

    async def wait(
        self,
        batch_id: str,
        *,
        poll_interval: float = 5.0,
        timeout: float | None = None,
        on_progress: Callable[[Batch], None] | None = None,
    ) -> Batch:
        started = self._client.monotonic()
        while True:
            batch = await self.get(batch_id)
            if on_progress is not None:
                on_progress(batch)
            if batch.is_terminal:
                return batch
            if timeout is not None and self._client.monotonic() - started + poll_interval > timeout:
                raise WaitTimeoutError(f"{batch_id} still {batch.state} after {timeout} s")
            await self._client.sleep(poll_interval)


class AsyncChat:
    """As `Chat`: direct requests are retried only on 429."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(self, model: str, messages: list[dict[str, Any]], **options: Any) -> ChatCompletion:
        body = {"model": model, "messages": messages, **options, "stream": False}
        path = "/v1/chat/completions"
        answer = await self._client.request("POST", path, json=body, retry_on_network_error=False)
        return ChatCompletion.from_dict(answer)

    async def stream(
        self, model: str, messages: list[dict[str, Any]], **options: Any
    ) -> AsyncIterator[ChatCompletionChunk]:
        body = {"model": model, "messages": messages, **options, "stream": True}
        async for event in self._client.stream_events("/v1/chat/completions", body):
            yield ChatCompletionChunk.from_dict(event)

    async def queue(self, model: str, messages: list[dict[str, Any]], **options: Any) -> ChatJob:
        body = {"model": model, "messages": messages, "batch": True, **options}
        path = "/v1/chat/completions"
        answer = await self._client.request("POST", path, json=body, retry_on_network_error=False)
        return ChatJob.from_dict(answer)


class AsyncFiles:
    """As `Files`: direct up to 4 MiB, else the signed URL; `on_progress(sent, total)`."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

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
        data = upload_source(source, filename)
        if use_direct(method, data.size):
            return await self.create(data, purpose=purpose, on_progress=on_progress)
        signed = await self.start_upload(filename=data.filename, size=data.size, purpose=purpose)
        if signed.multipart is None:
            await self.put(signed.upload, data, on_progress=on_progress)
            file = await self.complete(signed.file.id)
        else:
            try:
                etags = await self.put_parts(signed.file.id, signed.multipart, data, on_progress=on_progress)
            except BaseException:
                with contextlib.suppress(Exception):  # S3 drops the parts sent; the error is the answer
                    await self.cancel(signed.file.id)
                raise
            file = await self.complete(signed.file.id, etags)
        if not wait or file.status not in PENDING_STATUSES:
            return file
        return await self.wait(file.id, poll_interval=poll_interval, timeout=timeout)

    async def put_parts(
        self,
        file_id: str,
        plan: MultipartPlan,
        source: Source | UploadSource,
        *,
        on_progress: Progress | None = None,
    ) -> dict[int, str]:
        """PUT every part of a multipart plan in turn (each retried on its own, signed again if
        its URL expired); the ETag of each part by number, for `complete`."""
        data = source if isinstance(source, UploadSource) else upload_source(source)
        etags: dict[int, str] = {}
        for part in plan.parts:
            etags[part.part_number] = await self._put_part(file_id, part, data, on_progress)
        return etags

    async def _put_part(
        self, file_id: str, part: PartTarget, data: UploadSource, on_progress: Progress | None
    ) -> str:
        def body() -> object:
            return data.apart_chunks(part.offset, part.bytes, on_progress)

        try:
            response = await self._client.send(
                "PUT", part.url, content=body, headers=part_headers(part.bytes)
            )
        except PermissionDeniedError:  # the URL expired: sign this part again, once
            fresh = (await self.part_urls(file_id, [part.part_number])).parts[0]
            response = await self._client.send(
                "PUT", fresh.url, content=body, headers=part_headers(part.bytes)
            )
        return str(response.headers["etag"])

    async def part_urls(self, file_id: str, part_numbers: list[int] | None = None) -> MultipartPlan:
        """`POST /v1/files/{id}/parts`: fresh signed URLs (all parts by default)."""
        body = {"part_numbers": part_numbers} if part_numbers is not None else {}
        answer = await self._client.request("POST", f"/v1/files/{file_id}/parts", json=body)
        return MultipartPlan.from_dict(answer["multipart"])

    async def cancel(self, file_id: str) -> File:
        """`POST /v1/files/{id}/cancel`: give up an upload in progress (idempotent)."""
        return File.from_dict((await self._client.request("POST", f"/v1/files/{file_id}/cancel"))["file"])

    async def wait(self, file_id: str, *, poll_interval: float = 2.0, timeout: float | None = None) -> File:
        """Poll until the file's checks are done (`processed` or `error`) and return it.
        Raises `WaitTimeoutError` after `timeout` seconds (None: no limit)."""
        started = self._client.monotonic()
        while True:
            file = await self.get(file_id)
            if file.status not in PENDING_STATUSES:
                return file
            if timeout is not None and self._client.monotonic() - started + poll_interval > timeout:
                raise WaitTimeoutError(f"{file_id} still {file.status} after {timeout} s")
            await self._client.sleep(poll_interval)

    async def create(
        self,
        source: Source | UploadSource,
        *,
        purpose: str | None = None,
        on_progress: Progress | None = None,
    ) -> File:
        data = source if isinstance(source, UploadSource) else upload_source(source)
        response = await self._client.send(
            "POST",
            self._client.base_url + "/v1/files",
            params={"purpose": purpose} if purpose else None,
            content=lambda: data.achunks(on_progress),
            headers=self._client.headers(direct_headers(data)),
        )
        return File.from_dict(response.json()["file"])

    async def start_upload(
        self, *, filename: str, size: int, content_type: str | None = None, purpose: str | None = None
    ) -> SignedUpload:
        body = start_body(filename, size, content_type, purpose)
        answer = await self._client.request("POST", "/v1/files/uploads", json=body)
        return SignedUpload.from_dict(answer)

    async def put(
        self, upload: UploadTarget, source: Source | UploadSource, *, on_progress: Progress | None = None
    ) -> None:
        data = source if isinstance(source, UploadSource) else upload_source(source)
        await self._client.send(
            upload.method,
            upload.url,
            content=lambda: data.achunks(on_progress),
            headers={**upload.headers, "Content-Length": str(data.size)},
        )

    async def complete(self, file_id: str, etags: dict[int, str] | None = None) -> File:
        body = complete_body(etags) if etags is not None else None
        answer = await self._client.request("POST", f"/v1/files/{file_id}/complete", json=body)
        return File.from_dict(answer["file"])

    async def get(self, file_id: str) -> File:
        return File.from_dict((await self._client.request("GET", f"/v1/files/{file_id}"))["file"])
