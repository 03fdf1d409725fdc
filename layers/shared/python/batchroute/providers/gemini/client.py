"""The Gemini API over HTTP: `generateContent` (whole, and streamed as server-sent events
with `:streamGenerateContent?alt=sse`), `embedContent` / `batchEmbedContents`, and batch mode
(`batchGenerateContent` with inlined requests, the batch's operation polled, cancelled, and
deleted once its results are read; a retried submission first looks for the batch its lost
answer made, `GET /v1beta/batches`). The bodies and results come from `transform.py`; the
HTTP, the error mapping and the SSE parsing from providers/http.py (httpx, httpx-sse), with
Google's error bodies read by `transform.status_error`.

The key goes in the `x-goog-api-key` header (never the URL, which logs would keep).
Paths: /v1beta/models/<id>:<method>, /v1beta/batches, /v1beta/batches/<id>[:cancel].
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import batchroute.providers.gemini.transform as transform
from batchroute.providers import base
from batchroute.providers.http import VendorHttp, event_json


@dataclass(eq=False)
class GeminiModels:
    """The per-item adapter (SyncProvider): one call per request."""

    slug: str
    http: VendorHttp

    def complete(self, request: base.ProviderRequest) -> base.ProviderResult:
        if request.operation == "embeddings":
            return self._embed(request)
        body = self.http.request_json(
            "POST",
            transform.model_path(request.provider_model_id, "generateContent"),
            json_body=transform.generate_body(request),
        )
        return transform.generate_result(request.custom_id, body)

    def _embed(self, request: base.ProviderRequest) -> base.ProviderResult:
        texts, single = transform.embed_inputs(request)
        if single:
            path = transform.model_path(request.provider_model_id, "embedContent")
            body = transform.embed_body(request, texts[0])
            answers = [self.http.request_json("POST", path, json_body=body)]
        else:
            path = transform.model_path(request.provider_model_id, "batchEmbedContents")
            answers = [
                self.http.request_json("POST", path, json_body=body)
                for body in transform.batch_embed_bodies(request, texts)
            ]
        return transform.embeddings_result(request.custom_id, texts, answers, single=single)

    def stream(self, request: base.ProviderRequest) -> Iterator[base.StreamEvent]:
        if request.operation == "embeddings":
            raise base.PermanentProviderError("embeddings do not stream", code="invalid_item")
        return self._events(request, transform.generate_body(request))

    def _events(self, request: base.ProviderRequest, body: dict[str, Any]) -> Iterator[base.StreamEvent]:
        acc = transform.StreamAccumulator(request.custom_id)
        with self.http.sse(
            transform.model_path(request.provider_model_id, "streamGenerateContent"),
            json_body=body,
            params={"alt": "sse"},
            read_timeout=request.first_byte_timeout_seconds,
        ) as source:
            events = source.iter_sse()
            # The first chunk is read before the stream counts as started: a prompt Gemini
            # blocks (promptFeedback.blockReason) is refused there, like any other refusal
            # before the first byte (nothing sent to the client, nothing charged).
            first = next(events, None)
            pending = None if first is None else self._delta(acc, first.data)
            yield base.StreamStart()
            if pending is not None:
                yield pending
            for event in events:
                delta = self._delta(acc, event.data)
                if delta is not None:
                    yield delta
        if not acc.finished:  # Gemini ends a stream by closing it: the last chunk says why
            raise base.TransientProviderError(
                f"{self.http.vendor} ended the stream without a finish reason", code="stream_interrupted"
            )
        yield base.StreamEnd.of(acc.result())

    def _delta(self, acc: transform.StreamAccumulator, data: str) -> base.StreamDelta | None:
        return acc.delta(acc.add(event_json(data, vendor=self.http.vendor), vendor=self.http.vendor))

    def check(self) -> list[str]:
        """The model ids the key may use (a health check; raises on failure)."""
        body = self.http.request_json(
            "GET", transform.MODELS_PATH, params={"pageSize": "1000"}, read_timeout=10
        )
        names = (str(m.get("name") or "") for m in body.get("models") or [] if isinstance(m, dict))
        return [name.removeprefix("models/") for name in names if name]


# A batch the first try of a submission may have made, looked up on its retry: made at most
# this long before the newest batch listed (Google's own clock), among the batches of at most
# this many pages. Google documents no maximum pageSize for batches.list ("The standard list
# page size"); Google's AIP-158 has a larger one than served coerced down: the look-up pages on.
LOOKUP_WINDOW_SECONDS = 900
LOOKUP_PAGES = 20
LOOKUP_PAGE_SIZE = 100


@dataclass(eq=False)
class GeminiBatches:
    """The vendor batch adapter (BatchApiProvider) over Gemini batch mode: one job per lane
    run, every request inlined and keyed by its custom_id. The job id is the batch's
    resource name, `batches/<id>`."""

    slug: str
    http: VendorHttp
    min_requests = 1  # (not a field: no annotation)
    _tries: base.SubmitTries = field(default_factory=base.SubmitTries, init=False, repr=False)

    def assume_tried(self, key: str, *, since: int | None = None) -> None:
        """LooksUpLostJobs: an invocation that died may have made `key`'s batch."""
        self._tries.assume_tried(key, since=since)

    def submit(self, requests: Iterable[base.ProviderRequest], *, key: str | None = None) -> str:
        """`key` goes in the batch's displayName (`batchroute <key>`). Batch mode has no
        idempotency key, so when a submission is tried again (its answer was lost: a read
        time-out once Google had made the batch), the batch is first looked for among the
        account's by that displayName and the model, and one found pending, running or done
        is taken instead of making a second, billed one (docs/providers.md)."""
        listed = list(requests)
        models = {transform.model_name(r.provider_model_id) for r in listed}
        if len(models) != 1:  # none, or several
            raise base.PermanentProviderError(
                "a Gemini batch job runs one model, for one request or more", code="invalid_item"
            )
        model = models.pop()
        with self._tries.trying(key) as attempt:
            made = attempt.made_before(partial(self._made_by, key, model)) if key else None
            return made or self._create(listed, key)

    def job_made(self, key: str, *, since: int) -> str | None:
        """FindsKeyedJobs: the batch submission `key` made, of any model, in any state that
        may hold finished answers (all but failed: a cancelled or expired batch keeps them)."""
        return self._made_by(key, None, since, refused=transform.NOTHING_KEPT)

    def _made_by(
        self,
        key: str,
        model: str | None,
        noted: int | None,
        *,
        refused: frozenset[base.JobState] | None = None,
    ) -> str | None:
        """The name of the batch a lost try of submission `key` made for `model` (None: any),
        still of use (one failed, cancelled or expired is not: a new one is made). Every page
        is read, up to LOOKUP_PAGES: Google documents no order for the listing. Made since `noted` (when that
        try began, less CLOCK_SKEW_SECONDS), else LOOKUP_WINDOW_SECONDS before the newest."""
        listed: list[transform.ListedBatch] = []
        token = ""
        for _ in range(LOOKUP_PAGES):
            params = {"pageSize": str(LOOKUP_PAGE_SIZE), **({"pageToken": token} if token else {})}
            page = self.http.request_json("GET", transform.BATCHES_PATH, params=params)
            listed += transform.listed_batches(page, key=key, model=model, refused=refused)
            token = str(page.get("nextPageToken") or "") if isinstance(page, dict) else ""
            if not token:  # the last page
                break
        not_before = noted - base.CLOCK_SKEW_SECONDS if noted is not None else None
        return transform.made_by(listed, window_seconds=LOOKUP_WINDOW_SECONDS, not_before=not_before)

    def _create(self, requests: list[base.ProviderRequest], key: str | None) -> str:
        created = self.http.request_json(
            "POST",
            transform.model_path(requests[0].provider_model_id, "batchGenerateContent"),
            json_body=transform.batch_body(requests, key=key),
        )
        name = created.get("name") if isinstance(created, dict) else None
        if not isinstance(name, str) or transform.batch_name(name) is None:
            raise base.TransientProviderError(
                f"{self.http.vendor} created a batch without a name", code="provider_bad_response"
            )
        return name

    def poll(self, job_id: str) -> base.JobStatus:
        return transform.job_status(self._operation(job_id))

    def results(self, job_id: str) -> Iterator[base.ProviderResult]:
        operation = self._operation(job_id)
        yield from transform.job_results(operation)
        if transform.job_status(operation).terminal:  # Google would keep the answers until deleted
            self.http.forget(f"{transform.API_ROOT}/{self._name(job_id)}")

    def cancel(self, job_id: str) -> None:
        try:
            self.http.request_json("POST", f"{transform.API_ROOT}/{self._name(job_id)}:cancel")
        except base.ProviderUnavailable as exc:
            if exc.code != "provider_precondition_failed":  # a job already done: nothing to stop
                raise

    def _operation(self, job_id: str) -> dict[str, Any]:
        found = self.http.request_job("GET", f"{transform.API_ROOT}/{self._name(job_id)}", job_id=job_id)
        return dict(found) if isinstance(found, dict) else {}

    def _name(self, job_id: str) -> str:
        name = transform.batch_name(job_id)
        if name is None:
            raise base.UnknownJob(f"{job_id!r} is not a Gemini batch name")
        return name
