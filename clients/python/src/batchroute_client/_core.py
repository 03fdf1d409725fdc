"""The sans-IO core of the client: every behaviour of `Client` and `AsyncClient` written once.

An API call is a *plan*: a generator that yields effects (`Send` a request, `Open` a streamed
one, `Read` from it, `Sleep`, `Emit` a value to the caller) and is sent each effect's result
back (or has its exception thrown in). The plan builds the requests, decides the retries and
their backoff (`_retry`), turns answers into models or typed errors (`errors`), pages through
listings and walks the upload steps (`_upload`); it never touches the network or the clock's
sleep. `Client` runs plans with a blocking loop on `httpx.Client`, `AsyncClient` with an
awaiting loop on `httpx.AsyncClient` (docs/client.md, "Structure").
"""

from __future__ import annotations

import contextlib
import json as _json
import os
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO, Generic, Literal, TypeVar

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

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """One HTTP request, described: `content` is a factory of the body (bytes or an iterator of
    chunks), called again for every attempt so a streamed upload restarts from its first byte."""

    method: str
    url: str
    params: Mapping[str, Any] | None = None
    json: Any = None
    content: Callable[[], Any] | None = None
    headers: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Send:
    """Send `call` and read its body: the `httpx.Response` (a transport error is thrown in)."""

    call: Call


@dataclass(frozen=True)
class Open:
    """Send `call` and return the response with its body unread; closed when the plan ends."""

    call: Call


@dataclass(frozen=True)
class Read:
    """From an opened response: the whole `body` (None back), or its next `line` or `chunk`
    (None at the end)."""

    response: httpx.Response
    unit: Literal["body", "line", "chunk"]


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Emit(Generic[T]):
    """Hand `value` to the caller (a row of a listing, a streamed event); None comes back."""

    value: T


Effect = Send | Open | Read | Sleep | Emit[Any]
Plan = Generator[Effect, Any, T]


def returning(plan: Plan[T]) -> Plan[None]:
    """The plan with its result emitted last (how a loop runs a plan to its value)."""
    result = yield from plan
    yield Emit(result)


class Runner:
    """Steps a plan: what a driver loop asks for the next effect and answers with its outcome."""

    def __init__(self, plan: Plan[Any]) -> None:
        self._plan = plan
        self._value: Any = None
        self._error: BaseException | None = None

    def next(self) -> Effect | None:
        """The plan's next effect, or None when it is done; raises what the plan raises."""
        error, self._error = self._error, None
        try:
            return self._plan.throw(error) if error is not None else self._plan.send(self._value)
        except StopIteration:
            return None

    def resolve(self, value: Any) -> None:
        self._value = value

    def fail(self, error: BaseException) -> None:
        self._error = error

    def close(self) -> None:
        self._plan.close()


def iterator_of(content: Any) -> Iterator[bytes] | None:
    """The body as a sync iterator of chunks, when it is one (bytes and async bodies are not)."""
    if isinstance(content, bytes | str) or not isinstance(content, Iterator):
        return None
    return content


class ClientBase:
    """What both clients hold: the resolved key and URL, the retry policy and the clocks."""

    def __init__(
        self,
        api_key: str | None,
        base_url: str | None,
        http_base_url: str | None,
        *,
        max_retries: int,
        backoff: Backoff | None,
        clock: Callable[[], float],
        monotonic: Callable[[], float],
    ) -> None:
        key = api_key or os.environ.get("BATCHROUTE_API_KEY")
        if not key:
            raise ValueError("no API key: pass api_key= or set BATCHROUTE_API_KEY")
        url = base_url or os.environ.get("BATCHROUTE_BASE_URL") or http_base_url
        if not url:
            raise ValueError("no base URL: pass base_url= or set BATCHROUTE_BASE_URL")
        self.base_url = url.rstrip("/")
        self.max_retries = max(0, max_retries)
        self._api_key = key
        self._backoff = backoff or Backoff()
        self._clock = clock
        self.monotonic = monotonic
        self.ops = Operations(self)

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self._api_key}",
            "Accept": "application/json",
            "User-Agent": f"batchroute-python/{__version__}",
            **(extra or {}),
        }

    def retry_wait(self, attempt: int, response: httpx.Response | None, repeatable: bool) -> float | None:
        """Seconds before retrying failed attempt `attempt` (None: give up); `response` None is a
        network error."""
        if response is None:
            return wait_before_retry(
                self._backoff, attempt, self.max_retries, status=None, repeatable=repeatable
            )
        return wait_before_retry(
            self._backoff,
            attempt,
            self.max_retries,
            status=response.status_code,
            retry_after=response.headers.get("retry-after"),
            now=self._clock(),
            repeatable=repeatable,
        )


