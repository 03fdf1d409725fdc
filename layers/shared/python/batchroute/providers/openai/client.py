"""OpenAI over HTTP: the Responses API or Chat Completions (whole and streamed), Embeddings,
and the Batch API (upload a JSONL file with purpose `batch`, create, poll, download the output
and error files, delete them, cancel). Which API an item goes to is the adapter's `Route`
(transform.py: OpenAI itself sends items with hosted tools to the Responses API and the rest
to Chat Completions, the compatible hosts everything to Chat Completions); the bodies come
from `transform.py`; the HTTP, the error mapping and the SSE parsing from providers/http.py
(httpx, httpx-sse).

`OpenAIChat` also serves every OpenAI-compatible host (Together, Groq, Fireworks, DeepInfra,
an operator's vLLM / llama.cpp / Ollama): a base URL and `transform.HOST_ROUTE`. A host that
offers the OpenAI batch format (Together) uses `OpenAIBatch` too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import suppress
from dataclasses import KW_ONLY, dataclass, field
from functools import partial
from typing import Any

import batchroute.providers.openai.transform as transform
from batchroute.providers import base
from batchroute.providers.http import VendorHttp, event_json
from batchroute.providers.openai.transform import OPENAI_ROUTE, Route, TokenField


def _under_base(path: str) -> str:
    """A Batch API url (`/v1/responses`) as a path under the base URL, which ends in /v1."""
    return path.removeprefix("/v1")


@dataclass(eq=False)
class _RoutedAdapter:
    """An adapter over one OpenAI-compatible host: its HTTP client and its `Route` (which API
    an item goes to, and the name of its output-token limit)."""

    slug: str
    http: VendorHttp
    _: KW_ONLY
    route: Route = OPENAI_ROUTE

    @property
    def token_field(self) -> TokenField:
        return self.route.token_field


class OpenAIChat(_RoutedAdapter):
    """The per-item adapter (SyncProvider): one call per request."""

    def complete(self, request: base.ProviderRequest) -> base.ProviderResult:
        path = self.route.path(request)
        body = self.http.request_json("POST", _under_base(path), json_body=self.route.body(request))
        if request.operation == "embeddings":
            return transform.embeddings_result(
                request.custom_id, body, single=transform.is_single_embedding(request)
            )
        if path == transform.RESPONSES_PATH:
            return transform.response_result(request.custom_id, body)
        return transform.chat_result(request.custom_id, body)

    def stream(self, request: base.ProviderRequest) -> Iterator[base.StreamEvent]:
        if request.operation == "embeddings":
            raise base.PermanentProviderError("embeddings do not stream", code="invalid_item")
        body = self.route.body(request, stream=True)
        if self.route.path(request) == transform.RESPONSES_PATH:
            return self._response_events(request, body)
        return self._events(request, body)

    def _response_events(
        self, request: base.ProviderRequest, body: dict[str, Any]
    ) -> Iterator[base.StreamEvent]:
        """A Responses API stream: text deltas until `response.completed` (or incomplete)."""
        acc = transform.ResponseStream(request.custom_id)
        with self.http.sse(
            _under_base(transform.RESPONSES_PATH),
            json_body=body,
            read_timeout=request.first_byte_timeout_seconds,
        ) as source:
            yield base.StreamStart()
            for event in source.iter_sse():
                delta = acc.delta(acc.add(event_json(event.data, vendor=self.http.vendor)))
                if delta is not None:
                    yield delta
                if acc.result is not None:
                    yield base.StreamEnd.of(acc.result)
                    return
        raise base.TransientProviderError(
            f"{self.http.vendor} ended the stream before the response completed", code="stream_interrupted"
        )

    def _events(self, request: base.ProviderRequest, body: dict[str, Any]) -> Iterator[base.StreamEvent]:
        acc = transform.StreamAccumulator(request.custom_id)
        with self.http.sse(
            _under_base(transform.CHAT_PATH), json_body=body, read_timeout=request.first_byte_timeout_seconds
        ) as source:
            yield base.StreamStart()
            for event in source.iter_sse():
                if event.data == "[DONE]":
                    yield base.StreamEnd.of(acc.result())
                    return
                delta = acc.delta(acc.add(event_json(event.data, vendor=self.http.vendor)))
                if delta is not None:
                    yield delta
        raise base.TransientProviderError(
            f"{self.http.vendor} ended the stream without [DONE]", code="stream_interrupted"
        )

    def check(self) -> list[str]:
        """The model ids the endpoint lists (a health check; raises on failure)."""
        body = self.http.request_json("GET", "/models", read_timeout=10)
        return [str(m.get("id")) for m in body.get("data") or [] if isinstance(m, dict)]


# A batch the first try of a submission may have made, looked up on its retry: made at most
# this long before the newest batch the account lists (the vendor's own clock), among at most
# this many of the newest.
LOOKUP_WINDOW_SECONDS = 900
LOOKUP_PAGES = 20  # of 100 batches, the most a list page holds


@dataclass(eq=False)
class OpenAIBatch(_RoutedAdapter):
    """The vendor batch adapter (BatchApiProvider) over the Batch API.

    A Batch API job takes one endpoint, and a chunk of OpenAI's may hold items for two (those
    with hosted tools go to the Responses API, the rest to Chat Completions: transform.py).
    `submit` makes one vendor job per endpoint and answers their ids joined with `+`
    (`batch_a+batch_b`; one endpoint, one plain id, so a stored job id stays valid); `poll`,
    `results` and `cancel` take either (`combined_status` says how the parts' statuses add up).
    """

    min_requests = 1
    _tries: base.SubmitTries = field(default_factory=base.SubmitTries, init=False, repr=False)

    def assume_tried(self, key: str, *, since: int | None = None) -> None:
        """LooksUpLostJobs: an invocation that died may have made `key`'s batch."""
        self._tries.assume_tried(key, since=since)

    def submit(self, requests: Iterable[base.ProviderRequest], *, key: str | None = None) -> str:
        """`key` goes in each part's metadata (`batchroute_key`) at OpenAI itself (a compatible
        host's batch may take no metadata). The Batch API has no idempotency key, so when a
        submission is tried again (its answer was lost: a read time-out once OpenAI had made
        the batch), each part is first looked for among the account's newest batches by its
        key and endpoint, and one found still running (or done) is taken instead of making a
        second, billed batch (docs/providers.md)."""
        by_endpoint: dict[str, list[base.ProviderRequest]] = {}
        for request in requests:
            by_endpoint.setdefault(self.route.path(request), []).append(request)
        if not by_endpoint:
            raise base.PermanentProviderError("a batch job needs at least one request", code="invalid_item")
        keyed = key if key and self.route is OPENAI_ROUTE else None
        created: list[str] = []
        with self._tries.trying(keyed) as attempt:
            try:
                for endpoint, listed in by_endpoint.items():
                    made = attempt.made_before(partial(self._made_by, keyed, endpoint))
                    created.append(made or self._submit_part(endpoint, listed, keyed))
            except BaseException:  # a transient error too: tried again, the look-up finds what was made
                self._cancel_parts(created)
                raise
        return JOB_ID_SEPARATOR.join(created)

    def _cancel_parts(self, created: list[str]) -> None:
        for job_id in created:  # no half-submitted chunk left running (and billed)
            with suppress(base.ProviderError):
                self.cancel(job_id)

    def job_made(self, key: str, *, since: int) -> str | None:
        """FindsKeyedJobs: the batches submission `key` made (one an endpoint, joined as
        `submit` joins them), in any state that may hold finished answers (all but `failed`:
        an expired or cancelled batch keeps what it finished); None at a compatible host (no
        key kept)."""
        if self.route is not OPENAI_ROUTE:
            return None
        parts: dict[str, str] = {}
        for batch in self._keyed_batches(key, since, refused=_NOTHING_KEPT):
            parts.setdefault(str(batch.get("endpoint")), str(batch["id"]))
        return JOB_ID_SEPARATOR.join(parts.values()) or None

    def _made_by(self, key: str | None, endpoint: str, noted: int | None) -> str | None:
        """The id of the batch a lost try of submission `key` made for `endpoint`."""
        found = (
            b for b in self._keyed_batches(key, noted, refused=_OF_NO_USE) if b.get("endpoint") == endpoint
        )
        return next((str(batch["id"]) for batch in found), None)

    def _keyed_batches(
        self, key: str | None, noted: int | None, *, refused: frozenset[str]
    ) -> Iterator[dict[str, Any]]:
        """The batches submission `key` made, but those in a `refused` state (a submit's
        look-up: `_OF_NO_USE`, a cancelled or failed one is of no use, a new one is made),
        newest first. Batches are read back to `noted` (when
        that try began, less CLOCK_SKEW_SECONDS), else LOOKUP_WINDOW_SECONDS before the newest
        listed."""
        after: str | None = None
        since = noted - base.CLOCK_SKEW_SECONDS if noted is not None else None
        for _ in range(LOOKUP_PAGES):
            page = self.http.request_json(
                "GET", "/batches", params={"limit": "100", **({"after": after} if after else {})}
            )
            listed = [b for b in page.get("data") or [] if isinstance(b, dict)]
            for batch in listed:
                created_at = int(batch.get("created_at") or 0)
                since = created_at - LOOKUP_WINDOW_SECONDS if since is None else since
                if created_at < since:
                    return
                metadata = batch.get("metadata") or {}
                if metadata.get("batchroute_key") == key and batch.get("status") not in refused:
                    yield batch
            if not listed or not page.get("has_more"):
                return
            after = str(listed[-1]["id"])

    def _submit_part(self, endpoint: str, requests: list[base.ProviderRequest], key: str | None) -> str:
        lines = b"".join(
            json.dumps(self.route.batch_line(r), separators=(",", ":")).encode() + b"\n" for r in requests
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
            json_body={
                "input_file_id": uploaded["id"],
                "endpoint": endpoint,
                "completion_window": "24h",
                **({"metadata": {"batchroute_key": key}} if key else {}),
            },
        )
        return str(created["id"])

    def poll(self, job_id: str) -> base.JobStatus:
        parts = {part: transform.job_status(self._batch(part)) for part in vendor_job_ids(job_id)}
        status = combined_status(list(parts.values()))
        if status.state in ABANDONED:  # the runner reads none of it: stop the parts still running
            for part, state in parts.items():
                if not state.terminal:
                    with suppress(base.ProviderError):
                        self.http.request_job("POST", f"/batches/{part}/cancel", job_id=part)
        return status

    def results(self, job_id: str) -> Iterator[base.ProviderResult]:
        for part in vendor_job_ids(job_id):
            yield from self._part_results(part)

    def _part_results(self, job_id: str) -> Iterator[base.ProviderResult]:
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
        """Cancel every part; a part that fails to cancel (or that OpenAI does not know:
        UnknownJob) does not keep the others running, and its error is raised after."""
        failure: base.ProviderError | None = None
        for part in vendor_job_ids(job_id):
            try:
                self.http.request_job("POST", f"/batches/{part}/cancel", job_id=part)
            except base.ProviderError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def _batch(self, job_id: str) -> dict[str, Any]:
        return dict(self.http.request_job("GET", f"/batches/{job_id}", job_id=job_id))

    def _forget(self, file_id: str) -> None:
        """Delete a downloaded file: the vendor would otherwise keep it until deleted."""
        self.http.forget(f"/files/{file_id}")


# Joins the vendor batch ids of one chunk's jobs (OpenAI's ids are `batch_` and letters/digits).
JOB_ID_SEPARATOR = "+"
# A composite job is done badly in its worst part's way, worst first (`combined_status`).
_WORST_FIRST: tuple[base.JobState, ...] = ("failed", "cancelled", "expired")
# A batch in one of these states is not taken for a retried submission's (`_made_by`).
_OF_NO_USE = frozenset({"failed", "cancelling", "cancelled", "expired"})
_NOTHING_KEPT = frozenset({"failed"})  # a batch that failed validation ran nothing
# A job in one of these states is failed over whole, its results unread (the lane runner).
ABANDONED: frozenset[base.JobState] = frozenset({"failed", "cancelled"})


def vendor_job_ids(job_id: str) -> list[str]:
    """The vendor batch ids a (composite) job id joins."""
    parts = job_id.split(JOB_ID_SEPARATOR)
    if not all(parts):
        raise base.UnknownJob(f"no such batch job {job_id!r}")
    return parts


def combined_status(parts: list[base.JobStatus]) -> base.JobStatus:
    """One job's status from its parts': counts and errors summed. A part that failed or was
    cancelled fails the job at once (`failed` before `cancelled`), whatever the others are
    doing; otherwise validating while every part is, in progress until every part is
    terminal, then completed when all completed, else expired.

    Why (services/workflow/runner.py, poll_lane_job): the lane runner fails a failed or
    cancelled job over to the lane's next provider without reading its results, so waiting
    for the other parts (up to OpenAI's 24-hour window) would only delay the failover, and
    `poll` cancels them instead; the items of a part that completed run again on the next
    lane (a second charge, never a lost item), and the failed part's errors reach the
    receipt. An expired job's results are read and its missing items resubmitted, so
    `expired` is said only when no part failed or was cancelled, once every part is done,
    and every completed part's results are kept."""
    if len(parts) == 1:
        return parts[0]
    state: base.JobState
    if any(p.state in ABANDONED for p in parts):
        state = "failed" if any(p.state == "failed" for p in parts) else "cancelled"
    elif not all(p.terminal for p in parts):
        state = "validating" if all(p.state == "validating" for p in parts) else "in_progress"
    else:
        state = next((s for s in _WORST_FIRST if any(p.state == s for p in parts)), "completed")
    return base.JobStatus(
        state=state,
        total=sum(p.total for p in parts),
        completed_count=sum(p.completed_count for p in parts),
        failed_count=sum(p.failed_count for p in parts),
        errors=tuple(e for p in parts for e in p.errors),
    )


def _line_result(line: str) -> base.ProviderResult | None:
    """A results-file line; a line that is not JSON is skipped (its request is then missing
    from the results, and the lane runner resubmits it)."""
    if not line.strip():
        return None
    try:
        parsed = json.loads(line)
    except ValueError:
        return None
    return transform.batch_line_result(parsed) if isinstance(parsed, dict) else None
