"""A batch lane's vendor job submits, remembered on the lane record until their job is.

A Lambda can die between the vendor making a job and the lane record storing it (`on_job`):
the next invocation finds no job for the chunk and submits its items again, and a vendor
without an idempotency token makes a second job, both billed. So each submit first notes
`<chunk>:<digest of its items' custom ids>:<when, Unix seconds>:<key>` on the lane record
(`submitting`), and storing the job clears it. An invocation that finds the note for its
chunk and submits the same items first (the same digest) claims the noted key, on condition
that the note is still there: Bedrock answers the job it made (`clientRequestToken`), and
OpenAI and Gemini look for it by that key among the jobs made since the note
(`LooksUpLostJobs`). A job once stored clears the note in the same write, so a job whose
answers were read (a worker that died after the vendor answered) is never taken again: a
claim that finds the note gone uses a key of its own, and no claim ever writes a note back.
A batch canceled meanwhile looks the noted job up by its key instead (`job_left`): it is
stopped, and what it finished kept, as a stored job's is.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from batchroute.clock import Clock
from batchroute.providers.base import (
    BatchApiProvider,
    FindsKeyedJobs,
    JobStatus,
    LooksUpLostJobs,
    ProviderRequest,
    ProviderResult,
)

# Writes a note on the lane record; with `expect`, only over that note (False: it was gone).
NoteWriter = Callable[[str, str | None], bool]


def custom_ids_digest(requests: Iterable[ProviderRequest]) -> str:
    digest = hashlib.sha256()
    for request in requests:
        digest.update(request.custom_id.encode() + b"\n")
    return digest.hexdigest()[:24]


class Note(NamedTuple):
    chunk: int
    digest: str
    at: int  # when the submit began, Unix seconds (our clock)
    key: str

    def mark(self) -> str:
        return f"{self.chunk}:{self.digest}:{self.at}:{self.key}"

    @classmethod
    def read(cls, mark: str | None) -> Note | None:
        parts = (mark or "").split(":", 3)
        if len(parts) != 4 or not parts[0].isdecimal() or not parts[2].isdecimal() or not parts[3]:
            return None
        return cls(int(parts[0]), parts[1], int(parts[2]), parts[3])


def job_left(provider: BatchApiProvider, mark: str | None, chunk: int) -> str | None:
    """The id of the job the submit noted by `mark` made for `chunk` (an invocation died
    before storing it), where the vendor can name it by its key (FindsKeyedJobs); None when
    there is no note for the chunk, no such job, or no way to find it (Anthropic).
    Raises the adapter's TransientProviderError or ProviderUnavailable: look again later."""
    note = Note.read(mark)
    if note is None or note.chunk != chunk or not isinstance(provider, FindsKeyedJobs):
        return None
    return provider.job_made(note.key, since=note.at)


@dataclass(eq=False)
class RememberedSubmits:
    """A BatchApiProvider that notes each submit's key before it begins (`note`), and whose
    first submit claims the key an invocation that died left noted (`left`) when it submits
    the same items of the same chunk and the note is still there."""

    provider: BatchApiProvider
    chunk: int
    note: NoteWriter
    clock: Clock
    left: str | None = None
    slug: str = field(init=False)
    _keys: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.slug = self.provider.slug

    @property
    def min_requests(self) -> int:
        return self.provider.min_requests

    def submit(self, requests: Iterable[ProviderRequest], *, key: str | None = None) -> str:
        listed = list(requests)
        asked = key or uuid.uuid4().hex
        chosen = self._keys.get(asked)
        if chosen is None:  # this submission's first try: its key, noted before it begins
            digest = custom_ids_digest(listed)
            chosen = self._claimed(digest) or self._noted(digest, asked)
            self._keys[asked] = chosen
        return self.provider.submit(listed, key=chosen)

    def _claimed(self, digest: str) -> str | None:
        """The key the dead invocation noted, for the same items of this chunk, if its note
        is still there (it is claimed as it is); once only."""
        raw, self.left = self.left, None
        left = Note.read(raw)
        if left is None or left.chunk != self.chunk or left.digest != digest:
            return None
        if not self.note(left.mark(), raw):  # stored (and cleared) since it was read
            return None
        if isinstance(self.provider, LooksUpLostJobs):
            self.provider.assume_tried(left.key, since=left.at)
        return left.key

    def _noted(self, digest: str, key: str) -> str:
        self.note(Note(self.chunk, digest, int(self.clock.now().timestamp()), key).mark(), None)
        return key

    def poll(self, job_id: str) -> JobStatus:
        return self.provider.poll(job_id)

    def results(self, job_id: str) -> Iterator[ProviderResult]:
        return self.provider.results(job_id)

    def cancel(self, job_id: str) -> None:
        self.provider.cancel(job_id)