def _local(source: Source | UploadSource) -> UploadSource:
    return source if isinstance(source, UploadSource) else upload_source(source)


class Operations:
    """Every API call of the client as a plan (see the module docstring); the clients' methods
    run these and document them."""

    def __init__(self, client: ClientBase) -> None:
        self._client = client

    # -- the exchange, with the spec's retries --------------------------------------------

    def send(self, call: Call, *, repeatable: bool = True) -> Plan[httpx.Response]:
        """One exchange with the spec's retries: the successful response, or the typed error."""
        attempt = 0
        while True:
            attempt += 1
            try:
                response: httpx.Response = yield Send(call)
            except httpx.TransportError as exc:
                wait = self._client.retry_wait(attempt, None, repeatable)
                if wait is None:
                    label = f"{call.method} {httpx.URL(call.url).path}"
                    raise APIConnectionError(f"{label}: {type(exc).__name__}: {exc}") from exc
            else:
                if response.status_code < 400:
                    return response
                wait = self._client.retry_wait(attempt, response, repeatable)
                if wait is None:
                    raise error_from_response(response)
            yield Sleep(wait)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        repeatable: bool = True,
    ) -> Plan[Any]:
        """An API call: the same headers and body on every attempt; the decoded JSON body."""
        call = Call(
            method,
            self._client.base_url + path,
            params={k: v for k, v in (params or {}).items() if v is not None},
            json=json,
            headers=self._client.headers(headers),
        )
        response = yield from self.send(call, repeatable=repeatable)
        return response.json() if response.content else None

    def events(self, path: str, json: Any, parse: Callable[[dict[str, Any]], Any] = dict) -> Plan[None]:
        """POST and emit each server-sent event's JSON data (parsed) until `[DONE]`. Only a 429
        (answered before any work) is retried: a lost stream is not replayed, it may have been
        charged."""
        call = Call("POST", self._client.base_url + path, json=json, headers=self._client.headers())
        attempt = 0
        while True:
            attempt += 1
            try:
                response = yield Open(call)
                if response.status_code < 400:
                    while (line := (yield Read(response, "line"))) is not None:
                        data = line[5:].strip() if line.startswith("data:") else None
                        if data == "[DONE]":
                            return
                        if data is not None:
                            yield Emit(parse(_json.loads(data)))
                    return
                yield Read(response, "body")
            except httpx.TransportError as exc:
                raise APIConnectionError(f"POST {path}: {type(exc).__name__}: {exc}") from exc
            wait = self._client.retry_wait(attempt, response, repeatable=False)
            if wait is None:
                raise error_from_response(response)
            yield Sleep(wait)

    def pages(
        self, path: str, params: Mapping[str, Any], parse: Callable[[dict[str, Any]], Any] = dict
    ) -> Plan[None]:
        """Emit every row of a cursor-paginated listing (parsed), fetching pages as consumed."""
        cursor: str | None = None
        while True:
            page = yield from self.request("GET", path, params={**params, "cursor": cursor})
            for row in page.get("data") or []:
                yield Emit(parse(row))
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def _poll(
        self,
        get: Callable[[], Plan[T]],
        pending: Callable[[T], str | None],
        poll_interval: float,
        timeout: float | None,
    ) -> Plan[T]:
        """Poll until `pending` (what is still waited for, e.g. "batch_1 still running") is None;
        `WaitTimeoutError` after `timeout` seconds (None: no limit)."""
        started = self._client.monotonic()
        while True:
            value = yield from get()
            still = pending(value)
            if still is None:
                return value
            if timeout is not None and self._client.monotonic() - started + poll_interval > timeout:
                raise WaitTimeoutError(f"{still} after {timeout} s")
            yield Sleep(poll_interval)

    # -- account ---------------------------------------------------------------------------

    def usage(self) -> Plan[Usage]:
        return Usage.from_dict((yield from self.request("GET", "/v1/usage")))

    def billing_controls(self) -> Plan[BillingControls]:
        return BillingControls.from_dict((yield from self.request("GET", "/v1/billing/controls"))["controls"])

    # -- quotes ----------------------------------------------------------------------------

    def quote(self, kind: str, body: dict[str, Any]) -> Plan[Quote]:
        return Quote.from_dict((yield from self.request("POST", f"/v1/quotes/{kind}", json=body)))

    # -- batches ---------------------------------------------------------------------------

    def create_batch(self, idempotency_key: str | None, body: dict[str, Any]) -> Plan[Batch]:
        headers = {"Idempotency-Key": idempotency_key or f"br-{uuid.uuid4().hex}"}
        answer = yield from self.request("POST", "/v1/batches", json=body, headers=headers)
        return Batch.from_dict(answer["batch"])

    def get_batch(self, batch_id: str) -> Plan[Batch]:
        return Batch.from_dict((yield from self.request("GET", f"/v1/batches/{batch_id}"))["batch"])

    def list_batches(self, state: str | None, page_size: int | None) -> Plan[None]:
        return self.pages("/v1/batches", {"state": state, "limit": page_size}, Batch.from_dict)

    def items(self, batch_id: str, status: str | None, page_size: int | None) -> Plan[None]:
        params = {"status": status, "limit": page_size}
        return self.pages(f"/v1/batches/{batch_id}/items", params, Item.from_dict)

    def results(self, batch_id: str, body_format: str | None, page_size: int | None) -> Plan[None]:
        params = {"body_format": body_format, "limit": page_size}
        return self.pages(f"/v1/batches/{batch_id}/results", params, ResultRow.from_dict)

    def cancel_batch(self, batch_id: str, reason: str | None) -> Plan[Batch]:
        body = {"reason": reason} if reason else None
        answer = yield from self.request("POST", f"/v1/batches/{batch_id}/cancel", json=body)
        return Batch.from_dict(answer["batch"])

    def retry_batch(self, batch_id: str) -> Plan[RetriedBatch]:
        answer = yield from self.request("POST", f"/v1/batches/{batch_id}/retry", repeatable=False)
        return RetriedBatch.from_dict(answer)

    def artifact_url(self, batch_id: str) -> Plan[str]:
        return str((yield from self.request("GET", f"/v1/batches/{batch_id}/artifact-url"))["url"])

    def receipt(self, batch_id: str) -> Plan[BillingReceipt]:
        return BillingReceipt.from_dict(
            (yield from self.request("GET", f"/v1/batches/{batch_id}/billing-receipt"))
        )

    def download_artifact(self, batch_id: str, out: BinaryIO) -> Plan[int]:
        url = yield from self.artifact_url(batch_id)
        written = 0
        try:
            response = yield Open(Call("GET", url))
            if response.status_code >= 400:
                yield Read(response, "body")
                raise error_from_response(response)
            while (chunk := (yield Read(response, "chunk"))) is not None:
                out.write(chunk)
                written += len(chunk)
        except httpx.TransportError as exc:
            raise APIConnectionError(f"GET artifact of {batch_id}: {type(exc).__name__}: {exc}") from exc
        return written

    def wait_batch(
        self,
        batch_id: str,
        poll_interval: float,
        timeout: float | None,
        on_progress: Callable[[Batch], None] | None,
    ) -> Plan[Batch]:
        def poll() -> Plan[Batch]:
            batch = yield from self.get_batch(batch_id)
            if on_progress is not None:
                on_progress(batch)
            return batch

        def pending(batch: Batch) -> str | None:
            return None if batch.is_terminal else f"{batch_id} still {batch.state}"

        return self._poll(poll, pending, poll_interval, timeout)

    # -- chat ------------------------------------------------------------------------------

    def chat(self, body: dict[str, Any]) -> Plan[Any]:
        """A direct completion or a queued job: charged, so only a 429 is retried."""
        return self.request("POST", "/v1/chat/completions", json=body, repeatable=False)

    def chat_completion(
        self, model: str, messages: list[dict[str, Any]], options: dict[str, Any]
    ) -> Plan[ChatCompletion]:
        body = {"model": model, "messages": messages, **options, "stream": False}
        return ChatCompletion.from_dict((yield from self.chat(body)))

    def chat_queue(
        self, model: str, messages: list[dict[str, Any]], options: dict[str, Any]
    ) -> Plan[ChatJob]:
        body = {"model": model, "messages": messages, "batch": True, **options}
        return ChatJob.from_dict((yield from self.chat(body)))

    def chat_stream(self, model: str, messages: list[dict[str, Any]], options: dict[str, Any]) -> Plan[None]:
        body = {"model": model, "messages": messages, **options, "stream": True}
        return self.events("/v1/chat/completions", body, ChatCompletionChunk.from_dict)

    def chat_job(self, job_id: str) -> Plan[ChatJob]:
        return ChatJob.from_dict((yield from self.request("GET", f"/v1/chat/completions/{job_id}")))

    # -- files -----------------------------------------------------------------------------

    def upload(
        self,
        source: Source,
        filename: str | None,
        purpose: str | None,
        method: UploadMethod,
        on_progress: Progress | None,
        wait: bool,
        poll_interval: float,
        timeout: float | None,
    ) -> Plan[File]:
        """Direct up to 4 MiB, else the signed URL (in parts above the multipart threshold, a
        failed multipart upload canceled), then waits for the checks when asked."""
        data = upload_source(source, filename)
        if use_direct(method, data.size):
            return (yield from self.create_file(data, purpose, on_progress))
        signed = yield from self.start_upload(data.filename, data.size, None, purpose)
        if signed.multipart is None:
            yield from self.put(signed.upload, data, on_progress)
            file = yield from self.complete(signed.file.id, None)
        else:
            try:
                etags = yield from self.put_parts(signed.file.id, signed.multipart, data, on_progress)
            except GeneratorExit:
                raise
            except BaseException:
                with contextlib.suppress(Exception):  # S3 drops the parts sent; the error is the answer
                    yield from self.cancel_file(signed.file.id)
                raise
            file = yield from self.complete(signed.file.id, etags)
        if not wait or file.status not in PENDING_STATUSES:
            return file
        return (yield from self.wait_file(file.id, poll_interval, timeout))

    def put_parts(
        self, file_id: str, plan: MultipartPlan, source: Source | UploadSource, on_progress: Progress | None
    ) -> Plan[dict[int, str]]:
        data = _local(source)
        etags: dict[int, str] = {}
        for part in plan.parts:
            etags[part.part_number] = yield from self._put_part(file_id, part, data, on_progress)
        return etags

    def _put_part(
        self, file_id: str, part: PartTarget, data: UploadSource, on_progress: Progress | None
    ) -> Plan[str]:
        def body() -> Iterator[bytes]:
            return data.part_chunks(part.offset, part.bytes, on_progress)

        headers = part_headers(part.bytes)
        try:
            response = yield from self.send(Call("PUT", part.url, content=body, headers=headers))
        except PermissionDeniedError:  # the URL expired: sign this part again, once
            fresh = (yield from self.part_urls(file_id, [part.part_number])).parts[0]
            response = yield from self.send(Call("PUT", fresh.url, content=body, headers=headers))
        return str(response.headers["etag"])

    def part_urls(self, file_id: str, part_numbers: list[int] | None) -> Plan[MultipartPlan]:
        body = {"part_numbers": part_numbers} if part_numbers is not None else {}
        answer = yield from self.request("POST", f"/v1/files/{file_id}/parts", json=body)
        return MultipartPlan.from_dict(answer["multipart"])

    def cancel_file(self, file_id: str) -> Plan[File]:
        return File.from_dict((yield from self.request("POST", f"/v1/files/{file_id}/cancel"))["file"])

    def wait_file(self, file_id: str, poll_interval: float, timeout: float | None) -> Plan[File]:
        def pending(file: File) -> str | None:
            return f"{file_id} still {file.status}" if file.status in PENDING_STATUSES else None

        return self._poll(lambda: self.get_file(file_id), pending, poll_interval, timeout)

    def create_file(
        self, source: Source | UploadSource, purpose: str | None, on_progress: Progress | None
    ) -> Plan[File]:
        data = _local(source)
        call = Call(
            "POST",
            self._client.base_url + "/v1/files",
            params={"purpose": purpose} if purpose else None,
            content=lambda: data.chunks(on_progress),
            headers=self._client.headers(direct_headers(data)),
        )
        return File.from_dict((yield from self.send(call)).json()["file"])

    def start_upload(
        self, filename: str, size: int, content_type: str | None, purpose: str | None
    ) -> Plan[SignedUpload]:
        body = start_body(filename, size, content_type, purpose)
        return SignedUpload.from_dict((yield from self.request("POST", "/v1/files/uploads", json=body)))

    def put(
        self, upload: UploadTarget, source: Source | UploadSource, on_progress: Progress | None
    ) -> Plan[None]:
        """PUT the bytes to the signed URL with exactly its headers (never the API key)."""
        data = _local(source)
        headers = {**upload.headers, "Content-Length": str(data.size)}
        yield from self.send(
            Call(upload.method, upload.url, content=lambda: data.chunks(on_progress), headers=headers)
        )

    def complete(self, file_id: str, etags: dict[int, str] | None) -> Plan[File]:
        body = complete_body(etags) if etags is not None else None
        return File.from_dict(
            (yield from self.request("POST", f"/v1/files/{file_id}/complete", json=body))["file"]
        )

    def get_file(self, file_id: str) -> Plan[File]:
        return File.from_dict((yield from self.request("GET", f"/v1/files/{file_id}"))["file"])
