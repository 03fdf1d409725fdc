"""Gemini batch mode has no idempotency key: a submission whose create answer was lost (a read
time-out once Google had made the batch) is tried again with the same key, and the adapter
first looks for the batch that key made (its displayName `batchroute <key>`, the model) among
the account's, over the emulator's `GET /v1beta/batches` (docs/providers.md, "One key per
job"). Google documents no order for the listing, so every page is read (up to a cap) and the
window is measured on the whole of it. The listing itself parses with the official SDK."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from google.genai import batches as sdk_batches
from google.genai import errors as sdk_errors
from google.genai import types

from batchroute.providers.base import ProviderRequest, TransientProviderError
from batchroute.providers.gemini import transform
from batchroute.providers.gemini.client import GeminiBatches
from batchroute.providers.http import VendorHttp
from tests.integration.test_emulator_gemini import MODEL, Stack, item
from tests.integration.test_emulator_gemini import served as served  # the module's server
from tests.integration.test_emulator_gemini import stack as stack  # ... as new for each test

OTHER_MODEL = "gemini-2.5-flash"
CREATE = ":batchGenerateContent"
LIST = ("GET", "/v1beta/batches")
UNAVAILABLE = {"code": 503, "message": "The service is currently unavailable.", "status": "UNAVAILABLE"}


class LosesAnswers(httpx.BaseTransport):
    """Carries every call to the emulator, but the next `lose` batch creates go wrong: their
    answers never arrive (Google made the batch, the caller sees a read time-out), or, with
    `unsent`, Google's front end turns them away (503 UNAVAILABLE: no batch made)."""

    def __init__(self, lose: int = 0, *, unsent: bool = False) -> None:
        self.inner = httpx.HTTPTransport()
        self.lose = lose
        self.unsent = unsent
        self.calls: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/google")
        self.calls.append((request.method, path))
        if request.method == "POST" and path.endswith(CREATE) and self.lose:
            self.lose -= 1
            if self.unsent:
                return httpx.Response(503, json={"error": UNAVAILABLE}, request=request)
            self.inner.handle_request(request).read()
            raise httpx.ReadTimeout("the answer never came", request=request)
        return self.inner.handle_request(request)

    def creates(self) -> int:
        return sum(1 for method, path in self.calls if method == "POST" and path.endswith(CREATE))


def adapter(stack: Stack, transport: httpx.BaseTransport) -> GeminiBatches:
    http = VendorHttp(
        stack.base_url,
        vendor="google",
        headers={"x-goog-api-key": "test-key"},
        transport=transport,
        status_errors=transform.status_error,
    )
    return GeminiBatches("google", http)


def other_model(custom_id: str) -> ProviderRequest:
    body = {"input": custom_id}
    return ProviderRequest(custom_id, f"item-{custom_id}", "responses", "gemini-2.5", OTHER_MODEL, body, 200)


def batches_of(stack: Stack) -> set[str]:
    return set(stack.emulator._jobs)


def test_a_retried_submission_takes_the_batch_its_lost_answer_made(stack: Stack) -> None:
    maker = adapter(stack, httpx.HTTPTransport())
    others = {maker.submit([item({"input": f"n{n}"})], key=f"other-{n}") for n in range(150)}
    transport = LosesAnswers(lose=1)
    batch = adapter(stack, transport)
    chunk = [item({"input": "First."}, custom_id="seq-0"), item({"input": "Second."}, custom_id="seq-1")]
    # Given: Google made the batch, but its answer was lost (and the first try listed nothing)
    with pytest.raises(TransientProviderError):
        batch.submit(chunk, key="k1")
    assert LIST not in transport.calls
    (lost,) = batches_of(stack) - others
    # When the lane runner tries the submission again with the same key
    job = batch.submit(chunk, key="k1")
    # Then it gets that batch, wherever the listing put it: none made a second time, none
    # billed twice; every page was read (151 batches, 100 a page), the listing having no order
    assert job == lost
    assert batches_of(stack) == others | {job}
    assert transport.creates() == 1
    assert transport.calls.count(LIST) == 2
    # And the first try of another submission makes its batch without looking
    other = batch.submit([item({"input": "Third."})], key="k2")
    assert transport.calls.count(LIST) == 2
    assert batches_of(stack) == others | {job, other}


