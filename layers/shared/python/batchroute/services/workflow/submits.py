"""A batch lane's vendor job submits, remembered on the lane record until their job is.

A Lambda can die between the vendor making a job and the lane record storing it (`on_job`):
the next invocation finds no job for the chunk and submits its items again, and a vendor
without an idempotency token makes a second job, both billed. So each submit first notes
`<chunk>:<digest of its items' custom ids>:<key>` on the lane record (`submitting`), and
storing the job clears it. An invocation that finds the note for its chunk and submits the
same items first (the same digest) uses the noted key: Bedrock answers the job it made
(`clientRequestToken`), and OpenAI and Gemini look for it by that key (`LooksUpLostJobs`).
A job once stored never clears back to a note, so a job whose answers were read (a worker
that died after the vendor answered) is never taken again: its items get a new key and job.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from batchroute.providers.base import (
    BatchApiProvider,
    JobStatus,
    LooksUpLostJobs,
    ProviderRequest,
    ProviderResult,
)


def items_digest(requests: Iterable[ProviderRequest]) -> str:
    digest = hashlib.sha256()
    for request in requests:
        digest.update(request.custom_id.encode() + b"\n")
    return digest.hexdigest()[:24]


@dataclass(eq=False)
class RememberedSubmits:
    """A BatchApiProvider that notes each submit's key before it begins (`note`), and whose
    first submit takes the key an invocation that died left noted (`left`) when it submits
    the same items of the same chunk."""

    provider: BatchApiProvider
    chunk: int
    note: Callable[[str], None]
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
            chosen = self._resumed(items_digest(listed)) or asked
            self._keys[asked] = chosen
            self.note(f"{self.chunk}:{items_digest(listed)}:{chosen}")
        return self.provider.submit(listed, key=chosen)

    def _resumed(self, digest: str) -> str | None:
        """The key the died invocation noted, for the same items of this chunk; once only."""
        left, self.left = self.left, None
        chunk, noted_digest, key = (left or "::").split(":", 2)
        if not key or chunk != str(self.chunk) or noted_digest != digest:
            return None
        if isinstance(self.provider, LooksUpLostJobs):
            self.provider.assume_tried(key)
        return key

    def poll(self, job_id: str) -> JobStatus:
        return self.provider.poll(job_id)

    def results(self, job_id: str) -> Iterator[ProviderResult]:
        return self.provider.results(job_id)

    def cancel(self, job_id: str) -> None:
        self.provider.cancel(job_id)
