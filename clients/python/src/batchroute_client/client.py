"""The synchronous client of the native API, on httpx.

from batchroute_client import Client
client = Client(api_key="...", base_url="https://...")
quote = client.quotes.model(items=[...])
batch = client.batches.create(quote_id=quote.quote_id, items=[...])
batch = client.batches.wait(batch.id, on_progress=lambda b: print(b.counts))

Every call is a plan of the sans-IO core (`_core.Operations`); this module is its blocking loop.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Iterator, Mapping
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
    __version__,
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

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "Batches",
    "Chat",
    "Client",
    "Files",
    "Quotes",
    "__version__",
]

T = TypeVar("T")


class Client(ClientBase):
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
        self._http = http_client or httpx.Client(timeout=timeout)
        self._sleep = sleep
        self.quotes = Quotes(self)
        self.batches = Batches(self)
        self.chat = Chat(self)
        self.files = Files(self)

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

    # -- the loop: runs a plan, performing its effects with httpx.Client ----------------------

    def run(self, plan: Plan[T]) -> T:
        """Run a plan of the core to its value."""
        with contextlib.closing(self.drive(returning(plan))) as values:
            return cast(T, next(values))

    def drive(self, plan: Plan[Any]) -> Generator[Any, None, None]:
        """Run a plan, yielding what it emits (lazily: the plan advances as it is consumed)."""
        runner = Runner(plan)
        lines: dict[int, Iterator[Any]] = {}
        try:
            with contextlib.ExitStack() as opened:
                while (effect := runner.next()) is not None:
                    if isinstance(effect, Emit):
                        yield effect.value
                        runner.resolve(None)
                        continue
                    try:
                        runner.resolve(self._perform(effect, opened, lines))
                    except BaseException as exc:  # thrown into the plan, which decides
                        runner.fail(exc)
        finally:
            runner.close()

    def _perform(
        self,
        effect: Send | Open | Read | Sleep,
        opened: contextlib.ExitStack,
        lines: dict[int, Iterator[Any]],
    ) -> Any:
        if isinstance(effect, Sleep):
            return self._sleep(effect.seconds)
        if isinstance(effect, Read):
            if effect.unit == "body":
                return effect.response.read()
            reader = effect.response.iter_lines if effect.unit == "line" else effect.response.iter_bytes
            return next(lines.setdefault(id(effect.response), reader()), None)
        call = effect.call
        request = self._http.build_request(
            call.method,
            call.url,
            params=call.params,
            json=call.json,
            content=call.content() if call.content is not None else None,
            headers=call.headers,
        )
        if isinstance(effect, Send):
            return self._http.send(request)
        response = self._http.send(request, stream=True)
        opened.callback(response.close)
        return response

    # -- the API ----------------------------------------------------------------------------

    def usage(self) -> Usage:
        return self.run(self.ops.usage())

    def billing_controls(self) -> BillingControls:
        """`GET /v1/billing/controls` (changing them needs a user session: the console)."""
        return self.run(self.ops.billing_controls())

    def chat_job(self, job_id: str) -> ChatJob:
        """`GET /v1/chat/completions/{job_id}`: a queued chat job; `result` once completed."""
        return self.run(self.ops.chat_job(job_id))

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
        plan = self.ops.request(
            method, path, params=params, json=json, headers=headers, repeatable=retry_on_network_error
        )
        return self.run(plan)

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
        call = Call(method, url, params=params, json=json, content=content, headers=headers)
        return self.run(self.ops.send(call, repeatable=repeatable))

    def stream_events(self, path: str, json: Any) -> Iterator[dict[str, Any]]:
        """POST and yield each server-sent event's JSON data until `[DONE]`. Only a 429 (answered
        before any work) is retried: a lost stream is not replayed, it may have been charged."""
        return self.drive(self.ops.events(path, json))

    def paginate(self, path: str, params: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """Every row of a cursor-paginated listing, fetching the next page as it is consumed."""
        return self.drive(self.ops.pages(path, params))


class Quotes:
    def __init__(self, client: Client) -> None:
        self._client = client

    def model(self, items: list[dict[str, Any]] | None = None, **options: Any) -> Quote:
        """`POST /v1/quotes/model`: free, reserves nothing; `options` are the routing fields
        (`routing_mode`, `sla_tier`, `privacy_tier`, `required_tools`, ...), or
        `input_file_id` instead of `items`."""
        body = {"items": items, **options} if items is not None else options
        return self._client.run(self._client.ops.quote("model", body))


class Batches:
    def __init__(self, client: Client) -> None:
        self._client = client
        self._ops = client.ops

    def create(self, *, idempotency_key: str | None = None, **body: Any) -> Batch:
        """`POST /v1/batches` with `quote_id`, `items` (or `input_file_id`), `webhook`, ...

        One `Idempotency-Key` (generated here when not given) is sent on every retry with the
        same body, so a retried create returns the original batch and never a second one."""
        return self._client.run(self._ops.create_batch(idempotency_key, body))

    def get(self, batch_id: str) -> Batch:
        return self._client.run(self._ops.get_batch(batch_id))

    def list(self, *, state: str | None = None, page_size: int | None = None) -> Iterator[Batch]:
        """Every batch (newest first), across all pages."""
        return self._client.drive(self._ops.list_batches(state, page_size))

    def items(
        self, batch_id: str, *, status: str | None = None, page_size: int | None = None
    ) -> Iterator[Item]:
        return self._client.drive(self._ops.items(batch_id, status, page_size))

    def results(
        self, batch_id: str, *, body_format: str | None = None, page_size: int | None = None
    ) -> Iterator[ResultRow]:
        return self._client.drive(self._ops.results(batch_id, body_format, page_size))

    def cancel(self, batch_id: str, *, reason: str | None = None) -> Batch:
        return self._client.run(self._ops.cancel_batch(batch_id, reason))

    def retry(self, batch_id: str) -> RetriedBatch:
        """Create a new batch from the failed and canceled items (beta). Not repeated on a
        network error or 5xx: the first attempt may have created the batch."""
        return self._client.run(self._ops.retry_batch(batch_id))

    def artifact_url(self, batch_id: str) -> str:
        """A short-lived signed URL of the full results JSONL."""
        return self._client.run(self._ops.artifact_url(batch_id))

    def receipt(self, batch_id: str) -> BillingReceipt:
        return self._client.run(self._ops.receipt(batch_id))

    def download_artifact(self, batch_id: str, out: BinaryIO) -> int:
        """Stream the full results artifact (its signed URL) into `out`; return the byte count.
        Not resumed after a network error: call again (a new URL is signed each time)."""
        return self._client.run(self._ops.download_artifact(batch_id, out))

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
        return self._client.run(self._ops.wait_batch(batch_id, poll_interval, timeout, on_progress))


class Chat:
    """Chat completions: direct (`create`, `stream`) or queued as a chat job (`queue`).

    A direct request is charged, so it is not repeated after a network error or a 5xx (only
    a 429 is retried); a queued one is a batch of one item, read with `client.chat_job(id)`."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(self, model: str, messages: list[dict[str, Any]], **options: Any) -> ChatCompletion:
        return self._client.run(self._client.ops.chat_completion(model, messages, options))

    def stream(
        self, model: str, messages: list[dict[str, Any]], **options: Any
    ) -> Iterator[ChatCompletionChunk]:
        return self._client.drive(self._client.ops.chat_stream(model, messages, options))

    def queue(self, model: str, messages: list[dict[str, Any]], **options: Any) -> ChatJob:
        return self._client.run(self._client.ops.chat_queue(model, messages, options))


