"""OpenAI's Batch API has no idempotency key: a submission whose create answer was lost (a read
time-out once OpenAI had made the batch) is tried again with the same key, and the adapter
first looks for the batch that key made (`metadata.batchroute_key`, the endpoint) among the
account's newest, over the emulator's `GET /v1/batches` (docs/providers.md, "One key per job").
The listing itself parses as the official SDK's page of `Batch`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types import Batch

from batchroute.providers.base import ProviderRequest, TransientProviderError
from batchroute.providers.http import VendorHttp
from batchroute.providers.openai.client import OpenAIBatch
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.openai import OpenAIEmulator
from batchroute_tools.emulators.server import EmulatorServer

MODEL = "gpt-4o-mini-2024-07-18"
WEB_SEARCH = {"type": "web_search"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def vendor() -> Iterator[tuple[str, OpenAIEmulator, Clock]]:
    clock = Clock()
    emulator = OpenAIEmulator(
        Behaviour(EmulatorConfig(batch_seconds=60.0, ttft_seconds=0.0)),
        provider="openai",
        prefix="/openai",
        models=(MODEL,),
        clock=clock,
    )
    server = EmulatorServer([emulator.vendor]).start()
    yield server.base_url + "/openai/v1", emulator, clock
    server.stop()


class LosesAnswers(httpx.BaseTransport):
    """Carries every call to the emulator, but the answers of the next `lose` POSTs to `path`
    never arrive: the vendor did the work, the caller sees a read time-out."""

    def __init__(self, lose: int, path: str = "/batches") -> None:
        self.inner = httpx.HTTPTransport()
        self.lose = lose
        self.path = path
        self.calls: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/openai/v1")
        self.calls.append((request.method, path))
        answer = self.inner.handle_request(request)
        if request.method == "POST" and path == self.path and self.lose:
            self.lose -= 1
            answer.read()
            raise httpx.ReadTimeout("the answer never came", request=request)
        return answer


def adapter(base_url: str, transport: httpx.BaseTransport) -> OpenAIBatch:
    return OpenAIBatch("openai", VendorHttp(base_url, vendor="openai", transport=transport))


def request(custom_id: str, **input_: Any) -> ProviderRequest:
    body = {"messages": [{"role": "user", "content": custom_id}], **input_}
    return ProviderRequest(custom_id, "item", "responses", "gpt-4o-mini", MODEL, body, 32)  # type: ignore[arg-type]


def batches_of(emulator: OpenAIEmulator) -> list[str]:
    return list(emulator._jobs)


def test_a_retried_submission_takes_the_batch_its_lost_answer_made(
    vendor: tuple[str, OpenAIEmulator, Clock],
) -> None:
    base_url, emulator, _ = vendor
    transport = LosesAnswers(lose=1)
    batch = adapter(base_url, transport)
    chunk = [request("seq-0"), request("seq-1")]
    # Given: OpenAI made the batch, but its answer was lost
    with pytest.raises(TransientProviderError):
        batch.submit(chunk, key="k1")
    assert len(batches_of(emulator)) == 1
    # When the lane runner tries the submission again with the same key
    job = batch.submit(chunk, key="k1")
    # Then it gets that batch: none made a second time, none billed twice
    assert batches_of(emulator) == [job]
    assert ("GET", "/batches") in transport.calls
    assert [c for c in transport.calls if c == ("POST", "/batches")] == [("POST", "/batches")]
    # And the first try of another submission makes its batch without looking
    looked = transport.calls.count(("GET", "/batches"))
    other = batch.submit([request("seq-2")], key="k2")
    assert transport.calls.count(("GET", "/batches")) == looked
    assert batches_of(emulator) == [job, other]


def test_a_composite_retry_remakes_the_part_it_cancelled_and_takes_the_lost_one(
    vendor: tuple[str, OpenAIEmulator, Clock],
) -> None:
    base_url, emulator, _ = vendor
    # Given a chunk of both APIs whose second part's answer was lost: the first part, made,
    # was cancelled on the way out (no half-submitted chunk left running)
    transport = LosesAnswers(lose=0)
    batch = adapter(base_url, transport)
    batch.submit([request("warm-up")], key="k0")
    chunk = [request("seq-0"), request("seq-1", tools=[WEB_SEARCH])]
    original = transport.handle_request

    def lose_the_second_create(call: httpx.Request) -> httpx.Response:
        creates = transport.calls.count(("POST", "/batches"))
        transport.lose = 1 if creates == 2 else 0  # the next create is the chunk's second
        return original(call)

    transport.handle_request = lose_the_second_create  # type: ignore[method-assign]
    with pytest.raises(TransientProviderError):
        batch.submit(chunk, key="k1")
    _, first, lost = batches_of(emulator)
    assert emulator._jobs[first].cancelling_at is not None
    assert emulator._jobs[lost].endpoint == "/v1/responses"
    # When it is tried again
    transport.handle_request = original  # type: ignore[method-assign]
    job = batch.submit(chunk, key="k1")
    # Then the cancelled part (same key, but of no use) is made anew, and the lost one, of the
    # other endpoint, is taken as it is
    made, taken = job.split("+")
    assert taken == lost and made not in (first, lost)
    assert len(batches_of(emulator)) == 4


def test_a_batch_of_the_same_key_made_long_before_is_not_taken(
    vendor: tuple[str, OpenAIEmulator, Clock],
) -> None:
    base_url, emulator, clock = vendor
    maker = adapter(base_url, httpx.HTTPTransport())
    # Given: a batch of key k1 made twenty minutes before 150 others
    old = maker.submit([request("old")], key="k1")
    clock.now += 1200
    for n in range(150):
        maker.submit([request(f"n{n}")], key=f"other-{n}")
    # And a try of k1 that failed before its batch was made (its file upload's answer lost)
    transport = LosesAnswers(lose=1, path="/files")
    batch = adapter(base_url, transport)
    with pytest.raises(TransientProviderError):
        batch.submit([request("new")], key="k1")
    assert len(batches_of(emulator)) == 151
    # When tried again: the look-up pages back past the 150 to the window's edge, and makes
    # a new batch rather than take the old one
    made = batch.submit([request("new")], key="k1")
    assert made != old and batches_of(emulator)[-1] == made
    assert transport.calls.count(("GET", "/batches")) == 2
    # And the official SDK pages the same listing, newest first, each batch's metadata kept
    sdk = openai.OpenAI(api_key="sk-local", base_url=base_url, max_retries=0)
    listed = list(sdk.batches.list(limit=100))
    assert all(isinstance(b, Batch) for b in listed)
    assert [b.id for b in listed] == list(reversed(batches_of(emulator)))
    assert listed[-1].metadata == {"batchroute_key": "k1"} and listed[-1].id == old


@pytest.mark.parametrize("limit", ["0", "101", "ten"])
def test_a_limit_out_of_range_is_refused_as_openai_refuses_it(
    vendor: tuple[str, OpenAIEmulator, Clock], limit: str
) -> None:
    base_url, _, _ = vendor
    answer = httpx.get(base_url + "/batches", params={"limit": limit})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", "limit")


def test_a_new_process_told_the_key_was_tried_takes_the_batch_a_dead_one_made(
    vendor: tuple[str, OpenAIEmulator, Clock],
) -> None:
    base_url, emulator, clock = vendor
    chunk = [request("seq-0"), request("seq-1", tools=[WEB_SEARCH])]
    # Given: an invocation noted its submit, made both parts' batches and died before storing
    # them; the lane message came back 40 minutes later (past the visibility time-out), and
    # other lanes made batches on the account meanwhile
    noted = int(clock.now)
    made = adapter(base_url, httpx.HTTPTransport()).submit(chunk, key="k1")
    clock.now += 2400
    others = adapter(base_url, httpx.HTTPTransport())
    for n in range(3):
        others.submit([request(f"n{n}")], key=f"other-{n}")
    # When the next invocation's adapter is told the key was tried then (the lane record's note)
    transport = LosesAnswers(lose=0)
    fresh = adapter(base_url, transport)
    fresh.assume_tried("k1", since=noted)
    # Then its first try looks back to the note, and takes those batches: none made again
    assert fresh.submit(chunk, key="k1") == made
    assert ("POST", "/batches") not in transport.calls and ("GET", "/batches") in transport.calls
    assert len(batches_of(emulator)) == 5
    # (without the note's time, the 15 minutes before the newest batch would not reach them)
    blind = adapter(base_url, LosesAnswers(lose=0))
    blind.assume_tried("k1")
    assert blind.submit(chunk, key="k1") != made


def test_a_canceled_batch_finds_both_parts_a_dead_invocation_made_without_making_any(
    vendor: tuple[str, OpenAIEmulator, Clock],
) -> None:
    base_url, emulator, clock = vendor
    # Given: an invocation noted its submit, made both parts' batches and died before storing
    # them; other lanes made batches meanwhile
    noted = int(clock.now)
    made = adapter(base_url, httpx.HTTPTransport()).submit(
        [request("seq-0"), request("seq-1", tools=[WEB_SEARCH])], key="k1"
    )
    clock.now += 2400
    adapter(base_url, httpx.HTTPTransport()).submit([request("n0")], key="other")
    # When the batch is canceled and the lane looks the noted key up (FindsKeyedJobs)
    transport = LosesAnswers(lose=0)
    found = adapter(base_url, transport).job_made("k1", since=noted)
    # Then it names both parts, and makes nothing
    assert found is not None and sorted(found.split("+")) == sorted(made.split("+"))
    assert ("POST", "/batches") not in transport.calls
    # And a key that made nothing names nothing
    assert adapter(base_url, transport).job_made("never", since=noted) is None
    assert len(batches_of(emulator)) == 3
    # And one cancelled while it ran (cancelling, then cancelled) is still named: it keeps what
    # it finished
    running = adapter(base_url, transport).submit([request("seq-5")], key="k2")
    adapter(base_url, transport).cancel(running)
    assert emulator._jobs[running].cancelling_at is not None
    assert adapter(base_url, transport).job_made("k2", since=int(clock.now)) == running
    clock.now += 120
    assert adapter(base_url, transport).job_made("k2", since=int(clock.now) - 120) == running
