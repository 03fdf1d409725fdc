"""A batch lane's job submits are noted on the lane record before they begin, and an invocation
that died in mid-submit leaves its key for the next to claim (services/workflow/submits.py)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import pytest

from batchroute.clock import FixedClock
from batchroute.providers.base import ProviderRequest, TransientProviderError
from batchroute.services.workflow.submits import Note, RememberedSubmits, custom_ids_digest, job_left
from tests.unit.test_lane_runner_batch import FakeVendor

CLOCK = FixedClock(datetime(2026, 12, 2, 8, 0, tzinfo=UTC))
NOW = int(CLOCK.now().timestamp())


def requests(*seqs: int) -> list[ProviderRequest]:
    return [ProviderRequest(f"seq-{n}", "item", "responses", "m", "m", {"input": "x"}, 8) for n in seqs]  # type: ignore[arg-type]


class LooksUp(FakeVendor):
    """A vendor whose adapter can look for a job by its key (LooksUpLostJobs)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.assumed: list[tuple[str, int | None]] = []

    def assume_tried(self, key: str, *, since: int | None = None) -> None:
        self.assumed.append((key, since))


class Watched(FakeVendor):
    """A vendor that sees what the lane record's note says as each submit reaches it."""

    def __init__(self, note: LaneNote, **kw: Any) -> None:
        super().__init__(**kw)
        self.note = note
        self.seen: list[str | None] = []

    def submit(self, requests: Iterable[ProviderRequest], *, key: str | None = None) -> str:
        self.seen.append(self.note.value)
        return super().submit(requests, key=key)


class LaneNote:
    """The lane record's `submitting`, written as BatchProgress.note_submitting writes it."""

    def __init__(self, value: str | None = None) -> None:
        self.value = value
        self.written: list[str] = []

    def write(self, mark: str, expect: str | None = None) -> bool:
        if expect is not None and self.value != expect:
            return False
        self.value = mark
        self.written.append(mark)
        return True

    def store_job(self) -> None:
        """`set_job`: the job stored, the note cleared in the same write."""
        self.value = None


def submits_of(vendor: FakeVendor, note: LaneNote, *, chunk: int = 3) -> RememberedSubmits:
    return RememberedSubmits(vendor, chunk=chunk, note=note.write, clock=CLOCK, left=note.value)


def test_each_submit_is_noted_before_it_begins_and_its_retries_keep_its_key() -> None:
    note = LaneNote()
    vendor = Watched(note, submit_failures=1)
    submits = submits_of(vendor, note)
    part = requests(0, 1)
    with pytest.raises(TransientProviderError):
        submits.submit(part, key="k-runner")
    submits.submit(part, key="k-runner")  # the runner's retry of the same submission
    # One note, made before the first try (the vendor finds it there), with its time; both
    # tries under that key
    assert note.written == [f"3:{custom_ids_digest(part)}:{NOW}:k-runner"]
    assert vendor.seen == note.written * 2
    assert vendor.keys == ["k-runner", "k-runner"]
    # Another submission (the next part): a note of its own
    submits.submit(requests(2), key="k-next")
    assert note.written[1:] == [f"3:{custom_ids_digest(requests(2))}:{NOW}:k-next"]


def test_an_invocation_that_died_mid_submit_leaves_its_key_to_the_next() -> None:
    part = requests(0, 1)
    dead = Note(3, custom_ids_digest(part), NOW - 2400, "k-dead").mark()
    note = LaneNote(dead)
    # The same items of the same chunk: the dead invocation's key claimed (its note as it
    # is), and looked for among the jobs made since that invocation noted it
    vendor = LooksUp()
    submits = submits_of(vendor, note)
    submits.submit(part, key="k-new")
    assert vendor.keys == ["k-dead"] and vendor.assumed == [("k-dead", NOW - 2400)]
    assert note.written == [dead] and note.value == dead
    # ... once only: the next submission has its own key
    submits.submit(requests(2), key="k-other")
    assert vendor.keys[-1] == "k-other"


def test_a_note_whose_job_was_stored_since_it_was_read_is_not_claimed() -> None:
    # Given a second worker that read the first's note while it was submitting
    part = requests(0, 1)
    first = Note(3, custom_ids_digest(part), NOW, "k-first").mark()
    note = LaneNote(first)
    vendor = LooksUp()
    second = submits_of(vendor, note)
    # When the first stores its job (maybe reads its answers: spent) before the second submits
    note.store_job()
    second.submit(part, key="k-second")
    # Then the second neither takes that job nor writes the old note back: a key of its own
    assert vendor.keys == ["k-second"] and vendor.assumed == []
    assert note.value == f"3:{custom_ids_digest(part)}:{NOW}:k-second" and first not in note.written


@pytest.mark.parametrize(
    ("left", "why"),
    [
        ("4:{digest}:1:k-dead", "another chunk"),
        ("3:0000:1:k-dead", "other items"),
        ("3:{digest}:k-dead", "not a note"),
        (None, "nothing left"),
    ],
)
def test_a_note_of_something_else_is_not_taken(left: str | None, why: str) -> None:
    part = requests(0, 1)
    vendor = LooksUp()
    note = LaneNote(left.format(digest=custom_ids_digest(part)) if left else None)
    submits_of(vendor, note).submit(part, key="k-new")
    assert vendor.keys == ["k-new"] and vendor.assumed == [], why


def test_everything_else_is_the_vendor_s() -> None:
    vendor = FakeVendor()
    submits = submits_of(vendor, LaneNote(), chunk=0)
    job = submits.submit(requests(0), key="k")
    assert (submits.slug, submits.min_requests) == (vendor.slug, vendor.min_requests)
    assert submits.poll(job) == vendor.poll(job)
    results: Iterable[Any] = submits.results(job)
    assert [r.custom_id for r in results] == ["seq-0"]


class Finds(FakeVendor):
    """A vendor whose adapter names the job a key made (FindsKeyedJobs)."""

    def __init__(self, made: dict[str, str], **kw: Any) -> None:
        super().__init__(**kw)
        self.made = made
        self.asked: list[tuple[str, int]] = []

    def job_made(self, key: str, *, since: int) -> str | None:
        self.asked.append((key, since))
        return self.made.get(key)


def test_a_canceled_lane_finds_the_job_its_chunk_note_names_and_only_that() -> None:
    vendor = Finds({"k1": "job-1"})
    mark = Note(2, "digest", NOW - 60, "k1").mark()
    # The note of this chunk names its job, looked up by the key from when the submit began
    assert job_left(vendor, mark, 2) == "job-1" and vendor.asked == [("k1", NOW - 60)]
    # Another chunk's note, no note, a note whose key made nothing: no job
    assert job_left(vendor, mark, 3) is None and job_left(vendor, None, 2) is None
    assert job_left(vendor, Note(2, "digest", NOW, "k2").mark(), 2) is None
    # A vendor that cannot name a job by its key (Anthropic): none, and nothing asked
    assert job_left(FakeVendor(), mark, 2) is None
