"""Anthropic over HTTP: the Messages API (whole and streamed), the models list (a health
check), and the Message Batches API (create, retrieve, results, cancel). The bodies come from
`transform.py`; the HTTP, the error mapping (429 and 529 with Retry-After) and the SSE parsing
from providers/http.py (httpx, httpx-sse), not the `anthropic` SDK, whose import would add
to the API function's cold start.

Calls (paths under the base URL, https://api.anthropic.com by default):

    AnthropicMessages.complete   POST /v1/messages (again with the paused content, while
                                 the API pauses the turn: at most MAX_CONTINUATIONS more)
    AnthropicMessages.stream     POST /v1/messages, stream: true (server-sent events)
    AnthropicMessages.check      GET  /v1/models
    AnthropicBatches.submit      POST /v1/messages/batches {requests: [{custom_id, params}]}
    AnthropicBatches.poll        GET  /v1/messages/batches/{id} (404: UnknownJob)
    AnthropicBatches.results     GET  the batch's results_url (JSON Lines, read as it arrives)
    AnthropicBatches.cancel      POST /v1/messages/batches/{id}/cancel

Every call carries `x-api-key`, `anthropic-version` and `anthropic-beta` (`__init__.py` sets
them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

import httpx

import batchroute.providers.anthropic.transform as transform  # not via the package: no cycle
from batchroute.domain.catalog.tokens import DEFAULT_OUTPUT_TOKENS
from batchroute.providers import base
from batchroute.providers.http import VendorHttp

MODELS_PAGE = "1000"  # the most GET /v1/models lists at once


class _Adapter:
    """What both adapters hold: the slug, the vendor HTTP, and the output limit a request
    without one is sent with (and one asking for more is capped at): its lane's
    `max_output_tokens` (by catalog model id), else the default an item gets."""

    def __init__(
        self, slug: str, http: VendorHttp, *, output_limits: Mapping[str, int] | None = None
    ) -> None:
        self.slug = slug
        self.http = http
        self.output_limits = dict(output_limits or {})

    def default_max_tokens(self, request: base.ProviderRequest) -> int:
        return self.output_limits.get(request.model) or DEFAULT_OUTPUT_TOKENS

    def within_limit(self, request: base.ProviderRequest) -> base.ProviderRequest:
        """`request`, asking for at most its lane's output limit (the model's, which the API
        refuses a `max_tokens` over with a 400), as the lane runner already caps it."""
        limit = self.output_limits.get(request.model)
        if limit and request.max_output_tokens > limit:
            return replace(request, max_output_tokens=limit)
        return request


class AnthropicMessages(_Adapter):
    """The per-item adapter (SyncProvider): one Messages call per request."""

    def body(self, request: base.ProviderRequest, *, stream: bool = False) -> dict[str, Any]:
        """The Messages body this adapter sends for `request` (refused ones raise)."""
        return transform.messages_body(
            self.within_limit(request), default_max_tokens=self.default_max_tokens(request), stream=stream
        )

    def complete(self, request: base.ProviderRequest) -> base.ProviderResult:
        """One answer; a turn the API paused (`pause_turn`: a server tool loop ran long) is
        continued by sending its content back, up to MAX_CONTINUATIONS times, the rounds
        then making one answer (their content in order, their usage added up). A turn
        still paused after them is a transient failure (`turn_paused`)."""
        body = self.body(request)
        rounds = [self._message(body)]
        while (
            rounds[-1].get("stop_reason") == transform.PAUSED and len(rounds) <= transform.MAX_CONTINUATIONS
        ):
            rounds.append(self._message(transform.continued_body(body, rounds)))
        return transform.message_result(request.custom_id, transform.joined_message(rounds))

    def _message(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.http.request_json("POST", transform.MESSAGES_PATH, json_body=body))

    def stream(self, request: base.ProviderRequest) -> Iterator[base.StreamEvent]:
        # Built now, so a refused request raises from this call, before any byte is awaited.
        body = self.body(request, stream=True)
        return self._events(request, body)

    def _events(self, request: base.ProviderRequest, body: dict[str, Any]) -> Iterator[base.StreamEvent]:
        acc = transform.StreamAccumulator(request.custom_id)
        with self.http.sse(
            transform.MESSAGES_PATH, json_body=body, read_timeout=request.first_byte_timeout_seconds
        ) as source:
            yield base.StreamStart()
            for event in source.iter_sse():
                if not event.data:
                    continue
                delta = acc.delta(acc.add(transform.event_data(event.data)))
                if delta is not None:
                    yield delta
                if acc.done:  # a paused turn (not continued) is a failed result: raised
                    yield base.StreamEnd.of(acc.result())
                    return
        raise base.TransientProviderError(
            f"{self.http.vendor} ended the stream without message_stop", code="stream_interrupted"
        )

    def check(self) -> list[str]:
        """The model ids the key may use (a health check; raises on failure)."""
        body = self.http.request_json("GET", "/v1/models", params={"limit": MODELS_PAGE}, read_timeout=10)
        return [str(m.get("id")) for m in body.get("data") or [] if isinstance(m, dict)]


class AnthropicBatches(_Adapter):
    """The vendor batch adapter (BatchApiProvider) over the Message Batches API."""

    min_requests = 1

    def batch_body(self, requests: Iterable[base.ProviderRequest]) -> dict[str, Any]:
        """The Message Batches body this adapter sends for `requests` (refused ones raise)."""
        lines = [
            transform.batch_request(self.within_limit(r), default_max_tokens=self.default_max_tokens(r))
            for r in requests
        ]
        if not lines:
            raise base.PermanentProviderError("a batch job needs at least one request", code="invalid_item")
        return {"requests": lines}

    def submit(self, requests: Iterable[base.ProviderRequest], *, key: str | None = None) -> str:
        # `key` is not sent: the Message Batches API has no idempotency key (nor a field a
        # later list could find the batch by), so a create whose answer was lost and is
        # tried again makes a second batch (docs/providers.md, Batch-API lanes).
        del key
        created = self.http.request_json("POST", transform.BATCHES_PATH, json_body=self.batch_body(requests))
        return str(created["id"])

    def poll(self, job_id: str) -> base.JobStatus:
        return transform.job_status(self._batch(job_id))

    def results(self, job_id: str) -> Iterator[base.ProviderResult]:
        batch = self._batch(job_id)
        if batch.get("processing_status") != "ended":
            raise base.TransientProviderError(
                f"{self.http.vendor} batch {job_id} has not ended: no results yet", code="batch_not_ended"
            )
        with self.http.stream_lines("GET", self._results_url(job_id, batch.get("results_url"))) as lines:
            for line in lines:
                # A line that is not JSON is skipped: its request is then missing from the
                # results, and the lane runner resubmits it.
                parsed = transform.json_object(line)
                result = transform.batch_line_result(parsed) if parsed is not None else None
                if result is not None:
                    yield result

    def cancel(self, job_id: str) -> None:
        self.http.request_json("POST", f"{transform.BATCHES_PATH}/{job_id}/cancel")

    def _batch(self, job_id: str) -> dict[str, Any]:
        try:
            return dict(self.http.request_json("GET", f"{transform.BATCHES_PATH}/{job_id}"))
        except base.PermanentProviderError as exc:
            if exc.code == "not_found":
                raise base.UnknownJob(f"{self.http.vendor} does not know message batch {job_id}") from exc
            raise

    def _results_url(self, job_id: str, given: object) -> str:
        """The batch's `results_url` when it is on the API's own host (the key goes with the
        request, so never elsewhere), else the documented path."""
        fallback = f"{transform.BATCHES_PATH}/{job_id}/results"
        if not isinstance(given, str) or not given:
            return fallback
        url, api = httpx.URL(given), httpx.URL(self.http.base_url)
        same_origin = (url.scheme, url.host, url.port) == (api.scheme, api.host, api.port)
        return given if same_origin else fallback