class Files:
    """Model-input JSONL files (docs/files.md). `upload` picks the way by size: a direct
    upload up to 4 MiB, else the signed URL (up to 2 GiB; in parts above 64 MiB, then waits
    for `processed`), reporting bytes sent to
    `on_progress(sent, total)`; a retried attempt reports again from 0."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._ops = client.ops

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
        plan = self._ops.upload(source, filename, purpose, method, on_progress, wait, poll_interval, timeout)
        return self._client.run(plan)

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
        return self._client.run(self._ops.put_parts(file_id, plan, source, on_progress))

    def part_urls(self, file_id: str, part_numbers: list[int] | None = None) -> MultipartPlan:
        """`POST /v1/files/{id}/parts`: fresh signed URLs (all parts by default)."""
        return self._client.run(self._ops.part_urls(file_id, part_numbers))

    def cancel(self, file_id: str) -> File:
        """`POST /v1/files/{id}/cancel`: give up an upload in progress (idempotent)."""
        return self._client.run(self._ops.cancel_file(file_id))

    def wait(self, file_id: str, *, poll_interval: float = 2.0, timeout: float | None = None) -> File:
        """Poll until the file's checks are done (`processed` or `error`) and return it.
        Raises `WaitTimeoutError` after `timeout` seconds (None: no limit)."""
        return self._client.run(self._ops.wait_file(file_id, poll_interval, timeout))

    def create(
        self,
        source: Source | UploadSource,
        *,
        purpose: str | None = None,
        on_progress: Progress | None = None,
    ) -> File:
        """`POST /v1/files`: a direct upload (the raw JSONL body, streamed)."""
        return self._client.run(self._ops.create_file(source, purpose, on_progress))

    def start_upload(
        self, *, filename: str, size: int, content_type: str | None = None, purpose: str | None = None
    ) -> SignedUpload:
        """`POST /v1/files/uploads`: a file in `uploading` and the signed URL to PUT it to."""
        return self._client.run(self._ops.start_upload(filename, size, content_type, purpose))

    def put(
        self, upload: UploadTarget, source: Source | UploadSource, *, on_progress: Progress | None = None
    ) -> None:
        """PUT the bytes to the signed URL with exactly its headers (never the API key)."""
        self._client.run(self._ops.put(upload, source, on_progress))

    def complete(self, file_id: str, etags: dict[int, str] | None = None) -> File:
        """`POST /v1/files/{id}/complete` (a multipart upload's parts by number -> ETag):
        small files come back checked, large ones `uploaded` (see `wait`); idempotent."""
        return self._client.run(self._ops.complete(file_id, etags))

    def get(self, file_id: str) -> File:
        return self._client.run(self._ops.get_file(file_id))