def test_a_cancelled_batch_or_one_of_another_model_is_not_taken(stack: Stack) -> None:
    maker = adapter(stack, httpx.HTTPTransport())
    chunk = [item({"input": "First."})]
    # Given: batches of key k1 that a retry of k1 for MODEL must not take: one cancelled, one
    # (still running) of another model
    cancelled = maker.submit(chunk, key="k1")
    maker.cancel(cancelled)
    elsewhere = maker.submit([other_model("seq-0")], key="k1")
    stack.clock[0] += 1
    # And a try of k1 for MODEL that Google turned away
    transport = LosesAnswers(lose=1, unsent=True)
    batch = adapter(stack, transport)
    with pytest.raises(TransientProviderError):
        batch.submit(chunk, key="k1")
    assert batches_of(stack) == {cancelled, elsewhere}
    # When tried again: it looks, takes neither, and makes the batch
    made = batch.submit(chunk, key="k1")
    assert transport.calls.count(LIST) == 1
    assert made not in (cancelled, elsewhere)
    assert batches_of(stack) == {cancelled, elsewhere, made}
    operation = stack.raw("GET", f"/v1beta/{made}").json()
    assert operation["metadata"]["displayName"] == "batchroute k1"
    assert operation["metadata"]["model"] == f"models/{MODEL}"


def test_a_batch_of_the_same_key_made_long_before_is_not_taken(stack: Stack) -> None:
    maker = adapter(stack, httpx.HTTPTransport())
    # Given: a batch of key k1 made twenty minutes before 150 others
    old = maker.submit([item({"input": "old"})], key="k1")
    stack.clock[0] += 1200
    for n in range(150):
        maker.submit([item({"input": f"n{n}"})], key=f"other-{n}")
    # And a try of k1 that Google turned away
    transport = LosesAnswers(lose=1, unsent=True)
    batch = adapter(stack, transport)
    with pytest.raises(TransientProviderError):
        batch.submit([item({"input": "new"})], key="k1")
    # When tried again: the look-up reads every page, and makes a new batch rather than take
    # the old one, made more than 15 minutes before the newest listed (Google's clock)
    made = batch.submit([item({"input": "new"})], key="k1")
    assert made != old and len(batches_of(stack)) == 152
    assert transport.calls.count(LIST) == 2
    # And the official SDK pages the same listing into its BatchJobs, each with its displayName
    listed = list(stack.sdk().batches.list(config={"page_size": 100}))
    assert all(isinstance(b, types.BatchJob) for b in listed)
    assert [b.name for b in listed] == sorted(batches_of(stack))
    names = {b.name: b.display_name for b in listed}
    assert names[old] == names[made] == "batchroute k1"
    # And a raw page is what the SDK's types say, field for field
    raw = stack.raw("GET", "/v1beta/batches?pageSize=2").json()
    page = types.ListBatchJobsResponse.model_validate(sdk_batches._ListBatchJobsResponse_from_mldev(raw))
    assert page.batch_jobs is not None and len(page.batch_jobs) == 2
    assert page.next_page_token


def test_the_listing_pages_as_google_pages_it(stack: Stack) -> None:
    maker = adapter(stack, httpx.HTTPTransport())
    made = {maker.submit([item({"input": f"n{n}"})], key=f"k{n}") for n in range(12)}

    def page(query: str = "") -> dict[str, Any]:
        answer = stack.raw("GET", f"/v1beta/batches{query}")
        assert answer.status_code == 200
        found: dict[str, Any] = answer.json()
        return found

    # None or 0 is the default page (10); the token leads on to the rest, the last page has none
    first = page()
    assert len(first["operations"]) == 10
    assert page("?pageSize=0")["operations"] == first["operations"]
    rest = page(f"?pageToken={first['nextPageToken']}")
    assert "nextPageToken" not in rest
    listed = [op["name"] for op in first["operations"] + rest["operations"]]
    assert listed == sorted(made)
    # A page larger than the maximum is coerced down to it, not refused
    assert len(page("?pageSize=1000")["operations"]) == 12
    # Each operation is the one `GET /v1beta/batches/<id>` answers
    assert first["operations"][0] == stack.raw("GET", f"/v1beta/{listed[0]}").json()


