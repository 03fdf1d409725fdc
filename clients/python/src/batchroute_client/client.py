"""The synchronous client of the native API, on httpx.

from batchroute_client import Client
client = Client(api_key="...", base_url="https://...")
quote = client.quotes.model(items=[...])
batch = client.batches.create(quote_id=quote.quote_id, items=[...])
batch = client.batches.wait(batch.id, on_progress=lambda b: print(b.counts))
"""

from __future__ import annotations

import contextlib
import json as _json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
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

__version__ = "0.1.0"
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 4


class Client:
    """`api_key` defaults to `BATCHROUTE_API_KEY`, `base_url` to `BATCHROUTE_BASE_URL` (or the
    given `http_client`'s base URL). `sleep`, `clock` (Unix seconds, for `Retry-After` dates)
    and `monotonic` (for `wait` time-outs) are injectable for tests."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http_client: httpx.Client | None = None,
        backoff: Backoff | None = None,
        sleep: Callable[[float], None] = time.sleep,
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
        self._http = http_client or httpx.Client(timeout=timeout)
        self._backoff = backoff or Backoff()
        self._sleep = sleep
        self._clock = clock
        self.monotonic = monotonic
        self.quotes = Quotes(self)
        self.batches = Batches(self)
        self.chat = Chat(self)
        self.files = Files(self)

    def __repr__(self) -> str:  # never shows the key
        return f"Client(base_url={self.base_url!r})"

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def http(self) -> httpx.Client:
        return self._http

    def sleep(self, seconds: float) -> None:
        self._sleep(seconds)

    def usage(self) -> Usage:
        return Usage.from_dict(self.request("GET", "/v1/usage"))

    def billing_controls(self) -> BillingControls:
        """`GET /v1/billing/controls` (changing them needs a user session: the console)."""
        return BillingControls.from_dict((self.request("GET", "/v1/billing/controls"))["controls"])

    def chat_job(self, job_id: str) -> ChatJob:
        """`GET /v1/chat/completions/{job_id}`: a queued chat job; `result` once completed."""
        return ChatJob.from_dict(self.request("GET", f"/v1/chat/completions/{job_id}"))

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        retry_on_network_error: bool = True,
    ) -> Any:
        """Send one API call, retrying per the spec's guidance; return the decoded JSON body.

        Every attempt sends the same headers and body (so an `Idempotency-Key` is reused).
        `retry_on_network_error=False` (and no 5xx retry) for a POST that is not safe to
        repeat: only 429, which the service answers before doing any work, is retried then.
        """
        response = self.send(
            method,
            self.base_url + path,
            params={k: v for k, v in (params or {}).items() if v is not None},
            json=json,
            headers=self.headers(headers),
            repeatable=retry_on_network_error,
        )
        return response.json() if response.content else None

    def send(
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
        """One HTTP exchange with the spec's retries; the successful response, or the typed error.

        `content` is a factory of the body (bytes or an iterator of chunks), called again for
        every attempt, so a streamed upload restarts from its first byte."""
        label = f"{method} {httpx.URL(url).path}"
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(
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
                self._sleep(wait)
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
            self._sleep(wait)

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self._api_key}",
            "Accept": "application/json",
            "User-Agent": f"batchroute-python/{__version__}",
            **(extra or {}),
        }

    def stream_events(self, path: str, json: Any) -> Iterator[dict[str, Any]]:
        """POST and yield each server-sent event's JSON data until `[DONE]`. Only a 429 (answered
        before any work) is retried: a lost stream is not replayed, it may have been charged."""
        attempt = 0
        while True:
            attempt += 1
            try:
                with self._http.stream(
                    "POST", self.base_url + path, json=json, headers=self.headers()
                ) as response:
                    if response.status_code >= 400:
                        response.read()
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
                        for line in response.iter_lines():
                            if not line.startswith("data:"):
                                continue
                            data = line[5:].strip()
                            if data == "[DONE]":
                                return
                            yield _json.loads(data)
                        return
            except httpx.TransportError as exc:
                raise APIConnectionError(f"POST {path}: {type(exc).__name__}: {exc}") from exc
            self._sleep(wait)

    def paginate(self, path: str, params: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """Every row of a cursor-paginated listing, fetching the next page as it is consumed."""
        cursor: str | None = None
        while True:
            page = self.request("GET", path, params={**params, "cursor": cursor})
            yield from page.get("data") or []
            cursor = page.get("next_cursor")
            if not cursor:
                return


class Quotes:
    def __init__(self, client: Client) -> None:
        self._client = client

    def model(self, items: list[dict[str, Any]] | None = None, **options: Any) -> Quote:
        """`POST /v1/quotes/model`: free, reserves nothing; `options` are the routing fields
        (`routing_mode`, `sla_tier`, `privacy_tier`, `required_tools`, ...), or
        `input_file_id` instead of `items`."""
        body = {"items": items, **options} if items is not None else options
        return Quote.from_dict(self._client.request("POST", "/v1/quotes/model", json=body))


class Batches:
    def __init__(self, client: Client) -> None:
        self._client = client

    def create(self, *, idempotency_key: str | None = None, **body: Any) -> Batch:
        """`POST /v1/batches` with `quote_id`, `items` (or `input_file_id`), `webhook`, ...

        One `Idempotency-Key` (generated here when not given) is sent on every retry with the
        same body, so a retried create returns the original batch and never a second one."""
        key = idempotency_key or f"br-{uuid.uuid4().hex}"
        answer = self._client.request("POST", "/v1/batches", json=body, headers={"Idempotency-Key": key})
        return Batch.from_dict(answer["batch"])

    def get(self, batch_id: str) -> Batch:
        return Batch.from_dict(self._client.request("GET", f"/v1/batches/{batch_id}")["batch"])

    def list(self, *, state: str | None = None, page_size: int | None = None) -> Iterator[Batch]:
        """Every batch (newest first), across all pages."""
        for row in self._client.paginate("/v1/batches", {"state": state, "limit": page_size}):
            yield Batch.from_dict(row)

    def items(
        self, batch_id: str, *, status: str | None = None, page_size: int | None = None
    ) -> Iterator[Item]:
        params = {"status": status, "limit": page_size}
        for row in self._client.paginate(f"/v1/batches/{batch_id}/items", params):
            yield Item.from_dict(row)

    def results(
        self, batch_id: str, *, body_format: str | None = None, page_size: int | None = None
    ) -> Iterator[ResultRow]:
        params = {"body_format": body_format, "limit": page_size}
        for row in self._client.paginate(f"/v1/batches/{batch_id}/results", params):
            yield ResultRow.from_dict(row)

    def cancel(self, batch_id: str, *, reason: str | None = None) -> Batch:
        body = {"reason": reason} if reason else None
        return Batch.from_dict(
            self._client.request("POST", f"/v1/batches/{batch_id}/cancel", json=body)["batch"]
        )

    def retry(self, batch_id: str) -> RetriedBatch:
        """Create a new batch from the failed and canceled items (beta). Not repeated on a
        network error or 5xx: the first attempt may have created the batch."""
        answer = self._client.request("POST", f"/v1/batches/{batch_id}/retry", retry_on_network_error=False)
        return RetriedBatch.from_dict(answer)

    def artifact_url(self, batch_id: str) -> str:
        """A short-lived signed URL of the full results JSONL."""
        return str(self._client.request("GET", f"/v1/batches/{batch_id}/artifact-url")["url"])

    def receipt(self, batch_id: str) -> BillingReceipt:
        return BillingReceipt.from_dict(
            self._client.request("GET", f"/v1/batches/{batch_id}/billing-receipt")
        )

    def download_artifact(self, batch_id: str, out: BinaryIO) -> int:
        """Stream the full results artifact (its signed URL) into `out`; return the byte count.
        Not resumed after a network error: call again (a new URL is signed each time)."""
        url = self.artifact_url(batch_id)
        written = 0
        try:
            with self._client.http.stream("GET", url) as response:
                if response.status_code >= 400:
                    response.read()
                    raise error_from_response(response)
                for chunk in response.iter_bytes():
                    out.write(chunk)
                    written += len(chunk)
        except httpx.TransportError as exc:
            raise APIConnectionError(f"GET artifact of {batch_id}: {type(exc).__name__}: {exc}") from exc
        return written

    def wait(
        self,
        batch_id: str,
        *,
        poll_interval: float = 5.0,
        timeout: float | None = None,
        on_progress: Callable[[Batch], None] | None = None,
    ) -> Batch:
        """Poll until the batch is terminal and return it; `on_progress` sees every poll.
        Raises `WaitTimeoutError` after `timeout` seconds (None: no limit)."""
        started = self._client.monotonic()
        while True:
            batch = self.get(batch_id)
            if on_progress is not None:
                on_progress(batch)
            if batch.is_terminal:
                return batch
            if timeout is not None and self._client.monotonic() - started + poll_interval > timeout:
                raise WaitTimeoutError(f"{batch_id} still {batch.state} after {timeout} s")
            self._client.sleep(poll_interval)


class Chat:
    """Chat completions: direct (`create`, `stream`) or queued as a chat job (`queue`).

    A direct request is charged, so it is not repeated after a network error or a 5xx (only
    a 429 is retried); a queued one is a batch of one item, read with `client.chat_job(id)`."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(self, model: str, messages: list[dict[str, Any]], **options: Any) -> ChatCompletion:
        body = {"model": model, "messages": messages, **options, "stream": False}
        answer = self._client.request("POST", "/v1/chat/completions", json=body, retry_on_network_error=False)
        return ChatCompletion.from_dict(answer)

    def stream(
        self, model: str, messages: list[dict[str, Any]], **options: Any
    ) -> Iterator[ChatCompletionChunk]:
        body = {"model": model, "messages": messages, **options, "stream": True}
        for event in self._client.stream_events("/v1/chat/completions", body):
            yield ChatCompletionChunk.from_dict(event)

    def queue(self, model: str, messages: list[dict[str, Any]], **options: Any) -> ChatJob:
        body = {"model": model, "messages": messages, "batch": True, **options}
        answer = self._client.request("POST", "/v1/chat/completions", json=body, retry_on_network_error=False)
        return ChatJob.from_dict(answer)


