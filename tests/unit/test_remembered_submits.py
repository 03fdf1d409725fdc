"""A batch lane's job submits are noted on the lane record before they begin, and an invocation
that died in mid-submit leaves its key for the next to take (services/workflow/submits.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from batchroute.providers.base import ProviderRequest, TransientProviderError
from batchroute.services.workflow.submits import RememberedSubmits, items_digest
from tests.unit.test_lane_runner_batch import FakeVendor


def requests(*seqs: int) -> list[ProviderRequest]:
    return [ProviderRequest(f"seq-{n}", "item", "responses", "m", "m", {"input": "x"}, 8) for n in seqs]  # type: ignore[arg-type]


class LooksUp(FakeVendor):
    """A vendor whose adapter can look for a job by its key (LooksUpLostJobs)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.assumed: list[str] = []

    def assume_tried(self, key: str) -> None:
        self.assumed.append(key)


def test_each_submit_is_noted_before_it_begins_and_its_retries_keep_its_key() -> None:
    notes: list[str] = []
    vendor = FakeVendor(submit_failures=1)
    submits = RememberedSubmits(vendor, chunk=3, note=notes.append)
    part = requests(0, 1)
    with pytest.raises(TransientProviderError):
        submits.submit(part, key="k-runner")
    submits.submit(part, key="k-runner")  # the runner's retry of the same submission
    # One note, made before the first try; both tries under that key
    assert len(notes) == 1 and notes[0].startswith(f"3:{items_digest(part)}:")
    assert vendor.keys == ["k-runner", "k-runner"] == [notes[0].split(":", 2)[2]] * 2
    # Another submission (the next part): a note of its own
    submits.submit(requests(2), key="k-next")
    assert len(notes) == 2 and notes[1] == f"3:{items_digest(requests(2))}:k-next"


def test_an_invocation_that_died_mid_submit_leaves_its_key_to_the_next() -> None:
    part = requests(0, 1)
    left = f"3:{items_digest(part)}:k-dead"
    # The same items of the same chunk: the dead invocation's key, looked for by an adapter
    # that can look
    vendor = LooksUp()
    notes: list[str] = []
    submits = RememberedSubmits(vendor, chunk=3, note=notes.append, left=left)
    submits.submit(part, key="k-new")
    assert vendor.keys == ["k-dead"] and vendor.assumed == ["k-dead"] and notes == [left]
    # ... once only: the next submission has its own key
    submits.submit(requests(2), key="k-other")
    assert vendor.keys[-1] == "k-other"


@pytest.mark.parametrize(
    ("left", "why"),
    [
        ("4:{digest}:k-dead", "another chunk"),
        ("3:0000:k-dead", "other items"),
        (None, "nothing left"),
    ],
)
def test_a_note_of_something_else_is_not_taken(left: str | None, why: str) -> None:
    part = requests(0, 1)
    vendor = LooksUp()
    noted = left.format(digest=items_digest(part)) if left else None
    submits = RememberedSubmits(vendor, chunk=3, note=lambda _mark: None, left=noted)
    submits.submit(part, key="k-new")
    assert vendor.keys == ["k-new"] and vendor.assumed == [], why


def test_everything_else_is_the_vendor_s() -> None:
    vendor = FakeVendor()
    submits = RememberedSubmits(vendor, chunk=0, note=lambda _mark: None)
    job = submits.submit(requests(0), key="k")
    assert (submits.slug, submits.min_requests) == (vendor.slug, vendor.min_requests)
    assert submits.poll(job) == vendor.poll(job)
    results: Iterable[Any] = submits.results(job)
    assert [r.custom_id for r in results] == ["seq-0"]