@pytest.mark.parametrize("size", ["-1", "ten", "2147483648"])
def test_an_invalid_page_size_is_refused_as_google_refuses_it(stack: Stack, size: str) -> None:
    answer = stack.raw("GET", f"/v1beta/batches?pageSize={size}")
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    (detail,) = error["details"]
    assert detail["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert [v["field"] for v in detail["fieldViolations"]] == ["page_size"]
    if size == "-1":  # the SDK meets it too
        with pytest.raises(sdk_errors.ClientError) as refused:
            list(stack.sdk().batches.list(config={"page_size": -1}))
        assert (refused.value.code, refused.value.status) == (400, "INVALID_ARGUMENT")


def test_a_page_token_it_did_not_give_is_refused(stack: Stack) -> None:
    answer = stack.raw("GET", "/v1beta/batches?pageToken=not-ours")
    assert answer.status_code == 400
    assert answer.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_a_new_process_told_the_key_was_tried_takes_the_batch_a_dead_one_made(stack: Stack) -> None:
    # Given: an invocation noted its submit, made the batch and died before storing it; the
    # lane message came back 40 minutes later, and other lanes made batches meanwhile
    noted = int(stack.clock[0])
    chunk = [item({"input": "First."}, custom_id="seq-0")]
    made = adapter(stack, httpx.HTTPTransport()).submit(chunk, key="k1")
    stack.clock[0] += 2400
    others = adapter(stack, httpx.HTTPTransport())
    for n in range(3):
        others.submit([item({"input": f"n{n}"})], key=f"other-{n}")
    # When the next invocation's adapter is told the key was tried then (the lane record's note)
    transport = LosesAnswers(lose=0)
    fresh = adapter(stack, transport)
    fresh.assume_tried("k1", since=noted)
    # Then its first try looks back to the note, and takes that batch: no second one made
    assert fresh.submit(chunk, key="k1") == made
    assert transport.creates() == 0 and LIST in transport.calls
    # (without the note's time, the 15 minutes before the newest batch would not reach it)
    blind = adapter(stack, LosesAnswers(lose=0))
    blind.assume_tried("k1")
    assert blind.submit(chunk, key="k1") != made


def test_a_canceled_batch_finds_the_batch_a_dead_invocation_made_without_making_one(stack: Stack) -> None:
    # Given: an invocation noted its submit, made the batch (of a model the lane record does
    # not say) and died before storing it; other lanes made batches meanwhile
    noted = int(stack.clock[0])
    made = adapter(stack, httpx.HTTPTransport()).submit([other_model("seq-0")], key="k1")
    stack.clock[0] += 2400
    adapter(stack, httpx.HTTPTransport()).submit([item({"input": "n0"})], key="other")
    # When the batch is canceled and the lane looks the noted key up (FindsKeyedJobs)
    transport = LosesAnswers(lose=0)
    # Then it names that batch, and makes none
    assert adapter(stack, transport).job_made("k1", since=noted) == made
    assert adapter(stack, transport).job_made("never", since=noted) is None
    assert transport.creates() == 0 and len(batches_of(stack)) == 2
    # And one cancelled while it ran is still named: it keeps what it finished
    running = adapter(stack, httpx.HTTPTransport()).submit([other_model("seq-5")], key="k2")
    adapter(stack, transport).cancel(running)
    assert adapter(stack, transport).poll(running).state == "cancelled"
    assert adapter(stack, transport).job_made("k2", since=int(stack.clock[0])) == running