class Files:
    """Model-input JSONL files (docs/files.md). `upload` picks the way by size: a direct
    upload up to 4 MiB, else the signed URL (up to 2 GiB; in parts above 64 MiB, then waits
    for `processed`), reporting bytes sent to
    `on_progress(sent, total)`; a retried attempt reports again from 0."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def upload(
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
        """Upload `source` (bytes or a path) and return the checked file (`processed`, or
        `error` with its line errors)."""
        data = upload_source(source, filename)
        if use_direct(method, data.size):
            return self.create(data, purpose=purpose, on_progress=on_progress)
        signed = self.start_upload(filename=data.filename, size=data.size, purpose=purpose)
        if signed.multipart is None:
            self.put(signed.upload, data, on_progress=on_progress)
            file = self.complete(signed.file.id)
        else:
            try:
                etags = self.put_parts(signed.file.id, signed.multipart, data, on_progress=on_progress)
            except BaseException:
                with contextlib.suppress(Exception):  # S3 drops the parts sent; the error is the answer
                    self.cancel(signed.file.id)
                raise
            file = self.complete(signed.file.id, etags)
        if not wait or file.status not in PENDING_STATUSES:
            return file
        return self.wait(file.id, poll_interval=poll_interval, timeout=timeout)

    def put_parts(
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
            etags[part.part_number] = self._put_part(file_id, part, data, on_progress)
        return etags

    def _put_part(
        self, file_id: str, part: PartTarget, data: UploadSource, on_progress: Progress | None
    ) -> str:
        def body() -> object:
            return data.part_chunks(part.offset, part.bytes, on_progress)

        try:
            response = self._client.send("PUT", part.url, content=body, headers=part_headers(part.bytes))
        except PermissionDeniedError:  # the URL expired: sign this part again, once
            fresh = (self.part_urls(file_id, [part.part_number])).parts[0]
            response = self._client.send("PUT", fresh.url, content=body, headers=part_headers(part.bytes))
        return str(response.headers["etag"])

    def part_urls(self, file_id: str, part_numbers: list[int] | None = None) -> MultipartPlan:
        """`POST /v1/files/{id}/parts`: fresh signed URLs (all parts by default)."""
        body = {"part_numbers": part_numbers} if part_numbers is not None else {}
        answer = self._client.request("POST", f"/v1/files/{file_id}/parts", json=body)
        return MultipartPlan.from_dict(answer["multipart"])

    def cancel(self, file_id: str) -> File:
        """`POST /v1/files/{id}/cancel`: give up an upload in progress (idempotent)."""
        return File.from_dict((self._client.request("POST", f"/v1/files/{file_id}/cancel"))["file"])

    def wait(self, file_id: str, *, poll_interval: float = 2.0, timeout: float | None = None) -> File:
        """Poll until the file's checks are done (`processed` or `error`) and return it.
        Raises `WaitTimeoutError` after `timeout` seconds (None: no limit)."""
        started = self._client.monotonic()
        while True:
            file = self.get(file_id)
            if file.status not in PENDING_STATUSES:
                return file
            if timeout is not None and self._client.monotonic() - started + poll_interval > timeout:
                raise WaitTimeoutError(f"{file_id} still {file.status} after {timeout} s")
            self._client.sleep(poll_interval)

    def create(
        self,
        source: Source | UploadSource,
        *,
        purpose: str | None = None,
        on_progress: Progress | None = None,
    ) -> File:
        """`POST /v1/files`: a direct upload (the raw JSONL body, streamed)."""
        data = source if isinstance(source, UploadSource) else upload_source(source)
        response = self._client.send(
            "POST",
            self._client.base_url + "/v1/files",
            params={"purpose": purpose} if purpose else None,
            content=lambda: data.chunks(on_progress),
            headers=self._client.headers(direct_headers(data)),
        )
        return File.from_dict(response.json()["file"])

    def start_upload(
        self, *, filename: str, size: int, content_type: str | None = None, purpose: str | None = None
    ) -> SignedUpload:
        """`POST /v1/files/uploads`: a file in `uploading` and the signed URL to PUT it to."""
        body = start_body(filename, size, content_type, purpose)
        answer = self._client.request("POST", "/v1/files/uploads", json=body)
        return SignedUpload.from_dict(answer)

    def put(
        self, upload: UploadTarget, source: Source | UploadSource, *, on_progress: Progress | None = None
    ) -> None:
        """PUT the bytes to the signed URL with exactly its headers (never the API key)."""
        data = source if isinstance(source, UploadSource) else upload_source(source)
        self._client.send(
            upload.method,
            upload.url,
            content=lambda: data.chunks(on_progress),
            headers={**upload.headers, "Content-Length": str(data.size)},
        )

    def complete(self, file_id: str, etags: dict[int, str] | None = None) -> File:
        """`POST /v1/files/{id}/complete` (a multipart upload's parts by number -> ETag):
        small files come back checked, large ones `uploaded` (see `wait`); idempotent."""
        body = complete_body(etags) if etags is not None else None
        return File.from_dict(
            self._client.request("POST", f"/v1/files/{file_id}/complete", json=body)["file"]
        )

    def get(self, file_id: str) -> File:
        return File.from_dict(self._client.request("GET", f"/v1/files/{file_id}")["file"])
