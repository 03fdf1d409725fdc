"""OpenAI over HTTP: the Responses API or Chat Completions (whole and streamed), Embeddings,
and the Batch API (upload a JSONL file with purpose `batch`, create, poll, download the output
and error files, delete them, cancel). Which API an item goes to is the adapter's `Route`
(transform.py: OpenAI itself sends chat items to the Responses API, the compatible hosts to
Chat Completions); the bodies come from `transform.py`; the HTTP, the error mapping and the
SSE parsing from providers/http.py (httpx, httpx-sse).

`OpenAIChat` also serves every OpenAI-compatible host (Together, Groq, Fireworks, DeepInfra,
an operator's vLLM / llama.cpp / Ollama): a base URL and `transform.HOST_ROUTE`. A host that
offers the OpenAI batch format (Together) uses `OpenAIBatch` too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import batchroute.providers.openai.transform as transform
from batchroute.providers.base import (
    JobStatus,
    PermanentProviderError,
    ProviderRequest,
    ProviderResult,
    StreamDelta,
    StreamEnd,
    StreamEvent,
    StreamStart,
    TransientProviderError,
)
from batchroute.providers.http import VendorHttp, event_json
from batchroute.providers.openai.transform import OPENAI_ROUTE, Route, TokenField


def _under_base(path: str) -> str:
    """A Batch API url (`/v1/responses`) as a path under the base URL, which ends in /v1."""
    return path.removeprefix("/v1")


class OpenAIChat:
    """The per-item adapter (SyncProvider): one call per request."""

    def __init__(self, slug: str, http: VendorHttp, *, route: Route = OPENAI_ROUTE) -> None:
        self.slug = slug
        self.http = http
        self.route = route

    @property
    def token_field(self) -> TokenField:
        return self.route.token_field

    def complete(self, request: ProviderRequest) -> ProviderResult:
        path = self.route.path(request)
        body = self.http.request_json("POST", _under_base(path), json_body=self.route.body(request))
        if request.operation == "embeddings":
            return transform.embeddings_result(
                request.custom_id, body, single=transform.is_single_embedding(request)
            )
        if path == transform.RESPONSES_PATH:
            return transform.response_result(request.custom_id, body)
        return transform.chat_result(request.custom_id, body)

    def stream(self, request: ProviderRequest) -> Iterator[StreamEvent]:
        if request.operation == "embeddings":
            raise PermanentProviderError("embeddings do not stream", code="invalid_item")
        body = self.route.body(request, stream=True)
        if self.route.path(request) == transform.RESPONSES_PATH:
            return self._response_events(request, body)
        return self._events(request, body)

    def _response_events(self, request: ProviderRequest, body: dict[str, Any]) -> Iterator[StreamEvent]:
        """A Responses API stream: text deltas until `response.completed` (or incomplete)."""
        acc = transform.ResponseStream(request.custom_id)
        with self.http.sse(
            _under_base(transform.RESPONSES_PATH),
            json_body=body,
            read_timeout=request.first_byte_timeout_seconds,
        ) as source:
            yield StreamStart()
            for event in source.iter_sse():
                text = acc.add(event_json(event.data, vendor=self.http.vendor))
                if text:
                    yield StreamDelta(text)
                if acc.result is not None:
                    yield StreamEnd(acc.result)
                    return
        raise TransientProviderError(
            f"{self.http.vendor} ended the stream before the response completed", code="stream_interrupted"
        )

    def _events(self, request: ProviderRequest, body: dict[str, Any]) -> Iterator[StreamEvent]:
        acc = transform.StreamAccumulator(request.custom_id)
        with self.http.sse(
            _under_base(transform.CHAT_PATH), json_body=body, read_timeout=request.first_byte_timeout_seconds
        ) as source:
            yield StreamStart()
            for event in source.iter_sse():
                if event.data == "[DONE]":
                    yield StreamEnd(acc.result())
                    return
                text = acc.add(event_json(event.data, vendor=self.http.vendor))
                if text:
                    yield StreamDelta(text)
        raise TransientProviderError(
            f"{self.http.vendor} ended the stream without [DONE]", code="stream_interrupted"
        )

    def check(self) -> list[str]:
        """The model ids the endpoint lists (a health check; raises on failure)."""
        body = self.http.request_json("GET", "/models", read_timeout=10)
        return [str(m.get("id")) for m in body.get("data") or [] if isinstance(m, dict)]


class OpenAIBatch:
    """The vendor batch adapter (BatchApiProvider) over the Batch API."""

    def __init__(self, slug: str, http: VendorHttp, *, route: Route = OPENAI_ROUTE) -> None:
        self.slug = slug
        self.http = http
        self.route = route

    @property
    def token_field(self) -> TokenField:
        return self.route.token_field

    def submit(self, requests: Iterable[ProviderRequest]) -> str:
        listed = list(requests)
        if not listed:
            raise PermanentProviderError("a batch job needs at least one request", code="invalid_item")
        endpoints = {self.route.path(r) for r in listed}
        if len(endpoints) != 1:  # one endpoint per job: the lane runner groups by operation
            raise PermanentProviderError(
                f"a batch job takes one endpoint, these requests need {sorted(endpoints)}",
                code="invalid_item",
            )
        endpoint = endpoints.pop()
        lines = b"".join(
            json.dumps(self.route.batch_line(r), separators=(",", ":")).encode() + b"\n" for r in listed
        )
        uploaded = self.http.request_json(
            "POST",
            "/files",
            files={"file": ("batch.jsonl", lines, "application/jsonl")},
            data={"purpose": "batch"},
        )
        created = self.http.request_json(
            "POST",
            "/batches",
            json_body={"input_file_id": uploaded["id"], "endpoint": endpoint, "completion_window": "24h"},
        )
        return str(created["id"])

    def poll(self, job_id: str) -> JobStatus:
        return transform.job_status(self._batch(job_id))

    def results(self, job_id: str) -> Iterator[ProviderResult]:
        batch = self._batch(job_id)
        for key in ("output_file_id", "error_file_id"):
            file_id = batch.get(key)
            if not file_id:
                continue
            with self.http.stream_lines("GET", f"/files/{file_id}/content") as lines:
                for line in lines:
                    result = _line_result(line)
                    if result is not None:
                        yield result
            self._forget(str(file_id))
        if batch.get("input_file_id"):
            self._forget(str(batch["input_file_id"]))

    def cancel(self, job_id: str) -> None:
        self.http.request_json("POST", f"/batches/{job_id}/cancel")

    def _batch(self, job_id: str) -> dict[str, Any]:
        return dict(self.http.request_job("GET", f"/batches/{job_id}", job_id=job_id))

    def _forget(self, file_id: str) -> None:
        """Delete a downloaded file: the vendor would otherwise keep it until deleted."""
        self.http.forget(f"/files/{file_id}")


def _line_result(line: str) -> ProviderResult | None:
    """A results-file line; a line that is not JSON is skipped (its request is then missing
    from the results, and the lane runner resubmits it)."""
    if not line.strip():
        return None
    try:
        parsed = json.loads(line)
    except ValueError:
        return None
    return transform.batch_line_result(parsed) if isinstance(parsed, dict) else None
